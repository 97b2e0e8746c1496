//===- GradientBuckets.cpp - DDP gradient buckets of a partitioned step ---===//

#include "passes/GradientBuckets.h"

#include "dialect/NN/NNInterfaces.h"
#include "dialect/NN/NNOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace tessel;

namespace {

/// A gradient all-reduce: a sum whose every use accumulates it into a
/// gradient accumulator or, in the layer function of an nn.repeat (which
/// has `numCarried` carried values), returns it as a per-layer (stacked)
/// result: the gradients of a repeated layer's parameters.
bool isGradientAllReduce(shard::AllReduceOp op,
                         std::optional<unsigned> numCarried) {
  return op.getReduction() == shard::ReductionKind::Sum && !op->use_empty() &&
         llvm::all_of(op->getUses(), [&](OpOperand &use) {
           if (isa<nn::AccumulateOp>(use.getOwner()))
             return true;
           return numCarried && isa<func::ReturnOp>(use.getOwner()) &&
                  use.getOperandNumber() >= *numCarried;
         });
}

/// The op after which `value` is complete in `block` (null: its start).
Operation *readyPoint(Value value, Block *block) {
  Operation *def = value.getDefiningOp();
  return def && def->getBlock() == block ? def : nullptr;
}

// DDP's buckets: the gradient all-reduces of one function, in the order
// their gradients become complete, fused into all-reduces of at most
// `bucketBytes` (one flat buffer: reshape, concat, all-reduce, slice back),
// each issued right where its last gradient is complete so that the
// remaining backward computation can overlap it.
void bucketFunction(func::FuncOp func, int64_t bucketBytes,
                    std::optional<unsigned> numCarried) {
  Block &body = func.getBody().front();
  SmallVector<shard::AllReduceOp> candidates;
  for (auto op : body.getOps<shard::AllReduceOp>())
    if (isGradientAllReduce(op, numCarried))
      candidates.push_back(op);
  // A gradient widened for its reduction (tessel-mixed-precision casts a
  // bf16 gradient to f32 where the function returns it) is complete where
  // the value it widens is: the cast moves there first, so that buckets
  // follow the order in which the backward computes the gradients, as in
  // f32 (not the order of the results).
  for (shard::AllReduceOp op : candidates) {
    auto cast = op.getInput().getDefiningOp<nn::CastOp>();
    if (!cast || cast->getBlock() != &body || !cast->hasOneUse())
      continue;
    if (Operation *def = readyPoint(cast.getInput(), &body))
      cast->moveAfter(def);
    else if (&body.front() != cast.getOperation())
      cast->moveBefore(&body.front());
  }
  // Null (an argument) is ready first; otherwise block order.
  auto readyBefore = [](Operation *a, Operation *b) {
    return b && (!a || a->isBeforeInBlock(b));
  };
  llvm::stable_sort(candidates, [&](shard::AllReduceOp a, shard::AllReduceOp b) {
    Operation *pa = readyPoint(a.getInput(), &body);
    Operation *pb = readyPoint(b.getInput(), &body);
    return pa != pb && readyBefore(pa, pb);
  });

  auto emit = [&](MutableArrayRef<shard::AllReduceOp> bucket) {
    if (bucket.empty())
      return;
    Operation *last = nullptr;
    for (shard::AllReduceOp op : bucket)
      if (Operation *point = readyPoint(op.getInput(), &body))
        if (readyBefore(last, point))
          last = point;
    OpBuilder builder(func.getContext());
    if (last)
      builder.setInsertionPointAfter(last);
    else
      builder.setInsertionPointToStart(&body);
    if (bucket.size() == 1) {
      bucket.front()->moveBefore(builder.getInsertionBlock(),
                                 builder.getInsertionPoint());
      return;
    }
    Location loc = bucket.front().getLoc();
    Type elementType =
        cast<RankedTensorType>(bucket.front().getType()).getElementType();
    SmallVector<Value> flats;
    int64_t total = 0;
    for (shard::AllReduceOp op : bucket) {
      auto type = cast<RankedTensorType>(op.getType());
      int64_t count = type.getNumElements();
      flats.push_back(type.getRank() == 1
                          ? op.getInput()
                          : nn::ReshapeOp::create(
                                builder, loc,
                                RankedTensorType::get({count}, elementType),
                                op.getInput())
                                .getResult());
      total += count;
    }
    auto flatType = RankedTensorType::get({total}, elementType);
    Value concat = nn::ConcatOp::create(builder, loc, flatType, flats, 0);
    Value reduced = shard::AllReduceOp::create(
        builder, loc, flatType, bucket.front().getGridAttr(),
        bucket.front().getGridAxesAttr(), concat,
        bucket.front().getReductionAttr());
    int64_t offset = 0;
    for (shard::AllReduceOp op : bucket) {
      auto type = cast<RankedTensorType>(op.getType());
      int64_t count = type.getNumElements();
      Value slice = nn::SliceOp::create(
          builder, loc, RankedTensorType::get({count}, elementType), reduced,
          builder.getDenseI64ArrayAttr({offset}),
          builder.getDenseI64ArrayAttr({offset + count}), nullptr);
      Value back = type.getRank() == 1
                       ? slice
                       : nn::ReshapeOp::create(builder, loc, type, slice)
                             .getResult();
      op.getResult().replaceAllUsesWith(back);
      // An accumulation placed before the bucket's last gradient was
      // complete moves after its slice.
      for (Operation *user : llvm::make_early_inc_range(back.getUsers()))
        if (user->getBlock() == &body &&
            user->isBeforeInBlock(back.getDefiningOp()))
          user->moveAfter(back.getDefiningOp());
      offset += count;
    }
    // Erased last: the insertion point may sit right before one of them.
    for (shard::AllReduceOp op : bucket)
      op.erase();
  };

  SmallVector<shard::AllReduceOp> bucket;
  int64_t bytes = 0;
  for (shard::AllReduceOp op : candidates) {
    auto type = cast<RankedTensorType>(op.getType());
    int64_t size = nn::detail::tensorBytes(type);
    bool fits = !bucket.empty() &&
                bucket.front().getGridAxes() == op.getGridAxes() &&
                cast<RankedTensorType>(bucket.front().getType())
                        .getElementType() == type.getElementType() &&
                bytes + size <= bucketBytes;
    if (!fits) {
      emit(bucket);
      bucket.clear();
      bytes = 0;
    }
    bucket.push_back(op);
    bytes += size;
  }
  emit(bucket);
}

} // namespace

void tessel::bucketGradientAllReduces(ModuleOp module, int64_t bucketBytes) {
  // A repeated layer's gradients are bucketed within the layer: each
  // layer's bucket is issued as soon as that layer's backward is done.
  DenseMap<func::FuncOp, unsigned> numCarried;
  module.walk([&](nn::RepeatOp repeat) {
    if (func::FuncOp layer = repeat.getLayerFunction())
      numCarried[layer] = repeat.getCarried().size();
  });
  for (auto func : module.getOps<func::FuncOp>()) {
    auto it = numCarried.find(func);
    bucketFunction(func, bucketBytes,
                   it == numCarried.end() ? std::nullopt
                                          : std::optional<unsigned>(it->second));
  }
}

void tessel::bucketGradientAllReducesOf(func::FuncOp func, int64_t bucketBytes,
                                        unsigned returnedFrom) {
  bucketFunction(func, bucketBytes, returnedFrom);
}
