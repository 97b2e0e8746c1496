//===- Views.h - Reshapes and slices viewing a tensor's memory --*- C++ -*-===//
//
// An nn.reshape computes nothing: its result is its operand's bytes (the
// memory plan gives both one buffer; the lowering passes the pointer on).
// The passes that ask who reads or writes a tensor's memory (the overlap
// of communication, the memory plan, the fusion of bias gradients) look
// through these views alike. An nn.slice whose window is one contiguous
// run of its input's bytes (a bucket's gradient, a row block) may be a
// view too, at an offset, and so may an nn.broadcast that only binary ops
// read, along the rows or the columns of their other operand (a bias): the
// memory plan decides (tessel.view), and the passes that ask who reads a
// tensor's memory count every slice and broadcast of it.
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

/// How a broadcast's result reads its input as an [rows, cols] view: one
/// input element per column (the input is the result's trailing
/// dimensions: a bias, a position table) or per row (its leading ones: a
/// row's statistic).
struct BroadcastPairing {
  int64_t rows, cols;
  bool perRow;
};

/// `broadcast`'s pairing, or none when its new (or size-1, repeated)
/// dimensions are neither all before nor all after the ones it keeps.
/// Result dimensions of size 1 count as neither.
inline std::optional<BroadcastPairing>
broadcastPairing(nn::BroadcastOp broadcast) {
  llvm::ArrayRef<int64_t> in = broadcast.getInput().getType().getShape();
  llvm::ArrayRef<int64_t> out = broadcast.getType().getShape();
  llvm::SmallVector<bool> kept(out.size(), false);
  for (auto [i, dim] : llvm::enumerate(broadcast.getDims()))
    kept[dim] = in[i] == out[dim];
  // The first and last dimension of each kind (of size > 1).
  int64_t firstKept = -1, lastKept = -1, firstNew = -1, lastNew = -1;
  for (int64_t dim = 0; dim < static_cast<int64_t>(out.size()); ++dim) {
    if (out[dim] == 1)
      continue;
    int64_t &first = kept[dim] ? firstKept : firstNew;
    (kept[dim] ? lastKept : lastNew) = dim;
    if (first < 0)
      first = dim;
  }
  auto product = [&](int64_t begin, int64_t end) {
    int64_t size = 1;
    for (int64_t dim = begin; dim < end; ++dim)
      size *= out[dim];
    return size;
  };
  const int64_t rank = static_cast<int64_t>(out.size());
  if (firstKept < 0 || firstNew < 0 || lastNew < firstKept) {
    // Kept after new (or one kind only): a value per column.
    int64_t split = lastNew + 1;
    return BroadcastPairing{product(0, split), product(split, rank), false};
  }
  if (lastKept < firstNew) {
    int64_t split = lastKept + 1;
    return BroadcastPairing{product(0, split), product(split, rank), true};
  }
  return std::nullopt;
}

/// Whether `broadcast` is read only by binary ops (tessel_binary's: add,
/// sub, mul, div, equal) whose other operand is no broadcast: each can
/// read the broadcast's input where it lies, along broadcastPairing.
inline bool readOnlyByBinaryOps(nn::BroadcastOp broadcast) {
  mlir::Value result = broadcast.getResult();
  return !result.use_empty() &&
         llvm::all_of(result.getUsers(), [&](mlir::Operation *user) {
           if (!llvm::isa<nn::AddOp, nn::SubOp, nn::MulOp, nn::DivOp,
                          nn::EqualOp>(user))
             return false;
           mlir::Value other = user->getOperand(0) == result
                                   ? user->getOperand(1)
                                   : user->getOperand(0);
           return !other.getDefiningOp<nn::BroadcastOp>();
         });
}

/// Whether the memory plan may make `broadcast` a view (tessel.view: it
/// does unless the input's memory is updated in place), which then issues
/// no kernel: no cover for a started collective.
inline bool mayBeView(nn::BroadcastOp broadcast) {
  return broadcastPairing(broadcast) && readOnlyByBinaryOps(broadcast);
}

/// Every value that may read `value`'s memory: the tensor it views
/// through reshapes and slices, and every reshape, slice and broadcast of
/// that, transitively, the viewed tensor first. A conservative superset of
/// the values the memory plan gives those bytes (a slice or broadcast it
/// copies, or a sibling slice of other bytes, is listed too).
inline llvm::SmallVector<mlir::Value> readersOfMemory(mlir::Value value) {
  return viewClosure<nn::ReshapeOp, nn::SliceOp, nn::BroadcastOp>(value);
}

} // namespace tessel::views

#endif // TESSEL_PASSES_VIEWS_H
