//===- FusionPlacement.h - Where a fused op may stand -----------*- C++ -*-===//
//
// What the fusing passes (tessel-fuse-epilogues, tessel-fuse-bias-grads,
// tessel-accumulate-in-layers) ask before they put two ops' work at the
// place of one of them: whether a value exists there (or can be computed
// there) and who reads it in between, and which GEMM (or its widening to
// f32) alone produces a value.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_PASSES_FUSIONPLACEMENT_H
#define TESSEL_PASSES_FUSIONPLACEMENT_H

#include "dialect/NN/NNOps.h"

#include "mlir/IR/Block.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/IR/Value.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/STLExtras.h"

namespace tessel::fusion {

/// Whether something between `from` and `to` (same block, `from` first)
/// uses `value`.
inline bool usedBetween(mlir::Value value, mlir::Operation *from,
                        mlir::Operation *to) {
  for (mlir::Operation *user : value.getUsers()) {
    if (user == to)
      continue;
    if (user->getBlock() != from->getBlock() ||
        (from->isBeforeInBlock(user) && user->isBeforeInBlock(to)))
      return true;
  }
  return false;
}

/// Whether `value` is available at `op`: defined in another block (an
/// enclosing one: `op` uses it in the same region), or before `op`.
inline bool availableAt(mlir::Value value, mlir::Operation *op) {
  mlir::Operation *def = value.getDefiningOp();
  return !def || def->getBlock() != op->getBlock() || def->isBeforeInBlock(op);
}

/// Moves the side-effect-free ops that compute `value` after `op` (in its
/// block: at most `limit` of them, none with regions) above `op`, in their
/// order, when everything else they read is available there; returns
/// whether `value` is then available at `op` (nothing moves otherwise).
/// A loss's gradient seed scaled after the loss (a mean's count, a
/// weight per position) can so be computed before it.
inline bool hoistAbove(mlir::Value value, mlir::Operation *op,
                       unsigned limit = 8) {
  llvm::SmallVector<mlir::Operation *> chain;
  llvm::SmallVector<mlir::Value> pending = {value};
  while (!pending.empty()) {
    mlir::Value next = pending.pop_back_val();
    if (availableAt(next, op))
      continue;
    mlir::Operation *def = next.getDefiningOp();
    if (llvm::is_contained(chain, def))
      continue;
    if (def == op || chain.size() == limit || def->getNumRegions() != 0 ||
        !mlir::isMemoryEffectFree(def))
      return false;
    chain.push_back(def);
    llvm::append_range(pending, def->getOperands());
  }
  llvm::sort(chain, [](mlir::Operation *a, mlir::Operation *b) {
    return a->isBeforeInBlock(b);
  });
  for (mlir::Operation *def : chain)
    def->moveBefore(op);
  return true;
}

/// Whether every user of `value` is after `op` in its block (or in another
/// block).
inline bool onlyUsedAfter(mlir::Value value, mlir::Operation *op) {
  return llvm::all_of(value.getUsers(), [&](mlir::Operation *user) {
    mlir::Operation *inBlock = op->getBlock()->findAncestorOpInBlock(*user);
    return !inBlock || op->isBeforeInBlock(inBlock);
  });
}

/// The matmul that defines `value` when the op using it is its only user.
inline nn::MatmulOp soleMatmul(mlir::Value value) {
  auto matmul = value.getDefiningOp<nn::MatmulOp>();
  // A summed batch has no fused form (a partitioned program's are flattened).
  return matmul && matmul->hasOneUse() && !matmul.getSumBatch()
             ? matmul
             : nn::MatmulOp();
}

/// The cast that defines `value` by widening an f16 or bf16 value to f32,
/// or null.
inline nn::CastOp widening(mlir::Value value) {
  auto cast = value.getDefiningOp<nn::CastOp>();
  if (!cast || !mlir::getElementTypeOrSelf(cast.getResult()).isF32())
    return nn::CastOp();
  mlir::Type narrow = mlir::getElementTypeOrSelf(cast.getInput());
  return narrow.isBF16() || narrow.isF16() ? cast : nn::CastOp();
}

/// The widening cast of a 16-bit value to f32 that defines `value` and is
/// its only user's operand, or null: a mixed-precision gradient on its way
/// to its f32 accumulator.
inline nn::CastOp soleWidening(mlir::Value value) {
  nn::CastOp cast = widening(value);
  return cast && cast->hasOneUse() ? cast : nn::CastOp();
}

} // namespace tessel::fusion

#endif // TESSEL_PASSES_FUSIONPLACEMENT_H
