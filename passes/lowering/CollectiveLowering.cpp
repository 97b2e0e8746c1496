//===- CollectiveLowering.cpp - shard collectives to the runtime's --------===//
//
// One runtime collective per shard op, over the group of the op's grid axes
// (a bit mask); the shape passed is the local input's. A collective marked
// nn.async calls the runtime's *_start twin, and its nn.wait
// tessel_comm_wait on the result's memory.
//
//===----------------------------------------------------------------------===//

#include "passes/lowering/FunctionLowering.h"

#include "passes/Communication.h"

#include "dialect/NN/NNOps.h"

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

/// The blocking entry point or, for an nn.async collective, its start.
template <typename Fn>
const Fn &entryOf(Operation *op, const Fn &blocking, const Fn &start) {
  return op->hasAttr(nn::NNDialect::kAsyncAttrName) ? start : blocking;
}

LogicalResult lowerAllReduce(shard::AllReduceOp op, FunctionLowering &fl) {
  FailureOr<CollectiveArgs> c = collectiveArgs(op, fl);
  if (failed(c))
    return failure();
  fl.call(entryOf(op, rt::tessel_all_reduce, rt::tessel_all_reduce_start),
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
  return lowerAlongDim(
      op, fl, entryOf(op, rt::tessel_all_gather, rt::tessel_all_gather_start),
      op.getGatherAxis());
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
  fl.call(
      entryOf(op, rt::tessel_reduce_scatter, rt::tessel_reduce_scatter_start),
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
  fl.call(
      entryOf(op, rt::tessel_all_to_all, rt::tessel_all_to_all_start),
      {c->axes, c->dtype, c->in, c->out, s.rank, s.shape, splitDim, concatDim});
  return success();
}

/// The collective's result, complete, in the memory it was started into.
LogicalResult lowerWait(nn::WaitOp op, FunctionLowering &fl) {
  PtrValue result = fl.ptr(op.getInput());
  fl.call(rt::tessel_comm_wait, {result});
  fl.pointers[op.getResult()] = fl.pointers.lookup(op.getInput());
  return success();
}

} // namespace

void addCollectiveLowerings(LoweringRegistry &registry) {
  registry.add<shard::AllReduceOp>(lowerAllReduce);
  registry.add<shard::AllGatherOp>(lowerAllGather);
  registry.add<shard::ReduceScatterOp>(lowerReduceScatter);
  registry.add<shard::AllToAllOp>(lowerAllToAll);
  registry.add<shard::AllSliceOp>(lowerAllSlice);
  registry.add<nn::WaitOp>(lowerWait);
}

} // namespace tessel::lowering
