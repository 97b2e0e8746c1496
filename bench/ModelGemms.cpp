//===- ModelGemms.cpp - The GEMMs a compiled model runs, read from its IR -===//

#include "bench/ModelGemms.h"
#include "bench/BenchSupport.h"

#include "dialect/NN/NNDialect.h"
#include "dialect/NN/NNInterfaces.h"
#include "dialect/NN/NNOps.h"
#include "passes/Pipelines.h"
#include "passes/RuntimeTypes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"

#include "tessel/runtime.h"

#include <map>

using namespace mlir;
using namespace tessel::bench;

namespace {

int32_t dtypeCode(Type type) {
  std::optional<int32_t> code = tessel::runtimeDtype(type);
  if (!code || *code == TESSEL_I32 || *code == TESSEL_I64)
    throw BenchError("nn.matmul with an element type the runtime cannot "
                     "multiply");
  return *code;
}


/// The arguments tessel-lower-to-runtime passes to tessel_matmul for a
/// matmul, or for the GEMM of a matmul with a fused epilogue (its
/// GEMM-only time is the plain GEMM's).
template <class MatmulLike> Gemm gemmOf(MatmulLike op) {
  ArrayRef<int64_t> lhs = op.getLhs().getType().getShape();
  ArrayRef<int64_t> rhs = op.getRhs().getType().getShape();
  Gemm g;
  g.op = op;
  g.dtype = dtypeCode(op.getLhs().getType().getElementType());
  g.batch = 1;
  for (int64_t d : lhs.drop_back(2))
    g.batch *= d;
  g.ta = op.getTransposeLhs();
  g.tb = op.getTransposeRhs();
  g.m = g.ta ? lhs.back() : lhs[lhs.size() - 2];
  g.k = g.ta ? lhs[lhs.size() - 2] : lhs.back();
  g.n = g.tb ? rhs[rhs.size() - 2] : rhs.back();
  g.shared = rhs.size() == 2;
  return g;
}

/// The GEMM of a matmul, fused epilogue or not (tessel-fuse-epilogues and
/// tessel-fuse-bias-grads build those); none for other ops.
std::optional<Gemm> gemmOfOp(Operation &op) {
  namespace nn = tessel::nn;
  return llvm::TypeSwitch<Operation *, std::optional<Gemm>>(&op)
      .Case<nn::MatmulOp, nn::MatmulAccumulateOp, nn::MatmulBiasOp,
            nn::MatmulBiasGeluOp, nn::MatmulGeluGradOp, nn::MatmulBiasGradOp>(
          [](auto matmul) { return gemmOf(matmul); })
      .Default([](Operation *) { return std::nullopt; });
}

/// Appends the GEMMs `func` executes, in order, to `list`: the body of
/// each nn.repeat's layer function L times (nested repeats included).
/// `index` maps a matmul op to its entry of `list.gemms`.
void collectGemms(func::FuncOp func, GemmList &list,
                  std::map<Operation *, size_t> &index, int depth) {
  if (depth > 64)
    throw BenchError("nn.repeat nests deeper than 64 levels");
  for (Operation &op : func.getBody().front()) {
    if (std::optional<Gemm> gemm = gemmOfOp(op)) {
      auto [it, inserted] = index.try_emplace(&op, list.gemms.size());
      if (inserted)
        list.gemms.push_back(*gemm);
      list.schedule.push_back(it->second);
      list.gemmFlops += list.gemms[it->second].flops();
    } else if (auto repeat = dyn_cast<tessel::nn::RepeatOp>(op)) {
      func::FuncOp layer = repeat.getLayerFunction();
      if (!layer)
        throw BenchError("nn.repeat refers to a missing layer function");
      for (int64_t l = 0, e = repeat.getNumLayers(); l < e; ++l)
        collectGemms(layer, list, index, depth + 1);
    } else if (op.getNumRegions() > 0) {
      throw BenchError("op '" + op.getName().getStringRef().str() +
                       "' has regions; the benchmark does not look inside");
    }
  }
}

/// The GEMMs and flops of `entries` run one after the other. The flops are
/// the sum tessel-compile reports: every op, nn.repeat counting L times its
/// body.
GemmList gemmsOf(ArrayRef<func::FuncOp> entries) {
  GemmList list;
  std::map<Operation *, size_t> index;
  for (func::FuncOp entry : entries) {
    collectGemms(entry, list, index, 0);
    list.totalFlops += tessel::nn::sumCost(entry.getBody().front()).flops;
  }
  return list;
}

} // namespace

const char *tessel::bench::dtypeName(int32_t code) {
  switch (code) {
  case TESSEL_F32: return "f32";
  case TESSEL_F16: return "f16";
  case TESSEL_BF16: return "bf16";
  case TESSEL_F64: return "f64";
  case TESSEL_I32: return "i32";
  case TESSEL_I64: return "i64";
  default: return "?";
  }
}

ModelInfo tessel::bench::analyse(const std::string &path, bool train,
                                 MLIRContext &context) {
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input = openInputFile(path, &error);
  if (!input)
    throw BenchError(path + ": " + error);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    throw BenchError(path + ": does not parse or verify (see above)");
  // What tessel-compile runs before lowering (the plan pipeline), so the
  // GEMM lists are the ones the runtime executes: the training step with its
  // default options (the module's nn.train, else AdamW), canonicalize, cse
  // and the memory plan.
  tessel::CompilePipelineOptions options;
  options.train = train;
  PassManager pm(&context);
  tessel::buildPlanPipeline(pm, options);
  if (failed(pm.run(*module)))
    throw BenchError(path + ": the plan pipeline failed (see above)");

  func::FuncOp model, backward, update;
  for (auto func : module->getOps<func::FuncOp>()) {
    if (func.isExternal())
      continue;
    if (tessel::nn::NNDialect::isModelFunction(func)) {
      if (model)
        throw BenchError(path + ": more than one model function");
      model = func;
    } else if (auto entry = func->getAttrOfType<StringAttr>(
                   tessel::nn::NNDialect::kEntryAttrName)) {
      if (entry.getValue() == "backward")
        backward = func;
      else if (entry.getValue() == "update")
        update = func;
    }
  }
  if (!model)
    throw BenchError(path + ": no model function (a func.func whose "
                            "arguments carry nn.param, nn.input or nn.label)");

  ModelInfo info;
  info.name = llvm::sys::path::stem(path).str();
  info.forward = gemmsOf({model});
  if (info.forward.schedule.empty())
    throw BenchError(path + ": has no nn.matmul; nothing to compare against");
  if (train) {
    if (!backward || !update)
      throw BenchError(path + ": tessel-autodiff made no backward and update "
                              "entries");
    info.train = gemmsOf({backward, update});
    info.backwardFlops = tessel::nn::sumCost(backward.getBody().front()).flops;
  }
  return info;
}
