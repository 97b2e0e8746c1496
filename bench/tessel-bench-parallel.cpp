//===- tessel-bench-parallel.cpp - Mesh throughput and local all-reduce ---===//
//
// Two tables, for the threads backend (TESSEL_COMM_LOCAL: every rank a
// thread of this process, one OpenBLAS thread each):
//
//  1. Training-step throughput. For each MODEL.mlir and each --mesh (default:
//     one device, dp=2, tp=2, dp=2,tp=2), compiles it with the
//     tessel-compile next to this executable (tessel-run's compileMlirModel,
//     `--mesh` for a mesh) and runs every rank on a thread with the
//     launcher's own pieces (TesselLauncher): LocalRanks, rankOptions,
//     initParams and zeroStates on the rank's block, makeRankFeeds over
//     tessel-run's synthetic data, trainStep with one microbatch. The
//     rank's batches (up to 64 global microbatches) are drawn before
//     timing and copied in per step, as tessel-bench-step does, so data
//     generation stays out of the time. Every run starts from the same
//     parameters and optimizer state. A run is K steps of every
//     rank between two barriers; its step time is the run's wall time / K.
//     Every mesh of a model stays set up (its threads asleep between runs)
//     and the meshes' runs alternate, so a change in the machine's load
//     hits all of them. Reports the median step time, the throughput of the
//     GLOBAL batch (tokens for a sequence model, samples otherwise), the
//     speedup over the one-device run of the same model (median of the
//     per-round ratios), and rank 0's collectives per step
//     (tessel_comm_bytes, tessel_comm_calls), checked against the
//     description's "collectives".
//  2. Local all-reduce bandwidth. For each group size (--groups, default 2
//     and 4) a tessel_local_world of that many threads, and for each buffer
//     size (--sizes, default 64K, 1M, 16M, 64M) tessel_all_reduce (f32, sum,
//     out of place) over the one mesh axis: algorithm bandwidth S / t, bus
//     bandwidth 2(n-1)/n · S / t (as NCCL-tests defines it), against a
//     single-thread memcpy of S bytes on the same machine, timed between the
//     all-reduce runs (the other ranks wait at a barrier meanwhile).
//
// Prints markdown tables on stdout, progress on stderr. Exits 1 with a
// message on any error (a failed compile, a kernel or collective error, a
// non-finite loss, a wrong all-reduce result).
//
//===----------------------------------------------------------------------===//

#include "bench/BenchSupport.h"
#include "bench/ThreadBarrier.h"
#include "bench/Units.h"
#include "runtime/launcher/Arena.h"
#include "runtime/launcher/Compile.h"
#include "runtime/launcher/Data.h"
#include "runtime/launcher/Distributed.h"
#include "runtime/launcher/Error.h"
#include "runtime/launcher/MeshBlocks.h"
#include "runtime/launcher/ModelLibrary.h"
#include "runtime/launcher/Ranks.h"
#include "runtime/launcher/Training.h"

#include "tessel/runtime.h"

#include <nlohmann/json.hpp>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using tessel::run::CommCount;
using tessel::run::LoadedModel;
using tessel::run::LocalRanks;
using tessel::run::Mesh;
using tessel::run::ModelDesc;
using tessel::run::RankRuntime;
using tessel::run::TensorDesc;

using namespace tessel::bench;

void progress(const std::string &line) {
  tessel::bench::progress("tessel-bench-parallel", line);
}

/// The cores this process may run on (its affinity mask), which is what the
/// ranks' threads share.
int availableCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    return CPU_COUNT(&set);
  return int(std::max(1u, std::thread::hardware_concurrency()));
}

/// Warm-up length and the calls one timed run needs: at least 3 calls and
/// 0.1 s of warm-up, then enough calls for `minTime` with a 10% margin (the
/// warm-up may have run faster than a timed run will).
constexpr double kWarmUpSeconds = 0.1;
int64_t callsFor(double minTime, double secondsEach) {
  return std::max<int64_t>(
      1, int64_t(std::ceil(minTime * 1.1 / std::max(secondsEach, 1e-9))));
}

