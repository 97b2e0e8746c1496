//===- Training.cpp - The training step against a model's entries ---------===//

#include "runtime/launcher/Training.h"
#include "runtime/launcher/Arena.h"
#include "runtime/launcher/Error.h"

using namespace tessel::run;

/// The address of `t` in `arena`, for a runtime call.
static void *at(void *arena, const TensorDesc &t) {
  return static_cast<char *>(arena) + t.offset;
}

/// Runs `entry` (forward or backward) once per microbatch of `step`, each
/// on its own samples and with its own dropout masks; the mean loss.
static double runMicrobatches(const LoadedModel &model, RankRuntime &rt,
                              BatchSource &batches, int64_t step,
                              int64_t microbatches, EntryFn entry,
                              const std::string &what) {
  double lossSum = 0;
  for (int64_t m = 0; m < microbatches; ++m) {
    batches.fill(step * microbatches + m, rt.ctx, rt.arena);
    tessel_set_microbatch(rt.ctx, uint64_t(m));
    entry(rt.ctx, rt.arena);
    tessel_synchronize(rt.ctx);
    checkKernelError(rt.ctx, "step " + std::to_string(step + 1) + " (" + what +
                                 ", microbatch " + std::to_string(m + 1) + ")");
    lossSum += readLoss(model.desc.loss(), rt.ctx, rt.arena);
  }
  return lossSum / double(microbatches);
}

double tessel::run::trainStep(const LoadedModel &model, RankRuntime &rt,
                              BatchSource &batches, int64_t step,
                              int64_t microbatches) {
  const ModelDesc &desc = model.desc;
  tessel_set_step(rt.ctx, uint64_t(step));
  zeroGrads(desc, rt.ctx, rt.arena);
  double loss = runMicrobatches(model, rt, batches, step, microbatches,
                                model.backward, "backward");
  float gradScale = 1.0f / float(microbatches);
  tessel_copy_to_device(rt.ctx, at(rt.arena, *desc.withRole("grad_scale")[0]),
                        &gradScale, sizeof(gradScale));
  model.update(rt.ctx, rt.arena);
  tessel_synchronize(rt.ctx);
  checkKernelError(rt.ctx, "step " + std::to_string(step + 1) + " (update)");
  return loss;
}

double tessel::run::evalStep(const LoadedModel &model, RankRuntime &rt,
                             BatchSource &batches, int64_t step,
                             int64_t microbatches) {
  // Counter-based randomness (dropout) draws fresh masks every step.
  tessel_set_step(rt.ctx, uint64_t(step));
  return runMicrobatches(model, rt, batches, step, microbatches, model.forward,
                         "forward");
}

void tessel::run::checkStepRange(int64_t firstStep, int64_t steps,
                                 int64_t microbatches, int64_t batch,
                                 const std::string &source) {
  int64_t lastStep = 0, samples = 0;
  if (firstStep >= 0 && steps >= 0 && microbatches > 0 && batch > 0 &&
      !__builtin_add_overflow(firstStep, steps, &lastStep) &&
      !__builtin_mul_overflow(lastStep, microbatches, &samples) &&
      !__builtin_mul_overflow(samples, batch, &samples))
    return;
  throw RunError("cannot run steps " + std::to_string(uint64_t(firstStep) + 1) +
                 " to " +
                 std::to_string(uint64_t(firstStep) + uint64_t(steps)) +
                 (source.empty() ? "" : " (the first from " + source + ")") +
                 " at " + std::to_string(microbatches) + " microbatch(es) of " +
                 std::to_string(batch) +
                 " samples: the sample index does not fit in int64");
}
