//===- rope.cu - The rotary position embedding on the GPU -----------------===//
//
// tessel_rope: a thread per (batch entry, position, pair), which computes
// the pair's turn once (core/rope.h, in f64 as the CPU does) and rotates
// that pair in every head. Neighbouring threads take neighbouring pairs, so
// a warp reads and writes contiguous halves (or, interleaved, contiguous
// pairs) of a row. A partial rope turns the first rotaryDim elements of
// each row; the tail is copied by threads of its own, (row, element).
//
//===----------------------------------------------------------------------===//

#include "cuda/backend.h"
#include "cuda/elementwise_math.h"

#include "core/rope.h"

#include <cstdint>

using namespace tessel;
using namespace tessel::cuda;

namespace {

constexpr int kRopeBlock = 256;
constexpr int64_t kMaxGrid = int64_t(1) << 20;

template <class T>
__global__ void __launch_bounds__(kRopeBlock)
    ropeKernel(const T *x, T *y, int64_t outer, int64_t positions,
               int64_t heads, int64_t headDim, int64_t rotaryDim, double theta,
               bool interleaved, bool inverse, rope::Scaling scaling,
               int64_t firstPosition) {
  using C = typename Elem<T>::Compute;
  const int64_t pairs = rotaryDim / 2;
  const int64_t work = outer * positions * pairs;
  for (int64_t w = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; w < work;
       w += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = w % pairs, row = w / pairs; // row: o · positions + p
    const int64_t p = firstPosition + row % positions;
    const rope::Turn<C> turn =
        rope::turnOf<C>(p, i, rotaryDim, theta, scaling, inverse);
    const int64_t ia = rope::firstOf(i, interleaved);
    const int64_t ib = rope::secondOf(i, rotaryDim, interleaved);
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t base = (row * heads + h) * headDim;
      const C a = Elem<T>::load(x[base + ia]), b = Elem<T>::load(x[base + ib]);
      y[base + ia] = Elem<T>::store(rope::rotatedFirst(a, b, turn));
      y[base + ib] = Elem<T>::store(rope::rotatedSecond(a, b, turn));
    }
  }
}

/// The elements past rotaryDim of each of `rows` rows, copied (a partial
/// rope out of place).
template <class T>
__global__ void __launch_bounds__(kRopeBlock)
    ropeTailKernel(const T *x, T *y, int64_t rows, int64_t headDim,
                   int64_t rotaryDim) {
  const int64_t tail = headDim - rotaryDim, work = rows * tail;
  for (int64_t w = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; w < work;
       w += int64_t(gridDim.x) * blockDim.x) {
    const int64_t at = (w / tail) * headDim + rotaryDim + w % tail;
    y[at] = x[at];
  }
}

} // namespace

void CudaBackend::rope(tessel_ctx *ctx, int32_t dtype, const void *x, void *y,
                       int64_t outer, int64_t positions, int64_t heads,
                       int64_t headDim, int64_t rotaryDim, double theta,
                       bool interleaved, bool inverse,
                       const rope::Scaling &scaling, int64_t firstPosition) {
  const int64_t work = outer * positions * (rotaryDim / 2);
  if (work == 0 || heads == 0)
    return;
  const int64_t rows = outer * positions * heads;
  auto gridFor = [](int64_t threads) {
    int64_t blocks = (threads + kRopeBlock - 1) / kRopeBlock;
    return unsigned(blocks > kMaxGrid ? kMaxGrid : blocks);
  };
  visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    ropeKernel<T><<<gridFor(work), kRopeBlock, 0, stream()>>>(
        static_cast<const T *>(x), static_cast<T *>(y), outer, positions,
        heads, headDim, rotaryDim, theta, interleaved, inverse, scaling,
        firstPosition);
    if (x != y && rotaryDim < headDim)
      ropeTailKernel<T>
          <<<gridFor(rows * (headDim - rotaryDim)), kRopeBlock, 0, stream()>>>(
              static_cast<const T *>(x), static_cast<T *>(y), rows, headDim,
              rotaryDim);
  });
  checkLaunch(ctx, "tessel_rope");
}
