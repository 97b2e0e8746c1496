//===- backward.cpp - Backward kernels of the elementwise and norm ops ----===//
//
// The reverse-mode kernels of tessel_unary, tessel_softmax, the layer/RMS
// and batch norms, tessel_cross_entropy and tessel_embedding, with PyTorch
// autograd's semantics. Element math runs in the compute type (f32, or f64
// for f64); sums and statistics accumulate in f64 like the forward kernels.
// Every gradient output is overwritten.
//
// The f32 kernels the training step spends its time in (the unary
// derivatives, layer/RMS norm, cross-entropy) are vectorised like the
// forward kernels (vecmath.h): loops compiled for baseline x86-64 and for
// AVX2 + FMA, picked at run time; the polynomial exp and rational erf; row
// sums in f32 lanes flushed into f64 every few hundred elements.
//
//===----------------------------------------------------------------------===//

#include "core/loss_options.h"
#include "cpu/backend.h"
#include "cpu/internal.h"
#include "cpu/vecmath.h"

#include <algorithm>
#include <type_traits>
#include <utility>
#include <vector>

using namespace tessel::cpu;

namespace {

template <class T> const T *in(const void *p) { return static_cast<const T *>(p); }
template <class T> T *out(void *p) { return static_cast<T *>(p); }

template <class T> typename Elem<T>::Compute ld(const T *p, int64_t i) {
  return Elem<T>::load(p[i]);
}

//===--- Unary ------------------------------------------------------------===//
//
// One loop per op (the switch is outside it), each element a branch-free
// function, so the f32 and f64 loops vectorise in the two dispatch copies
// (vecmath.h) as the forward kernels' do. The f32 compute type (f32 and the
// 16-bit floats) uses vecmath.h's polynomial exp and rational erf; f64 uses
// libm, so the f64 kernels stay exact to finite-difference precision.
//
// The derivatives of the saturating ops are written in e = e^-|a| ∈ (0, 1]
// and d = 1 / (1 + e) rather than in tanh or σ: 1 − tanh² = 4·e·d² and
// σ·(1 − σ) = e·d² keep their relative accuracy in the tails, where
// 1 − t² computed from a rounded t = ±(1 − δ) is all cancellation.

template <class C> inline C expOf(C x) {
  if constexpr (std::is_same<C, float>::value)
    return fastExp(x);
  else
    return std::exp(x);
}

template <class C> inline C erfOf(C x) {
  if constexpr (std::is_same<C, float>::value)
    return fastErf(x);
  else
    return std::erf(x);
}

// Error of the f32 derivatives (vecmath.h's exp and erf), from a sweep of
// every 16th f32 in [−16, 16] at dy = 1 against long double references
// written with cosh and erfc, in both dispatch copies (AVX2 + FMA and the
// baseline); relative to the sum of the magnitudes of the terms op'(x) adds
// up (op' itself crosses zero for SiLU and the GELUs):
//   TANH, SIGMOID, SILU: ≤ 3.2e-7 everywhere, tails included (the libm
//     1 − tanh² these replace had no correct digit past |x| ≈ 9);
//   GELU_TANH: ≤ 2.1e-7 for |x| ≤ 1, 9e-7 for |x| ≤ 3, 3e-6 for |x| ≤ 6
//     (e^-2|u| of a rounded u: relative error ~|u|·ulp, where op' < 1e-4),
//     and ≤ 2.2e-7 absolute everywhere;
//   GELU (erf): ≤ 2.8e-7 for x ≥ −1, and ≤ 2.8e-7 absolute everywhere: the
//     erf approximation's error near ±1, the forward GELU's contract (for
//     x < −1, where Φ(x) is small, relative error grows: 8e-6 at x = −3);
//   EXP: ≤ 8.3e-8 (vecmath.h's exp); NEG, RELU exact; LOG, SQRT, RSQRT as
//     the f32 operations. ±inf give NaN for SiLU and the GELUs (inf · 0),
//     as PyTorch's formulas do; finite x give finite results.
// Then one rounding for dy·op'.

template <class C> inline C tanhGrad(C x) {
  C e = expOf(C(-2) * std::fabs(x)), d = C(1) / (C(1) + e);
  return C(4) * e * d * d;
}

template <class C> inline C sigmoidGrad(C x) {
  C e = expOf(-std::fabs(x)), d = C(1) / (C(1) + e);
  return e * d * d;
}

/// d/dx x·σ(x) = σ·(1 + x·(1 − σ)); σ and 1 − σ are d and e·d, one way
/// round or the other by the sign of x.
template <class C> inline C siluGrad(C x) {
  C e = expOf(-std::fabs(x)), d = C(1) / (C(1) + e), ed = e * d;
  C s = x >= C(0) ? d : ed, sc = x >= C(0) ? ed : d;
  return s * (C(1) + x * sc);
}

/// d/dx x·Φ(x) = Φ(x) + x·φ(x).
template <class C> inline C geluGrad(C x) {
  C cdf = C(0.5) * (C(1) + erfOf(x * C(M_SQRT1_2)));
  C pdf = C(0.39894228040143267794) * expOf(C(-0.5) * x * x);
  return cdf + x * pdf;
}

/// d/dx 0.5·x·(1 + tanh(u)), u = k·(x + c·x³), = 0.5·(1 + t) + 0.5·x·(1 −
/// t²)·u', where 0.5·(1 + t) is d (u ≥ 0) or e·d (u < 0) and 0.5·(1 − t²) is
/// 2·e·d², with e = e^-2|u|.
template <class C> inline C geluTanhGrad(C x) {
  const C k = C(0.79788456080286535588); // sqrt(2 / pi)
  const C c = C(0.044715);
  C x2 = x * x;
  C u = k * (x + c * x2 * x);
  C du = k * (C(1) + C(3) * c * x2);
  C e = expOf(C(-2) * std::fabs(u)), d = C(1) / (C(1) + e), ed = e * d;
  C half = u >= C(0) ? d : ed;
  return half + C(2) * x * ed * d * du;
}

template <class T, class Fn>
void mapGrad(const T *x, const T *dy, T *dx, int64_t n, Fn fn) {
  auto loop = [&]() TESSEL_INLINE {
    for (int64_t i = 0; i < n; ++i)
      dx[i] = Elem<T>::store(fn(Elem<T>::load(x[i]), Elem<T>::load(dy[i])));
  };
  // The 16-bit floats convert element by element with bit tricks that do
  // not vectorise either way.
  if constexpr (std::is_same<T, float>::value || std::is_same<T, double>::value)
    dispatch(loop);
  else
    loop();
}

/// dx = op'(x) · dy; false for an unknown op.
template <class T>
bool unaryGradImpl(int32_t op, const T *x, const T *dy, T *dx, int64_t n) {
  using C = typename Elem<T>::Compute;
  switch (op) {
  case TESSEL_NEG:
    mapGrad(x, dy, dx, n, [](C, C g) { return -g; });
    return true;
  case TESSEL_EXP:
    mapGrad(x, dy, dx, n, [](C v, C g) { return g * expOf(v); });
    return true;
  case TESSEL_LOG:
    mapGrad(x, dy, dx, n, [](C v, C g) { return g / v; });
    return true;
  case TESSEL_SQRT:
    mapGrad(x, dy, dx, n, [](C v, C g) { return g * C(0.5) / std::sqrt(v); });
    return true;
  case TESSEL_RSQRT:
    mapGrad(x, dy, dx, n, [](C v, C g) {
      C r = C(1) / std::sqrt(v);
      return g * C(-0.5) * r * r * r;
    });
    return true;
  case TESSEL_TANH:
    mapGrad(x, dy, dx, n, [](C v, C g) { return g * tanhGrad(v); });
    return true;
  case TESSEL_SIGMOID:
    mapGrad(x, dy, dx, n, [](C v, C g) { return g * sigmoidGrad(v); });
    return true;
  case TESSEL_RELU:
    // PyTorch's threshold_backward: 0 where x <= 0 (x = 0 included); a NaN
    // x passes dy through.
    mapGrad(x, dy, dx, n, [](C v, C g) { return v <= C(0) ? C(0) : g; });
    return true;
  case TESSEL_GELU:
    mapGrad(x, dy, dx, n, [](C v, C g) { return g * geluGrad(v); });
    return true;
  case TESSEL_GELU_TANH:
    mapGrad(x, dy, dx, n, [](C v, C g) { return g * geluTanhGrad(v); });
    return true;
  case TESSEL_SILU:
    mapGrad(x, dy, dx, n, [](C v, C g) { return g * siluGrad(v); });
    return true;
  default:
    return false;
  }
}

template <class T>
void softmaxGradImpl(const T *y, const T *dy, T *dx, int64_t outer,
                     int64_t dim, int64_t inner) {
  using C = typename Elem<T>::Compute;
  // A whole [dim, inner] slab at a time keeps the inner index contiguous.
  std::vector<double> dot(static_cast<size_t>(inner));
  for (int64_t o = 0; o < outer; ++o) {
    const T *ys = y + o * dim * inner, *dys = dy + o * dim * inner;
    T *dxs = dx + o * dim * inner;
    std::fill(dot.begin(), dot.end(), 0.0);
    for (int64_t d = 0; d < dim; ++d)
      for (int64_t j = 0; j < inner; ++j)
        dot[size_t(j)] += double(ld(ys, d * inner + j)) *
                          double(ld(dys, d * inner + j));
    for (int64_t d = 0; d < dim; ++d)
      for (int64_t j = 0; j < inner; ++j) {
        int64_t i = d * inner + j;
        dxs[i] = Elem<T>::store(ld(ys, i) * (ld(dys, i) - C(dot[size_t(j)])));
      }
  }
}

/// Layer norm: x̂ = (x − mean)·rstd, y = x̂·γ + β, so with d = dy·γ
///   dx = rstd · (d − mean(d) − x̂ · mean(d·x̂)).
/// RMS norm (no mean subtracted): dx = rstd · (d − x̂ · mean(d·x̂)).
/// The column sums dγ and dβ are stored as P: T, or f32 for 16-bit T.
template <class T, class P = T>
void layerNormGradImpl(const T *x, const T *gamma, const T *dy, T *dx,
                       P *dgamma, P *dbeta, int64_t rows, int64_t cols,
                       double eps, bool rms) {
  using C = typename Elem<T>::Compute;
  std::vector<double> dg(static_cast<size_t>(cols), 0.0),
      db(static_cast<size_t>(cols), 0.0);
  std::vector<C> g(static_cast<size_t>(cols), C(1)),
      xhat(static_cast<size_t>(cols)), d(static_cast<size_t>(cols));
  if (gamma)
    for (int64_t j = 0; j < cols; ++j)
      g[size_t(j)] = ld(gamma, j);
  for (int64_t r = 0; r < rows; ++r) {
    const T *xs = x + r * cols, *dys = dy + r * cols;
    // Statistics as the forward kernel computes them (two passes, f64).
    double mean = 0.0;
    if (!rms) {
      for (int64_t j = 0; j < cols; ++j)
        mean += double(ld(xs, j));
      mean /= double(cols);
    }
    double var = 0.0;
    for (int64_t j = 0; j < cols; ++j) {
      double dv = double(ld(xs, j)) - mean;
      var += dv * dv;
    }
    var /= double(cols);
    C m = C(mean), rstd = C(1.0 / std::sqrt(var + eps));
    double sumD = 0.0, sumDX = 0.0;
    for (int64_t j = 0; j < cols; ++j) {
      C xh = (ld(xs, j) - m) * rstd;
      C dyj = ld(dys, j);
      C dj = dyj * g[size_t(j)];
      xhat[size_t(j)] = xh;
      d[size_t(j)] = dj;
      sumD += double(dj);
      sumDX += double(dj) * double(xh);
      dg[size_t(j)] += double(dyj) * double(xh);
      db[size_t(j)] += double(dyj);
    }
    C meanD = rms ? C(0) : C(sumD / double(cols));
    C meanDX = C(sumDX / double(cols));
    T *dxs = dx + r * cols;
    for (int64_t j = 0; j < cols; ++j)
      dxs[j] = Elem<T>::store(
          rstd * (d[size_t(j)] - meanD - xhat[size_t(j)] * meanDX));
  }
  if (dgamma)
    for (int64_t j = 0; j < cols; ++j)
      dgamma[j] = fromDouble<P>(dg[size_t(j)]);
  if (dbeta)
    for (int64_t j = 0; j < cols; ++j)
      dbeta[j] = fromDouble<P>(db[size_t(j)]);
}

/// Rows whose dγ and dβ contributions the f32 layer norm sums in f32 before
/// adding them into f64: each column sum then carries the rounding error of
/// a kColumnRows-term f32 sum, however many rows there are.
constexpr int64_t kColumnRows = 32;

/// The f32 layer norm: the same formulas, vectorised (AVX2 + FMA where the
/// host has them), with the statistics computed exactly as the forward
/// kernel computes them (norm.cpp), so x̂ is the forward's. Per row: the two
/// statistics passes, one pass for Σd, Σd·x̂ (f32 lanes flushed into f64,
/// like the forward's sums) and the column sums of dγ and dβ, one pass
/// writing dx, recomputing x̂ and d rather than storing them.
void layerNormGradF32(const float *x, const float *gamma, const float *dy,
                      float *dx, float *dgamma, float *dbeta, int64_t rows,
                      int64_t cols, double eps, bool rms) {
  size_t nc = static_cast<size_t>(cols);
  std::vector<float> ones(gamma ? 0 : nc, 1.0f);
  const float *g = gamma ? gamma : ones.data();
  std::vector<float> dgPart(nc), dbPart(nc);
  std::vector<double> dgSum(nc, 0.0), dbSum(nc, 0.0);
  float *dgp = dgPart.data(), *dbp = dbPart.data();
  dispatch([&]() TESSEL_INLINE {
    for (int64_t r0 = 0; r0 < rows; r0 += kColumnRows) {
      int64_t r1 = std::min(rows, r0 + kColumnRows);
      std::fill(dgPart.begin(), dgPart.end(), 0.0f);
      std::fill(dbPart.begin(), dbPart.end(), 0.0f);
      for (int64_t r = r0; r < r1; ++r) {
        const float *xs = x + r * cols, *dys = dy + r * cols;
        float *dxs = dx + r * cols;
        float m, rstd;
        layerNormRowStats(xs, cols, eps, rms, m, rstd);
        F64x4 sdLo = {}, sdHi = {}, sxLo = {}, sxHi = {};
        int64_t j = 0, whole = cols - cols % kLanes;
        while (j < whole) {
          F32x8 accD = {}, accDX = {};
          int64_t end = std::min(whole, j + kBlock);
          for (; j < end; j += kLanes) {
            F32x8 xv, dyv, gv, pg, pb;
            load8(xv, xs + j);
            load8(dyv, dys + j);
            load8(gv, g + j);
            F32x8 xh = (xv - m) * rstd;
            F32x8 d = dyv * gv;
            accD += d;
            accDX += d * xh;
            load8(pg, dgp + j);
            load8(pb, dbp + j);
            pg += dyv * xh;
            pb += dyv;
            store8(dgp + j, pg);
            store8(dbp + j, pb);
          }
          flushWide(sdLo, sdHi, accD);
          flushWide(sxLo, sxHi, accDX);
        }
        double sumD = sumWide(sdLo, sdHi), sumDX = sumWide(sxLo, sxHi);
        for (; j < cols; ++j) {
          float xh = (xs[j] - m) * rstd, d = dys[j] * g[j];
          sumD += double(d);
          sumDX += double(d * xh);
          dgp[j] += dys[j] * xh;
          dbp[j] += dys[j];
        }
        float meanD = rms ? 0.0f : float(sumD / double(cols));
        float meanDX = float(sumDX / double(cols));
        for (j = 0; j < cols; ++j) {
          float xh = (xs[j] - m) * rstd;
          dxs[j] = rstd * (dys[j] * g[j] - meanD - xh * meanDX);
        }
      }
      for (size_t j = 0; j < nc; ++j) {
        dgSum[j] += double(dgp[j]);
        dbSum[j] += double(dbp[j]);
      }
    }
  });
  if (dgamma)
    for (size_t j = 0; j < nc; ++j)
      dgamma[j] = float(dgSum[j]);
  if (dbeta)
    for (size_t j = 0; j < nc; ++j)
      dbeta[j] = float(dbSum[j]);
}

/// Row r's label of a cross-entropy gradient, or -1 when it lies outside
/// [0, classes): the error recorded and the row's gradient zeroed.
template <class T>
int64_t gradRowLabel(tessel_ctx *ctx, int32_t labelDtype, const void *labels,
                     int64_t r, int64_t classes, T *dr) {
  int64_t label = loadIndex(labelDtype, labels, r);
  if (label >= 0 && label < classes)
    return label;
  setError(ctx,
           "tessel_cross_entropy_grad: label %lld of row %lld "
           "outside [0, %lld)",
           (long long)label, (long long)r, (long long)classes);
  std::fill(dr, dr + classes, fromDouble<T>(0.0));
  return -1;
}

/// The scale of row r's gradient: dloss[r] (none), dloss[0] (sum) or
/// dloss[0] / rows (mean).
template <class L>
double rowGradScale(const L *dl, int32_t reduction, int64_t r, int64_t rows) {
  return reduction == TESSEL_LOSS_NONE  ? double(ld(dl, r))
         : reduction == TESSEL_LOSS_SUM ? double(ld(dl, 0))
                                        : double(ld(dl, 0)) / double(rows);
}

/// The cross-entropy gradient in f32, vectorised: the row's max,
/// e^(x − max) (the polynomial exp) written straight into the output row
/// with its sum (f32 lanes flushed into f64, as in the forward), then one
/// scaling pass. Logits and dlogits are f32, or 16-bit (T) with an f32
/// loss: each row is then widened first and its f32 gradient rounded to T
/// as tessel_cast rounds it (the unfused cast, f32 kernel and cast).
template <class T>
void crossEntropyGradF32(tessel_ctx *ctx, int32_t labelDtype,
                         const void *labels, const T *x, const float *dl,
                         T *dlogits, int64_t rows, int64_t classes,
                         int32_t reduction) {
  constexpr bool kWiden = !std::is_same<T, float>::value;
  std::vector<float> wide(kWiden ? 2 * size_t(classes) : 0);
  dispatch([&]() TESSEL_INLINE {
    for (int64_t r = 0; r < rows; ++r) {
      const T *xs = x + r * classes;
      T *dr = dlogits + r * classes;
      int64_t label = gradRowLabel(ctx, labelDtype, labels, r, classes, dr);
      if (label < 0)
        continue;
      double g = rowGradScale(dl, reduction, r, rows);
      const float *xf;
      float *df;
      if constexpr (kWiden) {
        widenInto(xs, wide.data(), classes);
        xf = wide.data();
        df = wide.data() + classes;
      } else {
        xf = xs;
        df = dr;
      }
      float mx = rowMax(xf, classes);
      float k = float(g / expSum(xf, df, classes, classes, mx));
      for (int64_t c = 0; c < classes; ++c)
        df[c] *= k;
      df[label] -= float(g);
      if constexpr (kWiden)
        roundInto(df, dr, classes);
    }
  });
}

/// The cross-entropy gradient row by row in the arithmetic type C, of
/// logits soft-capped by `options.softcap` (0: none): y = softcapValue(x),
/// then g · (e^(y − max) / Σ − onehot) times softcapSlope(y) (1 without a
/// cap), the one-hot smoothed by `options.smoothing` (core/loss_options.h),
/// rounded to T. dloss is L (T, or f32 for 16-bit T). Each row is read
/// whole before it is written: dlogits may be the logits.
template <class T, class L>
void crossEntropyGradRows(tessel_ctx *ctx, int32_t labelDtype,
                          const void *labels, const T *x, const L *dl,
                          T *dlogits, int64_t rows, int64_t classes,
                          int32_t reduction, tessel::LossOptions options) {
  using C = typename Elem<T>::Compute;
  const C cap = C(options.softcap);
  std::vector<C> y(static_cast<size_t>(classes)),
      e(static_cast<size_t>(classes));
  for (int64_t r = 0; r < rows; ++r) {
    const T *xs = x + r * classes;
    T *dr = dlogits + r * classes;
    int64_t label = gradRowLabel(ctx, labelDtype, labels, r, classes, dr);
    if (label < 0)
      continue;
    double g = rowGradScale(dl, reduction, r, rows);
    C mx = -std::numeric_limits<C>::infinity();
    for (int64_t c = 0; c < classes; ++c) {
      y[size_t(c)] = tessel::softcapValue(C(ld(xs, c)), cap);
      mx = std::max(mx, y[size_t(c)]);
    }
    double sum = 0.0;
    for (int64_t c = 0; c < classes; ++c) {
      e[size_t(c)] = std::exp(y[size_t(c)] - mx);
      sum += double(e[size_t(c)]);
    }
    C k = C(g / sum);
    tessel::SmoothedGrad<C> target =
        tessel::smoothedGrad<C>(g, classes, options.smoothing);
    for (int64_t c = 0; c < classes; ++c)
      dr[c] =
          Elem<T>::store((e[size_t(c)] * k -
                          (c == label ? target.label : C(0)) - target.every) *
                         tessel::softcapSlope(y[size_t(c)], cap));
  }
}

/// Batch norm over N = outer·inner values per channel, with the batch mean
/// and biased variance: dx = γ·rstd · (dy − Σdy/N − x̂ · Σ(dy·x̂)/N),
/// dγ = Σ dy·x̂, dβ = Σ dy.
template <class T>
void batchNormGradImpl(const T *x, const T *gamma, const T *dy, T *dx,
                       T *dgamma, T *dbeta, int64_t outer, int64_t channels,
                       int64_t inner, double eps) {
  using C = typename Elem<T>::Compute;
  size_t nc = static_cast<size_t>(channels);
  std::vector<double> mean(nc, 0.0), var(nc, 0.0), sdy(nc, 0.0), sdyx(nc, 0.0);
  double count = double(outer * inner);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c) {
      const T *xs = x + (o * channels + c) * inner;
      for (int64_t i = 0; i < inner; ++i)
        mean[size_t(c)] += double(ld(xs, i));
    }
  for (double &m : mean)
    m /= count;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c) {
      const T *xs = x + (o * channels + c) * inner;
      for (int64_t i = 0; i < inner; ++i) {
        double dv = double(ld(xs, i)) - mean[size_t(c)];
        var[size_t(c)] += dv * dv;
      }
    }
  std::vector<C> m(nc), rstd(nc);
  for (size_t c = 0; c < nc; ++c) {
    m[c] = C(mean[c]);
    rstd[c] = C(1.0 / std::sqrt(var[c] / count + eps));
  }
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c) {
      const T *xs = x + (o * channels + c) * inner;
      const T *dys = dy + (o * channels + c) * inner;
      for (int64_t i = 0; i < inner; ++i) {
        C xh = (ld(xs, i) - m[size_t(c)]) * rstd[size_t(c)];
        double d = double(ld(dys, i));
        sdy[size_t(c)] += d;
        sdyx[size_t(c)] += d * double(xh);
      }
    }
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c) {
      C g = gamma ? ld(gamma, c) : C(1);
      C k = g * rstd[size_t(c)];
      C a = C(sdy[size_t(c)] / count), b = C(sdyx[size_t(c)] / count);
      const T *xs = x + (o * channels + c) * inner;
      const T *dys = dy + (o * channels + c) * inner;
      T *dxs = dx + (o * channels + c) * inner;
      for (int64_t i = 0; i < inner; ++i) {
        C xh = (ld(xs, i) - m[size_t(c)]) * rstd[size_t(c)];
        dxs[i] = Elem<T>::store(k * (ld(dys, i) - a - xh * b));
      }
    }
  if (dgamma)
    for (int64_t c = 0; c < channels; ++c)
      dgamma[c] = fromDouble<T>(sdyx[size_t(c)]);
  if (dbeta)
    for (int64_t c = 0; c < channels; ++c)
      dbeta[c] = fromDouble<T>(sdy[size_t(c)]);
}

} // namespace

