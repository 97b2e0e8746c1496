//===- batch_norm.cu - Batch norm, forward and backward -------------------===//
//
// Batch norm and its gradient over [outer, channels, inner], for f32, f64,
// and f16/bf16 storage computed in f32, matching the CPU backend
// (cpu/norm.cpp, cpu/backward.cpp) within rounding. The per-channel
// statistics and the gradient's sums are norm_device.cuh's deterministic
// channel sums in f64 (fixed chunks, then each channel's chunks added in
// order; no float atomics); an elementwise kernel then applies them.
//
//===----------------------------------------------------------------------===//

#include "cuda/backend.h"
#include "cuda/norm_device.cuh"
#include "cuda/norm_math.h"

#include <cstdint>

using namespace tessel;
using namespace tessel::cuda;
using namespace tessel::cuda::norm_detail;

namespace {

/// Batch norm's per-channel values, doubles in `stats`: mean [channels],
/// rstd, Σdy / N, Σdy·x̂ / N.
enum BatchStat { kMean = 0, kRstd = 1, kMeanDy = 2, kMeanDyXhat = 3 };

template <class T> struct SumX {
  const T *x;
  __device__ void operator()(int64_t idx, int64_t, int64_t, double &a,
                             double &) const {
    a += double(Elem<T>::load(x[idx]));
  }
};

template <class T> struct SumSquaredDeviation {
  const T *x;
  const double *mean;
  __device__ void operator()(int64_t idx, int64_t, int64_t c, double &a,
                             double &) const {
    double d = double(Elem<T>::load(x[idx])) - mean[c];
    a += d * d;
  }
};

struct FinishMean {
  double *stats;
  double count;
  __device__ void operator()(int64_t c, double a, double) const {
    stats[c] = a / count;
  }
};

struct FinishRstd {
  double *rstd;
  double count, eps;
  __device__ void operator()(int64_t c, double a, double) const {
    rstd[c] = 1.0 / sqrt(a / count + eps);
  }
};

template <class T> struct BatchNormGradTerms {
  const T *x, *dy;
  const double *stats;
  int64_t channels;
  __device__ void operator()(int64_t idx, int64_t, int64_t c, double &a,
                             double &b) const {
    using C = Compute<T>;
    C xh = (C(Elem<T>::load(x[idx])) - C(stats[kMean * channels + c])) *
           C(stats[kRstd * channels + c]);
    double d = double(Elem<T>::load(dy[idx]));
    a += d;
    b += d * double(xh);
  }
};

template <class T> struct FinishBatchNormGrad {
  double *stats;
  int64_t channels;
  double count;
  T *dgamma, *dbeta;
  __device__ void operator()(int64_t c, double a, double b) const {
    stats[kMeanDy * channels + c] = a / count;
    stats[kMeanDyXhat * channels + c] = b / count;
    if (dgamma)
      dgamma[c] = fromDouble<T>(b);
    if (dbeta)
      dbeta[c] = fromDouble<T>(a);
  }
};

template <class I, class T>
__global__ void batchNormApplyKernel(const T *x, const T *gamma, const T *beta,
                                     const double *stats, T *y, int64_t total,
                                     int64_t channels, int64_t inner) {
  using C = Compute<T>;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t c = int64_t(I(i) / I(inner) % I(channels));
    C m = C(stats[kMean * channels + c]), rstd = C(stats[kRstd * channels + c]);
    C g = gamma ? C(Elem<T>::load(gamma[c])) : C(1);
    C b = beta ? C(Elem<T>::load(beta[c])) : C(0);
    y[i] = Elem<T>::store((C(Elem<T>::load(x[i])) - m) * rstd * g + b);
  }
}

template <class I, class T>
__global__ void batchNormGradApplyKernel(const T *x, const T *gamma,
                                         const T *dy, const double *stats,
                                         T *dx, int64_t total, int64_t channels,
                                         int64_t inner) {
  using C = Compute<T>;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t c = int64_t(I(i) / I(inner) % I(channels));
    C m = C(stats[kMean * channels + c]), rstd = C(stats[kRstd * channels + c]);
    C g = gamma ? C(Elem<T>::load(gamma[c])) : C(1);
    C xh = (C(Elem<T>::load(x[i])) - m) * rstd;
    dx[i] = Elem<T>::store(normDx(g * rstd, C(Elem<T>::load(dy[i])),
                                  C(stats[kMeanDy * channels + c]), xh,
                                  C(stats[kMeanDyXhat * channels + c])));
  }
}

