//===- Hash.h - counter-based hashing for the launcher's random draws -----===//
//
// Synthetic data and the gradient check's element sampling draw from pure
// functions of (seed, name, index), so results do not depend on how many
// tensors were filled before or in which order.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUN_HASH_H
#define TESSEL_RUN_HASH_H

#include <cstdint>
#include <string>

namespace tessel::run {

/// SplitMix64's finaliser: a well-mixed 64-bit hash of x.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// FNV-1a of a tensor's name.
inline uint64_t hashName(const std::string &name) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : name)
    h = (h ^ c) * 0x100000001B3ull;
  return h;
}

} // namespace tessel::run

#endif // TESSEL_RUN_HASH_H
