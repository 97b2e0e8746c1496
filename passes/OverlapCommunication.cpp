//===- OverlapCommunication.cpp - tessel-overlap-communication ------------===//
//
// Turns blocking collectives into started ones (nn.async) completed by an
// nn.wait, so that the kernels between the two run while the data moves.
// Two kinds, each with its own window of `in-flight` collectives:
//
//   computed    the input is computed in the function (a gradient bucket, a
//               ZeRO reduce-scatter): start as soon as the input is ready,
//               wait before the result is needed or the window is full;
//   prefetched  the input is the function's arguments only (a ZeRO-3
//               parameter gather): start when the window has room, in the
//               order of need, wait just before the first use.
//
// Collective order may change; every rank runs the same function, so the
// members of every group still issue their calls in one order.
//
//===----------------------------------------------------------------------===//

#include "passes/Communication.h"
#include "passes/Passes.h"
#include "passes/Views.h"

#include "dialect/NN/NNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace tessel {
#define GEN_PASS_DEF_OVERLAPCOMMUNICATIONPASS
#include "passes/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;

namespace {

/// The collectives that move data and so can overlap compute.
bool isOverlappable(Operation *op) {
  return isa<shard::AllReduceOp, shard::AllGatherOp, shard::ReduceScatterOp,
             shard::AllToAllOp>(op) &&
         !op->hasAttr(nn::NNDialect::kAsyncAttrName) &&
         !op->getResult(0).use_empty();
}

/// Ops that only view or copy data around a collective: they move with it.
bool isView(Operation *op) { return isa<nn::ReshapeOp, nn::SliceOp>(op); }


/// The first op after `from` in its block that satisfies `pred` (the
/// terminator when none does).
template <typename Pred> Operation *firstAfter(Operation *from, Pred pred) {
  for (Operation *op = from->getNextNode(); op; op = op->getNextNode())
    if (pred(op) || op->hasTrait<OpTrait::IsTerminator>())
      return op;
  llvm_unreachable("a block ends with its terminator");
}

/// The earlier of two ops of one block.
Operation *earlier(Operation *a, Operation *b) {
  return a->isBeforeInBlock(b) ? a : b;
}

/// Whether `op` reads or writes the memory of the collective's input (other
/// than the reshapes that only view it).
bool touchesInput(Operation *op, ArrayRef<Value> inputAliases) {
  if (isa<nn::ReshapeOp>(op))
    return false;
  return llvm::any_of(op->getOperands(), [&](Value operand) {
    return llvm::is_contained(inputAliases, operand);
  });
}

/// The first op after `op` that uses `value` (the terminator when none).
Operation *firstUseAfter(Operation *op, Value value) {
  return firstAfter(op, [&](Operation *other) {
    return llvm::is_contained(other->getOperands(), value);
  });
}

/// Moves the slices and reshapes of `value` (transitively) down to their
/// first use, last user first, so that `value` is needed as late as the
/// program needs it.
void sinkViewsOf(Value value, Block &block) {
  SmallVector<Operation *> views;
  SmallVector<Value> worklist{value};
  while (!worklist.empty()) {
    Value next = worklist.pop_back_val();
    for (Operation *user : next.getUsers())
      if (isView(user) && user->getBlock() == &block &&
          !llvm::is_contained(views, user)) {
        views.push_back(user);
        worklist.push_back(user->getResult(0));
      }
  }
  llvm::sort(views,
             [](Operation *a, Operation *b) { return b->isBeforeInBlock(a); });
  for (Operation *view : views) {
    Operation *use = firstUseAfter(view, view->getResult(0));
    if (use != view->getNextNode())
      view->moveBefore(use);
  }
}

/// Sorts collectives by where their result is first needed (ties keep the
/// block's order), each need found once.
void sortByNeed(SmallVectorImpl<Operation *> &collectives) {
  SmallVector<std::pair<Operation *, Operation *>> needs; // (need, op)
  for (Operation *op : collectives)
    needs.push_back({firstUseAfter(op, op->getResult(0)), op});
  llvm::stable_sort(needs, [](const auto &a, const auto &b) {
    return a.first != b.first && a.first->isBeforeInBlock(b.first);
  });
  for (auto [i, entry] : llvm::enumerate(needs))
    collectives[i] = entry.second;
}

class BlockScheduler {
public:
  BlockScheduler(Block &block, int64_t inFlight)
      : block(block), inFlight(inFlight) {}

