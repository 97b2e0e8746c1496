//===- MaskIgnoredLabels.cpp - tessel-mask-ignored-labels -----------------===//
//
// Writes a cross-entropy that ignores positions (`ignore_index`) in ops
// every later pass knows, so that a mean over the positions that count is
// the same on every mesh as on one device:
//
//   %safe, %w = nn.mask_labels %labels ignore_index -100
//   %n = nn.reduce_sum %w dims = [...]       // `mean` only
//   %each = nn.cross_entropy %logits, %safe {reduction = none}
//   %lw = nn.mul %each, %w                   // `none`: the result
//   %sum = nn.reduce_sum %lw dims = [...]    // `sum`: the result
//   %mean = nn.div %sum, max(%n, 1)          // `mean`
//
// Both sums are `sum` reductions over the positions: split over dp (or
// over the sequence), each is completed by its all-reduce, so the mean
// divides the whole batch's loss by the whole batch's count, as one device
// does, and not the mean of each rank's mean (which weighs a rank with
// few labelled positions as much as one with many). Its gradient is then
// the cross-entropy's per position, scaled by the weight over the count:
// zero at an ignored position. The count depends on no parameter, so
// autodiff differentiates only the numerator. max(n, 1), written
// relu(n - 1) + 1 (exact for a count), makes a batch without a labelled
// position a loss of 0 and no gradient, where PyTorch's 0/0 is NaN.
//
// Runs on the forward model before autodiff (tessel-compile runs it first
// on every model or stage); a later pass meeting `ignore_index` refuses it.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialect/NN/NNOps.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace tessel {
#define GEN_PASS_DEF_MASKIGNOREDLABELSPASS
#include "passes/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;

namespace {

/// `loss` in the ops of the header.
void maskIgnoredLabels(nn::CrossEntropyOp loss) {
  ImplicitLocOpBuilder b(loss.getLoc(), loss);
  RankedTensorType labels = loss.getLabels().getType();
  Type elementType = getElementTypeOrSelf(loss.getType());
  auto perPosition = RankedTensorType::get(labels.getShape(), elementType);
  auto scalar = RankedTensorType::get({}, elementType);
  auto mask =
      nn::MaskLabelsOp::create(b, labels, perPosition, loss.getLabels(),
                               static_cast<int64_t>(*loss.getIgnoreIndex()));
  auto positions = b.getDenseI64ArrayAttr(
      llvm::to_vector(llvm::seq<int64_t>(0, labels.getRank())));
  // The count first: the backward's seed (the weights over it) then exists
  // before the loss, which tessel-fuse-epilogues needs to compute the loss
  // and its gradient in one pass.
  Value count;
  if (loss.getReduction() == nn::LossReduction::mean) {
    Value sum =
        nn::ReduceSumOp::create(b, scalar, mask.getWeights(), positions);
    Value one = nn::ConstantOp::create(
        b, DenseElementsAttr::get(scalar, b.getFloatAttr(elementType, 1.0)));
    count = nn::AddOp::create(
        b, nn::ReluOp::create(b, nn::SubOp::create(b, sum, one)), one);
  }
  Value each = nn::CrossEntropyOp::create(
      b, perPosition, loss.getLogits(), mask.getSafe(),
      nn::LossReductionAttr::get(b.getContext(), nn::LossReduction::none),
      /*ignore_index=*/nullptr);
  Value result = nn::MulOp::create(b, each, mask.getWeights());
  if (loss.getReduction() != nn::LossReduction::none)
    result = nn::ReduceSumOp::create(b, scalar, result, positions);
  if (count)
    result = nn::DivOp::create(b, result, count);
  loss.replaceAllUsesWith(result);
  loss.erase();
}

class MaskIgnoredLabelsPass
    : public tessel::impl::MaskIgnoredLabelsPassBase<MaskIgnoredLabelsPass> {
public:
  void runOnOperation() override {
    SmallVector<nn::CrossEntropyOp> losses;
    getOperation().walk([&](nn::CrossEntropyOp loss) {
      if (loss.getIgnoreIndex())
        losses.push_back(loss);
    });
    for (nn::CrossEntropyOp loss : losses)
      maskIgnoredLabels(loss);
  }
};

} // namespace
