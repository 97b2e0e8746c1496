//===- PromoteF64.cpp - tessel-promote-f64: an f32 model computed in f64 --===//
//
// Compiles a model written in f32 in f64 instead, as `model.double()` does
// in PyTorch before torch.autograd.gradcheck: every f32 tensor of the
// forward (parameters, inputs, activations, the loss) and of its layer
// functions becomes f64, and a constant's value is widened exactly. The
// derived step (autodiff, run after) then computes, accumulates and
// updates in f64. What it is for: a gradient check against finite
// differences whose noise is f64's (f32's rounding makes such a check
// indicative only), and references that equal each other to 1e-9 rather
// than to f32's rounding; an f32 checkpoint loads into it, widened.
//
// Types other than f32 keep theirs (integer labels, a bf16 value a model
// casts to explicitly). An op that infers its result types infers them
// again from its promoted operands (an attention's log-sum-exp is f32 for
// bf16 queries and f64 for f64 ones), a function returns the types its body
// computes and a call its callee's (callees are promoted first); a written
// cast that now converts f64 to f64 is removed.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialect/NN/NNOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace tessel {
#define GEN_PASS_DEF_PROMOTEF64PASS
#include "passes/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;

namespace {

/// `type` with f32 (a tensor's elements, or a scalar) replaced by f64.
Type promoted(Type type) {
  Builder b(type.getContext());
  if (type.isF32())
    return b.getF64Type();
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.getElementType().isF32())
    return type;
  return RankedTensorType::get(tensor.getShape(), b.getF64Type(),
                               tensor.getEncoding());
}

/// `value` with each f32 element widened to f64 (exact), or null when it
/// is not dense floats (a resource blob the pass cannot read).
ElementsAttr widened(ElementsAttr value) {
  auto dense = dyn_cast<DenseFPElementsAttr>(value);
  if (!dense || !dense.getElementType().isF32())
    return ElementsAttr();
  Type f64 = Float64Type::get(value.getContext());
  return dense.mapValues(f64, [](const APFloat &element) {
    APFloat wide = element;
    bool losesInfo = false;
    wide.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven,
                 &losesInfo);
    return wide.bitcastToAPInt();
  });
}

class PromoteF64Pass : public tessel::impl::PromoteF64PassBase<PromoteF64Pass> {
public:
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (auto precision = module->getAttrOfType<StringAttr>(
            nn::NNDialect::kPrecisionAttrName);
        precision && precision.getValue() == "bf16") {
      module.emitError() << "module is already in bf16 mixed precision; "
                            "tessel-promote-f64 takes an f32 model";
      return signalPassFailure();
    }
    for (auto func : module.getOps<func::FuncOp>())
      if (func->hasAttr(nn::NNDialect::kEntryAttrName)) {
        func.emitOpError() << "is a derived entry: tessel-promote-f64 runs "
                              "on the forward model, before autodiff";
        return signalPassFailure();
      }
    // Callees first, so that a call takes its callee's promoted results.
    SymbolTable table(module);
    symbols = &table;
    llvm::SetVector<func::FuncOp> order;
    llvm::SmallPtrSet<Operation *, 8> visiting;
    for (auto func : module.getOps<func::FuncOp>())
      addCalleesFirst(func, visiting, order);
    for (func::FuncOp func : order)
      if (failed(promote(func)))
        return signalPassFailure();
    // Recorded for the report and the model description.
    module->setAttr(nn::NNDialect::kPrecisionAttrName,
                    StringAttr::get(module.getContext(), "f64"));
  }

