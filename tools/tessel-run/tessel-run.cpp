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

/// The CPU context of rank 0 of 1, destroyed with its arena.
struct Runtime {
  tessel_ctx *ctx = nullptr;
  void *arena = nullptr;

  explicit Runtime(int64_t arenaBytes) {
    tessel_ctx_options options = {TESSEL_BACKEND_CPU, /*rank=*/0,
                                  /*world_size=*/1, /*device=*/0};
    ctx = tessel_ctx_create(&options);
    if (!ctx) {
      const char *why = tessel_error(nullptr);
      throw RunError(std::string("cannot create the CPU context: ") +
                     (why ? why : "unknown error"));
    }
    arena = tessel_alloc(ctx, arenaBytes);
    if (!arena) {
      tessel_ctx_destroy(ctx);
      throw RunError("cannot allocate the arena (" +
                     std::to_string(arenaBytes) + " bytes)");
    }
  }
  ~Runtime() {
    tessel_free(ctx, arena);
    tessel_ctx_destroy(ctx);
  }
  Runtime(const Runtime &) = delete;
  Runtime &operator=(const Runtime &) = delete;
};

void initParams(const ModelDesc &model, tessel_ctx *ctx, void *arena,
                uint64_t seed) {
  for (const TensorDesc *p : model.withRole("param"))
    tessel_init_param(ctx, static_cast<char *>(arena) + p->offset, p->dtypeCode,
                      /*first=*/0, p->numElements(), p->initKind, p->initArgs,
                      seed, p->name.c_str());
  tessel_synchronize(ctx);
}

/// A kernel error (e.g. a label out of range) makes every later number
/// meaningless: stop.
void checkKernelError(tessel_ctx *ctx, const std::string &when) {
  if (const char *error = tessel_error(ctx))
    throw RunError(when + ": " + error);
}

double readLoss(const TensorDesc &loss, tessel_ctx *ctx, const void *arena) {
  const char *src = static_cast<const char *>(arena) + loss.offset;
  if (loss.dtypeCode == TESSEL_F64) {
    double value;
    tessel_copy_to_host(ctx, &value, src, sizeof(value));
    return value;
  }
  float value;
  tessel_copy_to_host(ctx, &value, src, sizeof(value));
  return value;
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

  Runtime rt(desc.arenaBytes);
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
