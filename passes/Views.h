//===- Views.h - Reshapes are views of one tensor's memory ------*- C++ -*-===//
//
// An nn.reshape computes nothing: its result is its operand's bytes (the
// memory plan gives both one buffer; the lowering passes the pointer on).
// The passes that ask who reads or writes a tensor's memory (the overlap
// of communication, the memory plan, the fusion of bias gradients) look
// through these views alike.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_PASSES_VIEWS_H
#define TESSEL_PASSES_VIEWS_H

#include "dialect/NN/NNOps.h"

#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"

namespace tessel::views {

/// The value `value` views through reshapes (itself when it is none).
inline mlir::Value viewedBase(mlir::Value value) {
  while (auto reshape = value.getDefiningOp<nn::ReshapeOp>())
    value = reshape.getInput();
  return value;
}

/// `value`'s base (viewedBase) and every reshape of it, or of such a
/// reshape: the values that share its memory, the base first.
inline llvm::SmallVector<mlir::Value> aliasesOf(mlir::Value value) {
  llvm::SmallVector<mlir::Value> aliases{viewedBase(value)};
  for (size_t i = 0; i < aliases.size(); ++i)
    for (mlir::Operation *user : aliases[i].getUsers())
      if (auto reshape = llvm::dyn_cast<nn::ReshapeOp>(user))
        aliases.push_back(reshape.getResult());
  return aliases;
}

} // namespace tessel::views

#endif // TESSEL_PASSES_VIEWS_H
