//===- vecmath.h - Vectorisable f32 math and AVX2 dispatch ------*- C++ -*-===//
//
// Private to runtime/cpu. The library is built for baseline x86-64 (no
// -march=native: it must run on any rank host), so the hot f32 loops are
// compiled twice, once for the baseline and once with AVX2 + FMA, and pick
// one at run time (`dispatch`). The element functions here use no libm calls
// and no branches, so GCC vectorises the loops that call them.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CPU_VECMATH_H
#define TESSEL_RUNTIME_CPU_VECMATH_H

#include "internal.h"

#include <algorithm>
#include <cmath>

namespace tessel {
namespace cpu {

//===--- Run-time dispatch ------------------------------------------------===//

// -DTESSEL_NO_AVX2_CLONE builds the baseline loops only (to test them on an
// AVX2 host).
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) &&       \
    !defined(TESSEL_NO_AVX2_CLONE)
#define TESSEL_HAVE_AVX2_CLONE 1
#define TESSEL_TARGET_AVX2 __attribute__((target("avx2,fma")))
#else
#define TESSEL_HAVE_AVX2_CLONE 0
#define TESSEL_TARGET_AVX2
#endif

/// True when the host runs AVX2 and FMA (checked once).
inline bool hostHasAvx2Fma() {
#if TESSEL_HAVE_AVX2_CLONE
  static const bool has =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
#else
  return false;
#endif
}

template <class F> __attribute__((noinline)) void runBaseline(F &f) { f(); }
#if TESSEL_HAVE_AVX2_CLONE
template <class F> TESSEL_TARGET_AVX2 __attribute__((noinline)) void runAvx2(F &f) {
  f();
}
#endif

/// Runs `body()` compiled for AVX2 + FMA where the host has them, for the
/// baseline otherwise. `body` must be a lambda marked always_inline
/// (`[&]() TESSEL_INLINE { ... }`): it is inlined into, and so compiled with
/// the target of, each of the two noinline runners above, and so are the
/// inline element functions it calls. Use it around whole loops, not per
/// element.
#define TESSEL_INLINE __attribute__((always_inline))
template <class F> inline void dispatch(F &&body) {
#if TESSEL_HAVE_AVX2_CLONE
  if (hostHasAvx2Fma()) {
    runAvx2(body);
    return;
  }
#endif
  runBaseline(body);
}

//===--- Element functions ------------------------------------------------===//

/// Clamps with plain comparisons: fminf/fmaxf are libm calls on x86-64 and
/// would stop the loop from vectorising. NaN passes through.
inline float clampTo(float x, float lo, float hi) {
  x = x < lo ? lo : x;
  return x > hi ? hi : x;
}

// GCC vector types: two SSE registers on the baseline, one AVX register in
// the AVX2 copy. Helpers take them by reference: a vector argument or return
// value would change the ABI between the two copies (-Wpsabi).
typedef float F32x8 __attribute__((vector_size(32)));
typedef int32_t I32x8 __attribute__((vector_size(32)));
typedef uint32_t U32x8 __attribute__((vector_size(32)));
typedef double F64x4 __attribute__((vector_size(32)));

template <class To, class From>
TESSEL_INLINE inline void bitCast(To &to, const From &from) {
  static_assert(sizeof(To) == sizeof(From), "bitCast: sizes differ");
  std::memcpy(&to, &from, sizeof to);
}

/// x = e^x for f32 (Cephes' expf: Cody–Waite reduction by ln 2 and a
/// degree-5 polynomial), within ~1 ulp of the correctly rounded result over
/// the whole range, subnormal results included; 0 below, +inf above the
/// range; NaN stays NaN; e^0 = 1 exactly. One source for a float (V = float,
/// I = int32_t, U = uint32_t) and for 8 lanes (F32x8, I32x8, U32x8): no libm
/// call and no branch, so loops over either vectorise.
template <class V, class I, class U> TESSEL_INLINE inline void expInPlace(V &x) {
  const float lo = -104.0f, hi = 88.7228394f; // e^lo < 2^-150; ln FLT_MAX
  V c = x < lo ? V{} + lo : x;                // Clamp; NaN passes through.
  c = c > hi ? V{} + hi : c;
  // n = round(c / ln 2) by the 1.5·2^23 trick: the sum's low mantissa bits
  // hold n, and t - magic is n as a float.
  const float magic = 12582912.0f;
  V t = c * 1.44269504088896341f + magic;
  V fn = t - magic;
  V r = c - fn * 0.693359375f; // ln 2 in two parts: the first times any
  r = r - fn * -2.12194440e-4f; // |n| <= 150 is exact.
  V p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  V e = p * (r * r) + r + 1.0f;
  // 2^n as two factors, each a normal float for n in [-150, 128], so that
  // the product rounds once even where the result is subnormal. Unsigned
  // arithmetic: a NaN's bits must not overflow a signed int.
  U tb, n, n1u;
  V magicV = V{} + magic;
  bitCast(tb, t);
  bitCast(n, magicV);
  n = tb - n;
  I n1;
  bitCast(n1, n);
  n1 = n1 >> 1; // floor(n / 2)
  bitCast(n1u, n1);
  U b1 = (n1u + 127u) << 23, b2 = (n - n1u + 127u) << 23;
  V s1, s2;
  bitCast(s1, b1);
  bitCast(s2, b2);
  V res = (e * s1) * s2;
  res = x < lo ? V{} : res;
  x = x > hi ? V{} + std::numeric_limits<float>::infinity() : res;
}

inline float fastExp(float x) {
  expInPlace<float, int32_t, uint32_t>(x);
  return x;
}

TESSEL_INLINE inline void fastExp8(F32x8 &x) {
  expInPlace<F32x8, I32x8, U32x8>(x);
}

/// 1 / (1 + e^-x) without overflow: e^-|x| never exceeds 1.
inline float fastSigmoid(float x) {
  float e = fastExp(-std::fabs(x));
  float inv = 1.0f / (1.0f + e);
  return x >= 0.0f ? inv : e * inv;
}

/// tanh for f32 as a [13/6] rational function on [-7.9, 7.9] (the
/// approximation Eigen uses): no libm call, so the loop vectorises; glibc's
/// scalar tanhf costs ~20 ns an element and made GELU the slowest kernel of
/// a GPT step. Within a few ulp of tanhf; exact ±1 beyond the clamp.
inline float fastTanh(float x) {
  const float bound = 7.90531110763549805f;
  float c = clampTo(x, -bound, bound);
  float c2 = c * c;
  float p = c2 * -2.76076847742355e-16f + 2.00018790482477e-13f;
  p = c2 * p + -8.60467152213735e-11f;
  p = c2 * p + 5.12229709037114e-08f;
  p = c2 * p + 1.48572235717979e-05f;
  p = c2 * p + 6.37261928875436e-04f;
  p = c2 * p + 4.89352455891786e-03f;
  p = c * p;
  float q = c2 * 1.19825839466702e-06f + 1.18534705686654e-04f;
  q = c2 * q + 2.26843463243900e-03f;
  q = c2 * q + 4.89352518554385e-03f;
  // Tiny inputs: tanh(x) = x to float precision, and keeps -0 and denormals.
  // The quotient is computed unconditionally so the choice is a select.
  float ratio = p / q;
  return std::fabs(x) < 0.0004f ? x : ratio;
}

/// erf for f32 as a [13/8] rational function on [-4, 4] (Eigen's), for the
/// same reason as fastTanh.
inline float fastErf(float x) {
  float c = clampTo(x, -4.0f, 4.0f);
  float c2 = c * c;
  float p = c2 * -2.72614225801306e-10f + 2.77068142495902e-08f;
  p = c2 * p + -2.10102402082508e-06f;
  p = c2 * p + -5.69250639462346e-05f;
  p = c2 * p + -7.34990630326855e-04f;
  p = c2 * p + -2.95459980854025e-03f;
  p = c2 * p + -1.60960333262415e-02f;
  p = c * p;
  float q = c2 * -1.45660718464996e-05f + -2.13374055278905e-04f;
  q = c2 * q + -1.68282697438203e-03f;
  q = c2 * q + -7.37332916720468e-03f;
  q = c2 * q + -1.42647390514189e-02f;
  return p / q;
}

//===--- Row reductions ---------------------------------------------------===//
//
// Reductions keep kLanes independent partial results in vector types: the
// vectoriser does not reorder a float sum or max on its own.
// f32 sums are flushed into f64 lanes every kBlock elements, so the rounding
// error of a row sum stays that of a kBlock / kLanes term f32 sum however
// long the row.

constexpr int kLanes = 8;
constexpr int64_t kBlock = 256;

/// Unaligned load and store of 8 floats.
TESSEL_INLINE inline void load8(F32x8 &v, const float *p) {
  std::memcpy(&v, p, sizeof v);
}
TESSEL_INLINE inline void store8(float *p, const F32x8 &v) {
  std::memcpy(p, &v, sizeof v);
}

/// Adds the 8 f32 lanes of `acc` into the two f64 accumulators.
TESSEL_INLINE inline void flushWide(F64x4 &lo, F64x4 &hi, const F32x8 &acc) {
  lo += F64x4{acc[0], acc[1], acc[2], acc[3]};
  hi += F64x4{acc[4], acc[5], acc[6], acc[7]};
}
TESSEL_INLINE inline double sumWide(const F64x4 &lo, const F64x4 &hi) {
  F64x4 w = lo + hi;
  return (w[0] + w[1]) + (w[2] + w[3]);
}

/// Σ f(x[i]) over [0, n) in f32 partial sums combined in f64.
template <class F>
TESSEL_INLINE inline double blockSum(const float *x, int64_t n, F f) {
  F64x4 wideLo = {}, wideHi = {};
  int64_t i = 0, whole = n - n % kLanes;
  while (i < whole) {
    F32x8 acc = {};
    int64_t end = std::min(whole, i + kBlock);
    for (; i < end; i += kLanes) {
      F32x8 v, fv;
      load8(v, x + i);
      for (int l = 0; l < kLanes; ++l)
        fv[l] = f(v[l]);
      acc += fv;
    }
    flushWide(wideLo, wideHi, acc);
  }
  double s = sumWide(wideLo, wideHi);
  for (; i < n; ++i)
    s += double(f(x[i]));
  return s;
}

/// The statistics of one layer-norm row of `cols` f32 values: its mean (0
/// for RMS norm) and 1 / sqrt(var + eps), var = E[(x - mean)²] in two
/// passes (no E[x²] - mean² cancellation). The forward and its gradient
/// share it, so the gradient sees the forward's x̂ exactly.
TESSEL_INLINE inline void layerNormRowStats(const float *xs, int64_t cols,
                                            double eps, bool rms, float &mean,
                                            float &rstd) {
  float m = 0.0f;
  if (!rms)
    m = float(blockSum(xs, cols, [](float v) { return v; }) / double(cols));
  double var = blockSum(xs, cols, [m](float v) {
                 float d = v - m;
                 return d * d;
               }) /
               double(cols);
  mean = m;
  rstd = float(1.0 / std::sqrt(var + eps));
}

/// max x[i] over [0, n), -inf for n = 0. A NaN element may or may not
/// win, as with std::max; callers' later sums turn it into NaN anyway.
TESSEL_INLINE inline float rowMax(const float *x, int64_t n) {
  const float ninf = -std::numeric_limits<float>::infinity();
  F32x8 m = {ninf, ninf, ninf, ninf, ninf, ninf, ninf, ninf};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    F32x8 v;
    load8(v, x + i);
    m = m < v ? v : m;
  }
  float r = ninf;
  for (int l = 0; l < kLanes; ++l)
    r = r < m[l] ? m[l] : r;
  for (; i < n; ++i)
    r = r < x[i] ? x[i] : r;
  return r;
}

