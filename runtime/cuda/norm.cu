//===- norm.cu - Softmax and normalisations, forward and backward -----------===//
//
// Softmax and layer/RMS norm with their gradients (batch norm is
// batch_norm.cu's), for f32,
// f64, and f16/bf16 storage computed in f32 (f64 in f64), matching the CPU
// backend (cpu/norm.cpp, cpu/backward.cpp) within rounding.
//
// Rows (softmax with inner == 1, layer norm): a warp per row up to 1024
// columns (512 for f64), a block of 512 threads beyond, the row held in
// registers (norm_math.h's RowConfig) and read again from memory only past
// 8192 columns (4096 for f64); 128-bit loads and stores where every pointer
// and the row length allow. Row sums go through a fixed shuffle tree, so
// they are the same every run. Softmax keeps a running max and
// Σ e^(x − max) in one pass. Layer norm's row pass can also take the
// residual add before it (the rounded sum stored and normalised), and its
// gradient's the add of dx to the residual stream's gradient after it, each
// bit for bit the unfused pair (norm_math.h's roundedSum, residualPlusDx).
//
// Strided softmax (inner > 1): a thread per (outer, inner) column, reading
// across threads along inner, so loads are coalesced.
//
// Column and channel sums (layer norm's dγ and dβ, batch norm's statistics
// and its gradient's sums) are deterministic: partial sums of fixed chunks
// into a temporary buffer (cudaMallocAsync on the stream), then a kernel
// that adds the chunks of each column in order. No float atomics. Those
// sums accumulate in f64, as the CPU's do.
//
// The building blocks (slot loads, reductions, the row split, the chunked
// sums) are in norm_device.cuh; the arithmetic in norm_math.h, which the
// host tests check against the CPU backend.
//
//===----------------------------------------------------------------------===//

#include "cuda/backend.h"
#include "cuda/norm_device.cuh"
#include "cuda/norm_math.h"

#include "core/context.h"

#include <cstdint>

using namespace tessel;
using namespace tessel::cuda;
using namespace tessel::cuda::norm_detail;

