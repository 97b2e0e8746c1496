//===- tessel-run.cpp - Runs a compiled Tessel model on the CPU runtime ---===//

#include "runtime/launcher/Args.h"
#include "runtime/launcher/Compile.h"
#include "runtime/launcher/Error.h"
#include "runtime/launcher/Launch.h"
#include "runtime/launcher/Pipeline.h"
#include "runtime/launcher/ModelLibrary.h"
#include "runtime/launcher/OutputFiles.h"
#include "runtime/launcher/Progress.h"
#include "runtime/launcher/Safetensors.h"
#include "runtime/launcher/StopSignal.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <unistd.h>

using namespace tessel::run;

namespace {

double nowSeconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// Loads MODEL.so, or compiles MODEL.mlir first (with the training flags).
/// The temporary .so is removed as soon as it is mapped: the mapping
/// outlives the file.
LoadedModel loadOrCompileModel(const Options &options) {
  const std::string &path = options.model;
  if (!endsWith(path, ".mlir"))
    return loadModel(path);
  std::string so = compileMlirModel(path, compileArgs(options));
  std::string dir = so.substr(0, so.rfind('/'));
  auto cleanup = [&] {
    ::unlink(so.c_str());
    ::rmdir(dir.c_str());
  };
  try {
    LoadedModel model = loadModel(so);
    cleanup();
    return model;
  } catch (...) {
    cleanup();
    throw;
  }
}

/// This process's part of a run, set up once before any rank starts: the
/// model loaded (or compiled), the flags checked against it, the data and
/// the checkpoint validated; then every rank of the mesh as threads (the
/// local backend, `mpiWorld` 0) or rank `rank` of `mpiWorld` processes (MPI,
/// or TCP when `tcp` says where the world meets).
RunEnd runModel(const Options &given, int32_t rank, int32_t mpiWorld,
                const TorchrunEnv *tcp = nullptr) {
  double start = nowSeconds();
  LoadedModel model = loadOrCompileModel(given);
  const ModelDesc &desc = model.desc;
  // A pipeline's schedule fixes its microbatches.
  Options options = given;
  if (desc.pipeline) {
    if (given.microbatchesGiven &&
        given.microbatches != desc.pipeline->microbatches)
      throw UsageError("model '" + given.model + "' is a pipeline compiled for " +
                       std::to_string(desc.pipeline->microbatches) +
                       " microbatches (tessel-compile --microbatches); "
                       "--microbatches " +
                       std::to_string(given.microbatches) + " differs");
    options.microbatches = desc.pipeline->microbatches;
  }
  bool compiledHere = endsWith(options.model, ".mlir");
  checkMesh(options, desc, options.model, compiledHere);
  checkTrainingFlags(options, desc, options.model, compiledHere);
  if (mpiWorld && mpiWorld != desc.worldSize())
    throw RunError(std::string(tcp ? "torchrun" : "mpirun") + " started " +
                   std::to_string(mpiWorld) +
                   (mpiWorld == 1 ? " process" : " processes") + "; model '" +
                   options.model + "' runs on " +
                   (desc.mesh ? "mesh " + desc.mesh->toString() + ": " +
                                    std::to_string(desc.worldSize()) +
                                    " ranks, one process each"
                              : std::string("one device")) +
                   (tcp ? " (torchrun --nproc-per-node " : " (mpirun -np ") +
                   std::to_string(desc.worldSize()) + ")");
  RunPlan plan;
  plan.options = &options;
  plan.model = &model;
  plan.mode = modeOf(options, desc);
  plan.startSeconds = start;
  plan.tcp = tcp;
  // A pipeline's stages train where they update (their backward may be
  // split in two or deferred).
  bool trains = desc.pipeline ? model.stages.front().update != nullptr
                              : model.backward != nullptr;
  if (plan.mode == Mode::CheckGrads && !trains)
    throw RunError("--check-grads needs a model compiled for training; '" +
                   options.model + "' has no backward entry");
  // The data source is checked before any work so a bad file fails fast
  // (and once, not on every rank).
  makeBatchSource(options, globalFeedView(desc));
  if (options.evalEvery) {
    if (plan.mode != Mode::Train)
      throw UsageError("--eval-every evaluates while training; '" +
                       options.model + "' was compiled without training");
    makeBatchSource(options, globalFeedView(desc), /*heldOut=*/true);
  }

  std::unique_ptr<CheckpointReader> checkpoint;
  if (!options.load.empty()) {
    checkpoint = std::make_unique<CheckpointReader>(options.load, desc,
                                                    plan.mode == Mode::Train);
    if (plan.mode == Mode::Train && checkpoint->info().paramsOnly && rank == 0)
      std::fprintf(stderr,
                   "tessel-run: note: checkpoint '%s' holds parameters only: "
                   "the optimizer state starts at zero, at step 0\n",
                   options.load.c_str());
    // Another precision's checkpoint loads, but the user should know.
    if (!checkpoint->info().conversions.empty() && rank == 0)
      std::fprintf(stderr, "tessel-run: note: checkpoint '%s': %s\n",
                   options.load.c_str(),
                   checkpoint->info().conversions.c_str());
    if (plan.mode == Mode::Train)
      plan.firstStep = checkpoint->info().step;
    plan.checkpoint = checkpoint.get();
  }
  std::unique_ptr<MetricsWriter> metrics;
  if (!options.metrics.empty() && rank == 0 && plan.mode != Mode::CheckGrads) {
    metrics = std::make_unique<MetricsWriter>(options.metrics);
    plan.metrics = metrics.get();
  }
  std::unique_ptr<TraceWriter> trace;
  if (!options.trace.empty() && plan.mode != Mode::CheckGrads) {
    trace = std::make_unique<TraceWriter>(
        TraceWriter::pathFor(options.trace, rank, mpiWorld));
    plan.trace = trace.get();
  }
  RunEnd end = mpiWorld ? runRank(plan, rank,
                                  !desc.mesh ? TESSEL_COMM_NONE
                                  : tcp      ? TESSEL_COMM_TCP
                                             : TESSEL_COMM_MPI,
                                  nullptr)
                        : runLocalRanks(plan);
  if (trace)
    trace->write();
  if (end.signal && rank == 0) {
    std::string saved;
    for (const std::string &path : {options.save, options.saveSharded})
      if (!path.empty())
        saved += (saved.empty() ? "; saved '" : " and '") + path + "'";
    std::fprintf(stderr, "tessel-run: stopped by %s after step %lld%s\n",
                 end.signal == SIGINT ? "SIGINT" : "SIGTERM",
                 static_cast<long long>(end.step), saved.c_str());
  }
  return end;
}

/// The exit status of a run stopped by `signal` (0: none), as a shell
/// reports a command killed by it.
int exitCodeOf(const RunEnd &end) { return end.signal ? 128 + end.signal : 0; }

/// Under `mpirun`: this process's rank and the number of processes.
std::pair<int32_t, int32_t> startMpi() {
  int32_t rank = 0, size = 0;
  if (tessel_mpi_init(&rank, &size) != 0) {
    const char *why = tessel_error(nullptr);
    throw RunError(std::string("--comm mpi: ") +
                   (why ? why : "MPI is not available"));
  }
  return {rank, size};
}

/// One process of `mpirun -np N tessel-run ... --comm mpi`: a failure
/// names the rank and takes every process down (MPI_Abort) rather than
/// leave the others waiting in a collective.
int runMpiProcess(const Options &options) {
  auto [rank, size] = startMpi();
  RunEnd end;
  try {
    end = runModel(options, rank, size);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "tessel-run: error: rank %d: %s\n", int(rank),
                 e.what());
    std::fflush(stderr);
    const RunError *error = dynamic_cast<const RunError *>(&e);
    tessel_mpi_abort(error ? error->exitCode : 1);
    return 1;
  }
  tessel_mpi_finalize();
  return exitCodeOf(end);
}

