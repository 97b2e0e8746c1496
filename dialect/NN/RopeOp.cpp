//===- RopeOp.cpp - nn.rope: rotary position embedding ------------------===//

#include "dialect/NN/NNOps.h"
#include "dialect/NN/NNOpsUtils.h"

#include <cmath>

using namespace mlir;
using namespace tessel::nn;
using namespace tessel;

LogicalResult RopeOp::verify() {
  RankedTensorType type = getType();
  if (type.getRank() < 3)
    return emitOpError() << "needs [..., S, H, D] (rank >= 3), got rank "
                         << type.getRank();
  int64_t headDim = type.getShape().back();
  if (headDim % 2 != 0)
    return emitOpError() << "rotates pairs: the head dimension " << headDim
                         << " must be even";
  double theta = getTheta().convertToDouble();
  if (!std::isfinite(theta) || theta <= 0.0)
    return emitOpError() << "theta " << theta << " must be finite and positive";
  return success();
}

int64_t RopeOp::getFlops() {
  return nn::detail::satMul(3, nn::detail::numElements(getType()));
}

SmallVector<utils::IteratorType> RopeOp::getLoopIteratorTypes() {
  return nn::detail::parallelLoops(getType().getRank());
}

SmallVector<AffineMap> RopeOp::getIndexingMaps() {
  return nn::detail::identityMaps(*this);
}

SmallVector<ReductionKind> RopeOp::getReductionLoopIteratorKinds() {
  return {};
}

/// A rank's block of positions would need its offset, and a block of the
/// head dimension would split the pairs.
SmallVector<int64_t> RopeOp::getUnsplittableLoops() {
  return {getPositionDim(), getType().getRank() - 1};
}