namespace {

//===--- Rows ---------------------------------------------------------------===//

template <class T, int kThreads, int kSlots, int kVec>
__global__ void __launch_bounds__(RowGrid<kThreads>::kBlock,
                                    RowGrid<kThreads>::kMinBlocks)
    softmaxRowsKernel(const T *x, T *y, int64_t rows, int64_t dim) {
  using C = Compute<T>;
  using G = RowGrid<kThreads>;
  const int t = G::thread();
  for (int64_t r = G::first(); r < rows; r += G::stride()) {
    const T *xr = x + r * dim;
    T *yr = y + r * dim;
    RowPart<T, kThreads, kSlots, kVec> xp;
    xp.fill(xr, dim, t);
    C mx = negInf<C>(), sum = C(0);
    forSlots<kThreads, kSlots, kVec>(dim, t, [&](int k, int64_t j0) {
      const C *xs = xp.get(k, xr, j0, dim);
#pragma unroll
      for (int v = 0; v < kVec; ++v)
        if (j0 + v < dim)
          onlineAdd(mx, sum, xs[v]);
    });
    C rowMax = groupReduce<kThreads>(mx, MaxOp(), negInf<C>());
    C inv = C(1) / groupSum<kThreads>(onlineRescale(mx, sum, rowMax));
    forSlots<kThreads, kSlots, kVec>(dim, t, [&](int k, int64_t j0) {
      const C *xs = xp.get(k, xr, j0, dim);
      C out[kVec];
#pragma unroll
      for (int v = 0; v < kVec; ++v)
        out[v] = expOf(xs[v] - rowMax) * inv;
      storeSlot<kVec>(yr, j0, dim, out);
    });
  }
}

template <class T, int kThreads, int kSlots, int kVec>
__global__ void __launch_bounds__(RowGrid<kThreads>::kBlock)
    softmaxGradRowsKernel(const T *y, const T *dy, T *dx, int64_t rows,
                          int64_t dim) {
  using C = Compute<T>;
  using G = RowGrid<kThreads>;
  const int t = G::thread();
  for (int64_t r = G::first(); r < rows; r += G::stride()) {
    const T *yr = y + r * dim, *dyr = dy + r * dim;
    RowPart<T, kThreads, kSlots, kVec> yp, dyp;
    yp.fill(yr, dim, t);
    dyp.fill(dyr, dim, t);
    C dot = C(0);
    forSlots<kThreads, kSlots, kVec>(dim, t, [&](int k, int64_t j0) {
      const C *ys = yp.get(k, yr, j0, dim), *dys = dyp.get(k, dyr, j0, dim);
#pragma unroll
      for (int v = 0; v < kVec; ++v)
        dot = addProduct(dot, ys[v], dys[v]); // 0 past the row
    });
    dot = groupSum<kThreads>(dot);
    forSlots<kThreads, kSlots, kVec>(dim, t, [&](int k, int64_t j0) {
      const C *ys = yp.get(k, yr, j0, dim), *dys = dyp.get(k, dyr, j0, dim);
      C out[kVec];
#pragma unroll
      for (int v = 0; v < kVec; ++v)
        out[v] = softmaxDx(ys[v], dys[v], dot);
      storeSlot<kVec>(dx + r * dim, j0, dim, out);
    });
  }
}

/// A row's mean (0 for RMS norm) and 1 / sqrt(var + eps), two passes over
/// the thread's part, as the CPU computes them.
template <int kThreads, int kSlots, int kVec, class T, class Part>
__device__ __forceinline__ void rowStats(Part &xp, const T *xr, int64_t cols,
                                         int t, double invCols, double eps,
                                         bool rms, Compute<T> &mean,
                                         Compute<T> &rstd) {
  using C = Compute<T>;
  C m = C(0);
  if (!rms) {
    C s = C(0);
    forSlots<kThreads, kSlots, kVec>(cols, t, [&](int k, int64_t j0) {
      const C *xs = xp.get(k, xr, j0, cols);
#pragma unroll
      for (int v = 0; v < kVec; ++v)
        s += xs[v]; // 0 past the row
    });
    m = meanOf(groupSum<kThreads>(s), invCols);
  }
  C q = C(0);
  forSlots<kThreads, kSlots, kVec>(cols, t, [&](int k, int64_t j0) {
    const C *xs = xp.get(k, xr, j0, cols);
#pragma unroll
    for (int v = 0; v < kVec; ++v) {
      C d = subRn(xs[v], m);
      if (j0 + v < cols)
        q = addProduct(q, d, d);
    }
  });
  mean = m;
  rstd = rstdOf<C>(double(groupSum<kThreads>(q)), invCols, eps);
}

/// Thread t's part of the row sum a + b rounded to T (roundedSum), stored
/// to `sum` and, with kSlots > 0, kept in xp. Streamed (kSlots == 0), the
/// passes after this read `sum` back from memory: forSlots gives thread t
/// the same slots (slotStart(t, 0) + m·kThreads·kVec) in every pass, so a
/// thread reads only what it wrote itself and needs no barrier. The same
/// holds with sum aliasing a or b: each element is read, then written, by
/// one thread.
template <int kThreads, int kSlots, int kVec, class T, class Part>
__device__ __forceinline__ void
fillRoundedSum(Part &xp, const T *ar, const T *br, T *sr, int64_t cols, int t) {
  using C = Compute<T>;
  forSlots<kThreads, kSlots, kVec>(cols, t, [&](int k, int64_t j0) {
    C *s = xp.v + k * kVec; // streamed: the one slot, scratch here
    C b[kVec];
    loadSlot<kVec>(ar, j0, cols, s);
    loadSlot<kVec>(br, j0, cols, b);
#pragma unroll
    for (int v = 0; v < kVec; ++v)
      s[v] = roundedSum<T>(s[v], b[v]); // 0 past the row
    storeSlot<kVec>(sr, j0, cols, s);
  });
}

/// Layer (or RMS) norm of x; with kAdd, of x + addend rounded to T, which
/// is also stored to `sum` (tessel_add_layer_norm). Without kAdd, addend
/// and sum are unused (null) and the kernel is the plain one.
template <class T, int kThreads, int kSlots, int kVec, bool kAdd>
__global__ void __launch_bounds__(RowGrid<kThreads>::kBlock,
                                    RowGrid<kThreads>::kMinBlocks)
    layerNormRowsKernel(const T *x, const T *addend, T *sum, const T *gamma,
                        const T *beta, T *y, int64_t rows, int64_t cols,
                        double invCols, double eps, bool rms) {
  using C = Compute<T>;
  using G = RowGrid<kThreads>;
  const int t = G::thread();
  for (int64_t r = G::first(); r < rows; r += G::stride()) {
    const T *xr = x + r * cols;
    RowPart<T, kThreads, kSlots, kVec> xp;
    if constexpr (kAdd) {
      T *sr = sum + r * cols;
      fillRoundedSum<kThreads, kSlots, kVec>(xp, xr, addend + r * cols, sr,
                                             cols, t);
      xr = sr;
    } else {
      xp.fill(xr, cols, t);
    }
    C mean, rstd;
    rowStats<kThreads, kSlots, kVec>(xp, xr, cols, t, invCols, eps, rms, mean,
                                     rstd);
    forSlots<kThreads, kSlots, kVec>(cols, t, [&](int k, int64_t j0) {
      const C *xs = xp.get(k, xr, j0, cols);
      C g[kVec], b[kVec], out[kVec];
      if (gamma)
        loadSlot<kVec>(gamma, j0, cols, g);
      if (beta)
        loadSlot<kVec>(beta, j0, cols, b);
#pragma unroll
      for (int v = 0; v < kVec; ++v)
        out[v] = layerNormValue(xs[v], mean, rstd, gamma != nullptr, g[v],
                                beta != nullptr, b[v]);
      storeSlot<kVec>(y + r * cols, j0, cols, out);
    });
  }
}

/// dx of layer (or RMS) norm; with `stats`, also each row's mean and rstd
/// (stats[r], stats[rows + r]) for the dγ column sums. With kResidual, dx
/// is residual + that dx rounded to T (residualPlusDx,
/// tessel_layer_norm_grad_add); dx is never x or dy, which every pass and
/// the column sums read (nor residual: the ABI's two-kernel meaning could
/// not). Without kResidual, residual is unused (null).
template <class T, int kThreads, int kSlots, int kVec, bool kResidual>
__global__ void __launch_bounds__(RowGrid<kThreads>::kBlock)
    layerNormGradRowsKernel(const T *x, const T *gamma, const T *dy,
                            const T *residual, T *dx, Compute<T> *stats,
                            int64_t rows, int64_t cols, double invCols,
                            double eps, bool rms) {
  using C = Compute<T>;
  using G = RowGrid<kThreads>;
  const int t = G::thread();
  for (int64_t r = G::first(); r < rows; r += G::stride()) {
    const T *xr = x + r * cols, *dyr = dy + r * cols;
    RowPart<T, kThreads, kSlots, kVec> xp, dyp;
    xp.fill(xr, cols, t);
    dyp.fill(dyr, cols, t);
    C mean, rstd;
    rowStats<kThreads, kSlots, kVec>(xp, xr, cols, t, invCols, eps, rms, mean,
                                     rstd);
    if (stats && t == 0) {
      stats[r] = mean;
      stats[rows + r] = rstd;
    }
    // d = dy·γ; past the row dy is 0, so every term there is 0.
    auto terms = [&](int k, int64_t j0, C *d, C *xh) {
      const C *xs = xp.get(k, xr, j0, cols), *dys = dyp.get(k, dyr, j0, cols);
      C g[kVec];
      if (gamma)
        loadSlot<kVec>(gamma, j0, cols, g);
#pragma unroll
      for (int v = 0; v < kVec; ++v) {
        xh[v] = normalized(xs[v], mean, rstd);
        d[v] = gamma ? mulRn(dys[v], g[v]) : dys[v];
      }
    };
    C sumD = C(0), sumDX = C(0);
    forSlots<kThreads, kSlots, kVec>(cols, t, [&](int k, int64_t j0) {
      C d[kVec], xh[kVec];
      terms(k, j0, d, xh);
#pragma unroll
      for (int v = 0; v < kVec; ++v) {
        sumD = addRn(sumD, d[v]);
        sumDX = addProduct(sumDX, d[v], xh[v]);
      }
    });
    C meanD = rms ? C(0) : meanOf(groupSum<kThreads>(sumD), invCols);
    C meanDX = meanOf(groupSum<kThreads>(sumDX), invCols);
    forSlots<kThreads, kSlots, kVec>(cols, t, [&](int k, int64_t j0) {
      C d[kVec], xh[kVec], out[kVec];
      terms(k, j0, d, xh);
#pragma unroll
      for (int v = 0; v < kVec; ++v)
        out[v] = normDx(rstd, d[v], meanD, xh[v], meanDX);
      if constexpr (kResidual) {
        C res[kVec];
        loadSlot<kVec>(residual + r * cols, j0, cols, res);
#pragma unroll
        for (int v = 0; v < kVec; ++v)
          out[v] = residualPlusDx<T>(res[v], out[v]);
      }
      storeSlot<kVec>(dx + r * cols, j0, cols, out);
    });
  }
}

template <int N> using Int = std::integral_constant<int, N>;

/// Launches Op's kernel for `rows` rows of `cols` in the row configuration
/// norm_math.h picks, 128-bit wide when `vec`. A configuration without its
/// instantiation here would take the streamed kernel, right for any row.
template <class Op, class T, class... A>
void launchRows(cudaStream_t stream, int64_t rows, int64_t cols, bool vec,
                A... args) {
  constexpr int kV = 16 / sizeof(T);
  constexpr int kWide = sizeof(Compute<T>) == 8 ? 1 : 2;
  RowConfig config = chooseRowConfig(cols, int(sizeof(Compute<T>)));
  auto go = [&](auto threadsTag, auto elemsTag) {
    constexpr int kThreads = decltype(threadsTag)::value;
    constexpr int kElems = decltype(elemsTag)::value;
    static_assert(kElems % kV == 0, "a slot is one 128-bit access");
    constexpr int kBlock = RowGrid<kThreads>::kBlock;
    unsigned grid = gridOf(rows, RowGrid<kThreads>::kRowsPerBlock);
    if (vec)
      Op::template launch<T, kThreads, kElems / kV, kV>(grid, kBlock, stream,
                                                        args...);
    else
      Op::template launch<T, kThreads, kElems, 1>(grid, kBlock, stream,
                                                  args...);
  };
  if (config.threads == kWarp && config.elems == 8)
    go(Int<kWarp>(), Int<8>());
  else if (config.threads == kWarp && config.elems == 16 * kWide)
    go(Int<kWarp>(), Int<16 * kWide>());
  else if (config.threads == 512 && config.elems == 8 * kWide)
    go(Int<512>(), Int<8 * kWide>());
  else
    go(Int<512>(), Int<0>());
}

/// Name<kFused...>::launch runs Kernel<T, kThreads, kSlots, kVec, kFused...>
/// (the layer norm kernels take whether a residual add is fused).
#define TESSEL_ROW_OP(Name, Kernel)                                            \
  template <bool... kFused> struct Name {                                      \
    template <class T, int kThreads, int kSlots, int kVec, class... A>         \
    static void launch(unsigned grid, unsigned block, cudaStream_t stream,     \
                       A... args) {                                            \
      Kernel<T, kThreads, kSlots, kVec, kFused...>                             \
          <<<grid, block, 0, stream>>>(args...);                               \
    }                                                                          \
  };
TESSEL_ROW_OP(SoftmaxRowsOf, softmaxRowsKernel)
TESSEL_ROW_OP(SoftmaxGradRowsOf, softmaxGradRowsKernel)
TESSEL_ROW_OP(LayerNormRowsOf, layerNormRowsKernel)
TESSEL_ROW_OP(LayerNormGradRowsOf, layerNormGradRowsKernel)
#undef TESSEL_ROW_OP
using SoftmaxRows = SoftmaxRowsOf<>;
using SoftmaxGradRows = SoftmaxGradRowsOf<>;
using LayerNormRows = LayerNormRowsOf<false>;
using AddLayerNormRows = LayerNormRowsOf<true>;
using LayerNormGradRows = LayerNormGradRowsOf<false>;
using LayerNormGradAddRows = LayerNormGradRowsOf<true>;

/// Rows can be read 128 bits at a time: the row length is a multiple of 16
/// bytes and every (non-null) pointer 16-byte aligned.
template <class T>
bool vectorRows(int64_t cols, std::initializer_list<const void *> pointers) {
  if ((cols * int64_t(sizeof(T))) % 16 != 0)
    return false;
  for (const void *p : pointers)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
      return false;
  return true;
}

//===--- Strided softmax (inner > 1) --------------------------------------===//

/// Index type of the one division per column: 32 bits where it fits.
template <class I, class T>
__global__ void softmaxColumnsKernel(const T *x, T *y, int64_t outer,
                                     int64_t dim, int64_t inner) {
  using C = Compute<T>;
  const int64_t columns = outer * inner;
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < columns;
       c += int64_t(gridDim.x) * blockDim.x) {
    int64_t o = int64_t(I(c) / I(inner));
    int64_t base = o * dim * inner + (c - o * inner);
    C mx = negInf<C>(), sum = C(0);
    for (int64_t d = 0; d < dim; ++d)
      onlineAdd(mx, sum, C(Elem<T>::load(x[base + d * inner])));
    C inv = C(1) / sum;
    for (int64_t d = 0; d < dim; ++d) {
      int64_t i = base + d * inner;
      y[i] = Elem<T>::store(expOf(C(Elem<T>::load(x[i])) - mx) * inv);
    }
  }
}

