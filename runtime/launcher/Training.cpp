//===- Training.cpp - The training step against a model's entries ---------===//

#include "runtime/launcher/Training.h"
#include "runtime/launcher/Arena.h"
#include "runtime/launcher/Error.h"

using namespace tessel::run;

/// The backward each of `microbatches` runs: without the gradient
/// reductions where a step of several reduces the summed gradients once
/// (reduce_grads after the last; PyTorch's no_sync).
static EntryFn microbatchBackward(const LoadedModel &model,
                                  int64_t microbatches) {
  return model.desc.reducesGradientsOnce(microbatches) ? model.backwardNoSync
                                                       : model.backward;
}

/// Runs `entry` (forward or backward) once per microbatch of `step`, each
/// on its own samples and with its own dropout masks; the step's loss.
static StepLoss runMicrobatches(const LoadedModel &model, RankRuntime &rt,
                                BatchSource &batches, int64_t step,
                                int64_t microbatches, EntryFn entry,
                                const std::string &what) {
  StepLoss loss;
  for (int64_t m = 0; m < microbatches; ++m) {
    batches.fill(step * microbatches + m, rt.ctx, rt.arena);
    tessel_set_microbatch(rt.ctx, uint64_t(m));
    entry(rt.ctx, rt.arena);
    tessel_synchronize(rt.ctx);
    checkKernelError(rt.ctx, "step " + std::to_string(step + 1) + " (" + what +
                                 ", microbatch " + std::to_string(m + 1) + ")");
    loss.add(model.desc, rt.ctx, rt.arena);
  }
  return loss;
}

double tessel::run::trainStep(const LoadedModel &model, RankRuntime &rt,
                              BatchSource &batches, int64_t step,
                              int64_t microbatches) {
  const ModelDesc &desc = model.desc;
  tessel_set_step(rt.ctx, uint64_t(step));
  zeroGrads(desc, rt.ctx, rt.arena);
  StepLoss loss =
      runMicrobatches(model, rt, batches, step, microbatches,
                      microbatchBackward(model, microbatches), "backward");
  if (desc.reducesGradientsOnce(microbatches)) {
    model.reduceGrads(rt.ctx, rt.arena);
    tessel_synchronize(rt.ctx);
    checkKernelError(rt.ctx, "step " + std::to_string(step + 1) +
                                 " (the gradients' reduction)");
  }
  writeGradScale(desc, rt.ctx, rt.arena, loss.divisor());
  model.update(rt.ctx, rt.arena);
  tessel_synchronize(rt.ctx);
  checkKernelError(rt.ctx, "step " + std::to_string(step + 1) + " (update)");
  return loss.mean();
}

namespace {
/// `bytes` rounded up to the arena's alignment, or a RunError.
int64_t aligned64(int64_t bytes) {
  int64_t rounded;
  if (__builtin_add_overflow(bytes, 63, &rounded))
    throw RunError("--graph: the staging of a step's inputs overflows");
  return rounded / 64 * 64;
}
} // namespace

tessel::run::CapturedStep::CapturedStep(const LoadedModel &model,
                                       RankRuntime &rt, int64_t microbatches,
                                       bool training)
    : model(model), rt(rt), microbatches(microbatches), training(training),
      feeds(model.desc.feeds()) {
  for (const TensorDesc *feed : feeds) {
    feedAt.push_back(slotBytes);
    slotBytes = aligned64(slotBytes + feed->bytes);
  }
  // A loss and its count: two scalars of at most 8 bytes.
  lossBytes = aligned64(2 * countAt);
  int64_t bytes;
  if (__builtin_mul_overflow(slotBytes + lossBytes, microbatches, &bytes) ||
      __builtin_add_overflow(bytes, lossBytes, &bytes))
    throw RunError("--graph: the staging of " + std::to_string(microbatches) +
                   " microbatches overflows");
  staging = static_cast<char *>(tessel_alloc(rt.ctx, bytes));
  checkKernelError(rt.ctx, "allocating the --graph staging (" +
                               std::to_string(bytes) + " bytes)");
  if (training && model.desc.lossCount()) {
    // The 1 of captureGradScale, in grad_scale's dtype (f32 or f64).
    const TensorDesc &scale = *model.desc.withRole("grad_scale").at(0);
    double one = 1.0;
    float oneF32 = 1.0f;
    tessel_copy_to_device(rt.ctx, scaleScratch(),
                          scale.dtypeCode == TESSEL_F64
                              ? static_cast<const void *>(&one)
                              : static_cast<const void *>(&oneF32),
                          scale.bytes);
    checkKernelError(rt.ctx, "writing the --graph gradient scale's 1");
  }
}

tessel::run::CapturedStep::~CapturedStep() {
  tessel_graph_destroy(graph);
  tessel_free(rt.ctx, staging);
}

char *tessel::run::CapturedStep::slot(int64_t m) const {
  return staging + m * slotBytes;
}

char *tessel::run::CapturedStep::lossSlot(int64_t m) const {
  return staging + microbatches * slotBytes + m * lossBytes;
}

char *tessel::run::CapturedStep::scaleScratch() const {
  return lossSlot(microbatches);
}

