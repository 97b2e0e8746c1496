//===- Safetensors.h - Parameter checkpoints in the safetensors format ----===//

#ifndef TESSEL_RUN_SAFETENSORS_H
#define TESSEL_RUN_SAFETENSORS_H

#include "Model.h"

#include <map>
#include <string>

namespace tessel::run {

/// Writes every parameter of `model` (read from `arena`) to `path` as
/// safetensors, and with `withStates` every optimizer state tensor after
/// them: first to `path`.tmp, then renamed over `path`, so a crash or an
/// error never leaves a half-written checkpoint behind. `metadata` goes to
/// the header's "__metadata__" (a training run writes "tessel.step").
void writeSafetensorsAtomically(
    const std::string &path, const ModelDesc &model, tessel_ctx *ctx,
    const void *arena, const std::map<std::string, std::string> &metadata,
    bool withStates = false);

/// What a checkpoint brought besides the parameters.
struct LoadedCheckpoint {
  /// Parameters only (no optimizer state, no "tessel.step"): a training run
  /// starts its optimizer from zero at step 0.
  bool paramsOnly = true;
  int64_t step = 0; // "tessel.step": optimizer updates done so far
};

/// Reads every parameter of `model` from `path` into `arena`. The file must
/// hold exactly the model's parameters with their dtypes and shapes, plus
/// optionally optimizer states ("<param>.<suffix>"). With `training`, those
/// states must be exactly the model's optimizer's (or absent: parameters
/// only) and are loaded too; otherwise they are ignored. Everything is
/// validated before the first byte of the arena is written.
LoadedCheckpoint loadSafetensors(const std::string &path,
                                 const ModelDesc &model, tessel_ctx *ctx,
                                 void *arena, bool training = false);

} // namespace tessel::run

#endif // TESSEL_RUN_SAFETENSORS_H
