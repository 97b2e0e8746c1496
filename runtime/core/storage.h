//===- storage.h - Stored floats and exact scalar arithmetic ----*- C++ -*-===//
//
// The runtime's one definition of how elements are stored and converted,
// for every backend (the CPU's kernels and the CUDA kernels and their host
// tests include it): the 16-bit float conversions (round to nearest even,
// NaN quieted), double to float rounded to odd (no double rounding on the
// way to 16 bits), double to any element type, as TESSEL_HD functions; and
// f32/f64 operations that round every step. nvcc contracts a·b + c into one
// FMA by default while the CPU backend (x86-64 without -march) never does;
// the CUDA kernels write each operation as an *Rn call so that a device
// result equals the CPU's bit for bit where the CPU's order is followed.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CORE_STORAGE_H
#define TESSEL_RUNTIME_CORE_STORAGE_H

#include "core/hd.h"
#include "tessel/runtime.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace tessel {
namespace stored {

//===--- Operations rounded one at a time ---------------------------------===//

#ifdef __CUDA_ARCH__
TESSEL_HD float addRn(float a, float b) { return __fadd_rn(a, b); }
TESSEL_HD float subRn(float a, float b) { return __fsub_rn(a, b); }
TESSEL_HD float mulRn(float a, float b) { return __fmul_rn(a, b); }
TESSEL_HD float divRn(float a, float b) { return __fdiv_rn(a, b); }
TESSEL_HD float sqrtRn(float a) { return __fsqrt_rn(a); }
TESSEL_HD double addRn(double a, double b) { return __dadd_rn(a, b); }
TESSEL_HD double subRn(double a, double b) { return __dsub_rn(a, b); }
TESSEL_HD double mulRn(double a, double b) { return __dmul_rn(a, b); }
TESSEL_HD double divRn(double a, double b) { return __ddiv_rn(a, b); }
TESSEL_HD double sqrtRn(double a) { return __dsqrt_rn(a); }
#else
TESSEL_HD float addRn(float a, float b) { return a + b; }
TESSEL_HD float subRn(float a, float b) { return a - b; }
TESSEL_HD float mulRn(float a, float b) { return a * b; }
TESSEL_HD float divRn(float a, float b) { return a / b; }
TESSEL_HD float sqrtRn(float a) { return std::sqrt(a); }
TESSEL_HD double addRn(double a, double b) { return a + b; }
TESSEL_HD double subRn(double a, double b) { return a - b; }
TESSEL_HD double mulRn(double a, double b) { return a * b; }
TESSEL_HD double divRn(double a, double b) { return a / b; }
TESSEL_HD double sqrtRn(double a) { return std::sqrt(a); }
#endif

//===--- 16-bit floats (the CPU backend's conversions) --------------------===//

TESSEL_HD uint32_t floatBits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

TESSEL_HD float bitsFloat(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

TESSEL_HD float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) // zero or subnormal: mant · 2^-24 is exact in f32
    return bitsFloat(floatBits(mulRn(float(mant), 0x1p-24f)) | sign);
  if (exp == 31)
    return bitsFloat(sign | 0x7f800000u | (mant << 13));
  return bitsFloat(sign | ((exp + 112) << 23) | (mant << 13));
}

/// Round to nearest even; overflow to inf; NaN stays NaN (quieted).
TESSEL_HD uint16_t floatToHalf(float f) {
  uint32_t x = floatBits(f);
  uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) {
    if (x > 0x7f800000u)
      return uint16_t(sign | 0x7e00u | ((x >> 13) & 0x3ffu));
    return uint16_t(sign | 0x7c00u);
  }
  if (x >= 0x477ff000u) // >= 65520 rounds past the largest half
    return uint16_t(sign | 0x7c00u);
  if (x < 0x38800000u) {
    // Subnormal or zero: adding 0.5 lets the FPU's own RNE round at 2^-24.
    float r = addRn(bitsFloat(x), 0.5f);
    return uint16_t(sign | (floatBits(r) - 0x3f000000u));
  }
  uint32_t odd = (x >> 13) & 1u;
  x += 0xc8000fffu + odd;
  return uint16_t(sign | (x >> 13));
}

TESSEL_HD float bf16ToFloat(uint16_t b) { return bitsFloat(uint32_t(b) << 16); }

TESSEL_HD uint16_t floatToBf16(float f) {
  uint32_t x = floatBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) // NaN: keep sign, force quiet bit
    return uint16_t((x >> 16) | 0x0040u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return uint16_t(x >> 16);
}

