//===- elementwise.cu - Elementwise kernels and their gradients ----------===//
//
// tessel_binary(_broadcast), tessel_unary, tessel_cast,
// tessel_dropout(_block) and tessel_unary_grad on the GPU. Every kernel is
// one memory-bound pass: a grid-stride loop over 16-byte vectors (float4, 8
// halves, 2 doubles) when every pointer is aligned for them, then a scalar
// tail; a misaligned pointer takes the scalar loop throughout. The
// per-element arithmetic is elementwise_math.h's, the CPU backend's bit for
// bit where that is possible (conversions, integer ops, the dropout mask)
// and the same formulas otherwise. Ops and dtypes are template parameters:
// one kernel per (op, dtype), no switch inside the loop. Indices are int64
// (a broadcast's are 32-bit where the view fits).
//
//===----------------------------------------------------------------------===//

#include "cuda/backend.h"
#include "cuda/elementwise_math.h"

#include "core/context.h"

#include <algorithm>
#include <vector>

namespace tessel {
namespace cuda {
namespace {

constexpr unsigned kThreads = 256;

/// Elements per vector of a kernel reading TIn and writing TOut: 16 bytes
/// of the wider one.
template <class TIn, class TOut>
constexpr int kVecWidth = int(16 / std::max(sizeof(TIn), sizeof(TOut)));

bool alignedTo(const void *p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

/// Calls f(std::integral_constant<int, op>()) for op in [0, Count).
template <int Count, int Op = 0, class F> void visitOp(int32_t op, F &&f) {
  if constexpr (Op < Count) {
    if (op == Op)
      f(std::integral_constant<int, Op>());
    else
      visitOp<Count, Op + 1>(op, f);
  }
}

//===--- The two kernel shapes --------------------------------------------===//

/// What a map kernel's thread works out once, not per element: the
/// functor's prepare() (reading the device step), or nothing; callFn then
/// passes it to the functor.
struct NoState {};
template <class Fn>
__device__ auto prepareOnce(const Fn &fn, int) -> decltype(fn.prepare()) {
  return fn.prepare();
}
template <class Fn> __device__ NoState prepareOnce(const Fn &, long) {
  return {};
}
template <class Fn, class State, class X>
__device__ auto callFn(const Fn &fn, const State &state, int64_t i, X x) {
  return fn(state, i, x);
}
template <class Fn, class X>
__device__ auto callFn(const Fn &fn, NoState, int64_t i, X x) {
  return fn(i, x);
}

/// y[i] = fn(i, x[i]) for i < n: vectors of N over the first vecs·N
/// elements, scalars after.
template <int N, class TIn, class TOut, class Fn>
__global__ void __launch_bounds__(kThreads)
    map1Kernel(const TIn *x, TOut *y, int64_t n, int64_t vecs, Fn fn) {
  const auto state = prepareOnce(fn, 0);
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t v = t; v < vecs; v += stride) {
    Pack<TIn, N> in = reinterpret_cast<const Pack<TIn, N> *>(x)[v];
    Pack<TOut, N> out;
#pragma unroll
    for (int k = 0; k < N; ++k)
      out.v[k] = callFn(fn, state, v * N + k, in.v[k]);
    reinterpret_cast<Pack<TOut, N> *>(y)[v] = out;
  }
  for (int64_t i = vecs * N + t; i < n; i += stride)
    y[i] = callFn(fn, state, i, x[i]);
}

/// out[i] = fn(a[i], b[i], bad) for i < n, laid out as map1Kernel. A block
/// where some element set `bad` calls fn.report() once (Fn::kReports).
template <int N, class T, class Fn>
__global__ void __launch_bounds__(kThreads)
    map2Kernel(const T *a, const T *b, T *out, int64_t n, int64_t vecs, Fn fn) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  bool bad = false;
  for (int64_t v = t; v < vecs; v += stride) {
    Pack<T, N> pa = reinterpret_cast<const Pack<T, N> *>(a)[v];
    Pack<T, N> pb = reinterpret_cast<const Pack<T, N> *>(b)[v];
    Pack<T, N> po;
#pragma unroll
    for (int k = 0; k < N; ++k)
      po.v[k] = fn(pa.v[k], pb.v[k], bad);
    reinterpret_cast<Pack<T, N> *>(out)[v] = po;
  }
  for (int64_t i = vecs * N + t; i < n; i += stride)
    out[i] = fn(a[i], b[i], bad);
  if constexpr (Fn::kReports) {
    // One report per block: the error slot is host memory.
    if (__syncthreads_or(bad) && threadIdx.x == 0)
      fn.report();
  }
}

/// out[r, c] = fn(a[r, c], b[c]) or fn(a[r, c], b[r]) over an [rows, cols]
/// view, fn(b, a) with bFirst (tessel_binary_broadcast; the two flags are
/// the same for every thread). A thread takes units of W elements along a
/// row (broadcastUnit): W = N, 16-byte vectors, where cols is a multiple
/// of N and every pointer aligned; else 1. I is the index type: 32 bits
/// where the view fits, as the division by the row's units is the one cost
/// beyond the loads.
template <int W, class I, class T, class Fn>
__global__ void __launch_bounds__(kThreads)
    broadcastKernel(const T *a, const T *b, T *out, I units, I unitsPerRow,
                    I cols, bool perRow, bool bFirst, Fn fn) {
  const I stride = I(gridDim.x) * blockDim.x;
  bool bad = false;
  for (I u = I(blockIdx.x) * blockDim.x + threadIdx.x; u < units;
       u += stride) {
    I r, c;
    broadcastUnit(u, unitsPerRow, W, r, c);
    const I i = r * cols + c;
    Pack<T, W> pa = *reinterpret_cast<const Pack<T, W> *>(a + i), pb, po;
    if (perRow) {
      const T v = b[broadcastOperandIndex(r, c, true)];
#pragma unroll
      for (int k = 0; k < W; ++k)
        pb.v[k] = v;
    } else {
      pb = *reinterpret_cast<const Pack<T, W> *>(
          b + broadcastOperandIndex(r, c, false));
    }
#pragma unroll
    for (int k = 0; k < W; ++k)
      po.v[k] = bFirst ? fn(pb.v[k], pa.v[k], bad) : fn(pa.v[k], pb.v[k], bad);
    *reinterpret_cast<Pack<T, W> *>(out + i) = po;
  }
  if constexpr (Fn::kReports) {
    if (__syncthreads_or(bad) && threadIdx.x == 0)
      fn.report();
  }
}

template <int N> using Width = std::integral_constant<int, N>;

/// Launches broadcastKernel for tessel_binary_broadcast (rows, cols > 0).
template <class T, class Fn>
void launchBroadcast(CudaBackend &backend, tessel_ctx *ctx, const void *a,
                     const void *b, void *out, int64_t rows, int64_t cols,
                     int32_t layout, const Fn &fn) {
  constexpr int N = kVecWidth<T, T>;
  const bool perRow = (layout & TESSEL_BROADCAST_ROWS) != 0;
  const bool bFirst = (layout & TESSEL_BROADCAST_B_FIRST) != 0;
  // (A grid-stride step is at most 2^28 threads: u + stride stays in 32
  // bits below 2^30 elements.)
  const bool narrow = rows * cols <= (int64_t(1) << 30);
  const bool vector = narrow && cols % N == 0 && alignedTo(a, 16) &&
                      alignedTo(out, 16) && (perRow || alignedTo(b, 16));
  const int64_t unitsPerRow = vector ? cols / N : cols;
  const int64_t units = rows * unitsPerRow;
  auto go = [&](auto width, auto index) {
    constexpr int W = decltype(width)::value;
    using I = decltype(index);
    broadcastKernel<W, I>
        <<<gridFor(units, kThreads), kThreads, 0, backend.stream()>>>(
            static_cast<const T *>(a), static_cast<const T *>(b),
            static_cast<T *>(out), I(units), I(unitsPerRow), I(cols), perRow,
            bFirst, fn);
  };
  if (vector)
    go(Width<N>(), uint32_t());
  else if (narrow)
    go(Width<1>(), uint32_t());
  else
    go(Width<1>(), int64_t());
  CudaBackend::checkLaunch(ctx, "tessel_binary_broadcast");
}

/// Launches map1Kernel over n elements on the backend's stream.
template <class TIn, class TOut, class Fn>
void launchMap1(CudaBackend &backend, tessel_ctx *ctx, const char *what,
                const void *x, void *y, int64_t n, const Fn &fn) {
  if (n <= 0)
    return;
  constexpr int N = kVecWidth<TIn, TOut>;
  bool vector = alignedTo(x, sizeof(TIn) * N) && alignedTo(y, sizeof(TOut) * N);
  int64_t vecs = vector ? n / N : 0;
  int64_t work = std::max<int64_t>(vecs, n - vecs * N);
  map1Kernel<N><<<gridFor(work, kThreads), kThreads, 0, backend.stream()>>>(
      static_cast<const TIn *>(x), static_cast<TOut *>(y), n, vecs, fn);
  CudaBackend::checkLaunch(ctx, what);
}

template <class T, class Fn>
void launchMap2(CudaBackend &backend, tessel_ctx *ctx, const char *what,
                const void *a, const void *b, void *out, int64_t n,
                const Fn &fn) {
  if (n <= 0)
    return;
  constexpr int N = kVecWidth<T, T>;
  bool vector = alignedTo(a, 16) && alignedTo(b, 16) && alignedTo(out, 16);
  int64_t vecs = vector ? n / N : 0;
  int64_t work = std::max<int64_t>(vecs, n - vecs * N);
  map2Kernel<N><<<gridFor(work, kThreads), kThreads, 0, backend.stream()>>>(
      static_cast<const T *>(a), static_cast<const T *>(b),
      static_cast<T *>(out), n, vecs, fn);
  CudaBackend::checkLaunch(ctx, what);
}

//===--- Per-element functors ---------------------------------------------===//

template <int Op, class T> struct BinaryFn {
  static constexpr bool kReports = isIntegral<T>() && Op == TESSEL_DIV;
  DeviceError *errors;
  DeviceErrorKind divisionByZero; // the entry point's kind
  __device__ T operator()(T a, T b, bool &bad) const {
    using C = typename Elem<T>::Compute;
    return Elem<T>::store(
        binaryOp<Op, C>(Elem<T>::load(a), Elem<T>::load(b), bad));
  }
  __device__ void report() const {
    recordDeviceError(errors, divisionByZero, 0, 0, 0);
  }
};

template <int Op, class T> struct UnaryFn {
  __device__ T operator()(int64_t, T x) const {
    using C = typename Elem<T>::Compute;
    return Elem<T>::store(unaryOp<Op, C>(Elem<T>::load(x)));
  }
};

template <int Op, class T> struct UnaryGradFn {
  static constexpr bool kReports = false;
  __device__ T operator()(T x, T dy, bool &) const {
    using C = typename Elem<T>::Compute;
    return Elem<T>::store(
        unaryGradOp<Op, C>(Elem<T>::load(x), Elem<T>::load(dy)));
  }
  __device__ void report() const {}
};

template <class TIn, class TOut> struct CastFn {
  __device__ TOut operator()(int64_t, TIn x) const {
    return castElement<TIn, TOut>(x);
  }
};

/// Inverted dropout; Index maps the call's element i to the whole tensor's.
/// The mask's prefix is the caller's step's, or with `currentStep` the
/// device step's as the kernel runs (a captured graph's replays).
/// `prefixOrSeed` is the prefix, or with `currentStep` the seed: prepare(),
/// once per thread, reads the device step and works the prefix out.
template <class T, class Index> struct DropoutFn {
  using C = typename Elem<T>::Compute;
  uint64_t prefixOrSeed, stream;
  const uint64_t *currentStep;
  double rate;
  C scale;
  Index index;
  __device__ uint64_t prepare() const {
    return currentStep ? dropoutPrefix(prefixOrSeed, *currentStep)
                       : prefixOrSeed;
  }
  __device__ T operator()(uint64_t prefix, int64_t i, T x) const {
    bool keep = dropoutKeep(prefix, index(i), stream, rate);
    return Elem<T>::store(keep ? C(Elem<T>::load(x) * scale) : C(0));
  }
};

struct LinearIndex {
  int64_t first;
  __device__ int64_t operator()(int64_t i) const { return first + i; }
};

/// A block's dims passed by value (the common case).
struct InlineBlockIndex {
  BlockDims dims;
  int64_t first;
  __device__ int64_t operator()(int64_t i) const {
    return blockIndex(dims.rank, dims.shape, dims.strides, first, i);
  }
};

/// A block with more merged dims than fit in an argument: the dims live
/// in device memory (shape, then strides).
struct DeviceBlockIndex {
  const int64_t *dims;
  int32_t rank;
  int64_t first;
  __device__ int64_t operator()(int64_t i) const {
    return blockIndex(rank, dims, dims + rank, first, i);
  }
};

template <class Index>
void launchDropout(CudaBackend &backend, tessel_ctx *ctx, const char *what,
                   int32_t dtype, const void *x, void *y, int64_t n,
                   double rate, uint64_t seed, StepRef step, uint64_t stream,
                   const Index &index) {
  visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = typename Elem<T>::Compute;
    DropoutFn<T, Index> fn{step.current ? seed
                                        : dropoutPrefix(seed, step.step),
                           stream,
                           step.current ? backend.deviceStep() : nullptr,
                           rate,
                           dropoutScale<C>(rate),
                           index};
    launchMap1<T, T>(backend, ctx, what, x, y, n, fn);
  });
}

} // namespace
} // namespace cuda
} // namespace tessel

