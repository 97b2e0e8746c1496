//===- init_math.h - Counter-based parameter init, host and device -*- C++ -*-===//
//
// The value tessel_init_param gives element `index` of a parameter, as the
// CPU backend computes it (cpu/init.cpp): rng.h's counter hash keyed by
// (seed, name hash, index, attempt), then Box-Muller (cosine branch) for the
// normal kinds, resampling outside ±2 for the truncated one. rng.h's
// hash and constants serve host and device alike.
// The double log/cos on the device may differ from glibc's by an ulp; after
// rounding to the parameter's type that almost never shows.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CUDA_INIT_MATH_H
#define TESSEL_RUNTIME_CUDA_INIT_MATH_H

#include "core/rng.h"
#include "core/rng.h"
#include "core/storage.h"

#include "tessel/runtime.h"

#include <cmath>
#include <cstdint>

namespace tessel {
namespace cuda {

//===--- Init values ------------------------------------------------------===//

/// One standard normal per (key, index, attempt) by Box-Muller's cosine
/// branch, so each element owns its draws.
TESSEL_HD double initStandardNormal(uint64_t seed, uint64_t nameHash,
                                    uint64_t index, uint64_t attempt) {
  const double kTwoPi = 2.0 * 3.14159265358979323846;
  double u1 = uniformOpen(
      hash4(kInitDomain ^ seed, nameHash, index, 2 * attempt));
  double u2 = uniformOpen(
      hash4(kInitDomain ^ seed, nameHash, index, 2 * attempt + 1));
  double radius = stored::sqrtRn(stored::mulRn(-2.0, ::log(u1)));
  return stored::mulRn(radius, ::cos(stored::mulRn(kTwoPi, u2)));
}

/// Element `index`'s value for init `kind` (tessel_init_kind) with
/// args (a0, a1), in double before rounding to the parameter's type.
TESSEL_HD double initValue(int32_t kind, double a0, double a1, uint64_t seed,
                           uint64_t nameHash, uint64_t index) {
  switch (kind) {
  case TESSEL_INIT_ONES:
    return 1.0;
  case TESSEL_INIT_CONSTANT:
    return a0;
  case TESSEL_INIT_NORMAL:
    return stored::addRn(
        a1, stored::mulRn(a0, initStandardNormal(seed, nameHash, index, 0)));
  case TESSEL_INIT_TRUNCATED_NORMAL: {
    // Resample outside ±2 (accept rate 95.4%); after 64 misses, clamp.
    double z = 0.0;
    for (uint64_t attempt = 0; attempt < 64; ++attempt) {
      z = initStandardNormal(seed, nameHash, index, attempt);
      if (::fabs(z) <= 2.0)
        break;
    }
    z = ::fmin(2.0, ::fmax(-2.0, z));
    return stored::addRn(a1, stored::mulRn(a0, z));
  }
  case TESSEL_INIT_UNIFORM: {
    double u = uniformOpen(
        hash4(kInitDomain ^ seed, nameHash, index, ~uint64_t(0)));
    return stored::addRn(a0, stored::mulRn(stored::subRn(a1, a0), u));
  }
  default: // TESSEL_INIT_ZEROS
    return 0.0;
  }
}

} // namespace cuda
} // namespace tessel

#endif // TESSEL_RUNTIME_CUDA_INIT_MATH_H
