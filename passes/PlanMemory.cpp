//===- PlanMemory.cpp - tessel-plan-memory: static arena offsets ----------===//

#include "passes/Communication.h"
#include "passes/MemoryPlan.h"
#include "passes/Passes.h"
#include "passes/Views.h"

#include "dialect/NN/NNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"

namespace tessel {
#define GEN_PASS_DEF_PLANMEMORYPASS
#include "passes/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;
using memory_plan::alignUp;

namespace {

/// One allocation: live from the op that defines it to its last use
/// (indices in the function body), placed at `offset`.
struct Buffer {
  int64_t bytes;
  int64_t start, end;
  int64_t offset = -1;
};

/// Greedy by size (as TFLite's arena planner): the largest buffers are
/// placed first, each at the lowest aligned offset that no already placed
/// buffer alive at the same time occupies. Placing big, long-lived buffers
/// first leaves fewer holes than definition order. Returns the peak.
int64_t placeBuffers(MutableArrayRef<Buffer> buffers) {
  SmallVector<size_t> order = llvm::to_vector(llvm::seq<size_t>(0, buffers.size()));
  llvm::stable_sort(order, [&](size_t a, size_t b) {
    return buffers[a].bytes > buffers[b].bytes;
  });
  int64_t peak = 0;
  for (auto [placed, i] : llvm::enumerate(order)) {
    Buffer &buffer = buffers[i];
    SmallVector<std::pair<int64_t, int64_t>> taken; // [begin, end) in bytes
    for (size_t j : ArrayRef<size_t>(order).take_front(placed))
      if (buffers[j].start <= buffer.end && buffer.start <= buffers[j].end)
        taken.push_back(
            {buffers[j].offset,
             memory_plan::addBytes(buffers[j].offset, buffers[j].bytes)});
    llvm::sort(taken);
    int64_t offset = 0;
    for (auto [begin, end] : taken) {
      if (memory_plan::addBytes(offset, buffer.bytes) <= begin)
        break;
      offset = std::max(offset, alignUp(end));
    }
    buffer.offset = offset;
    peak = std::max(peak, memory_plan::addBytes(offset, buffer.bytes));
  }
  return alignUp(peak);
}

/// The most bytes alive at any one op: no placement can do better.
int64_t liveBytesBound(ArrayRef<Buffer> buffers) {
  int64_t bound = 0, last = 0;
  for (const Buffer &buffer : buffers)
    last = std::max(last, buffer.end);
  for (int64_t index = 0; index <= last; ++index) {
    int64_t live = 0;
    for (const Buffer &buffer : buffers)
      if (buffer.start <= index && index <= buffer.end)
        live = memory_plan::addBytes(live, buffer.bytes);
    bound = std::max(bound, live);
  }
  return bound;
}

/// The operand whose memory `result` updates in place: a
/// destination-style op's init, a repeat's outs, the accumulator of a bias
/// gradient's GEMM, the logits an in-place loss gradient overwrites; null
/// for a result of its own.
OpOperand *updatedOperand(OpResult result) {
  Operation *op = result.getOwner();
  if (auto dps = dyn_cast<DestinationStyleOpInterface>(op))
    return dps.getTiedOpOperand(result);
  if (auto repeat = dyn_cast<nn::RepeatOp>(op)) {
    unsigned first = repeat.getCarried().size();
    unsigned number = result.getResultNumber();
    if (number < first || number >= first + repeat.getOuts().size())
      return nullptr;
    return &repeat.getOutsMutable()[number - first];
  }
  if (auto biasGrad = dyn_cast<nn::MatmulBiasGradOp>(op))
    if (result == biasGrad.getResult() && biasGrad.getAcc())
      return &biasGrad.getAccMutable()[0];
  if (auto loss = dyn_cast<nn::CrossEntropyWithGradOp>(op))
    if (result == loss.getDlogits() && loss.getInPlace())
      return &loss.getLogitsMutable();
  if (auto block = dyn_cast<nn::VocabLossGradOp>(op))
    if (block.getInPlace())
      return &block.getLogitsMutable();
  return nullptr;
}

/// Whether some op updates in place the memory of `value` or of a view of
/// the tensor it views.
bool updatedInPlaceAnywhere(Value value) {
  for (Value alias : views::readersOfMemory(value))
    for (OpOperand &use : alias.getUses())
      for (OpResult result : use.getOwner()->getResults())
        if (updatedOperand(result) == &use)
          return true;
  return false;
}

/// The ops of `body` whose results are views (tessel.view), by op, with
/// their byte offsets in their inputs: a slice's contiguous window, or a
/// broadcast that only binary ops read (at 0: they read its input along
/// its rows or columns, tessel_binary_broadcast), of a tensor whose memory
/// nothing updates in place (the view would see the update where the copy
/// it replaces was taken before it). A bucket's gradients are then read
/// where the bucket holds them, a bias where it lies.
DenseMap<Operation *, int64_t> planViews(Block &body) {
  DenseMap<Operation *, int64_t> found;
  for (Operation &op : body) {
    if (auto slice = dyn_cast<nn::SliceOp>(op)) {
      std::optional<int64_t> start = views::contiguousSliceStart(slice);
      if (start && !updatedInPlaceAnywhere(slice.getResult()))
        found[slice] =
            *start * nn::detail::elementBytes(slice.getType().getElementType());
    } else if (auto broadcast = dyn_cast<nn::BroadcastOp>(op)) {
      if (views::mayBeView(broadcast) &&
          !updatedInPlaceAnywhere(broadcast.getResult()))
        found[broadcast] = 0;
    }
  }
  return found;
}

/// Whether `value` is made by an op of `block` that the plan gives a buffer
/// of its own: not a view (a reshape, or one of `planViews`), a wait, an
/// update in place, a repeat's or a collective's result, nor a concat's
/// (whose own inputs may lie in it).
bool ownsFreshBuffer(Value value, Block &block,
                     const DenseMap<Operation *, int64_t> &viewOps) {
  auto result = dyn_cast<OpResult>(value);
  if (!result)
    return false;
  Operation *op = result.getOwner();
  return op->getBlock() == &block && isa<nn::NNDialect>(op->getDialect()) &&
         !isa<nn::ReshapeOp, nn::WaitOp, nn::RepeatOp, nn::ConcatOp>(op) &&
         !viewOps.contains(op) && !updatedOperand(result);
}

/// Whether nothing reads `value`, or a view of it, after `op` (of the same
/// block).
bool readNoLaterThan(Value value, Operation *op) {
  for (Value alias : views::readersOfMemory(value))
    for (Operation *user : alias.getUsers())
      if (!isa<nn::ReshapeOp>(user) &&
          (user->getBlock() != op->getBlock() ||
           (user != op && !user->isBeforeInBlock(op))))
        return false;
  return true;
}

/// Where an input of a concat lies when its producer computes it into the
/// concat's result: that result and the input's byte offset in it.
struct ConcatSlot {
  Value concat;
  int64_t byteOffset = 0;
};

/// The concat inputs the plan computes straight into their concat's
/// result, by the value each views: a contiguous slab of the result (every
/// dimension before the concat's of size 1) at an aligned offset, made by
/// an op of the function into a buffer of its own, read by nothing after
/// the concat (a collective may then update the result in place), and an
/// input of that concat once. A bucket of gradients (tessel-partition's
/// concat before its reduction) then costs no copy: each gradient's kernel
/// writes it where the bucket holds it.
DenseMap<Value, ConcatSlot>
inPlaceConcatInputs(Block &body,
                    const DenseMap<Operation *, int64_t> &viewOps) {
  DenseMap<Value, ConcatSlot> slots;
  for (auto concat : body.getOps<nn::ConcatOp>()) {
    RankedTensorType type = concat.getType();
    int64_t dim = static_cast<int64_t>(concat.getDim());
    if (llvm::any_of(type.getShape().take_front(dim),
                     [](int64_t size) { return size != 1; }))
      continue;
    int64_t sliceBytes = nn::detail::elementBytes(type.getElementType());
    for (int64_t size : type.getShape().drop_front(dim + 1))
      sliceBytes *= size;
    DenseMap<Value, unsigned> uses;
    for (Value input : concat.getInputs())
      ++uses[views::viewedBase(input)];
    int64_t position = 0;
    for (Value input : concat.getInputs()) {
      int64_t offset = position * sliceBytes;
      position += cast<RankedTensorType>(input.getType()).getDimSize(dim);
      Value value = views::viewedBase(input);
      if (uses[value] == 1 &&
          offset % memory_plan::kInPlaceInputAlignment == 0 &&
          ownsFreshBuffer(value, body, viewOps) && !slots.contains(value) &&
          readNoLaterThan(value, concat))
        slots[value] = {concat.getResult(), offset};
    }
  }
  return slots;
}

/// The values that must be alive at `op`: its operands and, at an nn.wait,
/// the input its collective reads until it completes.
SmallVector<Value> liveOperands(Operation *op) {
  SmallVector<Value> values(op->getOperands());
  if (auto wait = dyn_cast<nn::WaitOp>(op))
    if (Operation *collective = wait.getInput().getDefiningOp())
      values.push_back(collective->getOperand(0));
  return values;
}

class FunctionPlanner {
public:
  /// Plans `func` (and first every layer it repeats). Fails with a
  /// diagnostic on an op the plan does not know.
  LogicalResult plan(func::FuncOp func) {
    if (func.isExternal() || planned.contains(func))
      return success();
    planned.insert(func);
    Block &body = func.getBody().front();
    SmallVector<Buffer> buffers;
    DenseMap<Value, unsigned> bufferOf;
    // A value inside a larger buffer (a concat's input computed in place):
    // its byte offset there; 0 for every other value.
    DenseMap<Value, int64_t> subOffsetOf;
    SmallVector<Value> ownerOf; // per buffer, the value it was made for
    DenseMap<Operation *, unsigned> workspaceOf;
    DenseMap<Operation *, int64_t> viewOffsets = planViews(body);
    DenseMap<Value, ConcatSlot> concatSlots =
        inPlaceConcatInputs(body, viewOffsets);
    DenseMap<Value, unsigned> concatBufferOf; // by the concat's result
    // `to` is `from`'s bytes (a view, an update in place, a collective's
    // result over its input).
    auto alias = [&](Value from, Value to) {
      if (auto it = bufferOf.find(from); it != bufferOf.end()) {
        unsigned buffer = it->second; // before the insertion moves `it`
        bufferOf[to] = buffer;
        if (int64_t offset = subOffsetOf.lookup(from))
          subOffsetOf[to] = offset;
      }
    };
    // `result` updates `init` in place: it is the init's bytes (none of
    // the function's when the init is an argument's), which nothing may
    // read after the update.
    DenseSet<Value> updatedInPlace;
    auto updateInPlace = [&](OpOperand &init, Value result) -> LogicalResult {
      Operation *op = init.getOwner();
      for (Operation *user : init.get().getUsers())
        if (user != op && op->isBeforeInBlock(user))
          return op->emitOpError()
                 << "updates operand #" << init.getOperandNumber()
                 << " in place, but a later op still reads it";
      updatedInPlace.insert(result);
      alias(init.get(), result);
      return success();
    };
    int64_t index = 0;
    for (Operation &op : body.getOperations()) {
      for (Value operand : liveOperands(&op))
        if (auto it = bufferOf.find(operand); it != bufferOf.end())
          buffers[it->second].end = std::max(buffers[it->second].end, index);
      if (op.hasTrait<OpTrait::IsTerminator>()) {
        if (failed(checkInFlightResults(func, op)))
          return failure();
        ++index;
        continue;
      }
      bool collective = communication::isLowerableCollective(&op);
      if (!collective && !isa<nn::NNDialect>(op.getDialect()))
        return op.emitOpError()
               << "cannot be placed in a static arena; only nn ops and shard "
                  "collectives lower to the runtime";
      if (collective && failed(communication::verifyLowerableCollective(&op)))
        return failure();
      bool inPlace = false;
      if (auto reduce = dyn_cast<shard::AllReduceOp>(op))
        inPlace = reducesInPlace(reduce, bufferOf, ownerOf);
      if (collective && failed(checkWaits(&op, inPlace)))
        return failure();
      if (inPlace) {
        auto reduce = cast<shard::AllReduceOp>(op);
        // The runtime all-reduces in place (in == out): the sum takes its
        // input's bytes, which nothing reads afterwards.
        alias(reduce.getInput(), reduce.getResult());
        ownerOf[bufferOf.lookup(reduce.getInput())] = reduce.getResult();
        ++index;
        continue;
      }
      if (auto wait = dyn_cast<nn::WaitOp>(op)) {
        // The collective's result, complete: its bytes, owned by the wait's
        // result from here on (returned, it is the caller's memory).
        if (bufferOf.contains(wait.getInput())) {
          alias(wait.getInput(), wait.getResult());
          ownerOf[bufferOf.lookup(wait.getInput())] = wait.getResult();
        }
        ++index;
        continue;
      }
      if (auto reshape = dyn_cast<nn::ReshapeOp>(op)) {
        // A view: the result is its operand's bytes.
        alias(reshape.getInput(), reshape.getResult());
        ++index;
        continue;
      }
      if (auto view = viewOffsets.find(&op); view != viewOffsets.end()) {
        // A contiguous slice: those bytes of its operand; a broadcast: its
        // operand's bytes, which its readers read until they are done.
        Value input = op.getOperand(0), result = op.getResult(0);
        alias(input, result);
        if (bufferOf.contains(input))
          subOffsetOf[result] = subOffsetOf.lookup(input) + view->second;
        ++index;
        continue;
      }
      // Updated in place: such a result is its operand's bytes, which must
      // not be read after the update.
      for (OpResult result : op.getResults())
        if (OpOperand *init = updatedOperand(result))
          if (failed(updateInPlace(*init, result)))
            return failure();
      if (auto repeat = dyn_cast<nn::RepeatOp>(op)) {
        func::FuncOp layer = repeat.getLayerFunction();
        if (!layer || failed(plan(layer)))
          return failure();
        // The layer's scratch, which its finish (run between layers)
        // shares.
        int64_t bytes = layerScratch(layer);
        func::FuncOp finish = repeat.getFinishFunction();
        if (finish) {
          if (failed(plan(finish)))
            return failure();
          bytes = std::max(bytes, layerScratch(finish));
        }
        for (Value carried : repeat.getCarried())
          bytes = memory_plan::addBytes(
              bytes, alignUp(nn::detail::tensorBytes(carried.getType())));
        // Two slots of what the prefetch gathers (this layer's and the
        // next one's) and of what the layer returns in flight (this
        // layer's and the previous one's, until its finish).
        auto addSlots = [&](TypeRange types) {
          for (Type type : types)
            bytes = memory_plan::addBytes(
                bytes,
                memory_plan::addBytes(alignUp(nn::detail::tensorBytes(type)),
                                      alignUp(nn::detail::tensorBytes(type))));
        };
        if (func::FuncOp prefetch = repeat.getPrefetchFunction()) {
          if (failed(plan(prefetch)))
            return failure();
          addSlots(prefetch.getFunctionType().getResults());
        }
        if (finish)
          addSlots(
              finish.getArgumentTypes().take_front(repeat.getNumInFlight()));
        workspaceOf[&op] = buffers.size();
        buffers.push_back({bytes, index, index});
        ownerOf.push_back(Value());
        if (failed(checkOutsUpdatedInPlace(repeat, layer,
                                           repeat.getCarried().size() +
                                               repeat.getParams().size(),
                                           repeat.getCarried().size())) ||
            (finish && failed(checkOutsUpdatedInPlace(
                           repeat, finish, repeat.getNumInFlight(), 0))))
          return failure();
      }
      for (Value result : op.getResults()) {
        if (updatedInPlace.contains(result))
          continue;
        // A concat's input computed in place: inside the concat's buffer,
        // which the first such input opens.
        if (auto slot = concatSlots.find(result); slot != concatSlots.end()) {
          Value concat = slot->second.concat;
          auto [it, opened] =
              concatBufferOf.try_emplace(concat, buffers.size());
          if (opened) {
            buffers.push_back(
                {alignUp(nn::detail::tensorBytes(concat.getType())), index,
                 index});
            ownerOf.push_back(concat);
          }
          bufferOf[result] = it->second;
          subOffsetOf[result] = slot->second.byteOffset;
          continue;
        }
        if (auto it = concatBufferOf.find(result); it != concatBufferOf.end()) {
          bufferOf[result] = it->second;
          continue;
        }
        bufferOf[result] = buffers.size();
        buffers.push_back({alignUp(nn::detail::tensorBytes(result.getType())),
                           index, index});
        ownerOf.push_back(result);
      }
      ++index;
    }
    // A value returned from a buffer of its own is computed straight into
    // the caller's memory for that result: no scratch, no copy at the
    // return. (The caller's result memory never aliases an argument still
    // read: a repeat alternates its carried buffers.)
    DenseMap<unsigned, int64_t> resultOf; // buffer -> result index
    for (auto [position, value] :
         llvm::enumerate(body.getTerminator()->getOperands())) {
      auto it = bufferOf.find(value);
      if (it != bufferOf.end() && ownerOf[it->second] == value &&
          !resultOf.contains(it->second)) {
        resultOf[it->second] = static_cast<int64_t>(position);
        buffers[it->second].bytes = 0;
      }
    }
    int64_t peak = placeBuffers(buffers);
    // Saturated sizes would otherwise become offsets past 2^63 (or a
    // wrapped, zero-byte arena the model then writes past).
    if (peak >= memory_plan::kBytesOverflow)
      return func.emitOpError()
             << "needs a scratch arena that does not fit in int64 bytes";
    lowerBounds[func] = liveBytesBound(buffers);

    Builder builder(func.getContext());
    for (Operation &op : body.getOperations()) {
      if (op.getNumResults() == 0)
        continue;
      SmallVector<int64_t> offsets, subOffsets;
      for (Value result : op.getResults()) {
        auto it = bufferOf.find(result);
        int64_t subOffset = subOffsetOf.lookup(result);
        subOffsets.push_back(0);
        if (it == bufferOf.end()) {
          offsets.push_back(memory_plan::kArgumentView);
        } else if (auto returned = resultOf.find(it->second);
                   returned != resultOf.end()) {
          offsets.push_back(memory_plan::resultOffset(returned->second));
          subOffsets.back() = subOffset;
        } else {
          offsets.push_back(buffers[it->second].offset + subOffset);
        }
      }
      op.setAttr(memory_plan::kOffsetsAttr,
                 builder.getDenseI64ArrayAttr(offsets));
      if (llvm::any_of(subOffsets, [](int64_t offset) { return offset != 0; }))
        op.setAttr(memory_plan::kSubOffsetsAttr,
                   builder.getDenseI64ArrayAttr(subOffsets));
      if (auto concat = dyn_cast<nn::ConcatOp>(op)) {
        SmallVector<bool> inPlace;
        for (Value input : concat.getInputs())
          inPlace.push_back(
              concatSlots.lookup(views::viewedBase(input)).concat ==
              concat.getResult());
        if (llvm::is_contained(inPlace, true))
          op.setAttr(memory_plan::kInPlaceInputsAttr,
                     builder.getDenseBoolArrayAttr(inPlace));
      }
      if (viewOffsets.contains(&op))
        op.setAttr(memory_plan::kViewAttr, builder.getUnitAttr());
      if (auto it = workspaceOf.find(&op); it != workspaceOf.end())
        op.setAttr(memory_plan::kWorkspaceAttr,
                   builder.getI64IntegerAttr(buffers[it->second].offset));
    }
    func->setAttr(memory_plan::kScratchBytesAttr,
                  builder.getI64IntegerAttr(peak));
    return success();
  }

