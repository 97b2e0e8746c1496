//===- loss.cu - Cross-entropy and the vocab-parallel loss pieces --------===//
//
// tessel_cross_entropy(_grad, _with_grad), tessel_label_logit and
// tessel_sub_label on the GPU. A row of logits belongs to one warp (classes
// <= 1024, eight rows a block) or one 512-thread block (longer rows, e.g. a
// 50k vocabulary). The row's threads read it once with 16-byte vectors
// (after a scalar head up to the first aligned element), each keeping a
// running (max, Σ e^(x - max)), and combine them in a fixed tree
// (loss_math.h): the loss is lse − x[label]. The mean and sum go through
// per-row losses in a temporary and one fixed-order reduction block, never
// float atomics, so the loss is the same bits on every run. The gradient
// recomputes the row's statistics and writes g·(e^(x − max)/Σ − onehot)
// while reading the row a second time: no probability buffer.
// tessel_cross_entropy_with_grad does both from one reading of the
// statistics, the gradient optionally over the logits (llm.c's fused
// classifier). Logits of 16 bits may have an f32 loss (the _f32 entries):
// the arithmetic is f32 either way. A logit soft cap (the _softcap
// entries, ABI 27) caps each logit as it is read (core/softcap.h) and
// multiplies each gradient element by the cap's slope: no capped copy.
// Label smoothing (the _smoothed entries, ABI 28) adds the row's sum of
// (capped) logits to its statistics and subtracts ε·g/V from every
// gradient element (core/loss_options.h): no logits-sized term.
//
//===----------------------------------------------------------------------===//

#include "cuda/backend.h"
#include "cuda/loss_math.h"

#include "core/context.h"
#include "core/labels.h"
#include "core/loss_options.h"

#include <algorithm>

namespace tessel {
namespace cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kBlockRow = 512;     // threads of a block that owns a row
constexpr int kWarpRowBlock = 256; // threads of a block of warp-owned rows
constexpr int64_t kWarpRowMaxClasses = 1024;
constexpr unsigned kFullMask = 0xffffffffu;

/// Threads of a block for rows owned by groups of G threads.
template <int G> constexpr int kBlockThreads = G == kWarp ? kWarpRowBlock : G;

__device__ int64_t loadLabel(const void *labels, bool labels64, int64_t r) {
  return labels64 ? static_cast<const int64_t *>(labels)[r]
                  : int64_t(static_cast<const int32_t *>(labels)[r]);
}

/// Elements before the first 16-byte aligned one of a row at `p` (the whole
/// row when shorter).
template <class T> __device__ int64_t alignedHead(const T *p, int64_t count) {
  int64_t head = int64_t((16 - reinterpret_cast<uintptr_t>(p) % 16) % 16) /
                 int64_t(sizeof(T));
  return head < count ? head : count;
}

/// Calls f(c, x[c]) (loaded in the compute type) for the elements of a row
/// that lane `lane` of a group of G threads owns.
template <int G, class T, class F>
__device__ void forRow(const T *x, int64_t classes, int lane, F &&f) {
  constexpr int N = 16 / sizeof(T);
  int64_t head = alignedHead(x, classes);
  int64_t packs = (classes - head) / N;
  for (int64_t c = lane; c < head; c += G)
    f(c, Elem<T>::load(x[c]));
  const Pack<T, N> *p = reinterpret_cast<const Pack<T, N> *>(x + head);
  for (int64_t v = lane; v < packs; v += G) {
    Pack<T, N> in = p[v];
#pragma unroll
    for (int k = 0; k < N; ++k)
      f(head + v * N + k, Elem<T>::load(in.v[k]));
  }
  for (int64_t c = head + packs * N + lane; c < classes; c += G)
    f(c, Elem<T>::load(x[c]));
}

/// y[c] = f(c, x[c]) over a row, vectorised when x and y share their
/// alignment within 16 bytes.
template <int G, class T, class F>
__device__ void mapRow(const T *x, T *y, int64_t classes, int lane, F &&f) {
  constexpr int N = 16 / sizeof(T);
  bool together =
      (reinterpret_cast<uintptr_t>(x) - reinterpret_cast<uintptr_t>(y)) % 16 ==
      0;
  int64_t head = together ? alignedHead(x, classes) : classes;
  int64_t packs = (classes - head) / N;
  for (int64_t c = lane; c < head; c += G)
    y[c] = Elem<T>::store(f(c, Elem<T>::load(x[c])));
  const Pack<T, N> *px = reinterpret_cast<const Pack<T, N> *>(x + head);
  Pack<T, N> *py = reinterpret_cast<Pack<T, N> *>(y + head);
  for (int64_t v = lane; v < packs; v += G) {
    Pack<T, N> in = px[v], out;
#pragma unroll
    for (int k = 0; k < N; ++k)
      out.v[k] = Elem<T>::store(f(head + v * N + k, Elem<T>::load(in.v[k])));
    py[v] = out;
  }
  for (int64_t c = head + packs * N + lane; c < classes; c += G)
    y[c] = Elem<T>::store(f(c, Elem<T>::load(x[c])));
}

/// Combines one value per thread of a group of G in a fixed tree; every
/// thread of the group gets the result. `scratch` (shared, kBlockRow / 32
/// entries) is used when the group is a whole block.
template <int G, class V, class Op>
__device__ V groupReduce(V v, Op op, V *scratch) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    v = op(v, __shfl_xor_sync(kFullMask, v, offset));
  if constexpr (G > kWarp) {
    constexpr int kWarps = G / kWarp;
    int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    __syncthreads(); // scratch is free (its last readers are done)
    if (lane == 0)
      scratch[warp] = v;
    __syncthreads();
    v = scratch[lane % kWarps]; // every lane then reduces all warps' values
#pragma unroll
    for (int offset = kWarps / 2; offset > 0; offset /= 2)
      v = op(v, __shfl_xor_sync(kFullMask, v, offset));
  }
  return v;
}