using namespace tessel;
using namespace tessel::cuda;

void CudaBackend::binary(tessel_ctx *ctx, int32_t op, int32_t dtype,
                         const void *a, const void *b, void *out, int64_t n) {
  visitAny(dtype, [&](auto tag) {
    using T = decltype(tag);
    visitOp<TESSEL_EQUAL + 1>(op, [&](auto opTag) {
      BinaryFn<decltype(opTag)::value, T> fn{
          deviceErrors(), DeviceErrorKind::IntegerDivisionByZero};
      launchMap2<T>(*this, ctx, "tessel_binary", a, b, out, n, fn);
    });
  });
}

void CudaBackend::binaryBroadcast(tessel_ctx *ctx, int32_t op, int32_t dtype,
                                  const void *a, const void *b, void *out,
                                  int64_t rows, int64_t cols, int32_t layout) {
  visitAny(dtype, [&](auto tag) {
    using T = decltype(tag);
    visitOp<TESSEL_EQUAL + 1>(op, [&](auto opTag) {
      BinaryFn<decltype(opTag)::value, T> fn{
          deviceErrors(), DeviceErrorKind::BroadcastIntegerDivisionByZero};
      launchBroadcast<T>(*this, ctx, a, b, out, rows, cols, layout, fn);
    });
  });
}

