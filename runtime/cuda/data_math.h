//===- data_math.h - The data kernels' arithmetic ---------------*- C++ -*-===//
//
// What data.cu's kernels compute per element, as TESSEL_HD functions the
// host tests run too: the float elements' loads and stores (core/storage.h's
// conversions, bit for bit the CPU backend's, so a reduction rounds exactly
// as it does), the
// index maps that turn a linear index into a strided offset (with a 32-bit
// multiply-shift division when every index fits, as CUTLASS's FastDivmod),
// the reduction's combine and final store, and the host-side planning that
// coalesces dimensions. Plain C++: g++ compiles it for the tests.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CUDA_DATA_MATH_H
#define TESSEL_RUNTIME_CUDA_DATA_MATH_H

#include "core/storage.h"

#include <cstdint>
#include <cstring>
#include <vector>

namespace tessel {
namespace cuda {

//===--- Stored floats (core/storage.h) -----------------------------------===//

using stored::bf16ToFloat;
using stored::BFloat;
using stored::bitsFloat;
using stored::doubleToFloatOdd;
using stored::Elem;
using stored::floatBits;
using stored::floatToBf16;
using stored::floatToHalf;
using stored::Half;
using stored::halfToFloat;

TESSEL_HD double negativeInfinity() {
  const uint64_t bits = 0xfff0000000000000ull;
#ifdef __CUDA_ARCH__
  return __longlong_as_double((long long)bits);
#else
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
#endif
}

/// Storage of the 16-bit formats: the bits, as the CPU backend keeps them.
using HalfBits = stored::Half;
using Bf16Bits = stored::BFloat;

/// A float element's load (to its compute value, widened to double) and its
/// correctly rounded store from double (the CPU backend's fromDouble).
template <class T> struct FloatElem;
template <> struct FloatElem<float> {
  static TESSEL_HD double load(float v) { return double(v); }
  static TESSEL_HD float store(double d) { return float(d); }
};
template <> struct FloatElem<double> {
  static TESSEL_HD double load(double v) { return v; }
  static TESSEL_HD double store(double d) { return d; }
};
template <> struct FloatElem<HalfBits> {
  static TESSEL_HD double load(HalfBits v) { return halfToFloat(v.bits); }
  static TESSEL_HD HalfBits store(double d) {
    return HalfBits{floatToHalf(doubleToFloatOdd(d))};
  }
};
template <> struct FloatElem<Bf16Bits> {
  static TESSEL_HD double load(Bf16Bits v) { return bf16ToFloat(v.bits); }
  static TESSEL_HD Bf16Bits store(double d) {
    return Bf16Bits{floatToBf16(doubleToFloatOdd(d))};
  }
};

//===--- Index maps -------------------------------------------------------===//

/// Division by a fixed d > 0 of n < 2^31 as a multiply-high and a shift.
struct FastDivmod {
  uint32_t divisor = 1, multiplier = 0, shift = 0;

  FastDivmod() = default;
  /// (d = 0 belongs to an empty map, never divided by: kept as 1.)
  explicit FastDivmod(uint32_t d) : divisor(d == 0 ? 1 : d) {
    if (divisor == 1)
      return;
    uint32_t log2 = 0; // ceil(log2(d))
    while ((uint64_t(1) << log2) < d)
      ++log2;
    uint32_t p = 31 + log2;
    multiplier = uint32_t(((uint64_t(1) << p) + d - 1) / d);
    shift = p - 32;
  }
  TESSEL_HD uint32_t div(uint32_t n) const {
    if (divisor == 1)
      return n;
#ifdef __CUDA_ARCH__
    return __umulhi(n, multiplier) >> shift;
#else
    return uint32_t((uint64_t(n) * multiplier) >> 32) >> shift;
#endif
  }
};

/// Up to kMaxDims dimensions, row-major over a linear index (the last
/// fastest), each with up to two strides: offset(i) = Σ idx_d · stride_d.
constexpr int kMaxDims = 8;

struct IndexMap {
  int32_t rank = 0;
  bool narrow = false; // every linear index < 2^31: 32-bit division
  int64_t size[kMaxDims] = {};
  int64_t strideA[kMaxDims] = {};
  int64_t strideB[kMaxDims] = {};
  FastDivmod fast[kMaxDims];