/// One process of `torchrun --nproc-per-node N tessel-run ...` (or of any
/// launcher that sets torchrun's variables): a failure names the rank; the
/// process's exit closes its sockets, which fails the other ranks at once.
int runTcpProcess(const Options &options) {
  const TorchrunEnv env = parseTorchrunEnv(processEnv());
  try {
    return exitCodeOf(runModel(options, env.rank, env.worldSize, &env));
  } catch (const std::exception &e) {
    std::fprintf(stderr, "tessel-run: error: rank %d: %s\n", int(env.rank),
                 e.what());
    const RunError *error = dynamic_cast<const RunError *>(&e);
    return error ? error->exitCode : 1;
  }
}

} // namespace

int main(int argc, char **argv) {
  try {
    Options options = parseArgs(argc, argv);
    if (options.help) {
      std::fputs(usageText().c_str(), stdout);
      return 0;
    }
    // Before anything is read or written: an output that names an input
    // would be destroyed by the first write (--metrics truncates at once).
    checkOutputPaths(options);
    installStopHandlers();
    if (!options.commGiven && torchrunDetected(processEnv()))
      options.comm = CommBackend::Tcp;
    if (options.comm == CommBackend::Mpi)
      return runMpiProcess(options);
    if (options.comm == CommBackend::Tcp)
      return runTcpProcess(options);
    return exitCodeOf(runModel(options, /*rank=*/0, /*mpiWorld=*/0));
  } catch (const UsageError &e) {
    std::fprintf(stderr, "tessel-run: error: %s (see tessel-run --help)\n",
                 e.what());
    return e.exitCode;
  } catch (const RunError &e) {
    std::fprintf(stderr, "tessel-run: error: %s\n", e.what());
    return e.exitCode;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "tessel-run: error: %s\n", e.what());
    return 1;
  }
}