void CudaBackend::unary(tessel_ctx *ctx, int32_t op, int32_t dtype,
                        const void *x, void *y, int64_t n) {
  visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    visitOp<TESSEL_SILU + 1>(op, [&](auto opTag) {
      launchMap1<T, T>(*this, ctx, "tessel_unary", x, y, n,
                       UnaryFn<decltype(opTag)::value, T>{});
    });
  });
}

void CudaBackend::cast(tessel_ctx *ctx, int32_t srcDtype, int32_t dstDtype,
                       const void *x, void *y, int64_t n) {
  visitAny(srcDtype, [&](auto srcTag) {
    visitAny(dstDtype, [&](auto dstTag) {
      using TIn = decltype(srcTag);
      using TOut = decltype(dstTag);
      launchMap1<TIn, TOut>(*this, ctx, "tessel_cast", x, y, n,
                            CastFn<TIn, TOut>{});
    });
  });
}

void CudaBackend::dropout(tessel_ctx *ctx, int32_t dtype, const void *x,
                          void *y, int64_t n, double rate, uint64_t seed,
                          StepRef step, int64_t first, uint64_t stream) {
  launchDropout(*this, ctx, "tessel_dropout", dtype, x, y, n, rate, seed, step,
                stream, LinearIndex{first});
}

