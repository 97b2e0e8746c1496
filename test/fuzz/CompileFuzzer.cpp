//===- CompileFuzzer.cpp - libFuzzer over parse, verify and the pipeline --===//
//
// What tessel-compile does with a .mlir a user hands it: the first input
// byte picks a device mesh (none, dp=2, tp=2, dp=2,tp=2, pp=2), the rest is
// the module. It is refused when nested too deep (as the tools refuse it,
// tools/ToolStack.h), parsed with the nn dialect, verified and run through
// tessel::buildCompilePipeline with the verifier after every pass. Errors
// (diagnostics, a failed parse or pass) are expected outcomes and are
// swallowed by a handler; a crash, an AddressSanitizer report or a failed
// assertion is a finding. Built and run by scripts/fuzz.sh.
//
//===----------------------------------------------------------------------===//

#include "dialect/NN/NNDialect.h"
#include "passes/Pipelines.h"
#include "tools/ToolStack.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include <cstdint>
#include <cstdlib>

namespace {

/// The meshes the first byte picks among ("" is one device).
constexpr const char *kMeshes[] = {"", "dp=2", "tp=2", "dp=2,tp=2", "pp=2"};

/// The dialects tessel-compile registers.
const mlir::DialectRegistry &compileRegistry() {
  static const mlir::DialectRegistry registry = [] {
    mlir::DialectRegistry r;
    r.insert<tessel::nn::NNDialect, mlir::func::FuncDialect,
             mlir::arith::ArithDialect, mlir::scf::SCFDialect,
             mlir::cf::ControlFlowDialect, mlir::LLVM::LLVMDialect,
             mlir::shard::ShardDialect, mlir::tensor::TensorDialect>();
    return r;
  }();
  return registry;
}

/// Parse, verify and compile `text` on `mesh`; every failure a diagnostic.
void compileOne(llvm::StringRef text, const char *mesh) {
  std::unique_ptr<llvm::MemoryBuffer> input =
      llvm::MemoryBuffer::getMemBufferCopy(text, "fuzz.mlir");
  // The tools refuse this before parsing; upstream's parser would overflow
  // the stack on it (a known finding, not ours to rediscover).
  if (tessel::tools::findTooDeepNesting(input->getBuffer()))
    return;

  // A fresh context per input: no uniqued state carried between inputs,
  // so a finding reproduces from its input alone.
  mlir::MLIRContext context(compileRegistry(),
                            mlir::MLIRContext::Threading::DISABLED);
  context.printOpOnDiagnostic(false);
  context.loadAllAvailableDialects();
  // Errors are expected outcomes: swallowed, never printed.
  mlir::ScopedDiagnosticHandler swallow(
      &context, [](mlir::Diagnostic &) { return mlir::success(); });

  llvm::SourceMgr sources;
  sources.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(sources, &context);
  if (!module || mlir::failed(mlir::verify(*module)))
    return;

  tessel::CompilePipelineOptions options;
  if (*mesh)
    options.mesh = mesh;
  options.source = "fuzz.mlir";
  mlir::PassManager pm(&context);
  tessel::buildCompilePipeline(pm, options);
  (void)pm.run(*module);
}

} // namespace

/// LLVM's BumpPtrAllocator poisons a slab's free space and unpoisons what
/// it hands out, but only where its inline Allocate was compiled with ASan:
/// here, not in libMLIR.so. The context's uniquer shares one allocator
/// between both, so libMLIR would write to memory our copy poisoned (a
/// false use-after-poison). Manual poisoning off; ASan's own checks stay.
extern "C" const char *__asan_default_options() {
  return "allow_user_poisoning=0";
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  const char *mesh = kMeshes[data[0] % std::size(kMeshes)];
  llvm::StringRef text(reinterpret_cast<const char *>(data + 1), size - 1);
  // On the tools' stack: an input within the nesting limit may still
  // recurse deeper than the 8 MiB main thread holds under ASan.
  tessel::tools::runOnToolStack([&] {
    compileOne(text, mesh);
    return 0;
  });
  return 0;
}