/// Double to float rounded to odd, so a second rounding to 16 bits is
/// correct (cpu/internal.h's doubleToFloatOdd): an inexact result with an
/// even last bit moves one ulp toward d, i.e. away from zero when |d| is
/// the larger, toward zero otherwise.
TESSEL_HD float doubleToFloatOdd(double d) {
  float f = float(d);
  uint32_t bits = floatBits(f);
  bool finite = (bits & 0x7f800000u) != 0x7f800000u;
  if (finite && double(f) != d && !(bits & 1u)) {
    bool away = ::fabs(d) > ::fabs(double(f));
    f = bitsFloat(away ? bits + 1u : bits - 1u);
  }
  return f;
}

//===--- Element types ----------------------------------------------------===//

struct Half {
  uint16_t bits;
};
struct BFloat {
  uint16_t bits;
};

/// Load/store of a stored float type in its compute type (f32, f64 for f64).
template <class T> struct Elem {
  using Compute = T;
  static TESSEL_HD T load(T v) { return v; }
  static TESSEL_HD T store(T v) { return v; }
};
template <> struct Elem<Half> {
  using Compute = float;
  static TESSEL_HD float load(Half v) { return halfToFloat(v.bits); }
  static TESSEL_HD Half store(float v) { return Half{floatToHalf(v)}; }
};
template <> struct Elem<BFloat> {
  using Compute = float;
  static TESSEL_HD float load(BFloat v) { return bf16ToFloat(v.bits); }
  static TESSEL_HD BFloat store(float v) { return BFloat{floatToBf16(v)}; }
};

/// Correctly rounded double to any element type (cpu/internal.h's
/// fromDouble): integers truncate toward zero and saturate, NaN gives 0.
template <class T> TESSEL_HD T fromDouble(double d) {
  if constexpr (std::is_same<T, double>::value) {
    return d;
  } else if constexpr (std::is_same<T, float>::value) {
    return float(d);
  } else if constexpr (std::is_same<T, Half>::value) {
    return Half{floatToHalf(doubleToFloatOdd(d))};
  } else if constexpr (std::is_same<T, BFloat>::value) {
    return BFloat{floatToBf16(doubleToFloatOdd(d))};
  } else {
    static_assert(std::is_same<T, int32_t>::value ||
                      std::is_same<T, int64_t>::value,
                  "an element type");
    if (d != d)
      return T(0);
    // 2^63 and 2^31 are exact doubles.
    const double hi = std::is_same<T, int64_t>::value ? 0x1p63 : 0x1p31;
    if (d >= hi)
      return std::is_same<T, int64_t>::value ? T(INT64_MAX) : T(INT32_MAX);
    if (d <= -hi)
      return std::is_same<T, int64_t>::value ? T(INT64_MIN) : T(INT32_MIN);
    return T(d);
  }
}

//===--- Dtype dispatch (host) ---------------------------------------------===//

/// Calls f(T()) for the stored type of a float dtype; false for any other
/// dtype (the front checks dtypes, so a backend may ignore the result).
template <class F> bool visitFloat(int32_t dtype, F &&f) {
  switch (dtype) {
  case TESSEL_F32:
    f(float());
    return true;
  case TESSEL_F16:
    f(Half());
    return true;
  case TESSEL_BF16:
    f(BFloat());
    return true;
  case TESSEL_F64:
    f(double());
    return true;
  default:
    return false;
  }
}

/// visitFloat with the type the kernel stores its widened results in:
/// f(T(), P()) with P float for a 16-bit T whose results are f32
/// (`outDtype` TESSEL_F32: the _f32 entries), else T.
template <class F>
bool visitFloatWidened(int32_t dtype, int32_t outDtype, F &&f) {
  return visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same<T, Half>::value ||
                  std::is_same<T, BFloat>::value)
      if (outDtype == TESSEL_F32)
        return f(tag, float());
    f(tag, tag);
  });
}

/// Like visitFloat, plus the integer dtypes.
template <class F> bool visitAny(int32_t dtype, F &&f) {
  switch (dtype) {
  case TESSEL_I32:
    f(int32_t());
    return true;
  case TESSEL_I64:
    f(int64_t());
    return true;
  default:
    return visitFloat(dtype, f);
  }
}

} // namespace stored
} // namespace tessel

#endif // TESSEL_RUNTIME_CORE_STORAGE_H
