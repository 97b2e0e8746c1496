//===- tessel-bench-step.cpp - Step time against the model's GEMMs alone --===//
//
// For each MODEL.mlir given:
//
//  1. parses it with the nn dialect, runs canonicalize + cse as tessel-compile
//     does, and lists every nn.matmul the runtime will execute, in program
//     order (the body of an nn.repeat layer L times), with its tessel_matmul
//     arguments (batch, m, n, k, transposes, shared rhs, element type); sums
//     the flops of every op (CostOpInterface, nn.repeat included) and of the
//     matmuls;
//  2. compiles it with the tessel-compile next to this executable, dlopens
//     the .so (RTLD_DEEPBIND: its kernel calls bind to libtessel_runtime.so),
//     creates a CPU context, allocates the arena, initialises the parameters
//     as the description says, fills inputs (floats N(0,1), integers in
//     [0, limit)), warms up, and times tessel_forward: the median over R runs
//     of enough iterations to last at least --min-time seconds each;
//  3. times the same GEMM list called directly with cblas_sgemm (cblas_dgemm
//     for f64) on buffers of the same shapes, with the loop structure of the
//     runtime's matmul (one folded GEMM for a shared rhs with an untransposed
//     lhs, a loop over the batch otherwise), one OpenBLAS thread as the
//     runtime uses;
//  4. (unless --no-profile) opens a second copy of the .so without
//     RTLD_DEEPBIND, so its kernel calls go through the timed definitions of
//     KernelProfile.cpp, and reports the time per kernel.
//
// Prints two markdown tables on stdout: the step against the GEMMs, and the
// per-kernel breakdown. Progress goes to stderr. Exits 1 with a message on
// any error.
//
//===----------------------------------------------------------------------===//

#include "Data.h"
#include "Error.h"
#include "KernelProfile.h"
#include "Model.h"

#include "dialect/NN/NNDialect.h"
#include "dialect/NN/NNOps.h"
#include "passes/RuntimeTypes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Transforms/Passes.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include "tessel/runtime.h"

#include <cblas.h>
#include <dlfcn.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

// Declared here too: not every cblas.h exposes it.
extern "C" void openblas_set_num_threads(int num_threads);

using namespace mlir;
using nlohmann::json;