struct Options : CommonOptions {
  std::vector<std::string> meshes; // "" for one device
  std::vector<int64_t> sizes = {64 << 10, 1 << 20, 16 << 20, 64 << 20};
  std::vector<int> groups = {2, 4};
  bool comm = true;
};

//===--- 1. Training-step throughput on a mesh ---------------------------===//

struct StepResult {
  std::string model;
  std::string mesh; // "1 device" or the mesh
  int64_t ranks = 1;
  int64_t batch = 0;            // the global microbatch
  int64_t perStep = 0;          // tokens or samples of the global batch
  std::string unit;             // "tokens" or "samples"
  std::vector<double> seconds;  // per step, one per round
  std::vector<double> speedups; // 1 device / this, one per round
  int64_t iterations = 0;       // steps per run
  std::vector<CommCount> comm;  // rank 0, per step
  double loss = 0;              // rank 0, the last step

  double stepSeconds() const { return median(seconds); }
  int64_t commBytes() const {
    int64_t bytes = 0;
    for (const CommCount &c : comm)
      bytes += c.bytes;
    return bytes;
  }
  int64_t commCalls() const {
    int64_t calls = 0;
    for (const CommCount &c : comm)
      calls += c.calls;
    return calls;
  }
};

/// One model on one mesh: the compiled model and its ranks' threads, alive
/// for the whole benchmark of the model, so that its timed runs alternate
/// with the other meshes' and a change in the machine's load hits every
/// mesh alike. `gate` holds the ranks and the main thread: each phase (set
/// up, warm-up, every run) starts and ends at it, and only one job's phase
/// runs at a time; the other jobs' threads sleep at their gates. `peers`
/// holds the ranks alone.
struct MeshJob {
  StepResult result;
  LoadedModel model;
  std::filesystem::path soDir; // removed with the job
  std::unique_ptr<ThreadBarrier> gate, peers;
  // Destroyed before the barriers its threads wait at.
  std::unique_ptr<LocalRanks> ranks;
  // Written by the thread that completes a `peers` barrier (the warm-up's
  // decision, a run's start and time) or by rank 0 alone (its counters and
  // loss), read after the next barrier.
  int64_t warmSteps = 0;
  double warmStart = 0;
  bool warm = false;
  double runStart = 0;
  std::vector<CommCount> comm; // rank 0's over the last run
  double loss = 0;

  ~MeshJob() {
    ranks.reset(); // its threads before the barriers they wait at
    std::error_code ec;
    if (!soDir.empty())
      std::filesystem::remove_all(soDir, ec);
  }
};

