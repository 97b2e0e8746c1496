//===- comm.cpp - Collectives: entry points, groups, counters, helpers ----===//
//
// The backend-neutral half of the collectives: argument checks, the group of
// a rank for an axes mask, groups of one (a local copy), all_slice (no
// communication), the counters, and the copy and reduction helpers both
// backends use so that they produce the same bits.
//
//===----------------------------------------------------------------------===//

#include "comm.h"

#include <cstdio>

using namespace tessel::cpu;

//===--- Groups -----------------------------------------------------------===//

bool tessel::cpu::groupOf(const tessel_ctx *ctx, uint32_t mask, Group &group) {
  const int32_t axes = int32_t(ctx->meshShape.size());
  if (axes < 32 && (mask >> axes) != 0)
    return false;
  group = Group();
  group.mask = mask;
  for (int32_t a = 0; a < axes; ++a) {
    int64_t size = ctx->meshShape[size_t(a)], coord = ctx->meshCoord[size_t(a)];
    if (mask & (1u << a)) {
      group.index = group.index * size + coord;
      group.size *= size;
    } else {
      group.id = group.id * size + coord;
    }
  }
  return true;
}

int32_t tessel::cpu::groupMemberRank(const tessel_ctx *ctx, const Group &group,
                                     int64_t j) {
  const size_t axes = ctx->meshShape.size();
  std::vector<int64_t> coord(ctx->meshCoord);
  // The last masked axis is the fastest digit of the group index.
  for (size_t a = axes; a-- > 0;) {
    if (group.mask & (1u << a)) {
      coord[a] = j % ctx->meshShape[a];
      j /= ctx->meshShape[a];
    }
  }
  int64_t rank = 0;
  for (size_t a = 0; a < axes; ++a)
    rank = rank * ctx->meshShape[a] + coord[a];
  return int32_t(rank);
}

//===--- Collective descriptions ------------------------------------------===//

