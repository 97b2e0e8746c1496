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
