//===- MixedPrecision.cpp - tessel-mixed-precision: bf16 compute ----------===//
//
// Rewrites a model's forward so it computes in bf16 around its f32
// parameters, as torch.autocast does at run time: the parameters (master
// weights) and inputs are cast to bf16 once at the top, every f32 value the
// forward computes becomes bf16, and the loss is computed and returned in
// f32. Autodiff, run after, differentiates the casts too, so the backward
// computes in bf16 and each parameter's gradient arrives in f32 (the VJP of
// an f32 → bf16 cast is a bf16 → f32 cast): the optimizer, the gradient
// all-reduce and the checkpoint see f32 exactly as without this pass.
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
    // Recorded for the report and the model description.
    module->setAttr(nn::NNDialect::kPrecisionAttrName,
                    StringAttr::get(module.getContext(), precision));
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
    // Each op reading an f32 argument reads its own cast, placed just before
    // it (cast at use, as autocast does): a pipeline stage then holds the
    // casts of exactly the parameters it uses (GPT's tied embedding is cast
    // on the first stage and again for the head on the last), and CSE folds
    // the repeats where nothing is split.
    OpBuilder b(model.getContext());
    for (BlockArgument arg : entry.getArguments()) {
      Type low = lowered(arg.getType());
      if (low == arg.getType())
        continue;
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
    // A parameter only repeats read is cast inside their layers.
    for (Operation &op : llvm::make_early_inc_range(entry))
      if (auto cast = dyn_cast<nn::CastOp>(op);
          cast && castsAdded.contains(cast) && cast->use_empty()) {
        castsAdded.erase(cast);
        cast->erase();
      }
    return success();
  }

  /// Converts a called function once: its signature and body. The first
  /// `numConverted` arguments become bf16 (an nn.repeat's carried values);
  /// the rest (a repeat's parameter slices) stay f32 and are cast at the
  /// top of the body, as the model's parameters are.
  LogicalResult convertLayer(func::FuncOp layer, unsigned numConverted) {
    if (!converted.insert(layer).second)
      return success();
    Block &entry = layer.getBody().front();
    OpBuilder b(layer.getContext());
    b.setInsertionPointToStart(&entry);
    for (BlockArgument arg : entry.getArguments()) {
      Type low = lowered(arg.getType());
      if (low == arg.getType())
        continue;
      if (arg.getArgNumber() < numConverted) {
        written[arg] = arg.getType();
        arg.setType(low);
        continue;
      }
      auto cast = nn::CastOp::create(b, arg.getLoc(), low, arg);
      castsAdded.insert(cast);
      arg.replaceAllUsesExcept(cast.getResult(), cast);
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
        Type low = lowered(result.getType());
        if (low != result.getType()) {
          written[result] = result.getType();
          result.setType(low);
        }
      }
      if (auto repeat = dyn_cast<nn::RepeatOp>(op)) {
        // Stacked parameters stay the model's own f32 arguments (a pipeline
        // splits them by rows); each layer casts its slice (cast at use).
        for (OpOperand &param : repeat.getParamsMutable())
          castOperandTo(b, param, writtenType(param.get()));
        if (failed(convertLayer(repeat.getLayerFunction(),
                                repeat.getCarried().size())))
          return failure();
      }
      if (auto call = dyn_cast<func::CallOp>(op)) {
        auto callee = symbols->lookup<func::FuncOp>(call.getCallee());
        if (!callee || failed(convertLayer(callee, callee.getNumArguments())))
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
