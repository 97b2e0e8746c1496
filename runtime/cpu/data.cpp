//===- data.cpp - Strided copy, reduce and embedding kernels --------------===//

#include "cpu/backend.h"
#include "cpu/internal.h"

#include <algorithm>
#include <vector>

using namespace tessel::cpu;

namespace {

struct CopyDim {
  int64_t size, in, out;
};

/// Copies with elements moved as raw words of `E`: the kernel only moves
/// data, so one instantiation per element size serves every dtype.
template <class E>
void stridedCopy(const E *in, E *out, const std::vector<CopyDim> &dims) {
  int rank = int(dims.size());
  const CopyDim &inner = dims.back();
  std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
  int64_t inOff = 0, outOff = 0;
  while (true) {
    const E *src = in + inOff;
    E *dst = out + outOff;
    if (inner.in == 1 && inner.out == 1) {
      std::memcpy(dst, src, size_t(inner.size) * sizeof(E));
    } else if (inner.in == 0) {
      E v = *src;
      for (int64_t j = 0; j < inner.size; ++j)
        dst[j * inner.out] = v;
    } else {
      for (int64_t j = 0; j < inner.size; ++j)
        dst[j * inner.out] = src[j * inner.in];
    }
    // Odometer step over every dimension but the innermost.
    int d = rank - 2;
    for (; d >= 0; --d) {
      inOff += dims[size_t(d)].in;
      outOff += dims[size_t(d)].out;
      if (++idx[size_t(d)] < dims[size_t(d)].size)
        break;
      inOff -= dims[size_t(d)].in * dims[size_t(d)].size;
      outOff -= dims[size_t(d)].out * dims[size_t(d)].size;
      idx[size_t(d)] = 0;
    }
    if (d < 0)
      return;
  }
}

struct ReduceDim {
  int64_t size;
  bool reduced;
};

/// Accumulator: f64 for every float dtype (exact for max, accurate for
/// sums), i64 for integers.
template <class T>
using Acc = std::conditional_t<isIntegral<T>(), int64_t, double>;

template <class T>
void reduceImpl(int32_t kind, const T *in, T *out,
                const std::vector<ReduceDim> &dims, int64_t outCount,
                int64_t reduceCount) {
  using A = Acc<T>;
  bool isMax = kind == TESSEL_REDUCE_MAX;
  A lowest;
  if constexpr (isIntegral<T>())
    lowest = std::numeric_limits<T>::min();
  else
    lowest = -std::numeric_limits<double>::infinity();
  A init = isMax ? lowest : A(0);
  std::vector<A> acc(static_cast<size_t>(outCount), init);
  auto combine = [isMax](A &a, A x) {
    if (!isMax) {
      if constexpr (isIntegral<T>())
        a = A(uint64_t(a) + uint64_t(x)); // Wrap, don't overflow.
      else
        a += x;
    } else if constexpr (isIntegral<T>()) {
      a = x > a ? x : a;
    } else if (x > a || std::isnan(x)) {
      a = x; // NaN sticks: nothing compares greater than it.
    }
  };

  int rank = int(dims.size());
  int64_t total = outCount * reduceCount;
  if (rank > 0 && total > 0) {
    // Row-major strides of the kept dimensions; reduced ones stride 0.
    std::vector<int64_t> outStride(static_cast<size_t>(rank), 0);
    for (int64_t d = rank - 1, s = 1; d >= 0; --d) {
      if (!dims[size_t(d)].reduced) {
        outStride[size_t(d)] = s;
        s *= dims[size_t(d)].size;
      }
    }
    const ReduceDim &inner = dims.back();
    std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
    int64_t outOff = 0;
    const T *src = in;
    while (true) {
      if (inner.reduced) {
        A &a = acc[size_t(outOff)];
        for (int64_t j = 0; j < inner.size; ++j)
          combine(a, A(Elem<T>::load(src[j])));
      } else {
        A *row = acc.data() + outOff;
        for (int64_t j = 0; j < inner.size; ++j)
          combine(row[j], A(Elem<T>::load(src[j])));
      }
      src += inner.size;
      int d = rank - 2;
      for (; d >= 0; --d) {
        outOff += outStride[size_t(d)];
        if (++idx[size_t(d)] < dims[size_t(d)].size)
          break;
        outOff -= outStride[size_t(d)] * dims[size_t(d)].size;
        idx[size_t(d)] = 0;
      }
      if (d < 0)
        break;
    }
  } else if (rank == 0) {
    combine(acc[0], A(Elem<T>::load(in[0])));
  }

  for (int64_t i = 0; i < outCount; ++i) {
    A a = acc[size_t(i)];
    if constexpr (isIntegral<T>()) {
      out[i] = T(a);
    } else {
      if (kind == TESSEL_REDUCE_MEAN)
        a /= double(reduceCount);
      out[i] = fromDouble<T>(a);
    }
  }
}

} // namespace

namespace {
template <class W> void fillWords(void *out, int64_t count, uint64_t bits) {
  W *o = static_cast<W *>(out);
  std::fill(o, o + count, static_cast<W>(bits));
}
} // namespace

