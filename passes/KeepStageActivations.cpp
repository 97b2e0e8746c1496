//===- KeepStageActivations.cpp - a stage's forward keeps for its backward ===//
//
// A pipeline stage's backward, as tessel-autodiff derives it, starts with
// the stage's forward (the repeats' keep variants stacking what each
// layer's derivative reads), then runs reverse mode. Called on its own,
// as in GPipe, it recomputes the forward the Forward action already ran:
// a third of the stage's compute again, for the memory of one input per
// microbatch in flight. Megatron and torch.distributed.pipelining keep the
// forward's activations per microbatch instead, and so does this pass:
//
//   <f>_forward_keep {nn.entry = "forward_keep"}: the backward's forward
//       part (every op the loss or the output activations depend on); it
//       returns those, then the values the rest reads (`nn.kept = k`);
//   <f>_backward: the rest, taking the kept values as arguments
//       (`nn.kept = k`) instead of computing them; it returns the input
//       gradients and the accumulators, no longer the loss or the outputs.
//
// The launcher runs a training Forward as forward_keep and keeps its kept
// values per microbatch until the microbatch's backward (or, on a
// zero-bubble stage, whose two parts tessel-split-backward then derives
// from this backward, its weight part). What the recompute policy keeps
// per layer is what the kept stacks hold: `--recompute full` keeps one
// input per layer. A value computed from parameters and constants only (a
// transposed or cast weight, a constant) is recomputed where it is read,
// not kept per microbatch. On the last stage the loss's gradient moves to
// forward_keep too (it reads no incoming gradient), which keeps it in
// place of the logits: fused with the loss there, each row's statistics
// are read once per microbatch, as on one device.
//
//===----------------------------------------------------------------------===//

#include "passes/BlockSlice.h"
#include "passes/Communication.h"
#include "passes/MemoryPlan.h"
#include "passes/NNAttributes.h"
#include "passes/Passes.h"

#include "dialect/NN/NNOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace tessel {
#define GEN_PASS_DEF_KEEPSTAGEACTIVATIONSPASS
#include "passes/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;

namespace {

/// A result of the backward that the forward part computes: the loss or an
/// output activation (not a gradient, not an input's gradient).
bool isForwardResult(func::FuncOp backward, unsigned i) {
  return !backward.getResultAttr(i, nn::NNDialect::kGradAttrName) &&
         !backward.getResultAttr(i, nn::NNDialect::kInputGradAttrName);
}

/// Whether `value` of the forward part is computed from parameters and
/// constants only, by pure ops that move no data between ranks: the
/// backward recomputes it (per step the same) instead of keeping it per
/// microbatch.
bool isStepInvariant(func::FuncOp func, Value value,
                     DenseMap<Value, bool> &memo) {
  if (auto it = memo.find(value); it != memo.end())
    return it->second;
  bool invariant = false;
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    invariant = func.getArgAttr(arg.getArgNumber(),
                                nn::NNDialect::kParamAttrName) != nullptr;
  } else {
    Operation *def = value.getDefiningOp();
    memo[value] = false; // no cycles in SSA, but be safe
    invariant = isPure(def) && !isa<nn::RepeatOp>(def) &&
                !communication::isLowerableCollective(def) &&
                def->getNumRegions() == 0 &&
                llvm::all_of(def->getOperands(), [&](Value operand) {
                  return isStepInvariant(func, operand, memo);
                });
  }
  return memo[value] = invariant;
}

/// What the rest of the backward (outside `forwardOps`) reads of its
/// forward part: kept per microbatch, or recomputed from the parameters
/// (then its ops are cloned there).
struct ForwardReads {
  llvm::SetVector<Value> kept, recomputed;

  int64_t keptBytes() const {
    int64_t bytes = 0;
    for (Value v : kept)
      bytes = memory_plan::addBytes(
          bytes, memory_plan::alignUp(nn::detail::tensorBytes(v.getType())));
    return bytes;
  }
};

ForwardReads readsOf(func::FuncOp backward, const OpSet &forwardOps,
                     DenseMap<Value, bool> &invariant) {
  Block &block = backward.getBody().front();
  ForwardReads reads;
  auto read = [&](Value value) {
    Operation *def = value.getDefiningOp();
    if (def && forwardOps.contains(def))
      (isStepInvariant(backward, value, invariant) ? reads.recomputed
                                                   : reads.kept)
          .insert(value);
  };
  for (Operation &op : block.without_terminator())
    if (!forwardOps.contains(&op))
      llvm::for_each(op.getOperands(), read);
  auto ret = cast<func::ReturnOp>(block.getTerminator());
  for (auto [i, value] : llvm::enumerate(ret.getOperands()))
    if (!isForwardResult(backward, unsigned(i)))
      read(value);
  return reads;
}

