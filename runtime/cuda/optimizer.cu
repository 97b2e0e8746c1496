//===- optimizer.cu - Gradient norm, clipping and the fused optimizer update ===//
//
// sumSquares: a deterministic two-level reduction in f64 (the CPU's
// accumulation type): per-block partials to a stream-ordered temporary,
// then one block adds them in a fixed order and adds the total to the
// device f32 (or, ABI 18, f64) *sum, as the CPU does (a global norm
// accumulates over tensors). No float atomics, so a step replays bit for
// bit.
// clipScale: one thread, the CPU's double arithmetic on f32 or f64 scalars.
// optimizerUpdate: one fused elementwise kernel per call (SGD, Adam,
// AdamW); optimizerUpdateMaster the same kernel on the f32 master weights,
// writing their bf16/f16 copy in the same pass; the per-element arithmetic
// is optimizer_math.h's, which rounds every operation as the CPU does, so
// results equal the CPU's bit for bit. The states and the gradient scale
// are f32, or f64 with f64 parameters (UpdateStep::stateDtype, ABI 18).
// Four elements per thread step with 128-bit loads of f32 data (64-bit for
// f16/bf16) when every pointer is aligned, a scalar path otherwise.
// multiTensorAdamW (optimizer.h): the same Adam step over a chunk table.
//
//===----------------------------------------------------------------------===//

#include "cuda/backend.h"
#include "cuda/optimizer.h"
#include "cuda/optimizer_math.h"

#include "core/lr_schedule.h"

#include "core/context.h"

using namespace tessel;
using namespace tessel::cuda;
using namespace tessel::stored;

