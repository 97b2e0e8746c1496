//===- ModelFile.h - A model file parsed as the compiler's tools do -*- C++
//-*-===//
//
// What tessel-compile and tessel-plan do before their work: the dialects of
// a model and of the compile pipeline, and the model file opened, its
// nesting checked and parsed, with a source-located diagnostic handler that
// stays for the passes' errors.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_TOOLS_MODELFILE_H
#define TESSEL_TOOLS_MODELFILE_H

#include "dialect/NN/NNDialect.h"
#include "tools/ToolStack.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>

namespace tessel::tools {

/// The dialects a model and the compile pipeline (down to the LLVM dialect)
/// use.
inline void insertCompilerDialects(mlir::DialectRegistry &registry) {
  registry.insert<nn::NNDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect, mlir::scf::SCFDialect,
                  mlir::cf::ControlFlowDialect, mlir::LLVM::LLVMDialect,
                  mlir::shard::ShardDialect, mlir::tensor::TensorDialect>();
}

/// A model file and the diagnostics at its locations, for as long as it
/// lives.
class ModelFile {
public:
  explicit ModelFile(mlir::MLIRContext &context) : context(context) {}

  /// The module of `file`, or null after the error: "<tool>: <file>:
  /// <why>" when it cannot be read, too deep a nesting, or the parser's
  /// located errors.
  mlir::OwningOpRef<mlir::ModuleOp> parse(llvm::StringRef file,
                                          llvm::StringRef tool) {
    std::string error;
    std::unique_ptr<llvm::MemoryBuffer> input =
        mlir::openInputFile(file, &error);
    if (!input) {
      llvm::errs() << tool << ": " << file << ": " << error << "\n";
      return nullptr;
    }
    if (refuseTooDeepNesting(*input))
      return nullptr;
    sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
    handler =
        std::make_unique<mlir::SourceMgrDiagnosticHandler>(sourceMgr, &context);
    return mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, &context);
  }

private:
  mlir::MLIRContext &context;
  llvm::SourceMgr sourceMgr;
  std::unique_ptr<mlir::SourceMgrDiagnosticHandler> handler;
};

} // namespace tessel::tools

#endif // TESSEL_TOOLS_MODELFILE_H