  void run() {
    SmallVector<Operation *> computed, prefetched;
    for (Operation &op : block)
      if (isOverlappable(&op))
        (isPrefetch(&op) ? prefetched : computed).push_back(&op);
    for (Operation *op : computed)
      startEarly(op);
    for (Operation *op : llvm::concat<Operation *>(computed, prefetched))
      sinkViewsOf(op->getResult(0), block);
    // Waits first, against the starts as they stand; then the prefetches
    // move to their window (after the waits placed at the same op).
    SmallVector<Operation *> computedWaits = computedWaitPoints(computed);
    llvm::sort(prefetched, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    sortByNeed(prefetched);
    // A prefetch never moves past an op that touches its input, and
    // completes before one.
    SmallVector<Operation *> prefetchWaits, touches;
    for (Operation *op : prefetched) {
      touches.push_back(firstTouch(op));
      prefetchWaits.push_back(earlier(firstUse(op), touches.back()));
    }
    for (auto [op, waitPoint] : llvm::zip(computed, computedWaits))
      makeAsync(op, waitPoint);
    // The first `inFlight` start together where the first of them stood, in
    // the order of need; each later one where its window opens.
    Operation *top = nullptr;
    for (Operation *op : prefetched)
      if (!top || op->isBeforeInBlock(top))
        top = op;
    Operation *previous = top ? top->getPrevNode() : nullptr;
    for (auto [j, op] : llvm::enumerate(prefetched)) {
      if (j < size_t(inFlight)) {
        if (previous)
          op->moveAfter(previous);
        else if (op != &block.front())
          op->moveBefore(&block.front());
        previous = op;
      } else if (Operation *window = prefetchWaits[j - size_t(inFlight)];
                 !touches[j]->isBeforeInBlock(window)) {
        op->moveBefore(window);
      }
      makeAsync(op, prefetchWaits[j]);
    }
  }

private:
  /// A collective of the block's arguments alone.
  bool isPrefetch(Operation *op) {
    return llvm::all_of(op->getOperands(), [&](Value operand) {
      auto arg = dyn_cast<BlockArgument>(operand);
      return arg && arg.getOwner() == &block;
    });
  }

  /// Moves a computed collective (and the reshapes that feed it) up to just
  /// after the definition of its input. Ties keep the block's order: the
  /// collective goes after what already moved there.
  void startEarly(Operation *op) {
    Value input = op->getOperand(0);
    if (auto reshape = input.getDefiningOp<nn::ReshapeOp>();
        reshape && reshape->getBlock() == &block)
      startEarly(reshape);
    Operation *def = input.getDefiningOp();
    if (!def || def->getBlock() != &block)
      return;
    Operation *after = def;
    while (after->getNextNode() != op && moved.contains(after->getNextNode()))
      after = after->getNextNode();
    if (after != op && after->getNextNode() != op)
      op->moveAfter(after);
    moved.insert(op);
  }

  /// The first op after `op` that uses its result.
  static Operation *firstUse(Operation *op) {
    return firstUseAfter(op, op->getResult(0));
  }

  /// The first op after `op` that touches the memory of its input.
  static Operation *firstTouch(Operation *op) {
    SmallVector<Value> inputAliases = views::readersOfMemory(op->getOperand(0));
    return firstAfter(op, [&](Operation *other) {
      return touchesInput(other, inputAliases);
    });
  }

  /// Where each computed collective must have completed: before its result
  /// is needed, before its input is touched again, and before the start of
  /// the collective `inFlight` places after it.
  SmallVector<Operation *> computedWaitPoints(ArrayRef<Operation *> computed) {
    SmallVector<Operation *> sorted(computed);
    llvm::sort(sorted, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    SmallVector<Operation *> points;
    for (Operation *op : computed) {
      Operation *point = earlier(firstUse(op), firstTouch(op));
      size_t position = llvm::find(sorted, op) - sorted.begin();
      if (position + size_t(inFlight) < sorted.size())
        point = earlier(point, sorted[position + size_t(inFlight)]);
      points.push_back(point);
    }
    return points;
  }

  /// Marks `op` asynchronous with its wait before `waitPoint`, if any
  /// compute runs in between; otherwise it stays blocking.
  void makeAsync(Operation *op, Operation *waitPoint) {
    if (!op->isBeforeInBlock(waitPoint))
      return;
    bool overlaps = false;
    for (Operation *between = op->getNextNode(); between != waitPoint;
         between = between->getNextNode())
      overlaps |= communication::isOverlapCover(*between);
    if (!overlaps)
      return;
    Value result = op->getResult(0);
    OpBuilder builder(waitPoint);
    auto wait = nn::WaitOp::create(builder, op->getLoc(), result);
    result.replaceAllUsesExcept(wait.getResult(), wait);
    op->setAttr(nn::NNDialect::kAsyncAttrName, builder.getUnitAttr());
  }

  Block &block;
  int64_t inFlight;
  llvm::SmallPtrSet<Operation *, 16> moved;
};

/// The layer functions that only nn.repeat ops call (as their layer), with
/// those repeats: a pass may change such a layer's signature and its
/// repeats together.
llvm::MapVector<func::FuncOp, SmallVector<nn::RepeatOp>>
onlyRepeatedLayers(ModuleOp module) {
  llvm::MapVector<func::FuncOp, SmallVector<nn::RepeatOp>> repeatsOf;
  module.walk([&](nn::RepeatOp repeat) {
    if (func::FuncOp layer = repeat.getLayerFunction())
      repeatsOf[layer].push_back(repeat);
  });
  llvm::MapVector<func::FuncOp, SmallVector<nn::RepeatOp>> result;
  for (auto &entry : repeatsOf) {
    // Named copies: clang before 16 cannot capture structured bindings.
    func::FuncOp layer = entry.first;
    const SmallVector<nn::RepeatOp> &repeats = entry.second;
    std::optional<SymbolTable::UseRange> uses = layer.getSymbolUses(module);
    if (!uses)
      continue;
    bool onlyAsLayer =
        llvm::all_of(*uses, [&](const SymbolTable::SymbolUse &use) {
          auto repeat = dyn_cast<nn::RepeatOp>(use.getUser());
          return repeat && llvm::is_contained(repeats, repeat) &&
                 repeat.getLayer() == layer.getSymName() &&
                 repeat.getPrefetch() != layer.getSymName() &&
                 repeat.getFinish() != layer.getSymName();
        });
    if (onlyAsLayer)
      result.insert({layer, repeats});
  }
  return result;
}

/// Moves the collectives of a repeated layer's parameter slices into a
/// prefetch function that its repeats run one layer ahead (nn.repeat's
/// `prefetch`): the layer function takes their results as arguments
/// (nn.prefetched) and waits for them where it first needs them.
class LayerPrefetcher {
public:
  explicit LayerPrefetcher(ModuleOp module) : module(module), symbols(module) {}

  void run() {
    for (auto &[layer, repeats] : onlyRepeatedLayers(module))
      if (llvm::none_of(repeats, [](nn::RepeatOp repeat) {
            return repeat.getPrefetchAttr();
          }))
        prefetch(layer, repeats);
  }

private:
  void prefetch(func::FuncOp layer, ArrayRef<nn::RepeatOp> repeats) {
    Block &body = layer.getBody().front();
    nn::RepeatOp some = repeats.front();
    unsigned first = some.getCarried().size();
    unsigned numParams = some.getParams().size();
    // A slice the layer updates in place would be read by the prefetch
    // before the update; it is gathered where it stands.
    auto isSlice = [&](Value value) {
      auto arg = dyn_cast<BlockArgument>(value);
      return arg && arg.getOwner() == &body && arg.getArgNumber() >= first &&
             arg.getArgNumber() < first + numParams &&
             llvm::none_of(arg.getUses(), [](OpOperand &use) {
               auto dps = dyn_cast<DestinationStyleOpInterface>(use.getOwner());
               return dps && dps.isDpsInit(&use);
             });
    };
    SmallVector<Operation *> moved;
    for (Operation &op : body)
      if (isOverlappable(&op) && llvm::all_of(op.getOperands(), isSlice))
        moved.push_back(&op);
    if (moved.empty())
      return;
    // Started in the order the layer needs them (past the views).
    for (Operation *op : moved)
      sinkViewsOf(op->getResult(0), body);
    sortByNeed(moved);

    // The prefetch: the collectives, started, their results returned.
    OpBuilder builder(layer);
    builder.setInsertionPointAfter(layer);
    SmallVector<Type> sliceTypes(
        layer.getArgumentTypes().slice(first, numParams));
    SmallVector<Type> resultTypes;
    for (Operation *op : moved)
      resultTypes.push_back(op->getResult(0).getType());
    auto prefetch = func::FuncOp::create(
        builder, layer.getLoc(), (layer.getSymName() + "_prefetch").str(),
        builder.getFunctionType(sliceTypes, resultTypes));
    prefetch.setPrivate();
    prefetch->setAttr(nn::NNDialect::kPrefetchAttrName, builder.getUnitAttr());
    symbols.insert(prefetch); // renamed if the name is taken
    Block *entry = prefetch.addEntryBlock();
    IRMapping mapping;
    for (unsigned i = 0; i < numParams; ++i)
      mapping.map(body.getArgument(first + i), entry->getArgument(i));
    OpBuilder inPrefetch = OpBuilder::atBlockEnd(entry);
    SmallVector<Value> started;
    for (Operation *op : moved) {
      Operation *copy = inPrefetch.clone(*op, mapping);
      copy->setAttr(nn::NNDialect::kAsyncAttrName, builder.getUnitAttr());
      started.push_back(copy->getResult(0));
    }
    func::ReturnOp::create(inPrefetch, layer.getLoc(), started);

    // The layer: each result arrives as an argument, waited for at its
    // first use.
    auto prefetched = builder.getDictionaryAttr(builder.getNamedAttr(
        nn::NNDialect::kPrefetchedAttrName, builder.getUnitAttr()));
    for (Operation *op : moved) {
      Value result = op->getResult(0);
      unsigned index = layer.getNumArguments();
      (void)layer.insertArgument(index, result.getType(), prefetched,
                                 op->getLoc());
      Operation *use = firstUseAfter(op, result);
      OpBuilder atUse(use);
      auto wait =
          nn::WaitOp::create(atUse, op->getLoc(), body.getArgument(index));
      result.replaceAllUsesWith(wait.getResult());
      op->erase();
    }
    for (nn::RepeatOp repeat : repeats)
      repeat.setPrefetchAttr(FlatSymbolRefAttr::get(prefetch.getSymNameAttr()));
  }

  ModuleOp module;
  SymbolTable symbols;
};

/// Where a repeated layer's outs slices are: its arguments from `firstArg`
/// and its results from `firstResult`, `size` of each.
struct OutsSlices {
  unsigned firstArg, firstResult, size;

  /// The index of the outs whose slice argument is `value`, if it is one.
  std::optional<unsigned> outsOf(Value value) const {
    auto arg = dyn_cast<BlockArgument>(value);
    if (!arg || arg.getArgNumber() < firstArg ||
        arg.getArgNumber() >= firstArg + size)
      return std::nullopt;
    return arg.getArgNumber() - firstArg;
  }
};

/// What completes a collective's result in the layer: the views of it and
/// the accumulates of those into outs slices, which move to the finish.
struct Unpacking {
  SmallVector<Operation *> views;
  /// Accumulates into an outs slice, each the value the layer returns for
  /// that slice (tessel-accumulate-in-layers: a bucket's gradient summed
  /// into its buffer).
  SmallVector<nn::AccumulateOp> accumulates;

  bool contains(Operation *op) const {
    return llvm::is_contained(views, op) ||
           llvm::any_of(accumulates, [&](nn::AccumulateOp accumulate) {
             return accumulate.getOperation() == op;
           });
  }
  void append(const Unpacking &other) {
    llvm::append_range(views, other.views);
    llvm::append_range(accumulates, other.accumulates);
  }
};

/// Defers the completion of a repeated layer's last collectives past its
/// return (nn.repeat's `finish`). A gradient bucket that fills at the end
/// of a layer's backward has no compute left in the layer to hide behind;
/// the layer returns it in flight (nn.in_flight) into a slot of its
/// repeat, and a finish function (nn.finish) that the repeat runs after
/// the next layer waits for it and unpacks it into the layer's outputs, or
/// sums its gradients into their outs slices: the bucket's all-reduce
/// overlaps the next layer's backward, as PyTorch DDP's buckets overlap the
/// rest of the backward.
class LayerFinisher {
public:
  LayerFinisher(ModuleOp module, int64_t inFlight)
      : module(module), symbols(module), inFlight(inFlight) {}

  void run() {
    for (auto &[layer, repeats] : onlyRepeatedLayers(module)) {
      if (llvm::any_of(repeats, [](nn::RepeatOp repeat) {
            return repeat.getFinishAttr();
          }))
        continue;
      nn::RepeatOp some = repeats.front();
      unsigned numCarried = some.getCarried().size();
      OutsSlices outs{numCarried + unsigned(some.getParams().size()),
                      numCarried, unsigned(some.getOuts().size())};
      // The last started first, at most `inFlight` of them; what a later
      // one's finish runs does not keep an earlier one in the layer.
      SmallVector<Operation *> deferred;
      Unpacking toFinish; // the deferred collectives' unpacking
      Block &body = layer.getBody().front();
      for (Operation &op : llvm::reverse(body)) {
        if (deferred.size() == size_t(inFlight))
          break;
        std::optional<Unpacking> unpacking =
            deferrable(&op, numCarried, outs, toFinish);
        if (!unpacking)
          continue;
        deferred.push_back(&op);
        toFinish.append(*unpacking);
      }
      if (deferred.empty())
        continue;
      llvm::sort(deferred, [](Operation *a, Operation *b) {
        return a->isBeforeInBlock(b);
      });
      finish(layer, repeats, deferred, std::move(toFinish), outs);
    }
  }

private:
  /// Where `op` completes in the layer: its nn.wait, or itself when it
  /// blocks.
  static Operation *completion(Operation *op) {
    Value result = op->getResult(0);
    if (result.hasOneUse())
      if (auto wait = dyn_cast<nn::WaitOp>(*result.getUsers().begin()))
        return wait;
    return op;
  }

  /// Whether `accumulate` sums into an outs slice and its result is what
  /// the layer returns for that slice, and only that.
  static bool accumulatesIntoOuts(nn::AccumulateOp accumulate,
                                  const OutsSlices &outs) {
    std::optional<unsigned> index = outs.outsOf(accumulate.getAcc());
    if (!index || !accumulate.getResult().hasOneUse())
      return false;
    OpOperand &use = *accumulate.getResult().getUses().begin();
    return use.getOwner()->hasTrait<OpTrait::IsTerminator>() &&
           use.getOperandNumber() == outs.firstResult + *index;
  }

  /// The views of `op`'s completed result, transitively, and the
  /// accumulates of them into outs slices; none when the result feeds
  /// anything else but the terminator.
  static std::optional<Unpacking> unpackingOf(Operation *op,
                                              const OutsSlices &outs) {
    Unpacking unpacking;
    SmallVector<Value> worklist{completion(op)->getResult(0)};
    while (!worklist.empty()) {
      for (OpOperand &use : worklist.pop_back_val().getUses()) {
        Operation *user = use.getOwner();
        if (user->hasTrait<OpTrait::IsTerminator>() || unpacking.contains(user))
          continue;
        auto accumulate = dyn_cast<nn::AccumulateOp>(user);
        if (accumulate && use.get() == accumulate.getValue() &&
            accumulatesIntoOuts(accumulate, outs)) {
          unpacking.accumulates.push_back(accumulate);
          continue;
        }
        if (!isView(user))
          return std::nullopt;
        unpacking.views.push_back(user);
        worklist.push_back(user->getResult(0));
      }
    }
    return unpacking;
  }

  /// An all-reduce the layer can return in flight: it sums a buffer of its
  /// own in place (the repeat's slot then holds it until the finish), no
  /// compute but its unpacking follows its completion in the layer, and
  /// only views of its result reach the terminator, as per-layer outputs
  /// (never a carried value, which the next layer needs at once) or summed
  /// into outs slices. Ops in `toFinish` (a later collective's unpacking,
  /// deferred too) move out of the layer and do not count. Returns the
  /// collective's unpacking.
  std::optional<Unpacking> deferrable(Operation *op, unsigned numCarried,
                                      const OutsSlices &outs,
                                      const Unpacking &toFinish) {
    auto reduce = dyn_cast<shard::AllReduceOp>(op);
    if (!reduce || reduce.getResult().use_empty())
      return std::nullopt;
    Operation *def = reduce.getInput().getDefiningOp();
    if (!def || def->getBlock() != op->getBlock() || isView(def) ||
        !reduce.getInput().hasOneUse())
      return std::nullopt;
    std::optional<Unpacking> unpacking = unpackingOf(op, outs);
    if (!unpacking)
      return std::nullopt;
    Operation *done = completion(op);
    for (Operation *after = done->getNextNode(); after;
         after = after->getNextNode())
      if (communication::isOverlapCover(*after) &&
          !unpacking->contains(after) && !toFinish.contains(after))
        return std::nullopt;
    Operation *terminator = op->getBlock()->getTerminator();
    for (OpOperand &operand : terminator->getOpOperands())
      if (operand.getOperandNumber() < numCarried &&
          (operand.get() == done->getResult(0) ||
           llvm::is_contained(unpacking->views, operand.get().getDefiningOp())))
        return std::nullopt;
    return unpacking;
  }

  /// Moves `deferred`'s completions and their `unpacking` (the views of
  /// their results and the accumulates of those into outs slices) into a
  /// new finish function, with the per-layer outputs the views give.
  void finish(func::FuncOp layer, ArrayRef<nn::RepeatOp> repeats,
              ArrayRef<Operation *> deferred, Unpacking unpacking,
              const OutsSlices &outs) {
    Block &body = layer.getBody().front();
    Operation *terminator = body.getTerminator();
    nn::RepeatOp some = repeats.front();
    unsigned numCarried = some.getCarried().size();
    SmallVector<Operation *> waits;
    SmallVector<Value> completed;
    for (Operation *op : deferred) {
      Operation *done = completion(op);
      if (done != op)
        waits.push_back(done);
      completed.push_back(done->getResult(0));
    }
    SmallVector<Operation *> &views = unpacking.views;
    SmallVector<nn::AccumulateOp> &accumulates = unpacking.accumulates;
    llvm::sort(views, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    llvm::sort(accumulates, [](nn::AccumulateOp a, nn::AccumulateOp b) {
      return a->isBeforeInBlock(b);
    });
    llvm::BitVector moved(layer.getNumResults());
    for (OpOperand &operand : terminator->getOpOperands())
      if (operand.getOperandNumber() >= numCarried + outs.size &&
          (llvm::is_contained(completed, operand.get()) ||
           llvm::is_contained(views, operand.get().getDefiningOp())))
        moved.set(operand.getOperandNumber());

    // The finish: wait for each in-flight result, unpack it, sum what goes
    // into the outs slices, return those slices (the others untouched) and
    // the per-layer outputs in the layer's order.
    OpBuilder builder(layer);
    builder.setInsertionPointAfter(layer);
    SmallVector<Type> inFlightTypes, finishedTypes;
    for (Operation *op : deferred)
      inFlightTypes.push_back(op->getResult(0).getType());
    TypeRange outsTypes =
        layer.getArgumentTypes().slice(outs.firstArg, outs.size);
    llvm::append_range(inFlightTypes, outsTypes);
    llvm::append_range(finishedTypes, outsTypes);
    for (unsigned position : moved.set_bits())
      finishedTypes.push_back(terminator->getOperand(position).getType());
    auto finishFunc = func::FuncOp::create(
        builder, layer.getLoc(), (layer.getSymName() + "_finish").str(),
        builder.getFunctionType(inFlightTypes, finishedTypes));
    finishFunc.setPrivate();
    finishFunc->setAttr(nn::NNDialect::kFinishAttrName, builder.getUnitAttr());
    symbols.insert(finishFunc); // renamed if the name is taken
    Block *entry = finishFunc.addEntryBlock();
    OpBuilder inFinish = OpBuilder::atBlockEnd(entry);
    IRMapping mapping;
    for (auto [op, value, arg] :
         llvm::zip(deferred, completed, entry->getArguments()))
      mapping.map(value,
                  nn::WaitOp::create(inFinish, op->getLoc(), arg).getResult());
    ValueRange outsArgs = entry->getArguments().drop_front(deferred.size());
    for (auto [layerArg, finishArg] : llvm::zip(
             body.getArguments().slice(outs.firstArg, outs.size), outsArgs))
      mapping.map(layerArg, finishArg);
    for (Operation *view : views)
      inFinish.clone(*view, mapping);
    SmallVector<Value> finished(outsArgs);
    for (nn::AccumulateOp accumulate : accumulates)
      finished[*outs.outsOf(accumulate.getAcc())] =
          inFinish.clone(*accumulate, mapping)->getResult(0);
    for (unsigned position : moved.set_bits())
      finished.push_back(mapping.lookup(terminator->getOperand(position)));
    func::ReturnOp::create(inFinish, layer.getLoc(), finished);

    // The layer: returns the collectives started, in flight, and the outs
    // slices the finish sums into as it took them.
    for (nn::AccumulateOp accumulate : accumulates)
      terminator->setOperand(outs.firstResult +
                                 *outs.outsOf(accumulate.getAcc()),
                             accumulate.getAcc());
    SmallVector<Value> returned;
    for (OpOperand &operand : terminator->getOpOperands())
      if (!moved.test(operand.getOperandNumber()))
        returned.push_back(operand.get());
    for (Operation *op : deferred) {
      op->setAttr(nn::NNDialect::kAsyncAttrName, builder.getUnitAttr());
      returned.push_back(op->getResult(0));
    }
    terminator->setOperands(returned);
    for (nn::AccumulateOp accumulate : accumulates)
      accumulate.erase();
    for (Operation *op : llvm::reverse(views))
      op->erase();
    for (Operation *wait : waits)
      wait->erase();
    (void)layer.eraseResults(moved);
    auto inFlightAttr = builder.getDictionaryAttr(builder.getNamedAttr(
        nn::NNDialect::kInFlightAttrName, builder.getUnitAttr()));
    for (Operation *op : deferred)
      (void)layer.insertResult(layer.getNumResults(),
                               op->getResult(0).getType(), inFlightAttr);

    for (nn::RepeatOp repeat : repeats)
      rebuild(repeat, moved, numCarried, finishFunc);
  }

  /// Replaces `repeat` by one whose stacked results list the layer's
  /// remaining per-layer outputs, then the finish's.
  static void rebuild(nn::RepeatOp repeat, const llvm::BitVector &moved,
                      unsigned numCarried, func::FuncOp finishFunc) {
    SmallVector<unsigned> order; // new result i is old result order[i]
    for (unsigned i = 0; i < repeat.getNumResults(); ++i)
      if (i < numCarried || !moved.test(i))
        order.push_back(i);
    for (unsigned i : moved.set_bits())
      order.push_back(i);
    SmallVector<Type> types;
    for (unsigned i : order)
      types.push_back(repeat.getResult(i).getType());
    OpBuilder builder(repeat);
    auto rebuilt = nn::RepeatOp::create(
        builder, repeat.getLoc(), types, repeat.getLayerAttr(),
        repeat.getCarried(), repeat.getParams(), repeat.getOuts(),
        repeat.getReverseAttr(),
        repeat.getPrefetchAttr(),
        FlatSymbolRefAttr::get(finishFunc.getSymNameAttr()));
    rebuilt->setDiscardableAttrs(repeat->getDiscardableAttrDictionary());
    for (auto [i, old] : llvm::enumerate(order))
      repeat.getResult(old).replaceAllUsesWith(rebuilt.getResult(i));
    repeat.erase();
  }

  ModuleOp module;
  SymbolTable symbols;
  int64_t inFlight;
};

struct OverlapCommunicationPass
    : public tessel::impl::OverlapCommunicationPassBase<
          OverlapCommunicationPass> {
  using Base::Base;

  void runOnOperation() override {
    if (inFlight < 1) {
      getOperation().emitError()
          << "tessel-overlap-communication: in-flight must be at least 1, "
             "not "
          << static_cast<int64_t>(inFlight);
      return signalPassFailure();
    }
    // Across layers first: what moves into a prefetch is not scheduled
    // again inside the layer.
    LayerPrefetcher(getOperation()).run();
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isExternal())
        BlockScheduler(func.getBody().front(), inFlight).run();
    // Then across the end of a layer: what still completes where the layer
    // ends completes after the next one.
    LayerFinisher(getOperation(), inFlight).run();
  }
};

} // namespace