/// Rank `rank` of `job`: its context, parameters and batches as tessel-run
/// sets them up, then the warm-up and the timed runs, each when the main
/// thread opens the gate.
void runStepRank(MeshJob &job, int32_t rank, const Options &options) {
  const LoadedModel &model = job.model;
  const ModelDesc &desc = model.desc;
  tessel_local_world *world = job.ranks->world();
  std::vector<int64_t> coords =
      desc.mesh ? desc.mesh->coordinates(rank) : std::vector<int64_t>{};
  RankRuntime rt(
      desc.arenaBytes,
      tessel::run::rankOptions(
          desc, rank, world ? TESSEL_COMM_LOCAL : TESSEL_COMM_NONE, world));
  tessel::run::initParams(desc, rt.ctx, rt.arena, options.seed, coords);
  tessel::run::zeroStates(desc, rt.ctx, rt.arena);
  tessel::run::checkKernelError(rt.ctx, "initialising parameters");
  std::unique_ptr<tessel::run::BatchSource> feeds = tessel::run::makeRankFeeds(
      desc,
      [&](const ModelDesc &view) {
        return tessel::run::makeSyntheticData(view, options.seed);
      },
      coords, rt.ctx);
  BatchPool batches(desc, *feeds, rt.ctx, rt.arena);
  TrainingState state(desc, rt.ctx, rt.arena);
  tessel::run::checkKernelError(rt.ctx, "drawing the batches");
  bool reporter = rank == 0;

  int64_t step = 0;
  auto trainStep = [&] {
    double loss = tessel::run::trainStep(model, rt, batches, step++, 1);
    if (reporter && !std::isfinite(loss))
      throw BenchError("the loss at step " + std::to_string(step) +
                       " is not finite (" + std::to_string(loss) + ")");
    return loss;
  };
  job.gate->arriveAndWait(); // set up

  // Warm-up: the ranks step until the one completing a barrier decides, for
  // all, that they have run long enough.
  job.gate->arriveAndWait();
  job.peers->arriveAndWait([&] { job.warmStart = now(); });
  while (!job.warm) {
    trainStep();
    job.peers->arriveAndWait([&] {
      ++job.warmSteps;
      double elapsed = now() - job.warmStart;
      if (job.warmSteps >= 3 && elapsed >= kWarmUpSeconds) {
        job.warm = true;
        job.result.iterations =
            callsFor(options.minTime, elapsed / double(job.warmSteps));
      }
    });
  }
  job.gate->arriveAndWait();

  for (int r = 0; r < options.runs; ++r) {
    job.gate->arriveAndWait();
    state.restore();
    step = 0;
    job.peers->arriveAndWait([&] { job.runStart = now(); });
    // Nothing since the barrier communicated: the counters are the run's.
    tessel_reset_counters(rt.ctx);
    double loss = 0;
    for (int64_t i = 0; i < job.result.iterations; ++i)
      loss = trainStep();
    tessel_synchronize(rt.ctx);
    if (reporter) {
      job.loss = loss;
      if (desc.mesh)
        job.comm = tessel::run::readCommCounters(rt.ctx, *desc.mesh);
    }
    job.peers->arriveAndWait([&] {
      job.result.seconds.push_back((now() - job.runStart) /
                                   double(job.result.iterations));
    });
    job.gate->arriveAndWait();
  }
}

/// Compiles `path` for `meshSpec` ("" for one device) and loads it.
std::unique_ptr<MeshJob> makeJob(const std::string &path,
                                 const std::string &meshSpec) {
  auto job = std::make_unique<MeshJob>();
  StepResult &result = job->result;
  result.model = std::filesystem::path(path).stem().string();
  result.mesh = meshSpec.empty() ? "1 device" : meshSpec;
  std::optional<Mesh> mesh;
  if (!meshSpec.empty())
    mesh = tessel::run::parseMesh(meshSpec, "--mesh");

  progress("compiling " + path + (mesh ? " for " + meshSpec : ""));
  std::string so = tessel::run::compileMlirModel(
      path, mesh ? std::vector<std::string>{"--mesh", meshSpec}
                 : std::vector<std::string>{});
  job->soDir = std::filesystem::path(so).parent_path();
  job->model = tessel::run::loadModel(so);
  const ModelDesc &desc = job->model.desc;
  if (!desc.trains())
    throw BenchError(result.model + ": the compiled model has no backward and "
                                    "update entries");
  if (mesh ? !desc.mesh || *desc.mesh != *mesh : desc.mesh.has_value())
    throw BenchError(result.model + ": compiled for mesh " +
                     (desc.mesh ? desc.mesh->toString() : "none") +
                     ", asked for " + (mesh ? mesh->toString() : "none"));
  ModelDesc global = tessel::run::globalFeedView(desc);
  result.ranks = desc.worldSize();
  result.batch = global.batchSize();
  result.perStep = tessel::run::tokensPerStep(global);
  result.unit = result.perStep != result.batch ? "tokens" : "samples";

  int ranks = int(result.ranks);
  job->gate = std::make_unique<ThreadBarrier>(ranks + 1);
  job->peers = std::make_unique<ThreadBarrier>(ranks);
  job->ranks = std::make_unique<LocalRanks>(ranks);
  MeshJob *j = job.get();
  // A failing rank releases the main thread and its peers at their
  // barriers, as the world's abort releases them in a collective.
  job->ranks->setInterruptHook([j](const std::string &why) {
    j->gate->breakAll(why);
    j->peers->breakAll(why);
  });
  return job;
}

