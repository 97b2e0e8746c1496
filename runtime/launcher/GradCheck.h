//===- GradCheck.h - The backward entry against finite differences --------===//

#ifndef TESSEL_RUN_GRADCHECK_H
#define TESSEL_RUN_GRADCHECK_H

#include "runtime/launcher/Data.h"
#include "runtime/launcher/ModelLibrary.h"

#include <cstdio>
#include <functional>
#include <optional>
#include <string>

namespace tessel::run {

class PipelineRank;

/// What --check-grads checks and how.
struct GradCheckSettings {
  /// Seeds the sampled elements' choice.
  uint64_t seed = 0;
  /// The relative error allowed (default: by the parameter's dtype).
  std::optional<double> tolerance;
  /// Name patterns (NamePattern.h): only the trainable parameters matching
  /// one are checked; "" checks every one.
  std::string params;
};

/// As torch.autograd.gradcheck, per trainable parameter (those matching
/// `settings.params`; none matching is an error): the gradient of
/// one backward call (grads zeroed first) on the batch of `microbatch`
/// against central finite differences of the forward entry's loss on up to
/// 32 sampled elements (the largest |gradient| among them). An element
/// whose finite differences do not settle as the step shrinks (a ReLU or
/// max kink within the step: the loss is not differentiable there) is
/// passed over for the next candidate, up to 128 tried. Prints
///   grad-check <name>: max abs err A, max rel err R (n elements[, k passed
///   over: finite differences did not settle])
/// to `out` per parameter, the relative error being |a − f| / max(|a|, |f|,
/// 1e-3·s) with s the largest |gradient| element over every trainable
/// parameter, checked or not (an all-zero gradient, e.g. a key bias under
/// softmax, is judged against the model's scale, not its own). Throws
/// RunError when one exceeds `settings.tolerance` (default 1e-6 for f64
/// parameters, 2e-2 for f32), or when fewer than half of a parameter's
/// samples could be compared (inconclusive), and refuses a model with a
/// bf16 or f16 trainable parameter (a bf16 run's; a perturbation would
/// round). The gradients are read in their own dtype. Parameters are left
/// as they were.
///
/// On a dp/tp mesh (ZeRO included) every rank calls it with its
/// `coordinates` and its block of the batch: the reduced gradients are
/// gathered whole, the loss is the mean over the ranks, and a perturbed
/// element is written by every rank holding it, so the check is the one
/// device's, of the partitioned program. Only the rank given an `out`
/// prints and throws. A pipeline goes to checkPipelineGradients.
void checkGradients(const LoadedModel &model, tessel_ctx *ctx, void *arena,
                    BatchSource &batches, int64_t step, int64_t microbatch,
                    const GradCheckSettings &settings, std::FILE *out,
                    const std::vector<int64_t> &coordinates = {});

/// checkGradients for a pipeline (any schedule, with dp/tp/ZeRO inside the
/// stages), every rank of the mesh calling it with its stages in
/// `pipelined`: the gradients are those of the step's loss (the mean over
/// the compiled microbatches of `step`), the sum the schedule accumulates
/// (reduced over dp, tied copies summed) over M; the loss is the forward
/// of every microbatch through the stages (evalStep), averaged over the
/// ranks; a perturbed element is written into every stage holding it (a
/// tied parameter's copies, a stacked parameter's layer on its stage).
void checkPipelineGradients(const LoadedModel &model, tessel_ctx *ctx,
                            PipelineRank &pipelined, int64_t step,
                            const GradCheckSettings &settings, std::FILE *out,
                            const std::vector<int64_t> &coordinates);

/// The derivative of f at 0 by the four-point central stencil
///   D(h) = (8 (f(h) − f(−h)) − (f(2h) − f(−2h))) / 12h   (error O(h⁴)),
/// halving h while D(h) and D(h/2) disagree by more than both the rounding
/// noise of D(h/2) (≈ noise / (h/2)) and `resolution`: a step too large for
/// the function's curvature is halved, one small enough is not shrunk into
/// the noise. Agreement within `resolution` bounds D(h/2)'s error by about
/// that much (by resolution / 15 where truncation dominates, D(h) − D(h/2)
/// being 15/16 of D(h)'s error), so a resolution below the comparison's
/// tolerance settles an estimate whose rounding the 2-ulp noise model
/// understates (GPT's f64 loss rounds ~10 times coarser). Each halving costs
/// two more evaluations; after `maxHalvings` without agreement it gives up.
///
/// Estimates that never settle mean f is not smooth at the step's scale: a
/// ReLU or max kink within 2h, whose one-sided slopes the stencil averages
/// (upstream of a wide ReLU layer, as fc1.weight is in
/// examples/bn_mlp.mlir, kinks lie every ~1e-4 of the weight), or rounding
/// beyond the tolerance. No step there measures the derivative: nullopt.
/// The backward plays no part in this, so passing over such an element
/// cannot hide a wrong gradient.
std::optional<double> adaptiveDifference(const std::function<double(double)> &f,
                                         double h, double noise,
                                         double resolution,
                                         int maxHalvings = 5);

} // namespace tessel::run

#endif // TESSEL_RUN_GRADCHECK_H
