//===- TestUtils.cpp - parsing nn snippets in GoogleTest ------------------===//

#include "TestUtils.h"

#include "dialect/NN/NNDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace mlir;

namespace tessel::test {

std::unique_ptr<MLIRContext> makeContext() {
  auto ctx = std::make_unique<MLIRContext>();
  ctx->loadDialect<nn::NNDialect, func::FuncDialect, arith::ArithDialect,
                   shard::ShardDialect>();
  return ctx;
}

OwningOpRef<ModuleOp> parse(MLIRContext &ctx, llvm::StringRef source) {
  std::string diagnostics;
  llvm::raw_string_ostream os(diagnostics);
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &diag) {
    os << diag << "\n";
    return success();
  });
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(source, &ctx);
  EXPECT_TRUE(module) << "failed to parse:\n" << source.str() << "\n" << diagnostics;
  return module;
}

std::string wrapInFunc(llvm::StringRef args, llvm::StringRef body) {
  return ("func.func @f(" + args + ") {\n" + body + "\n  return\n}").str();
}

Operation *firstNNOp(ModuleOp module) {
  Operation *found = nullptr;
  module.walk([&](Operation *op) {
    if (isa<nn::NNDialect>(op->getDialect())) {
      found = op;
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return found;
}

ParsedOp parseFirstNNOp(llvm::StringRef args, llvm::StringRef body) {
  ParsedOp parsed;
  parsed.ctx = makeContext();
  parsed.module = parse(*parsed.ctx, wrapInFunc(args, body));
  if (parsed.module)
    parsed.op = firstNNOp(*parsed.module);
  return parsed;
}

std::string toString(llvm::ArrayRef<AffineMap> maps) {
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::interleave(maps, os, [&](AffineMap map) { os << map; }, "\n");
  return text;
}

std::string toString(llvm::ArrayRef<utils::IteratorType> loops) {
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::interleave(
      loops, os,
      [&](utils::IteratorType type) {
        os << (type == utils::IteratorType::parallel ? "parallel"
                                                     : "reduction");
      },
      ", ");
  return text;
}

std::string toString(llvm::ArrayRef<shard::ReductionKind> kinds) {
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::interleave(
      kinds, os,
      [&](shard::ReductionKind kind) { os << shard::stringifyEnum(kind); },
      ", ");
  return text;
}

} // namespace tessel::test