namespace {

struct BenchError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Options {
  std::vector<std::string> models;
  int runs = 7;
  double minTime = 0.2;
  uint64_t seed = 0;
  bool profile = true;
  bool header = true;
  bool verbose = false;
};

//===--- 1. The GEMMs of the model ---------------------------------------===//

/// One nn.matmul as tessel_matmul sees it.
struct Gemm {
  Operation *op;
  int32_t dtype;
  int64_t batch, m, n, k;
  bool ta, tb, shared;
  int64_t flops() const { return 2 * batch * m * n * k; }
};

struct ModelInfo {
  std::string name;
  std::vector<Gemm> gemms;       // one per distinct nn.matmul op
  std::vector<size_t> schedule;  // indices into gemms, in execution order
  int64_t totalFlops = 0;        // every op of the model function
  int64_t gemmFlops = 0;         // the nn.matmuls (repeat bodies L times)
};

int32_t dtypeCode(Type type) {
  std::optional<int32_t> code = tessel::runtimeDtype(type);
  if (!code || *code == TESSEL_I32 || *code == TESSEL_I64)
    throw BenchError("nn.matmul with an element type the runtime cannot "
                     "multiply");
  return *code;
}

const char *dtypeName(int32_t code) {
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

/// The arguments tessel-lower-to-runtime passes to tessel_matmul.
Gemm gemmOf(tessel::nn::MatmulOp op) {
  ArrayRef<int64_t> lhs = op.getLhs().getType().getShape();
  ArrayRef<int64_t> rhs = op.getRhs().getType().getShape();
  Gemm g;
  g.op = op;
  g.dtype = dtypeCode(op.getResult().getType().getElementType());
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

/// Appends the matmuls `func` executes, in order, expanding nn.repeat.
void collectGemms(func::FuncOp func, ModelInfo &info,
                  std::map<Operation *, size_t> &index, int depth) {
  if (depth > 64)
    throw BenchError("nn.repeat nests deeper than 64 levels");
  for (Operation &op : func.getBody().front()) {
    if (auto matmul = dyn_cast<tessel::nn::MatmulOp>(op)) {
      auto [it, inserted] = index.try_emplace(&op, info.gemms.size());
      if (inserted)
        info.gemms.push_back(gemmOf(matmul));
      info.schedule.push_back(it->second);
      info.gemmFlops += info.gemms[it->second].flops();
    } else if (auto repeat = dyn_cast<tessel::nn::RepeatOp>(op)) {
      func::FuncOp layer = repeat.getLayerFunction();
      if (!layer)
        throw BenchError("nn.repeat refers to a missing layer function");
      for (int64_t l = 0, e = repeat.getNumLayers(); l < e; ++l)
        collectGemms(layer, info, index, depth + 1);
    } else if (op.getNumRegions() > 0) {
      throw BenchError("op '" + op.getName().getStringRef().str() +
                       "' has regions; the benchmark does not look inside");
    }
  }
}

bool isModelFunction(func::FuncOp func) {
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
    if (func.getArgAttr(i, tessel::nn::NNDialect::kParamAttrName) ||
        func.getArgAttr(i, tessel::nn::NNDialect::kInputAttrName) ||
        func.getArgAttr(i, tessel::nn::NNDialect::kLabelAttrName))
      return true;
  return false;
}

ModelInfo analyse(const std::string &path, MLIRContext &context) {
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
  // What tessel-compile runs before lowering, so the GEMM list is the one
  // the runtime executes.
  PassManager pm(&context);
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  if (failed(pm.run(*module)))
    throw BenchError(path + ": canonicalize/cse failed (see above)");

  func::FuncOp model;
  for (auto func : module->getOps<func::FuncOp>())
    if (!func.isExternal() && isModelFunction(func)) {
      if (model)
        throw BenchError(path + ": more than one model function");
      model = func;
    }
  if (!model)
    throw BenchError(path + ": no model function (a func.func whose "
                            "arguments carry nn.param, nn.input or nn.label)");

  ModelInfo info;
  info.name = llvm::sys::path::stem(path).str();
  std::map<Operation *, size_t> index;
  collectGemms(model, info, index, 0);
  // The same sum tessel-compile reports: every op of the model function,
  // nn.repeat counting L times its body.
  info.totalFlops = tessel::nn::sumCost(model.getBody().front()).flops;
  if (info.schedule.empty())
    throw BenchError(path + ": has no nn.matmul; nothing to compare against");
  return info;
}

//===--- 2. The compiled model -------------------------------------------===//
//
// Compiled, loaded, initialised and fed exactly as tessel-run does it
// (tools/tessel-run: TesselLauncher).

/// The model's arena, parameters initialised and one synthetic batch
/// written, ready for repeated steps.
struct PreparedModel {
  tessel::run::LoadedModel model;
  tessel::run::RankRuntime rt;

  PreparedModel(const std::string &so, uint64_t seed)
      : model(tessel::run::loadModel(so, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND)),
        rt(model.desc.arenaBytes) {
    tessel::run::initParams(model.desc, rt.ctx, rt.arena, seed);
    tessel::run::makeSyntheticData(model.desc, seed)->fill(0, rt.ctx, rt.arena);
    tessel_synchronize(rt.ctx);
    check("initialising parameters and inputs");
  }

  void check(const std::string &when) {
    tessel::run::checkKernelError(rt.ctx, when);
  }

  double readLoss() {
    return tessel::run::readLoss(model.desc.loss(), rt.ctx, rt.arena);
  }
};

//===--- Timing ----------------------------------------------------------===//

/// Warms `body` up (at least 3 calls and 0.1 s) and returns the number of
/// calls one timed run needs to last at least `minTime` seconds.
int64_t warmUp(const std::function<void()> &body, double minTime) {
  double start = now();
  int64_t calls = 0;
  do {
    body();
    ++calls;
  } while (calls < 3 || now() - start < 0.1);
  double each = (now() - start) / double(calls);
  // 10% margin: the warm-up may have run faster than a timed run will.
  return std::max<int64_t>(1, int64_t(std::ceil(minTime * 1.1 / each)));
}

struct Timing {
  int64_t iterations = 0;          // calls per run
  std::vector<double> perCall;     // seconds per call, one per run
  std::vector<double> kernelPerCall; // runtime counters, one per run
  double totalSeconds = 0;         // every run together
};

/// R runs of `iterations` calls; `before`/`after` bracket each run.
Timing timeRuns(const std::function<void()> &body, int64_t iterations,
                int runs, const std::function<void()> &before = {},
                const std::function<double()> &after = {}) {
  Timing t;
  t.iterations = iterations;
  for (int r = 0; r < runs; ++r) {
    if (before)
      before();
    double start = now();
    for (int64_t i = 0; i < iterations; ++i)
      body();
    double elapsed = now() - start;
    t.totalSeconds += elapsed;
    t.perCall.push_back(elapsed / double(iterations));
    if (after)
      t.kernelPerCall.push_back(after() / double(iterations));
  }
  return t;
}

//===--- 3. The GEMMs alone ----------------------------------------------===//

struct AlignedFree {
  void operator()(void *p) const { std::free(p); }
};
using Buffer = std::unique_ptr<char, AlignedFree>;

Buffer allocate(int64_t bytes, std::mt19937_64 &rng, bool isDouble) {
  size_t size = size_t(std::max<int64_t>(64, (bytes + 63) / 64 * 64));
  Buffer buffer(static_cast<char *>(std::aligned_alloc(64, size)));
  if (!buffer)
    throw BenchError("out of memory for the GEMM buffers");
  std::memset(buffer.get(), 0, size);
  std::normal_distribution<double> dist(0.0, 1.0);
  if (isDouble) {
    double *p = reinterpret_cast<double *>(buffer.get());
    for (int64_t i = 0; i < bytes / 8; ++i)
      p[i] = dist(rng);
  } else {
    float *p = reinterpret_cast<float *>(buffer.get());
    for (int64_t i = 0; i < bytes / 4; ++i)
      p[i] = float(dist(rng));
  }
  return buffer;
}

/// The runtime's matmulReal (runtime/cpu/matmul.cpp) on raw BLAS.
template <class R>
void runGemm(const Gemm &g, const R *a, const R *b, R *c) {
  auto gemm = [](bool ta, bool tb, int m, int n, int k, const R *a, int lda,
                 const R *b, int ldb, R *c, int ldc) {
    if constexpr (std::is_same_v<R, float>)
      cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                  tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, lda, b,
                  ldb, 0.0f, c, ldc);
    else
      cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                  tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0, a, lda, b,
                  ldb, 0.0, c, ldc);
  };
  auto ld = [](int64_t v) { return int(v < 1 ? 1 : v); };
  int lda = ld(g.ta ? g.m : g.k), ldb = ld(g.tb ? g.k : g.n), ldc = ld(g.n);
  if (g.batch * g.m * g.n == 0 || g.k == 0)
    return;
  if (g.shared && !g.ta && g.batch * g.m <= INT_MAX) {
    gemm(false, g.tb, int(g.batch * g.m), int(g.n), int(g.k), a, lda, b, ldb,
         c, ldc);
    return;
  }
  for (int64_t i = 0; i < g.batch; ++i)
    gemm(g.ta, g.tb, int(g.m), int(g.n), int(g.k), a + i * g.m * g.k, lda,
         b + (g.shared ? 0 : i * g.k * g.n), ldb, c + i * g.m * g.n, ldc);
}

/// Buffers for the GEMM list: lhs and result per nn.matmul op (the
/// runtime's scratch is reused from one layer application to the next), the
/// rhs per executed call (each layer reads its own slice of the stacked
/// weights).
struct GemmBench {
  const ModelInfo &info;
  std::vector<Buffer> lhs, out, rhs;