/// Σ e^(x[j] - mx) over [0, n) in f32 lanes combined in f64; with `y`,
/// also stores each term to y[j] (x == y allowed). Lanes at or past `limit`
/// count as e^-inf = 0 (stored as 0) whatever x holds there.
TESSEL_INLINE inline double expSum(const float *x, float *y, int64_t n,
                                   int64_t limit, float mx) {
  F64x4 wideLo = {}, wideHi = {};
  int64_t i = 0, whole = n - n % kLanes;
  const I32x8 lane = {0, 1, 2, 3, 4, 5, 6, 7};
  while (i < whole) {
    F32x8 acc = {};
    int64_t end = std::min(whole, i + kBlock);
    for (; i < end; i += kLanes) {
      F32x8 v;
      load8(v, x + i);
      v -= mx;
      fastExp8(v);
      // i < limit <= INT64 range; the lane index compare is in i32, so
      // clamp the distance first.
      int32_t left = int32_t(std::min<int64_t>(limit - i, kLanes));
      v = lane < left ? v : F32x8{};
      if (y)
        store8(y + i, v);
      acc += v;
    }
    flushWide(wideLo, wideHi, acc);
  }
  double s = sumWide(wideLo, wideHi);
  for (; i < n; ++i) {
    float e = i < limit ? fastExp(x[i] - mx) : 0.0f;
    if (y)
      y[i] = e;
    s += double(e);
  }
  return s;
}