/// Rank 0's counters over the last run, per step; they must be what the
/// compiler reported a step moves.
void finishComm(MeshJob &job) {
  StepResult &result = job.result;
  for (CommCount c : job.comm) {
    if (c.calls % result.iterations || c.bytes % result.iterations)
      progress("warning: " + result.model + " on " + result.mesh + ": " +
               c.kind + " counters are not a whole number of steps");
    c.calls /= result.iterations;
    c.bytes /= result.iterations;
    c.asyncBytes /= result.iterations;
    c.overlappedBytes /= result.iterations;
    result.comm.push_back(c);
  }
  result.loss = job.loss;
  std::string difference = tessel::run::commDifference(
      tessel::run::expectedCommPerStep(job.model.desc, /*training=*/true, 1),
      result.comm);
  if (!difference.empty())
    progress(
        "warning: " + result.model + " on " + result.mesh +
        ": runtime counters differ from the compiled report: " + difference);
}

/// `path` on every mesh of the options, the meshes' runs in alternation:
/// round r times run r of each mesh in turn.
std::vector<StepResult> benchSteps(const std::string &path,
                                   const Options &options) {
  std::vector<std::unique_ptr<MeshJob>> jobs;
  for (const std::string &mesh : options.meshes)
    jobs.push_back(makeJob(path, mesh));
  for (std::unique_ptr<MeshJob> &job : jobs) {
    MeshJob *j = job.get();
    j->ranks->start(
        [j, &options](int32_t rank) { runStepRank(*j, rank, options); });
  }

  std::string model = jobs.front()->result.model;
  try {
    for (std::unique_ptr<MeshJob> &job : jobs)
      job->gate->arriveAndWait(); // set up
    for (std::unique_ptr<MeshJob> &job : jobs) {
      progress("warming up " + model + " on " + job->result.mesh + " (" +
               std::to_string(job->result.ranks) + " thread" +
               (job->result.ranks == 1 ? "" : "s") + ")");
      job->gate->arriveAndWait();
      job->gate->arriveAndWait();
    }
    std::string plan;
    for (std::unique_ptr<MeshJob> &job : jobs)
      plan += (plan.empty() ? "" : ", ") + job->result.mesh + ": " +
              std::to_string(job->result.iterations) + " steps";
    progress("timing " + model + ": " + std::to_string(options.runs) +
             " rounds of (" + plan + ")");
    for (int r = 0; r < options.runs; ++r)
      for (std::unique_ptr<MeshJob> &job : jobs) {
        job->gate->arriveAndWait();
        job->gate->arriveAndWait();
      }
  } catch (const BenchError &) {
    // A rank failed and broke its gate: stop every job, report the rank's
    // own error.
    for (std::unique_ptr<MeshJob> &job : jobs)
      job->ranks->stop("another mesh of the benchmark failed");
  }
  for (std::unique_ptr<MeshJob> &job : jobs) {
    try {
      job->ranks->join();
    } catch (const tessel::run::RunError &e) {
      throw BenchError(model + " on " + job->result.mesh + ": " + e.what());
    }
  }

  const MeshJob *single = nullptr;
  for (std::unique_ptr<MeshJob> &job : jobs)
    if (job->result.mesh == "1 device")
      single = job.get();
  std::vector<StepResult> results;
  for (std::unique_ptr<MeshJob> &job : jobs) {
    finishComm(*job);
    StepResult &result = job->result;
    if (single)
      for (size_t r = 0; r < result.seconds.size(); ++r)
        result.speedups.push_back(single->result.seconds[r] /
                                  result.seconds[r]);
    if (options.verbose) {
      std::string runs;
      for (double s : result.seconds)
        runs += (runs.empty() ? "" : " ") + std::to_string(s * 1e3);
      progress(model + " on " + result.mesh + ": " +
               std::to_string(result.iterations) + " steps per run, ms/step " +
               runs + "; loss " + std::to_string(result.loss) +
               "; per step: " + tessel::run::describeComm(result.comm));
    }
    results.push_back(result);
  }
  return results;
}

//===--- 2. Local all-reduce against memcpy ------------------------------===//

