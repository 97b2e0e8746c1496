//===- norm.cpp - Softmax, layer/batch norm and cross-entropy kernels -----===//
//
// Element math runs in the compute type (f32, or f64 for f64); sums and
// statistics accumulate in f64 so long rows lose nothing to rounding.
//
// The f32 kernels run rows through the vectorised helpers of vecmath.h:
// sums in f32 lanes flushed to f64 every few hundred elements, and the
// polynomial fastExp, on AVX2 + FMA where the host has them.
//
//===----------------------------------------------------------------------===//

#include "core/loss_options.h"
#include "cpu/backend.h"
#include "cpu/internal.h"
#include "cpu/vecmath.h"

#include <algorithm>
#include <vector>

using namespace tessel::cpu;

namespace {

template <class T> const T *in(const void *p) { return static_cast<const T *>(p); }
template <class T> T *out(void *p) { return static_cast<T *>(p); }

template <class T>
void softmaxImpl(const T *x, T *y, int64_t outer, int64_t dim, int64_t inner) {
  using C = typename Elem<T>::Compute;
  // Work on a whole [dim, inner] slab at once so the inner index stays the
  // contiguous, vectorisable one.
  std::vector<C> mx(static_cast<size_t>(inner)), e(static_cast<size_t>(dim * inner));
  std::vector<double> sum(static_cast<size_t>(inner));
  for (int64_t o = 0; o < outer; ++o) {
    const T *xs = x + o * dim * inner;
    T *ys = y + o * dim * inner;
    std::fill(mx.begin(), mx.end(), -std::numeric_limits<C>::infinity());
    std::fill(sum.begin(), sum.end(), 0.0);
    for (int64_t d = 0; d < dim; ++d)
      for (int64_t j = 0; j < inner; ++j)
        mx[size_t(j)] = std::max(mx[size_t(j)], C(Elem<T>::load(xs[d * inner + j])));
    for (int64_t d = 0; d < dim; ++d)
      for (int64_t j = 0; j < inner; ++j) {
        // Subtracting the max keeps exp in (0, 1]: no overflow.
        C v = std::exp(C(Elem<T>::load(xs[d * inner + j])) - mx[size_t(j)]);
        e[size_t(d * inner + j)] = v;
        sum[size_t(j)] += v;
      }
    for (int64_t d = 0; d < dim; ++d)
      for (int64_t j = 0; j < inner; ++j)
        ys[d * inner + j] =
            Elem<T>::store(C(e[size_t(d * inner + j)] / sum[size_t(j)]));
  }
}

/// Softmax over rows of a contiguous f32 [outer, dim] (inner == 1).
void softmaxRowsF32(const float *x, float *y, int64_t outer, int64_t dim) {
  dispatch([&]() TESSEL_INLINE {
    for (int64_t o = 0; o < outer; ++o)
      softmaxRow(x + o * dim, y + o * dim, dim, dim);
  });
}

void layerNormF32(const float *x, const float *gamma, const float *beta,
                  float *y, int64_t rows, int64_t cols, double eps, bool rms) {
  dispatch([&]() TESSEL_INLINE {
    for (int64_t r = 0; r < rows; ++r) {
      const float *xs = x + r * cols;
      float *ys = y + r * cols;
      float m, rstd;
      layerNormRowStats(xs, cols, eps, rms, m, rstd);
      if (gamma && beta)
        for (int64_t j = 0; j < cols; ++j)
          ys[j] = (xs[j] - m) * rstd * gamma[j] + beta[j];
      else if (gamma)
        for (int64_t j = 0; j < cols; ++j)
          ys[j] = (xs[j] - m) * rstd * gamma[j];
      else if (beta)
        for (int64_t j = 0; j < cols; ++j)
          ys[j] = (xs[j] - m) * rstd + beta[j];
      else
        for (int64_t j = 0; j < cols; ++j)
          ys[j] = (xs[j] - m) * rstd;
    }
  });
}

template <class T>
void layerNormImpl(const T *x, const T *gamma, const T *beta, T *y,
                   int64_t rows, int64_t cols, double eps, bool rms) {
  using C = typename Elem<T>::Compute;
  for (int64_t r = 0; r < rows; ++r) {
    const T *xs = x + r * cols;
    T *ys = y + r * cols;
    double mean = 0.0;
    if (!rms) {
      for (int64_t j = 0; j < cols; ++j)
        mean += double(Elem<T>::load(xs[j]));
      mean /= double(cols);
    }
    // Two passes: var = E[(x - mean)²] avoids E[x²] - mean² cancellation.
    double var = 0.0;
    for (int64_t j = 0; j < cols; ++j) {
      double dv = double(Elem<T>::load(xs[j])) - mean;
      var += dv * dv;
    }
    var /= double(cols);
    C m = C(mean), rstd = C(1.0 / std::sqrt(var + eps));
    for (int64_t j = 0; j < cols; ++j) {
      C v = (C(Elem<T>::load(xs[j])) - m) * rstd;
      if (gamma)
        v *= C(Elem<T>::load(gamma[j]));
      if (beta)
        v += C(Elem<T>::load(beta[j]));
      ys[j] = Elem<T>::store(v);
    }
  }
}

template <class T>
void batchNormImpl(const T *x, const T *gamma, const T *beta, T *y,
                   int64_t outer, int64_t channels, int64_t inner, double eps) {
  using C = typename Elem<T>::Compute;
  std::vector<double> mean(static_cast<size_t>(channels), 0.0), var(static_cast<size_t>(channels), 0.0);
  double count = double(outer * inner);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c) {
      const T *xs = x + (o * channels + c) * inner;
      for (int64_t i = 0; i < inner; ++i)
        mean[size_t(c)] += double(Elem<T>::load(xs[i]));
    }
  for (double &m : mean)
    m /= count;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c) {
      const T *xs = x + (o * channels + c) * inner;
      for (int64_t i = 0; i < inner; ++i) {
        double dv = double(Elem<T>::load(xs[i])) - mean[size_t(c)];
        var[size_t(c)] += dv * dv;
      }
    }
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c) {
      C m = C(mean[size_t(c)]);
      C rstd = C(1.0 / std::sqrt(var[size_t(c)] / count + eps));
      C g = gamma ? C(Elem<T>::load(gamma[c])) : C(1);
      C b = beta ? C(Elem<T>::load(beta[c])) : C(0);
      const T *xs = x + (o * channels + c) * inner;
      T *ys = y + (o * channels + c) * inner;
      for (int64_t i = 0; i < inner; ++i)
        ys[i] = Elem<T>::store((C(Elem<T>::load(xs[i])) - m) * rstd * g + b);
    }
}

} // namespace