/// Softmax of one row into y (x == y allowed) where only x[0, limit) are
/// scores: y[0, limit) gets e^(x - max) / Σ, and y[limit, n) exactly 0. The
/// max is subtracted first, so e^(x - max) is in (0, 1] and cannot
/// overflow. A row of -inf (or with NaN) gives NaN, as e^(x - max) does.
/// Running every row of a causal block over one whole-vector width `n`
/// beats short odd lengths with scalar tails. Call it from a dispatch body.
TESSEL_INLINE inline void softmaxRow(const float *x, float *y, int64_t n,
                                     int64_t limit) {
  float mx = rowMax(x, limit);
  float inv = float(1.0 / expSum(x, y, n, limit, mx));
  int64_t i = 0, whole = n - n % kLanes;
  for (; i < whole; i += kLanes) {
    F32x8 v;
    load8(v, y + i);
    v *= inv;
    store8(y + i, v);
  }
  for (; i < n; ++i)
    y[i] *= inv;
}

/// log Σ e^x[i] over one row (max + log Σ e^(x - max): no overflow for
/// large logits, no log(0) for very negative ones), in f64.
TESSEL_INLINE inline double logSumExpRow(const float *x, int64_t n) {
  float mx = rowMax(x, n);
  return double(mx) + std::log(expSum(x, nullptr, n, n, mx));
}

} // namespace cpu
} // namespace tessel

#endif // TESSEL_RUNTIME_CPU_VECMATH_H