/// The loss gradients that the forward part takes over: each
/// cross_entropy_grad (with the rounding cast that is its only reader,
/// under mixed precision) that reads nothing a Forward lacks (only the
/// forward part, the feeds and values of the parameters; on the last
/// stage, which no incoming gradient seeds, every one), where keeping its
/// gradient keeps no more bytes than keeping what it reads. In
/// forward_keep, tessel-fuse-epilogues then fuses it with the loss
/// (cross_entropy_with_grad: each row's statistics read once, the gradient
/// written over the logits) and the backward starts from the gradient.
/// Extends `forwardOps` and `reads` with each one taken.
void takeLossGradients(func::FuncOp backward, ArrayRef<Value> roots,
                       OpSet &forwardOps, ForwardReads &reads,
                       DenseMap<Value, bool> &invariant) {
  Block &block = backward.getBody().front();
  auto availableToForward = [&](Value value) {
    if (auto arg = dyn_cast<BlockArgument>(value))
      return !backward.getArgAttr(arg.getArgNumber(),
                                  nn::NNDialect::kOutputGradAttrName) &&
             !backward.getArgAttr(arg.getArgNumber(),
                                  nn::NNDialect::kGradAttrName);
    return forwardOps.contains(value.getDefiningOp()) ||
           isStepInvariant(backward, value, invariant);
  };
  SmallVector<Value> taken(roots);
  for (auto grad : llvm::to_vector(block.getOps<nn::CrossEntropyGradOp>())) {
    if (forwardOps.contains(grad) ||
        !llvm::all_of(grad->getOperands(), availableToForward))
      continue;
    Value gradient = grad.getDlogits();
    if (grad->hasOneUse())
      if (auto rounding = dyn_cast<nn::CastOp>(*grad->getUsers().begin()))
        gradient = rounding.getResult();
    taken.push_back(gradient);
    OpSet extended = sliceOf(block, taken);
    ForwardReads extendedReads = readsOf(backward, extended, invariant);
    if (extendedReads.keptBytes() > reads.keptBytes()) {
      taken.pop_back();
      continue;
    }
    forwardOps = std::move(extended);
    reads = std::move(extendedReads);
  }
}