void CpuBackend::softmax(tessel_ctx *, int32_t dtype, const void *x, void *y,
                         int64_t outer, int64_t dim, int64_t inner) {
  visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same<T, float>::value) {
      if (inner == 1) {
        softmaxRowsF32(in<float>(x), out<float>(y), outer, dim);
        return;
      }
    }
    softmaxImpl(in<T>(x), out<T>(y), outer, dim, inner);
  });
}

void CpuBackend::layerNorm(tessel_ctx *, int32_t dtype, const void *x,
                           const void *gamma, const void *beta, void *y,
                           int64_t rows, int64_t cols, double eps, bool rms) {
  visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same<T, float>::value) {
      layerNormF32(in<float>(x), in<float>(gamma), in<float>(beta),
                   out<float>(y), rows, cols, eps, rms);
      return;
    }
    layerNormImpl(in<T>(x), in<T>(gamma), in<T>(beta), out<T>(y), rows, cols,
                  eps, rms);
  });
}

void CpuBackend::batchNorm(tessel_ctx *, int32_t dtype, const void *x,
                           const void *gamma, const void *beta, void *y,
                           int64_t outer, int64_t channels, int64_t inner,
                           double eps) {
  visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    batchNormImpl(in<T>(x), in<T>(gamma), in<T>(beta), out<T>(y), outer,
                  channels, inner, eps);
  });
}

