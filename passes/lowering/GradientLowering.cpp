//===- GradientLowering.cpp - backward ops to their kernels ---------------===//
//
// Each gradient op has a backward kernel of the same shapes and views as
// its forward (runtime.h, "Backward kernels"); the slice gradient is a
// zero fill and a strided copy into the window.
//
//===----------------------------------------------------------------------===//

#include "passes/lowering/FunctionLowering.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace tessel::lowering {
namespace {

LogicalResult lowerActivationGrad(Operation *op, FunctionLowering &fl) {
  int32_t kind =
      llvm::TypeSwitch<Operation *, int32_t>(op)
          .Case([](nn::GeluGradOp g) {
            return g.getApproximate() ? TESSEL_GELU_TANH : TESSEL_GELU;
          })
          .Case([](nn::SiluGradOp) { return TESSEL_SILU; })
          .Default([](Operation *) { return TESSEL_RELU; });
  Value x = op->getOperand(0), dy = op->getOperand(1), dx = op->getResult(0);
  fl.call(rt::tessel_unary_grad, {fl.i32(kind), fl.dtype(dx), fl.ptr(x),
                                  fl.ptr(dy), fl.ptr(dx), fl.count(dx)});
  return success();
}

LogicalResult lowerSoftmaxGrad(nn::SoftmaxGradOp op, FunctionLowering &fl) {
  I32Value dtype = fl.dtype(op.getDx());
  ViewAround view =
      fl.viewAround(op.getType().getShape(), op.getNormalizedDim());
  fl.call(rt::tessel_softmax_grad,
          {dtype, fl.ptr(op.getY()), fl.ptr(op.getDy()), fl.ptr(op.getDx()),
           view.outer, view.dim, view.inner});
  return success();
}

/// Layer norm's gradient, or RMS norm's (no dbeta) with `rms`.
LogicalResult lowerNormGrad(FunctionLowering &fl, Value input, Value gamma,
                            Value dy, Value dx, Value dgamma, Value dbeta,
                            double epsilon, bool rms) {
  I32Value dtype = fl.dtype(input);
  PtrValue dbetaPtr = fl.ptrOrNull(dbeta);
  RowsAndCols rows = fl.rowsAndCols(tensorType(input).getShape());
  fl.call(isWidened(input, dgamma) ? rt::tessel_layer_norm_grad_f32
                                   : rt::tessel_layer_norm_grad,
          {dtype, fl.ptr(input), fl.ptr(gamma), fl.ptr(dy), fl.ptr(dx),
           fl.ptr(dgamma), dbetaPtr, rows.rows, rows.cols, fl.f64(epsilon),
           fl.i32(rms)});
  return success();
}

LogicalResult lowerLayerNormGrad(nn::LayerNormGradOp op, FunctionLowering &fl) {
  return lowerNormGrad(fl, op.getInput(), op.getGamma(), op.getDy(), op.getDx(),
                       op.getDgamma(), op.getDbeta(),
                       op.getEpsilon().convertToDouble(), /*rms=*/false);
}

LogicalResult lowerRmsNormGrad(nn::RmsNormGradOp op, FunctionLowering &fl) {
  return lowerNormGrad(fl, op.getInput(), op.getGamma(), op.getDy(), op.getDx(),
                       op.getDgamma(), Value(),
                       op.getEpsilon().convertToDouble(), /*rms=*/true);
}

/// A norm's gradient added to the residual stream's as it is written.
LogicalResult lowerNormGradAdd(nn::NormGradAddOp op, FunctionLowering &fl) {
  RowsAndCols rows = fl.rowsAndCols(tensorType(op.getInput()).getShape());
  fl.call(isWidened(op.getInput(), op.getDgamma())
              ? rt::tessel_layer_norm_grad_add_f32
              : rt::tessel_layer_norm_grad_add,
          {fl.dtype(op.getInput()), fl.ptr(op.getInput()),
           fl.ptr(op.getGamma()), fl.ptr(op.getDy()), fl.ptr(op.getResidual()),
           fl.ptr(op.getDx()), fl.ptr(op.getDgamma()),
           fl.ptrOrNull(op.getDbeta()), rows.rows, rows.cols,
           fl.f64(op.getEpsilon().convertToDouble()), fl.i32(op.getRms())});
  return success();
}

LogicalResult lowerBatchNormGrad(nn::BatchNormGradOp op, FunctionLowering &fl) {
  I32Value dtype = fl.dtype(op.getInput());
  ViewAround view =
      fl.viewAround(op.getInput().getType().getShape(), op.getFeatureDim());
  fl.call(rt::tessel_batch_norm_grad,
          {dtype, fl.ptr(op.getInput()), fl.ptr(op.getGamma()),
           fl.ptr(op.getDy()), fl.ptr(op.getDx()), fl.ptr(op.getDgamma()),
           fl.ptr(op.getDbeta()), view.outer, view.dim, view.inner,
           fl.f64(op.getEpsilon().convertToDouble())});
  return success();
}

// dloss of an f32 loss of 16-bit logits: tessel_cross_entropy_grad_f32.
LogicalResult lowerCrossEntropyGrad(nn::CrossEntropyGradOp op,
                                    FunctionLowering &fl) {
  if (hasLossOptions(op)) {
    // A smoothing or a cap (ABI 28), the dloss f32 or the logits' type.
    fl.call(rt::tessel_cross_entropy_grad_smoothed,
            {fl.dtype(op.getLogits()), fl.dtype(op.getDloss()),
             fl.dtype(op.getLabels()), fl.ptr(op.getLogits()),
             fl.ptr(op.getLabels()), fl.ptr(op.getDloss()),
             fl.ptr(op.getDlogits()), fl.count(op.getLabels()),
             fl.i64(op.getLogits().getType().getShape().back()),
             fl.i32(lossReduction(op.getReduction())),
             fl.f64(optionOrZero(op.getLogitSoftcap())),
             fl.f64(optionOrZero(op.getLabelSmoothing()))});
    return success();
  }
  fl.call(isWidened(op.getLogits(), op.getDloss())
              ? rt::tessel_cross_entropy_grad_f32
              : rt::tessel_cross_entropy_grad,
          {fl.dtype(op.getLogits()), fl.dtype(op.getLabels()),
           fl.ptr(op.getLogits()), fl.ptr(op.getLabels()),
           fl.ptr(op.getDloss()), fl.ptr(op.getDlogits()),
           fl.count(op.getLabels()),
           fl.i64(op.getLogits().getType().getShape().back()),
           fl.i32(lossReduction(op.getReduction()))});
  return success();
}

LogicalResult lowerEmbeddingGrad(nn::EmbeddingGradOp op, FunctionLowering &fl) {
  ArrayRef<int64_t> table = op.getType().getShape();
  FailureOr<RankBlock> block = fl.blockOf(op, table[0]);
  if (failed(block))
    return failure();
  fl.call(isWidened(op.getDout(), op.getDtable())
              ? rt::tessel_embedding_grad_f32
              : rt::tessel_embedding_grad,
          {fl.dtype(op.getDout()), fl.dtype(op.getIds()), fl.ptr(op.getIds()),
           fl.ptr(op.getDout()), fl.ptr(op.getDtable()), fl.count(op.getIds()),
           fl.i64(table[0]), fl.i64(table[1]), block->first, block->whole});
  return success();
}

/// A sliding window goes to tessel_attention_grad_window (ABI 20), which
/// takes it after tessel_attention_grad_lse's arguments; a soft cap to
/// tessel_attention_grad_softcap (ABI 24), the window (0: none) and the
/// cap after them; a block of the queries (context parallelism) to
/// tessel_attention_grad_block (ABI 31), its query offset after the cap.
LogicalResult lowerAttentionGrad(nn::AttentionGradOp op, FunctionLowering &fl) {
  I32Value dtype = fl.dtype(op.getQuery());
  AttentionShape shape = fl.attentionShape(
      op.getQuery(), op.getKey(), op.getValue(), op.getScale(), op.getCausal());
  auto grad = [&](const auto &fn, auto... windowAndCap) {
    fl.call(fn, {dtype,
                 fl.ptr(op.getQuery()),
                 fl.ptr(op.getKey()),
                 fl.ptr(op.getValue()),
                 fl.ptr(op.getOut()),
                 fl.ptr(op.getLse()),
                 fl.ptr(op.getDout()),
                 fl.ptr(op.getDquery()),
                 fl.ptr(op.getDkey()),
                 fl.ptr(op.getDvalue()),
                 shape.batch,
                 shape.seq,
                 shape.kvSeq,
                 shape.heads,
                 shape.kvHeads,
                 shape.headDim,
                 shape.valueDim,
                 shape.scale,
                 shape.causal,
                 windowAndCap...});
  };
  std::optional<I64Value> layerWindow;
  if (std::optional<ArrayRef<int64_t>> table = op.getLayerWindows()) {
    FailureOr<I64Value> window = fl.layerEntry(op, *table);
    if (failed(window))
      return failure();
    layerWindow = *window;
  }
  std::optional<APFloat> softcap = op.getSoftcap();
  if (softcap || op.getBlockAxesAttr()) {
    // (Built in order: call arguments are evaluated in any order.)
    I64Value window =
        layerWindow ? *layerWindow : fl.i64(op.getWindow().value_or(0));
    F64Value cap = fl.f64(softcap ? softcap->convertToDouble() : 0.0);
    if (op.getBlockAxesAttr()) {
      FailureOr<I64Value> first =
          fl.blockStart(op, op.getQuery().getType().getDimSize(1));
      if (failed(first))
        return failure();
      grad(rt::tessel_attention_grad_block, window, cap, *first);
    } else {
      grad(rt::tessel_attention_grad_softcap, window, cap);
    }
  } else if (layerWindow) {
    grad(rt::tessel_attention_grad_window, *layerWindow);
  } else if (std::optional<int64_t> window = op.getWindow()) {
    grad(rt::tessel_attention_grad_window, fl.i64(*window));
  } else {
    grad(rt::tessel_attention_grad_lse);
  }
  return success();
}

/// Zeros, then dy copied into the strided window (nn.slice's placement).
LogicalResult lowerSliceGrad(nn::SliceGradOp op, FunctionLowering &fl) {
  fl.call(rt::tessel_zero, {fl.ptr(op.getDx()), fl.i64(bytesOf(op.getDx()))});
  StridedWindow window = stridedWindow(op.getType().getShape(), op.getStart(),
                                       op.getStridesOrOnes());
  int64_t elementBytes =
      nn::detail::elementBytes(op.getType().getElementType());
  ArrayRef<int64_t> shape = op.getDy().getType().getShape();
  if (product(shape) == 0)
    return success();
  fl.stridedCopy(op.getDx(), fl.ptr(op.getDy()),
                 fl.offset(fl.ptr(op.getDx()), window.first * elementBytes),
                 shape, contiguousStrides(shape), window.strides);
  return success();
}

} // namespace

void addGradientLowerings(LoweringRegistry &registry) {
  registry.add<nn::GeluGradOp, nn::SiluGradOp, nn::ReluGradOp>(
      lowerActivationGrad);
  registry.add<nn::SoftmaxGradOp>(lowerSoftmaxGrad);
  registry.add<nn::LayerNormGradOp>(lowerLayerNormGrad);
  registry.add<nn::RmsNormGradOp>(lowerRmsNormGrad);
  registry.add<nn::NormGradAddOp>(lowerNormGradAdd);
  registry.add<nn::BatchNormGradOp>(lowerBatchNormGrad);
  registry.add<nn::CrossEntropyGradOp>(lowerCrossEntropyGrad);
  registry.add<nn::EmbeddingGradOp>(lowerEmbeddingGrad);
  registry.add<nn::AttentionGradOp>(lowerAttentionGrad);
  registry.add<nn::SliceGradOp>(lowerSliceGrad);
}

} // namespace tessel::lowering
