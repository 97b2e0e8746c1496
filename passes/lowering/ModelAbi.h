//===- ModelAbi.h - the model's entries and description ---------*- C++ -*-===//
//
// The symbols of docs/model-abi.md that tessel-lower-to-runtime adds for the
// model function: the arena layout, one `void entry(ctx, arena)` per entry
// function, and tessel_model_json().
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_PASSES_LOWERING_MODELABI_H
#define TESSEL_PASSES_LOWERING_MODELABI_H

#include "passes/lowering/RuntimeEmitter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringSwitch.h"

namespace tessel::lowering {

/// The functions tessel-autodiff derived from the model (both null for a
/// model that is only evaluated).
struct TrainingEntries {
  mlir::func::FuncOp backward, update;
  /// A zero-bubble pipeline stage's backward in two parts (optional).
  mlir::func::FuncOp backwardInput, backwardWeight;
  /// A pipeline stage's gradient norm for clipping (optional,
  /// tessel-split-update-norm).
  mlir::func::FuncOp gradNorm;
  /// The backward without its gradient reductions and those reductions of
  /// the accumulated gradients (optional, tessel-defer-gradient-reduction).
  mlir::func::FuncOp backwardNoSync, reduceGrads;
  /// A zero-bubble stage's weight part without them (optional, with the
  /// above).
  mlir::func::FuncOp backwardWeightNoSync;
  /// A pipeline stage's forward that keeps what its backward reads
  /// (optional, tessel-keep-stage-activations).
  mlir::func::FuncOp forwardKeep;

  /// The place of the entry of kind `kind` (nn.entry), or null.
  mlir::func::FuncOp *slotOf(llvm::StringRef kind) {
    return llvm::StringSwitch<mlir::func::FuncOp *>(kind)
        .Case("backward", &backward)
        .Case("update", &update)
        .Case("backward_input", &backwardInput)
        .Case("backward_weight", &backwardWeight)
        .Case("grad_norm", &gradNorm)
        .Case("backward_no_sync", &backwardNoSync)
        .Case("backward_weight_no_sync", &backwardWeightNoSync)
        .Case("reduce_grads", &reduceGrads)
        .Case("forward_keep", &forwardKeep)
        .Default(nullptr);
  }

  /// The optional entries present, each with its kind (its symbol is
  /// "tessel_" + kind): a zero-bubble backward's two parts only together.
  llvm::SmallVector<std::pair<mlir::func::FuncOp, llvm::StringRef>>
  optionalParts() const {
    llvm::SmallVector<std::pair<mlir::func::FuncOp, llvm::StringRef>> parts;
    if (backwardInput && backwardWeight)
      parts.append({{backwardInput, "backward_input"},
                    {backwardWeight, "backward_weight"}});
    for (auto part :
         {std::make_pair(gradNorm, llvm::StringRef("grad_norm")),
          std::make_pair(backwardNoSync, llvm::StringRef("backward_no_sync")),
          std::make_pair(backwardWeightNoSync,
                         llvm::StringRef("backward_weight_no_sync")),
          std::make_pair(reduceGrads, llvm::StringRef("reduce_grads")),
          std::make_pair(forwardKeep, llvm::StringRef("forward_keep"))})
      if (part.first)
        parts.push_back(part);
    return parts;
  }
};

/// Emits the entry points of the compiled model and tessel_model_json(),
/// after the model's (and the entries') functions were lowered to
/// kFunctionPrefix + name. `sourceName` is recorded in the description.
mlir::LogicalResult emitModelAbi(mlir::ModuleOp module,
                                 mlir::func::FuncOp model,
                                 TrainingEntries entries,
                                 llvm::StringRef sourceName,
                                 RuntimeEmitter &emit, mlir::OpBuilder &b);

} // namespace tessel::lowering

#endif // TESSEL_PASSES_LOWERING_MODELABI_H