void CpuBackend::unaryGrad(tessel_ctx *, int32_t op, int32_t dtype,
                           const void *x, const void *dy, void *dx,
                           int64_t n) {
  visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    unaryGradImpl(op, in<T>(x), in<T>(dy), out<T>(dx), n);
  });
}

void CpuBackend::softmaxGrad(tessel_ctx *, int32_t dtype, const void *y,
                             const void *dy, void *dx, int64_t outer,
                             int64_t dim, int64_t inner) {
  visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    softmaxGradImpl(in<T>(y), in<T>(dy), out<T>(dx), outer, dim, inner);
  });
}

void CpuBackend::layerNormGrad(tessel_ctx *, int32_t dtype, int32_t paramDtype,
                               const void *x, const void *gamma, const void *dy,
                               void *dx, void *dgamma, void *dbeta,
                               int64_t rows, int64_t cols, double eps,
                               bool rms) {
  stored::visitFloatWidened(dtype, paramDtype, [&](auto tag, auto param) {
    using T = decltype(tag);
    using P = decltype(param); // f32 for tessel_layer_norm_grad_f32
    if constexpr (std::is_same<T, float>::value)
      layerNormGradF32(in<float>(x), in<float>(gamma), in<float>(dy),
                       out<float>(dx), out<float>(dgamma), out<float>(dbeta),
                       rows, cols, eps, rms);
    else
      layerNormGradImpl(in<T>(x), in<T>(gamma), in<T>(dy), out<T>(dx),
                        out<P>(dgamma), out<P>(dbeta), rows, cols, eps, rms);
  });
}