template <class C> struct RowStats {
  C max;
  double sum;       // Σ e^(x - max); NaN when max is not finite
  double logitSum;  // Σ x, only for a smoothed loss (0 otherwise)
};

/// The max and Σ e^(x - max) of a row of `classes` > 0, each x soft-capped
/// by `cap` (0: none), on every thread of its group; with `smoothed` also
/// Σ x (in f64, a fixed tree).
template <int G, class T>
__device__ RowStats<typename Elem<T>::Compute>
rowStats(const T *x, int64_t classes, int lane, void *scratch,
         typename Elem<T>::Compute cap, bool smoothed) {
  using C = typename Elem<T>::Compute;
  LseState<C> s = lseEmpty<C>();
  double logitSum = 0.0;
  forRow<G>(x, classes, lane, [&](int64_t, C v) {
    C y = softcapValue(v, cap);
    lseAdd(s, y);
    if (smoothed)
      logitSum += double(y);
  });
  auto add = [](double a, double b) { return a + b; };
  C rowMax = groupReduce<G>(
      s.max, [](C a, C b) { return a > b ? a : b; }, static_cast<C *>(scratch));
  double sum = groupReduce<G>(lseTerm(s, rowMax), add,
                              static_cast<double *>(scratch));
  if (smoothed) // (uniform over the group: every thread reduces)
    logitSum = groupReduce<G>(logitSum, add, static_cast<double *>(scratch));
  return RowStats<C>{rowMax, lseRowSum(rowMax, sum), logitSum};
}

/// The rows this group owns: warps of a block take consecutive rows.
template <int G> struct RowLoop {
  static constexpr int kGroups = kBlockThreads<G> / G;
  int lane = threadIdx.x % G;
  int64_t begin = int64_t(blockIdx.x) * kGroups + threadIdx.x / G;
  int64_t step = int64_t(gridDim.x) * kGroups;
};

