//===- elementwise_math.h - Per-element math of CUDA kernels -*- C++ -*-===//
//
// What the elementwise kernels (elementwise.cu) and the loss kernels
// (loss.cu) compute per element, as TESSEL_HD functions: casts between
// every pair of dtypes (the 16-bit conversions are core/storage.h's), the
// unary ops and their derivatives, the binary ops and dropout's
// counter-based mask (the hash is core/rng.h's, compiled for the device). Each is the
// CPU backend's arithmetic (cpu/internal.h, cpu/vecmath.h, cpu/elementwise.cpp,
// cpu/backward.cpp, core/rng.h) written once more for host and device: the
// conversions and the mask bit for bit; the f32 exp, tanh and erf as the
// same polynomials (no libm, so host and device agree up to FMA
// contraction). The host tests (test/cuda/CudaElementwiseTest.cpp) run these
// functions against the CPU backend; the kernels run them on the GPU.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CUDA_ELEMENTWISE_MATH_H
#define TESSEL_RUNTIME_CUDA_ELEMENTWISE_MATH_H

#include "core/rng.h"
#include "core/storage.h"
#include "tessel/runtime.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace tessel {
namespace cuda {

//===--- Stored floats (core/storage.h) -----------------------------------===//

using stored::bf16ToFloat;
using stored::BFloat;
using stored::bitsFloat;
using stored::doubleToFloatOdd;
using stored::Elem;
using stored::floatBits;
using stored::floatToBf16;
using stored::floatToHalf;
using stored::Half;
using stored::halfToFloat;
using stored::mulRn;
using stored::visitAny;
using stored::visitFloat;

TESSEL_HD float infinityF() { return bitsFloat(0x7f800000u); }

/// N elements moved as one 16-byte (or narrower) load or store.
template <class T, int N> struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

template <class T> constexpr bool isIntegral() {
  return std::is_integral<T>::value;
}

template <class T> TESSEL_HD double toDouble(T v) {
  return double(Elem<T>::load(v));
}

/// Correctly rounded double to any element type (core/storage.h's, equal
/// to cpu/internal.h's).
using stored::fromDouble;

/// tessel_cast of one element: integer to integer wraps as C does, one type
/// to itself copies the bits, everything else goes through double.
template <class TIn, class TOut> TESSEL_HD TOut castElement(TIn x) {
  if constexpr (isIntegral<TIn>() && isIntegral<TOut>())
    return TOut(x);
  else if constexpr (std::is_same<TIn, TOut>::value)
    return x;
  else
    return fromDouble<TOut>(toDouble(x));
}

//===--- f32 exp, tanh, erf (cpu/vecmath.h's polynomials) -----------------===//

/// e^x (Cephes' expf: Cody–Waite reduction and a degree-5 polynomial), ~1
/// ulp; 0 below the range, +inf above, NaN stays NaN.
TESSEL_HD float fastExp(float x) {
  const float lo = -104.0f, hi = 88.7228394f;
  float c = x < lo ? lo : x; // NaN passes through.
  c = c > hi ? hi : c;
  const float magic = 12582912.0f; // 1.5 · 2^23: round(c / ln 2) trick.
  float t = c * 1.44269504088896341f + magic;
  float fn = t - magic;
  float r = c - fn * 0.693359375f;
  r = r - fn * -2.12194440e-4f;
  float p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float e = p * (r * r) + r + 1.0f;
  // 2^n as two normal factors, so a subnormal result rounds once.
  uint32_t n = floatBits(t) - floatBits(magic);
  uint32_t n1 = uint32_t(int32_t(n) >> 1);
  float s1 = bitsFloat((n1 + 127u) << 23),
        s2 = bitsFloat((n - n1 + 127u) << 23);
  float res = (e * s1) * s2;
  res = x < lo ? 0.0f : res;
  return x > hi ? infinityF() : res;
}

/// tanh as Eigen's [13/6] rational function on [-7.9, 7.9]; x itself for
/// |x| < 0.0004.
TESSEL_HD float fastTanh(float x) {
  const float bound = 7.90531110763549805f;
  float c = x < -bound ? -bound : x;
  c = c > bound ? bound : c;
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
  float ratio = p / q;
  return (x < 0 ? -x : x) < 0.0004f ? x : ratio;
}

/// erf as Eigen's [13/8] rational function on [-4, 4].
TESSEL_HD float fastErf(float x) {
  float c = x < -4.0f ? -4.0f : x;
  c = c > 4.0f ? 4.0f : c;
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

// The compute types' functions: the polynomials for f32, libm for f64.
TESSEL_HD float expOf(float x) { return fastExp(x); }
TESSEL_HD double expOf(double x) { return ::exp(x); }
TESSEL_HD float tanhOf(float x) { return fastTanh(x); }
TESSEL_HD double tanhOf(double x) { return ::tanh(x); }
TESSEL_HD float erfOf(float x) { return fastErf(x); }
TESSEL_HD double erfOf(double x) { return ::erf(x); }
TESSEL_HD float logOf(float x) { return ::logf(x); }
TESSEL_HD double logOf(double x) { return ::log(x); }
TESSEL_HD float sqrtOf(float x) { return ::sqrtf(x); }
TESSEL_HD double sqrtOf(double x) { return ::sqrt(x); }
template <class C> TESSEL_HD C absOf(C x) { return x < C(0) ? -x : x; }

//===--- Unary ops and their derivatives ----------------------------------===//

/// 1 / (1 + e^-x) without overflow (e^-|x| never exceeds 1).
TESSEL_HD float sigmoidOf(float x) {
  float e = fastExp(-absOf(x));
  float inv = 1.0f / (1.0f + e);
  return x >= 0.0f ? inv : e * inv;
}
TESSEL_HD double sigmoidOf(double x) {
  if (x >= 0.0)
    return 1.0 / (1.0 + ::exp(-x));
  double e = ::exp(x);
  return e / (1.0 + e);
}

constexpr double kSqrtHalf = 0.70710678118654752440;    // 1 / sqrt(2)
constexpr double kSqrt2OverPi = 0.79788456080286535588; // sqrt(2 / pi)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1 / sqrt(2 pi)

/// tessel_unary's op `Op` in compute type C.
template <int Op, class C> TESSEL_HD C unaryOp(C v) {
  if constexpr (Op == TESSEL_NEG) {
    return -v;
  } else if constexpr (Op == TESSEL_EXP) {
    return expOf(v);
  } else if constexpr (Op == TESSEL_LOG) {
    return logOf(v);
  } else if constexpr (Op == TESSEL_SQRT) {
    return sqrtOf(v);
  } else if constexpr (Op == TESSEL_RSQRT) {
    return C(1) / sqrtOf(v);
  } else if constexpr (Op == TESSEL_TANH) {
    return tanhOf(v);
  } else if constexpr (Op == TESSEL_SIGMOID) {
    return sigmoidOf(v);
  } else if constexpr (Op == TESSEL_RELU) {
    return v < C(0) ? C(0) : v; // NaN stays visible.
  } else if constexpr (Op == TESSEL_GELU) {
    return C(0.5) * v * (C(1) + erfOf(v * C(kSqrtHalf)));
  } else if constexpr (Op == TESSEL_GELU_TANH) {
    const C k = C(kSqrt2OverPi);
    return C(0.5) * v * (C(1) + tanhOf(k * (v + C(0.044715) * v * v * v)));
  } else {
    static_assert(Op == TESSEL_SILU, "unknown unary op");
    return v * sigmoidOf(v);
  }
}

// The saturating derivatives in e = e^-|a| and d = 1 / (1 + e), as
// cpu/backward.cpp writes them (1 - tanh² = 4·e·d², σ·(1 - σ) = e·d²):
// accurate in the tails, where 1 - t² of a rounded t is all cancellation.

template <class C> TESSEL_HD C tanhGrad(C x) {
  C e = expOf(C(-2) * absOf(x)), d = C(1) / (C(1) + e);
  return C(4) * e * d * d;
}

template <class C> TESSEL_HD C sigmoidGrad(C x) {
  C e = expOf(-absOf(x)), d = C(1) / (C(1) + e);
  return e * d * d;
}

/// σ·(1 + x·(1 − σ)); σ and 1 − σ are d and e·d by the sign of x.
template <class C> TESSEL_HD C siluGrad(C x) {
  C e = expOf(-absOf(x)), d = C(1) / (C(1) + e), ed = e * d;
  C s = x >= C(0) ? d : ed, sc = x >= C(0) ? ed : d;
  return s * (C(1) + x * sc);
}

/// Φ(x) + x·φ(x).
template <class C> TESSEL_HD C geluGrad(C x) {
  C cdf = C(0.5) * (C(1) + erfOf(x * C(kSqrtHalf)));
  C pdf = C(kInvSqrt2Pi) * expOf(C(-0.5) * x * x);
  return cdf + x * pdf;
}

/// 0.5·(1 + t) + 0.5·x·(1 − t²)·u' with u = k·(x + c·x³), t = tanh(u).
template <class C> TESSEL_HD C geluTanhGrad(C x) {
  const C k = C(kSqrt2OverPi);
  const C c = C(0.044715);
  C x2 = x * x;
  C u = k * (x + c * x2 * x);
  C du = k * (C(1) + C(3) * c * x2);
  C e = expOf(C(-2) * absOf(u)), d = C(1) / (C(1) + e), ed = e * d;
  C half = u >= C(0) ? d : ed;
  return half + C(2) * x * ed * d * du;
}

/// tessel_unary_grad's dx for op `Op`: op'(v) · g.
template <int Op, class C> TESSEL_HD C unaryGradOp(C v, C g) {
  if constexpr (Op == TESSEL_NEG) {
    return -g;
  } else if constexpr (Op == TESSEL_EXP) {
    return g * expOf(v);
  } else if constexpr (Op == TESSEL_LOG) {
    return g / v;
  } else if constexpr (Op == TESSEL_SQRT) {
    return g * C(0.5) / sqrtOf(v);
  } else if constexpr (Op == TESSEL_RSQRT) {
    C r = C(1) / sqrtOf(v);
    return g * C(-0.5) * r * r * r;
  } else if constexpr (Op == TESSEL_TANH) {
    return g * tanhGrad(v);
  } else if constexpr (Op == TESSEL_SIGMOID) {
    return g * sigmoidGrad(v);
  } else if constexpr (Op == TESSEL_RELU) {
    return v <= C(0) ? C(0) : g; // threshold_backward; NaN x passes g.
  } else if constexpr (Op == TESSEL_GELU) {
    return g * geluGrad(v);
  } else if constexpr (Op == TESSEL_GELU_TANH) {
    return g * geluTanhGrad(v);
  } else {
    static_assert(Op == TESSEL_SILU, "unknown unary op");
    return g * siluGrad(v);
  }
}

//===--- Binary ops -------------------------------------------------------===//

/// tessel_binary's op `Op` in compute type C. Integers wrap (through their
/// unsigned type); an integer division by zero gives 0 and sets
/// `divByZero`, MIN / -1 gives MIN, as the CPU backend does.
template <int Op, class C> TESSEL_HD C binaryOp(C x, C y, bool &divByZero) {
  if constexpr (Op == TESSEL_EQUAL) {
    return x == y ? C(1) : C(0);
  } else if constexpr (isIntegral<C>()) {
    using U = std::make_unsigned_t<C>;
    if constexpr (Op == TESSEL_ADD) {
      return C(U(U(x) + U(y)));
    } else if constexpr (Op == TESSEL_SUB) {
      return C(U(U(x) - U(y)));
    } else if constexpr (Op == TESSEL_MUL) {
      return C(U(U(x) * U(y)));
    } else {
      static_assert(Op == TESSEL_DIV, "unknown binary op");
      if (y == 0) {
        divByZero = true;
        return C(0);
      }
      if (y == C(-1) && x == std::numeric_limits<C>::min())
        return x;
      return C(x / y);
    }
  } else {
    if constexpr (Op == TESSEL_ADD)
      return x + y;
    else if constexpr (Op == TESSEL_SUB)
      return x - y;
    else if constexpr (Op == TESSEL_MUL)
      return x * y;
    else {
      static_assert(Op == TESSEL_DIV, "unknown binary op");
      return x / y;
    }
  }
}

/// tessel_binary_broadcast's split of an [rows, cols] view into units of
/// `width` elements along a row (cols a multiple of width): unit u's row
/// and first column.
template <class I>
TESSEL_HD void broadcastUnit(I u, I unitsPerRow, int width, I &row, I &col) {
  row = u / unitsPerRow;
  col = (u - row * unitsPerRow) * I(width);
}

/// The element of tessel_binary_broadcast's b that element (row, col)
/// meets: b[row] (TESSEL_BROADCAST_ROWS) or b[col].
template <class I>
TESSEL_HD I broadcastOperandIndex(I row, I col, bool perRow) {
  return perRow ? row : col;
}

//===--- Dropout (core/rng.h's hash) --------------------------------------===//

/// The part of hash4(kDropoutDomain ^ seed, step, index, stream) that is
/// the same for every element of a call (computed once on the host).
TESSEL_HD uint64_t dropoutPrefix(uint64_t seed, uint64_t step) {
  return mix64(mix64(kDropoutDomain ^ seed) ^ step);
}

/// Whether element `index` of the whole tensor is kept.
TESSEL_HD bool dropoutKeep(uint64_t prefix, int64_t index, uint64_t stream,
                           double rate) {
  uint64_t h = mix64(mix64(prefix ^ uint64_t(index)) ^ stream);
  return uniformOpen(h) >= rate;
}

/// 1 / (1 - rate) in the compute type; 0 for rate 1 (nothing is kept).
template <class C> TESSEL_HD C dropoutScale(double rate) {
  return rate < 1.0 ? C(1.0 / (1.0 - rate)) : C(0);
}

/// tessel_dropout_block's map from a block's row-major element to the
/// whole tensor's: dimensions of extent 1 dropped and neighbours that are
/// contiguous in the whole tensor merged, so most blocks need one or two.
struct BlockDims {
  static constexpr int kMax = 12;
  int32_t rank = 0;
  int64_t shape[kMax] = {};
  int64_t strides[kMax] = {};
};

/// Merges a block's `rank` dims into `shape`, `strides` (room for `rank`
/// each), `mergedRank` of them; false when more than BlockDims::kMax remain
/// (too many for a kernel argument).
inline bool collapseBlockDims(int32_t rank, const int64_t *hostShape,
                              const int64_t *hostStrides, int64_t *shape,
                              int64_t *strides, int32_t &mergedRank) {
  int32_t r = 0;
  for (int32_t d = 0; d < rank; ++d) {
    if (hostShape[d] == 1)
      continue;
    if (r > 0 && strides[r - 1] == hostStrides[d] * hostShape[d]) {
      shape[r - 1] *= hostShape[d];
      strides[r - 1] = hostStrides[d];
      continue;
    }
    shape[r] = hostShape[d];
    strides[r] = hostStrides[d];
    ++r;
  }
  mergedRank = r;
  return r <= BlockDims::kMax;
}

/// first + Σ i_d · strides[d] for the row-major index `i` of the block.
TESSEL_HD int64_t blockIndex(int32_t rank, const int64_t *shape,
                             const int64_t *strides, int64_t first, int64_t i) {
  int64_t index = first;
  for (int32_t d = rank - 1; d >= 0; --d) {
    int64_t q = i / shape[d];
    index += (i - q * shape[d]) * strides[d];
    i = q;
  }
  return index;
}

} // namespace cuda
} // namespace tessel

#endif // TESSEL_RUNTIME_CUDA_ELEMENTWISE_MATH_H
