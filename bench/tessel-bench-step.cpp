//===- tessel-bench-step.cpp - Step time against the model's GEMMs alone --===//
//
// For each MODEL.mlir given:
//
//  1. parses it with the nn dialect and lists every nn.matmul the runtime will
//     execute, in program order (the body of an nn.repeat layer L times), with
//     its tessel_matmul arguments (batch, m, n, k, transposes, shared rhs,
//     element type), once for the forward entry (the model function after
//     canonicalize + cse) and, unless --no-train, once for the training step
//     (tessel-autodiff with tessel-compile's default options, canonicalize +
//     cse, then the backward and update entries); sums the flops of every op
//     (CostOpInterface, nn.repeat included) and of the matmuls of each;
//  2. compiles it with the tessel-compile next to this executable (with
//     --no-train under --no-train), dlopens the .so (RTLD_DEEPBIND: its kernel
//     calls bind to libtessel_runtime.so), creates a CPU context, allocates
//     the arena, initialises the parameters as the description says, fills
//     inputs (tessel-run's synthetic data: floats N(0,1), integers in
//     [0, limit)), warms up, and times tessel_forward, the launcher's
//     training step (trainStep of TesselLauncher: zero the grads, write the
//     next of up to 64 pre-drawn batches, tessel_backward, 1/M into
//     grad_scale, tessel_update; M = 1; every run from the same parameters
//     and optimizer state) and tessel_backward alone: the median over R runs
//     of enough calls to last at least --min-time seconds each;
//  3. times each GEMM list called directly with cblas_sgemm (cblas_dgemm for
//     f64) on buffers of the same shapes, with the loop structure of the
//     runtime's matmul (one folded GEMM for a shared rhs with an untransposed
//     lhs, a loop over the batch otherwise), one OpenBLAS thread as the
//     runtime uses;
//  4. (unless --no-profile) opens a second copy of the .so without
//     RTLD_DEEPBIND, so its kernel calls go through the timed definitions of
//     KernelProfile.cpp, and reports the time per kernel of the forward and
//     of the training step.
//
// Prints markdown tables on stdout: the forward against its GEMMs, the
// training step against its GEMMs, and the per-kernel breakdown. Progress
// goes to stderr. Exits 1 with a message on any error.
//
//===----------------------------------------------------------------------===//

#include "bench/BenchSupport.h"
#include "bench/KernelProfile.h"
#include "bench/ModelGemms.h"
#include "runtime/launcher/Arena.h"
#include "runtime/launcher/Compile.h"
#include "runtime/launcher/Data.h"
#include "runtime/launcher/Error.h"
#include "runtime/launcher/ModelLibrary.h"
#include "runtime/launcher/Ranks.h"
#include "runtime/launcher/Training.h"

#include "dialect/NN/NNDialect.h"
#include "dialect/NN/NNOps.h"
#include "passes/Passes.h"
#include "passes/Pipelines.h"
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
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

// Declared here too: not every cblas.h exposes it.
extern "C" void openblas_set_num_threads(int num_threads);

using namespace mlir;
using nlohmann::json;

namespace {

using namespace tessel::bench;

struct Options : CommonOptions {
  bool profile = true;
  bool train = true;
};

//===--- 2. The compiled model -------------------------------------------===//
//
// Compiled, loaded, initialised, fed and stepped exactly as tessel-run does it
// (runtime/launcher: TesselLauncher).

/// The model's arena, parameters initialised, optimizer state zeroed and one
/// synthetic batch written, ready for repeated steps.
struct PreparedModel {
  tessel::run::LoadedModel model;
  tessel::run::RankRuntime rt;

  PreparedModel(const std::string &so, uint64_t seed)
      : model(tessel::run::loadModel(so, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND)),
        rt(model.desc.arenaBytes) {
    tessel::run::initParams(model.desc, rt.ctx, rt.arena, seed);
    tessel::run::zeroStates(model.desc, rt.ctx, rt.arena);
    tessel::run::makeSyntheticData(model.desc, seed)->fill(0, rt.ctx, rt.arena);
    tessel_synchronize(rt.ctx);
    check("initialising parameters and inputs");
  }

