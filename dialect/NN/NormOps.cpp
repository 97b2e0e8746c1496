//===- NormOps.cpp - softmax, layer_norm, rms_norm, batch_norm ------------===//

#include "dialect/NN/NNOps.h"
#include "dialect/NN/NNOpsUtils.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace tessel::nn;
using namespace tessel;

/// Checks that an affine parameter (`gamma`, `beta`) is a vector of `size`
/// elements of the input's element type.
static LogicalResult verifyAffineParam(std::optional<Location> loc,
                                       StringRef name, Type paramType,
                                       int64_t size, Type elementType,
                                       StringRef dimName) {
  auto param = cast<RankedTensorType>(paramType);
  if (param.getRank() != 1 || param.getDimSize(0) != size ||
      param.getElementType() != elementType)
    return nn::detail::inferError(loc, name, " must be ",
                              RankedTensorType::get({size}, elementType),
                              " (the size of the ", dimName,
                              " dimension), got ", param);
  return success();
}

static LogicalResult verifyEpsilon(Operation *op, APFloat epsilon) {
  if (!(epsilon.convertToDouble() > 0.0))
    return op->emitOpError() << "epsilon must be positive, got "
                             << epsilon.convertToDouble();
  return success();
}

/// Maps of a normalisation over `x` with vector parameters indexed by loop
/// `paramLoop`: x identity, one map per parameter, result identity.
static SmallVector<AffineMap> normMaps(MLIRContext *ctx, int64_t rank,
                                       int64_t paramLoop, int64_t numParams) {
  SmallVector<AffineMap> maps{AffineMap::getMultiDimIdentityMap(rank, ctx)};
  for (int64_t i = 0; i < numParams; ++i)
    maps.push_back(nn::detail::projection(rank, {paramLoop}, ctx));
  maps.push_back(AffineMap::getMultiDimIdentityMap(rank, ctx));
  return maps;
}

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

int64_t SoftmaxOp::getFlops() { return 5 * nn::detail::numElements(getType()); }

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
    if (failed(verifyAffineParam(loc, name, param.getType(),
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

LogicalResult LayerNormOp::verify() { return verifyEpsilon(*this, getEpsilon()); }

int64_t LayerNormOp::getFlops() { return 8 * nn::detail::numElements(getType()); }

SmallVector<utils::IteratorType> LayerNormOp::getLoopIteratorTypes() {
  return nn::detail::parallelLoops(getType().getRank());
}

SmallVector<AffineMap> LayerNormOp::getIndexingMaps() {
  int64_t rank = getType().getRank();
  return normMaps(getContext(), rank, rank - 1, 2);
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

LogicalResult RmsNormOp::verify() { return verifyEpsilon(*this, getEpsilon()); }

int64_t RmsNormOp::getFlops() { return 4 * nn::detail::numElements(getType()); }

SmallVector<utils::IteratorType> RmsNormOp::getLoopIteratorTypes() {
  return nn::detail::parallelLoops(getType().getRank());
}

SmallVector<AffineMap> RmsNormOp::getIndexingMaps() {
  int64_t rank = getType().getRank();
  return normMaps(getContext(), rank, rank - 1, 1);
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
  if (failed(verifyAffineParam(loc, "gamma", adaptor.getGamma().getType(),
                               features, input.getElementType(), "feature")) ||
      failed(verifyAffineParam(loc, "beta", adaptor.getBeta().getType(),
                               features, input.getElementType(), "feature")))
    return failure();
  results.push_back(input);
  return success();
}

LogicalResult BatchNormOp::verify() { return verifyEpsilon(*this, getEpsilon()); }

int64_t BatchNormOp::getFlops() { return 8 * nn::detail::numElements(getType()); }

SmallVector<utils::IteratorType> BatchNormOp::getLoopIteratorTypes() {
  return nn::detail::parallelLoops(getType().getRank());
}

SmallVector<AffineMap> BatchNormOp::getIndexingMaps() {
  return normMaps(getContext(), getType().getRank(), getFeatureDim(), 2);
}

SmallVector<ReductionKind> BatchNormOp::getReductionLoopIteratorKinds() {
  return {};
}
