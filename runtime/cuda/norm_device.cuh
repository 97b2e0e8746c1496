//===- norm_device.cuh - Device blocks of the norms -----------*- CUDA -*-===//
//
// Private to norm.cu and batch_norm.cu (its includers), kept apart so that
// each file stays readable: the 128-bit slot loads and stores, the fixed-order warp
// and block reductions, how a row is split over the threads that reduce it
// (RowGrid, forSlots, RowPart), and the two-stage deterministic column and
// channel sums (channelSums). The arithmetic they serve is norm_math.h's.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CUDA_NORM_DEVICE_CUH
#define TESSEL_RUNTIME_CUDA_NORM_DEVICE_CUH

#include "cuda/backend.h"
#include "cuda/norm_math.h"

#include <cstdint>
#include <limits>

namespace tessel {
namespace cuda {
namespace norm_detail {

constexpr int kWarp = 32;
/// Threads of a block of the warp-per-row kernels (8 rows a block).
constexpr int kWarpRowsBlock = 256;
/// The chunked column sums: 32 columns by 8 row lanes.
constexpr int kSumRowLanes = 8;
constexpr int kSlabThreads = 256;
constexpr unsigned kMaxGrid = 1u << 20;

template <class T> using Compute = typename Elem<T>::Compute;
template <class C> __device__ __forceinline__ C negInf() {
  return -std::numeric_limits<C>::infinity();
}

inline unsigned gridOf(int64_t items, int64_t perBlock) {
  int64_t blocks = (items + perBlock - 1) / perBlock;
  return unsigned(blocks < 1 ? 1 : blocks > kMaxGrid ? kMaxGrid : blocks);
}

//===--- Loads, stores, reductions ----------------------------------------===//

/// kVec elements as one 128-bit (or narrower, for kVec == 1) access.
template <class T, int kVec> struct alignas(sizeof(T) * kVec) Pack {
  T v[kVec];
};

/// Elements [j0, j0 + kVec) of a row, 0 past cols.
template <int kVec, class T, class C>
__device__ __forceinline__ void loadSlot(const T *row, int64_t j0, int64_t cols,
                                         C *out) {
  if (kVec > 1 && j0 + kVec <= cols) {
    Pack<T, kVec> p = *reinterpret_cast<const Pack<T, kVec> *>(row + j0);
#pragma unroll
    for (int v = 0; v < kVec; ++v)
      out[v] = C(Elem<T>::load(p.v[v]));
  } else {
#pragma unroll
    for (int v = 0; v < kVec; ++v)
      out[v] = j0 + v < cols ? C(Elem<T>::load(row[j0 + v])) : C(0);
  }
}

template <int kVec, class T, class C>
__device__ __forceinline__ void storeSlot(T *row, int64_t j0, int64_t cols,
                                          const C *in) {
  if (kVec > 1 && j0 + kVec <= cols) {
    Pack<T, kVec> p;
#pragma unroll
    for (int v = 0; v < kVec; ++v)
      p.v[v] = Elem<T>::store(in[v]);
    *reinterpret_cast<Pack<T, kVec> *>(row + j0) = p;
  } else {
#pragma unroll
    for (int v = 0; v < kVec; ++v)
      if (j0 + v < cols)
        row[j0 + v] = Elem<T>::store(in[v]);
  }
}

struct SumOp {
  template <class C> __device__ C operator()(C a, C b) const { return a + b; }
};
/// std::max's order: a NaN never wins (the sums carry it instead).
struct MaxOp {
  template <class C> __device__ C operator()(C a, C b) const {
    return a < b ? b : a;
  }
};

/// Reduces v over the kThreads threads of a row (a warp, or the block):
/// a butterfly in each warp, then over the warps' results. Every thread
/// gets the same value; the order is fixed, so the result is reproducible.
template <int kThreads, class C, class Op>
__device__ __forceinline__ C groupReduce(C v, Op op, C identity) {
#pragma unroll
  for (int o = kWarp / 2; o > 0; o >>= 1)
    v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  if constexpr (kThreads > kWarp) {
    __shared__ C parts[kWarp];
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    __syncthreads(); // the previous reduction has read parts
    if (lane == 0)
      parts[warp] = v;
    __syncthreads();
    v = lane < kThreads / kWarp ? parts[lane] : identity;
#pragma unroll
    for (int o = kWarp / 2; o > 0; o >>= 1)
      v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  }
  return v;
}

template <int kThreads, class C> __device__ __forceinline__ C groupSum(C v) {
  return groupReduce<kThreads>(v, SumOp(), C(0));
}

//===--- Rows ---------------------------------------------------------------===//

/// Which rows a thread works on: kThreads == 32, a warp per row and 8 rows
/// a block; else the block is the row.
template <int kThreads> struct RowGrid {
  static constexpr int kBlock = kThreads == kWarp ? kWarpRowsBlock : kThreads;
  static constexpr int kRowsPerBlock = kBlock / kThreads;
  /// The forward kernels ask for two blocks of 512 threads an SM (64
  /// registers a thread): without it ptxas trades a spill for occupancy.
  /// The gradients, which cache two rows, take up to 128.
  static constexpr int kMinBlocks = kThreads == kWarp ? 1 : 2;
  __device__ static int thread() { return threadIdx.x % kThreads; }
  __device__ static int64_t first() {
    return int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kThreads;
  }
  __device__ static int64_t stride() {
    return int64_t(gridDim.x) * kRowsPerBlock;
  }
};

/// Calls f(k, j0) for each slot k of thread t that starts inside the row
/// (kSlots == 0: the row is streamed, every slot reported as k = 0).
template <int kThreads, int kSlots, int kVec, class F>
__device__ __forceinline__ void forSlots(int64_t cols, int t, F f) {
  if constexpr (kSlots > 0) {
    // Cached rows are short: the slots' offsets fit 32 bits.
    const int first = int(slotStart(t, 0, kThreads, kVec));
    const int left = int(cols) - first;
#pragma unroll
    for (int k = 0; k < kSlots; ++k)
      if (k * kThreads * kVec < left)
        f(k, int64_t(first + k * kThreads * kVec));
  } else {
    for (int64_t j0 = slotStart(t, 0, kThreads, kVec); j0 < cols;
         j0 += int64_t(kThreads) * kVec)
      f(0, j0);
  }
}

/// A thread's part of a row, in registers; with kSlots == 0 one slot,
/// loaded again on every use.
template <class T, int kThreads, int kSlots, int kVec> struct RowPart {
  using C = Compute<T>;
  C v[(kSlots > 0 ? kSlots : 1) * kVec];

  __device__ void fill(const T *row, int64_t cols, int t) {
    if constexpr (kSlots > 0)
      forSlots<kThreads, kSlots, kVec>(cols, t, [&](int k, int64_t j0) {
        loadSlot<kVec>(row, j0, cols, v + k * kVec);
      });
  }
  __device__ const C *get(int k, const T *row, int64_t j0, int64_t cols) {
    if constexpr (kSlots == 0)
      loadSlot<kVec>(row, j0, cols, v);
    return v + k * kVec;
  }
};

//===--- Deterministic column and channel sums ----------------------------===//
//
// A view [outer, channels, inner]; per channel c, two sums (a, b) of the
// terms F adds for each of its outer·inner elements: F(idx, o, c, a, b)
// with idx the element's flat index. Stage one writes partial sums of
// fixed chunks to partials[(chunk·channels + c)·2 + {0, 1}], stage two adds
// each channel's chunks in order and hands (c, a, b) to a finisher.

/// inner == 1 ([rows, cols]): 32 columns a block, 8 row lanes each taking
/// every 8th row of the chunk, the lanes added in order.
template <class F>
__global__ void __launch_bounds__(kWarp *kSumRowLanes)
    columnPartialsKernel(F f, int64_t rows, int64_t cols, int64_t rowsPerChunk,
                         double *partials) {
  __shared__ double sa[kSumRowLanes][kWarp], sb[kSumRowLanes][kWarp];
  const int64_t chunk = blockIdx.y;
  const int64_t r0 = chunk * rowsPerChunk;
  const int64_t r1 = r0 + rowsPerChunk < rows ? r0 + rowsPerChunk : rows;
  for (int64_t tile = blockIdx.x; tile * kWarp < cols; tile += gridDim.x) {
    const int64_t c = tile * kWarp + threadIdx.x;
    double a = 0.0, b = 0.0;
    if (c < cols)
      for (int64_t r = r0 + threadIdx.y; r < r1; r += kSumRowLanes)
        f(r * cols + c, r, c, a, b);
    sa[threadIdx.y][threadIdx.x] = a;
    sb[threadIdx.y][threadIdx.x] = b;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
      for (int l = 1; l < kSumRowLanes; ++l) {
        a += sa[l][threadIdx.x];
        b += sb[l][threadIdx.x];
      }
      partials[(chunk * cols + c) * 2] = a;
      partials[(chunk * cols + c) * 2 + 1] = b;
    }
    __syncthreads();
  }
}

/// inner > 1: a block per (channel, chunk of its outer·inner elements in
/// (o, i) order); consecutive threads read consecutive i.
template <class F>
__global__ void __launch_bounds__(kSlabThreads)
    slabPartialsKernel(F f, int64_t channels, int64_t inner, int64_t count,
                       int64_t perChunk, double *partials) {
  const int64_t chunk = blockIdx.y;
  const int64_t n0 = chunk * perChunk;
  const int64_t n1 = n0 + perChunk < count ? n0 + perChunk : count;
  for (int64_t c = blockIdx.x; c < channels; c += gridDim.x) {
    double a = 0.0, b = 0.0;
    for (int64_t n = n0 + threadIdx.x; n < n1; n += kSlabThreads) {
      int64_t o = n / inner;
      f((o * channels + c) * inner + (n - o * inner), o, c, a, b);
    }
    a = groupSum<kSlabThreads>(a);
    b = groupSum<kSlabThreads>(b);
    if (threadIdx.x == 0) {
      partials[(chunk * channels + c) * 2] = a;
      partials[(chunk * channels + c) * 2 + 1] = b;
    }
  }
}

template <class Finish>
__global__ void finishSumsKernel(const double *partials, int64_t chunks,
                                 int64_t channels, Finish finish) {
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       c < channels; c += int64_t(gridDim.x) * blockDim.x) {
    double a = 0.0, b = 0.0;
    for (int64_t k = 0; k < chunks; ++k) {
      a += partials[(k * channels + c) * 2];
      b += partials[(k * channels + c) * 2 + 1];
    }
    finish(c, a, b);
  }
}

inline int64_t sumChunks(int64_t outer, int64_t inner) {
  return inner == 1 ? columnChunks(outer) : slabChunks(outer * inner);
}

/// Runs both stages over [outer, channels, inner] with `partials` a
/// buffer of sumChunks(...)·channels·2 doubles; false on a launch error.
/// kStrided false: inner is 1, the strided kernel is not built.
template <bool kStrided = true, class F, class Finish>
bool channelSums(tessel_ctx *ctx, const char *what, cudaStream_t stream,
                 int64_t outer, int64_t channels, int64_t inner,
                 double *partials, F f, Finish finish) {
  const int64_t chunks = sumChunks(outer, inner);
  if (!kStrided || inner == 1) {
    int64_t rowsPerChunk = (outer + chunks - 1) / chunks;
    dim3 grid(gridOf(channels, kWarp), unsigned(chunks));
    columnPartialsKernel<<<grid, dim3(kWarp, kSumRowLanes), 0, stream>>>(
        f, outer, channels, rowsPerChunk, partials);
  } else if constexpr (kStrided) {
    int64_t count = outer * inner;
    int64_t perChunk = (count + chunks - 1) / chunks;
    dim3 grid(gridOf(channels, 1), unsigned(chunks));
    slabPartialsKernel<<<grid, kSlabThreads, 0, stream>>>(
        f, channels, inner, count, perChunk, partials);
  }
  if (!CudaBackend::checkLaunch(ctx, what))
    return false;
  finishSumsKernel<<<gridFor(channels), 256, 0, stream>>>(partials, chunks,
                                                          channels, finish);
  return CudaBackend::checkLaunch(ctx, what);
}

/// Calls f with a value of the index type of the one division an
/// elementwise kernel over n elements does per element: uint32_t where n
/// fits, else uint64_t.
template <class F> void visitIndex(int64_t n, F f) {
  if (n <= int64_t(UINT32_MAX))
    f(uint32_t{});
  else
    f(uint64_t{});
}

template <class T> const T *in(const void *p) {
  return static_cast<const T *>(p);
}
template <class T> T *out(void *p) { return static_cast<T *>(p); }

/// Temporary device memory ordered on the stream; null with the error set.
inline void *scratch(tessel_ctx *ctx, cudaStream_t stream, size_t bytes,
                     const char *what) {
  void *p = nullptr;
  if (!CudaBackend::check(ctx, cudaMallocAsync(&p, bytes, stream), what))
    return nullptr;
  return p;
}

} // namespace norm_detail
} // namespace cuda
} // namespace tessel

#endif // TESSEL_RUNTIME_CUDA_NORM_DEVICE_CUH
