//===- DeferGradientReduction.cpp - one gradient all-reduce per step ------===//
//
// A partitioned backward all-reduces its gradients (tessel-partition's DDP
// buckets) and adds them into the accumulators. Under gradient accumulation
// (M microbatches per step) that reduces M times what one reduction of the
// summed gradients gives: a sum is linear. PyTorch's `no_sync()` and
// Megatron's gradient accumulation reduce once. So, for a backward whose
// gradients are reduced by such all-reduces, this pass adds two entries
// beside it:
//
//   <f>_backward_no_sync {nn.entry = "backward_no_sync"}: the backward with
//       those all-reduces removed; each rank accumulates its own gradients
//       (a repeated layer's function is cloned without them too);
//   <f>_reduce_grads {nn.entry = "reduce_grads"}: the all-reduces of the
//       accumulated gradients, over the same axes, in buckets.
//
// The launcher runs M > 1 microbatches as M × backward_no_sync, then
// reduce_grads, then the update; one microbatch keeps the backward, whose
// buckets overlap its compute. A pipeline stage's backward actions do the
// same, each stage reducing once after the schedule; a zero-bubble stage's
// weight part gets its own `<f>_backward_weight_no_sync` (kind
// "backward_weight_no_sync"), which must defer what the whole backward
// does.
//
// A gradient reduced in another way keeps its reduction in every
// microbatch: ZeRO's reduce-scatters (DeepSpeed's ZeRO-2 also reduces every
// microbatch, which sharded gradients need), or a sum of reductions (a tied
// embedding's under sequence parallelism). A backward with a gradient
// reduced only in part, or over two kinds of axes, is left as it is.
//
//===----------------------------------------------------------------------===//

#include "passes/GradientBuckets.h"
#include "passes/NNAttributes.h"
#include "passes/Passes.h"

#include "dialect/NN/NNOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/MapVector.h"

namespace tessel {
#define GEN_PASS_DEF_DEFERGRADIENTREDUCTIONPASS
#include "passes/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;

namespace {

/// Whether every use of `value` accumulates it into a gradient or, in the
/// layer function of an nn.repeat with `numCarried` carried values,
/// returns it as a per-layer result; through a bucket's slices and
/// reshapes.
bool onlyAccumulated(Value value, std::optional<unsigned> numCarried) {
  return llvm::all_of(value.getUses(), [&](OpOperand &use) {
    Operation *user = use.getOwner();
    if (isa<nn::AccumulateOp>(user))
      return use.getOperandNumber() == 0;
    if (isa<func::ReturnOp>(user))
      return numCarried && use.getOperandNumber() >= *numCarried;
    if (isa<nn::SliceOp, nn::ReshapeOp>(user))
      return onlyAccumulated(user->getResult(0), numCarried);
    return false;
  });
}

/// A gradient reduction: a sum over ranks of gradients that are only
/// accumulated (tessel-partition's, bucketed or not).
bool isGradientReduction(shard::AllReduceOp op,
                         std::optional<unsigned> numCarried) {
  return op.getReduction() == shard::ReductionKind::Sum && !op->use_empty() &&
         onlyAccumulated(op.getResult(), numCarried);
}

/// `value` without the views (a bucket's slices and reshapes) around it.
Value viewedValue(Value value) {
  while (Operation *def = value.getDefiningOp()) {
    if (!isa<nn::SliceOp, nn::ReshapeOp>(def))
      break;
    value = def->getOperand(0);
  }
  return value;
}

/// How one gradient accumulator is reduced: over `axes` of `grid`.
struct Reduction {
  FlatSymbolRefAttr grid;
  ArrayRef<int16_t> axes;
  bool operator==(const Reduction &other) const {
    return grid == other.grid && axes == other.axes;
  }
};

/// One gradient whose reduction moves into reduce_grads: the entry's
/// result and accumulator argument, and how it is reduced.
struct Deferred {
  unsigned result, arg;
  StringAttr name;
  Reduction reduction;
};

/// The gradient reductions of one entry that accumulates gradients (the
/// backward, or a zero-bubble stage's backward_weight).
class EntryDeferral {
public:
  explicit EntryDeferral(func::FuncOp entry) : entry(entry) {}