/// Per-row losses: into `rowLoss` (f64, for the mean or sum) or, for
/// TESSEL_LOSS_NONE, rounded into `out` (L: T, or f32 for 16-bit T).
template <int G, class T, class L>
__global__ void __launch_bounds__(kBlockThreads<G>)
    crossEntropyKernel(const T *logits, const void *labels, bool labels64,
                       int64_t rows, int64_t classes, double *rowLoss, L *out,
                       typename Elem<T>::Compute cap, double smoothing,
                       DeviceError *errors) {
  __shared__ double scratch[kBlockRow / kWarp];
  RowLoop<G> loop;
  for (int64_t r = loop.begin; r < rows; r += loop.step) {
    const T *x = logits + r * classes;
    int64_t label = loadLabel(labels, labels64, r);
    double loss = 0.0; // what the CPU adds for a bad label's row
    if (label < 0 || label >= classes) {
      if (loop.lane == 0)
        recordDeviceError(errors, DeviceErrorKind::CrossEntropyLabel, label, r,
                          classes);
    } else {
      auto stats =
          rowStats<G>(x, classes, loop.lane, scratch, cap, smoothing > 0);
      loss = smoothedRowLoss(lseOfRow(stats.max, stats.sum),
                             double(softcapValue(Elem<T>::load(x[label]), cap)),
                             stats.logitSum, classes, smoothing);
    }
    if (loop.lane == 0) {
      if (rowLoss)
        rowLoss[r] = loss;
      else
        out[r] = fromDouble<L>(loss);
    }
  }
}

constexpr int kReduceThreads = 1024;

/// out[0] = Σ rowLoss (sum) or Σ / rows (mean; NaN for no rows), in a fixed
/// order: one block, strided partial sums, then a tree.
template <class T>
__global__ void __launch_bounds__(kReduceThreads)
    lossReduceKernel(const double *rowLoss, int64_t rows, bool mean, T *out) {
  __shared__ double scratch[kReduceThreads / kWarp];
  double s = 0.0;
  for (int64_t r = threadIdx.x; r < rows; r += kReduceThreads)
    s += rowLoss[r];
  s = groupReduce<kReduceThreads>(
      s, [](double a, double b) { return a + b; }, scratch);
  if (threadIdx.x == 0)
    out[0] = fromDouble<T>(!mean      ? s
                           : rows > 0 ? s / double(rows)
                                      : double(infinityF()) * 0.0);
}

/// A barrier of a row's group with memory ordering: what its threads read
/// before it is read before any of them writes after it.
template <int G> __device__ void groupSync() {
  if constexpr (G > kWarp)
    __syncthreads();
  else
    __syncwarp();
}

