//===- BlockSlice.h - The ops of a block that values depend on -*- C++ -*-===//
//
// What tessel-split-backward, tessel-split-update-norm and
// tessel-keep-stage-activations move out of an entry: the ops of its body
// that some of its values are computed from, and the new function's body
// made of them.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_PASSES_BLOCKSLICE_H
#define TESSEL_PASSES_BLOCKSLICE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
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

/// Ends `into` with clones of `ops`, in order, reading through `map`, and
/// a func.return at `loc` of `returned` as mapped (a value `map` does not
/// know, such as an argument of `into`, returns as it is).
inline void cloneAndReturn(mlir::Block *into,
                           llvm::ArrayRef<mlir::Operation *> ops,
                           llvm::ArrayRef<mlir::Value> returned,
                           mlir::IRMapping &map, mlir::Location loc) {
  mlir::OpBuilder b = mlir::OpBuilder::atBlockEnd(into);
  for (mlir::Operation *op : ops)
    b.clone(*op, map);
  llvm::SmallVector<mlir::Value> results;
  for (mlir::Value v : returned)
    results.push_back(map.lookupOrDefault(v));
  mlir::func::ReturnOp::create(b, loc, results);
}

} // namespace tessel

#endif // TESSEL_PASSES_BLOCKSLICE_H