/// grad_scale = 1 / max(Σ counts, 1), in the captured step: the counts
/// are known only once its forwards have run. The sum is exact in the
/// count's dtype (f32: up to 2^24), then divided in grad_scale's, as
/// writeGradScale divides; max(n, 1) is written relu(n - 1) + 1, as the
/// model writes it.
void tessel::run::CapturedStep::captureGradScale(const TensorDesc &count) {
  tessel_ctx *ctx = rt.ctx;
  char *one = scaleScratch(), *total = scaleScratch() + countAt;
  tessel_copy(ctx, total, lossSlot(0) + countAt, count.bytes);
  for (int64_t m = 1; m < microbatches; ++m)
    tessel_binary(ctx, TESSEL_ADD, count.dtypeCode, total,
                  lossSlot(m) + countAt, total, 1);
  const TensorDesc &scale = *model.desc.withRole("grad_scale").at(0);
  int32_t dtype = scale.dtypeCode;
  char *at = static_cast<char *>(rt.arena) + scale.offset;
  if (dtype == count.dtypeCode)
    tessel_copy(ctx, at, total, scale.bytes);
  else
    tessel_cast(ctx, count.dtypeCode, dtype, total, at, 1);
  tessel_binary(ctx, TESSEL_SUB, dtype, at, one, at, 1);
  tessel_unary(ctx, TESSEL_RELU, dtype, at, at, 1);
  tessel_binary(ctx, TESSEL_ADD, dtype, at, one, at, 1);
  tessel_binary(ctx, TESSEL_DIV, dtype, one, at, at, 1);
}

void tessel::run::CapturedStep::capture(int64_t step) {
  const ModelDesc &desc = model.desc;
  std::string when = "capturing step " + std::to_string(step + 1);
  if (tessel_graph_begin(rt.ctx) != 0)
    checkKernelError(rt.ctx, when);
  char *arena = static_cast<char *>(rt.arena);
  if (training)
    zeroGrads(desc, rt.ctx, arena);
  EntryFn entry =
      training ? microbatchBackward(model, microbatches) : model.forward;
  for (int64_t m = 0; m < microbatches; ++m) {
    for (size_t i = 0; i < feeds.size(); ++i)
      tessel_copy(rt.ctx, arena + feeds[i]->offset, slot(m) + feedAt[i],
                  feeds[i]->bytes);
    tessel_set_microbatch(rt.ctx, uint64_t(m));
    entry(rt.ctx, arena);
    tessel_copy(rt.ctx, lossSlot(m), arena + desc.loss().offset,
                desc.loss().bytes);
    if (const TensorDesc *count = desc.lossCount())
      tessel_copy(rt.ctx, lossSlot(m) + countAt, arena + count->offset,
                  count->bytes);
  }
  if (training && desc.reducesGradientsOnce(microbatches))
    model.reduceGrads(rt.ctx, arena);
  if (training) {
    if (const TensorDesc *count = desc.lossCount())
      captureGradScale(*count);
    else // A constant of the capture: the host bytes as they are now.
      writeGradScale(desc, rt.ctx, arena, double(microbatches));
    model.update(rt.ctx, arena);
  }
  graph = tessel_graph_end(rt.ctx);
  if (!graph)
    checkKernelError(rt.ctx, when);
}

StepLoss tessel::run::CapturedStep::runLosses(BatchSource &batches,
                                              int64_t step) {
  tessel_set_step(rt.ctx, uint64_t(step));
  char *arena = static_cast<char *>(rt.arena);
  for (int64_t m = 0; m < microbatches; ++m) {
    batches.fill(step * microbatches + m, rt.ctx, arena);
    for (size_t i = 0; i < feeds.size(); ++i)
      tessel_copy(rt.ctx, slot(m) + feedAt[i], arena + feeds[i]->offset,
                  feeds[i]->bytes);
  }
  if (!graph)
    capture(step);
  tessel_graph_launch(rt.ctx, graph);
  tessel_synchronize(rt.ctx);
  checkKernelError(rt.ctx, "step " + std::to_string(step + 1) +
                               " (the captured step)");
  std::vector<char> losses(size_t(microbatches * lossBytes));
  tessel_copy_to_host(rt.ctx, losses.data(), lossSlot(0),
                      microbatches * lossBytes);
  checkKernelError(rt.ctx, "reading step " + std::to_string(step + 1) +
                               "'s losses");
  StepLoss loss;
  for (int64_t m = 0; m < microbatches; ++m) {
    const char *at = losses.data() + m * lossBytes;
    loss.add(model.desc, at, at + countAt);
  }
  return loss;
}

double tessel::run::evalStep(const LoadedModel &model, RankRuntime &rt,
                             BatchSource &batches, int64_t step,
                             int64_t microbatches) {
  // Counter-based randomness (dropout) draws fresh masks every step.
  tessel_set_step(rt.ctx, uint64_t(step));
  return runMicrobatches(model, rt, batches, step, microbatches, model.forward,
                         "forward")
      .mean();
}

/// Held-out steps 0 .. steps - 1 with dropout off, as one StepLoss.
template <class StepFn>
static double heldOutSteps(RankRuntime &rt, int64_t steps, StepFn step) {
  tessel_set_dropout(rt.ctx, 0);
  StepLoss loss;
  for (int64_t k = 0; k < steps; ++k)
    loss += step(k);
  tessel_set_dropout(rt.ctx, 1);
  return loss.mean();
}

double tessel::run::heldOutLoss(const LoadedModel &model, RankRuntime &rt,
                                BatchSource &batches, int64_t steps,
                                int64_t microbatches) {
  return heldOutSteps(rt, steps, [&](int64_t k) {
    return runMicrobatches(model, rt, batches, k, microbatches, model.forward,
                           "held-out forward");
  });
}

// Dropout is read when a call is issued: the capture (at the first
// evaluation) holds it off, and only held-out steps launch this graph.
double tessel::run::heldOutLoss(CapturedStep &evaluation, RankRuntime &rt,
                                BatchSource &batches, int64_t steps) {
  return heldOutSteps(
      rt, steps, [&](int64_t k) { return evaluation.runLosses(batches, k); });
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
