//===- FloatFormats.h - 16-bit floats converted on the host -----*- C++ -*-===//
//
// A checkpoint saved at one precision loads at another (an f32 run's
// parameters into a bf16 model, a bf16 run's into an f32 one, an f64
// model's f32 states of ABI 17 into its f64 ones), so the
// launcher converts tensors between f32 and bf16/f16 on the host, with the
// runtime's own element conversions (core/storage.h, what tessel_cast and
// the update's rounding use): a parameter converted here equals the one the
// update entry rounds from its f32 master copy, bit for bit.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_LAUNCHER_FLOATFORMATS_H
#define TESSEL_LAUNCHER_FLOATFORMATS_H

#include <cstdint>

namespace tessel::run {

/// convertFloats handles `from` -> `to`: the same dtype, f32 and a 16-bit
/// float (bf16, f16) either way, or f32 widened (exactly) to f64: an f64
/// model's optimizer states from before ABI 18. Never f64 narrowed:
/// rounding an f64 run's tensors would silently lose what such a run is
/// for.
bool canConvertFloats(int32_t from, int32_t to);

/// Writes `count` elements of dtype `from` at `src` as dtype `to` at `dst`
/// (host memory; canConvertFloats(from, to) must hold).
void convertFloats(int32_t from, const void *src, int32_t to, void *dst,
                   int64_t count);

} // namespace tessel::run

#endif // TESSEL_LAUNCHER_FLOATFORMATS_H
