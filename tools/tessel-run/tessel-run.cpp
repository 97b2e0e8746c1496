//===- tessel-run.cpp - Runs a compiled Tessel model on the CPU runtime ---===//

#include "Args.h"
#include "Data.h"
#include "Error.h"
#include "Model.h"
#include "Progress.h"
#include "Safetensors.h"

#include <chrono>
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

/// Loads MODEL.so, or compiles MODEL.mlir first. The temporary .so is
/// removed as soon as it is mapped: the mapping outlives the file.
LoadedModel loadOrCompileModel(const std::string &path) {
  if (!endsWith(path, ".mlir"))
    return loadModel(path);
  std::string so = compileMlirModel(path);
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

int runModel(const Options &options) {
  double start = nowSeconds();
  LoadedModel model = loadOrCompileModel(options.model);
  const ModelDesc &desc = model.desc;
  // The data source is checked before any work so a bad file fails fast.
  std::unique_ptr<BatchSource> batches =
      options.data.empty()
          ? makeSyntheticData(desc, options.seed)
          : makeTokenFileData(desc, options.data, options.dataDtype);

  RankRuntime rt(desc.arenaBytes);
  if (options.load.empty())
    initParams(desc, rt.ctx, rt.arena, options.seed);
  else
    loadSafetensors(options.load, desc, rt.ctx, rt.arena);
  checkKernelError(rt.ctx, "initialising parameters");

  std::unique_ptr<MetricsWriter> metrics;
  if (!options.metrics.empty())
    metrics = std::make_unique<MetricsWriter>(options.metrics);
  ProgressReporter progress(options.steps, options.logEvery, options.quiet);
  int64_t tokens = tokensPerStep(desc);

  for (int64_t step = 0; step < options.steps; ++step) {
    double stepStart = nowSeconds();
    batches->fill(step, rt.ctx, rt.arena);
    // Counter-based randomness (dropout) draws fresh masks every step.
    tessel_set_step(rt.ctx, static_cast<uint64_t>(step));
    model.forward(rt.ctx, rt.arena);
    tessel_synchronize(rt.ctx);
    checkKernelError(rt.ctx, "step " + std::to_string(step + 1));
    double loss = readLoss(desc.loss(), rt.ctx, rt.arena);
    double seconds = nowSeconds() - stepStart;
    tessel_counters counters;
    tessel_get_counters(rt.ctx, &counters);
    StepResult result = {step + 1, loss, tokens, seconds,
                         seconds > 0 ? tokens / seconds : 0.0,
                         counters.bytes_allocated};
    if (metrics)
      metrics->write(result);
    progress.onStep(result);
  }

  if (!options.save.empty())
    writeSafetensorsAtomically(options.save, desc, rt.ctx, rt.arena,
                               {{"step", std::to_string(options.steps)},
                                {"seed", std::to_string(options.seed)}});
  progress.finish(nowSeconds() - start, desc.peakBytes, desc.arenaBytes);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  try {
    Options options = parseArgs(argc, argv);
    if (options.help) {
      std::fputs(usageText().c_str(), stdout);
      return 0;
    }
    return runModel(options);
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