struct AllReduceResult {
  int ranks = 0;
  int64_t bytes = 0;
  int64_t iterations = 0;
  std::vector<double> allReduceSeconds; // per call, one per run
  std::vector<double> memcpySeconds;    // per call, one per run
  std::vector<double> ratios;           // bus bandwidth / memcpy, per run

  double busFactor() const { return 2.0 * (ranks - 1) / ranks; }
  double algBandwidth() const {
    return double(bytes) / median(allReduceSeconds);
  }
  double busBandwidth() const { return busFactor() * algBandwidth(); }
  double memcpyBandwidth() const {
    return double(bytes) / median(memcpySeconds);
  }
};

struct AlignedFree {
  void operator()(void *p) const { std::free(p); }
};
using HostBuffer = std::unique_ptr<char, AlignedFree>;

HostBuffer allocateTouched(int64_t bytes) {
  size_t size = size_t((bytes + 63) / 64 * 64);
  HostBuffer buffer(static_cast<char *>(std::aligned_alloc(64, size)));
  if (!buffer)
    throw BenchError("out of memory for a " + std::to_string(bytes) +
                     "-byte memcpy buffer");
  std::memset(buffer.get(), 1, size);
  return buffer;
}

/// Single-thread memcpy of `bytes` between two buffers of the calling
/// thread, timed in runs of `iterations` copies.
class MemcpyTimer {
public:
  explicit MemcpyTimer(int64_t bytes)
      : bytes(bytes), src(allocateTouched(bytes)), dst(allocateTouched(bytes)) {
    double start = now();
    int64_t calls = 0;
    do {
      copy();
      ++calls;
    } while (calls < 3 || now() - start < kWarmUpSeconds);
    perCall = (now() - start) / double(calls);
  }

  /// Seconds per copy over a run of at least `minTime`.
  double run(double minTime) {
    int64_t n = callsFor(minTime, perCall);
    double start = now();
    for (int64_t i = 0; i < n; ++i)
      copy();
    return (now() - start) / double(n);
  }

private:
  void copy() {
    std::memcpy(dst.get(), src.get(), size_t(bytes));
    // Keeps the copy from being elided or hoisted out of the loop.
    asm volatile("" : : "r"(dst.get()) : "memory");
  }

  int64_t bytes;
  HostBuffer src, dst;
  double perCall = 0;
};

struct AllReduceShared {
  int64_t warmCalls = 0;
  double warmStart = 0;
  bool warm = false;
  int64_t iterations = 0;
  double runStart = 0;
};

void checkCollective(tessel_ctx *ctx, const std::string &what) {
  if (const char *error = tessel_error(ctx))
    throw BenchError(what + ": " + error);
}