template <class I, class T>
__global__ void softmaxGradColumnsKernel(const T *y, const T *dy, T *dx,
                                         int64_t outer, int64_t dim,
                                         int64_t inner) {
  using C = Compute<T>;
  const int64_t columns = outer * inner;
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < columns;
       c += int64_t(gridDim.x) * blockDim.x) {
    int64_t o = int64_t(I(c) / I(inner));
    int64_t base = o * dim * inner + (c - o * inner);
    C dot = C(0);
    for (int64_t d = 0; d < dim; ++d) {
      int64_t i = base + d * inner;
      dot = addProduct(dot, C(Elem<T>::load(y[i])), C(Elem<T>::load(dy[i])));
    }
    for (int64_t d = 0; d < dim; ++d) {
      int64_t i = base + d * inner;
      dx[i] = Elem<T>::store(
          softmaxDx(C(Elem<T>::load(y[i])), C(Elem<T>::load(dy[i])), dot));
    }
  }
}


/// Layer norm's dγ (Σ dy·x̂ with the rows' saved statistics) and dβ (Σ dy).
template <class T> struct LayerNormColumnTerms {
  const T *x, *dy;
  const Compute<T> *stats; // mean [rows], rstd [rows]; null: no dγ
  int64_t rows;
  __device__ void operator()(int64_t idx, int64_t r, int64_t, double &a,
                             double &b) const {
    using C = Compute<T>;
    C d = C(Elem<T>::load(dy[idx]));
    b += double(d);
    if (stats)
      a = addRn(a, double(mulRn(
                       d, normalized(C(Elem<T>::load(x[idx])), stats[r],
                                     stats[rows + r]))));
  }
};

