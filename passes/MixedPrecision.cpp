//===- MixedPrecision.cpp - tessel-mixed-precision: bf16 compute ----------===//
//
// Rewrites a model so it stores its parameters and computes in bf16, as
// Megatron and ZeRO train in mixed precision: every f32 parameter becomes
// a bf16 argument (2 bytes per parameter; tessel-autodiff gives each a
// f32 master copy in its optimizer state, which the update steps and
// rounds back), f32 inputs are cast at use, every f32 value the forward
// computes becomes bf16, and the loss is computed and returned in f32.
// Autodiff, run after, derives a bf16 backward. The module records the
// gradients' type (nn.grad_precision): f32 (the default, Megatron's: each
// gradient is widened where it leaves the backward, so it is reduced,
// accumulated over microbatches and applied in f32) or bf16 (the ZeRO
// paper's 2 bytes per gradient, reduced in bf16).
//
// Ops fall in two kinds. Most compute in whatever type their operands have:
// their f32 results become bf16, and an f32 operand reaching them (from an
// op of the other kind) is cast down. The others keep their types and get
// their operands in the types they were written with: the loss
// (nn.cross_entropy, whose log-sum-exp over a vocabulary wants f32),
// constants (their values are typed) and explicit casts.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialect/NN/NNOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace tessel {
#define GEN_PASS_DEF_MIXEDPRECISIONPASS
#include "passes/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;

namespace {

/// `type` with f32 elements replaced by bf16; other types unchanged.
Type lowered(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.getElementType().isF32())
    return type;
  return RankedTensorType::get(tensor.getShape(),
                               BFloat16Type::get(type.getContext()));
}

/// Ops that keep the types they were written with.
bool keepsTypes(Operation *op) {
  return isa<nn::CrossEntropyOp, nn::ConstantOp, nn::CastOp>(op);
}

class MixedPrecisionPass
    : public tessel::impl::MixedPrecisionPassBase<MixedPrecisionPass> {
public:
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (precision == "f32")
      return;
    if (precision != "bf16") {
      module.emitError() << "unknown precision '" << precision
                         << "'; expected f32 or bf16";
      return signalPassFailure();
    }
    if (gradPrecision != "f32" && gradPrecision != "bf16") {
      module.emitError() << "unknown gradient precision '" << gradPrecision
                         << "'; expected f32 or bf16";
      return signalPassFailure();
    }
    if (failed(nn::RepeatOp::refuseOuts(module, "tessel-mixed-precision")))
      return signalPassFailure();
    SymbolTable table(module);
    symbols = &table;
    SmallVector<func::FuncOp> models;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func->hasAttr(nn::NNDialect::kEntryAttrName)) {
        func.emitOpError() << "is a derived entry: tessel-mixed-precision "
                              "runs on the forward model, before autodiff";
        return signalPassFailure();
      }
      if (nn::NNDialect::isModelFunction(func))
        models.push_back(func);
    }
    for (func::FuncOp model : models)
      if (failed(refuseF64(model)) || failed(convertModel(model)))
        return signalPassFailure();
    // Recorded for autodiff, the report and the model description.
    module->setAttr(nn::NNDialect::kPrecisionAttrName,
                    StringAttr::get(module.getContext(), precision));
    module->setAttr(nn::NNDialect::kGradPrecisionAttrName,
                    StringAttr::get(module.getContext(), gradPrecision));
  }