/// Rank `rank` of a group of `ranks` threads: one context for every size,
/// buffers of its own per size, warm-up, then runs alternating with rank
/// 0's memcpy runs (the peers sleep at the barrier meanwhile).
void runAllReduceRank(int ranks, int32_t rank, tessel_local_world *world,
                      ThreadBarrier &barrier,
                      std::vector<AllReduceResult> &results,
                      std::vector<AllReduceShared> &sharedPerSize,
                      const Options &options) {
  // One mesh axis over every rank; a token arena: the buffers are
  // allocated per size.
  Mesh mesh{{"all"}, {ranks}};
  RankRuntime rt(
      64, tessel::run::rankOptions(mesh, rank, TESSEL_COMM_LOCAL, world));
  constexpr uint32_t kAxis = 1; // the one mesh axis: every rank
  for (size_t s = 0; s < results.size(); ++s) {
    AllReduceResult &result = results[s];
    AllReduceShared &shared = sharedPerSize[s];
    int64_t count = result.bytes / 4;
    struct Buffers {
      tessel_ctx *ctx;
      void *in, *out;
      ~Buffers() {
        tessel_free(ctx, in);
        tessel_free(ctx, out);
      }
    } buffers{rt.ctx, tessel_alloc(rt.ctx, result.bytes),
              tessel_alloc(rt.ctx, result.bytes)};
    if (!buffers.in || !buffers.out)
      throw BenchError("cannot allocate two buffers of " +
                       std::to_string(result.bytes) + " bytes");
    // Rank r contributes r + 1 everywhere; the sum is n(n + 1)/2.
    double value[2] = {double(rank + 1), 0.0};
    tessel_init_param(rt.ctx, buffers.in, TESSEL_F32, 0, count,
                      TESSEL_INIT_CONSTANT, value, 0, "all_reduce input");
    checkCollective(rt.ctx, "filling the input");
    auto allReduce = [&] {
      tessel_all_reduce(rt.ctx, kAxis, TESSEL_F32, buffers.in, buffers.out,
                        count, TESSEL_REDUCE_SUM);
    };

    barrier.arriveAndWait([&] { shared.warmStart = now(); });
    while (!shared.warm) {
      allReduce();
      checkCollective(rt.ctx, "all_reduce (warm-up)");
      barrier.arriveAndWait([&] {
        ++shared.warmCalls;
        double elapsed = now() - shared.warmStart;
        if (shared.warmCalls >= 3 && elapsed >= kWarmUpSeconds) {
          shared.warm = true;
          shared.iterations =
              callsFor(options.minTime, elapsed / double(shared.warmCalls));
          result.iterations = shared.iterations;
        }
      });
    }
    std::optional<MemcpyTimer> memcpyTimer;
    if (rank == 0)
      memcpyTimer.emplace(result.bytes);

    for (int r = 0; r < options.runs; ++r) {
      barrier.arriveAndWait([&] { shared.runStart = now(); });
      for (int64_t i = 0; i < shared.iterations; ++i)
        allReduce();
      checkCollective(rt.ctx, "all_reduce");
      barrier.arriveAndWait([&] {
        result.allReduceSeconds.push_back((now() - shared.runStart) /
                                          double(shared.iterations));
      });
      if (rank == 0) {
        double copy = memcpyTimer->run(options.minTime);
        result.memcpySeconds.push_back(copy);
        // Bus bandwidth / memcpy bandwidth of this round.
        result.ratios.push_back(result.busFactor() * copy /
                                result.allReduceSeconds.back());
      }
      barrier.arriveAndWait();
    }

    // Every element of the output is the group's sum.
    float first = 0, last = 0;
    tessel_copy_to_host(rt.ctx, &first, buffers.out, 4);
    tessel_copy_to_host(rt.ctx, &last,
                        static_cast<char *>(buffers.out) + (count - 1) * 4, 4);
    tessel_synchronize(rt.ctx);
    float expected = float(ranks * (ranks + 1) / 2);
    if (first != expected || last != expected)
      throw BenchError("all_reduce of " + std::to_string(result.bytes) +
                       " bytes gave " + std::to_string(first) + " .. " +
                       std::to_string(last) + ", expected " +
                       std::to_string(expected));
  }
}

std::vector<AllReduceResult> benchAllReduce(int ranks, const Options &options) {
  std::vector<AllReduceResult> results;
  for (int64_t bytes : options.sizes) {
    AllReduceResult r;
    r.ranks = ranks;
    r.bytes = bytes;
    results.push_back(r);
  }
  progress("all_reduce on " + std::to_string(ranks) +
           " threads: " + std::to_string(options.sizes.size()) + " sizes, " +
           std::to_string(options.runs) + " runs of >= " +
           std::to_string(options.minTime) + " s each (and as many memcpy)");
  ThreadBarrier barrier(ranks);
  std::vector<AllReduceShared> shared(results.size());
  LocalRanks threads(ranks);
  threads.setInterruptHook(
      [&barrier](const std::string &why) { barrier.breakAll(why); });
  threads.start([&](int32_t rank) {
    runAllReduceRank(ranks, rank, threads.world(), barrier, results, shared,
                     options);
  });
  threads.join();
  return results;
}

//===--- Output ----------------------------------------------------------===//