namespace {

constexpr unsigned kThreads = 256;
/// Partials of sumSquares: a fixed cap keeps the reduction order a function
/// of n alone, the same on every device.
constexpr unsigned kMaxSumBlocks = 1024;

template <class T> struct alignas(4 * sizeof(T)) Vec4 {
  T v[4];
};

__device__ __forceinline__ bool alignedTo(const void *p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

//===--- Sum of squares ---------------------------------------------------===//

/// The sum over the block in a fixed order (shuffle tree, then the warps in
/// turn); valid in thread 0.
__device__ double blockSum(double v) {
  __shared__ double warpSums[kThreads / 32];
  for (int offset = 16; offset > 0; offset >>= 1)
    v += __shfl_down_sync(0xffffffffu, v, offset);
  if (threadIdx.x % 32 == 0)
    warpSums[threadIdx.x / 32] = v;
  __syncthreads();
  double total = 0.0;
  if (threadIdx.x == 0)
    for (unsigned w = 0; w < kThreads / 32; ++w)
      total += warpSums[w];
  return total;
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    sumSquaresPartials(const T *x, int64_t n, double *partials) {
  int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int64_t vectors = alignedTo(x, sizeof(Vec4<T>)) ? n / 4 : 0;
  double acc = 0.0;
  const Vec4<T> *xv = reinterpret_cast<const Vec4<T> *>(x);
  for (int64_t i = tid; i < vectors; i += stride) {
    Vec4<T> q = xv[i];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      double v = double(Elem<T>::load(q.v[j]));
      acc += v * v;
    }
  }
  for (int64_t i = vectors * 4 + tid; i < n; i += stride) {
    double v = double(Elem<T>::load(x[i]));
    acc += v * v;
  }
  double total = blockSum(acc);
  if (threadIdx.x == 0)
    partials[blockIdx.x] = total;
}

/// *sum is an S, float or (tessel_sum_squares_f64) double.
template <class S>
__global__ void __launch_bounds__(kThreads)
    sumSquaresFinish(const double *partials, unsigned count, S *sum) {
  double acc = 0.0;
  for (unsigned i = threadIdx.x; i < count; i += blockDim.x)
    acc += partials[i];
  double total = blockSum(acc);
  if (threadIdx.x == 0)
    *sum = S(addRn(double(*sum), total));
}

//===--- Clipping ---------------------------------------------------------===//

/// The scalars are S, float or (tessel_clip_scale_f64) double.
template <class S>
__global__ void clipScaleKernel(const S *sumSquares, double maxNorm,
                                const S *gradScale, S *scale) {
  *scale = S(clipScaleValue(double(*sumSquares), maxNorm,
                            gradScale ? double(*gradScale) : 1.0));
}

/// f(float()), or f(double()) for F64 device scalars (ABI 18).
template <class F> void visitScalar(int32_t dtype, F &&f) {
  if (dtype == TESSEL_F64)
    f(double());
  else
    f(float());
}

//===--- Optimizer updates ------------------------------------------------===//

template <class T> using Compute = typename Elem<T>::Compute;

/// The gradient scale is of the states' type S.
template <class T, class S>
__device__ __forceinline__ Compute<T> loadScale(const S *gradScale) {
  return Compute<T>(gradScale ? *gradScale : S(1));
}

/// Where a step's new parameter values go: the parameter, and under mixed
/// precision (the parameter is then the f32 master) also the low-precision
/// copy the model computes with, rounded to nearest even.
template <class T, class L> struct ParamOut {
  T *param;
  L *copy;
  __device__ __forceinline__ void set(int64_t i, Compute<T> p) const {
    T stored = Elem<T>::store(p);
    param[i] = stored;
    if (copy)
      copy[i] = Elem<L>::store(Compute<L>(Elem<T>::load(stored)));
  }
  __device__ __forceinline__ void set4(int64_t i, const Vec4<T> &p) const {
    reinterpret_cast<Vec4<T> *>(param)[i] = p;
    if (copy) {
      Vec4<L> c;
#pragma unroll
      for (int j = 0; j < 4; ++j)
        c.v[j] = Elem<L>::store(Compute<L>(Elem<T>::load(p.v[j])));
      reinterpret_cast<Vec4<L> *>(copy)[i] = c;
    }
  }
  __device__ __forceinline__ bool aligned() const {
    return alignedTo(param, sizeof(Vec4<T>)) &&
           (!copy || alignedTo(copy, sizeof(Vec4<L>)));
  }
};

/// SGD over elements [0, n) of the pointers, thread `tid` of `stride`;
/// the gradient has type G, the momentum buffer S.
template <class T, class G, class L, class S>
__device__ __forceinline__ void
sgdSpan(const SgdCoeffs<Compute<T>> &k, ParamOut<T, L> out, const G *grad,
        S *buf, int64_t n, Compute<T> scale, int64_t tid, int64_t stride) {
  using C = Compute<T>;
  T *param = out.param;
  bool vector = out.aligned() && alignedTo(grad, sizeof(Vec4<G>)) &&
                (!k.useMomentum || alignedTo(buf, sizeof(Vec4<S>)));
  int64_t vectors = vector ? n / 4 : 0;
  for (int64_t i = tid; i < vectors; i += stride) {
    Vec4<T> p = reinterpret_cast<Vec4<T> *>(param)[i];
    Vec4<G> g = reinterpret_cast<const Vec4<G> *>(grad)[i];
    Vec4<S> b{};
    if (k.useMomentum)
      b = reinterpret_cast<Vec4<S> *>(buf)[i];
#pragma unroll
    for (int j = 0; j < 4; ++j)
      p.v[j] = Elem<T>::store(sgdElement(k, C(Elem<T>::load(p.v[j])),
                                         C(Elem<G>::load(g.v[j])), scale,
                                         b.v[j]));
    out.set4(i, p);
    if (k.useMomentum)
      reinterpret_cast<Vec4<S> *>(buf)[i] = b;
  }
  for (int64_t i = vectors * 4 + tid; i < n; i += stride) {
    S b = k.useMomentum ? buf[i] : S(0);
    out.set(i, sgdElement(k, C(Elem<T>::load(param[i])),
                          C(Elem<G>::load(grad[i])), scale, b));
    if (k.useMomentum)
      buf[i] = b;
  }
}

/// Adam / AdamW over elements [0, n) of the pointers; the states are S.
template <class T, class G, class L, class S>
__device__ __forceinline__ void
adamSpan(const AdamCoeffs<Compute<T>> &k, ParamOut<T, L> out, const G *grad,
         S *m, S *v, int64_t n, Compute<T> scale, int64_t tid, int64_t stride) {
  using C = Compute<T>;
  T *param = out.param;
  bool vector = out.aligned() && alignedTo(grad, sizeof(Vec4<G>)) &&
                alignedTo(m, sizeof(Vec4<S>)) && alignedTo(v, sizeof(Vec4<S>));
  int64_t vectors = vector ? n / 4 : 0;
  for (int64_t i = tid; i < vectors; i += stride) {
    Vec4<T> p = reinterpret_cast<Vec4<T> *>(param)[i];
    Vec4<G> g = reinterpret_cast<const Vec4<G> *>(grad)[i];
    Vec4<S> mv = reinterpret_cast<Vec4<S> *>(m)[i];
    Vec4<S> vv = reinterpret_cast<Vec4<S> *>(v)[i];
#pragma unroll
    for (int j = 0; j < 4; ++j)
      p.v[j] = Elem<T>::store(adamElement(k, C(Elem<T>::load(p.v[j])),
                                          C(Elem<G>::load(g.v[j])), scale,
                                          mv.v[j], vv.v[j]));
    out.set4(i, p);
    reinterpret_cast<Vec4<S> *>(m)[i] = mv;
    reinterpret_cast<Vec4<S> *>(v)[i] = vv;
  }
  for (int64_t i = vectors * 4 + tid; i < n; i += stride) {
    S mi = m[i], vi = v[i];
    out.set(i, adamElement(k, C(Elem<T>::load(param[i])),
                           C(Elem<G>::load(grad[i])), scale, mi, vi));
    m[i] = mi;
    v[i] = vi;
  }
}

/// An update of the context's step (UpdateStep::current): `step` is the
/// device step, and each block works its constants out from it as the
/// kernel runs, so a captured graph replays with each launch's count and
/// rate. Null: the constants passed are the caller's step's.
struct CurrentUpdate {
  const uint64_t *step;
  tessel_optimizer opt;
  tessel_lr_schedule schedule;
};

/// The block's constants: `given`, or the device step's (thread 0 works
/// them out once; `cur.step` is the same for every thread, so all of them
/// reach the barrier).
template <class C, class Coeffs, class Make>
__device__ Coeffs blockCoeffs(const Coeffs &given, const CurrentUpdate &cur,
                              Make make) {
  if (!cur.step)
    return given;
  __shared__ Coeffs shared;
  if (threadIdx.x == 0) {
    int64_t count = int64_t(*cur.step + 1);
    shared = make(count, lrAtStep(cur.schedule, count));
  }
  __syncthreads();
  return shared;
}

template <class C>
__device__ SgdCoeffs<C> sgdCoeffs(const SgdCoeffs<C> &given,
                                  const CurrentUpdate &cur) {
  return blockCoeffs<C>(given, cur, [&](int64_t, double lr) {
    return makeSgdCoeffs<C>(cur.opt, lr);
  });
}

template <class C>
__device__ AdamCoeffs<C> adamCoeffs(const AdamCoeffs<C> &given,
                                    const CurrentUpdate &cur) {
  return blockCoeffs<C>(given, cur, [&](int64_t count, double lr) {
    return makeAdamCoeffs<C>(cur.opt, count, lr);
  });
}

template <class T, class G, class L, class S>
__global__ void __launch_bounds__(kThreads)
    sgdKernel(SgdCoeffs<Compute<T>> k, CurrentUpdate cur, ParamOut<T, L> out,
              const G *grad, const S *gradScale, S *buf, int64_t n) {
  sgdSpan(sgdCoeffs(k, cur), out, grad, buf, n, loadScale<T>(gradScale),
          int64_t(blockIdx.x) * blockDim.x + threadIdx.x,
          int64_t(gridDim.x) * blockDim.x);
}

template <class T, class G, class L, class S>
__global__ void __launch_bounds__(kThreads)
    adamKernel(AdamCoeffs<Compute<T>> k, CurrentUpdate cur, ParamOut<T, L> out,
               const G *grad, const S *gradScale, S *m, S *v, int64_t n) {
  adamSpan(adamCoeffs(k, cur), out, grad, m, v, n, loadScale<T>(gradScale),
           int64_t(blockIdx.x) * blockDim.x + threadIdx.x,
           int64_t(gridDim.x) * blockDim.x);
}

/// The kernels' arguments for `at`: the caller's constants, or the device
/// step's to work out on the device.
CurrentUpdate currentUpdate(const CudaBackend &backend,
                            const tessel_optimizer &opt, const UpdateStep &at) {
  return {at.current ? backend.deviceStep() : nullptr, opt, at.schedule};
}

/// One launch of the SGD or Adam kernel for `n` elements; the states and
/// the scale are S.
template <class T, class G, class L, class S>
void launchUpdate(const CudaBackend &backend, const tessel_optimizer &opt,
                  const UpdateStep &at, ParamOut<T, L> out, const G *grad,
                  const S *scale, S *s0, S *s1, int64_t n) {
  using C = Compute<T>;
  unsigned blocks = gridFor((n + 3) / 4, kThreads);
  CurrentUpdate cur = currentUpdate(backend, opt, at);
  // With the context's step the host constants are placeholders.
  int64_t count = at.current ? 1 : at.count;
  if (opt.kind == TESSEL_OPT_ADAM || opt.kind == TESSEL_OPT_ADAMW)
    adamKernel<T, G, L, S><<<blocks, kThreads, 0, backend.stream()>>>(
        makeAdamCoeffs<C>(opt, count, at.lr), cur, out, grad, scale, s0, s1, n);
  else
    sgdKernel<T, G, L, S><<<blocks, kThreads, 0, backend.stream()>>>(
        makeSgdCoeffs<C>(opt, at.lr), cur, out, grad, scale, s0, n);
}

/// Block b updates chunks b, b + gridDim.x, ... of the table: T the
/// parameter (or f32 master) type, G the gradients', L the copy's, S the
/// states' and the scale's.
template <class T, class G, class L, class S>
__global__ void __launch_bounds__(kThreads)
    multiTensorAdamKernel(AdamCoeffs<Compute<T>> given, CurrentUpdate cur,
                          const AdamChunk *chunks, int64_t numChunks,
                          const S *gradScale) {
  AdamCoeffs<Compute<T>> k = adamCoeffs(given, cur);
  Compute<T> scale = loadScale<T>(gradScale);
  for (int64_t c = blockIdx.x; c < numChunks; c += gridDim.x) {
    AdamChunk chunk = chunks[c];
    adamSpan(k,
             ParamOut<T, L>{static_cast<T *>(chunk.param),
                            static_cast<L *>(chunk.copy)},
             static_cast<const G *>(chunk.grad), static_cast<S *>(chunk.m),
             static_cast<S *>(chunk.v), chunk.count, scale, threadIdx.x,
             blockDim.x);
  }
}

} // namespace

void CudaBackend::sumSquares(tessel_ctx *ctx, int32_t dtype, const void *x,
                             int64_t n, int32_t sumDtype, void *sum) {
  int64_t want = (n + 4 * kThreads - 1) / (4 * kThreads);
  unsigned blocks = unsigned(want < 1 ? 1 : want > kMaxSumBlocks ? kMaxSumBlocks
                                                                 : want);
  double *partials = nullptr;
  if (!check(ctx,
             cudaMallocAsync(reinterpret_cast<void **>(&partials),
                             blocks * sizeof(double), stream()),
             "cudaMallocAsync in tessel_sum_squares"))
    return;
  stored::visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    sumSquaresPartials<T><<<blocks, kThreads, 0, stream()>>>(
        static_cast<const T *>(x), n < 0 ? 0 : n, partials);
  });
  visitScalar(sumDtype, [&](auto tag) {
    using S = decltype(tag);
    sumSquaresFinish<<<1, kThreads, 0, stream()>>>(partials, blocks,
                                                   static_cast<S *>(sum));
  });
  checkLaunch(ctx, "tessel_sum_squares");
  check(ctx, cudaFreeAsync(partials, stream()),
        "cudaFreeAsync in tessel_sum_squares");
}

