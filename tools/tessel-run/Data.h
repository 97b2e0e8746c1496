//===- Data.h - Inputs and labels for each step ---------------------------===//

#ifndef TESSEL_RUN_DATA_H
#define TESSEL_RUN_DATA_H

#include "Args.h"
#include "Model.h"

#include <memory>

namespace tessel::run {

/// Writes a model's inputs and labels into the arena before each step.
class BatchSource {
public:
  virtual ~BatchSource() = default;
  /// Fills every input and label for `step` (0-based); throws RunError.
  virtual void fill(int64_t step, tessel_ctx *ctx, void *arena) = 0;
};

/// Synthetic data, a pure function of (seed, step, tensor name): floats
/// N(0, 1), integers uniform in [0, limit).
std::unique_ptr<BatchSource> makeSyntheticData(const ModelDesc &model,
                                               uint64_t seed);

/// Language-model batches from a token file (.bin of `dtype`, or .npy):
/// row r of step s is window w = s·B + r (wrapping) of tokens[w·S, w·S+S],
/// input its first S tokens, label its last S.
std::unique_ptr<BatchSource> makeTokenFileData(const ModelDesc &model,
                                               const std::string &path,
                                               TokenDtype dtype);

} // namespace tessel::run

#endif // TESSEL_RUN_DATA_H