void CpuBackend::batchNormGrad(tessel_ctx *, int32_t dtype, const void *x,
                               const void *gamma, const void *dy, void *dx,
                               void *dgamma, void *dbeta, int64_t outer,
                               int64_t channels, int64_t inner, double eps) {
  visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    if (outer * inner == 0) {
      // No values: the sums are empty.
      for (int64_t c = 0; c < channels; ++c) {
        if (dgamma)
          out<T>(dgamma)[c] = fromDouble<T>(0.0);
        if (dbeta)
          out<T>(dbeta)[c] = fromDouble<T>(0.0);
      }
      return;
    }
    batchNormGradImpl(in<T>(x), in<T>(gamma), in<T>(dy), out<T>(dx),
                      out<T>(dgamma), out<T>(dbeta), outer, channels, inner,
                      eps);
  });
}

void CpuBackend::crossEntropyGrad(tessel_ctx *ctx, int32_t dtype,
                                  int32_t loss_dtype, int32_t label_dtype,
                                  const void *logits, const void *labels,
                                  const void *dloss, void *dlogits,
                                  int64_t rows, int64_t classes,
                                  int32_t reduction, LossOptions options) {
  visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    // A cap or smoothing: the generic rows in the arithmetic type.
    if (options.softcap > 0 || options.smoothing > 0) {
      if (loss_dtype != dtype)
        crossEntropyGradRows(ctx, label_dtype, labels, in<T>(logits),
                             in<float>(dloss), out<T>(dlogits), rows, classes,
                             reduction, options);
      else
        crossEntropyGradRows(ctx, label_dtype, labels, in<T>(logits),
                             in<T>(dloss), out<T>(dlogits), rows, classes,
                             reduction, options);
      return;
    }
    // f32 logits, or 16-bit ones with an f32 loss: the f32 kernel.
    if constexpr (std::is_same<T, float>::value || sizeof(T) == 2) {
      if (std::is_same<T, float>::value || loss_dtype != dtype) {
        crossEntropyGradF32(ctx, label_dtype, labels, in<T>(logits),
                            in<float>(dloss), out<T>(dlogits), rows, classes,
                            reduction);
        return;
      }
    }
    crossEntropyGradRows(ctx, label_dtype, labels, in<T>(logits), in<T>(dloss),
                         out<T>(dlogits), rows, classes, reduction,
                         LossOptions{});
  });
}