  /// The offsets (in elements) of linear index i in both views.
  TESSEL_HD void offsets(int64_t i, int64_t &a, int64_t &b) const {
    a = 0;
    b = 0;
    for (int d = rank - 1; d >= 0; --d) {
      int64_t q, r;
      if (narrow) {
        q = fast[d].div(uint32_t(i));
        r = i - q * size[d];
      } else {
        q = i / size[d];
        r = i - q * size[d];
      }
      a += r * strideA[d];
      b += r * strideB[d];
      i = q;
    }
  }
  TESSEL_HD int64_t offset(int64_t i) const {
    int64_t a, b;
    offsets(i, a, b);
    return a;
  }
};

/// One dimension of a strided view before packing into an IndexMap.
struct Dim {
  int64_t size, a, b;
};

/// Drops unit dimensions and merges neighbours that are contiguous in both
/// views (as the CPU backend's stridedCopy); at least one dimension.
inline std::vector<Dim> coalesce(const std::vector<Dim> &dims) {
  std::vector<Dim> out;
  for (const Dim &cur : dims) {
    if (cur.size == 1)
      continue;
    if (!out.empty()) {
      Dim &prev = out.back();
      if (prev.a == cur.a * cur.size && prev.b == cur.b * cur.size) {
        prev = {prev.size * cur.size, cur.a, cur.b};
        continue;
      }
    }
    out.push_back(cur);
  }
  if (out.empty())
    out.push_back({1, 1, 1});
  return out;
}

/// The IndexMap of dims[first, first + count) (count <= kMaxDims) for
/// linear indices below `total`.
inline IndexMap makeIndexMap(const std::vector<Dim> &dims, size_t first,
                             size_t count) {
  IndexMap map;
  map.rank = int32_t(count);
  int64_t total = 1;
  for (size_t d = 0; d < count; ++d) {
    const Dim &dim = dims[first + d];
    map.size[d] = dim.size;
    map.strideA[d] = dim.a;
    map.strideB[d] = dim.b;
    total *= dim.size;
  }
  map.narrow = total < (int64_t(1) << 31);
  if (map.narrow)
    for (size_t d = 0; d < count; ++d)
      map.fast[d] = FastDivmod(uint32_t(map.size[d]));
  return map;
}

/// A copy that reads contiguously along one dimension (p, input stride 1)
/// and writes contiguously along another (q, output stride 1), e.g. a
/// transpose: moved through 32x32 shared-memory tiles so both sides
/// coalesce. The other dimensions (at most kMaxDims) index whole tiles.
struct TransposePlan {
  int64_t sizeP = 0, sizeQ = 0;
  int64_t inStrideQ = 0, outStrideP = 0;
  int64_t restCount = 1;
  IndexMap rest; // strideA: input, strideB: output

  /// Element (p, q) of the tile group whose rest offsets are src0, dst0
  /// (rest.offsets of its rest index, computed once per tile).
  TESSEL_HD int64_t src(int64_t src0, int64_t p, int64_t q) const {
    return src0 + p + q * inStrideQ;
  }
  TESSEL_HD int64_t dst(int64_t dst0, int64_t p, int64_t q) const {
    return dst0 + p * outStrideP + q;
  }
};

constexpr int kTile = 32;

/// The tiled plan of coalesced `dims`, or false when the copy has no such
/// pair of dimensions of at least half a tile each.
inline bool planTranspose(const std::vector<Dim> &dims, TransposePlan &plan) {
  int p = -1, q = -1;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d].a == 1 && dims[d].size >= kTile / 2)
      p = int(d);
    if (dims[d].b == 1 && dims[d].size >= kTile / 2)
      q = int(d);
  }
  if (p < 0 || q < 0 || p == q || dims.size() > size_t(kMaxDims) + 2)
    return false;
  std::vector<Dim> rest;
  for (size_t d = 0; d < dims.size(); ++d)
    if (int(d) != p && int(d) != q)
      rest.push_back(dims[d]);
  if (rest.empty())
    rest.push_back({1, 0, 0});
  plan.sizeP = dims[size_t(p)].size;
  plan.sizeQ = dims[size_t(q)].size;
  plan.inStrideQ = dims[size_t(q)].a;
  plan.outStrideP = dims[size_t(p)].b;
  plan.rest = makeIndexMap(rest, 0, rest.size());
  plan.restCount = 1;
  for (const Dim &d : rest)
    plan.restCount *= d.size;
  return true;
}

//===--- Reductions -------------------------------------------------------===//

/// The reduction's arithmetic per element type T: the accumulator (double
/// for float dtypes, as the CPU backend; int64 for integers, sums
/// wrapping), its start, the combine (a, then x, in that order: NaN sticks,
/// of equal maxima the first stays) and the store of the result.
template <class T> struct ReduceOps {
  using Acc = double;
  static TESSEL_HD double init(bool isMax) {
    return isMax ? negativeInfinity() : 0.0;
  }
  static TESSEL_HD double load(T v) { return FloatElem<T>::load(v); }
  static TESSEL_HD double combine(bool isMax, double a, double x) {
    if (!isMax)
      return a + x;
    return (x > a || x != x) && a == a ? x : a;
  }
  static TESSEL_HD T store(double a, bool isMean, int64_t count) {
    return FloatElem<T>::store(isMean ? a / double(count) : a);
  }
};

