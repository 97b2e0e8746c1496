//===- Data.h - Inputs and labels for each step ---------------------------===//

#ifndef TESSEL_RUN_DATA_H
#define TESSEL_RUN_DATA_H

#include "runtime/launcher/Args.h"
#include "runtime/launcher/ModelDescription.h"

#include <memory>

namespace tessel::run {

/// Writes a model's inputs and labels into the arena before each backward
/// or forward call. The model's inputs hold one microbatch of B samples;
/// microbatch m of step s (M per step) is global microbatch index s·M + m,
/// and its sample i global sample (s·M + m)·B + i, so M microbatches of B
/// see exactly the samples one batch of M·B would.
class BatchSource {
public:
  virtual ~BatchSource() = default;
  /// Fills every input and label for global microbatch `index` (0-based);
  /// throws RunError.
  virtual void fill(int64_t index, tessel_ctx *ctx, void *arena) = 0;
  /// Fills every input and label with the global samples first, first + 1,
  /// ... along its batch dimension (a data-parallel rank's block of the
  /// global batch, read without the rest); false when the source draws only
  /// whole microbatches. Throws RunError.
  virtual bool fillSamples(int64_t /*first*/, tessel_ctx * /*ctx*/,
                           void * /*arena*/) {
    return false;
  }
};

/// The batch dimension of a feed: its "batch" axis, else the first; -1 for
/// a scalar (the whole tensor is one sample).
int batchDimOf(const TensorDesc &t);

/// Synthetic data: each sample (a slice along the "batch" axis, else the
/// first dimension) a pure function of (seed, global sample index, tensor
/// name): floats N(0, 1), integers uniform in [0, limit). A classifier (one
/// float input [B, ...], one integer label [B]) gets a learnable task
/// instead of random labels: each label is the class a fixed random linear
/// teacher (from the seed) assigns to the sample's first 16 features.
/// `heldOut` draws other samples than training's (never the same), of the
/// same task: --eval-every's held-out batches.
std::unique_ptr<BatchSource>
makeSyntheticData(const ModelDesc &model, uint64_t seed, bool heldOut = false);

/// Language-model batches from a token file (.bin of `dtype`, or .npy):
/// row r of microbatch index k is window w = k·B + r (wrapping) of
/// tokens[w·S, w·S+S], input its first S tokens, label its last S; with a
/// labels file (`labelsPath` not empty: as long as the token file, of the
/// same kind) the label is that file's element at the same positions, a
/// class or the model's ignore_index.
std::unique_ptr<BatchSource> makeTokenFileData(const ModelDesc &model,
                                               const std::string &path,
                                               const std::string &labelsPath,
                                               TokenDtype dtype);

} // namespace tessel::run

#endif // TESSEL_RUN_DATA_H