void CudaBackend::clipScale(tessel_ctx *ctx, int32_t dtype,
                            const void *sumSquares, double maxNorm,
                            const void *gradScale, void *scale) {
  visitScalar(dtype, [&](auto tag) {
    using S = decltype(tag);
    clipScaleKernel<<<1, 1, 0, stream()>>>(
        static_cast<const S *>(sumSquares), maxNorm,
        static_cast<const S *>(gradScale), static_cast<S *>(scale));
  });
  checkLaunch(ctx, "tessel_clip_scale");
}

void CudaBackend::optimizerUpdate(tessel_ctx *ctx, const tessel_optimizer &opt,
                                  const UpdateStep &at, int32_t dtype,
                                  void *param, const void *grad,
                                  const void *gradScale, void *state0,
                                  void *state1, int64_t n) {
  if (n <= 0)
    return;
  auto launch = [&](auto paramTag, auto stateTag) {
    using T = decltype(paramTag);
    using S = decltype(stateTag);
    launchUpdate(
        *this, opt, at, ParamOut<T, T>{static_cast<T *>(param), nullptr},
        static_cast<const T *>(grad), static_cast<const S *>(gradScale),
        static_cast<S *>(state0), static_cast<S *>(state1), n);
  };
  // f64 states come only with f64 parameters (the front's contract), so
  // no other pair is instantiated.
  if (at.stateDtype == TESSEL_F64)
    launch(double(), double());
  else
    stored::visitFloat(dtype, [&](auto tag) { launch(tag, float()); });
  checkLaunch(ctx, "tessel_optimizer_update");
}

