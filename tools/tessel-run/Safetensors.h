//===- Safetensors.h - Parameter checkpoints in the safetensors format ----===//

#ifndef TESSEL_RUN_SAFETENSORS_H
#define TESSEL_RUN_SAFETENSORS_H

#include "Model.h"

#include <map>
#include <string>

namespace tessel::run {

/// Writes every parameter of `model` (read from `arena`) to `path` as
/// safetensors: first to `path`.tmp, then renamed over `path`, so a crash or
/// an error never leaves a half-written checkpoint behind. `metadata` goes to
/// the header's "__metadata__".
void writeSafetensorsAtomically(
    const std::string &path, const ModelDesc &model, tessel_ctx *ctx,
    const void *arena, const std::map<std::string, std::string> &metadata);

/// Reads every parameter of `model` from `path` into `arena`. The file must
/// hold exactly the model's parameters with their dtypes and shapes; it is
/// validated completely before the first byte of the arena is written.
void loadSafetensors(const std::string &path, const ModelDesc &model,
                     tessel_ctx *ctx, void *arena);

} // namespace tessel::run

#endif // TESSEL_RUN_SAFETENSORS_H
