//===- rng_math.h - core/rng.h's hash for host and device -------*- C++ -*-===//
//
// core/rng.h's counter-based hash (mix64, hash4, uniformOpen) as TESSEL_HD
// functions: rng.h's are plain inline (host only), these are the same
// arithmetic for the device, checked bit for bit against rng.h by the host
// tests. Dropout (elementwise_math.h) and init (init_math.h) draw from them.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CUDA_RNG_MATH_H
#define TESSEL_RUNTIME_CUDA_RNG_MATH_H

#include "cuda/storage_math.h"

#include <cstdint>

namespace tessel {
namespace cuda {

/// rng.h's mix64 (splitmix64's finaliser).
TESSEL_HD uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// rng.h's hash4.
TESSEL_HD uint64_t hash4(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  uint64_t h = mix64(a);
  h = mix64(h ^ b);
  h = mix64(h ^ c);
  return mix64(h ^ d);
}

/// rng.h's uniformOpen: (0, 1) from the top 53 bits.
TESSEL_HD double uniformOpen(uint64_t h) {
  return stored::mulRn(stored::addRn(double(h >> 11), 0.5), 0x1p-53);
}

} // namespace cuda
} // namespace tessel

#endif // TESSEL_RUNTIME_CUDA_RNG_MATH_H