  /// Finds each gradient's reduction; false when some gradient is reduced
  /// only in part or over two kinds of axes (the entry then keeps reducing
  /// every microbatch).
  bool analyze() {
    Operation *ret = entry.getBody().front().getTerminator();
    for (auto [i, value] : llvm::enumerate(ret->getOperands())) {
      auto name = entry.getResultAttrOfType<StringAttr>(
          i, nn::NNDialect::kGradAttrName);
      if (!name)
        continue;
      // The accumulator and what the entry adds into it.
      SmallVector<Value> added;
      Value acc = value;
      while (auto accumulate = acc.getDefiningOp<nn::AccumulateOp>()) {
        added.push_back(accumulate.getValue());
        acc = accumulate.getAcc();
      }
      auto arg = dyn_cast<BlockArgument>(acc);
      if (!arg || arg.getOwner()->getParentOp() != entry ||
          !entry.getArgAttr(arg.getArgNumber(), nn::NNDialect::kGradAttrName))
        return false;
      std::optional<Reduction> common;
      bool unreduced = false;
      for (Value value : added) {
        std::optional<Reduction> reduction = reductionOf(value);
        unreduced |= !reduction;
        if (reduction && common && !(*reduction == *common))
          return false;
        if (reduction)
          common = reduction;
      }
      if (common && unreduced)
        return false; // Reduced in part.
      if (common)
        deferred.push_back(
            {static_cast<unsigned>(i), arg.getArgNumber(), name, *common});
    }
    // Every gradient reduction of the functions is one of the traced.
    for (func::FuncOp func : functions())
      for (auto op : func.getBody().getOps<shard::AllReduceOp>())
        if (isGradientReduction(op, numCarriedOf(func)) && !traced.contains(op))
          return false;
    return !deferred.empty();
  }

  /// Whether `other` defers the same gradients, each reduced alike.
  bool defersAs(const EntryDeferral &other) const {
    if (deferred.size() != other.deferred.size())
      return false;
    llvm::DenseMap<StringAttr, Reduction> mine;
    for (const Deferred &d : deferred)
      mine.try_emplace(d.name, d.reduction);
    return llvm::all_of(other.deferred, [&](const Deferred &d) {
      auto it = mine.find(d.name);
      return it != mine.end() && it->second == d.reduction;
    });
  }

  /// Adds `<entry>_no_sync` (kind `<kind>_no_sync`) beside the entry: it
  /// and its layers without their gradient reductions.
  void addNoSync(SymbolTable &symbols) {
    MLIRContext *ctx = entry.getContext();
    auto noSync = cast<func::FuncOp>(entry->clone());
    noSync.setSymName((entry.getSymName() + "_no_sync").str());
    auto kind = entry->getAttrOfType<StringAttr>(nn::NNDialect::kEntryAttrName);
    noSync->setAttr(nn::NNDialect::kEntryAttrName,
                    StringAttr::get(ctx, kind.getValue() + "_no_sync"));
    symbols.insert(noSync, std::next(Block::iterator(entry)));
    llvm::DenseMap<StringAttr, FlatSymbolRefAttr> layerClones;
    for (auto [layer, numCarried] : layers) {
      auto clone = cast<func::FuncOp>(layer->clone());
      clone.setSymName((layer.getSymName() + "_no_sync").str());
      symbols.insert(clone, std::next(Block::iterator(layer)));
      layerClones[layer.getSymNameAttr()] =
          FlatSymbolRefAttr::get(clone.getSymNameAttr());
      dropGradientReductions(clone, numCarried);
    }
    noSync.walk([&](nn::RepeatOp repeat) {
      if (auto clone = layerClones.lookup(repeat.getLayerAttr().getAttr()))
        repeat.setLayerAttr(clone);
    });
    dropGradientReductions(noSync, std::nullopt);
  }

  /// Adds `<base>_reduce_grads`: the accumulators' reductions, in the
  /// order of the entry's results.
  void addReduceGrads(SymbolTable &symbols, StringRef base,
                      int64_t bucketBytes) {
    SmallVector<Type> types;
    for (const Deferred &d : deferred)
      types.push_back(entry.getArgumentTypes()[d.arg]);
    Location loc = entry.getLoc();
    OpBuilder b(entry.getContext());
    auto reduce = func::FuncOp::create(loc, (base + "_reduce_grads").str(),
                                       b.getFunctionType(types, types));
    symbols.insert(reduce);
    copyNNAttributes(entry, reduce);
    reduce->setAttr(nn::NNDialect::kEntryAttrName,
                    b.getStringAttr("reduce_grads"));
    Block *body = reduce.addEntryBlock();
    b.setInsertionPointToEnd(body);
    SmallVector<Value> reduced;
    for (auto [k, d] : llvm::enumerate(deferred)) {
      if (DictionaryAttr attrs = entry.getArgAttrDict(d.arg))
        reduce.setArgAttrs(k, attrs);
      if (DictionaryAttr attrs = entry.getResultAttrDict(d.result))
        reduce.setResultAttrs(k, attrs);
      reduced.push_back(shard::AllReduceOp::create(
          b, loc, types[k], d.reduction.grid,
          b.getDenseI16ArrayAttr(d.reduction.axes), body->getArgument(k),
          shard::ReductionKindAttr::get(b.getContext(),
                                        shard::ReductionKind::Sum)));
    }
    func::ReturnOp::create(b, loc, reduced);
    bucketGradientAllReducesOf(reduce, bucketBytes, /*returnedFrom=*/0);
  }

private:
  /// The gradient reduction `value` is (a view of), in the entry or in the
  /// layer function of a repeat whose per-layer result it is.
  std::optional<Reduction> reductionOf(Value value) {
    value = viewedValue(value);
    std::optional<unsigned> numCarried;
    if (auto repeat = value.getDefiningOp<nn::RepeatOp>()) {
      unsigned index = cast<OpResult>(value).getResultNumber();
      func::FuncOp layer = repeat.getLayerFunction();
      numCarried = repeat.getCarried().size();
      if (!layer || layer.isExternal() || index < *numCarried)
        return std::nullopt;
      value = viewedValue(
          layer.getBody().front().getTerminator()->getOperand(index));
    }
    auto op = value.getDefiningOp<shard::AllReduceOp>();
    if (!op || !isGradientReduction(op, numCarried))
      return std::nullopt;
    traced.insert(op);
    if (numCarried)
      layers.insert({op->getParentOfType<func::FuncOp>(), *numCarried});
    return Reduction{op.getGridAttr(), op.getGridAxes()};
  }

