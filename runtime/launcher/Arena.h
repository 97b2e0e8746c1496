//===- Arena.h - A model's tensors in a rank's arena ----------------------===//
//
// The arena is device memory on a device backend, so the launcher never
// reads or writes it directly: every access here (and everywhere in the
// launcher) is a runtime call — tessel_init_param, tessel_zero,
// tessel_copy_to_host — on the address of a tensor in it.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_LAUNCHER_ARENA_H
#define TESSEL_LAUNCHER_ARENA_H

#include "runtime/launcher/ModelDescription.h"
#include "tessel/runtime.h"

#include <cstdint>
#include <vector>

namespace tessel::run {

/// Initialises every parameter of `model` in `arena` from `seed`, and
/// every master copy (TensorDesc::masterOf) with its parameter's f32
/// values: the parameter is then those values rounded (tessel_cast), as the
/// update keeps it. On a mesh, pass the rank's `coordinates`: each split
/// parameter (or master chunk) gets its block of the values one device
/// would have (tessel_init_param draws element i from (seed, name, global
/// index i)).
void initParams(const ModelDesc &model, tessel_ctx *ctx, void *arena,
                uint64_t seed, const std::vector<int64_t> &coordinates = {});

/// Sets every byte of the gradient accumulators to zero (the "grads"
/// region, or each grad tensor when the description has no such region).
void zeroGrads(const ModelDesc &model, tessel_ctx *ctx, void *arena);

/// Sets every optimizer state tensor to zero (a fresh optimizer), except
/// the master copies, which hold their parameters' values: call it before
/// or after initParams or a checkpoint's load alike.
void zeroStates(const ModelDesc &model, tessel_ctx *ctx, void *arena);

/// Writes 1 / `microbatches` to the model's grad_scale, in its dtype (f32,
/// or f64 in an f64 model).
void writeGradScale(const ModelDesc &model, tessel_ctx *ctx, void *arena,
                    int64_t microbatches);

/// What the arena of `model` holds, by region, for an out-of-memory error:
/// "params 1750016, grads 1750016, optimizer states 3500032, activations
/// and scratch 12596224 bytes, ...".
std::string describeArena(const ModelDesc &model);

/// The scalar loss (f32, f64, bf16 or f16) after a step.
double readLoss(const TensorDesc &loss, tessel_ctx *ctx, const void *arena);
/// The loss held in `host` (its bytes, copied to the host), widened.
double decodeLoss(const TensorDesc &loss, const void *host);

} // namespace tessel::run

#endif // TESSEL_LAUNCHER_ARENA_H
