//===- ResidualNormOps.cpp - add_norm, norm_grad_add ----------------------===//
//
// The fused forms tessel-fuse-epilogues makes of a residual add and the
// norm after it, and of a norm's gradient and the add into the residual
// stream's gradient. They appear only in one rank's partitioned program,
// so they carry no sharding rule.
//
//===----------------------------------------------------------------------===//

#include "dialect/NN/NNOps.h"
#include "dialect/NN/NNOpsUtils.h"
#include "dialect/NN/NormRules.h"

using namespace mlir;
using namespace tessel;
using namespace tessel::nn;

/// `input` normalised over its last dimension with `gamma` (and `beta`),
/// and the tensors of its type (`same`, named) beside it.
static LogicalResult
verifyNormOperands(std::optional<Location> loc, Type inputType,
                   ArrayRef<std::pair<StringRef, Type>> same, Type gamma,
                   Type beta) {
  auto input = cast<RankedTensorType>(inputType);
  if (input.getRank() == 0)
    return nn::detail::inferError(loc, "operands must have rank >= 1");
  for (auto [name, type] : same)
    if (type != input)
      return nn::detail::inferError(loc, name, " must have type ", input,
                                    ", got ", type);
  int64_t size = input.getShape().back();
  Type element = input.getElementType();
  if (failed(nn::detail::verifyNormParam(loc, "gamma", gamma, size, element,
                                         "last")))
    return failure();
  if (beta && failed(nn::detail::verifyNormParam(loc, "beta", beta, size,
                                                 element, "last")))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// AddNormOp
//===----------------------------------------------------------------------===//

LogicalResult AddNormOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &results) {
  Type input = adaptor.getLhs().getType();
  Value beta = adaptor.getBeta();
  if (failed(verifyNormOperands(loc, input,
                                {{"rhs", adaptor.getRhs().getType()}},
                                adaptor.getGamma().getType(),
                                beta ? beta.getType() : Type())))
    return failure();
  results.append(2, input);
  return success();
}

LogicalResult AddNormOp::verify() {
  return nn::detail::verifyNormEpsilon(*this, getEpsilon());
}

// The add (1) and nn.layer_norm's 8 or nn.rms_norm's 4.
int64_t AddNormOp::getFlops() {
  return nn::detail::satMul(isRms() ? 5 : 9,
                            nn::detail::numElements(getSum().getType()));
}

//===----------------------------------------------------------------------===//
// NormGradAddOp
//===----------------------------------------------------------------------===//

LogicalResult NormGradAddOp::inferReturnTypes(MLIRContext *,
                                              std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &results) {
  Type input = adaptor.getInput().getType();
  Type gamma = adaptor.getGamma().getType();
  if (failed(verifyNormOperands(
          loc, input,
          {{"dy", adaptor.getDy().getType()},
           {"residual", adaptor.getResidual().getType()}},
          gamma, Type())))
    return failure();
  results.push_back(input);
  results.append(adaptor.getRms() ? 1 : 2, gamma);
  return success();
}

// The parameter gradients as the norm gradient's (f32 of a 16-bit gamma).
bool NormGradAddOp::isCompatibleReturnTypes(TypeRange inferred,
                                            TypeRange actual) {
  return nn::detail::areInferredOrAllF32(inferred, actual, /*kept=*/1);
}

LogicalResult NormGradAddOp::verify() {
  return nn::detail::verifyNormEpsilon(*this, getEpsilon());
}

// nn.layer_norm_grad's 15 or nn.rms_norm_grad's 11, and the add (1).
int64_t NormGradAddOp::getFlops() {
  return nn::detail::satMul(getRms() ? 12 : 16,
                            nn::detail::numElements(getInput().getType()));
}
