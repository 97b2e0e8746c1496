//===- LowerToRuntime.cpp - tessel-lower-to-runtime: nn ops to C ABI calls ===//
//
// Each nn function becomes an llvm.func over pointers; each nn op one call of
// the runtime kernel that implements it (runtime/include/tessel/runtime.h),
// by the per-op-family lowerings of passes/lowering/. The model function
// also gets the ABI of docs/model-abi.md (passes/lowering/ModelAbi.cpp).
//
//===----------------------------------------------------------------------===//

#include "passes/MemoryPlan.h"
#include "passes/Passes.h"
#include "passes/lowering/FunctionLowering.h"
#include "passes/lowering/ModelAbi.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"

#include <memory>

namespace tessel {
#define GEN_PASS_DEF_LOWERTORUNTIMEPASS
#include "passes/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;
using namespace tessel::lowering;

namespace {

struct LowerToRuntimePass
    : public tessel::impl::LowerToRuntimePassBase<LowerToRuntimePass> {
  using Base::Base;

  LogicalResult initialize(MLIRContext *) override {
    registry =
        std::make_shared<const LoweringRegistry>(buildLoweringRegistry());
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> functions;
    func::FuncOp model;
    TrainingEntries entries;
    if (failed(collectFunctions(functions, model)) ||
        failed(findTrainingEntries(functions, model, entries)))
      return signalPassFailure();
    RuntimeEmitter emit(module);
    OpBuilder b(module.getContext());
    for (func::FuncOp func : functions)
      if (failed(lowerFunction(func, emit, b)))
        return signalPassFailure();
    if (model &&
        failed(emitModelAbi(module, model, entries, sourceName, emit, b)))
      return signalPassFailure();
    for (func::FuncOp func : functions)
      func.erase();
    // The mesh lives on in the description and the collectives' masks; the
    // LLVM module has no use for the grid symbols.
    for (auto grid : llvm::make_early_inc_range(module.getOps<shard::GridOp>()))
      grid.erase();
  }

  /// The functions with a body, and the model among them (at most one).
  LogicalResult collectFunctions(SmallVectorImpl<func::FuncOp> &functions,
                                 func::FuncOp &model) {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      functions.push_back(func);
      if (!nn::NNDialect::isModelFunction(func))
        continue;
      if (model)
        return func.emitOpError()
               << "is a second model function; a module compiles one model "
                  "(the first is @"
               << model.getSymName() << ")";
      model = func;
    }
    return success();
  }

  /// The training entries tessel-autodiff derived from the model: both or
  /// neither, one of each.
  LogicalResult findTrainingEntries(ArrayRef<func::FuncOp> functions,
                                    func::FuncOp model,
                                    TrainingEntries &entries) {
    for (func::FuncOp func : functions) {
      auto role =
          func->getAttrOfType<StringAttr>(nn::NNDialect::kEntryAttrName);
      if (!role)
        continue;
      // The dialect's verifier admits the kinds slotOf knows only.
      func::FuncOp *found = entries.slotOf(role.getValue());
      if (!found)
        return func.emitOpError()
               << "is an entry of unknown kind '" << role.getValue() << "'";
      func::FuncOp &slot = *found;
      if (slot || !model)
        return func.emitOpError()
               << (model ? "is a second '" : "is a '") << role.getValue()
               << (model ? "' entry" : "' entry without a model");
      slot = func;
    }
    if (static_cast<bool>(entries.backward) !=
        static_cast<bool>(entries.update))
      return (entries.backward ? entries.backward : entries.update)
                 .emitOpError()
             << "is a training entry without its partner (a trained model "
                "has both a backward and an update entry)";
    if (entries.gradNorm && !entries.update)
      return entries.gradNorm.emitOpError()
             << "is a 'grad_norm' entry without an update entry to use it";
    // A forward that keeps its activations comes with the backward that
    // reads them, and a backward reads kept values only from it.
    if (entries.forwardKeep && !entries.backward)
      return entries.forwardKeep.emitOpError()
             << "is a 'forward_keep' entry without a backward entry to read "
                "what it keeps";
    if (entries.backward && !entries.forwardKeep)
      for (unsigned i = 0; i < entries.backward.getNumArguments(); ++i)
        if (entries.backward.getArgAttr(i, nn::NNDialect::kKeptAttrName))
          return entries.backward.emitOpError()
                 << "reads a kept value (argument #" << i
                 << ", nn.kept) but the module has no 'forward_keep' entry "
                    "to keep it";
    // Each entry that accumulates gradients has its no-sync twin, or none.
    bool noSync = entries.backwardNoSync || entries.backwardWeightNoSync;
    if (noSync != static_cast<bool>(entries.reduceGrads) ||
        (noSync && (static_cast<bool>(entries.backward) !=
                        static_cast<bool>(entries.backwardNoSync) ||
                    static_cast<bool>(entries.backwardWeight) !=
                        static_cast<bool>(entries.backwardWeightNoSync))))
      return (entries.backwardNoSync         ? entries.backwardNoSync
              : entries.backwardWeightNoSync ? entries.backwardWeightNoSync
                                             : entries.reduceGrads)
                 .emitOpError()
             << "is a deferred gradient reduction's entry without its "
                "partners (reduce_grads comes with backward_no_sync, and "
                "with backward_weight_no_sync where there is a "
                "backward_weight)";
    return success();
  }

  /// `void tessel_fn_<name>(ctx, scratch, args..., results...)`: the ops in
  /// order, then a copy of each returned value not computed in place.
  LogicalResult lowerFunction(func::FuncOp func, RuntimeEmitter &emit,
                              OpBuilder &b) {
    if (!func->hasAttr(memory_plan::kScratchBytesAttr))
      return func.emitOpError() << "has no memory plan; run "
                                   "-tessel-plan-memory first";
    SmallVector<Type> types(2 + func.getNumArguments() + func.getNumResults(),
                            emit.ptr());
    b.setInsertionPointToEnd(getOperation().getBody());
    auto lowered = LLVM::LLVMFuncOp::create(
        b, func.getLoc(), (kFunctionPrefix + func.getSymName()).str(),
        LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(&getContext()),
                                    types));
    Block *entry = lowered.addEntryBlock(b);
    b.setInsertionPointToStart(entry);
    ValueRange outs =
        entry->getArguments().drop_front(2 + func.getNumArguments());
    FunctionLowering lowering(emit, b, entry->getArgument(0),
                              entry->getArgument(1), outs);
    for (auto [arg, pointer] :
         llvm::zip(func.getArguments(), entry->getArguments().drop_front(2)))
      lowering.pointers[arg] = pointer;
    for (Operation &op : func.getBody().front()) {
      auto ret = dyn_cast<func::ReturnOp>(op);
      if (!ret) {
        if (failed(lowering.lower(&op, *registry)))
          return failure();
        continue;
      }
      lowering.loc = ret.getLoc();
      for (auto [value, out] : llvm::zip(ret.getOperands(), outs))
        if (lowering.pointers.lookup(value) != out) // not computed in place
          lowering.call(rt::tessel_copy, {PtrValue(out), lowering.ptr(value),
                                          lowering.i64(bytesOf(value))});
      LLVM::ReturnOp::create(b, ret.getLoc(), ValueRange{});
    }
    return success();
  }

  /// Built once in initialize(); shared by the clones of the pass.
  std::shared_ptr<const LoweringRegistry> registry;
};

} // namespace