/// Each row's dlogits (T) from dloss (L: T, or f32 for 16-bit T) and, with
/// rowLoss or out, its loss as crossEntropyKernel writes it: the gradient's
/// kernel, and with the loss one pass of both, each row's statistics read
/// once (llm.c's fused classifier). dlogits may be the logits (in place):
/// every thread of the row's group has read the row, and the label's
/// logit, before any writes it. A bad label is recorded as `badLabel`.
template <int G, class T, class L>
__global__ void __launch_bounds__(kBlockThreads<G>)
    crossEntropyGradKernel(const T *logits, const void *labels, bool labels64,
                           const L *dloss, T *dlogits, int64_t rows,
                           int64_t classes, int32_t reduction,
                           double *rowLoss, L *out, DeviceErrorKind badLabel,
                           typename Elem<T>::Compute cap, double smoothing,
                           DeviceError *errors) {
  using C = typename Elem<T>::Compute;
  __shared__ double scratch[kBlockRow / kWarp];
  RowLoop<G> loop;
  const bool withLoss = rowLoss || out;
  const double dloss0 = toDouble(dloss[0]);
  for (int64_t r = loop.begin; r < rows; r += loop.step) {
    const T *x = logits + r * classes;
    T *dx = dlogits + r * classes;
    int64_t label = loadLabel(labels, labels64, r);
    double loss = 0.0; // what the CPU adds for a bad label's row
    if (label < 0 || label >= classes) {
      if (loop.lane == 0)
        recordDeviceError(errors, badLabel, label, r, classes);
      for (int64_t c = loop.lane; c < classes; c += G)
        dx[c] = Elem<T>::store(C(0));
    } else {
      double picked =
          withLoss ? double(softcapValue(Elem<T>::load(x[label]), cap)) : 0.0;
      auto stats = rowStats<G>(x, classes, loop.lane, scratch, cap,
                               withLoss && smoothing > 0);
      groupSync<G>();
      loss = smoothedRowLoss(lseOfRow(stats.max, stats.sum), picked,
                             stats.logitSum, classes, smoothing);
      double g = lossGradScale(
          reduction, reduction == TESSEL_LOSS_NONE ? toDouble(dloss[r]) : 0.0,
          dloss0, rows);
      C k = C(g / stats.sum);
      SmoothedGrad<C> target = smoothedGrad<C>(g, classes, smoothing);
      mapRow<G>(x, dx, classes, loop.lane, [=](int64_t c, C v) {
        C y = softcapValue(v, cap); // the cap's slope is 1 for cap 0
        return crossEntropyGradElement(y, stats.max, k, target, c == label) *
               softcapSlope(y, cap);
      });
    }
    if (withLoss && loop.lane == 0) {
      if (rowLoss)
        rowLoss[r] = loss;
      else
        out[r] = fromDouble<L>(loss);
    }
  }
}

/// Blocks for `rows` rows of groups of G, capped (the kernels loop).
template <int G> unsigned rowBlocks(int64_t rows) {
  constexpr int64_t kGroups = kBlockThreads<G> / G;
  int64_t blocks = (rows + kGroups - 1) / kGroups;
  return unsigned(std::min<int64_t>(std::max<int64_t>(blocks, 1), 1 << 20));
}

/// tessel_vocab_loss_stats: each row's max, Σ e^(y − max) (0 without a
/// logit above -inf), label logit (+0 in another block) and Σ y of the
/// block's soft-capped y, from one reading of the row.
template <int G, class T, class S>
__global__ void __launch_bounds__(kBlockThreads<G>)
    vocabStatsKernel(const T *logits, const void *labels, bool labels64,
                     int64_t rows, int64_t classes, int64_t classOffset,
                     int64_t totalClasses, S *max, S *sumExp, S *labelLogit,
                     S *logitSum, typename Elem<T>::Compute cap,
                     DeviceError *errors) {
  using C = typename Elem<T>::Compute;
  __shared__ double scratch[kBlockRow / kWarp];
  RowLoop<G> loop;
  for (int64_t r = loop.begin; r < rows; r += loop.step) {
    const T *x = logits + r * classes;
    auto stats = rowStats<G>(x, classes, loop.lane, scratch, cap, true);
    if (loop.lane != 0)
      continue;
    int64_t label = loadLabel(labels, labels64, r);
    int64_t col = labelColumn(label, classes, classOffset, totalClasses);
    if (col == -2)
      recordDeviceError(errors, DeviceErrorKind::LabelLogitLabel, label, r,
                        totalClasses);
    max[r] = Elem<S>::store(stats.max);
    sumExp[r] = fromDouble<S>(stats.max == negInfinity<C>() ? 0.0 : stats.sum);
    labelLogit[r] = col >= 0
                        ? Elem<S>::store(softcapValue(Elem<T>::load(x[col]), cap))
                        : fromDouble<S>(0.0);
    logitSum[r] = fromDouble<S>(stats.logitSum);
  }
}