LogicalResult keepActivations(ModuleOp module, func::FuncOp backward) {
  MLIRContext *ctx = module.getContext();
  OpBuilder b(ctx);
  Block &block = backward.getBody().front();
  auto ret = cast<func::ReturnOp>(block.getTerminator());
  SmallVector<unsigned> forwardResults;
  for (unsigned i = 0; i < backward.getNumResults(); ++i)
    if (isForwardResult(backward, i))
      forwardResults.push_back(i);
  if (forwardResults.empty())
    return backward.emitOpError()
           << "returns neither a loss nor output activations: "
              "tessel-keep-stage-activations cannot tell its forward part";
  SmallVector<Value> roots;
  for (unsigned i : forwardResults)
    roots.push_back(ret.getOperand(i));
  OpSet forwardOps = sliceOf(block, roots);
  DenseMap<Value, bool> invariant;
  ForwardReads reads = readsOf(backward, forwardOps, invariant);
  takeLossGradients(backward, roots, forwardOps, reads, invariant);
  llvm::SetVector<Value> &kept = reads.kept, &recomputed = reads.recomputed;

  // <f>_forward_keep: the backward's arguments (so that every feed keeps
  // its place), the forward part, its results and the kept values.
  StringRef base = backward.getSymName().drop_back(strlen("_backward"));
  SmallVector<Type> resultTypes;
  SmallVector<DictionaryAttr> resultAttrs;
  for (unsigned i : forwardResults) {
    resultTypes.push_back(backward.getResultTypes()[i]);
    DictionaryAttr dict = backward.getResultAttrDict(i);
    resultAttrs.push_back(dict ? dict : b.getDictionaryAttr({}));
  }
  auto keptAttr = [&](size_t k) {
    return b.getDictionaryAttr(b.getNamedAttr(nn::NNDialect::kKeptAttrName,
                                              b.getI64IntegerAttr(int64_t(k))));
  };
  for (auto [k, v] : llvm::enumerate(kept)) {
    resultTypes.push_back(v.getType());
    resultAttrs.push_back(keptAttr(k));
  }
  b.setInsertionPoint(backward);
  auto forward = func::FuncOp::create(
      b, backward.getLoc(), (base + "_forward_keep").str(),
      b.getFunctionType(backward.getArgumentTypes(), resultTypes));
  SymbolTable(module).insert(forward);
  copyNNAttributes(backward, forward);
  forward->setAttr(nn::NNDialect::kEntryAttrName,
                   b.getStringAttr("forward_keep"));
  if (ArrayAttr argAttrs = backward.getAllArgAttrs())
    forward.setAllArgAttrs(argAttrs);
  forward.setAllResultAttrs(resultAttrs);
  {
    IRMapping map;
    map.map(block.getArguments(), forward.addEntryBlock()->getArguments());
    SmallVector<Value> returned(roots);
    returned.append(kept.begin(), kept.end());
    cloneAndReturn(&forward.getBody().front(), forwardOps.getArrayRef(),
                   returned, map, ret.getLoc());
  }

  // The backward: the kept values become arguments, the step-invariant
  // ones are recomputed at its start, and the forward part goes.
  unsigned firstKept = backward.getNumArguments();
  for (auto [k, v] : llvm::enumerate(kept))
    if (failed(backward.insertArgument(firstKept + k, v.getType(), keptAttr(k),
                                       v.getLoc())))
      return failure();
  IRMapping recompute;
  {
    OpBuilder rb = OpBuilder::atBlockBegin(&block);
    OpSet needed = sliceOf(block, recomputed.getArrayRef());
    for (Operation *op : needed)
      rb.clone(*op, recompute);
  }
  auto outsideForward = [&](OpOperand &use) {
    return !forwardOps.contains(use.getOwner());
  };
  for (auto [k, v] : llvm::enumerate(kept))
    Value(v).replaceUsesWithIf(block.getArgument(firstKept + k),
                               outsideForward);
  for (Value v : recomputed)
    v.replaceUsesWithIf(recompute.lookup(v), outsideForward);
  SmallVector<Value> returned;
  SmallVector<DictionaryAttr> returnedAttrs;
  for (unsigned i = 0; i < backward.getNumResults(); ++i) {
    if (isForwardResult(backward, i))
      continue;
    returned.push_back(ret.getOperand(i));
    DictionaryAttr dict = backward.getResultAttrDict(i);
    returnedAttrs.push_back(dict ? dict : b.getDictionaryAttr({}));
  }
  OpBuilder tb(ret);
  func::ReturnOp::create(tb, ret.getLoc(), returned);
  ret.erase();
  for (Operation *op : llvm::reverse(forwardOps.getArrayRef())) {
    if (!op->use_empty())
      return op->emitOpError()
             << "is still read by the backward after its forward part moved "
                "to forward_keep (tessel-keep-stage-activations)";
    op->erase();
  }
  backward.setFunctionType(b.getFunctionType(backward.getArgumentTypes(),
                                             ValueRange(returned).getTypes()));
  backward.setAllResultAttrs(returnedAttrs);
  return success();
}

struct KeepStageActivationsPass
    : tessel::impl::KeepStageActivationsPassBase<KeepStageActivationsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!module->hasAttr(nn::NNDialect::kKeepActivationsAttrName))
      return;
    func::FuncOp backward;
    for (auto func : module.getOps<func::FuncOp>()) {
      auto entry =
          func->getAttrOfType<StringAttr>(nn::NNDialect::kEntryAttrName);
      if (!entry)
        continue;
      if (entry.getValue() != "backward" && entry.getValue() != "update") {
        func.emitOpError()
            << "is a '" << entry.getValue()
            << "' entry: tessel-keep-stage-activations runs once, before "
               "the passes that derive entries from the backward";
        return signalPassFailure();
      }
      if (entry.getValue() == "backward")
        backward = func;
    }
    if (!backward)
      return; // Evaluation only.
    if (!backward.getSymName().ends_with("_backward")) {
      backward.emitOpError() << "is a backward entry whose name does not end "
                                "in '_backward' (tessel-autodiff names it so)";
      return signalPassFailure();
    }
    if (failed(keepActivations(module, backward)))
      return signalPassFailure();
  }
};

} // namespace
