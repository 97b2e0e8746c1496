//===- comm.cpp - Block copies and ordered reductions of the CPU comms ----===//
//
// The helpers both CPU communicators use, so that the threads and the MPI
// worlds produce the same bits.
//
//===----------------------------------------------------------------------===//

#include "cpu/comm.h"

using namespace tessel::cpu;

//===--- Copies -----------------------------------------------------------===//

void tessel::cpu::copyRows(void *dst, int64_t dstStride, const void *src,
                           int64_t srcStride, int64_t rows, int64_t rowBytes) {
  if (rowBytes <= 0)
    return;
  auto *d = static_cast<uint8_t *>(dst);
  auto *s = static_cast<const uint8_t *>(src);
  if (dstStride == rowBytes && srcStride == rowBytes) {
    std::memcpy(d, s, size_t(rows * rowBytes));
    return;
  }
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(d + r * dstStride, s + r * srcStride, size_t(rowBytes));
}

std::vector<int64_t>
tessel::cpu::rowMajorStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = s;
    s *= shape[d];
  }
  return strides;
}

void tessel::cpu::copyBox(int64_t elemSize, const std::vector<int64_t> &shape,
                          const void *src,
                          const std::vector<int64_t> &srcStrides, void *dst,
                          const std::vector<int64_t> &dstStrides) {
  for (int64_t d : shape)
    if (d == 0)
      return;
  // The innermost dimensions laid out densely in both move as one run.
  size_t lead = shape.size();
  int64_t run = 1;
  while (lead > 0 && srcStrides[lead - 1] == run &&
         dstStrides[lead - 1] == run) {
    run *= shape[lead - 1];
    --lead;
  }
  auto *s = static_cast<const uint8_t *>(src);
  auto *d = static_cast<uint8_t *>(dst);
  const size_t runBytes = size_t(run * elemSize);
  int64_t runs = 1;
  for (size_t a = 0; a < lead; ++a)
    runs *= shape[a];
  std::vector<int64_t> idx(lead, 0);
  int64_t srcOff = 0, dstOff = 0;
  for (int64_t r = 0; r < runs; ++r) {
    std::memcpy(d + dstOff * elemSize, s + srcOff * elemSize, runBytes);
    // Odometer over the leading dimensions.
    for (size_t a = lead; a-- > 0;) {
      srcOff += srcStrides[a];
      dstOff += dstStrides[a];
      if (++idx[a] < shape[a])
        break;
      srcOff -= shape[a] * srcStrides[a];
      dstOff -= shape[a] * dstStrides[a];
      idx[a] = 0;
    }
  }
}

AllToAllLayout tessel::cpu::allToAllLayout(const Collective &c,
                                           int64_t groupSize) {
  AllToAllLayout l;
  l.splitDim = c.splitDim;
  l.concatDim = c.concatDim;
  l.blockShape = c.shape;
  l.blockShape[size_t(c.splitDim)] /= groupSize;
  std::vector<int64_t> outShape = l.blockShape;
  outShape[size_t(c.concatDim)] *= groupSize;
  l.inStrides = rowMajorStrides(c.shape);
  l.outStrides = rowMajorStrides(outShape);
  l.blockElems = 1;
  for (int64_t d : l.blockShape)
    l.blockElems *= d;
  return l;
}

int64_t AllToAllLayout::inOffset(int64_t j) const {
  return j * blockShape[size_t(splitDim)] * inStrides[size_t(splitDim)];
}

int64_t AllToAllLayout::outOffset(int64_t p) const {
  return p * blockShape[size_t(concatDim)] * outStrides[size_t(concatDim)];
}

//===--- Ordered reduction ------------------------------------------------===//

namespace {

/// The accumulator of a stored type: f32 for f32/f16/bf16, f64 for f64,
/// int64 for the integers.
template <class T> struct Acc {
  using type = typename Elem<T>::Compute;
  static type load(T v) { return Elem<T>::load(v); }
  static T store(type v) { return Elem<T>::store(v); }
  static type add(type a, type b) { return a + b; }
  // NaN propagates: once the accumulator is NaN no comparison replaces it.
  static type max(type a, type b) { return (b > a || b != b) ? b : a; }
  static type mean(type a, int64_t n) { return a / type(n); }
};
template <class I> struct IntAcc {
  using type = int64_t;
  static type load(I v) { return v; }
  // Wraps modulo 2^32 for i32, as a C conversion does.
  static I store(type v) { return I(v); }
  // Unsigned: overflow wraps instead of being undefined.
  static type add(type a, type b) { return type(uint64_t(a) + uint64_t(b)); }
  static type max(type a, type b) { return b > a ? b : a; }
  static type mean(type a, int64_t n) { return a / n; }
};
template <> struct Acc<int32_t> : IntAcc<int32_t> {};
template <> struct Acc<int64_t> : IntAcc<int64_t> {};

template <class T>
void reduceTyped(int32_t reduce, int64_t groupSize, const void *const *inputs,
                 void *out, int64_t n) {
  using A = Acc<T>;
  using V = typename A::type;
  // Each block is read from every input before any of it is written, so
  // `out` may be one of the inputs.
  constexpr int64_t kBlock = 1024;
  V acc[kBlock];
  T *dst = static_cast<T *>(out);
  for (int64_t first = 0; first < n; first += kBlock) {
    const int64_t m = std::min(kBlock, n - first);
    const T *src = static_cast<const T *>(inputs[0]) + first;
    for (int64_t i = 0; i < m; ++i)
      acc[i] = A::load(src[i]);
    for (int64_t p = 1; p < groupSize; ++p) {
      src = static_cast<const T *>(inputs[p]) + first;
      if (reduce == TESSEL_REDUCE_MAX) {
        for (int64_t i = 0; i < m; ++i)
          acc[i] = A::max(acc[i], A::load(src[i]));
      } else {
        for (int64_t i = 0; i < m; ++i)
          acc[i] = A::add(acc[i], A::load(src[i]));
      }
    }
    if (reduce == TESSEL_REDUCE_MEAN)
      for (int64_t i = 0; i < m; ++i)
        acc[i] = A::mean(acc[i], groupSize);
    for (int64_t i = 0; i < m; ++i)
      dst[first + i] = A::store(acc[i]);
  }
}

} // namespace

void tessel::cpu::reduceInOrder(int32_t dtype, int32_t reduce,
                                int64_t groupSize, const void *const *inputs,
                                void *out, int64_t n) {
  visitAny(dtype, [&](auto t) {
    reduceTyped<decltype(t)>(reduce, groupSize, inputs, out, n);
  });
}