/// The column sums stored as P: the norm's type, or f32 for a 16-bit one
/// (tessel_layer_norm_grad_f32).
template <class P> struct StoreColumnSums {
  P *sumA, *sumB; // either may be null
  __device__ void operator()(int64_t c, double a, double b) const {
    if (sumA)
      sumA[c] = fromDouble<P>(a);
    if (sumB)
      sumB[c] = fromDouble<P>(b);
  }
};

//===--- Dispatch -----------------------------------------------------------===//

using stored::visitFloat;

/// layerNormGrad, with `residual` (non-null) added to dx in the row pass;
/// the dγ and dβ column sums read x and dy either way and are stored as P.
template <class T, class P>
void launchLayerNormGrad(tessel_ctx *ctx, cudaStream_t stream, const char *what,
                         const void *x, const void *gamma, const void *dy,
                         const void *residual, void *dx, void *dgamma,
                         void *dbeta, int64_t rows, int64_t cols, double eps,
                         bool rms) {
  using C = Compute<T>;
  const size_t columnBytes = size_t(cols) * sizeof(P);
  if (rows == 0) { // empty column sums
    if (dgamma)
      CudaBackend::check(ctx, cudaMemsetAsync(dgamma, 0, columnBytes, stream),
                         what);
    if (dbeta)
      CudaBackend::check(ctx, cudaMemsetAsync(dbeta, 0, columnBytes, stream),
                         what);
    return;
  }
  C *stats = nullptr;
  if (dgamma && !(stats = static_cast<C *>(scratch(
                      ctx, stream, 2 * size_t(rows) * sizeof(C), what))))
    return;
  const bool vec = vectorRows<T>(cols, {x, gamma, dy, residual, dx});
  const double invCols = 1.0 / double(cols);
  if (residual)
    launchRows<LayerNormGradAddRows, T>(
        stream, rows, cols, vec, in<T>(x), in<T>(gamma), in<T>(dy),
        in<T>(residual), out<T>(dx), stats, rows, cols, invCols, eps, rms);
  else
    launchRows<LayerNormGradRows, T>(
        stream, rows, cols, vec, in<T>(x), in<T>(gamma), in<T>(dy),
        in<T>(nullptr), out<T>(dx), stats, rows, cols, invCols, eps, rms);
  if (CudaBackend::checkLaunch(ctx, what) && (dgamma || dbeta)) {
    size_t bytes = size_t(columnChunks(rows)) * size_t(cols) * 2 * 8;
    if (auto *partials =
            static_cast<double *>(scratch(ctx, stream, bytes, what))) {
      channelSums<false>(
          ctx, what, stream, rows, cols, 1, partials,
          LayerNormColumnTerms<T>{in<T>(x), in<T>(dy), stats, rows},
          StoreColumnSums<P>{out<P>(dgamma), out<P>(dbeta)});
      cudaFreeAsync(partials, stream);
    }
  }
  if (stats)
    cudaFreeAsync(stats, stream);
}