template <class I> struct IntReduceOps {
  using Acc = int64_t;
  static TESSEL_HD int64_t init(bool isMax) {
    // The lowest I: -2^(bits - 1).
    return isMax ? int64_t(uint64_t(-1) << (8 * sizeof(I) - 1)) : 0;
  }
  static TESSEL_HD int64_t load(I v) { return int64_t(v); }
  static TESSEL_HD int64_t combine(bool isMax, int64_t a, int64_t x) {
    if (!isMax)
      return int64_t(uint64_t(a) + uint64_t(x));
    return x > a ? x : a;
  }
  /// (The front refuses the mean of an integer tensor.)
  static TESSEL_HD I store(int64_t a, bool, int64_t) { return I(a); }
};
template <> struct ReduceOps<int32_t> : IntReduceOps<int32_t> {};
template <> struct ReduceOps<int64_t> : IntReduceOps<int64_t> {};

/// How tessel_reduce's input splits: outputs o (the kept dimensions,
/// row-major) and reduced elements r (the reduced ones, in row-major
/// order); element (o, r) is at kept.offset(o) + reduced.offset(r).
/// `rowMajor` says the reduced elements are a contiguous inner run of at
/// least 64 (red.offset(r) == r), so a block's threads stride over r;
/// otherwise threads take consecutive outputs.
struct ReducePlan {
  int64_t outputs = 1, reduced = 1;
  IndexMap kept, red;
  bool rowMajor = false;
};

/// Plans a reduction of `shape` over `mask`; false when the kept or the
/// reduced dimensions, coalesced, are more than kMaxDims each (the caller
/// transposes first).
inline bool planReduce(int32_t rank, const int64_t *shape, uint64_t mask,
                       ReducePlan &plan) {
  std::vector<Dim> kept, red;
  int64_t stride = 1;
  std::vector<int64_t> strides(size_t(rank > 0 ? rank : 1));
  for (int32_t d = rank - 1; d >= 0; --d) {
    strides[size_t(d)] = stride;
    stride *= shape[d];
  }
  for (int32_t d = 0; d < rank; ++d) {
    bool isReduced = (mask >> d) & 1;
    (isReduced ? red : kept).push_back({shape[d], strides[size_t(d)], 0});
  }
  kept = coalesce(kept);
  red = coalesce(red);
  if (kept.size() > size_t(kMaxDims) || red.size() > size_t(kMaxDims))
    return false;
  plan.outputs = plan.reduced = 1;
  for (const Dim &d : kept)
    plan.outputs *= d.size;
  for (const Dim &d : red)
    plan.reduced *= d.size;
  plan.kept = makeIndexMap(kept, 0, kept.size());
  plan.red = makeIndexMap(red, 0, red.size());
  // A short contiguous run would leave most of a row block idle: the
  // column kernel's 32 consecutive outputs read it nearly as well.
  plan.rowMajor = red.size() == 1 && red[0].a == 1 && plan.reduced >= 64;
  return true;
}

/// The reduction kernels' blocks: kRowThreads threads over one output's
/// contiguous run (rowMajor plans), or kColX consecutive outputs times kColY
/// interleaved runs of the reduced range.
constexpr int kRowThreads = 256;
constexpr int kColX = 32, kColY = 8;

/// How the reduced range splits over blocks (blockIdx.y) when the outputs
/// alone give too few blocks to fill the device: `splits` ranges of
/// `chunk` elements, combined in order afterwards. A pure function of the
/// shape, so the summation order is too.
struct ReduceSplit {
  int64_t splits = 1, chunk = 0;
};

inline ReduceSplit reduceSplit(const ReducePlan &plan) {
  const int64_t kWantBlocks = 1024; // a few per SM of an H200
  int64_t perBlock = plan.rowMajor ? 1 : kColX;
  int64_t minChunk = plan.rowMajor ? 16 * kRowThreads : 32 * kColY;
  int64_t outBlocks = (plan.outputs + perBlock - 1) / perBlock;
  ReduceSplit split;
  split.chunk = plan.reduced;
  if (outBlocks < kWantBlocks && plan.reduced > 2 * minChunk) {
    int64_t want = (kWantBlocks + outBlocks - 1) / outBlocks;
    int64_t most = (plan.reduced + minChunk - 1) / minChunk;
    int64_t splits = want < most ? want : most;
    splits = splits < 65535 ? splits : 65535;
    split.chunk = (plan.reduced + splits - 1) / splits;
    split.splits = (plan.reduced + split.chunk - 1) / split.chunk;
  }
  return split;
}

} // namespace cuda
} // namespace tessel

#endif // TESSEL_RUNTIME_CUDA_DATA_MATH_H