void CpuBackend::embeddingGrad(tessel_ctx *ctx, int32_t dtype,
                               int32_t tableDtype, int32_t ids_dtype,
                               const void *ids, const void *dout, void *dtable,
                               int64_t num_ids, int64_t rows, int64_t hidden,
                               int64_t row_offset, int64_t vocab) {
  // (row, position) pairs of the block's ids sorted by row, positions
  // ascending within a row: each row sums its contributions in position
  // order, in f64, and is rounded once — the same bits for any thread
  // count, backend order or split of the table into blocks.
  std::vector<std::pair<int64_t, int64_t>> order;
  order.reserve(size_t(num_ids));
  for (int64_t i = 0; i < num_ids; ++i) {
    int64_t id = loadIndex(ids_dtype, ids, i);
    if (id < 0 || id >= vocab) {
      setError(ctx,
               "tessel_embedding_grad: id %lld at position %lld "
               "outside [0, %lld)",
               (long long)id, (long long)i, (long long)vocab);
      continue;
    }
    int64_t local = id - row_offset;
    if (local >= 0 && local < rows)
      order.emplace_back(local, i);
  }
  std::sort(order.begin(), order.end());
  // The rows' sums stored as P: T, or f32 (tessel_embedding_grad_f32).
  auto sumRows = [&](auto *src, auto *dst) {
    using P = std::remove_pointer_t<decltype(dst)>;
    // Every float format stores +0 as all-zero bits.
    std::memset(dst, 0, size_t(rows * hidden) * sizeof(P));
    std::vector<double> acc(static_cast<size_t>(hidden));
    for (size_t a = 0; a < order.size();) {
      int64_t row = order[a].first;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (; a < order.size() && order[a].first == row; ++a) {
        auto *dy = src + order[a].second * hidden;
        for (int64_t j = 0; j < hidden; ++j)
          acc[size_t(j)] += double(ld(dy, j));
      }
      P *drow = dst + row * hidden;
      for (int64_t j = 0; j < hidden; ++j)
        drow[j] = fromDouble<P>(acc[size_t(j)]);
    }
  };
  stored::visitFloatWidened(dtype, tableDtype, [&](auto tag, auto table) {
    using T = decltype(tag);
    using P = decltype(table); // f32 for tessel_embedding_grad_f32
    sumRows(in<T>(dout), out<P>(dtable));
  });
}