namespace {

/// log Σ e^x of one row in T's compute type (f32 rows through the
/// vectorised log-sum-exp).
template <class T> double logSumExpOf(const T *xs, int64_t classes) {
  using C = typename Elem<T>::Compute;
  // log Σ exp(x) = max + log Σ exp(x - max): no overflow for large logits,
  // no log(0) for very negative ones.
  double lse;
  if constexpr (std::is_same<T, float>::value) {
    dispatch([&]() TESSEL_INLINE { lse = logSumExpRow(xs, classes); });
  } else {
    C mx = -std::numeric_limits<C>::infinity();
    for (int64_t c = 0; c < classes; ++c)
      mx = std::max(mx, C(Elem<T>::load(xs[c])));
    double sum = 0.0;
    for (int64_t c = 0; c < classes; ++c)
      sum += double(std::exp(C(Elem<T>::load(xs[c])) - mx));
    lse = double(mx) + std::log(sum);
  }
  return lse;
}

/// Softmax cross-entropy of one row, lse − x[label] (smoothing ε > 0: of
/// the smoothed target, core/loss_options.h).
template <class T>
double crossEntropyRow(const T *xs, int64_t classes, int64_t label,
                       double smoothing = 0.0) {
  double sum = 0.0;
  if (smoothing > 0)
    for (int64_t c = 0; c < classes; ++c)
      sum += double(Elem<T>::load(xs[c]));
  return tessel::smoothedRowLoss(logSumExpOf(xs, classes),
                                 double(Elem<T>::load(xs[label])), sum, classes,
                                 smoothing);
}

} // namespace

void CpuBackend::crossEntropy(tessel_ctx *ctx, int32_t dtype,
                              int32_t loss_dtype, int32_t label_dtype,
                              const void *logits, const void *labels,
                              void *outp, int64_t rows, int64_t classes,
                              int32_t reduction, LossOptions options) {
  visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = typename Elem<T>::Compute;
    const T *x = in<T>(logits);
    // An f32 loss of 16-bit logits: the f32 kernel on each row widened.
    const bool widen = loss_dtype != dtype;
    std::vector<float> wide(widen ? size_t(classes) : 0);
    // Soft-capped logits: each row capped in the arithmetic type (f32 for
    // 16-bit logits, whatever the loss's type), then the loss of that row.
    const double softcap = options.softcap, smoothing = options.smoothing;
    std::vector<C> capped(softcap > 0 ? size_t(classes) : 0);
    auto store = [&](int64_t i, double loss) {
      if (widen)
        out<float>(outp)[i] = float(loss);
      else
        out<T>(outp)[i] = fromDouble<T>(loss);
    };
    double total = 0.0;
    for (int64_t r = 0; r < rows; ++r) {
      const T *xs = x + r * classes;
      int64_t label = label_dtype == TESSEL_I32
                          ? in<int32_t>(labels)[r]
                          : in<int64_t>(labels)[r];
      double loss = 0.0;
      if (label < 0 || label >= classes) {
        setError(ctx, "tessel_cross_entropy: label %lld of row %lld outside "
                      "[0, %lld)",
                 (long long)label, (long long)r, (long long)classes);
      } else if (softcap > 0) {
        for (int64_t c = 0; c < classes; ++c)
          capped[size_t(c)] = softcapValue(C(Elem<T>::load(xs[c])), C(softcap));
        loss = crossEntropyRow(capped.data(), classes, label, smoothing);
      } else if (widen) {
        widenInto(xs, wide.data(), classes);
        loss = crossEntropyRow(wide.data(), classes, label, smoothing);
      } else {
        loss = crossEntropyRow(xs, classes, label, smoothing);
      }
      if (reduction == TESSEL_LOSS_NONE)
        store(r, loss);
      total += loss;
    }
    if (reduction == TESSEL_LOSS_SUM)
      store(0, total);
    else if (reduction == TESSEL_LOSS_MEAN)
      store(0, rows > 0 ? total / double(rows)
                        : std::numeric_limits<double>::quiet_NaN());
  });
}
