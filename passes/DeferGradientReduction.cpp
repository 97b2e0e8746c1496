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
// same, each stage reducing once after the schedule (a zero-bubble stage
// split into backward_input and backward_weight is left as it is).
//
// A gradient reduced in another way keeps its reduction in every
// microbatch: ZeRO's reduce-scatters (DeepSpeed's ZeRO-2 also reduces every
// microbatch, which sharded gradients need), or a sum of reductions (a tied
// embedding's under sequence parallelism). A backward with a gradient
// reduced only in part, or over two kinds of axes, is left as it is.
//
//===----------------------------------------------------------------------===//

#include "passes/GradientBuckets.h"
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

class Deferral {
public:
  explicit Deferral(func::FuncOp backward) : backward(backward) {}

  /// Finds each gradient's reduction; false when some gradient is not
  /// reduced wholly by gradient reductions of one kind (the backward then
  /// keeps reducing every microbatch).
  bool analyze() {
    Operation *ret = backward.getBody().front().getTerminator();
    for (auto [i, value] : llvm::enumerate(ret->getOperands())) {
      if (!backward.getResultAttr(i, nn::NNDialect::kGradAttrName))
        continue;
      // The accumulator and what the backward adds into it.
      SmallVector<Value> added;
      Value acc = value;
      while (auto accumulate = acc.getDefiningOp<nn::AccumulateOp>()) {
        added.push_back(accumulate.getValue());
        acc = accumulate.getAcc();
      }
      auto arg = dyn_cast<BlockArgument>(acc);
      if (!arg || arg.getOwner()->getParentOp() != backward ||
          !backward.getArgAttr(arg.getArgNumber(),
                               nn::NNDialect::kGradAttrName))
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
            {static_cast<unsigned>(i), arg.getArgNumber(), *common});
    }
    // Every gradient reduction of the functions is one of the traced.
    for (func::FuncOp func : functions())
      for (auto op : func.getBody().getOps<shard::AllReduceOp>())
        if (isGradientReduction(op, numCarriedOf(func)) && !traced.contains(op))
          return false;
    return !deferred.empty();
  }

  /// Adds `<f>_backward_no_sync` and `<f>_reduce_grads` beside the backward.
  void apply(int64_t bucketBytes) {
    auto module = backward->getParentOfType<ModuleOp>();
    SymbolTable symbols(module);
    StringRef base = backward.getSymName();
    base.consume_back("_backward");
    OpBuilder b(module.getContext());

    // The backward and its layers without their gradient reductions.
    auto noSync = cast<func::FuncOp>(backward->clone());
    noSync.setSymName((base + "_backward_no_sync").str());
    noSync->setAttr(nn::NNDialect::kEntryAttrName,
                    b.getStringAttr("backward_no_sync"));
    symbols.insert(noSync, std::next(Block::iterator(backward)));
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

    // The accumulators' reductions, in the order of the backward's results.
    SmallVector<Type> types;
    for (const Deferred &d : deferred)
      types.push_back(backward.getArgumentTypes()[d.arg]);
    Location loc = backward.getLoc();
    b.setInsertionPointAfter(noSync);
    auto reduce = func::FuncOp::create(b, loc, (base + "_reduce_grads").str(),
                                       b.getFunctionType(types, types));
    symbols.insert(reduce, std::next(Block::iterator(noSync)));
    for (NamedAttribute attr : backward->getAttrs())
      if (attr.getName().getValue().starts_with("nn."))
        reduce->setAttr(attr.getName(), attr.getValue());
    reduce->setAttr(nn::NNDialect::kEntryAttrName,
                    b.getStringAttr("reduce_grads"));
    Block *entry = reduce.addEntryBlock();
    OpBuilder rb = OpBuilder::atBlockEnd(entry);
    SmallVector<Value> reduced;
    for (auto [k, d] : llvm::enumerate(deferred)) {
      if (DictionaryAttr attrs = backward.getArgAttrDict(d.arg))
        reduce.setArgAttrs(k, attrs);
      if (DictionaryAttr attrs = backward.getResultAttrDict(d.result))
        reduce.setResultAttrs(k, attrs);
      reduced.push_back(shard::AllReduceOp::create(
          rb, loc, types[k], d.reduction.grid,
          rb.getDenseI16ArrayAttr(d.reduction.axes), entry->getArgument(k),
          shard::ReductionKindAttr::get(b.getContext(),
                                        shard::ReductionKind::Sum)));
    }
    func::ReturnOp::create(rb, loc, reduced);
    bucketGradientAllReducesOf(reduce, bucketBytes, /*returnedFrom=*/0);
  }

private:
  struct Deferred {
    unsigned result, arg;
    Reduction reduction;
  };

  /// The gradient reduction `value` is (a view of), in the backward or in
  /// the layer function of a repeat whose per-layer result it is.
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
    SmallVector<func::FuncOp> all{backward};
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

  func::FuncOp backward;
  /// The layer functions holding gradient reductions, with their carried
  /// values' count.
  llvm::MapVector<func::FuncOp, unsigned> layers;
  llvm::DenseSet<Operation *> traced;
  SmallVector<Deferred> deferred;
};

struct DeferGradientReductionPass
    : tessel::impl::DeferGradientReductionPassBase<DeferGradientReductionPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (bucketMb < 0) {
      module.emitError() << "bucket-mb must be 0 or more, not " << bucketMb;
      return signalPassFailure();
    }
    func::FuncOp backward;
    bool splitBackward = false;
    for (auto func : module.getOps<func::FuncOp>()) {
      auto entry =
          func->getAttrOfType<StringAttr>(nn::NNDialect::kEntryAttrName);
      if (!entry)
        continue;
      if (entry.getValue() == "backward_no_sync" ||
          entry.getValue() == "reduce_grads") {
        func.emitOpError() << "is already a '" << entry.getValue()
                           << "' entry; tessel-defer-gradient-reduction runs "
                              "once";
        return signalPassFailure();
      }
      if (entry.getValue() == "backward")
        backward = func;
      splitBackward |= entry.getValue() == "backward_weight";
    }
    // A zero-bubble stage's weight part (backward_weight) keeps reducing
    // every microbatch.
    if (!backward || splitBackward)
      return;
    Deferral deferral(backward);
    if (deferral.analyze())
      deferral.apply(static_cast<int64_t>(bucketMb * 1024.0 * 1024.0));
  }
};

} // namespace