private:
  /// Appends the functions `func` calls (func.call, a repeat's layer), then
  /// `func`, to `order`, each once (a cycle of calls, which no model has,
  /// is cut where it closes).
  void addCalleesFirst(func::FuncOp func,
                       llvm::SmallPtrSet<Operation *, 8> &visiting,
                       llvm::SetVector<func::FuncOp> &order) {
    if (order.contains(func) || !visiting.insert(func).second)
      return;
    SmallVector<func::FuncOp> callees;
    func.walk([&](Operation *op) {
      FlatSymbolRefAttr callee;
      if (auto call = dyn_cast<func::CallOp>(op))
        callee = call.getCalleeAttr();
      else if (auto repeat = dyn_cast<nn::RepeatOp>(op))
        callee = repeat.getLayerAttr();
      if (func::FuncOp target = lookup(callee); target && target != func)
        callees.push_back(target);
    });
    for (func::FuncOp callee : callees)
      addCalleesFirst(callee, visiting, order);
    order.insert(func);
  }

  /// The function `callee` names in the module, or null.
  func::FuncOp lookup(FlatSymbolRefAttr callee) const {
    return callee ? symbols->lookup<func::FuncOp>(callee.getValue())
                  : func::FuncOp();
  }

  /// Promotes `func`'s body and signature (a declaration's signature only).
  LogicalResult promote(func::FuncOp func) {
    SmallVector<Type> inputs;
    for (Type type : func.getArgumentTypes())
      inputs.push_back(promoted(type));
    WalkResult walk = func->walk<WalkOrder::PreOrder>([&](Block *block) {
      for (BlockArgument arg : block->getArguments())
        arg.setType(promoted(arg.getType()));
      for (Operation &op : llvm::make_early_inc_range(*block))
        if (failed(promote(op)))
          return WalkResult::interrupt();
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
    // A body returns what it computes now (an f32 log-sum-exp of bf16
    // queries stays f32); a declaration its results promoted.
    SmallVector<Type> results;
    if (func.isExternal())
      for (Type type : func.getResultTypes())
        results.push_back(promoted(type));
    else
      llvm::append_range(
          results, func.getBody().front().getTerminator()->getOperandTypes());
    func.setFunctionType(FunctionType::get(func.getContext(), inputs, results));
    return success();
  }

  /// Promotes `op`'s results, its operands being promoted already (a
  /// block's ops are visited in order, a nested block's after its op).
  LogicalResult promote(Operation &op) {
    if (auto constant = dyn_cast<nn::ConstantOp>(op)) {
      if (promoted(constant.getType()) == constant.getType())
        return success();
      ElementsAttr wide = widened(constant.getValue());
      if (!wide)
        return constant.emitOpError()
               << "holds a value tessel-promote-f64 cannot widen (dense "
                  "f32 elements are widened)";
      constant.setValueAttr(wide);
      constant.getResult().setType(cast<RankedTensorType>(wide.getType()));
      return success();
    }
    if (auto infer = dyn_cast<InferTypeOpInterface>(op)) {
      SmallVector<Type> inferred;
      if (failed(infer.inferReturnTypes(
              op.getContext(), op.getLoc(), op.getOperands(),
              op.getRawDictionaryAttrs(), op.getPropertiesStorage(),
              op.getRegions(), inferred)))
        return op.emitOpError()
               << "has no result types for its operands promoted to f64";
      for (auto [result, type] : llvm::zip(op.getResults(), inferred))
        result.setType(type);
      return success();
    }
    // A call returns what its callee (promoted first) does.
    if (auto call = dyn_cast<func::CallOp>(op)) {
      func::FuncOp callee = lookup(call.getCalleeAttr());
      if (callee && callee.getNumResults() == call.getNumResults()) {
        for (auto [result, type] :
             llvm::zip(call.getResults(), callee.getResultTypes()))
          result.setType(type);
        return success();
      }
    }
    for (Value result : op.getResults())
      result.setType(promoted(result.getType()));
    // A written widening to f32 now widens f64 to f64.
    if (auto cast = dyn_cast<nn::CastOp>(op);
        cast && cast.getInput().getType() == cast.getType()) {
      cast.getResult().replaceAllUsesWith(cast.getInput());
      cast.erase();
    }
    return success();
  }

  // Per run (the pass is cloned, never reused across modules at once).
  SymbolTable *symbols = nullptr;
};

} // namespace
