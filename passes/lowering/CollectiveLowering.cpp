//===- CollectiveLowering.cpp - shard collectives to the runtime's --------===//
//
// One blocking runtime collective per shard op, over the group of the op's
// grid axes (a bit mask); the shape passed is the local input's.
//
//===----------------------------------------------------------------------===//

#include "passes/lowering/FunctionLowering.h"

#include "passes/Communication.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

using namespace mlir;

namespace tessel::lowering {
namespace {

/// The arguments every collective starts with: its group's axes mask, the
/// dtype and the input and output pointers.
struct CollectiveArgs {
  I32Value axes, dtype;
  PtrValue in, out;
};

FailureOr<CollectiveArgs> collectiveArgs(Operation *op, FunctionLowering &fl) {
  if (failed(communication::verifyLowerableCollective(op)))
    return failure();
  Value input = op->getOperand(0), result = op->getResult(0);
  return CollectiveArgs{
      fl.i32(static_cast<int32_t>(communication::axesMask(op))),
      fl.dtype(input), fl.ptr(input), fl.ptr(result)};
}

/// The rank and shape arguments of the collectives that move blocks along a
/// dimension.
struct ShapeArgs {
  I32Value rank;
  PtrValue shape;
};

ShapeArgs shapeArgs(Operation *op, FunctionLowering &fl) {
  ArrayRef<int64_t> shape = tensorType(op->getOperand(0)).getShape();
  return {fl.i32(static_cast<int32_t>(shape.size())), fl.i64Array(shape)};
}

/// A tensor dimension argument.
I32Value dimArg(FunctionLowering &fl, const APInt &dim) {
  return fl.i32(static_cast<int32_t>(dim.getZExtValue()));
}

/// The runtime's code of a shard reduction (verified to be one it has).
int32_t reduceKind(shard::ReductionKind kind) {
  return kind == shard::ReductionKind::Average ? TESSEL_REDUCE_MEAN
         : kind == shard::ReductionKind::Max   ? TESSEL_REDUCE_MAX
                                               : TESSEL_REDUCE_SUM;
}

LogicalResult lowerAllReduce(shard::AllReduceOp op, FunctionLowering &fl) {
  FailureOr<CollectiveArgs> c = collectiveArgs(op, fl);
  if (failed(c))
    return failure();
  fl.call(rt::tessel_all_reduce,
          {c->axes, c->dtype, c->in, c->out, fl.count(op->getOperand(0)),
           fl.i32(reduceKind(op.getReduction()))});
  return success();
}

/// all_gather and all_slice: the same arguments, one dimension.
LogicalResult lowerAlongDim(Operation *op, FunctionLowering &fl,
                            const decltype(rt::tessel_all_gather) &fn,
                            const APInt &dim) {
  FailureOr<CollectiveArgs> c = collectiveArgs(op, fl);
  if (failed(c))
    return failure();
  I32Value dimValue = dimArg(fl, dim);
  ShapeArgs s = shapeArgs(op, fl);
  fl.call(fn, {c->axes, c->dtype, c->in, c->out, s.rank, s.shape, dimValue});
  return success();
}

LogicalResult lowerAllGather(shard::AllGatherOp op, FunctionLowering &fl) {
  return lowerAlongDim(op, fl, rt::tessel_all_gather, op.getGatherAxis());
}

LogicalResult lowerAllSlice(shard::AllSliceOp op, FunctionLowering &fl) {
  return lowerAlongDim(op, fl, rt::tessel_all_slice, op.getSliceAxis());
}

LogicalResult lowerReduceScatter(shard::ReduceScatterOp op,
                                 FunctionLowering &fl) {
  FailureOr<CollectiveArgs> c = collectiveArgs(op, fl);
  if (failed(c))
    return failure();
  I32Value dim = dimArg(fl, op.getScatterAxis());
  I32Value kind = fl.i32(reduceKind(op.getReduction()));
  ShapeArgs s = shapeArgs(op, fl);
  fl.call(rt::tessel_reduce_scatter,
          {c->axes, c->dtype, c->in, c->out, s.rank, s.shape, dim, kind});
  return success();
}

LogicalResult lowerAllToAll(shard::AllToAllOp op, FunctionLowering &fl) {
  FailureOr<CollectiveArgs> c = collectiveArgs(op, fl);
  if (failed(c))
    return failure();
  I32Value splitDim = dimArg(fl, op.getSplitAxis());
  I32Value concatDim = dimArg(fl, op.getConcatAxis());
  ShapeArgs s = shapeArgs(op, fl);
  fl.call(rt::tessel_all_to_all, {c->axes, c->dtype, c->in, c->out, s.rank,
                                  s.shape, splitDim, concatDim});
  return success();
}

} // namespace

void addCollectiveLowerings(LoweringRegistry &registry) {
  registry.add<shard::AllReduceOp>(lowerAllReduce);
  registry.add<shard::AllGatherOp>(lowerAllGather);
  registry.add<shard::ReduceScatterOp>(lowerReduceScatter);
  registry.add<shard::AllToAllOp>(lowerAllToAll);
  registry.add<shard::AllSliceOp>(lowerAllSlice);
}

} // namespace tessel::lowering
