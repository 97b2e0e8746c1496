//===- RopeOp.cpp - nn.rope: rotary position embedding ------------------===//

#include "dialect/NN/NNOps.h"
#include "dialect/NN/NNOpsUtils.h"

#include <algorithm>
#include <cmath>
#include <tuple>

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
  if (std::optional<ArrayRef<double>> thetas = getLayerThetas()) {
    if (thetas->empty())
      return emitOpError() << "layer_thetas holds no layer";
    for (auto [layer, t] : llvm::enumerate(*thetas))
      if (!std::isfinite(t) || t <= 0.0)
        return emitOpError() << "layer_thetas[" << layer << "] " << t
                             << " must be finite and positive";
  }
  if (std::optional<ArrayRef<double>> scaling = getScaling()) {
    if (scaling->size() != 4)
      return emitOpError() << "scaling holds factor, low, high and original "
                              "(4 values), got "
                           << scaling->size();
    if (failed(verifyScaling(*scaling, "scaling")))
      return failure();
  }
  if (std::optional<ArrayRef<double>> scalings = getLayerScalings()) {
    if (getScaling())
      return emitOpError() << "has a scaling and layer_scalings: give one";
    if (scalings->empty() || scalings->size() % 4 != 0)
      return emitOpError() << "layer_scalings holds four values a layer "
                              "(factor, low, high, original), got "
                           << scalings->size();
    for (size_t layer = 0; layer < scalings->size() / 4; ++layer) {
      ArrayRef<double> one = scalings->slice(layer * 4, 4);
      bool none = llvm::all_of(one, [](double v) { return v == 0.0; });
      if (!none && failed(verifyScaling(one, "layer_scalings[" +
                                                 std::to_string(layer) + "]")))
        return failure();
    }
  }
  if (std::optional<ArrayRef<double>> yarn = getYarn()) {
    if (getScaling() || getLayerScalings())
      return emitOpError() << "has yarn and a scaling: give one";
    if (yarn->size() != 5)
      return emitOpError() << "yarn holds factor, beta_fast, beta_slow, "
                              "original and truncate (5 values), got "
                           << yarn->size();
    auto [factor, fast, slow, original, truncate] =
        std::tuple((*yarn)[0], (*yarn)[1], (*yarn)[2], (*yarn)[3], (*yarn)[4]);
    if (!(factor >= 1.0) || !(fast > 0.0) || !(slow > 0.0) ||
        !(original > 0.0) || !std::isfinite(factor) || !std::isfinite(fast) ||
        !std::isfinite(slow) || !std::isfinite(original) ||
        (truncate != 0.0 && truncate != 1.0))
      return emitOpError() << "yarn needs factor >= 1, positive betas and "
                              "original (all finite) and truncate 0 or 1, got ["
                           << factor << ", " << fast << ", " << slow << ", "
                           << original << ", " << truncate << "]";
    // The ramp's correction dimensions divide by ln theta.
    auto aboveOne = [](double t) { return t > 1.0; };
    std::optional<ArrayRef<double>> thetas = getLayerThetas();
    if (!aboveOne(theta) || (thetas && !llvm::all_of(*thetas, aboveOne)))
      return emitOpError() << "yarn needs every theta > 1";
  }
  bool llamaOrYarn = getScaling() || getLayerScalings() || getYarn();
  if (std::optional<int64_t> rotary = getRotaryDim()) {
    if (*rotary <= 0 || *rotary % 2 != 0 || *rotary > headDim)
      return emitOpError() << "rotary_dim " << *rotary
                           << " must be even and in (0, " << headDim << "]";
    if (llamaOrYarn)
      return emitOpError() << "turns part of each head (rotary_dim): not "
                              "with a Llama 3.1 or YaRN scaling";
  }
  if (std::optional<ArrayRef<double>> factors = getLongrope()) {
    if (llamaOrYarn)
      return emitOpError() << "has longrope and another scaling: give one";
    int64_t pairs = getRotatedWidth() / 2;
    if (int64_t(factors->size()) != pairs)
      return emitOpError() << "longrope holds a factor a pair (" << pairs
                           << "), got " << factors->size();
    if (pairs > kMaxLongropePairs)
      return emitOpError() << "longrope turns at most " << kMaxLongropePairs
                           << " pairs, got " << pairs;
    for (auto [pair, f] : llvm::enumerate(*factors))
      if (!std::isfinite(f) || f <= 0.0)
        return emitOpError() << "longrope[" << pair << "] " << f
                             << " must be finite and positive";
  }
  if (std::optional<APFloat> factor = getAttentionFactor()) {
    double a = factor->convertToDouble();
    if (!std::isfinite(a) || a <= 0.0)
      return emitOpError() << "attention_factor " << a
                           << " must be finite and positive";
    if (llamaOrYarn)
      return emitOpError() << "scales cos and sin (attention_factor): not "
                              "with a Llama 3.1 or YaRN scaling";
  }
  return success();
}

LogicalResult RopeOp::verifyScaling(ArrayRef<double> scaling, StringRef what) {
  auto [factor, low, high, original] =
      std::tuple(scaling[0], scaling[1], scaling[2], scaling[3]);
  if (!(factor >= 1.0) || !(low > 0.0) || !(high > low) || !(original > 0.0) ||
      !std::isfinite(factor) || !std::isfinite(high) ||
      !std::isfinite(original))
    return emitOpError() << what
                         << " needs factor >= 1, 0 < low < high and original "
                            "> 0 (all finite), got ["
                         << factor << ", " << low << ", " << high << ", "
                         << original << "]";
  return success();
}

int64_t RopeOp::getFlops() {
  // Three a turned element: the heads' share R / D of them.
  int64_t heads = nn::detail::numElements(getType()) /
                  std::max<int64_t>(getType().getShape().back(), 1);
  return nn::detail::satMul(3, nn::detail::satMul(heads, getRotatedWidth()));
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

/// A block of the head dimension would split the pairs.
SmallVector<int64_t> RopeOp::getUnsplittableLoops() {
  return {getType().getRank() - 1};
}

/// A rank's block of the positions (context parallelism) is told which
/// block, so that it turns them by their positions in the sequence.
LogicalResult RopeOp::adjustLocalPartition(Operation *local, LocalSplit &split,
                                           OpBuilder &) {
  return nn::detail::markRankBlock(*this, local, split, getPositionDim(),
                                   "position sequence");
}