/// tessel_vocab_loss_grad: the block's gradient from the whole rows' max
/// and sum, each row's g, the cap's slope and the smoothed target.
template <int G, class T, class S>
__global__ void __launch_bounds__(kBlockThreads<G>)
    vocabGradKernel(const T *logits, const void *labels, bool labels64,
                    const S *max, const S *sumExp, const S *rowGrad,
                    T *dlogits, int64_t rows, int64_t classes,
                    int64_t classOffset, int64_t totalClasses,
                    typename Elem<T>::Compute cap, double smoothing,
                    DeviceError *errors) {
  using C = typename Elem<T>::Compute;
  RowLoop<G> loop;
  for (int64_t r = loop.begin; r < rows; r += loop.step) {
    int64_t label = loadLabel(labels, labels64, r);
    int64_t col = labelColumn(label, classes, classOffset, totalClasses);
    if (col == -2 && loop.lane == 0)
      recordDeviceError(errors, DeviceErrorKind::SubLabelLabel, label, r,
                        totalClasses);
    double g = toDouble(rowGrad[r]);
    C rowMax = C(Elem<S>::load(max[r]));
    C k = C(g / toDouble(sumExp[r]));
    SmoothedGrad<C> target = smoothedGrad<C>(g, totalClasses, smoothing);
    mapRow<G>(logits + r * classes, dlogits + r * classes, classes, loop.lane,
              [=](int64_t c, C v) {
                C y = softcapValue(v, cap);
                return crossEntropyGradElement(y, rowMax, k, target,
                                               c == col) *
                       softcapSlope(y, cap);
              });
  }
}

/// out[r] = x[r, label − offset] as stored bits, or +0 (every float format's
/// zero bits) when another block holds the label. A label outside
/// [0, totalClasses) gives 0 and is recorded, as the CPU sets its error.
template <class S>
__global__ void labelLogitKernel(const S *x, const void *labels, bool labels64,
                                 S *out, int64_t rows, int64_t classes,
                                 int64_t classOffset, int64_t totalClasses,
                                 DeviceError *errors) {
  for (int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < rows;
       r += int64_t(gridDim.x) * blockDim.x) {
    int64_t label = loadLabel(labels, labels64, r);
    int64_t c = labelColumn(label, classes, classOffset, totalClasses);
    if (c == -2)
      recordDeviceError(errors, DeviceErrorKind::LabelLogitLabel, label, r,
                        totalClasses);
    out[r] = c >= 0 ? x[r * classes + c] : S(0);
  }
}

/// tessel_mask_labels: each label and its weight (loss_math.h's maskLabel).
template <class T>
__global__ void maskLabelsKernel(const void *labels, bool labels64,
                                 int64_t ignoreIndex, void *safe, T *weights,
                                 int64_t n) {
  using C = typename Elem<T>::Compute;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    MaskedLabel m = maskLabel(loadLabel(labels, labels64, i), ignoreIndex);
    if (labels64)
      static_cast<int64_t *>(safe)[i] = m.label;
    else
      static_cast<int32_t *>(safe)[i] = int32_t(m.label);
    weights[i] = Elem<T>::store(C(m.weight ? 1 : 0));
  }
}

/// out[r, label − offset] −= values[r] in the compute type, for the rows
/// whose label this block holds (out already holds x). A label outside
/// [0, totalClasses) leaves the row and is recorded, as on the CPU.
template <class T>
__global__ void subLabelKernel(const void *labels, bool labels64,
                               const T *values, T *out, int64_t rows,
                               int64_t classes, int64_t classOffset,
                               int64_t totalClasses, DeviceError *errors) {
  for (int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < rows;
       r += int64_t(gridDim.x) * blockDim.x) {
    int64_t label = loadLabel(labels, labels64, r);
    int64_t c = labelColumn(label, classes, classOffset, totalClasses);
    if (c == -2)
      recordDeviceError(errors, DeviceErrorKind::SubLabelLabel, label, r,
                        totalClasses);
    if (c < 0)
      continue;
    T &y = out[r * classes + c];
    y = Elem<T>::store(Elem<T>::load(y) - Elem<T>::load(values[r]));
  }
}

