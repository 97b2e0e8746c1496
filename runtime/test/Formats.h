//===- Formats.h - Element formats for the runtime tests --------*- C++ -*-===//
//
// Reference rounding and byte encodings of every dtype, written from the
// format definitions with frexp/ldexp, independently of the runtime's bit
// tricks, so the tests check the runtime instead of restating it. Free of
// GoogleTest, so plain test programs (the MPI check) share it.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_TEST_FORMATS_H
#define TESSEL_RUNTIME_TEST_FORMATS_H

#include "tessel/runtime.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace tt {

inline const char *dtypeName(int32_t dtype) {
  switch (dtype) {
  case TESSEL_F32:
    return "f32";
  case TESSEL_F16:
    return "f16";
  case TESSEL_BF16:
    return "bf16";
  case TESSEL_F64:
    return "f64";
  case TESSEL_I32:
    return "i32";
  case TESSEL_I64:
    return "i64";
  }
  return "?";
}

constexpr int32_t kFloatTypes[] = {TESSEL_F32, TESSEL_F16, TESSEL_BF16,
                                   TESSEL_F64};
constexpr int32_t kAllTypes[] = {TESSEL_F32, TESSEL_F16, TESSEL_BF16,
                                 TESSEL_F64, TESSEL_I32, TESSEL_I64};

inline bool isInt(int32_t dtype) {
  return dtype == TESSEL_I32 || dtype == TESSEL_I64;
}

/// Round `v` to nearest even in a binary format with `p` significand bits
/// (implicit bit included) and exponent range [emin, emax]; inf past the
/// largest finite value.
inline double roundToFormat(double v, int p, int emin, int emax) {
  if (std::isnan(v) || std::isinf(v) || v == 0.0)
    return v;
  double a = std::fabs(v);
  int e;
  std::frexp(a, &e);
  int exp = std::max(e - 1, emin); // Subnormals share emin's quantum.
  double quantum = std::ldexp(1.0, exp - (p - 1));
  double r = std::nearbyint(a / quantum) * quantum;
  double maxFinite = std::ldexp(2.0 - std::ldexp(1.0, 1 - p), emax);
  if (r > maxFinite)
    r = INFINITY;
  return std::copysign(r, v);
}

/// `v` as stored in `dtype` (integers truncate toward zero).
inline double quantize(int32_t dtype, double v) {
  switch (dtype) {
  case TESSEL_F32:
    return double(float(v));
  case TESSEL_F16:
    return roundToFormat(v, 11, -14, 15);
  case TESSEL_BF16:
    return roundToFormat(v, 8, -126, 127);
  case TESSEL_I32:
  case TESSEL_I64:
    return std::trunc(v);
  default:
    return v;
  }
}

/// Bits of an f16-representable value.
inline uint16_t encodeHalf(double v) {
  uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  double a = std::fabs(v);
  if (std::isnan(v))
    return 0x7e00;
  if (std::isinf(a))
    return sign | 0x7c00;
  if (a < std::ldexp(1.0, -14))
    return uint16_t(sign | uint16_t(a * std::ldexp(1.0, 24)));
  int e;
  std::frexp(a, &e);
  int exp = e - 1;
  int mant = int(a * std::ldexp(1.0, 10 - exp)) - 1024;
  return uint16_t(sign | ((exp + 15) << 10) | mant);
}

inline double decodeHalf(uint16_t h) {
  double sign = (h & 0x8000) ? -1.0 : 1.0;
  int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 0)
    return sign * std::ldexp(double(mant), -24);
  if (exp == 31)
    return mant ? NAN : sign * INFINITY;
  return sign * std::ldexp(double(1024 + mant), exp - 25);
}

inline uint16_t encodeBf16(double v) {
  float f = float(v); // Exact for a bf16-representable value.
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return uint16_t(u >> 16);
}

inline double decodeBf16(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return double(f);
}

/// Host bytes of `values` (each quantized first) stored as `dtype`.
inline std::vector<uint8_t> encode(int32_t dtype,
                                   const std::vector<double> &values) {
  size_t es = size_t(tessel_dtype_size(dtype));
  std::vector<uint8_t> bytes(values.size() * es);
  for (size_t i = 0; i < values.size(); ++i) {
    double q = quantize(dtype, values[i]);
    uint8_t *p = bytes.data() + i * es;
    switch (dtype) {
    case TESSEL_F32: {
      float f = float(q);
      std::memcpy(p, &f, 4);
      break;
    }
    case TESSEL_F16: {
      uint16_t h = encodeHalf(q);
      std::memcpy(p, &h, 2);
      break;
    }
    case TESSEL_BF16: {
      uint16_t h = encodeBf16(q);
      std::memcpy(p, &h, 2);
      break;
    }
    case TESSEL_F64:
      std::memcpy(p, &q, 8);
      break;
    case TESSEL_I32: {
      int32_t x = int32_t(q);
      std::memcpy(p, &x, 4);
      break;
    }
    case TESSEL_I64: {
      int64_t x = int64_t(q);
      std::memcpy(p, &x, 8);
      break;
    }
    }
  }
  return bytes;
}

inline std::vector<double> decode(int32_t dtype, const void *data, size_t n) {
  const uint8_t *bytes = static_cast<const uint8_t *>(data);
  size_t es = size_t(tessel_dtype_size(dtype));
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t *p = bytes + i * es;
    switch (dtype) {
    case TESSEL_F32: {
      float f;
      std::memcpy(&f, p, 4);
      out[i] = f;
      break;
    }
    case TESSEL_F16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      out[i] = decodeHalf(h);
      break;
    }
    case TESSEL_BF16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      out[i] = decodeBf16(h);
      break;
    }
    case TESSEL_F64:
      std::memcpy(&out[i], p, 8);
      break;
    case TESSEL_I32: {
      int32_t x;
      std::memcpy(&x, p, 4);
      out[i] = x;
      break;
    }
    case TESSEL_I64: {
      int64_t x;
      std::memcpy(&x, p, 8);
      out[i] = double(x);
      break;
    }
    }
  }
  return out;
}

inline std::vector<double> decode(int32_t dtype,
                                  const std::vector<uint8_t> &bytes) {
  return decode(dtype, bytes.data(),
                bytes.size() / size_t(tessel_dtype_size(dtype)));
}

/// Unit roundoff-ish precision of a dtype (one ulp at 1.0).
inline double eps(int32_t dtype) {
  switch (dtype) {
  case TESSEL_F32:
    return 0x1p-23;
  case TESSEL_F16:
    return 0x1p-10;
  case TESSEL_BF16:
    return 0x1p-7;
  case TESSEL_F64:
    return 0x1p-52;
  default:
    return 0.0;
  }
}

/// Precision of the compute type of a dtype (f32, or f64 for f64).
inline double computeEps(int32_t dtype) {
  return dtype == TESSEL_F64 ? 0x1p-52 : 0x1p-23;
}

/// Random values in [lo, hi), already representable in `dtype`.
inline std::vector<double> randomValues(int32_t dtype, size_t n, double lo,
                                        double hi, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (double &x : v)
    x = quantize(dtype, dist(rng));
  return v;
}

} // namespace tt

#endif // TESSEL_RUNTIME_TEST_FORMATS_H
