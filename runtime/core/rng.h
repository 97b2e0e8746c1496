//===- rng.h - Counter-based random bits all backends share -----*- C++ -*-===//
//
// Dropout masks and parameter initialisation are pure functions of (seed,
// name, step, element, stream), the same on every mesh and every backend, so
// the hash is part of the runtime's contract and lives in the front. Header-
// only, integer-only and branch-free; under nvcc the functions are
// __host__ __device__, so the CUDA backend's kernels draw from this very
// code.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CORE_RNG_H
#define TESSEL_RUNTIME_CORE_RNG_H

#include "core/hd.h"

#include <cstdint>

namespace tessel {

/// splitmix64's finaliser: a bijective mixer with full avalanche.
TESSEL_HD uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// A hash of four words, each absorbed through a full mix so that nearby
/// counters give unrelated outputs.
TESSEL_HD uint64_t hash4(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  uint64_t h = mix64(a);
  h = mix64(h ^ b);
  h = mix64(h ^ c);
  return mix64(h ^ d);
}

/// Uniform in the open interval (0, 1) from the top 53 bits.
TESSEL_HD double uniformOpen(uint64_t h) {
  return (double(h >> 11) + 0.5) * 0x1p-53;
}

/// FNV-1a of a parameter's name: init draws are keyed by the name, hashed
/// once on the host by the front, so a backend never reads the string.
inline uint64_t fnv1a(const char *s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (; s && *s; ++s) {
    h ^= uint8_t(*s);
    h *= 0x100000001b3ull;
  }
  return h;
}

// Distinct first words keep init and dropout streams apart even when a
// caller reuses one seed for both.
constexpr uint64_t kInitDomain = 0x74657373656c4950ull;    // "tesselIP"
constexpr uint64_t kDropoutDomain = 0x74657373656c444full; // "tesselDO"
constexpr uint64_t kStreamDomain = 0x74657373656c5253ull;  // "tesselRS"

} // namespace tessel

#endif // TESSEL_RUNTIME_CORE_RNG_H