  std::optional<unsigned> numCarriedOf(func::FuncOp func) {
    auto it = layers.find(func);
    return it == layers.end() ? std::nullopt
                              : std::optional<unsigned>(it->second);
  }

  SmallVector<func::FuncOp> functions() {
    SmallVector<func::FuncOp> all{entry};
    for (auto [layer, numCarried] : layers)
      all.push_back(layer);
    return all;
  }

  /// Each rank keeps its own gradients: every gradient reduction of `func`
  /// reads its input instead, and the buckets' slices fold away.
  static void dropGradientReductions(func::FuncOp func,
                                     std::optional<unsigned> numCarried) {
    for (auto op : llvm::make_early_inc_range(
             func.getBody().getOps<shard::AllReduceOp>()))
      if (isGradientReduction(op, numCarried)) {
        op.getResult().replaceAllUsesWith(op.getInput());
        op.erase();
      }
    (void)applyPatternsGreedily(func, FrozenRewritePatternSet());
  }

  func::FuncOp entry;
  /// The layer functions holding gradient reductions, with their carried
  /// values' count.
  llvm::MapVector<func::FuncOp, unsigned> layers;
  llvm::DenseSet<Operation *> traced;
  SmallVector<Deferred> deferred;
};

/// Whether `func` (or a repeated layer it runs) reduces a gradient the way
/// this pass defers it.
bool hasGradientReduction(func::FuncOp func,
                          std::optional<unsigned> numCarried = std::nullopt) {
  for (Operation &op : func.getBody().getOps()) {
    if (auto reduce = dyn_cast<shard::AllReduceOp>(op);
        reduce && isGradientReduction(reduce, numCarried))
      return true;
    if (auto repeat = dyn_cast<nn::RepeatOp>(op))
      if (func::FuncOp layer = repeat.getLayerFunction();
          layer && !layer.isExternal() && layer != func &&
          hasGradientReduction(layer, repeat.getCarried().size()))
        return true;
  }
  return false;
}

struct DeferGradientReductionPass
    : tessel::impl::DeferGradientReductionPassBase<DeferGradientReductionPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (bucketMb < 0) {
      module.emitError() << "bucket-mb must be 0 or more, not " << bucketMb;
      return signalPassFailure();
    }
    func::FuncOp backward, backwardInput, backwardWeight;
    for (auto func : module.getOps<func::FuncOp>()) {
      auto entry =
          func->getAttrOfType<StringAttr>(nn::NNDialect::kEntryAttrName);
      if (!entry)
        continue;
      if (entry.getValue().ends_with("_no_sync") ||
          entry.getValue() == "reduce_grads") {
        func.emitOpError() << "is already a '" << entry.getValue()
                           << "' entry; tessel-defer-gradient-reduction runs "
                              "once";
        return signalPassFailure();
      }
      if (entry.getValue() == "backward")
        backward = func;
      else if (entry.getValue() == "backward_input")
        backwardInput = func;
      else if (entry.getValue() == "backward_weight")
        backwardWeight = func;
    }
    if (!backward)
      return; // Evaluation only.
    // A zero-bubble stage runs its backward in two parts: the weight part
    // defers what the whole backward does, and the input part reduces no
    // gradient.
    SmallVector<EntryDeferral> entries{EntryDeferral(backward)};
    if (backwardWeight)
      entries.push_back(EntryDeferral(backwardWeight));
    if (backwardInput && hasGradientReduction(backwardInput))
      return;
    for (EntryDeferral &entry : entries)
      if (!entry.analyze() || !entry.defersAs(entries.front()))
        return;
    SymbolTable symbols(module);
    for (EntryDeferral &entry : entries)
      entry.addNoSync(symbols);
    StringRef base = backward.getSymName();
    base.consume_back("_backward");
    entries.front().addReduceGrads(
        symbols, base, static_cast<int64_t>(bucketMb * 1024.0 * 1024.0));
  }
};

} // namespace
