//===- optimizer.cu - Gradient norm, clipping and the fused optimizer update ===//
//
// PLACEHOLDER: not yet written; every kernel records an error.
//
//===----------------------------------------------------------------------===//

#include "cuda/backend.h"

#include "core/context.h"

using namespace tessel;
using namespace tessel::cuda;

void CudaBackend::sumSquares(tessel_ctx *ctx, int32_t dtype, const void *x, int64_t n,
                  void *sum) {
  setError(ctx, "cuda: sumSquares is not built yet");
}

void CudaBackend::clipScale(tessel_ctx *ctx, const void *sumSquares, double maxNorm,
                 const void *gradScale, void *scale) {
  setError(ctx, "cuda: clipScale is not built yet");
}

void CudaBackend::optimizerUpdate(tessel_ctx *ctx, const tessel_optimizer &opt,
                       int32_t dtype, void *param, const void *grad,
                       const void *gradScale, void *state0, void *state1,
                       int64_t n, int64_t step, double lr) {
  setError(ctx, "cuda: optimizerUpdate is not built yet");
}