int64_t Collective::inBytes() const {
  if (kind == TESSEL_COLL_ALL_REDUCE)
    return count * elemSize;
  if (kind == TESSEL_COLL_ALL_TO_ALL) {
    int64_t n = elemSize;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  return outer * len * inner * elemSize;
}

uint64_t Collective::signature() const {
  uint64_t h =
      hash4(uint64_t(kind), uint64_t(dtype), uint64_t(reduce), uint64_t(count));
  h = hash4(h, uint64_t(outer), uint64_t(len), uint64_t(inner));
  h = hash4(h, uint64_t(splitDim), uint64_t(concatDim), shape.size());
  for (int64_t d : shape)
    h = mix64(h ^ uint64_t(d));
  return h;
}

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

//===--- Entry points -----------------------------------------------------===//

namespace {

bool isReduceKind(int32_t kind) {
  return kind == TESSEL_REDUCE_SUM || kind == TESSEL_REDUCE_MEAN ||
         kind == TESSEL_REDUCE_MAX;
}

constexpr int32_t kNoReduction = -1;

/// The start of every entry point: describes the call in `c` and does the
/// checks every collective shares (the group of `axes`, the dtype, and a
/// reduction's kind unless `reduce` is kNoReduction); fills `group`.
bool describe(tessel_ctx *ctx, Collective &c, int32_t kind, const char *name,
              uint32_t axes, int32_t dtype, const void *in, void *out,
              int32_t reduce, Group &group) {
  c.kind = kind;
  c.name = name;
  c.in = in;
  c.out = out;
  if (!groupOf(ctx, axes, group)) {
    setError(ctx, "%s: axes mask 0x%x names an axis beyond the mesh's %d",
             c.name, axes, int(ctx->meshShape.size()));
    return false;
  }
  c.dtype = dtype;
  c.elemSize = tessel_dtype_size(dtype);
  if (c.elemSize == 0) {
    setError(ctx, "%s: unsupported dtype %d", c.name, dtype);
    return false;
  }
  if (reduce == kNoReduction)
    return true;
  c.reduce = reduce;
  if (!isReduceKind(reduce)) {
    setError(ctx, "%s: unknown reduction kind %d", c.name, reduce);
    return false;
  }
  return true;
}

/// Checks a tensor shape and `dim` and views the tensor as [outer, len,
/// inner] around it.
bool checkShape(tessel_ctx *ctx, Collective &c, int32_t rank,
                const int64_t *shape, int32_t dim, const char *what) {
  if (rank < 1 || rank > 64 || !shape) {
    setError(ctx, "%s: bad tensor rank %d", c.name, rank);
    return false;
  }
  c.shape.assign(shape, shape + rank);
  int64_t elems = 1;
  for (int32_t d = 0; d < rank; ++d) {
    if (shape[d] < 0 || __builtin_mul_overflow(elems, shape[d], &elems)) {
      setError(ctx, "%s: bad size %lld of dimension %d", c.name,
               (long long)shape[d], d);
      return false;
    }
  }
  int64_t bytes;
  if (__builtin_mul_overflow(elems, c.elemSize, &bytes)) {
    setError(ctx, "%s: tensor size overflows", c.name);
    return false;
  }
  if (dim < 0 || dim >= rank) {
    setError(ctx, "%s: %s %d outside a tensor of rank %d", c.name, what, dim,
             rank);
    return false;
  }
  c.outer = 1;
  c.inner = 1;
  for (int32_t d = 0; d < dim; ++d)
    c.outer *= shape[d];
  for (int32_t d = dim + 1; d < rank; ++d)
    c.inner *= shape[d];
  c.len = shape[dim];
  return true;
}

bool checkDivisible(tessel_ctx *ctx, const Collective &c, int32_t dim,
                    const Group &group) {
  if (c.shape[size_t(dim)] % group.size == 0)
    return true;
  setError(ctx,
           "%s: dimension %d of size %lld does not split over a group "
           "of %lld",
           c.name, dim, (long long)c.shape[size_t(dim)], (long long)group.size);
  return false;
}

bool checkBuffers(tessel_ctx *ctx, const Collective &c, const Group &group,
                  bool inPlaceAllowed) {
  if (c.inBytes() > 0 && (!c.in || !c.out)) {
    setError(ctx, "%s: null buffer", c.name);
    return false;
  }
  if (!inPlaceAllowed && group.size > 1 && c.in == c.out && c.inBytes() > 0) {
    setError(ctx, "%s: in and out must be distinct buffers", c.name);
    return false;
  }
  return true;
}

/// Runs a checked collective: a group of one copies, others go to the
/// context's backend; counts what completed.
void run(tessel_ctx *ctx, const Collective &c, const Group &group) {
  const int64_t bytes = c.inBytes();
  if (group.size == 1) {
    // Every collective of one rank is the identity on its input.
    if (c.out != c.in && bytes > 0)
      std::memmove(c.out, c.in, size_t(bytes));
    return;
  }
  bool ok = false;
  switch (ctx->comm) {
  case TESSEL_COMM_LOCAL:
    ok = localCollective(ctx, group, c);
    break;
  case TESSEL_COMM_MPI:
    ok = mpiCollective(ctx, group, c);
    break;
  default:
    // Unreachable: a COMM_NONE context has one rank, so every group is one.
    setError(ctx, "%s: no communication backend for a group of %lld", c.name,
             (long long)group.size);
    break;
  }
  if (!ok)
    return;
  CommCounter &counter = ctx->commCounters[c.kind][group.mask];
  counter.bytes +=
      c.kind == TESSEL_COLL_ALL_GATHER ? bytes * group.size : bytes;
  ++counter.calls;
}

} // namespace

extern "C" {

int32_t tessel_ctx_mesh_rank(const tessel_ctx *ctx) {
  return ctx ? int32_t(ctx->meshShape.size()) : 0;
}

int64_t tessel_ctx_mesh_size(const tessel_ctx *ctx, int32_t axis) {
  if (!ctx || axis < 0 || size_t(axis) >= ctx->meshShape.size())
    return 0;
  return ctx->meshShape[size_t(axis)];
}

int64_t tessel_ctx_mesh_coord(const tessel_ctx *ctx, int32_t axis) {
  if (!ctx || axis < 0 || size_t(axis) >= ctx->meshCoord.size())
    return -1;
  return ctx->meshCoord[size_t(axis)];
}

int64_t tessel_group_size(const tessel_ctx *ctx, uint32_t axes) {
  Group group;
  if (!ctx || !groupOf(ctx, axes, group))
    return -1;
  return group.size;
}

int64_t tessel_group_index(const tessel_ctx *ctx, uint32_t axes) {
  Group group;
  if (!ctx || !groupOf(ctx, axes, group))
    return -1;
  return group.index;
}

void tessel_all_reduce(tessel_ctx *ctx, uint32_t axes, int32_t dtype,
                       const void *in, void *out, int64_t count, int32_t kind) {
  if (!ctx)
    return;
  Collective c;
  Group group;
  if (!describe(ctx, c, TESSEL_COLL_ALL_REDUCE, "tessel_all_reduce", axes,
                dtype, in, out, kind, group))
    return;
  int64_t bytes;
  if (count < 0 || __builtin_mul_overflow(count, c.elemSize, &bytes)) {
    setError(ctx, "%s: bad count %lld", c.name, (long long)count);
    return;
  }
  c.count = count;
  if (!checkBuffers(ctx, c, group, /*inPlaceAllowed=*/true))
    return;
  run(ctx, c, group);
}

void tessel_all_gather(tessel_ctx *ctx, uint32_t axes, int32_t dtype,
                       const void *in, void *out, int32_t rank_,
                       const int64_t *shape, int32_t dim) {
  if (!ctx)
    return;
  Collective c;
  Group group;
  if (!describe(ctx, c, TESSEL_COLL_ALL_GATHER, "tessel_all_gather", axes,
                dtype, in, out, kNoReduction, group) ||
      !checkShape(ctx, c, rank_, shape, dim, "dim"))
    return;
  int64_t outBytes;
  if (__builtin_mul_overflow(c.inBytes(), group.size, &outBytes)) {
    setError(ctx, "%s: output size overflows", c.name);
    return;
  }
  if (!checkBuffers(ctx, c, group, /*inPlaceAllowed=*/false))
    return;
  run(ctx, c, group);
}

void tessel_reduce_scatter(tessel_ctx *ctx, uint32_t axes, int32_t dtype,
                           const void *in, void *out, int32_t rank_,
                           const int64_t *shape, int32_t dim, int32_t kind) {
  if (!ctx)
    return;
  Collective c;
  Group group;
  if (!describe(ctx, c, TESSEL_COLL_REDUCE_SCATTER, "tessel_reduce_scatter",
                axes, dtype, in, out, kind, group) ||
      !checkShape(ctx, c, rank_, shape, dim, "dim") ||
      !checkDivisible(ctx, c, dim, group) ||
      !checkBuffers(ctx, c, group, /*inPlaceAllowed=*/false))
    return;
  run(ctx, c, group);
}

void tessel_all_to_all(tessel_ctx *ctx, uint32_t axes, int32_t dtype,
                       const void *in, void *out, int32_t rank_,
                       const int64_t *shape, int32_t split_dim,
                       int32_t concat_dim) {
  if (!ctx)
    return;
  Collective c;
  Group group;
  if (!describe(ctx, c, TESSEL_COLL_ALL_TO_ALL, "tessel_all_to_all", axes,
                dtype, in, out, kNoReduction, group) ||
      !checkShape(ctx, c, rank_, shape, concat_dim, "concat_dim") ||
      !checkShape(ctx, c, rank_, shape, split_dim, "split_dim") ||
      !checkDivisible(ctx, c, split_dim, group))
    return;
  c.splitDim = split_dim;
  c.concatDim = concat_dim;
  if (!checkBuffers(ctx, c, group, /*inPlaceAllowed=*/false))
    return;
  run(ctx, c, group);
}

void tessel_all_slice(tessel_ctx *ctx, uint32_t axes, int32_t dtype,
                      const void *in, void *out, int32_t rank_,
                      const int64_t *shape, int32_t dim) {
  if (!ctx)
    return;
  Collective c;
  Group group;
  if (!describe(ctx, c, kAllSlice, "tessel_all_slice", axes, dtype, in, out,
                kNoReduction, group) ||
      !checkShape(ctx, c, rank_, shape, dim, "dim") ||
      !checkDivisible(ctx, c, dim, group) ||
      !checkBuffers(ctx, c, group, /*inPlaceAllowed=*/false))
    return;
  if (group.size == 1) {
    run(ctx, c, group);
    return;
  }
  // Block g of every [len] row; no peer is involved and nothing is counted.
  const int64_t blockLen = c.len / group.size;
  const int64_t rowBytes = blockLen * c.inner * c.elemSize;
  copyRows(out, rowBytes,
           static_cast<const uint8_t *>(in) + group.index * rowBytes,
           c.len * c.inner * c.elemSize, c.outer, rowBytes);
}

int64_t tessel_comm_bytes(const tessel_ctx *ctx, int32_t collective,
                          uint32_t axes) {
  if (!ctx || collective < 0 || collective >= TESSEL_NUM_COLLECTIVES)
    return 0;
  auto it = ctx->commCounters[collective].find(axes);
  return it == ctx->commCounters[collective].end() ? 0 : it->second.bytes;
}

int64_t tessel_comm_calls(const tessel_ctx *ctx, int32_t collective,
                          uint32_t axes) {
  if (!ctx || collective < 0 || collective >= TESSEL_NUM_COLLECTIVES)
    return 0;
  auto it = ctx->commCounters[collective].find(axes);
  return it == ctx->commCounters[collective].end() ? 0 : it->second.calls;
}

} // extern "C"
