//===- NormAndLossLowering.cpp - softmax, norms and losses ----------------===//
//
// Softmax and batch norm see their tensor as [outer, dim, inner], the layer
// and RMS norms as rows of the last dimension; the label kernels of a
// vocabulary-parallel cross-entropy work on the rank's block of classes;
// a loss's ignored labels are masked in one call.
//
//===----------------------------------------------------------------------===//

#include "passes/lowering/FunctionLowering.h"

using namespace mlir;

namespace tessel::lowering {
namespace {

LogicalResult lowerSoftmax(nn::SoftmaxOp op, FunctionLowering &fl) {
  I32Value dtype = fl.dtype(op.getResult());
  ViewAround view =
      fl.viewAround(op.getType().getShape(), op.getNormalizedDim());
  fl.call(rt::tessel_softmax,
          {dtype, fl.ptr(op.getInput()), fl.ptr(op.getResult()), view.outer,
           view.dim, view.inner});
  return success();
}

/// Layer norm, or RMS norm (no beta) with `rms`.
LogicalResult lowerNorm(Operation *op, FunctionLowering &fl, Value input,
                        Value gamma, Value beta, double epsilon, bool rms) {
  I32Value dtype = fl.dtype(input);
  PtrValue betaPtr = fl.ptrOrNull(beta);
  RowsAndCols rows = fl.rowsAndCols(tensorType(input).getShape());
  fl.call(rt::tessel_layer_norm, {dtype, fl.ptr(input), fl.ptr(gamma), betaPtr,
                                  fl.ptr(op->getResult(0)), rows.rows,
                                  rows.cols, fl.f64(epsilon), fl.i32(rms)});
  return success();
}

LogicalResult lowerLayerNorm(nn::LayerNormOp op, FunctionLowering &fl) {
  return lowerNorm(op, fl, op.getInput(), op.getGamma(), op.getBeta(),
                   op.getEpsilon().convertToDouble(), /*rms=*/false);
}

LogicalResult lowerRmsNorm(nn::RmsNormOp op, FunctionLowering &fl) {
  return lowerNorm(op, fl, op.getInput(), op.getGamma(), Value(),
                   op.getEpsilon().convertToDouble(), /*rms=*/true);
}

/// The residual add and the layer (or RMS: no beta) norm of its sum.
LogicalResult lowerAddNorm(nn::AddNormOp op, FunctionLowering &fl) {
  RowsAndCols rows = fl.rowsAndCols(tensorType(op.getSum()).getShape());
  fl.call(rt::tessel_add_layer_norm,
          {fl.dtype(op.getSum()), fl.ptr(op.getLhs()), fl.ptr(op.getRhs()),
           fl.ptr(op.getGamma()), fl.ptrOrNull(op.getBeta()),
           fl.ptr(op.getSum()), fl.ptr(op.getResult()), rows.rows, rows.cols,
           fl.f64(op.getEpsilon().convertToDouble()), fl.i32(op.isRms())});
  return success();
}

LogicalResult lowerBatchNorm(nn::BatchNormOp op, FunctionLowering &fl) {
  I32Value dtype = fl.dtype(op.getResult());
  ViewAround view = fl.viewAround(op.getType().getShape(), op.getFeatureDim());
  fl.call(rt::tessel_batch_norm,
          {dtype, fl.ptr(op.getInput()), fl.ptr(op.getGamma()),
           fl.ptr(op.getBeta()), fl.ptr(op.getResult()), view.outer, view.dim,
           view.inner, fl.f64(op.getEpsilon().convertToDouble())});
  return success();
}

// An f32 loss of 16-bit logits: tessel_cross_entropy_f32 (ABI 13); a
// label smoothing or soft-capped logits: tessel_cross_entropy_smoothed
// (ABI 28: the cap, 0 for none, and ε), either loss type.
LogicalResult lowerCrossEntropy(nn::CrossEntropyOp op, FunctionLowering &fl) {
  if (failed(op.refuseIgnoreIndex("tessel-lower-to-runtime")))
    return failure();
  if (hasLossOptions(op)) {
    fl.call(rt::tessel_cross_entropy_smoothed,
            {fl.dtype(op.getLogits()), fl.dtype(op.getResult()),
             fl.dtype(op.getLabels()), fl.ptr(op.getLogits()),
             fl.ptr(op.getLabels()), fl.ptr(op.getResult()),
             fl.count(op.getLabels()),
             fl.i64(op.getLogits().getType().getShape().back()),
             fl.i32(lossReduction(op.getReduction())),
             fl.f64(optionOrZero(op.getLogitSoftcap())),
             fl.f64(optionOrZero(op.getLabelSmoothing()))});
    return success();
  }
  fl.call(isWidened(op.getLogits(), op.getResult())
              ? rt::tessel_cross_entropy_f32
              : rt::tessel_cross_entropy,
          {fl.dtype(op.getLogits()), fl.dtype(op.getLabels()),
           fl.ptr(op.getLogits()), fl.ptr(op.getLabels()),
           fl.ptr(op.getResult()), fl.count(op.getLabels()),
           fl.i64(op.getLogits().getType().getShape().back()),
           fl.i32(lossReduction(op.getReduction()))});
  return success();
}

// The loss and its gradient in one call; dlogits is the logits' memory
// when the plan put it there (in place).
LogicalResult lowerCrossEntropyWithGrad(nn::CrossEntropyWithGradOp op,
                                        FunctionLowering &fl) {
  if (hasLossOptions(op)) {
    fl.call(rt::tessel_cross_entropy_with_grad_smoothed,
            {fl.dtype(op.getLogits()), fl.dtype(op.getLoss()),
             fl.dtype(op.getLabels()), fl.ptr(op.getLogits()),
             fl.ptr(op.getLabels()), fl.ptr(op.getDloss()),
             fl.ptr(op.getLoss()), fl.ptr(op.getDlogits()),
             fl.count(op.getLabels()),
             fl.i64(op.getLogits().getType().getShape().back()),
             fl.i32(lossReduction(op.getReduction())),
             fl.f64(optionOrZero(op.getLogitSoftcap())),
             fl.f64(optionOrZero(op.getLabelSmoothing()))});
    return success();
  }
  fl.call(rt::tessel_cross_entropy_with_grad,
          {fl.dtype(op.getLogits()), fl.dtype(op.getLoss()),
           fl.dtype(op.getLabels()), fl.ptr(op.getLogits()),
           fl.ptr(op.getLabels()), fl.ptr(op.getDloss()), fl.ptr(op.getLoss()),
           fl.ptr(op.getDlogits()), fl.count(op.getLabels()),
           fl.i64(op.getLogits().getType().getShape().back()),
           fl.i32(lossReduction(op.getReduction()))});
  return success();
}

LogicalResult lowerLabelLogit(nn::LabelLogitOp op, FunctionLowering &fl) {
  int64_t classes = op.getLogits().getType().getShape().back();
  FailureOr<RankBlock> block = fl.blockOf(op, classes);
  if (failed(block))
    return failure();
  fl.call(rt::tessel_label_logit,
          {fl.dtype(op.getLogits()), fl.dtype(op.getLabels()),
           fl.ptr(op.getLogits()), fl.ptr(op.getLabels()),
           fl.ptr(op.getResult()), fl.count(op.getLabels()), fl.i64(classes),
           block->first, block->whole});
  return success();
}

LogicalResult lowerSubLabel(nn::SubLabelOp op, FunctionLowering &fl) {
  int64_t classes = op.getType().getShape().back();
  FailureOr<RankBlock> block = fl.blockOf(op, classes);
  if (failed(block))
    return failure();
  fl.call(
      rt::tessel_sub_label,
      {fl.dtype(op.getInput()), fl.dtype(op.getLabels()), fl.ptr(op.getInput()),
       fl.ptr(op.getLabels()), fl.ptr(op.getValues()), fl.ptr(op.getResult()),
       fl.count(op.getLabels()), fl.i64(classes), block->first, block->whole});
  return success();
}

// The fused vocabulary-parallel loss (ABI 29): the block's statistics and
// its gradient, the block's place among the classes as the label kernels';
// f32 statistics of 16-bit logits: the _f32 entries (ABI 30).
LogicalResult lowerVocabLossStats(nn::VocabLossStatsOp op,
                                  FunctionLowering &fl) {
  int64_t classes = op.getLogits().getType().getShape().back();
  FailureOr<RankBlock> block = fl.blockOf(op, classes);
  if (failed(block))
    return failure();
  fl.call(
      isWidened(op.getLogits(), op.getMax()) ? rt::tessel_vocab_loss_stats_f32
                                             : rt::tessel_vocab_loss_stats,
      {fl.dtype(op.getLogits()), fl.dtype(op.getLabels()),
       fl.ptr(op.getLogits()), fl.ptr(op.getLabels()), fl.ptr(op.getMax()),
       fl.ptr(op.getSumExp()), fl.ptr(op.getLabelLogit()),
       fl.ptr(op.getLogitSum()), fl.count(op.getLabels()), fl.i64(classes),
       block->first, block->whole, fl.f64(optionOrZero(op.getLogitSoftcap()))});
  return success();
}

LogicalResult lowerVocabLossGrad(nn::VocabLossGradOp op, FunctionLowering &fl) {
  int64_t classes = op.getLogits().getType().getShape().back();
  FailureOr<RankBlock> block = fl.blockOf(op, classes);
  if (failed(block))
    return failure();
  fl.call(
      isWidened(op.getLogits(), op.getMax()) ? rt::tessel_vocab_loss_grad_f32
                                             : rt::tessel_vocab_loss_grad,
      {fl.dtype(op.getLogits()), fl.dtype(op.getLabels()),
       fl.ptr(op.getLogits()), fl.ptr(op.getLabels()), fl.ptr(op.getMax()),
       fl.ptr(op.getSumExp()), fl.ptr(op.getRowGrad()), fl.ptr(op.getDlogits()),
       fl.count(op.getLabels()), fl.i64(classes), block->first, block->whole,
       fl.f64(optionOrZero(op.getLogitSoftcap())),
       fl.f64(optionOrZero(op.getLabelSmoothing()))});
  return success();
}

// The safe labels and the weights of a loss that ignores positions.
LogicalResult lowerMaskLabels(nn::MaskLabelsOp op, FunctionLowering &fl) {
  fl.call(rt::tessel_mask_labels,
          {fl.dtype(op.getLabels()), fl.dtype(op.getWeights()),
           fl.ptr(op.getLabels()), fl.i64(op.getIgnoreIndex()),
           fl.ptr(op.getSafe()), fl.ptr(op.getWeights()),
           fl.count(op.getLabels())});
  return success();
}

} // namespace

void addNormAndLossLowerings(LoweringRegistry &registry) {
  registry.add<nn::SoftmaxOp>(lowerSoftmax);
  registry.add<nn::LayerNormOp>(lowerLayerNorm);
  registry.add<nn::RmsNormOp>(lowerRmsNorm);
  registry.add<nn::AddNormOp>(lowerAddNorm);
  registry.add<nn::BatchNormOp>(lowerBatchNorm);
  registry.add<nn::CrossEntropyOp>(lowerCrossEntropy);
  registry.add<nn::CrossEntropyWithGradOp>(lowerCrossEntropyWithGrad);
  registry.add<nn::LabelLogitOp>(lowerLabelLogit);
  registry.add<nn::SubLabelOp>(lowerSubLabel);
  registry.add<nn::VocabLossStatsOp>(lowerVocabLossStats);
  registry.add<nn::VocabLossGradOp>(lowerVocabLossGrad);
  registry.add<nn::MaskLabelsOp>(lowerMaskLabels);
}

} // namespace tessel::lowering
