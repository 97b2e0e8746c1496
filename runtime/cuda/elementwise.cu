//===- elementwise.cu - Elementwise kernels and their gradients -------------===//
//
// PLACEHOLDER: not yet written; every kernel records an error.
//
//===----------------------------------------------------------------------===//

#include "cuda/backend.h"

#include "core/context.h"

using namespace tessel;
using namespace tessel::cuda;

void CudaBackend::binary(tessel_ctx *ctx, int32_t op, int32_t dtype, const void *a,
              const void *b, void *out, int64_t n) {
  setError(ctx, "cuda: binary is not built yet");
}

void CudaBackend::unary(tessel_ctx *ctx, int32_t op, int32_t dtype, const void *x, void *y,
             int64_t n) {
  setError(ctx, "cuda: unary is not built yet");
}

void CudaBackend::cast(tessel_ctx *ctx, int32_t srcDtype, int32_t dstDtype, const void *x,
            void *y, int64_t n) {
  setError(ctx, "cuda: cast is not built yet");
}

void CudaBackend::dropout(tessel_ctx *ctx, int32_t dtype, const void *x, void *y,
               int64_t n, double rate, uint64_t seed, uint64_t step,
               int64_t first, uint64_t stream) {
  setError(ctx, "cuda: dropout is not built yet");
}

void CudaBackend::dropoutBlock(tessel_ctx *ctx, int32_t dtype, const void *x, void *y,
                    int32_t rank, const int64_t *hostShape,
                    const int64_t *hostStrides, double rate, uint64_t seed,
                    uint64_t step, int64_t first, uint64_t stream) {
  setError(ctx, "cuda: dropoutBlock is not built yet");
}

void CudaBackend::unaryGrad(tessel_ctx *ctx, int32_t op, int32_t dtype, const void *x,
                 const void *dy, void *dx, int64_t n) {
  setError(ctx, "cuda: unaryGrad is not built yet");
}