void CudaBackend::optimizerUpdateMaster(
    tessel_ctx *ctx, const tessel_optimizer &opt, const UpdateStep &at,
    int32_t paramDtype, void *param, void *master, int32_t gradDtype,
    const void *grad, const void *gradScale, void *state0, void *state1,
    int64_t n) {
  if (n <= 0)
    return;
  auto launch = [&](auto copyTag, auto gradTag) {
    using L = decltype(copyTag);
    using G = decltype(gradTag);
    launchUpdate(*this, opt, at,
                 ParamOut<float, L>{static_cast<float *>(master),
                                    static_cast<L *>(param)},
                 static_cast<const G *>(grad),
                 static_cast<const float *>(gradScale),
                 static_cast<float *>(state0), static_cast<float *>(state1), n);
  };
  // The dtypes were checked (bf16 or f16 copies; f32, bf16 or f16 grads).
  auto withGrad = [&](auto copyTag) {
    if (gradDtype == TESSEL_F32)
      launch(copyTag, float());
    else if (gradDtype == TESSEL_BF16)
      launch(copyTag, BFloat());
    else
      launch(copyTag, Half());
  };
  if (paramDtype == TESSEL_BF16)
    withGrad(BFloat());
  else
    withGrad(Half());
  checkLaunch(ctx, "tessel_optimizer_update_master");
}

