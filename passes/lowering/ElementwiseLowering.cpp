//===- ElementwiseLowering.cpp - elementwise ops and reductions -----------===//
//
// The ops that map element i of the inputs to element i of the result, and
// the reductions: one tessel_binary (tessel_binary_broadcast where an
// operand is a broadcast the memory plan made a view), tessel_unary,
// tessel_cast, tessel_dropout(_block) or tessel_reduce(_f32) each; a
// constant is a copy from the .so.
//
//===----------------------------------------------------------------------===//

#include "passes/lowering/FunctionLowering.h"

#include "passes/MemoryPlan.h"
#include "passes/Views.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace tessel::lowering {
namespace {

LogicalResult lowerConstant(nn::ConstantOp op, FunctionLowering &fl) {
  auto dense = dyn_cast<DenseElementsAttr>(op.getValue());
  if (!dense)
    return op.emitOpError() << "only dense constants lower to the runtime";
  ArrayRef<char> raw = dense.getRawData();
  StringRef bytes(raw.data(), raw.size());
  RankedTensorType type = op.getType();
  if (dense.isSplat()) {
    // One element in the .so, read by the host and written to every
    // element on the device: a splat of any size costs a few bytes of data.
    int64_t elementBytes = nn::detail::elementBytes(type.getElementType());
    if (static_cast<int64_t>(raw.size()) != elementBytes)
      return op.emitOpError()
             << "has a constant layout the runtime cannot copy";
    fl.call(rt::tessel_fill,
            {fl.dtype(op.getResult()), fl.ptr(op.getResult()),
             fl.i64(type.getNumElements()),
             fl.emit.bytesGlobal(fl.b, fl.loc, bytes)});
    return success();
  }
  int64_t total = bytesOf(op.getResult());
  if (static_cast<int64_t>(raw.size()) != total)
    return op.emitOpError() << "has a constant layout the runtime cannot copy";
  fl.call(rt::tessel_copy_to_device,
          {fl.ptr(op.getResult()), fl.emit.bytesGlobal(fl.b, fl.loc, bytes),
           fl.i64(total)});
  return success();
}

LogicalResult lowerCast(nn::CastOp op, FunctionLowering &fl) {
  fl.call(rt::tessel_cast, {fl.dtype(op.getInput()), fl.dtype(op.getResult()),
                            fl.ptr(op.getInput()), fl.ptr(op.getResult()),
                            fl.count(op.getResult())});
  return success();
}

/// tessel_binary's op code of a binary nn op.
int32_t binaryKind(Operation *op) {
  return llvm::TypeSwitch<Operation *, int32_t>(op)
      .Case([](nn::AddOp) { return TESSEL_ADD; })
      .Case([](nn::SubOp) { return TESSEL_SUB; })
      .Case([](nn::MulOp) { return TESSEL_MUL; })
      .Case([](nn::EqualOp) { return TESSEL_EQUAL; })
      .Default([](Operation *) { return TESSEL_DIV; });
}

/// The operand of a binary op that the memory plan made a broadcast view
/// (tessel.view), or null.
nn::BroadcastOp broadcastView(Value operand) {
  auto broadcast = operand.getDefiningOp<nn::BroadcastOp>();
  return broadcast && broadcast->hasAttr(memory_plan::kViewAttr)
             ? broadcast
             : nn::BroadcastOp();
}

LogicalResult lowerBinary(Operation *op, FunctionLowering &fl) {
  Value result = op->getResult(0);
  Value lhs = op->getOperand(0), rhs = op->getOperand(1);
  nn::BroadcastOp broadcast = broadcastView(rhs);
  bool bFirst = false;
  if (!broadcast && (broadcast = broadcastView(lhs)))
    bFirst = true;
  if (broadcast) {
    // The broadcast's input read where it lies, along rows or columns.
    std::optional<views::BroadcastPairing> pairing =
        views::broadcastPairing(broadcast);
    if (!pairing)
      return op->emitOpError() << "reads a broadcast planned as a view that "
                                  "does not broadcast along rows or columns";
    int32_t layout =
        (pairing->perRow ? TESSEL_BROADCAST_ROWS : TESSEL_BROADCAST_COLS) |
        (bFirst ? TESSEL_BROADCAST_B_FIRST : 0);
    fl.call(rt::tessel_binary_broadcast,
            {fl.i32(binaryKind(op)), fl.dtype(result),
             fl.ptr(bFirst ? rhs : lhs), fl.ptr(broadcast.getInput()),
             fl.ptr(result), fl.i64(pairing->rows), fl.i64(pairing->cols),
             fl.i32(layout)});
    return success();
  }
  fl.call(rt::tessel_binary,
          {fl.i32(binaryKind(op)), fl.dtype(result), fl.ptr(op->getOperand(0)),
           fl.ptr(op->getOperand(1)), fl.ptr(result), fl.count(result)});
  return success();
}

/// tessel_unary's op code of a unary nn op.
int32_t unaryKind(Operation *op) {
  return llvm::TypeSwitch<Operation *, int32_t>(op)
      .Case([](nn::NegOp) { return TESSEL_NEG; })
      .Case([](nn::ExpOp) { return TESSEL_EXP; })
      .Case([](nn::LogOp) { return TESSEL_LOG; })
      .Case([](nn::SqrtOp) { return TESSEL_SQRT; })
      .Case([](nn::RsqrtOp) { return TESSEL_RSQRT; })
      .Case([](nn::TanhOp) { return TESSEL_TANH; })
      .Case([](nn::SigmoidOp) { return TESSEL_SIGMOID; })
      .Case([](nn::ReluOp) { return TESSEL_RELU; })
      .Case([](nn::GeluOp g) {
        return g.getApproximate() ? TESSEL_GELU_TANH : TESSEL_GELU;
      })
      .Default([](Operation *) { return TESSEL_SILU; });
}

LogicalResult lowerUnary(Operation *op, FunctionLowering &fl) {
  Value result = op->getResult(0);
  fl.call(rt::tessel_unary,
          {fl.i32(unaryKind(op)), fl.dtype(result), fl.ptr(op->getOperand(0)),
           fl.ptr(result), fl.count(result)});
  return success();
}

/// A rank's block of a split dropout: its first element in the whole
/// tensor is microbatch · N plus, for each split dimension, the rank's
/// group index over its axes times the block size times the whole
/// tensor's stride.
LogicalResult lowerDropoutBlock(nn::DropoutOp op, FunctionLowering &fl,
                                I64Value microbatch) {
  ArrayRef<int64_t> whole = *op.getGlobalShape();
  ArrayRef<int64_t> local = op.getType().getShape();
  SmallVector<int64_t> strides = contiguousStrides(whole);
  I64Value first =
      fl.emit.mul(fl.b, fl.loc, microbatch, fl.i64(product(whole)));
  for (auto [dim, axesAttr] : llvm::enumerate(*op.getSplitAxes())) {
    FailureOr<uint32_t> mask = FunctionLowering::gridAxesMask(
        op, cast<DenseI16ArrayAttr>(axesAttr).asArrayRef(), "split");
    if (failed(mask))
      return failure();
    if (!*mask)
      continue;
    I64Value index =
        fl.call(rt::tessel_group_index, {fl.i32(static_cast<int32_t>(*mask))});
    I64Value offset =
        fl.emit.mul(fl.b, fl.loc, index, fl.i64(local[dim] * strides[dim]));
    first = fl.emit.add(fl.b, fl.loc, first, offset);
  }
  fl.call(rt::tessel_dropout_block_current,
          {fl.dtype(op.getResult()), fl.ptr(op.getInput()),
           fl.ptr(op.getResult()), fl.i32(static_cast<int32_t>(local.size())),
           fl.i64Array(local), fl.i64Array(strides),
           fl.f64(op.getRate().convertToDouble()),
           fl.i64(static_cast<int64_t>(op.getSeed())), first});
  return success();
}

/// The mask is the context's step's as the kernel runs (the _current
/// entries), so a step captured once replays with fresh masks; the
/// microbatch is read when the call is issued, which a capture of the whole
/// step (every microbatch) keeps right.
LogicalResult lowerDropout(nn::DropoutOp op, FunctionLowering &fl) {
  // Microbatch m draws the mask of elements m·n .. m·n + n − 1.
  I64Value microbatch = fl.call(rt::tessel_get_microbatch, {});
  if (op.getGlobalShape())
    return lowerDropoutBlock(op, fl, microbatch);
  I64Value first =
      fl.emit.mul(fl.b, fl.loc, microbatch, fl.count(op.getResult()));
  fl.call(rt::tessel_dropout_current,
          {fl.dtype(op.getResult()), fl.ptr(op.getInput()),
           fl.ptr(op.getResult()), fl.count(op.getResult()),
           fl.f64(op.getRate().convertToDouble()),
           fl.i64(static_cast<int64_t>(op.getSeed())), first});
  return success();
}

LogicalResult lowerReduce(Operation *op, FunctionLowering &fl) {
  int32_t kind = isa<nn::ReduceSumOp>(op)    ? TESSEL_REDUCE_SUM
                 : isa<nn::ReduceMeanOp>(op) ? TESSEL_REDUCE_MEAN
                                             : TESSEL_REDUCE_MAX;
  auto dims = op->getAttrOfType<DenseI64ArrayAttr>("dims").asArrayRef();
  uint64_t mask = 0;
  for (int64_t dim : dims)
    mask |= uint64_t(1) << dim;
  Value input = op->getOperand(0);
  ArrayRef<int64_t> shape = tensorType(input).getShape();
  if (shape.size() > 64)
    return op->emitOpError() << "reduces a tensor of rank > 64";
  // A 16-bit sum written in f32 (tessel-fuse-epilogues' widening).
  fl.call(isWidened(input, op->getResult(0)) ? rt::tessel_reduce_f32
                                             : rt::tessel_reduce,
          {fl.i32(kind), fl.dtype(input), fl.ptr(input),
           fl.ptr(op->getResult(0)), fl.i32(static_cast<int32_t>(shape.size())),
           fl.i64Array(shape), fl.i64(static_cast<int64_t>(mask))});
  return success();
}

} // namespace

void addElementwiseLowerings(LoweringRegistry &registry) {
  registry.add<nn::ConstantOp>(lowerConstant);
  registry.add<nn::CastOp>(lowerCast);
  registry.add<nn::AddOp, nn::SubOp, nn::MulOp, nn::DivOp, nn::EqualOp>(
      lowerBinary);
  registry.add<nn::NegOp, nn::ExpOp, nn::LogOp, nn::SqrtOp, nn::RsqrtOp,
               nn::TanhOp, nn::SigmoidOp, nn::ReluOp, nn::GeluOp, nn::SiluOp>(
      lowerUnary);
  registry.add<nn::DropoutOp>(lowerDropout);
  registry.add<nn::ReduceSumOp, nn::ReduceMeanOp, nn::ReduceMaxOp>(lowerReduce);
}

} // namespace tessel::lowering
