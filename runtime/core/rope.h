//===- rope.h - The rotary position embedding's arithmetic -------*- C++
//-*-===//
//
// What tessel_rope computes per pair, shared by the CPU backend and the
// CUDA kernel (TESSEL_HD), so the host tests check the arithmetic the
// device runs. The angle and its sine and cosine are computed in f64 and
// rounded to the arithmetic's type C once; the rotation is two products
// and a sum per element in C.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CORE_ROPE_H
#define TESSEL_RUNTIME_CORE_ROPE_H

#include "core/hd.h"

#include <cmath>
#include <cstdint>

namespace tessel::rope {

/// The angle of pair `pair` (< headDim / 2) at `position`:
/// position · theta^(-2 pair / headDim).
TESSEL_HD double angle(int64_t position, int64_t pair, int64_t headDim,
                       double theta) {
  return double(position) * pow(theta, -2.0 * double(pair) / double(headDim));
}

/// The elements the pair rotates: (pair, pair + headDim / 2), or
/// (2 pair, 2 pair + 1) when interleaved.
TESSEL_HD int64_t firstOf(int64_t pair, bool interleaved) {
  return interleaved ? 2 * pair : pair;
}
TESSEL_HD int64_t secondOf(int64_t pair, int64_t headDim, bool interleaved) {
  return interleaved ? 2 * pair + 1 : pair + headDim / 2;
}

/// The cosine and the (signed: negated for the inverse) sine of a pair's
/// angle, rounded to C.
template <class C> struct Turn { C cos, sin; };
template <class C>
TESSEL_HD Turn<C> turnOf(int64_t position, int64_t pair, int64_t headDim,
                         double theta, bool inverse) {
  double a = angle(position, pair, headDim, theta);
  double s = sin(a);
  return {C(cos(a)), C(inverse ? -s : s)};
}

/// (a, b) rotated: (a cos − b sin, b cos + a sin).
template <class C> TESSEL_HD C rotatedFirst(C a, C b, Turn<C> t) {
  return a * t.cos - b * t.sin;
}
template <class C> TESSEL_HD C rotatedSecond(C a, C b, Turn<C> t) {
  return b * t.cos + a * t.sin;
}

} // namespace tessel::rope

#endif // TESSEL_RUNTIME_CORE_ROPE_H