void CpuBackend::fill(tessel_ctx *, void *out, int64_t count,
                      int64_t elementBytes, uint64_t bits) {
  switch (elementBytes) {
  case 1:
    fillWords<uint8_t>(out, count, bits);
    break;
  case 2:
    fillWords<uint16_t>(out, count, bits);
    break;
  case 4:
    fillWords<uint32_t>(out, count, bits);
    break;
  default:
    fillWords<uint64_t>(out, count, bits);
    break;
  }
}

void CpuBackend::stridedCopy(tessel_ctx *, int32_t dtype, const void *in,
                             void *out, int32_t rank, const int64_t *shape,
                             const int64_t *in_strides,
                             const int64_t *out_strides) {
  int64_t es = tessel_dtype_size(dtype);
  // Drop unit dimensions, then merge neighbours that are contiguous in both
  // views, so plain copies and transposes reach the memcpy/inner fast paths.
  // (Every extent is positive: the front returns on an empty copy.)
  std::vector<CopyDim> dims;
  for (int32_t d = 0; d < rank; ++d) {
    if (shape[d] == 1)
      continue;
    CopyDim cur{shape[d], in_strides[d], out_strides[d]};
    if (!dims.empty()) {
      CopyDim &prev = dims.back();
      if (prev.in == cur.in * cur.size && prev.out == cur.out * cur.size) {
        prev = {prev.size * cur.size, cur.in, cur.out};
        continue;
      }
    }
    dims.push_back(cur);
  }
  if (dims.empty())
    dims.push_back({1, 1, 1}); // A scalar: one element.
  switch (es) {
  case 2:
    ::stridedCopy(static_cast<const uint16_t *>(in), static_cast<uint16_t *>(out),
                dims);
    break;
  case 4:
    ::stridedCopy(static_cast<const uint32_t *>(in), static_cast<uint32_t *>(out),
                dims);
    break;
  default:
    ::stridedCopy(static_cast<const uint64_t *>(in), static_cast<uint64_t *>(out),
                dims);
    break;
  }
}

void CpuBackend::reduce(tessel_ctx *ctx, int32_t kind, int32_t dtype,
                        int32_t outDtype, const void *in, void *out,
                        int32_t rank, const int64_t *shape,
                        uint64_t reduce_mask) {
  // Unit dimensions change nothing; adjacent dimensions that are both kept
  // or both reduced merge into one.
  std::vector<ReduceDim> dims;
  int64_t outCount = 1, reduceCount = 1;
  for (int32_t d = 0; d < rank; ++d) {
    bool reduced = (reduce_mask >> d) & 1;
    (reduced ? reduceCount : outCount) *= shape[d];
    if (shape[d] == 1)
      continue;
    if (!dims.empty() && dims.back().reduced == reduced)
      dims.back().size *= shape[d];
    else
      dims.push_back({shape[d], reduced});
  }
  if (rank > 0 && dims.empty())
    dims.push_back({1, false}); // All unit dimensions: one element.
  if (outDtype != dtype) {
    // Widened: the unfused ops' values, reduced in dtype (rounded to it)
    // and cast (tessel/runtime.h).
    std::vector<char> rounded(
        static_cast<size_t>(outCount * tessel_dtype_size(dtype)));
    reduce(ctx, kind, dtype, dtype, in, rounded.data(), rank, shape,
           reduce_mask);
    cast(ctx, dtype, outDtype, rounded.data(), out, outCount);
    return;
  }
  visitAny(dtype, [&](auto tag) {
    using T = decltype(tag);
    reduceImpl(kind, static_cast<const T *>(in), static_cast<T *>(out), dims,
               outCount, reduceCount);
  });
}

void CpuBackend::embedding(tessel_ctx *ctx, int32_t dtype, int32_t ids_dtype,
                           const void *table, const void *ids, void *out,
                           int64_t num_ids, int64_t rows, int64_t hidden,
                           int64_t row_offset, int64_t vocab) {
  int64_t es = tessel_dtype_size(dtype);
  size_t rowBytes = size_t(hidden * es);
  const char *tab = static_cast<const char *>(table);
  char *dst = static_cast<char *>(out);
  for (int64_t i = 0; i < num_ids; ++i) {
    int64_t id = loadIndex(ids_dtype, ids, i);
    if (id < 0 || id >= vocab) {
      setError(ctx, "tessel_embedding: id %lld at position %lld outside "
                    "[0, %lld)",
               (long long)id, (long long)i, (long long)vocab);
      std::memset(dst + i * rowBytes, 0, rowBytes);
      continue;
    }
    // Another rank's row: zero here, so the sum over the blocks (an
    // all-reduce) is the row. Every dtype stores +0 as all-zero bits.
    int64_t local = id - row_offset;
    if (local < 0 || local >= rows)
      std::memset(dst + i * rowBytes, 0, rowBytes);
    else
      std::memcpy(dst + i * rowBytes, tab + local * rowBytes, rowBytes);
  }
}