/// launchLayerNormGrad of dtype with the column sums of paramDtype (dtype's,
/// or f32 for f16/bf16: the front's check).
void launchLayerNormGrad(tessel_ctx *ctx, cudaStream_t stream, const char *what,
                         int32_t dtype, int32_t paramDtype, const void *x,
                         const void *gamma, const void *dy,
                         const void *residual, void *dx, void *dgamma,
                         void *dbeta, int64_t rows, int64_t cols, double eps,
                         bool rms) {
  stored::visitFloatWidened(dtype, paramDtype, [&](auto tag, auto param) {
    launchLayerNormGrad<decltype(tag), decltype(param)>(
        ctx, stream, what, x, gamma, dy, residual, dx, dgamma, dbeta, rows,
        cols, eps, rms);
  });
}

} // namespace

void CudaBackend::softmax(tessel_ctx *ctx, int32_t dtype, const void *x,
                          void *y, int64_t outer, int64_t dim, int64_t inner) {
  if (outer == 0 || dim == 0 || inner == 0)
    return;
  visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    if (inner == 1) {
      launchRows<SoftmaxRows, T>(stream(), outer, dim,
                                 vectorRows<T>(dim, {x, y}), in<T>(x),
                                 out<T>(y), outer, dim);
    } else {
      unsigned grid = gridOf(outer * inner, 256);
      visitIndex(outer * inner, [&](auto index) {
        softmaxColumnsKernel<decltype(index)><<<grid, 256, 0, stream()>>>(
            in<T>(x), out<T>(y), outer, dim, inner);
      });
    }
  });
  checkLaunch(ctx, "tessel_softmax");
}

