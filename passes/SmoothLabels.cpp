//===- SmoothLabels.cpp - tessel-smooth-labels ----------------------------===//
//
// Writes a cross-entropy with label smoothing (PyTorch's label_smoothing ε:
// the target (1 - ε)·onehot(label) + ε/V) as its plain loss and a term the
// other passes know:
//
//   loss_i = (1 - ε)·(lse_i - z_i,label) + ε·(lse_i - mean_j z_ij)
//          = (lse_i - z_i,label) + ε·(z_i,label - mean_j z_ij)
//
//   %each = nn.cross_entropy %z, %y {reduction = none}
//   %zy   = nn.label_logit %z, %y
//   %zm   = nn.reduce_mean %z dims = [classes]
//   %s    = %each + ε·(%zy - %zm)          // then reduced as the loss was
//
// On a split vocabulary nn.label_logit and the mean over the classes are
// each rank's block, completed by an all-reduce of one value a position,
// as the vocabulary-parallel loss is. Runs after tessel-mask-ignored-labels
// (which keeps the attribute on the loss of each position it weighs) and
// before autodiff; a later pass meeting label_smoothing refuses it.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialect/NN/NNOps.h"
#include "dialect/NN/NNOpsUtils.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace tessel {
#define GEN_PASS_DEF_SMOOTHLABELSPASS
#include "passes/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;

namespace {

/// `value` in `type`'s element type (the per-position loss's: f32 for
/// 16-bit logits).
Value castTo(ImplicitLocOpBuilder &b, Value value, RankedTensorType type) {
  if (value.getType() == type)
    return value;
  return nn::CastOp::create(b, type, value);
}

/// `loss` in the ops of the header.
LogicalResult smoothLabels(nn::CrossEntropyOp loss) {
  if (loss.getIgnoreIndex())
    return loss.emitOpError()
           << "ignores positions and smooths labels: run "
              "tessel-mask-ignored-labels before tessel-smooth-labels";
  double epsilon = loss.getLabelSmoothing()->convertToDouble();
  ImplicitLocOpBuilder b(loss.getLoc(), loss);
  if (epsilon == 0.0) {
    loss.removeLabelSmoothingAttr();
    return success();
  }
  RankedTensorType logits = loss.getLogits().getType();
  RankedTensorType labels = loss.getLabels().getType();
  Type lossElement = getElementTypeOrSelf(loss.getType());
  auto perPosition = RankedTensorType::get(labels.getShape(), lossElement);
  auto inLogits =
      RankedTensorType::get(labels.getShape(), logits.getElementType());
  int64_t classes = logits.getRank() - 1;

  Value each = nn::CrossEntropyOp::create(
      b, perPosition, loss.getLogits(), loss.getLabels(),
      nn::LossReductionAttr::get(b.getContext(), nn::LossReduction::none),
      /*ignore_index=*/nullptr, /*label_smoothing=*/nullptr,
      loss.getLogitSoftcapAttr());
  // The smoothing terms are of the logits the loss reads: capped, where
  // it caps them.
  Value logitsRead = loss.getLogits();
  if (std::optional<APFloat> cap = loss.getLogitSoftcap())
    logitsRead = nn::detail::softcapOps(b, b.getLoc(), logitsRead,
                                        cap->convertToDouble())
                     .capped;
  Value labelLogit = nn::LabelLogitOp::create(
      b, inLogits, logitsRead, loss.getLabels(), /*block_axes=*/nullptr);
  Value meanLogit = nn::ReduceMeanOp::create(b, inLogits, logitsRead,
                                             b.getDenseI64ArrayAttr({classes}),
                                             /*keep_dims=*/false);
  // (Cast in order: call arguments are evaluated in any order.)
  Value labelTerm = castTo(b, labelLogit, perPosition);
  Value meanTerm = castTo(b, meanLogit, perPosition);
  Value gap = nn::SubOp::create(b, labelTerm, meanTerm);
  auto scalar = RankedTensorType::get({}, lossElement);
  Value eps = nn::detail::broadcastScalar(b, b.getLoc(), perPosition, epsilon);
  Value result =
      nn::AddOp::create(b, each, nn::MulOp::create(b, gap, eps)).getResult();
  auto positions = b.getDenseI64ArrayAttr(
      llvm::to_vector(llvm::seq<int64_t>(0, labels.getRank())));
  if (loss.getReduction() == nn::LossReduction::mean)
    result = nn::ReduceMeanOp::create(b, scalar, result, positions,
                                      /*keep_dims=*/false);
  else if (loss.getReduction() == nn::LossReduction::sum)
    result = nn::ReduceSumOp::create(b, scalar, result, positions);
  loss.replaceAllUsesWith(result);
  loss.erase();
  return success();
}

class SmoothLabelsPass
    : public tessel::impl::SmoothLabelsPassBase<SmoothLabelsPass> {
public:
  void runOnOperation() override {
    SmallVector<nn::CrossEntropyOp> losses;
    getOperation().walk([&](nn::CrossEntropyOp loss) {
      if (loss.getLabelSmoothing())
        losses.push_back(loss);
    });
    for (nn::CrossEntropyOp loss : losses)
      if (failed(smoothLabels(loss)))
        return signalPassFailure();
  }
};

} // namespace