/// Batch norm's mean and rstd per channel into stats (kMean, kRstd).
template <class T>
bool batchStatistics(tessel_ctx *ctx, const char *what, cudaStream_t stream,
                     const T *x, int64_t outer, int64_t channels,
                     int64_t inner, double eps, double *stats,
                     double *partials) {
  double count = double(outer * inner);
  return channelSums(ctx, what, stream, outer, channels, inner, partials,
                     SumX<T>{x}, FinishMean{stats, count}) &&
         channelSums(ctx, what, stream, outer, channels, inner, partials,
                     SumSquaredDeviation<T>{x, stats},
                     FinishRstd{stats + kRstd * channels, count, eps});
}

/// Scratch for `stats` BatchStat rows of doubles per channel, then the
/// partials channelSums needs; null with the error set.
double *statsScratch(tessel_ctx *ctx, const char *what, cudaStream_t stream,
                     int64_t outer, int64_t channels, int64_t inner,
                     int64_t stats) {
  size_t partialBytes =
      size_t(sumChunks(outer, inner)) * size_t(channels) * 16;
  return static_cast<double *>(scratch(
      ctx, stream, size_t(channels) * size_t(stats) * 8 + partialBytes, what));
}

using stored::visitFloat;

} // namespace

void CudaBackend::batchNorm(tessel_ctx *ctx, int32_t dtype, const void *x,
                            const void *gamma, const void *beta, void *y,
                            int64_t outer, int64_t channels, int64_t inner,
                            double eps) {
  const char *what = "tessel_batch_norm";
  if (channels == 0)
    return;
  visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    double *stats =
        statsScratch(ctx, what, stream(), outer, channels, inner, 2);
    if (!stats)
      return;
    if (batchStatistics(ctx, what, stream(), in<T>(x), outer, channels, inner,
                        eps, stats, stats + 2 * channels)) {
      int64_t total = outer * channels * inner;
      unsigned grid = gridOf(total, 256);
      visitIndex(total, [&](auto index) {
        batchNormApplyKernel<decltype(index)><<<grid, 256, 0, stream()>>>(
            in<T>(x), in<T>(gamma), in<T>(beta), stats, out<T>(y), total,
            channels, inner);
      });
      checkLaunch(ctx, what);
    }
    cudaFreeAsync(stats, stream());
  });
}

void CudaBackend::batchNormGrad(tessel_ctx *ctx, int32_t dtype, const void *x,
                                const void *gamma, const void *dy, void *dx,
                                void *dgamma, void *dbeta, int64_t outer,
                                int64_t channels, int64_t inner, double eps) {
  const char *what = "tessel_batch_norm_grad";
  if (channels == 0)
    return;
  visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    if (outer * inner == 0) { // no values: the sums are empty
      size_t bytes = size_t(channels) * sizeof(T);
      if (dgamma)
        check(ctx, cudaMemsetAsync(dgamma, 0, bytes, stream()), what);
      if (dbeta)
        check(ctx, cudaMemsetAsync(dbeta, 0, bytes, stream()), what);
      return;
    }
    double *stats =
        statsScratch(ctx, what, stream(), outer, channels, inner, 4);
    if (!stats)
      return;
    double *partials = stats + 4 * channels;
    if (batchStatistics(ctx, what, stream(), in<T>(x), outer, channels, inner,
                        eps, stats, partials) &&
        channelSums(ctx, what, stream(), outer, channels, inner, partials,
                    BatchNormGradTerms<T>{in<T>(x), in<T>(dy), stats, channels},
                    FinishBatchNormGrad<T>{stats, channels,
                                           double(outer * inner),
                                           out<T>(dgamma), out<T>(dbeta)})) {
      int64_t total = outer * channels * inner;
      unsigned grid = gridOf(total, 256);
      visitIndex(total, [&](auto index) {
        batchNormGradApplyKernel<decltype(index)><<<grid, 256, 0, stream()>>>(
            in<T>(x), in<T>(gamma), in<T>(dy), stats, out<T>(dx), total,
            channels, inner);
      });
      checkLaunch(ctx, what);
    }
    cudaFreeAsync(stats, stream());
  });
}
