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

#include <algorithm>
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

/// Writes 1 / `divisor` (a StepLoss's divisor(): M, or the step's count)
/// to the model's grad_scale, divided in its dtype (f32, or f64 in an f64
/// model) as a captured step divides on the device.
void writeGradScale(const ModelDesc &model, tessel_ctx *ctx, void *arena,
                    double divisor);

/// What the arena of `model` holds, by region, for an out-of-memory error:
/// "params 1750016, grads 1750016, optimizer states 3500032, activations
/// and scratch 12596224 bytes, ...".
std::string describeArena(const ModelDesc &model);

/// The loss (f32, f64, bf16 or f16) held in `host` (its bytes, copied to
/// the host), widened.
double decodeLoss(const TensorDesc &loss, const void *host);

/// A step's loss over its microbatches. Each adds its loss and what that
/// loss is a sum over: its loss_count where the model returns one (its
/// labelled positions), else 1 (a mean loss counts as one microbatch).
/// The step's loss is the sum over the sum of the counts, and the
/// gradients, summed over the microbatches, are scaled by one over it:
/// the mean of the microbatches' means for a plain loss, one mean over all
/// the step's labelled positions for a counted one (max(count, 1): a step
/// with none has loss 0 and no gradient).
struct StepLoss {
  double sum = 0;
  double count = 0;

  /// Adds the microbatch whose loss (and count) `arena` holds.
  void add(const ModelDesc &model, tessel_ctx *ctx, const void *arena);
  /// Adds the microbatch whose loss and count bytes lie on the host
  /// (`countHost` read only where the model has a loss_count).
  void add(const ModelDesc &model, const void *lossHost, const void *countHost);
  StepLoss &operator+=(const StepLoss &other) {
    sum += other.sum;
    count += other.count;
    return *this;
  }
  double divisor() const { return std::max(count, 1.0); }
  double mean() const { return sum / divisor(); }
};

} // namespace tessel::run

#endif // TESSEL_LAUNCHER_ARENA_H
