//===- norm.cu - Softmax and normalisations, forward and backward -----------===//
//
// PLACEHOLDER: not yet written; every kernel records an error.
//
//===----------------------------------------------------------------------===//

#include "cuda/backend.h"

#include "core/context.h"

using namespace tessel;
using namespace tessel::cuda;

void CudaBackend::softmax(tessel_ctx *ctx, int32_t dtype, const void *x, void *y,
               int64_t outer, int64_t dim, int64_t inner) {
  setError(ctx, "cuda: softmax is not built yet");
}

void CudaBackend::layerNorm(tessel_ctx *ctx, int32_t dtype, const void *x,
                 const void *gamma, const void *beta, void *y, int64_t rows,
                 int64_t cols, double eps, bool rms) {
  setError(ctx, "cuda: layerNorm is not built yet");
}

void CudaBackend::batchNorm(tessel_ctx *ctx, int32_t dtype, const void *x,
                 const void *gamma, const void *beta, void *y, int64_t outer,
                 int64_t channels, int64_t inner, double eps) {
  setError(ctx, "cuda: batchNorm is not built yet");
}

void CudaBackend::softmaxGrad(tessel_ctx *ctx, int32_t dtype, const void *y,
                   const void *dy, void *dx, int64_t outer, int64_t dim,
                   int64_t inner) {
  setError(ctx, "cuda: softmaxGrad is not built yet");
}

void CudaBackend::layerNormGrad(tessel_ctx *ctx, int32_t dtype, const void *x,
                     const void *gamma, const void *dy, void *dx, void *dgamma,
                     void *dbeta, int64_t rows, int64_t cols, double eps,
                     bool rms) {
  setError(ctx, "cuda: layerNormGrad is not built yet");
}

void CudaBackend::batchNormGrad(tessel_ctx *ctx, int32_t dtype, const void *x,
                     const void *gamma, const void *dy, void *dx, void *dgamma,
                     void *dbeta, int64_t outer, int64_t channels,
                     int64_t inner, double eps) {
  setError(ctx, "cuda: batchNormGrad is not built yet");
}