void CudaBackend::optimizerUpdateGroup(tessel_ctx *ctx,
                                       const tessel_optimizer &opt,
                                       const UpdateStep &at, int32_t paramDtype,
                                       int32_t gradDtype, bool master,
                                       const void *gradScale,
                                       const std::vector<UpdateTensor> &tensors) {
  if (opt.kind == TESSEL_OPT_ADAM || opt.kind == TESSEL_OPT_ADAMW)
    multiTensorAdamW(*this, ctx, opt, at, paramDtype, gradDtype, master,
                     tensors, gradScale);
  else
    Backend::optimizerUpdateGroup(ctx, opt, at, paramDtype, gradDtype, master,
                                  gradScale, tensors);
}

void tessel::cuda::multiTensorAdamW(CudaBackend &backend, tessel_ctx *ctx,
                                    const tessel_optimizer &opt,
                                    const UpdateStep &at, int32_t paramDtype,
                                    int32_t gradDtype, bool master,
                                    const std::vector<UpdateTensor> &tensors,
                                    const void *gradScale) {
  const char *entry = "tessel_optimizer_update_group_current";
  ChunkElementBytes bytes{master ? 4 : tessel_dtype_size(paramDtype),
                          tessel_dtype_size(gradDtype),
                          master ? tessel_dtype_size(paramDtype) : 0,
                          tessel_dtype_size(at.stateDtype)};
  std::vector<AdamChunk> chunks = adamChunks(tensors, master, bytes);
  if (chunks.empty())
    return;
  size_t tableBytes = chunks.size() * sizeof(AdamChunk);
  void *table = backend.stageHostArray(ctx, chunks.data(), tableBytes, entry);
  if (!table)
    return;
  int64_t numChunks = int64_t(chunks.size());
  unsigned blocks = gridFor(numChunks, 1);
  auto launch = [&](auto paramTag, auto gradTag, auto copyTag, auto stateTag) {
    using T = decltype(paramTag);
    using G = decltype(gradTag);
    using L = decltype(copyTag);
    using S = decltype(stateTag);
    multiTensorAdamKernel<T, G, L, S>
        <<<blocks, kThreads, 0, backend.stream()>>>(
            makeAdamCoeffs<Compute<T>>(opt, at.current ? 1 : at.count, at.lr),
            currentUpdate(backend, opt, at),
            static_cast<const AdamChunk *>(table), numChunks,
            static_cast<const S *>(gradScale));
  };
  if (at.stateDtype == TESSEL_F64) {
    // f64 states: f64 parameters and gradients, no master (checked).
    launch(double(), double(), double(), double());
  } else if (!master) {
    stored::visitFloat(paramDtype,
                       [&](auto tag) { launch(tag, tag, tag, float()); });
  } else {
    // The dtypes were checked (bf16 or f16 copies; f32, bf16 or f16 grads).
    auto withGrad = [&](auto copyTag) {
      if (gradDtype == TESSEL_F32)
        launch(float(), float(), copyTag, float());
      else if (gradDtype == TESSEL_BF16)
        launch(float(), BFloat(), copyTag, float());
      else
        launch(float(), Half(), copyTag, float());
    };
    if (paramDtype == TESSEL_BF16)
      withGrad(BFloat());
    else
      withGrad(Half());
  }
  CudaBackend::checkLaunch(ctx, entry);
  backend.releaseHostArray(ctx, table, entry);
}
