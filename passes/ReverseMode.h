//===- ReverseMode.h - Reverse mode over nn functions -----------*- C++ -*-===//
//
// tessel-autodiff's reverse mode (ReverseMode.cpp): the cotangents of a
// function's values from seeds, every op's derivative from its
// VJPOpInterface and nn.repeat's from a derivative layer function it
// builds; and the mixed-precision facts the pass and the reverse mode both
// read from tessel-mixed-precision's module attributes.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_PASSES_REVERSEMODE_H
#define TESSEL_PASSES_REVERSEMODE_H

#include "dialect/NN/NNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

#include <string>
#include <utility>

namespace tessel::autodiff {

/// A zero constant of `type` (a float tensor).
mlir::Value zerosLike(mlir::OpBuilder &b, mlir::Location loc, mlir::Type type);

/// A parameter of type `paramType` stored in bf16 by mixed precision: its
/// optimizer keeps an f32 master copy, the first of its states.
bool hasMasterWeights(mlir::ModuleOp module, mlir::Type paramType);

/// The type a parameter of type `paramType` gets its gradient in: f32 for a
/// bf16 parameter when the module's nn.grad_precision is f32, else its own.
mlir::Type gradientType(mlir::ModuleOp module, mlir::Type paramType);

/// Differentiates functions of one module, building the layer derivatives
/// its nn.repeat ops need (named after their layers, placed after them).
class ReverseMode {
public:
  ReverseMode(mlir::ModuleOp module, mlir::SymbolTable &symbols,
              llvm::StringRef recompute)
      : module(module), symbols(symbols), defaultRecompute(recompute) {}

  /// Appends to `func`'s body, before its terminator, the ops that compute
  /// the cotangent of each of `wrt` from the cotangents `seeds` of some of
  /// its values. A null result: that value does not reach a seed.
  mlir::FailureOr<llvm::SmallVector<mlir::Value>>
  differentiate(mlir::func::FuncOp func,
                llvm::ArrayRef<std::pair<mlir::Value, mlir::Value>> seeds,
                llvm::ArrayRef<mlir::Value> wrt,
                llvm::ArrayRef<std::string> wrtNames,
                llvm::SmallVectorImpl<mlir::Operation *> *forwardOps = nullptr);

private:
  /// Also replaces `op` by a repeat that keeps what the derivative reads,
  /// returned in `keeping`. Only the parameters `needed` marks (one flag
  /// per operand: carried values, then parameters) get a gradient.
  mlir::FailureOr<llvm::SmallVector<mlir::Value>>
  differentiateRepeat(nn::RepeatOp op, llvm::ArrayRef<mlir::Value> cotangents,
                      llvm::ArrayRef<bool> needed, mlir::OpBuilder &b,
                      mlir::Operation *&keeping);
  /// The derivative of `layer`: (d outputs, kept values, params) ->
  /// (d carried inputs, d float params that `wantParam` marks, one flag
  /// per parameter). `kept` gets the layer's values the derivative reads,
  /// which its forward must stack. A parameter left out (frozen) costs
  /// nothing: no weight-gradient GEMM, nothing kept for it alone.
  mlir::FailureOr<mlir::func::FuncOp>
  buildLayerDerivative(mlir::func::FuncOp layer, unsigned numCarried,
                       llvm::ArrayRef<bool> wantParam,
                       llvm::SmallVectorImpl<mlir::Value> &kept);
  llvm::StringRef recomputePolicy(mlir::func::FuncOp layer) const {
    if (auto policy = layer->getAttrOfType<mlir::StringAttr>(
            nn::NNDialect::kRecomputeAttrName))
      return policy.getValue();
    return defaultRecompute;
  }
  /// A copy of `func` named after it with `suffix`, placed after it.
  mlir::func::FuncOp cloneFunction(mlir::func::FuncOp func,
                                   llvm::StringRef suffix,
                                   mlir::IRMapping &mapping);

  mlir::ModuleOp module;
  mlir::SymbolTable &symbols;
  llvm::StringRef defaultRecompute;
};

} // namespace tessel::autodiff

#endif // TESSEL_PASSES_REVERSEMODE_H
