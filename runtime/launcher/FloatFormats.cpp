//===- FloatFormats.cpp - 16-bit floats converted on the host -------------===//

#include "runtime/launcher/FloatFormats.h"

#include "core/storage.h"
#include "tessel/runtime.h"

#include <cstring>

using namespace tessel::run;
using namespace tessel::stored;

namespace {

bool isHalfWidth(int32_t dtype) {
  return dtype == TESSEL_BF16 || dtype == TESSEL_F16;
}

} // namespace

bool tessel::run::canConvertFloats(int32_t from, int32_t to) {
  return from == to || (from == TESSEL_F32 && isHalfWidth(to)) ||
         (isHalfWidth(from) && to == TESSEL_F32) ||
         (from == TESSEL_F32 && to == TESSEL_F64);
}

void tessel::run::convertFloats(int32_t from, const void *src, int32_t to,
                                void *dst, int64_t count) {
  if (from == to) {
    std::memcpy(dst, src, size_t(count * tessel_dtype_size(from)));
    return;
  }
  if (from == TESSEL_F32 && to == TESSEL_F64) {
    const float *in = static_cast<const float *>(src);
    double *out = static_cast<double *>(dst);
    for (int64_t i = 0; i < count; ++i)
      out[i] = double(in[i]);
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
