//===- NormOps.cpp - softmax, layer_norm, rms_norm, batch_norm ------------===//

#include "dialect/NN/NNOps.h"
#include "dialect/NN/NNOpsUtils.h"
#include "dialect/NN/NormRules.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace tessel::nn;
using namespace tessel;

//===----------------------------------------------------------------------===//
// SoftmaxOp
//===----------------------------------------------------------------------===//

int64_t SoftmaxOp::getNormalizedDim() {
  auto dim = static_cast<int64_t>(getDim());
  return dim < 0 ? dim + getType().getRank() : dim;
}

LogicalResult SoftmaxOp::verify() {
  int64_t rank = getType().getRank();
  if (rank == 0)
    return emitOpError() << "needs a tensor of rank >= 1";
  // getDim() is unsigned (I64Attr): compare it as the signed value it holds.
  int64_t dim = getDim();
  if (dim < -rank || dim >= rank)
    return emitOpError() << "dim " << dim << " is out of range for rank "
                         << rank;
  return success();
}

int64_t SoftmaxOp::getFlops() {
  return nn::detail::satMul(5, nn::detail::numElements(getType()));
}

SmallVector<utils::IteratorType> SoftmaxOp::getLoopIteratorTypes() {
  return nn::detail::parallelLoops(getType().getRank());
}

SmallVector<AffineMap> SoftmaxOp::getIndexingMaps() {
  return nn::detail::identityMaps(*this);
}

SmallVector<ReductionKind> SoftmaxOp::getReductionLoopIteratorKinds() {
  return {};
}

SmallVector<int64_t> SoftmaxOp::getUnsplittableLoops() {
  return {getNormalizedDim()};
}

//===----------------------------------------------------------------------===//
// LayerNormOp and RmsNormOp: normalise over the last dimension
//===----------------------------------------------------------------------===//

static LogicalResult inferLastDimNorm(std::optional<Location> loc,
                                      Type inputType, ValueRange params,
                                      ArrayRef<StringRef> paramNames,
                                      SmallVectorImpl<Type> &results) {
  auto input = cast<RankedTensorType>(inputType);
  if (input.getRank() == 0)
    return nn::detail::inferError(loc, "input must have rank >= 1");
  for (auto [param, name] : llvm::zip(params, paramNames))
    if (failed(nn::detail::verifyNormParam(loc, name, param.getType(),
                                 input.getShape().back(),
                                 input.getElementType(), "last")))
      return failure();
  results.push_back(input);
  return success();
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  return inferLastDimNorm(loc, adaptor.getInput().getType(),
                          {adaptor.getGamma(), adaptor.getBeta()},
                          {"gamma", "beta"}, results);
}

LogicalResult LayerNormOp::verify() { return nn::detail::verifyNormEpsilon(*this, getEpsilon()); }

int64_t LayerNormOp::getFlops() {
  return nn::detail::satMul(8, nn::detail::numElements(getType()));
}

nn::detail::NormShardingRule LayerNormOp::getNormShardingRule() {
  int64_t rank = getType().getRank();
  return {getContext(), rank, rank - 1, 2};
}

SmallVector<utils::IteratorType> LayerNormOp::getLoopIteratorTypes() {
  return getNormShardingRule().forwardLoops();
}

SmallVector<AffineMap> LayerNormOp::getIndexingMaps() {
  return getNormShardingRule().forwardMaps();
}

SmallVector<ReductionKind> LayerNormOp::getReductionLoopIteratorKinds() {
  return {};
}

SmallVector<int64_t> LayerNormOp::getUnsplittableLoops() {
  return {getType().getRank() - 1};
}

LogicalResult RmsNormOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &results) {
  return inferLastDimNorm(loc, adaptor.getInput().getType(),
                          {adaptor.getGamma()}, {"gamma"}, results);
}

LogicalResult RmsNormOp::verify() { return nn::detail::verifyNormEpsilon(*this, getEpsilon()); }

int64_t RmsNormOp::getFlops() {
  return nn::detail::satMul(4, nn::detail::numElements(getType()));
}

nn::detail::NormShardingRule RmsNormOp::getNormShardingRule() {
  int64_t rank = getType().getRank();
  return {getContext(), rank, rank - 1, 1};
}

SmallVector<utils::IteratorType> RmsNormOp::getLoopIteratorTypes() {
  return getNormShardingRule().forwardLoops();
}

SmallVector<AffineMap> RmsNormOp::getIndexingMaps() {
  return getNormShardingRule().forwardMaps();
}

SmallVector<ReductionKind> RmsNormOp::getReductionLoopIteratorKinds() {
  return {};
}

SmallVector<int64_t> RmsNormOp::getUnsplittableLoops() {
  return {getType().getRank() - 1};
}

//===----------------------------------------------------------------------===//
// BatchNormOp: statistics over every dimension but the feature dimension
//===----------------------------------------------------------------------===//

LogicalResult BatchNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  int64_t featureDim = adaptor.getFeatureDim();
  if (input.getRank() < 2)
    return nn::detail::inferError(loc, "input must be [batch, features, ...], got ",
                              input);
  if (featureDim < 0 || featureDim >= input.getRank())
    return nn::detail::inferError(loc, "feature_dim ", featureDim,
                              " is out of range for rank ", input.getRank());
  int64_t features = input.getDimSize(featureDim);
  if (failed(nn::detail::verifyNormParam(loc, "gamma", adaptor.getGamma().getType(),
                               features, input.getElementType(), "feature")) ||
      failed(nn::detail::verifyNormParam(loc, "beta", adaptor.getBeta().getType(),
                               features, input.getElementType(), "feature")))
    return failure();
  results.push_back(input);
  return success();
}

LogicalResult BatchNormOp::verify() { return nn::detail::verifyNormEpsilon(*this, getEpsilon()); }

int64_t BatchNormOp::getFlops() {
  return nn::detail::satMul(8, nn::detail::numElements(getType()));
}

nn::detail::NormShardingRule BatchNormOp::getNormShardingRule() {
  return {getContext(), getType().getRank(), int64_t(getFeatureDim()), 2};
}

SmallVector<utils::IteratorType> BatchNormOp::getLoopIteratorTypes() {
  return getNormShardingRule().forwardLoops();
}

SmallVector<AffineMap> BatchNormOp::getIndexingMaps() {
  return getNormShardingRule().forwardMaps();
}

SmallVector<ReductionKind> BatchNormOp::getReductionLoopIteratorKinds() {
  return {};
}
