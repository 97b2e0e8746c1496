//===- init.cu - Parameter initialisation -----------------------------------===//
//
// tessel_init_param on the device: element i of the range gets
// initValue(kind, args, seed, nameHash, first + i) (init_math.h, the CPU
// backend's counter-based draws), rounded to the parameter's type as the
// CPU rounds it. Elements are independent, so one grid-stride kernel per
// call; the kind is uniform over the grid, so its switch does not diverge
// (only the truncated normal's rare resamples do).
//
//===----------------------------------------------------------------------===//

#include "cuda/backend.h"
#include "cuda/init_math.h"

#include "core/context.h"

using namespace tessel;
using namespace tessel::cuda;
using namespace tessel::stored;

namespace {

constexpr unsigned kThreads = 256;

template <class T>
__global__ void __launch_bounds__(kThreads)
    initKernel(T *dst, int64_t first, int64_t count, int32_t kind, double a0,
               double a1, uint64_t seed, uint64_t nameHash) {
  int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride)
    dst[i] = fromDouble<T>(
        initValue(kind, a0, a1, seed, nameHash, uint64_t(first + i)));
}

template <class T>
void launchInit(cudaStream_t stream, void *dst, int64_t first, int64_t count,
                int32_t kind, double a0, double a1, uint64_t seed,
                uint64_t nameHash) {
  initKernel<T><<<gridFor(count, kThreads), kThreads, 0, stream>>>(
      static_cast<T *>(dst), first, count, kind, a0, a1, seed, nameHash);
}

} // namespace

void CudaBackend::initParam(tessel_ctx *ctx, void *dst, int32_t dtype,
                            int64_t first, int64_t count, int32_t kind,
                            const double *hostArgs, uint64_t seed,
                            uint64_t nameHash) {
  if (count <= 0)
    return;
  // The front asks for args from TESSEL_INIT_CONSTANT on; constant reads
  // one, the random kinds two.
  double a0 = kind >= TESSEL_INIT_CONSTANT ? hostArgs[0] : 0.0;
  double a1 = kind >= TESSEL_INIT_NORMAL ? hostArgs[1] : 0.0;
  cudaStream_t s = stream();
  stored::visitAny(dtype, [&](auto tag) {
    launchInit<decltype(tag)>(s, dst, first, count, kind, a0, a1, seed,
                              nameHash);
  });
  checkLaunch(ctx, "tessel_init_param");
}
