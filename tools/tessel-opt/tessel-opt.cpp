//===- tessel-opt.cpp - opt-style driver for nn and every Tessel pass -----===//

#include "dialect/NN/NNDialect.h"
#include "passes/Passes.h"
#include "passes/Pipelines.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Dialect/Func/Extensions/ShardingExtensions.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/Transforms/Passes.h"
#include "mlir/Dialect/Tensor/Extensions/ShardingExtensions.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "tools/ToolStack.h"

#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"

namespace {

/// mlir-opt's main, with the input's nesting checked before it is parsed
/// (tools/ToolStack.h); runs on the tools' large stack.
int optMain(int argc, char **argv, mlir::DialectRegistry &registry) {
  auto [inputFile, outputFile] = mlir::registerAndParseCLIOptions(
      argc, argv, "Tessel optimizer driver\n", registry);
  mlir::MlirOptMainConfig config =
      mlir::MlirOptMainConfig::createFromCLOptions();
  if (config.shouldShowDialects()) {
    llvm::outs() << "Available Dialects: ";
    llvm::interleave(registry.getDialectNames(), llvm::outs(), ",");
    llvm::outs() << "\n";
    return 0;
  }
  if (config.shouldListPasses()) {
    mlir::printRegisteredPasses();
    return 0;
  }
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      mlir::openInputFile(inputFile, &error);
  if (!input) {
    llvm::errs() << error << "\n";
    return 1;
  }
  if (tessel::tools::refuseTooDeepNesting(*input))
    return 1;
  std::unique_ptr<llvm::ToolOutputFile> output =
      mlir::openOutputFile(outputFile, &error);
  if (!output) {
    llvm::errs() << error << "\n";
    return 1;
  }
  if (mlir::failed(
          mlir::MlirOptMain(output->os(), std::move(input), registry, config)))
    return 1;
  output->keep();
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  mlir::DialectRegistry registry;
  registry.insert<tessel::nn::NNDialect, mlir::shard::ShardDialect,
                  mlir::func::FuncDialect, mlir::arith::ArithDialect,
                  mlir::scf::SCFDialect, mlir::tensor::TensorDialect,
                  mlir::cf::ControlFlowDialect, mlir::LLVM::LLVMDialect>();
  mlir::func::registerInlinerExtension(registry);
  mlir::func::registerShardingInterfaceExternalModels(registry);
  mlir::tensor::registerShardingInterfaceExternalModels(registry);

  // Upstream: canonicalize, cse, inline, symbol-dce, ...; sharding-propagation
  // and shard-partition, the peer our partitioner is measured against.
  mlir::registerTransformsPasses();
  mlir::shard::registerShardPasses();
  // The lowering after tessel-lower-to-runtime: scf/arith/cf to LLVM.
  mlir::registerConversionPasses();
  tessel::registerTesselPasses();
  tessel::registerTesselPipelines();

  return tessel::tools::runOnToolStack(
      [&] { return optMain(argc, argv, registry); });
}
