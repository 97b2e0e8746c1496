//===- BlockSlice.h - The ops of a block that values depend on -*- C++ -*-===//
//
// What tessel-split-backward and tessel-split-update-norm move out of an
// entry: the ops of its body that some of its values are computed from.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_PASSES_BLOCKSLICE_H
#define TESSEL_PASSES_BLOCKSLICE_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

namespace tessel {

using OpSet = llvm::SetVector<mlir::Operation *>;

/// The ops of `block` that `roots` depend on (through values defined in
/// `block`), in block order.
inline OpSet sliceOf(mlir::Block &block, llvm::ArrayRef<mlir::Value> roots) {
  llvm::DenseSet<mlir::Operation *> seen;
  llvm::SmallVector<mlir::Operation *> work;
  auto visit = [&](mlir::Value v) {
    mlir::Operation *def = v.getDefiningOp();
    if (def && def->getBlock() == &block && seen.insert(def).second)
      work.push_back(def);
  };
  for (mlir::Value v : roots)
    visit(v);
  while (!work.empty())
    for (mlir::Value operand : work.pop_back_val()->getOperands())
      visit(operand);
  OpSet ordered;
  for (mlir::Operation &op : block.without_terminator())
    if (seen.contains(&op))
      ordered.insert(&op);
  return ordered;
}

} // namespace tessel

#endif // TESSEL_PASSES_BLOCKSLICE_H
