//===- Training.h - The training step against a model's entries -----------===//

#ifndef TESSEL_LAUNCHER_TRAINING_H
#define TESSEL_LAUNCHER_TRAINING_H

#include "runtime/launcher/Data.h"
#include "runtime/launcher/ModelLibrary.h"
#include "runtime/launcher/Ranks.h"

#include <cstdint>
#include <string>

namespace tessel::run {

/// One training step `step` (0-based) of `microbatches` microbatches, as
/// docs/model-abi.md gives it: zero the gradients, fill each microbatch from
/// `batches` and run the backward entry on it, write 1/M to grad_scale, run
/// the update entry. Returns the mean loss; throws RunError on a kernel
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

/// The forward entry on each microbatch of `step`: the mean loss, no update.
double evalStep(const LoadedModel &model, RankRuntime &rt, BatchSource &batches,
                int64_t step, int64_t microbatches);

} // namespace tessel::run

#endif // TESSEL_LAUNCHER_TRAINING_H
