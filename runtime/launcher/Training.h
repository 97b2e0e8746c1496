//===- Training.h - The training step and its flags against the .so -------===//

#ifndef TESSEL_RUN_TRAINING_H
#define TESSEL_RUN_TRAINING_H

#include "runtime/launcher/Args.h"
#include "runtime/launcher/Data.h"
#include "runtime/launcher/Model.h"

#include <string>
#include <vector>

namespace tessel::run {

/// The tessel-compile arguments of a .mlir model: compileTrainingArgs, then
/// --mesh and the partitioning flags given (--rules, --sequence-parallel,
/// --local-batchnorm, --bucket-mb).
std::vector<std::string> compileArgs(const Options &options);

/// The training flags given, as tessel-compile arguments ("--lr", "0.01",
/// "--nesterov", ...). A warmup-cosine schedule without --total-steps ends
/// at --steps. --eval compiles the forward entry alone ("--no-train").
std::vector<std::string> compileTrainingArgs(const Options &options);

/// --mesh, when given, must be the mesh `model` (from `file`) was compiled
/// for, and --check-grads needs a model for one device; throws RunError
/// naming both meshes. `compiledHere` as for checkTrainingFlags.
void checkMesh(const Options &options, const ModelDesc &model,
               const std::string &file, bool compiledHere);

/// Each training flag given must equal what `model` (from `file`) was
/// compiled with; throws RunError naming the flag, both values and the
/// tessel-compile command that would give the asked value. `compiledHere`:
/// the launcher compiled the model with these flags itself, so a difference
/// is tessel-compile ignoring one.
void checkTrainingFlags(const Options &options, const ModelDesc &model,
                        const std::string &file, bool compiledHere);

/// One training step `step` (0-based) of `microbatches` microbatches, as
/// docs/model-abi.md gives it: zero the gradients, fill each microbatch from
/// `batches` and run the backward entry on it, write 1/M to grad_scale, run
/// the update entry. Returns the mean loss; throws RunError on a kernel
/// error. `model` must have backward and update entries (desc.trains()).
/// tessel-run's training loop and tessel-bench-step both run this.
double trainStep(const LoadedModel &model, RankRuntime &rt,
                 BatchSource &batches, int64_t step, int64_t microbatches);

/// The forward entry on each microbatch of `step`: the mean loss, no update.
double evalStep(const LoadedModel &model, RankRuntime &rt,
                BatchSource &batches, int64_t step, int64_t microbatches);

} // namespace tessel::run

#endif // TESSEL_RUN_TRAINING_H
