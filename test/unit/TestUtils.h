//===- TestUtils.h - parsing nn snippets in GoogleTest -----------*- C++ -*-===//

#ifndef TESSEL_TEST_UNIT_TESTUTILS_H
#define TESSEL_TEST_UNIT_TESTUTILS_H

#include "dialect/NN/NNOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <memory>
#include <string>

namespace tessel::test {

/// A context with nn, func, arith and shard loaded.
std::unique_ptr<mlir::MLIRContext> makeContext();

/// Parses and verifies `source`; fails the current test (and returns null)
/// when it does not parse.
mlir::OwningOpRef<mlir::ModuleOp> parse(mlir::MLIRContext &ctx,
                                        llvm::StringRef source);

/// The first op of type OpT in `module` (null if none).
template <typename OpT> OpT firstOp(mlir::ModuleOp module) {
  OpT found;
  module.walk([&](OpT op) {
    found = op;
    return mlir::WalkResult::interrupt();
  });
  return found;
}

/// `func.func @f(<args>) { <body> return }`: a snippet of nn ops whose
/// results are not returned.
std::string wrapInFunc(llvm::StringRef args, llvm::StringRef body);

/// The first op of the nn dialect in `module` (null if none).
mlir::Operation *firstNNOp(mlir::ModuleOp module);

/// A snippet wrapped in a function, parsed, and its first nn op. The context
/// outlives the module (members are destroyed in reverse order).
struct ParsedOp {
  std::unique_ptr<mlir::MLIRContext> ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::Operation *op = nullptr; // null when parsing failed (already reported)
};
ParsedOp parseFirstNNOp(llvm::StringRef args, llvm::StringRef body);

/// `maps` printed one per line, e.g. "(d0, d1, d2) -> (d0, d2)".
std::string toString(llvm::ArrayRef<mlir::AffineMap> maps);

/// Iterator types printed as "parallel, parallel, reduction".
std::string toString(llvm::ArrayRef<mlir::utils::IteratorType> loops);

/// Reduction kinds printed as "sum, max".
std::string toString(llvm::ArrayRef<mlir::shard::ReductionKind> kinds);

} // namespace tessel::test

#endif // TESSEL_TEST_UNIT_TESTUTILS_H