/// f(std::integral_constant<int, G>()) with G the row group for `classes`.
template <class F> void visitRowGroup(int64_t classes, F &&f) {
  if (classes <= kWarpRowMaxClasses)
    f(std::integral_constant<int, kWarp>());
  else
    f(std::integral_constant<int, kBlockRow>());
}

} // namespace
} // namespace cuda
} // namespace tessel

using namespace tessel;
using namespace tessel::cuda;

namespace {

/// f(T(), L()): the logits' stored type and the loss's, T's own or f32
/// (the front allows f32 only for 16-bit logits).
template <class F>
void visitLossTypes(int32_t dtype, int32_t lossDtype, F &&f) {
  visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    if (lossDtype == dtype)
      f(T(), T());
    else if constexpr (sizeof(T) == 2)
      f(T(), float());
  });
}

/// f(T(), L(), group): visitLossTypes's types and visitRowGroup's group of
/// `classes`, for a launch of a row kernel.
template <class F>
void visitRowLaunch(int32_t dtype, int32_t wideDtype, int64_t classes,
                    F &&f) {
  visitLossTypes(dtype, wideDtype, [&](auto tag, auto wideTag) {
    visitRowGroup(classes, [&](auto group) { f(tag, wideTag, group); });
  });
}

/// The loss out of a row kernel: launchRows(rowLoss) writes each row's
/// loss into rowLoss (f64, a temporary, for the mean or sum) or, with
/// rowLoss null (none), into out; then one block reduces them in a fixed
/// order.
template <class L, class LaunchRows>
void lossOfRows(CudaBackend &be, tessel_ctx *ctx, const char *what,
                int64_t rows, int32_t reduction, L *out,
                LaunchRows &&launchRows) {
  double *rowLoss = nullptr;
  if (reduction != TESSEL_LOSS_NONE && rows > 0 &&
      !CudaBackend::check(ctx,
                          cudaMallocAsync(reinterpret_cast<void **>(&rowLoss),
                                          size_t(rows) * sizeof(double),
                                          be.stream()),
                          what))
    return;
  if (rows > 0) {
    launchRows(rowLoss);
    CudaBackend::checkLaunch(ctx, what);
  }
  if (reduction != TESSEL_LOSS_NONE) {
    lossReduceKernel<<<1, kReduceThreads, 0, be.stream()>>>(
        rowLoss, rows, reduction == TESSEL_LOSS_MEAN, out);
    CudaBackend::checkLaunch(ctx, what);
  }
  if (rowLoss)
    CudaBackend::check(ctx, cudaFreeAsync(rowLoss, be.stream()), what);
}

} // namespace

void CudaBackend::crossEntropy(tessel_ctx *ctx, int32_t dtype,
                               int32_t lossDtype, int32_t labelDtype,
                               const void *logits, const void *labels,
                               void *out, int64_t rows, int64_t classes,
                               int32_t reduction, LossOptions options) {
  bool labels64 = labelDtype == TESSEL_I64;
  visitLossTypes(dtype, lossDtype, [&](auto tag, auto lossTag) {
    using T = decltype(tag);
    using L = decltype(lossTag);
    L *o = static_cast<L *>(out);
    lossOfRows(*this, ctx, "tessel_cross_entropy", rows, reduction, o,
               [&](double *rowLoss) {
                 visitRowGroup(classes, [&](auto group) {
                   constexpr int G = decltype(group)::value;
                   crossEntropyKernel<G>
                       <<<rowBlocks<G>(rows), kBlockThreads<G>, 0, stream()>>>(
                           static_cast<const T *>(logits), labels, labels64,
                           rows, classes, rowLoss, o,
                           typename Elem<T>::Compute(options.softcap),
                           options.smoothing, deviceErrors());
                 });
               });
  });
}

