//===- Views.h - Reshapes and slices viewing a tensor's memory --*- C++ -*-===//
//
// An nn.reshape computes nothing: its result is its operand's bytes (the
// memory plan gives both one buffer; the lowering passes the pointer on).
// The passes that ask who reads or writes a tensor's memory (the overlap
// of communication, the memory plan, the fusion of bias gradients) look
// through these views alike. An nn.slice whose window is one contiguous
// run of its input's bytes (a bucket's gradient, a row block) may be a
// view too, at an offset: the memory plan decides (tessel.view), and the
// passes that ask who reads a tensor's memory count every slice of it.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_PASSES_VIEWS_H
#define TESSEL_PASSES_VIEWS_H

#include "dialect/NN/NNOps.h"

#include "mlir/IR/Value.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace tessel::views {

/// The value `value` views through reshapes (itself when it is none).
inline mlir::Value viewedBase(mlir::Value value) {
  while (auto reshape = value.getDefiningOp<nn::ReshapeOp>())
    value = reshape.getInput();
  return value;
}

/// The tensor `value` views through ops of `ViewOps` (their operand 0),
/// then every result of such ops of it, transitively, the tensor first.
template <class... ViewOps>
llvm::SmallVector<mlir::Value> viewClosure(mlir::Value value) {
  mlir::Operation *def = value.getDefiningOp();
  while (def && llvm::isa<ViewOps...>(def)) {
    value = def->getOperand(0);
    def = value.getDefiningOp();
  }
  llvm::SmallVector<mlir::Value> aliases{value};
  for (size_t i = 0; i < aliases.size(); ++i)
    for (mlir::Operation *user : aliases[i].getUsers())
      if (llvm::isa<ViewOps...>(user))
        aliases.push_back(user->getResult(0));
  return aliases;
}

/// `value`'s base (viewedBase) and every reshape of it, or of such a
/// reshape: the values that share its memory, the base first.
inline llvm::SmallVector<mlir::Value> aliasesOf(mlir::Value value) {
  return viewClosure<nn::ReshapeOp>(value);
}

/// The element offset of `slice`'s window in its input when the window is
/// one contiguous run of the input's row-major elements (dimensions of size
/// 1, then one partial dimension of step 1, then whole ones); none
/// otherwise, or for an empty window.
inline std::optional<int64_t> contiguousSliceStart(nn::SliceOp slice) {
  llvm::ArrayRef<int64_t> in = slice.getInput().getType().getShape();
  llvm::ArrayRef<int64_t> out = slice.getType().getShape();
  llvm::SmallVector<int64_t> steps = slice.getStridesOrOnes();
  llvm::ArrayRef<int64_t> start = slice.getStart();
  if (llvm::is_contained(out, 0))
    return std::nullopt;
  // The dimensions after `partial` are whole, those before it of size 1.
  size_t partial = in.size();
  while (partial > 0 && out[partial - 1] == in[partial - 1])
    --partial;
  int64_t offset = 0, stride = 1;
  for (size_t dim = in.size(); dim-- > 0;) {
    if (dim + 1 < partial && out[dim] != 1)
      return std::nullopt;
    if (out[dim] > 1 && steps[dim] != 1)
      return std::nullopt;
    offset += start[dim] * stride;
    stride *= in[dim];
  }
  return offset;
}

/// Every value that may read `value`'s memory: the tensor it views
/// through reshapes and slices, and every reshape and slice of that,
/// transitively, the viewed tensor first. A conservative superset of the
/// values the memory plan gives those bytes (a slice it copies, or a
/// sibling slice of other bytes, is listed too).
inline llvm::SmallVector<mlir::Value> readersOfMemory(mlir::Value value) {
  return viewClosure<nn::ReshapeOp, nn::SliceOp>(value);
}

} // namespace tessel::views

#endif // TESSEL_PASSES_VIEWS_H