  /// A repeat's outs result is its operand's memory, which the caller
  /// passes to the layer (and to its finish) as both the slice argument
  /// and the result: `func` must return that slice updated in place
  /// (through destination-style ops and views), or untouched, never a
  /// value computed elsewhere into memory the slice argument still holds.
  /// Its slice arguments start at `firstArg`, the results at
  /// `firstResult`.
  static LogicalResult checkOutsUpdatedInPlace(nn::RepeatOp repeat,
                                               func::FuncOp func,
                                               unsigned firstArg,
                                               unsigned firstResult) {
    Block &body = func.getBody().front();
    for (unsigned i = 0; i < repeat.getOuts().size(); ++i) {
      Value value = body.getTerminator()->getOperand(firstResult + i);
      while (auto result = dyn_cast<OpResult>(value)) {
        if (auto reshape = dyn_cast<nn::ReshapeOp>(result.getOwner()))
          value = reshape.getInput();
        else if (OpOperand *init = updatedOperand(result))
          value = init->get();
        else
          break;
      }
      if (value != body.getArgument(firstArg + i))
        return repeat.emitOpError()
               << "updates outs #" << i << " in place, but @"
               << func.getSymName() << " returns for it a value that is not "
               << "its slice argument #" << firstArg + i << " updated in place";
    }
    return success();
  }

