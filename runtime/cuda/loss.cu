//===- loss.cu - Cross-entropy and the vocab-parallel loss pieces -----------===//
//
// PLACEHOLDER: not yet written; every kernel records an error.
//
//===----------------------------------------------------------------------===//

#include "cuda/backend.h"

#include "core/context.h"

using namespace tessel;
using namespace tessel::cuda;

void CudaBackend::crossEntropy(tessel_ctx *ctx, int32_t dtype, int32_t labelDtype,
                    const void *logits, const void *labels, void *out,
                    int64_t rows, int64_t classes, int32_t reduction) {
  setError(ctx, "cuda: crossEntropy is not built yet");
}

void CudaBackend::crossEntropyGrad(tessel_ctx *ctx, int32_t dtype, int32_t labelDtype,
                        const void *logits, const void *labels,
                        const void *dloss, void *dlogits, int64_t rows,
                        int64_t classes, int32_t reduction) {
  setError(ctx, "cuda: crossEntropyGrad is not built yet");
}

void CudaBackend::labelLogit(tessel_ctx *ctx, int32_t dtype, int32_t labelDtype,
                  const void *logits, const void *labels, void *out,
                  int64_t rows, int64_t classes, int64_t classOffset,
                  int64_t totalClasses) {
  setError(ctx, "cuda: labelLogit is not built yet");
}

void CudaBackend::subLabel(tessel_ctx *ctx, int32_t dtype, int32_t labelDtype,
                const void *x, const void *labels, const void *values,
                void *out, int64_t rows, int64_t classes, int64_t classOffset,
                int64_t totalClasses) {
  setError(ctx, "cuda: subLabel is not built yet");
}