void printStepTable(const std::vector<StepResult> &results,
                    const Options &options, int cores) {
  if (options.header) {
    std::printf(
        "Training step (zero grads, tessel_backward, grad_scale, "
        "tessel_update; one microbatch) on the threads backend: every rank a "
        "thread, one OpenBLAS thread per rank, %d core%s available (a mesh "
        "of more ranks oversubscribes them). Step ms: median over %d runs of "
        "every rank's steps between two barriers; the meshes' runs alternate. "
        "Throughput: the global batch per second. Speedup: the same model on "
        "1 device (1 core) against this mesh, median of the per-round "
        "ratios. Communication: rank 0's runtime counters per step (payload "
        "bytes).\n\n",
        cores, cores == 1 ? "" : "s", options.runs);
    std::printf(
        "| model | mesh | ranks | global batch | step ms | (range "
        "over runs) | throughput /s | speedup vs 1 device (range) | comm "
        "bytes/step | comm calls/step | collectives per step |\n");
    std::printf("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | "
                "---: | ---: | --- |\n");
  }
  for (const StepResult &r : results) {
    double step = r.stepSeconds();
    auto [lo, hi] = std::minmax_element(r.seconds.begin(), r.seconds.end());
    std::string batch = r.unit == "tokens"
                            ? groupDigits(r.perStep) + " tokens (" +
                                  std::to_string(r.batch) + " × " +
                                  std::to_string(r.perStep / r.batch) + ")"
                            : groupDigits(r.perStep) + " samples";
    std::string speedup = "–";
    if (!r.speedups.empty()) {
      auto [slo, shi] =
          std::minmax_element(r.speedups.begin(), r.speedups.end());
      char text[48];
      std::snprintf(text, sizeof(text), "%.2f (%.2f–%.2f)", median(r.speedups),
                    *slo, *shi);
      speedup = text;
    }
    std::string collectives;
    for (const CommCount &c : r.comm) {
      std::string axes;
      for (const std::string &a : c.axes)
        axes += (axes.empty() ? "" : ",") + a;
      collectives +=
          (collectives.empty() ? "" : "; ") + c.kind + " " + axes + ": " +
          std::to_string(c.calls) + " × " +
          sizeText(double(c.bytes) / double(std::max<int64_t>(c.calls, 1))) +
          " (mean)";
    }
    std::printf(
        "| %s | %s | %lld | %s | %.3f | %.3f–%.3f | %s %s/s | %s | "
        "%s | %lld | %s |\n",
        r.model.c_str(), r.mesh.c_str(), (long long)r.ranks, batch.c_str(),
        step * 1e3, *lo * 1e3, *hi * 1e3,
        groupDigits(int64_t(std::llround(double(r.perStep) / step))).c_str(),
        r.unit.c_str(), speedup.c_str(),
        r.comm.empty() ? "0" : groupDigits(r.commBytes()).c_str(),
        (long long)r.commCalls(),
        collectives.empty() ? "none" : collectives.c_str());
  }
}

void printAllReduceTable(const std::vector<AllReduceResult> &results,
                         const Options &options, int cores) {
  if (options.header)
    std::printf(
        "tessel_all_reduce (f32, sum, out of place) on a local world of "
        "threads, %d core%s available (a group of more ranks oversubscribes "
        "them), against a single-thread memcpy of the same size. Medians "
        "over %d runs; algbw = S / t, busbw = 2(n-1)/n · S / t (NCCL-tests), "
        "memcpy = S / t of one memcpy; GB = 1e9 bytes. busbw / memcpy: "
        "median of the per-round ratios (the runs alternate), with their "
        "range.\n\n",
        cores, cores == 1 ? "" : "s", options.runs);
  if (options.header) {
    std::printf("| ranks | size | all_reduce µs | algbw GB/s | busbw GB/s | "
                "memcpy GB/s | busbw / memcpy | (range over runs) |\n");
    std::printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  }
  for (const AllReduceResult &r : results) {
    auto [lo, hi] = std::minmax_element(r.ratios.begin(), r.ratios.end());
    std::printf("| %d | %s | %.1f | %.2f | %.2f | %.2f | %.2f | %.2f–%.2f |\n",
                r.ranks, sizeText(double(r.bytes)).c_str(),
                median(r.allReduceSeconds) * 1e6, r.algBandwidth() / 1e9,
                r.busBandwidth() / 1e9, r.memcpyBandwidth() / 1e9,
                median(r.ratios), *lo, *hi);
  }
}

//===--- Command line ----------------------------------------------------===//