  /// Whether an all-reduce can sum into its input's buffer: the input has
  /// a scratch buffer of its own (not an argument's, nor one it shares with
  /// a value read after the reduction: a view, or the concat input computed
  /// there) and no later op reads it.
  static bool reducesInPlace(shard::AllReduceOp reduce,
                             const DenseMap<Value, unsigned> &bufferOf,
                             ArrayRef<Value> ownerOf) {
    Value input = reduce.getInput();
    auto it = bufferOf.find(input);
    if (it == bufferOf.end() || ownerOf[it->second] != input)
      return false;
    for (auto [value, buffer] : bufferOf)
      if (buffer == it->second && value != input &&
          !llvm::all_of(value.getUsers(), [&](Operation *user) {
            return user->getBlock() == reduce->getBlock() &&
                   user->isBeforeInBlock(reduce);
          }))
        return false;
    return llvm::all_of(input.getUsers(), [&](Operation *user) {
      return user == reduce.getOperation() ||
             user->isBeforeInBlock(reduce.getOperation());
    });
  }

  /// An asynchronous collective's result is read only through its wait
  /// (nn.wait verifies that it follows the collective in its block), or
  /// returned in flight: by a prefetch (its repeat's layer waits for it),
  /// or by a layer as a result marked nn.in_flight (its repeat's finish
  /// waits for it). A layer's caller reuses the layer's scratch before the
  /// finish, so what it returns in flight must read no scratch: an
  /// all-reduce that sums in place, in the result's own memory.
  static LogicalResult checkWaits(Operation *collective, bool inPlace) {
    if (!collective->hasAttr(nn::NNDialect::kAsyncAttrName))
      return success();
    Value result = collective->getResult(0);
    auto func = collective->getParentOfType<func::FuncOp>();
    if (func && !result.use_empty() &&
        llvm::all_of(result.getUses(), [&](OpOperand &use) {
          return use.getOwner()->hasTrait<OpTrait::IsTerminator>() &&
                 (func->hasAttr(nn::NNDialect::kPrefetchAttrName) ||
                  func.getResultAttr(use.getOperandNumber(),
                                     nn::NNDialect::kInFlightAttrName));
        })) {
      if (func->hasAttr(nn::NNDialect::kPrefetchAttrName) || inPlace)
        return success();
      return collective->emitOpError()
             << "is returned in flight, but the layer's scratch that it "
                "reads is reused before its finish: only an all-reduce of a "
                "buffer of its own (summed in place) can be";
    }
    if (result.use_empty())
      return collective->emitOpError()
             << "is asynchronous but nothing waits for it (an nn.wait on its "
                "result completes it)";
    for (Operation *user : result.getUsers())
      if (!isa<nn::WaitOp>(user))
        return collective->emitOpError()
               << "is asynchronous, so its result may only be read through "
                  "nn.wait, not by '"
               << user->getName() << "'";
    return success();
  }

