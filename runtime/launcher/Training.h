//===- Training.h - The training step against a model's entries -----------===//

#ifndef TESSEL_LAUNCHER_TRAINING_H
#define TESSEL_LAUNCHER_TRAINING_H

#include "runtime/launcher/Arena.h"
#include "runtime/launcher/Data.h"
#include "runtime/launcher/ModelLibrary.h"
#include "runtime/launcher/Ranks.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::run {

/// One training step `step` (0-based) of `microbatches` microbatches, as
/// docs/model-abi.md gives it: zero the gradients, fill each microbatch from
/// `batches` and run the backward entry on it, write the StepLoss's scale
/// (1/M, or one over the step's loss_count) to grad_scale, run the update
/// entry. Returns the step's loss (StepLoss); throws RunError on a kernel
/// error. `model` must have backward and update entries (desc.trains()).
/// tessel-run's training loop and tessel-bench-step both run this.
double trainStep(const LoadedModel &model, RankRuntime &rt,
                 BatchSource &batches, int64_t step, int64_t microbatches);

/// Refuses steps [firstStep, firstStep + steps) whose step count or sample
/// index (step · microbatches · batch, what the batch sources draw from)
/// would pass int64: a checkpoint's tessel.step of 2^62 would otherwise run
/// on wrapped indices. `firstStep` comes from `source` when not empty.
void checkStepRange(int64_t firstStep, int64_t steps, int64_t microbatches,
                    int64_t batch, const std::string &source);

/// A step captured once and launched every step after (tessel-run
/// --graph): a training step (backward on every microbatch and the
/// update) or, with `training` false, an evaluation step (the forward on
/// every microbatch). The work per step is filling the inputs, one launch
/// and one read of the losses. The step's M microbatches' inputs and
/// labels wait in device staging (each fill goes to the arena, as always,
/// and is copied to its microbatch's slot), and the captured step copies
/// slot m into the arena before microbatch m's backward and its loss out
/// after, so it reads nothing from the host. The step itself comes from
/// tessel_set_step before each launch (generated code reads it through the
/// _current entries). Equal bit for bit to trainStep (evalStep). The
/// staging (M times the feeds, M losses and their counts, the gradient
/// scale's scratch) is allocated here, beside the arena. A model with a
/// loss_count computes its gradient scale inside the step, from the
/// counts (one over max(their sum, 1)).
class CapturedStep {
public:
  CapturedStep(const LoadedModel &model, RankRuntime &rt, int64_t microbatches,
               bool training);
  ~CapturedStep();
  CapturedStep(const CapturedStep &) = delete;
  CapturedStep &operator=(const CapturedStep &) = delete;

  /// Step `step` (captured at the first call): the mean loss.
  double run(BatchSource &batches, int64_t step) {
    return runLosses(batches, step).mean();
  }
  /// The same, as the step's StepLoss (its losses and counts).
  StepLoss runLosses(BatchSource &batches, int64_t step);

private:
  void capture(int64_t step);
  void captureGradScale(const TensorDesc &count);
  char *slot(int64_t m) const;
  /// Microbatch m's loss, then its count at countAt.
  char *lossSlot(int64_t m) const;
  /// The scale's scratch: the count's 1, then the running total.
  char *scaleScratch() const;
  static constexpr int64_t countAt = 8;

  const LoadedModel &model;
  RankRuntime &rt;
  int64_t microbatches;
  bool training;
  std::vector<const TensorDesc *> feeds;
  std::vector<int64_t> feedAt; // each feed's offset in a slot
  int64_t slotBytes = 0, lossBytes = 0;
  char *staging = nullptr;
  tessel_graph *graph = nullptr;
};

/// The forward entry on each microbatch of `step`: the step's loss, no
/// update.
double evalStep(const LoadedModel &model, RankRuntime &rt, BatchSource &batches,
                int64_t step, int64_t microbatches);

/// --eval-every's held-out loss: the forward entry, dropout off, on batches
/// 0 .. `steps` - 1 of `batches` (M microbatches each), as one StepLoss
/// over all of them. The same batches every time it is taken.
double heldOutLoss(const LoadedModel &model, RankRuntime &rt,
                   BatchSource &batches, int64_t steps, int64_t microbatches);

/// heldOutLoss with --graph: each held-out step a launch of `evaluation`
/// (an evaluation CapturedStep, captured with dropout off at its first
/// call), equal bit for bit to the call-by-call form.
double heldOutLoss(CapturedStep &evaluation, RankRuntime &rt,
                   BatchSource &batches, int64_t steps);

} // namespace tessel::run

#endif // TESSEL_LAUNCHER_TRAINING_H
