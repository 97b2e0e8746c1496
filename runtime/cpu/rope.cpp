//===- rope.cpp - The rotary position embedding on the CPU ----------------===//
//
// tessel_rope: a position's turns (core/rope.h) are computed once and
// applied to the rows of every batch entry and head at that position. A
// partial rope turns the first rotaryDim elements of each row and copies
// the rest.
//
//===----------------------------------------------------------------------===//

#include "core/rope.h"
#include "cpu/backend.h"
#include "cpu/internal.h"

#include <algorithm>

namespace tessel {
namespace cpu {
namespace {

template <class T>
void ropeImpl(const T *x, T *y, int64_t outer, int64_t positions, int64_t heads,
              int64_t headDim, int64_t rotaryDim, double theta,
              bool interleaved, bool inverse, const rope::Scaling &scaling,
              int64_t firstPosition) {
  using C = typename Elem<T>::Compute;
  const int64_t pairs = rotaryDim / 2;
  std::vector<rope::Turn<C>> turns(static_cast<size_t>(pairs));
  for (int64_t p = 0; p < positions; ++p) {
    for (int64_t i = 0; i < pairs; ++i)
      turns[size_t(i)] = rope::turnOf<C>(firstPosition + p, i, rotaryDim, theta,
                                         scaling, inverse);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t row = ((o * positions + p) * heads + h) * headDim;
        const T *xr = x + row;
        T *yr = y + row;
        for (int64_t i = 0; i < pairs; ++i) {
          const int64_t ia = rope::firstOf(i, interleaved);
          const int64_t ib = rope::secondOf(i, rotaryDim, interleaved);
          // Both read before either is written: y may be x.
          C a = Elem<T>::load(xr[ia]), b = Elem<T>::load(xr[ib]);
          yr[ia] = Elem<T>::store(rope::rotatedFirst(a, b, turns[size_t(i)]));
          yr[ib] = Elem<T>::store(rope::rotatedSecond(a, b, turns[size_t(i)]));
        }
        if (yr != xr)
          std::copy(xr + rotaryDim, xr + headDim, yr + rotaryDim);
      }
  }
}

} // namespace

void CpuBackend::rope(tessel_ctx *, int32_t dtype, const void *x, void *y,
                      int64_t outer, int64_t positions, int64_t heads,
                      int64_t headDim, int64_t rotaryDim, double theta,
                      bool interleaved, bool inverse,
                      const rope::Scaling &scaling, int64_t firstPosition) {
  visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    ropeImpl(static_cast<const T *>(x), static_cast<T *>(y), outer, positions,
             heads, headDim, rotaryDim, theta, interleaved, inverse, scaling,
             firstPosition);
  });
}

} // namespace cpu
} // namespace tessel