void CudaBackend::softmaxGrad(tessel_ctx *ctx, int32_t dtype, const void *y,
                              const void *dy, void *dx, int64_t outer,
                              int64_t dim, int64_t inner) {
  if (outer == 0 || dim == 0 || inner == 0)
    return;
  visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    if (inner == 1) {
      launchRows<SoftmaxGradRows, T>(stream(), outer, dim,
                                     vectorRows<T>(dim, {y, dy, dx}), in<T>(y),
                                     in<T>(dy), out<T>(dx), outer, dim);
    } else {
      unsigned grid = gridOf(outer * inner, 256);
      visitIndex(outer * inner, [&](auto index) {
        softmaxGradColumnsKernel<decltype(index)><<<grid, 256, 0, stream()>>>(
            in<T>(y), in<T>(dy), out<T>(dx), outer, dim, inner);
      });
    }
  });
  checkLaunch(ctx, "tessel_softmax_grad");
}

void CudaBackend::layerNorm(tessel_ctx *ctx, int32_t dtype, const void *x,
                            const void *gamma, const void *beta, void *y,
                            int64_t rows, int64_t cols, double eps, bool rms) {
  if (rows == 0)
    return;
  visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    launchRows<LayerNormRows, T>(
        stream(), rows, cols, vectorRows<T>(cols, {x, gamma, beta, y}),
        in<T>(x), in<T>(nullptr), out<T>(nullptr), in<T>(gamma), in<T>(beta),
        out<T>(y), rows, cols, 1.0 / double(cols), eps, rms);
  });
  checkLaunch(ctx, "tessel_layer_norm");
}

