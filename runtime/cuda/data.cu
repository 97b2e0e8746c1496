//===- data.cu - Strided copies, reductions, embeddings ---------------------===//
//
// PLACEHOLDER: not yet written; every kernel records an error.
//
//===----------------------------------------------------------------------===//

#include "cuda/backend.h"

#include "core/context.h"

using namespace tessel;
using namespace tessel::cuda;

void CudaBackend::stridedCopy(tessel_ctx *ctx, int32_t dtype, const void *in, void *out,
                   int32_t rank, const int64_t *hostShape,
                   const int64_t *hostInStrides,
                   const int64_t *hostOutStrides) {
  setError(ctx, "cuda: stridedCopy is not built yet");
}

void CudaBackend::reduce(tessel_ctx *ctx, int32_t kind, int32_t dtype, const void *in,
              void *out, int32_t rank, const int64_t *hostShape,
              uint64_t reduceMask) {
  setError(ctx, "cuda: reduce is not built yet");
}

void CudaBackend::embedding(tessel_ctx *ctx, int32_t dtype, int32_t idsDtype,
                 const void *table, const void *ids, void *out, int64_t numIds,
                 int64_t rows, int64_t hidden, int64_t rowOffset,
                 int64_t vocab) {
  setError(ctx, "cuda: embedding is not built yet");
}

void CudaBackend::embeddingGrad(tessel_ctx *ctx, int32_t dtype, int32_t idsDtype,
                     const void *ids, const void *dout, void *dtable,
                     int64_t numIds, int64_t rows, int64_t hidden,
                     int64_t rowOffset, int64_t vocab) {
  setError(ctx, "cuda: embeddingGrad is not built yet");
}
