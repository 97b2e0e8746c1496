//===- init.cu - Parameter initialisation -----------------------------------===//
//
// PLACEHOLDER: not yet written; every kernel records an error.
//
//===----------------------------------------------------------------------===//

#include "cuda/backend.h"

#include "core/context.h"

using namespace tessel;
using namespace tessel::cuda;

void CudaBackend::initParam(tessel_ctx *ctx, void *dst, int32_t dtype, int64_t first,
                 int64_t count, int32_t kind, const double *hostArgs,
                 uint64_t seed, uint64_t nameHash) {
  setError(ctx, "cuda: initParam is not built yet");
}