void CudaBackend::crossEntropyWithGrad(tessel_ctx *ctx, int32_t dtype,
                                       int32_t lossDtype, int32_t labelDtype,
                                       const void *logits, const void *labels,
                                       const void *dloss, void *out,
                                       void *dlogits, int64_t rows,
                                       int64_t classes, int32_t reduction,
                                       LossOptions options) {
  bool labels64 = labelDtype == TESSEL_I64;
  visitLossTypes(dtype, lossDtype, [&](auto tag, auto lossTag) {
    using T = decltype(tag);
    using L = decltype(lossTag);
    L *o = static_cast<L *>(out);
    lossOfRows(*this, ctx, "tessel_cross_entropy_with_grad", rows, reduction,
               o, [&](double *rowLoss) {
                 visitRowGroup(classes, [&](auto group) {
                   constexpr int G = decltype(group)::value;
                   crossEntropyGradKernel<G>
                       <<<rowBlocks<G>(rows), kBlockThreads<G>, 0, stream()>>>(
                           static_cast<const T *>(logits), labels, labels64,
                           static_cast<const L *>(dloss),
                           static_cast<T *>(dlogits), rows, classes,
                           reduction, rowLoss, o,
                           DeviceErrorKind::CrossEntropyLabel,
                           typename Elem<T>::Compute(options.softcap),
                           options.smoothing, deviceErrors());
                 });
               });
  });
}

void CudaBackend::crossEntropyGrad(tessel_ctx *ctx, int32_t dtype,
                                   int32_t lossDtype, int32_t labelDtype,
                                   const void *logits, const void *labels,
                                   const void *dloss, void *dlogits,
                                   int64_t rows, int64_t classes,
                                   int32_t reduction, LossOptions options) {
  if (rows <= 0)
    return;
  bool labels64 = labelDtype == TESSEL_I64;
  visitRowLaunch(dtype, lossDtype, classes,
                 [&](auto tag, auto lossTag, auto group) {
    using T = decltype(tag);
    using L = decltype(lossTag);
    constexpr int G = decltype(group)::value;
    crossEntropyGradKernel<G>
        <<<rowBlocks<G>(rows), kBlockThreads<G>, 0, stream()>>>(
            static_cast<const T *>(logits), labels, labels64,
            static_cast<const L *>(dloss), static_cast<T *>(dlogits), rows,
            classes, reduction, nullptr, static_cast<L *>(nullptr),
            DeviceErrorKind::CrossEntropyGradLabel,
            typename Elem<T>::Compute(options.softcap), options.smoothing,
            deviceErrors());
  });
  checkLaunch(ctx, "tessel_cross_entropy_grad");
}

void CudaBackend::vocabLossStats(tessel_ctx *ctx, int32_t dtype,
                                 int32_t statsDtype, int32_t labelDtype,
                                 const void *logits, const void *labels,
                                 VocabStats stats, int64_t rows,
                                 int64_t classes, int64_t classOffset,
                                 int64_t totalClasses, double softcap) {
  if (rows <= 0)
    return;
  bool labels64 = labelDtype == TESSEL_I64;
  visitRowLaunch(dtype, statsDtype, classes,
                 [&](auto tag, auto statsTag, auto group) {
    using T = decltype(tag);
    using S = decltype(statsTag);
    constexpr int G = decltype(group)::value;
    vocabStatsKernel<G><<<rowBlocks<G>(rows), kBlockThreads<G>, 0, stream()>>>(
        static_cast<const T *>(logits), labels, labels64, rows, classes,
        classOffset, totalClasses, static_cast<S *>(stats.max),
        static_cast<S *>(stats.sumExp), static_cast<S *>(stats.labelLogit),
        static_cast<S *>(stats.logitSum), typename Elem<T>::Compute(softcap),
        deviceErrors());
  });
  checkLaunch(ctx, "tessel_vocab_loss_stats");
}

