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
// Where that mean is the model's loss itself (its only use is operand 0
// of the model's return), the division moves to the launcher: the model
// returns the sum as its loss and the count as a result after it
// (nn.loss_count, the raw Σw), and the launcher divides the sum of a
// step's microbatch losses by max(sum of their counts, 1) and scales the
// gradients by one over it. With gradient accumulation the loss is then
// the mean over every labelled position of the step, not the mean of the
// microbatches' means (which weighs a microbatch of few labels as much
// as one of many); one microbatch gives the same loss as before.
//
// Runs on the forward model before autodiff (tessel-compile runs it first
// on every model or stage); a later pass meeting `ignore_index` refuses it.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialect/NN/NNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace tessel {
#define GEN_PASS_DEF_MASKIGNOREDLABELSPASS
#include "passes/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;

namespace {

/// The model whose loss `loss` is (operand 0 of its return, and read by
/// nothing else), if it has no count yet; else null.
func::FuncOp modelReturning(nn::CrossEntropyOp loss) {
  auto func = loss->getParentOfType<func::FuncOp>();
  if (!func || !nn::NNDialect::isModelFunction(func) ||
      nn::NNDialect::returnsStageOutputs(func) || !loss->hasOneUse())
    return {};
  OpOperand &use = *loss->getUses().begin();
  if (!isa<func::ReturnOp>(use.getOwner()) || use.getOperandNumber() != 0 ||
      use.getOwner()->getParentOp() != func)
    return {};
  for (unsigned i = 1, e = func.getNumResults(); i < e; ++i)
    if (func.getResultAttr(i, nn::NNDialect::kLossCountAttrName))
      return {};
  return func;
}

/// Appends `count` to the results of `model`'s return, as nn.loss_count.
LogicalResult returnCount(func::FuncOp model, Value count) {
  Operation *ret = model.getBody().front().getTerminator();
  unsigned index = model.getNumResults();
  ret->insertOperands(index, count);
  Builder b(model.getContext());
  return model.insertResult(
      index, count.getType(),
      b.getDictionaryAttr(
          b.getNamedAttr(nn::NNDialect::kLossCountAttrName, b.getUnitAttr())));
}

/// `loss` in the ops of the header.
LogicalResult maskIgnoredLabels(nn::CrossEntropyOp loss) {
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
    if (func::FuncOp model = modelReturning(loss)) {
      // The model's loss: the launcher divides the step's sum.
      if (failed(returnCount(model, sum)))
        return failure();
    } else {
      Value one = nn::ConstantOp::create(
          b, DenseElementsAttr::get(scalar, b.getFloatAttr(elementType, 1.0)));
      count = nn::AddOp::create(
          b, nn::ReluOp::create(b, nn::SubOp::create(b, sum, one)), one);
    }
  }
  // (A label_smoothing stays: each position's smoothed loss is weighed as
  // its plain one.)
  Value each = nn::CrossEntropyOp::create(
      b, perPosition, loss.getLogits(), mask.getSafe(),
      nn::LossReductionAttr::get(b.getContext(), nn::LossReduction::none),
      /*ignore_index=*/nullptr, loss.getLabelSmoothingAttr(),
      loss.getLogitSoftcapAttr());
  Value result = nn::MulOp::create(b, each, mask.getWeights());
  if (loss.getReduction() != nn::LossReduction::none)
    result = nn::ReduceSumOp::create(b, scalar, result, positions);
  if (count)
    result = nn::DivOp::create(b, result, count);
  loss.replaceAllUsesWith(result);
  loss.erase();
  return success();
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
      if (failed(maskIgnoredLabels(loss)))
        return signalPassFailure();
  }
};

} // namespace