  void check(const std::string &when) {
    tessel::run::checkKernelError(rt.ctx, when);
  }

  /// The forward's loss, over its loss_count where the model returns one.
  double readLoss() {
    tessel::run::StepLoss loss;
    loss.add(model.desc, rt.ctx, rt.arena);
    return loss.mean();
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

/// Something timed in runs: `body` called `iterations` times per run, after
/// `prepare` (untimed; e.g. restoring the training state). With a context,
/// each run also reads the runtime's kernel_seconds.
struct Series {
  std::function<void()> body;
  std::function<void()> prepare;
  tessel_ctx *ctx = nullptr;
  int64_t iterations = 0;
  std::vector<double> perCall;       // seconds per call, one per run
  std::vector<double> kernelPerCall; // runtime counters, one per run

  void warm(double minTime) {
    if (prepare)
      prepare();
    iterations = warmUp(body, minTime);
  }

  /// One timed run; returns its seconds per call.
  double run() {
    if (prepare)
      prepare();
    if (ctx)
      tessel_reset_counters(ctx);
    double start = now();
    for (int64_t i = 0; i < iterations; ++i)
      body();
    if (ctx)
      tessel_synchronize(ctx);
    double each = (now() - start) / double(iterations);
    perCall.push_back(each);
    if (ctx) {
      tessel_counters c;
      tessel_get_counters(ctx, &c);
      kernelPerCall.push_back(c.kernel_seconds / double(iterations));
    }
    return each;
  }

  double medianMs() const { return median(perCall) * 1e3; }
  std::string rangeMs() const {
    return std::to_string(*std::min_element(perCall.begin(), perCall.end()) *
                          1e3) +
           ".." +
           std::to_string(*std::max_element(perCall.begin(), perCall.end()) *
                          1e3);
  }
};

/// Calls and time per kernel of a body run through the timed wrappers.
struct Profile {
  bool done = false;
  double stepMs = 0;      // mean over every profiled call
  int64_t iterations = 0; // profiled calls in all
  tessel_bench::KernelStat kernels[tessel_bench::kNumKernels];
};

/// R runs of `body` through the wrappers, each after `prepare`; the kernel
/// time of `prepare` itself is left out.
Profile profileKernels(const std::function<void()> &body,
                       const std::function<void()> &prepare, int runs,
                       double minTime) {
  if (prepare)
    prepare();
  int64_t n = warmUp(body, minTime);
  Profile p;
  double seconds = 0;
  for (int r = 0; r < runs; ++r) {
    if (prepare)
      prepare();
    tessel_bench::resetKernelStats();
    double start = now();
    for (int64_t i = 0; i < n; ++i)
      body();
    seconds += now() - start;
    const tessel_bench::KernelStat *stats = tessel_bench::kernelStats();
    for (int k = 0; k < tessel_bench::kNumKernels; ++k) {
      p.kernels[k].calls += stats[k].calls;
      p.kernels[k].seconds += stats[k].seconds;
    }
  }
  p.done = true;
  p.iterations = n * runs;
  // The mean, not the median: the per-kernel sums cover every run.
  p.stepMs = seconds / double(p.iterations) * 1e3;
  return p;
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
  const GemmList &list;
  std::vector<Buffer> lhs, out, rhs;

  GemmBench(const GemmList &list, uint64_t seed) : list(list) {
    std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
    for (const Gemm &g : list.gemms) {
      bool dbl = g.dtype == TESSEL_F64;
      int64_t es = dbl ? 8 : 4; // 16-bit: the runtime multiplies in f32.
      lhs.push_back(allocate(g.batch * g.m * g.k * es, rng, dbl));
      out.push_back(allocate(g.batch * g.m * g.n * es, rng, dbl));
    }
    for (size_t i : list.schedule) {
      const Gemm &g = list.gemms[i];
      bool dbl = g.dtype == TESSEL_F64;
      int64_t es = dbl ? 8 : 4;
      rhs.push_back(allocate((g.shared ? 1 : g.batch) * g.k * g.n * es, rng,
                             dbl));
    }
  }

  void step() {
    for (size_t s = 0; s < list.schedule.size(); ++s) {
      size_t i = list.schedule[s];
      const Gemm &g = list.gemms[i];
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

/// One timed entry (or step) against its GEMM list.
struct Comparison {
  int64_t gemmCalls = 0;
  double gemmShare = 0;
  double stepMs = 0, gemmMs = 0, counterMs = 0;
  double ratio = 0, ratioMin = 0, ratioMax = 0; // per-pair step / GEMM
};

struct Result {
  std::string name;
  Comparison forward;
  bool trained = false;
  Comparison train;               // the training step
  double backwardMs = 0;          // tessel_backward alone
  double backwardOverForward = 0; // median of the per-round ratios
  double stepOverForward = 0;     // likewise, the training step
  double backwardFlopsOverForward = 0;
  double loss = 0;
  Profile forwardProfile, trainProfile;
};

void progress(const std::string &line) {
  tessel::bench::progress("tessel-bench-step", line);
}

void printGemmList(const std::string &what, const GemmList &list) {
  progress(what + ": " + std::to_string(list.schedule.size()) +
           " tessel_matmul calls, " + std::to_string(list.gemms.size()) +
           " distinct:");
  for (const Gemm &g : list.gemms) {
    int64_t times = std::count(list.schedule.begin(), list.schedule.end(),
                               size_t(&g - list.gemms.data()));
    progress("  " + std::to_string(times) + "x " + dtypeName(g.dtype) +
             " batch " + std::to_string(g.batch) + " m " + std::to_string(g.m) +
             " n " + std::to_string(g.n) + " k " + std::to_string(g.k) +
             (g.ta ? " trans_a" : "") + (g.tb ? " trans_b" : "") +
             (g.shared ? " shared_rhs" : ""));
  }
  progress(what + ": flops " + std::to_string(list.totalFlops) + " (GEMM " +
           std::to_string(list.gemmFlops) + ")");
}

/// Fills the figures of `c` from paired runs of an entry and its GEMMs.
void compare(Comparison &c, const GemmList &list, const Series &entry,
             const Series &gemms, const std::vector<double> &ratios) {
  c.gemmCalls = int64_t(list.schedule.size());
  c.gemmShare = list.gemmShare();
  c.stepMs = entry.medianMs();
  c.counterMs = median(entry.kernelPerCall) * 1e3;
  c.gemmMs = gemms.medianMs();
  c.ratio = median(ratios);
  c.ratioMin = *std::min_element(ratios.begin(), ratios.end());
  c.ratioMax = *std::max_element(ratios.begin(), ratios.end());
}

/// The profiled body must have called tessel_matmul and
/// tessel_matmul_epilogue(_aux) as often per call as its GEMM list says.
void checkMatmulCalls(const Profile &p, const GemmList &list,
                      const std::string &what) {
  int64_t calls = p.kernels[tessel_bench::kMatmul].calls +
                  p.kernels[tessel_bench::kMatmulEpilogue].calls;
  if (calls == 0)
    throw BenchError("the profiled model did not call the timed wrappers "
                     "(was the executable linked with ENABLE_EXPORTS?)");
  int64_t perStep = calls / p.iterations;
  if (perStep != int64_t(list.schedule.size()))
    progress("warning: " + what + " ran " + std::to_string(perStep) +
             " tessel_matmul(_epilogue) calls per step, the GEMM list has " +
             std::to_string(list.schedule.size()));
}

Result benchModel(const std::string &path, const Options &options,
                  MLIRContext &context) {
  Result result;
  ModelInfo info = analyse(path, options.train, context);
  result.name = info.name;
  result.trained = info.train.has_value();
  if (options.verbose) {
    printGemmList(info.name + " forward", info.forward);
    if (info.train)
      printGemmList(info.name + " training step", *info.train);
  }

  // 2. Compile, load, run.
  progress("compiling " + path);
  std::string so = tessel::run::compileMlirModel(
      path, options.train ? std::vector<std::string>{}
                          : std::vector<std::string>{"--no-train"});
  std::string dir = llvm::sys::path::parent_path(so).str();
  struct RemoveDir {
    std::string dir;
    ~RemoveDir() { llvm::sys::fs::remove_directories(dir); }
  } cleanup{dir};

  PreparedModel prepared(so, options.seed);
  tessel::run::LoadedModel &model = prepared.model;
  tessel::run::RankRuntime &rt = prepared.rt;
  if (options.train && !model.desc.trains())
    throw BenchError(info.name + ": the compiled model has no backward and "
                                 "update entries");
  // The context pins OpenBLAS to one thread; say so again for the GEMMs.
  openblas_set_num_threads(1);
  auto checkLoss = [&](double loss, const std::string &when) {
    if (!std::isfinite(loss))
      throw BenchError(info.name + ": the loss " + when + " is not finite (" +
                       std::to_string(loss) + ")");
  };

  Series forward{[&] { model.forward(rt.ctx, rt.arena); }, {}, rt.ctx};
  progress("warming up tessel_forward of " + info.name);
  forward.warm(options.minTime);
  prepared.check("the warm-up steps");
  result.loss = prepared.readLoss();
  checkLoss(result.loss, "of the forward");

  // 3. The GEMMs alone.
  GemmBench forwardGemmBench(info.forward, options.seed);
  Series forwardGemms{[&] { forwardGemmBench.step(); }};
  progress("warming up the " + std::to_string(info.forward.schedule.size()) +
           " GEMMs of " + info.name + "'s forward on OpenBLAS");
  forwardGemms.warm(options.minTime);

  // The training step as tessel-run runs it, one microbatch, every run from
  // the same parameters and optimizer state.
  std::optional<TrainingState> state;
  std::optional<GemmBench> trainGemmBench;
  std::unique_ptr<tessel::run::BatchSource> synthetic;
  std::optional<BatchPool> batches;
  int64_t stepIndex = 0;
  double trainLoss = 0;
  auto restart = [&] {
    state->restore();
    stepIndex = 0;
  };
  auto runTrainStep = [&](const tessel::run::LoadedModel &m) {
    trainLoss = tessel::run::trainStep(m, rt, *batches, stepIndex++, 1);
  };
  Series train{[&] { runTrainStep(model); }, restart, rt.ctx};
  // Accumulates into the grads, never zeroed here: the cost is the same.
  Series backward{[&] { model.backward(rt.ctx, rt.arena); }, {}, rt.ctx};
  Series trainGemms;
  if (info.train) {
    state.emplace(model.desc, rt.ctx, rt.arena);
    synthetic = tessel::run::makeSyntheticData(model.desc, options.seed);
    batches.emplace(model.desc, *synthetic, rt.ctx, rt.arena);
    progress("drew " + std::to_string(batches->size()) +
             " batches for the training steps of " + info.name);
    progress("warming up the training step of " + info.name);
    train.warm(options.minTime);
    checkLoss(trainLoss, "of the training step");
    progress("warming up tessel_backward of " + info.name);
    backward.warm(options.minTime);
    prepared.check("the warm-up backward");
    trainGemmBench.emplace(*info.train, options.seed);
    trainGemms.body = [&] { trainGemmBench->step(); };
    progress("warming up the " + std::to_string(info.train->schedule.size()) +
             " GEMMs of " + info.name + "'s training step on OpenBLAS");
    trainGemms.warm(options.minTime);
  }

  // Entry runs and GEMM runs alternate, so drift in the machine's load hits
  // both; each ratio is the median of the per-round ratios.
  std::string plan = std::to_string(forward.iterations) + " forwards, " +
                     std::to_string(forwardGemms.iterations) + " GEMM lists";
  if (info.train)
    plan += ", " + std::to_string(train.iterations) + " training steps, " +
            std::to_string(trainGemms.iterations) + " GEMM lists, " +
            std::to_string(backward.iterations) + " backwards";
  progress("timing " + info.name + ": " + std::to_string(options.runs) +
           " x (" + plan + ")");
  tessel_bench::resetKernelStats();
  std::vector<double> forwardRatios, trainRatios, backwardRatios, stepRatios;
  for (int r = 0; r < options.runs; ++r) {
    double f = forward.run();
    forwardRatios.push_back(f / forwardGemms.run());
    if (!info.train)
      continue;
    double t = train.run();
    trainRatios.push_back(t / trainGemms.run());
    backwardRatios.push_back(backward.run() / f);
    stepRatios.push_back(t / f);
  }
  prepared.check("the timed steps");
  // RTLD_DEEPBIND must have kept the model's calls off the timed wrappers.
  if (tessel_bench::kernelStats()[tessel_bench::kMatmul].calls != 0)
    progress("warning: the headline step ran through the profiling "
             "wrappers (RTLD_DEEPBIND had no effect); its time includes their "
             "cost");
  compare(result.forward, info.forward, forward, forwardGemms, forwardRatios);
  if (options.verbose)
    progress(info.name + ": forward " + forward.rangeMs() + " ms, GEMM-only " +
             forwardGemms.rangeMs() + " ms over the runs");
  if (info.train) {
    checkLoss(trainLoss, "after the timed training steps");
    compare(result.train, *info.train, train, trainGemms, trainRatios);
    result.backwardMs = backward.medianMs();
    result.backwardOverForward = median(backwardRatios);
    result.stepOverForward = median(stepRatios);
    result.backwardFlopsOverForward =
        double(info.backwardFlops) / double(info.forward.totalFlops);
    if (options.verbose)
      progress(info.name + ": training step " + train.rangeMs() +
               " ms, GEMM-only " + trainGemms.rangeMs() +
               " ms, tessel_backward " + backward.rangeMs() +
               " ms over the runs; loss " + std::to_string(trainLoss) +
               " after " + std::to_string(train.iterations) + " steps");
  }

  // 4. Per kernel, through the wrappers.
  if (options.profile) {
    std::string copy = dir + "/" + info.name + "-profile.so";
    if (std::error_code ec = llvm::sys::fs::copy_file(so, copy))
      throw BenchError("cannot copy " + so + ": " + ec.message());
    tessel::run::LoadedModel profiled = tessel::run::loadModel(copy);
    progress("profiling the kernels of " + info.name + "'s forward");
    result.forwardProfile =
        profileKernels([&] { profiled.forward(rt.ctx, rt.arena); }, {},
                       options.runs, options.minTime);
    prepared.check("the profiled forwards");
    checkMatmulCalls(result.forwardProfile, info.forward,
                     info.name + "'s forward");
    if (info.train) {
      progress("profiling the kernels of " + info.name + "'s training step");
      result.trainProfile =
          profileKernels([&] { runTrainStep(profiled); }, restart, options.runs,
                         options.minTime);
      checkMatmulCalls(result.trainProfile, *info.train,
                       info.name + "'s training step");
    }
  }
  return result;
}

void printComparisonHeader(const char *extra, const char *extraAlign) {
  std::printf("| model | GEMMs/step | GEMM share of flops | step ms | "
              "GEMM-only ms | step / GEMM | (range over runs) | runtime "
              "kernel_seconds ms/step |%s\n",
              extra);
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |%s\n",
              extraAlign);
}

void printComparison(const std::string &name, const Comparison &c) {
  std::printf("| %s | %lld | %.1f%% | %.3f | %.3f | %.2f | %.2f–%.2f | %.3f |",
              name.c_str(), (long long)c.gemmCalls, c.gemmShare * 100, c.stepMs,
              c.gemmMs, c.ratio, c.ratioMin, c.ratioMax, c.counterMs);
}

void printTables(const std::vector<Result> &results, const Options &options) {
  if (options.header) {
    std::printf("Forward: one tessel_forward against the GEMMs of the model "
                "function.\n\n");
    printComparisonHeader("", "");
  }
  for (const Result &r : results) {
    printComparison(r.name, r.forward);
    std::printf("\n");
  }

  bool anyTrained = false;
  for (const Result &r : results)
    anyTrained |= r.trained;
  if (anyTrained) {
    std::printf("\n");
    if (options.header) {
      std::printf(
          "Training step: zero the grads, tessel_backward (forward and "
          "backward), 1/M into grad_scale, tessel_update (M = 1), against "
          "the GEMMs of the backward and update entries. backward / forward: "
          "tessel_backward against tessel_forward, in time and in flops.\n\n");
      printComparisonHeader(" tessel_backward ms | backward / forward | "
                            "(flops) | step / forward |",
                            " ---: | ---: | ---: | ---: |");
    }
    for (const Result &r : results) {
      if (!r.trained)
        continue;
      printComparison(r.name, r.train);
      std::printf(" %.3f | %.2f | %.2f | %.2f |\n", r.backwardMs,
                  r.backwardOverForward, r.backwardFlopsOverForward,
                  r.stepOverForward);
    }
  }

  // One row per profiled body.
  struct Row {
    std::string name, step;
    const Profile *profile;
  };
  std::vector<Row> rows;
  for (const Result &r : results) {
    if (r.forwardProfile.done)
      rows.push_back({r.name, "forward", &r.forwardProfile});
    if (r.trainProfile.done)
      rows.push_back({r.name, "training step", &r.trainProfile});
  }
  if (rows.empty())
    return;
  // Columns: the kernels some row calls, biggest share first over all rows.
  std::vector<int> columns;
  std::vector<double> total(tessel_bench::kNumKernels, 0);
  for (const Row &row : rows)
    for (int k = 0; k < tessel_bench::kNumKernels; ++k)
      if (row.profile->kernels[k].calls > 0)
        total[k] += row.profile->kernels[k].seconds * 1e3 /
                    double(row.profile->iterations) / row.profile->stepMs;
  for (int k = 0; k < tessel_bench::kNumKernels; ++k)
    if (total[k] > 0)
      columns.push_back(k);
  std::stable_sort(columns.begin(), columns.end(),
                   [&](int a, int b) { return total[a] > total[b]; });
  std::printf("\nPer kernel: ms per step (share of the step), means over "
              "the profiled runs; \"outside\" is the step less every kernel "
              "(generated code, calls, timers, the launcher's step).\n\n");
  std::printf("| model | step | ms (profiled, mean) |");
  for (int k : columns)
    std::printf(" %s |", tessel_bench::kernelName(k));
  std::printf(" outside |\n| --- | --- | ---: |");
  for (size_t i = 0; i < columns.size(); ++i)
    std::printf(" ---: |");
  std::printf(" ---: |\n");
  for (const Row &row : rows) {
    const Profile &p = *row.profile;
    double step = p.stepMs;
    std::printf("| %s | %s | %.3f |", row.name.c_str(), row.step.c_str(), step);
    double inKernels = 0;
    for (int k : columns) {
      const tessel_bench::KernelStat &s = p.kernels[k];
      if (s.calls == 0) {
        std::printf(" – |");
        continue;
      }
      double ms = s.seconds / double(p.iterations) * 1e3;
      inKernels += ms;
      std::printf(" %.3f (%.0f%%) |", ms, 100 * ms / step);
    }
    // Every kernel the body calls has a column; what is left is outside.
    double outside = step - inKernels;
    std::printf(" %.3f (%.0f%%) |\n", outside, 100 * outside / step);
  }
}

[[noreturn]] void usage(int status) {
  std::fprintf(
      status ? stderr : stdout,
      "usage: tessel-bench-step MODEL.mlir... [--runs N] [--min-time SECONDS]\n"
      "         [--seed N] [--no-train] [--no-profile] [--no-header] "
      "[--verbose]\n"
      "Compiles with the tessel-compile next to this executable.\n"
      "Times tessel_forward and the training step (zero grads,\n"
      "tessel_backward, grad_scale, tessel_update) of each compiled model\n"
      "against the same GEMMs called directly through OpenBLAS (one thread);\n"
      "prints markdown tables. --no-train: the forward only (compiled with\n"
      "--no-train).\n");
  std::exit(status);
}

Options parseArgs(int argc, char **argv) {
  Options o;
  FlagReader(argc, argv).parse(
      o,
      [&](const std::string &flag, int &) {
        if (flag == "--no-train")
          o.train = false;
        else if (flag == "--no-profile")
          o.profile = false;
        else
          return false;
        return true;
      },
      usage, [&] { return o.models.empty(); });
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
