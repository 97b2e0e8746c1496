//===- tessel-run.cpp - Runs a compiled Tessel model on the CPU runtime ---===//

#include "Args.h"
#include "Data.h"
#include "Error.h"
#include "GradCheck.h"
#include "Model.h"
#include "Progress.h"
#include "Safetensors.h"
#include "Training.h"

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

enum class Mode { Train, Eval, CheckGrads };

int runModel(const Options &options) {
  double start = nowSeconds();
  LoadedModel model = loadOrCompileModel(options);
  const ModelDesc &desc = model.desc;
  checkTrainingFlags(options, desc, options.model,
                     endsWith(options.model, ".mlir"));
  Mode mode = options.checkGrads               ? Mode::CheckGrads
              : options.eval || !desc.trains() ? Mode::Eval
                                               : Mode::Train;
  if (mode == Mode::CheckGrads && !model.backward)
    throw RunError("--check-grads needs a model compiled for training; '" +
                   options.model + "' has no backward entry");
  // The data source is checked before any work so a bad file fails fast.
  std::unique_ptr<BatchSource> batches =
      options.data.empty()
          ? makeSyntheticData(desc, options.seed)
          : makeTokenFileData(desc, options.data, options.dataDtype);

  RankRuntime rt(desc.arenaBytes);
  int64_t firstStep = 0;
  if (options.load.empty()) {
    initParams(desc, rt.ctx, rt.arena, options.seed);
    zeroStates(desc, rt.ctx, rt.arena);
  } else {
    LoadedCheckpoint loaded = loadSafetensors(options.load, desc, rt.ctx,
                                              rt.arena, mode == Mode::Train);
    if (mode == Mode::Train && loaded.paramsOnly) {
      zeroStates(desc, rt.ctx, rt.arena);
      std::fprintf(stderr,
                   "tessel-run: note: checkpoint '%s' holds parameters only: "
                   "the optimizer state starts at zero, at step 0\n",
                   options.load.c_str());
    }
    if (mode == Mode::Train)
      firstStep = loaded.step;
  }
  checkKernelError(rt.ctx, "initialising parameters");

  if (mode == Mode::CheckGrads) {
    checkGradients(model, rt.ctx, rt.arena, *batches, firstStep,
                   firstStep * options.microbatches, options.seed,
                   options.gradTol, stdout);
    return 0;
  }

  std::unique_ptr<MetricsWriter> metrics;
  if (!options.metrics.empty())
    metrics = std::make_unique<MetricsWriter>(options.metrics);
  int64_t lastStep = firstStep + options.steps;
  ProgressReporter progress(firstStep, lastStep, options.logEvery,
                            options.quiet);
  int64_t tokens = tokensPerStep(desc) * options.microbatches;

  for (int64_t step = firstStep; step < lastStep; ++step) {
    double stepStart = nowSeconds();
    double loss =
        mode == Mode::Train
            ? trainStep(model, rt, *batches, step, options.microbatches)
            : evalStep(model, rt, *batches, step, options.microbatches);
    double seconds = nowSeconds() - stepStart;
    tessel_counters counters;
    tessel_get_counters(rt.ctx, &counters);
    StepResult result = {step + 1,
                         loss,
                         tokens,
                         seconds,
                         seconds > 0 ? tokens / seconds : 0.0,
                         counters.bytes_allocated};
    if (mode == Mode::Train)
      result.lr = desc.train->lrAt(step);
    result.microbatches = options.microbatches;
    if (metrics)
      metrics->write(result);
    progress.onStep(result);
  }

  if (!options.save.empty()) {
    std::map<std::string, std::string> metadata = {
        {"seed", std::to_string(options.seed)}};
    // Only a training run has a step count to resume from.
    if (mode == Mode::Train)
      metadata["tessel.step"] = std::to_string(lastStep);
    writeSafetensorsAtomically(options.save, desc, rt.ctx, rt.arena, metadata,
                               /*withStates=*/mode == Mode::Train);
  }
  int64_t batch = desc.batchSize();
  std::string what =
      (mode == Mode::Train
           ? "train " + describeTraining(*desc.train)
           : std::string(desc.trains() ? "eval"
                                       : "eval: compiled without "
                                         "training")) +
      ", global batch " + std::to_string(options.microbatches * batch) + " = " +
      std::to_string(options.microbatches) + " x " + std::to_string(batch);
  progress.finish(nowSeconds() - start, desc.peakBytes, desc.arenaBytes, what);
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
