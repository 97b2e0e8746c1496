//===- matmul.cu - GEMMs through cuBLASLt -----------------------------------===//
//
// PLACEHOLDER: not yet written; every kernel records an error.
//
//===----------------------------------------------------------------------===//

#include "cuda/backend.h"

#include "core/context.h"

using namespace tessel;
using namespace tessel::cuda;

void CudaBackend::matmul(tessel_ctx *ctx, int32_t dtype, const void *a, const void *b,
              void *c, int64_t batch, int64_t m, int64_t n, int64_t k,
              bool transA, bool transB, bool bShared) {
  setError(ctx, "cuda: matmul is not built yet");
}