  /// A result marked nn.in_flight is a started collective's, returned
  /// before its wait (the finish's nn.wait completes it).
  static LogicalResult checkInFlightResults(func::FuncOp func,
                                            Operation &terminator) {
    for (OpOperand &operand : terminator.getOpOperands()) {
      if (!func.getResultAttr(operand.getOperandNumber(),
                              nn::NNDialect::kInFlightAttrName))
        continue;
      Operation *def = operand.get().getDefiningOp();
      if (!def || !def->hasAttr(nn::NNDialect::kAsyncAttrName))
        return terminator.emitOpError()
               << "returns result #" << operand.getOperandNumber()
               << ", marked '" << nn::NNDialect::kInFlightAttrName
               << "', but not from an asynchronous collective (a shard "
                  "collective marked '"
               << nn::NNDialect::kAsyncAttrName << "')";
    }
    return success();
  }

  static int64_t layerScratch(func::FuncOp layer) {
    auto attr =
        layer->getAttrOfType<IntegerAttr>(memory_plan::kScratchBytesAttr);
    return attr ? attr.getInt() : 0;
  }

  /// Per planned function, the most bytes alive at once (the peak's floor).
  DenseMap<Operation *, int64_t> lowerBounds;

private:
  DenseSet<Operation *> planned;
};

struct PlanMemoryPass : public tessel::impl::PlanMemoryPassBase<PlanMemoryPass> {
  using Base::Base;

  void runOnOperation() override {
    FunctionPlanner planner;
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (failed(planner.plan(func)))
        return signalPassFailure();
    }
    if (report)
      for (auto func : getOperation().getOps<func::FuncOp>())
        if (!func.isExternal())
          func.emitRemark() << "scratch peak of @" << func.getSymName() << ": "
                            << FunctionPlanner::layerScratch(func)
                            << " bytes (live bytes at most "
                            << planner.lowerBounds.lookup(func) << ")";
  }
};

} // namespace