void CudaBackend::addLayerNorm(tessel_ctx *ctx, int32_t dtype, const void *a,
                               const void *b, const void *gamma,
                               const void *beta, void *sum, void *y,
                               int64_t rows, int64_t cols, double eps,
                               bool rms) {
  visitFloat(dtype, [&](auto tag) { // rows, cols > 0 (the front's)
    using T = decltype(tag);
    launchRows<AddLayerNormRows, T>(
        stream(), rows, cols, vectorRows<T>(cols, {a, b, sum, gamma, beta, y}),
        in<T>(a), in<T>(b), out<T>(sum), in<T>(gamma), in<T>(beta), out<T>(y),
        rows, cols, 1.0 / double(cols), eps, rms);
  });
  checkLaunch(ctx, "tessel_add_layer_norm");
}

void CudaBackend::layerNormGrad(tessel_ctx *ctx, int32_t dtype,
                                int32_t paramDtype, const void *x,
                                const void *gamma, const void *dy, void *dx,
                                void *dgamma, void *dbeta, int64_t rows,
                                int64_t cols, double eps, bool rms) {
  if (cols == 0)
    return;
  launchLayerNormGrad(ctx, stream(), "tessel_layer_norm_grad", dtype,
                      paramDtype, x, gamma, dy, nullptr, dx, dgamma, dbeta,
                      rows, cols, eps, rms);
}

void CudaBackend::layerNormGradAdd(tessel_ctx *ctx, int32_t dtype,
                                   int32_t paramDtype, const void *x,
                                   const void *gamma, const void *dy,
                                   const void *residual, void *dx,
                                   void *dgamma, void *dbeta, int64_t rows,
                                   int64_t cols, double eps, bool rms) {
  // rows, cols > 0: the front takes an empty one to layerNormGrad.
  launchLayerNormGrad(ctx, stream(), "tessel_layer_norm_grad_add", dtype,
                      paramDtype, x, gamma, dy, residual, dx, dgamma, dbeta,
                      rows, cols, eps, rms);
}