  GemmBench(const ModelInfo &info, uint64_t seed) : info(info) {
    std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
    for (const Gemm &g : info.gemms) {
      bool dbl = g.dtype == TESSEL_F64;
      int64_t es = dbl ? 8 : 4; // 16-bit: the runtime multiplies in f32.
      lhs.push_back(allocate(g.batch * g.m * g.k * es, rng, dbl));
      out.push_back(allocate(g.batch * g.m * g.n * es, rng, dbl));
    }
    for (size_t i : info.schedule) {
      const Gemm &g = info.gemms[i];
      bool dbl = g.dtype == TESSEL_F64;
      int64_t es = dbl ? 8 : 4;
      rhs.push_back(allocate((g.shared ? 1 : g.batch) * g.k * g.n * es, rng,
                             dbl));
    }
  }

  void step() {
    for (size_t s = 0; s < info.schedule.size(); ++s) {
      size_t i = info.schedule[s];
      const Gemm &g = info.gemms[i];
      if (g.dtype == TESSEL_F64)
        runGemm<double>(g, reinterpret_cast<const double *>(lhs[i].get()),
                        reinterpret_cast<const double *>(rhs[s].get()),
                        reinterpret_cast<double *>(out[i].get()));
      else
        runGemm<float>(g, reinterpret_cast<const float *>(lhs[i].get()),
                       reinterpret_cast<const float *>(rhs[s].get()),
                       reinterpret_cast<float *>(out[i].get()));
    }
  }
};

//===--- Driver ----------------------------------------------------------===//

struct Result {
  std::string name;
  int64_t gemmCalls = 0;
  double gemmShare = 0;
  double stepMs = 0, gemmMs = 0, counterMs = 0;
  double ratio = 0, ratioMin = 0, ratioMax = 0; // per-pair step / GEMM
  double loss = 0;
  bool profiled = false;
  double profiledStepMs = 0;
  tessel_bench::KernelStat kernels[tessel_bench::kNumKernels];
  int64_t profiledIterations = 0;
};

void progress(const std::string &line) {
  std::fprintf(stderr, "tessel-bench-step: %s\n", line.c_str());
}

Result benchModel(const std::string &path, const Options &options,
                  MLIRContext &context) {
  Result result;
  ModelInfo info = analyse(path, context);
  result.name = info.name;
  result.gemmCalls = int64_t(info.schedule.size());
  result.gemmShare = info.totalFlops > 0 ? double(info.gemmFlops) /
                                               double(info.totalFlops)
                                         : 0;
  if (options.verbose) {
    progress(info.name + ": " + std::to_string(info.schedule.size()) +
             " tessel_matmul calls per step, " +
             std::to_string(info.gemms.size()) + " distinct:");
    for (const Gemm &g : info.gemms) {
      int64_t times = std::count(info.schedule.begin(), info.schedule.end(),
                                 size_t(&g - info.gemms.data()));
      progress("  " + std::to_string(times) + "x " + dtypeName(g.dtype) +
               " batch " + std::to_string(g.batch) + " m " +
               std::to_string(g.m) + " n " + std::to_string(g.n) + " k " +
               std::to_string(g.k) + (g.ta ? " trans_a" : "") +
               (g.tb ? " trans_b" : "") + (g.shared ? " shared_rhs" : ""));
    }
    progress(info.name + ": flops " + std::to_string(info.totalFlops) +
             " (GEMM " + std::to_string(info.gemmFlops) + ")");
  }

  // 2. Compile, load, run.
  progress("compiling " + path);
  std::string so = tessel::run::compileMlirModel(path);
  std::string dir = llvm::sys::path::parent_path(so).str();
  struct RemoveDir {
    std::string dir;
    ~RemoveDir() { llvm::sys::fs::remove_directories(dir); }
  } cleanup{dir};

  PreparedModel prepared(so, options.seed);
  tessel::run::LoadedModel &model = prepared.model;
  tessel::run::RankRuntime &rt = prepared.rt;
  // The context pins OpenBLAS to one thread; say so again for the GEMMs.
  openblas_set_num_threads(1);

  auto forward = [&] { model.forward(rt.ctx, rt.arena); };
  progress("warming up tessel_forward of " + info.name);
  int64_t iterations = warmUp(forward, options.minTime);
  prepared.check("the warm-up steps");
  result.loss = prepared.readLoss();
  if (!std::isfinite(result.loss))
    throw BenchError(info.name + ": the loss is not finite (" +
                     std::to_string(result.loss) + ")");

  // 3. The GEMMs alone.
  GemmBench gemms(info, options.seed);
  auto gemmStep = [&] { gemms.step(); };
  progress("warming up the " + std::to_string(info.schedule.size()) +
           " GEMMs of " + info.name + " on OpenBLAS");
  int64_t gemmIterations = warmUp(gemmStep, options.minTime);

  // Step runs and GEMM runs alternate, so drift in the machine's load hits
  // both; step / GEMM is the median of the per-pair ratios.
  progress("timing " + info.name + ": " + std::to_string(options.runs) +
           " x (" + std::to_string(iterations) + " steps, " +
           std::to_string(gemmIterations) + " GEMM lists)");
  tessel_bench::resetKernelStats();
  Timing step, direct;
  std::vector<double> ratios;
  for (int r = 0; r < options.runs; ++r) {
    Timing s = timeRuns(
        forward, iterations, 1, [&] { tessel_reset_counters(rt.ctx); },
        [&] {
          tessel_synchronize(rt.ctx);
          tessel_counters c;
          tessel_get_counters(rt.ctx, &c);
          return c.kernel_seconds;
        });
    Timing g = timeRuns(gemmStep, gemmIterations, 1);
    step.perCall.push_back(s.perCall[0]);
    step.kernelPerCall.push_back(s.kernelPerCall[0]);
    direct.perCall.push_back(g.perCall[0]);
    ratios.push_back(s.perCall[0] / g.perCall[0]);
  }
  prepared.check("the timed steps");
  // RTLD_DEEPBIND must have kept the model's calls off the timed wrappers.
  if (tessel_bench::kernelStats()[tessel_bench::kMatmul].calls != 0)
    progress("warning: the headline step ran through the profiling "
             "wrappers (RTLD_DEEPBIND had no effect); its time includes their "
             "cost");
  result.stepMs = median(step.perCall) * 1e3;
  result.counterMs = median(step.kernelPerCall) * 1e3;
  result.gemmMs = median(direct.perCall) * 1e3;
  result.ratio = median(ratios);
  result.ratioMin = *std::min_element(ratios.begin(), ratios.end());
  result.ratioMax = *std::max_element(ratios.begin(), ratios.end());
  if (options.verbose)
    progress(info.name + ": step " +
             std::to_string(*std::min_element(step.perCall.begin(),
                                              step.perCall.end()) * 1e3) +
             ".." +
             std::to_string(*std::max_element(step.perCall.begin(),
                                              step.perCall.end()) * 1e3) +
             " ms, GEMM-only " +
             std::to_string(*std::min_element(direct.perCall.begin(),
                                              direct.perCall.end()) * 1e3) +
             ".." +
             std::to_string(*std::max_element(direct.perCall.begin(),
                                              direct.perCall.end()) * 1e3) +
             " ms over the runs");

  // 4. Per kernel, through the wrappers.
  if (options.profile) {
    std::string copy = dir + "/" + info.name + "-profile.so";
    if (std::error_code ec = llvm::sys::fs::copy_file(so, copy))
      throw BenchError("cannot copy " + so + ": " + ec.message());
    tessel::run::LoadedModel profiled = tessel::run::loadModel(copy);
    auto profiledForward = [&] { profiled.forward(rt.ctx, rt.arena); };
    progress("profiling the kernels of " + info.name);
    int64_t n = warmUp(profiledForward, options.minTime);
    tessel_bench::resetKernelStats();
    Timing t = timeRuns(profiledForward, n, options.runs);
    prepared.check("the profiled steps");
    const tessel_bench::KernelStat *stats = tessel_bench::kernelStats();
    if (stats[tessel_bench::kMatmul].calls == 0)
      throw BenchError("the profiled model did not call the timed wrappers "
                       "(was the executable linked with ENABLE_EXPORTS?)");
    result.profiled = true;
    result.profiledIterations = n * options.runs;
    // The mean, not the median: the per-kernel sums cover every run.
    result.profiledStepMs = t.totalSeconds / double(n * options.runs) * 1e3;
    std::copy(stats, stats + tessel_bench::kNumKernels, result.kernels);
    int64_t perStep = stats[tessel_bench::kMatmul].calls / (n * options.runs);
    if (perStep != result.gemmCalls)
      progress("warning: " + info.name + " ran " + std::to_string(perStep) +
               " tessel_matmul calls per step, the GEMM list has " +
               std::to_string(result.gemmCalls));
  }
  return result;
}

void printTables(const std::vector<Result> &results, const Options &options) {
  if (options.header) {
    std::printf("| model | GEMMs/step | GEMM share of flops | step ms | "
                "GEMM-only ms | step / GEMM | (range over runs) | runtime "
                "kernel_seconds ms/step |\n");
    std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  }
  for (const Result &r : results)
    std::printf("| %s | %lld | %.1f%% | %.3f | %.3f | %.2f | %.2f–%.2f | "
                "%.3f |\n",
                r.name.c_str(), (long long)r.gemmCalls, r.gemmShare * 100,
                r.stepMs, r.gemmMs, r.ratio, r.ratioMin, r.ratioMax,
                r.counterMs);

  bool any = false;
  for (const Result &r : results)
    any |= r.profiled;
  if (!any)
    return;
  // Columns: the kernels some model calls, biggest first over all models.
  std::vector<int> columns;
  std::vector<double> total(tessel_bench::kNumKernels, 0);
  for (const Result &r : results)
    for (int k = 0; k < tessel_bench::kNumKernels; ++k)
      if (r.profiled && r.kernels[k].calls > 0)
        total[k] += r.kernels[k].seconds * 1e3 /
                    double(r.profiledIterations) / r.profiledStepMs;
  for (int k = 0; k < tessel_bench::kNumKernels; ++k)
    if (total[k] > 0)
      columns.push_back(k);
  std::stable_sort(columns.begin(), columns.end(),
                   [&](int a, int b) { return total[a] > total[b]; });
  std::printf("\nPer kernel: ms per step (share of the step), means over "
              "the profiled runs; \"outside\" is the step less every kernel "
              "(generated code, calls, timers).\n\n");
  std::printf("| model | step ms (profiled, mean) |");
  for (int k : columns)
    std::printf(" %s |", tessel_bench::kernelName(k));
  std::printf(" outside |\n| --- | ---: |");
  for (size_t i = 0; i < columns.size(); ++i)
    std::printf(" ---: |");
  std::printf(" ---: |\n");
  for (const Result &r : results) {
    if (!r.profiled)
      continue;
    double step = r.profiledStepMs;
    std::printf("| %s | %.3f |", r.name.c_str(), step);
    double inKernels = 0;
    for (int k : columns) {
      const tessel_bench::KernelStat &s = r.kernels[k];
      if (s.calls == 0) {
        std::printf(" – |");
        continue;
      }
      double ms = s.seconds / double(r.profiledIterations) * 1e3;
      inKernels += ms;
      std::printf(" %.3f (%.0f%%) |", ms, 100 * ms / step);
    }
    // Every kernel the model calls has a column; what is left is outside.
    double outside = step - inKernels;
    std::printf(" %.3f (%.0f%%) |\n", outside, 100 * outside / step);
  }
}

[[noreturn]] void usage(int status) {
  std::fprintf(
      status ? stderr : stdout,
      "usage: tessel-bench-step MODEL.mlir... [--runs N] [--min-time SECONDS]\n"
      "         [--seed N] [--no-profile] [--no-header] [--verbose]\n"
      "Compiles with the tessel-compile next to this executable.\n"
      "Times tessel_forward of each compiled model against the same GEMMs\n"
      "called directly through OpenBLAS (one thread); prints markdown tables.\n");
  std::exit(status);
}

Options parseArgs(int argc, char **argv) {
  Options o;
  auto value = [&](int &i) -> std::string {
    if (i + 1 >= argc)
      throw BenchError(std::string(argv[i]) + " needs a value");
    return argv[++i];
  };
  auto number = [&](int &i) {
    std::string flag = argv[i], text = value(i);
    char *end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end || !std::isfinite(v) || v <= 0)
      throw BenchError(flag + " needs a positive number, got '" + text + "'");
    return v;
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help")
      usage(0);
    else if (arg == "--runs")
      o.runs = int(number(i));
    else if (arg == "--min-time")
      o.minTime = number(i);
    else if (arg == "--seed")
      o.seed = uint64_t(std::strtoull(value(i).c_str(), nullptr, 10));
    else if (arg == "--no-profile")
      o.profile = false;
    else if (arg == "--no-header")
      o.header = false;
    else if (arg == "--verbose" || arg == "-v")
      o.verbose = true;
    else if (!arg.empty() && arg[0] == '-')
      throw BenchError("unknown option " + arg + " (see --help)");
    else
      o.models.push_back(arg);
  }
  if (o.models.empty())
    usage(2);
  if (o.runs < 1)
    throw BenchError("--runs must be at least 1");
  return o;
}

} // namespace

int main(int argc, char **argv) {
  try {
    Options options = parseArgs(argc, argv);
    DialectRegistry registry;
    registry.insert<tessel::nn::NNDialect, func::FuncDialect,
                    arith::ArithDialect, scf::SCFDialect,
                    cf::ControlFlowDialect, shard::ShardDialect,
                    tensor::TensorDialect>();
    MLIRContext context(registry);
    context.loadAllAvailableDialects();
    std::vector<Result> results;
    for (const std::string &model : options.models)
      results.push_back(benchModel(model, options, context));
    printTables(results, options);
    return 0;
  } catch (const tessel::run::RunError &e) {
    std::fprintf(stderr, "tessel-bench-step: error: %s\n", e.what());
  } catch (const BenchError &e) {
    std::fprintf(stderr, "tessel-bench-step: error: %s\n", e.what());
  } catch (const json::exception &e) {
    std::fprintf(stderr, "tessel-bench-step: error: bad model description: %s\n",
                 e.what());
  } catch (const std::exception &e) {
    std::fprintf(stderr, "tessel-bench-step: error: %s\n", e.what());
  }
  return 1;
}