void CudaBackend::vocabLossGrad(tessel_ctx *ctx, int32_t dtype,
                                int32_t statsDtype, int32_t labelDtype,
                                const void *logits, const void *labels,
                                const void *max, const void *sumExp,
                                const void *rowGrad, void *dlogits,
                                int64_t rows, int64_t classes,
                                int64_t classOffset, int64_t totalClasses,
                                LossOptions options) {
  if (rows <= 0 || classes <= 0)
    return;
  bool labels64 = labelDtype == TESSEL_I64;
  visitRowLaunch(dtype, statsDtype, classes,
                 [&](auto tag, auto statsTag, auto group) {
    using T = decltype(tag);
    using S = decltype(statsTag);
    constexpr int G = decltype(group)::value;
    vocabGradKernel<G><<<rowBlocks<G>(rows), kBlockThreads<G>, 0, stream()>>>(
        static_cast<const T *>(logits), labels, labels64,
        static_cast<const S *>(max), static_cast<const S *>(sumExp),
        static_cast<const S *>(rowGrad), static_cast<T *>(dlogits), rows,
        classes, classOffset, totalClasses,
        typename Elem<T>::Compute(options.softcap), options.smoothing,
        deviceErrors());
  });
  checkLaunch(ctx, "tessel_vocab_loss_grad");
}

// A label outside [0, totalClasses) is written as the CPU writes it (0 for
// labelLogit, x's row for subLabel) and reported on the context with the
// CPU's wording (DeviceErrorKind::LabelLogitLabel, SubLabelLabel).
void CudaBackend::labelLogit(tessel_ctx *ctx, int32_t dtype, int32_t labelDtype,
                             const void *logits, const void *labels, void *out,
                             int64_t rows, int64_t classes, int64_t classOffset,
                             int64_t totalClasses) {
  if (rows <= 0)
    return;
  bool labels64 = labelDtype == TESSEL_I64;
  visitFloat(dtype, [&](auto tag) {
    // The stored bits move as they are: an unsigned integer of the width.
    using S = std::conditional_t<
        sizeof(decltype(tag)) == 2, uint16_t,
        std::conditional_t<sizeof(decltype(tag)) == 4, uint32_t, uint64_t>>;
    labelLogitKernel<<<gridFor(rows), 256, 0, stream()>>>(
        static_cast<const S *>(logits), labels, labels64, static_cast<S *>(out),
        rows, classes, classOffset, totalClasses, deviceErrors());
  });
  checkLaunch(ctx, "tessel_label_logit");
}

void CudaBackend::maskLabels(tessel_ctx *ctx, int32_t labelDtype,
                             int32_t dtype, const void *labels,
                             int64_t ignoreIndex, void *safe, void *weights,
                             int64_t n) {
  if (n <= 0)
    return;
  visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    maskLabelsKernel<<<gridFor(n), 256, 0, stream()>>>(
        labels, labelDtype == TESSEL_I64, ignoreIndex, safe,
        static_cast<T *>(weights), n);
  });
  checkLaunch(ctx, "tessel_mask_labels");
}

void CudaBackend::subLabel(tessel_ctx *ctx, int32_t dtype, int32_t labelDtype,
                           const void *x, const void *labels,
                           const void *values, void *out, int64_t rows,
                           int64_t classes, int64_t classOffset,
                           int64_t totalClasses) {
  const char *what = "tessel_sub_label";
  if (rows <= 0 || classes <= 0)
    return;
  bool labels64 = labelDtype == TESSEL_I64;
  visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    if (out != x &&
        !check(ctx,
               cudaMemcpyAsync(out, x, size_t(rows * classes) * sizeof(T),
                               cudaMemcpyDeviceToDevice, stream()),
               what))
      return;
    subLabelKernel<<<gridFor(rows), 256, 0, stream()>>>(
        labels, labels64, static_cast<const T *>(values), static_cast<T *>(out),
        rows, classes, classOffset, totalClasses, deviceErrors());
    checkLaunch(ctx, what);
  });
}
