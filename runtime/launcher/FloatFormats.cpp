//===- FloatFormats.cpp - 16-bit floats converted on the host -------------===//

#include "runtime/launcher/FloatFormats.h"
#include "tessel/runtime.h"

#include <cstring>

using namespace tessel::run;

namespace {

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

bool isHalfWidth(int32_t dtype) {
  return dtype == TESSEL_BF16 || dtype == TESSEL_F16;
}

} // namespace

float tessel::run::bf16ToFloat(uint16_t bits) {
  return floatOf(uint32_t(bits) << 16);
}

uint16_t tessel::run::floatToBf16(float value) {
  uint32_t x = bitsOf(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) // NaN: keep the sign, quiet it
    return uint16_t((x >> 16) | 0x0040u);
  // Adding 0x7fff plus the lowest kept bit rounds half to even.
  x += 0x7fffu + ((x >> 16) & 1u);
  return uint16_t(x >> 16);
}

float tessel::run::halfToFloat(uint16_t bits) {
  uint32_t sign = uint32_t(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0) // zero or subnormal: mantissa · 2^-24, exact in f32
    return floatOf(bitsOf(float(mantissa) * 0x1p-24f) | sign);
  if (exponent == 31)
    return floatOf(sign | 0x7f800000u | (mantissa << 13));
  return floatOf(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t tessel::run::floatToHalf(float value) {
  uint32_t x = bitsOf(value);
  uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) // NaN: keep the sign and the top payload, quiet it
    return uint16_t(sign | 0x7e00u | ((x >> 13) & 0x3ffu));
  if (x >= 0x477ff000u) // 65520 and above round past the largest half
    return uint16_t(sign | 0x7c00u);
  if (x < 0x38800000u) {
    // Below 2^-14: a subnormal half, mantissa = |value| / 2^-24 rounded to
    // nearest even (the value's own significand shifted right).
    int32_t exponent = int32_t(x >> 23);
    if (exponent < 102) // below 2^-25: rounds to zero
      return sign;
    uint32_t significand = (x & 0x7fffffu) | 0x800000u;
    int shift = 126 - exponent; // 14 .. 24
    uint32_t kept = significand >> shift;
    uint32_t rest = significand & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (kept & 1u)))
      ++kept;
    return uint16_t(sign | kept);
  }
  // Normal: rebias the exponent and round the 13 dropped bits to even; a
  // carry into the exponent is the right answer.
  x += 0xc8000fffu + ((x >> 13) & 1u);
  return uint16_t(sign | (x >> 13));
}

bool tessel::run::canConvertFloats(int32_t from, int32_t to) {
  return from == to || (from == TESSEL_F32 && isHalfWidth(to)) ||
         (isHalfWidth(from) && to == TESSEL_F32);
}

void tessel::run::convertFloats(int32_t from, const void *src, int32_t to,
                                void *dst, int64_t count) {
  if (from == to) {
    std::memcpy(dst, src, size_t(count * tessel_dtype_size(from)));
    return;
  }
  if (from == TESSEL_F32) {
    const float *in = static_cast<const float *>(src);
    uint16_t *out = static_cast<uint16_t *>(dst);
    for (int64_t i = 0; i < count; ++i)
      out[i] = to == TESSEL_BF16 ? floatToBf16(in[i]) : floatToHalf(in[i]);
    return;
  }
  const uint16_t *in = static_cast<const uint16_t *>(src);
  float *out = static_cast<float *>(dst);
  for (int64_t i = 0; i < count; ++i)
    out[i] = from == TESSEL_BF16 ? bf16ToFloat(in[i]) : halfToFloat(in[i]);
}