[[noreturn]] void usage(int status) {
  std::fprintf(
      status ? stderr : stdout,
      "usage: tessel-bench-parallel [MODEL.mlir...] [--mesh SPEC]...\n"
      "         [--sizes LIST] [--groups LIST] [--no-comm] [--runs N]\n"
      "         [--min-time SECONDS] [--seed N] [--no-header] [--verbose]\n"
      "Runs every rank of a mesh as a thread (the threads backend) and\n"
      "prints markdown tables:\n"
      "  1. for each MODEL and --mesh (default: 1, dp=2, tp=2, dp=2,tp=2;\n"
      "     '1' is one device), the training step's median time, the\n"
      "     throughput of the global batch, the speedup over 1 device and\n"
      "     rank 0's collectives per step. Compiles with the tessel-compile\n"
      "     next to this executable.\n"
      "  2. (unless --no-comm) tessel_all_reduce of f32 on a local world of\n"
      "     each --groups size (default 2,4) for each --sizes (default\n"
      "     64K,1M,16M,64M; suffixes K, M, G are powers of 1024): algorithm\n"
      "     and bus bandwidth against a single-thread memcpy.\n"
      "--runs N (default 7) timed runs of at least --min-time (0.2) s each.\n");
  std::exit(status);
}

Options parseArgs(int argc, char **argv) {
  Options o;
  bool meshGiven = false;
  FlagReader flags(argc, argv);
  flags.parse(
      o,
      [&](const std::string &flag, int &i) {
        if (flag == "--mesh") {
          std::string spec = flags.value(i);
          if (!meshGiven)
            o.meshes.clear();
          meshGiven = true;
          if (spec == "1" || spec == "none") {
            o.meshes.push_back("");
          } else {
            tessel::run::parseMesh(spec, "--mesh"); // fails early on a typo
            o.meshes.push_back(spec);
          }
        } else if (flag == "--sizes") {
          o.sizes.clear();
          for (const std::string &s : splitList(flags.value(i)))
            o.sizes.push_back(parseSize(s));
        } else if (flag == "--groups") {
          o.groups.clear();
          for (const std::string &g : splitList(flags.value(i))) {
            char *end = nullptr;
            long n = std::strtol(g.c_str(), &end, 10);
            if (g.empty() || *end || n < 2 || n > 1024)
              throw BenchError("bad group size '" + g + "' (2 .. 1024 ranks)");
            o.groups.push_back(int(n));
          }
        } else if (flag == "--no-comm") {
          o.comm = false;
        } else {
          return false;
        }
        return true;
      },
      usage, [&] { return o.models.empty() && !o.comm; });
  if (!meshGiven)
    o.meshes = {"", "dp=2", "tp=2", "dp=2,tp=2"};
  return o;
}

} // namespace

int main(int argc, char **argv) {
  try {
    Options options = parseArgs(argc, argv);
    int cores = availableCores();
    std::vector<StepResult> steps;
    for (const std::string &model : options.models)
      for (StepResult &r : benchSteps(model, options))
        steps.push_back(std::move(r));
    std::vector<AllReduceResult> allReduces;
    if (options.comm)
      for (int ranks : options.groups)
        for (AllReduceResult &r : benchAllReduce(ranks, options))
          allReduces.push_back(std::move(r));

    if (!steps.empty())
      printStepTable(steps, options, cores);
    if (!steps.empty() && !allReduces.empty())
      std::printf("\n");
    if (!allReduces.empty())
      printAllReduceTable(allReduces, options, cores);
    return 0;
  } catch (const tessel::run::RunError &e) {
    std::fprintf(stderr, "tessel-bench-parallel: error: %s\n", e.what());
  } catch (const BenchError &e) {
    std::fprintf(stderr, "tessel-bench-parallel: error: %s\n", e.what());
  } catch (const nlohmann::json::exception &e) {
    std::fprintf(stderr,
                 "tessel-bench-parallel: error: bad model description: %s\n",
                 e.what());
  } catch (const std::exception &e) {
    std::fprintf(stderr, "tessel-bench-parallel: error: %s\n", e.what());
  }
  return 1;
}
