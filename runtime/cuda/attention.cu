//===- attention.cu - Flash-style attention, forward and backward -----------===//
//
// PLACEHOLDER: not yet written; every kernel records an error.
//
//===----------------------------------------------------------------------===//

#include "cuda/backend.h"

#include "core/context.h"

using namespace tessel;
using namespace tessel::cuda;

void CudaBackend::attention(tessel_ctx *ctx, int32_t dtype, const void *q, const void *k,
                 const void *v, void *out, int64_t batch, int64_t seq,
                 int64_t kvSeq, int64_t heads, int64_t kvHeads, int64_t headDim,
                 int64_t valueDim, double scale, bool causal) {
  setError(ctx, "cuda: attention is not built yet");
}

void CudaBackend::attentionGrad(tessel_ctx *ctx, int32_t dtype, const void *q,
                     const void *k, const void *v, const void *dout, void *dq,
                     void *dk, void *dv, int64_t batch, int64_t seq,
                     int64_t kvSeq, int64_t heads, int64_t kvHeads,
                     int64_t headDim, int64_t valueDim, double scale,
                     bool causal) {
  setError(ctx, "cuda: attentionGrad is not built yet");
}