void CudaBackend::dropoutBlock(tessel_ctx *ctx, int32_t dtype, const void *x,
                               void *y, int32_t rank, const int64_t *hostShape,
                               const int64_t *hostStrides, double rate,
                               uint64_t seed, StepRef step, int64_t first,
                               uint64_t stream) {
  const char *what = "tessel_dropout_block";
  int64_t n = 1;
  for (int32_t d = 0; d < rank; ++d)
    n *= hostShape[d];
  if (n <= 0)
    return;
  std::vector<int64_t> shape(size_t(rank) + 1), strides(size_t(rank) + 1);
  int32_t merged = 0;
  if (collapseBlockDims(rank, hostShape, hostStrides, shape.data(),
                        strides.data(), merged)) {
    InlineBlockIndex index{};
    index.dims.rank = merged;
    std::copy(shape.begin(), shape.begin() + merged, index.dims.shape);
    std::copy(strides.begin(), strides.begin() + merged, index.dims.strides);
    index.first = first;
    launchDropout(*this, ctx, what, dtype, x, y, n, rate, seed, step, stream,
                  index);
    return;
  }
  // More merged dims than a kernel argument holds: shape and strides go to
  // the device (stageHostArray: stream-ordered, or the graph's).
  std::vector<int64_t> dims(shape.begin(), shape.begin() + merged);
  dims.insert(dims.end(), strides.begin(), strides.begin() + merged);
  void *deviceDims = stageHostArray(ctx, dims.data(),
                                    dims.size() * sizeof(int64_t), what);
  if (!deviceDims)
    return;
  launchDropout(*this, ctx, what, dtype, x, y, n, rate, seed, step, stream,
                DeviceBlockIndex{static_cast<const int64_t *>(deviceDims),
                                 merged, first});
  releaseHostArray(ctx, deviceDims, what);
}

void CudaBackend::unaryGrad(tessel_ctx *ctx, int32_t op, int32_t dtype,
                            const void *x, const void *dy, void *dx,
                            int64_t n) {
  visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    visitOp<TESSEL_SILU + 1>(op, [&](auto opTag) {
      launchMap2<T>(*this, ctx, "tessel_unary_grad", x, dy, dx, n,
                    UnaryGradFn<decltype(opTag)::value, T>{});
    });
  });
}
