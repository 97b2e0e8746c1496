//===- rope.h - The rotary position embedding's arithmetic ------*- C++ -*-===//
//
// What tessel_rope computes per pair, shared by the CPU backend and the
// CUDA kernel (TESSEL_HD), so the host tests check the arithmetic the
// device runs. The angle and its sine and cosine are computed in f64 and
// rounded to the arithmetic's type C once; the rotation is two products
// and a sum per element in C.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CORE_ROPE_H
#define TESSEL_RUNTIME_CORE_ROPE_H

#include "core/hd.h"

#include <cmath>
#include <cstdint>

namespace tessel::rope {

/// Whether v is neither infinite nor NaN (the same code on host and device).
TESSEL_HD bool finite(double v) { return v - v == 0; }

/// Which rule a Scaling's numbers follow.
enum class Rule : int32_t {
  /// Llama 3.1's (rope_type "llama3"): low and high are low_freq_factor and
  /// high_freq_factor, original the original context.
  Llama3 = 0,
  /// YaRN's (rope_type "yarn"): low and high are the first and last pair
  /// of the ramp from kept to divided frequencies (yarn() computes them),
  /// original the original context they came from.
  Yarn = 1,
  /// LongRoPE's (rope_type "longrope", Phi-3's 128k): pair i's frequency
  /// divided by pairFactor[i]; factor is 1.
  PerPair = 2,
};

/// The most pairs a rope with per-pair factors rotates (heads of 256). The
/// factors ride in the Scaling by value, so a CUDA kernel (and a captured
/// graph) reads them from its parameters.
constexpr int64_t kMaxFactorPairs = 128;

/// A rope frequency scaling, or none (factor 0).
struct Scaling {
  double factor = 0, low = 0, high = 0, original = 0;
  Rule rule = Rule::Llama3;
  /// The factor on cos and sin (LongRoPE's attention factor: the turned
  /// elements scaled, the passed ones not), whatever the rule.
  double attention = 1;
  /// Rule::PerPair's divisors, one a rotated pair.
  double pairFactor[kMaxFactorPairs] = {};

  TESSEL_HD bool none() const { return factor == 0; }
  TESSEL_HD bool valid() const {
    if (rule == Rule::PerPair)
      return factor == 1; // the entry checks the factors themselves
    if (rule == Rule::Yarn)
      return factor >= 1 && low >= 0 && high > low && original > 0 &&
             finite(factor) && finite(high) && finite(original);
    return factor >= 1 && low > 0 && high > low && original > 0 &&
           finite(factor) && finite(high) && finite(original);
  }
};

/// YaRN's scaling (transformers' _compute_yarn_parameters) of a head of
/// headDim at base theta (> 1): the pairs that turn fewer than betaSlow
/// times over the original context are divided by the factor, those that
/// turn more than betaFast times kept, with a linear ramp over the pairs
/// between (their correction dimensions, floored and ceiled unless
/// !truncate, clamped to [0, headDim - 1]). The attention factor
/// (0.1 ln(factor) + 1 on cos and sin) is the model's: a scale of its
/// scores.
inline Scaling yarn(double factor, double betaFast, double betaSlow,
                    double original, bool truncate, int64_t headDim,
                    double theta) {
  const double twoPi = 6.283185307179586476925286766559;
  auto correctionDim = [&](double rotations) {
    return double(headDim) * log(original / (rotations * twoPi)) /
           (2 * log(theta));
  };
  double low = correctionDim(betaFast), high = correctionDim(betaSlow);
  if (truncate) {
    low = floor(low);
    high = ceil(high);
  }
  low = low > 0 ? low : 0;
  high = high < double(headDim - 1) ? high : double(headDim - 1);
  if (low == high)
    high += 0.001; // transformers' guard against a zero-width ramp
  return {factor, low, high, original, Rule::Yarn};
}

/// LongRoPE's scaling: pair i's frequency divided by factors[i], for the
/// `pairs` (<= kMaxFactorPairs) pairs rotated.
inline Scaling perPair(const double *factors, int64_t pairs) {
  Scaling scaling{1, 0, 0, 0, Rule::PerPair};
  for (int64_t i = 0; i < pairs; ++i)
    scaling.pairFactor[i] = factors[i];
  return scaling;
}

/// The frequency of pair `pair` (< headDim / 2): theta^(-2 pair / headDim),
/// scaled. Llama 3.1's: kept for wavelengths under original / high,
/// divided by the factor over original / low, and blended linearly in the
/// wavelength's reciprocal between. YaRN's: kept before pair low, divided
/// from pair high, blended linearly in the pair between. LongRoPE's:
/// divided by the pair's own factor. (headDim is the rotated width: the
/// rotary dimension of a partial rope.)
TESSEL_HD double frequency(int64_t pair, int64_t headDim, double theta,
                           const Scaling &scaling) {
  double f = pow(theta, -2.0 * double(pair) / double(headDim));
  if (scaling.none())
    return f;
  if (scaling.rule == Rule::PerPair)
    return f / scaling.pairFactor[pair];
  if (scaling.rule == Rule::Yarn) {
    double ramp = (double(pair) - scaling.low) / (scaling.high - scaling.low);
    ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
    return f / scaling.factor * ramp + f * (1 - ramp);
  }
  const double twoPi = 6.283185307179586476925286766559;
  double wavelength = twoPi / f;
  if (wavelength < scaling.original / scaling.high)
    return f;
  if (wavelength > scaling.original / scaling.low)
    return f / scaling.factor;
  double s = (scaling.original / wavelength - scaling.low) /
             (scaling.high - scaling.low);
  return (1 - s) * f / scaling.factor + s * f;
}

/// The angle of pair `pair` at `position`: position · frequency.
TESSEL_HD double angle(int64_t position, int64_t pair, int64_t headDim,
                       double theta, const Scaling &scaling) {
  return double(position) * frequency(pair, headDim, theta, scaling);
}

/// The elements the pair rotates: (pair, pair + headDim / 2), or
/// (2 pair, 2 pair + 1) when interleaved.
TESSEL_HD int64_t firstOf(int64_t pair, bool interleaved) {
  return interleaved ? 2 * pair : pair;
}
TESSEL_HD int64_t secondOf(int64_t pair, int64_t headDim, bool interleaved) {
  return interleaved ? 2 * pair + 1 : pair + headDim / 2;
}

/// The cosine and the (signed: negated for the inverse) sine of a pair's
/// angle, times the scaling's attention factor, rounded to C. (Scaled, the
/// inverse is the transpose: the gradient.)
template <class C> struct Turn { C cos, sin; };
template <class C>
TESSEL_HD Turn<C> turnOf(int64_t position, int64_t pair, int64_t headDim,
                         double theta, const Scaling &scaling, bool inverse) {
  double a = angle(position, pair, headDim, theta, scaling);
  double s = sin(a) * scaling.attention;
  return {C(cos(a) * scaling.attention), C(inverse ? -s : s)};
}

/// (a, b) rotated: (a cos − b sin, b cos + a sin).
template <class C> TESSEL_HD C rotatedFirst(C a, C b, Turn<C> t) {
  return a * t.cos - b * t.sin;
}
template <class C> TESSEL_HD C rotatedSecond(C a, C b, Turn<C> t) {
  return b * t.cos + a * t.sin;
}

} // namespace tessel::rope

#endif // TESSEL_RUNTIME_CORE_ROPE_H