private:
  /// bf16 is a precision for f32 models; an f64 one says so.
  LogicalResult refuseF64(func::FuncOp model) {
    auto isF64 = [](Type type) {
      auto tensor = dyn_cast<RankedTensorType>(type);
      return tensor && tensor.getElementType().isF64();
    };
    for (auto [i, type] : llvm::enumerate(model.getArgumentTypes()))
      if (isF64(type))
        return model.emitOpError()
               << "argument #" << i << " is f64: bf16 mixed precision "
               << "applies to f32 models (compile f64 models without it)";
    return success();
  }

  LogicalResult convertModel(func::FuncOp model) {
    Block &entry = model.getBody().front();
    // Parameters are stored in bf16: the argument itself changes type.
    // Each op reading another f32 argument (an input) reads its own cast,
    // placed just before it (cast at use, as autocast does), so a pipeline
    // stage holds the casts of exactly the inputs it uses.
    OpBuilder b(model.getContext());
    for (BlockArgument arg : entry.getArguments()) {
      Type low = lowered(arg.getType());
      if (low == arg.getType())
        continue;
      if (model.getArgAttr(arg.getArgNumber(), nn::NNDialect::kParamAttrName)) {
        written[arg] = arg.getType();
        arg.setType(low);
        continue;
      }
      llvm::SetVector<Operation *> users;
      for (Operation *user : arg.getUsers())
        users.insert(user);
      for (Operation *user : users) {
        b.setInsertionPoint(user);
        auto cast = nn::CastOp::create(b, arg.getLoc(), low, arg);
        castsAdded.insert(cast);
        user->replaceUsesOfWith(arg, cast.getResult());
      }
    }
    if (failed(convertBlock(entry)))
      return failure();
    // The model returns what it was written to return: the loss in f32.
    Operation *ret = entry.getTerminator();
    restoreOperands(ret, model.getFunctionType().getResults());
    model.setFunctionType(FunctionType::get(model.getContext(),
                                            entry.getArgumentTypes(),
                                            model.getResultTypes()));
    return success();
  }

  /// Converts a called function once: its signature and body. Every f32
  /// argument becomes bf16 (an nn.repeat's carried values and its slices
  /// of the stacked bf16 parameters alike).
  LogicalResult convertLayer(func::FuncOp layer) {
    if (!converted.insert(layer).second)
      return success();
    Block &entry = layer.getBody().front();
    OpBuilder b(layer.getContext());
    for (BlockArgument arg : entry.getArguments()) {
      Type low = lowered(arg.getType());
      if (low == arg.getType())
        continue;
      written[arg] = arg.getType();
      arg.setType(low);
    }
    if (failed(convertBlock(entry)))
      return failure();
    SmallVector<Type> inputs, results;
    for (Type type : entry.getArgumentTypes())
      inputs.push_back(type);
    for (Type type : layer.getResultTypes())
      results.push_back(lowered(type));
    layer.setFunctionType(FunctionType::get(layer.getContext(), inputs, results));
    // The body's returned values were converted with it; a value a kept op
    // produced in f32 is cast down to the new result type.
    Operation *ret = entry.getTerminator();
    b.setInsertionPoint(ret);
    for (OpOperand &operand : ret->getOpOperands())
      castOperandTo(b, operand, results[operand.getOperandNumber()]);
    return success();
  }

  LogicalResult convertBlock(Block &block) {
    for (Operation &op : llvm::make_early_inc_range(block)) {
      if (op.hasTrait<OpTrait::IsTerminator>())
        continue;
      if (op.getNumRegions() != 0)
        return op.emitOpError()
               << "has regions, which tessel-mixed-precision does not convert";
      if (keepsTypes(&op)) {
        SmallVector<Type> written;
        for (Value operand : op.getOperands())
          written.push_back(writtenType(operand));
        restoreOperands(&op, written);
        continue;
      }
      OpBuilder b(&op);
      for (OpOperand &operand : op.getOpOperands())
        castOperandTo(b, operand, lowered(operand.get().getType()));
      for (Value result : op.getResults()) {
        // An attention's log-sum-exp is f32 whatever the storage type.
        if (auto attention = dyn_cast<nn::AttentionOp>(op);
            attention && result == attention.getLse())
          continue;
        Type low = lowered(result.getType());
        if (low != result.getType()) {
          written[result] = result.getType();
          result.setType(low);
        }
      }
      // A repeat's stacked parameters are the model's bf16 arguments (a
      // pipeline splits them by rows); its layer reads bf16 slices.
      if (auto repeat = dyn_cast<nn::RepeatOp>(op))
        if (failed(convertLayer(repeat.getLayerFunction())))
          return failure();
      if (auto call = dyn_cast<func::CallOp>(op)) {
        auto callee = symbols->lookup<func::FuncOp>(call.getCallee());
        if (!callee || failed(convertLayer(callee)))
          return call.emitOpError()
                 << "calls a function tessel-mixed-precision cannot convert";
      }
    }
    return success();
  }

  /// The type `value` had before this pass changed it (a cast the pass
  /// added stands for the value it casts).
  Type writtenType(Value value) const {
    auto it = written.find(value);
    if (it != written.end())
      return it->second;
    if (auto cast = value.getDefiningOp<nn::CastOp>();
        cast && castsAdded.contains(cast))
      return writtenType(cast.getInput());
    return value.getType();
  }

  /// Casts each operand of `op` back to `types` where the pass changed it.
  void restoreOperands(Operation *op, TypeRange types) {
    OpBuilder b(op);
    for (OpOperand &operand : op->getOpOperands())
      castOperandTo(b, operand, types[operand.getOperandNumber()]);
  }

  void castOperandTo(OpBuilder &b, OpOperand &operand, Type type) {
    Value value = operand.get();
    if (value.getType() == type)
      return;
    // Undo a cast this pass added rather than cast back (no double rounding).
    if (auto added = value.getDefiningOp<nn::CastOp>();
        added && castsAdded.contains(added) &&
        added.getInput().getType() == type) {
      operand.set(added.getInput());
      return;
    }
    auto cast = nn::CastOp::create(b, value.getLoc(), type, value);
    castsAdded.insert(cast);
    operand.set(cast.getResult());
  }

  // Per run (the pass is cloned, never reused across modules at once).
  SymbolTable *symbols = nullptr;
  llvm::SmallPtrSet<Operation *, 8> converted;
  llvm::SmallPtrSet<Operation *, 32> castsAdded;
  llvm::DenseMap<Value, Type> written;
};

} // namespace
