//===- GradCheck.h - The backward entry against finite differences --------===//

#ifndef TESSEL_RUN_GRADCHECK_H
#define TESSEL_RUN_GRADCHECK_H

#include "runtime/launcher/Data.h"
#include "runtime/launcher/ModelLibrary.h"

#include <cstdio>
#include <optional>

namespace tessel::run {

/// As torch.autograd.gradcheck, per trainable parameter: the gradient of
/// one backward call (grads zeroed first) on the batch of `microbatch`
/// against central finite differences of the forward entry's loss on up to
/// 32 sampled elements (the largest |gradient| among them). Prints
///   grad-check <name>: max abs err A, max rel err R (n elements)
/// to `out` per parameter, the relative error being |a − f| / max(|a|, |f|,
/// 1e-3·s) with s the largest |gradient| element over every parameter (an
/// all-zero gradient, e.g. a key bias under softmax, is judged against the
/// model's scale, not its own). Throws RunError when
/// one exceeds `tolerance` (default 1e-6 for f64 parameters, 2e-2 for
/// f32), and refuses a model with a bf16 or f16 trainable parameter (a bf16
/// run's; a perturbation would round). The gradients are read in their own
/// dtype. Parameters are left as they were.
///
/// On a dp/tp mesh (ZeRO included) every rank calls it with its
/// `coordinates` and its block of the batch: the reduced gradients are
/// gathered whole, the loss is the mean over the ranks, and a perturbed
/// element is written by every rank holding it, so the check is the one
/// device's, of the partitioned program. Only the rank given an `out`
/// prints and throws. A pipeline is refused.
void checkGradients(const LoadedModel &model, tessel_ctx *ctx, void *arena,
                    BatchSource &batches, int64_t step, int64_t microbatch,
                    uint64_t seed, std::optional<double> tolerance,
                    std::FILE *out,
                    const std::vector<int64_t> &coordinates = {});

} // namespace tessel::run

#endif // TESSEL_RUN_GRADCHECK_H
