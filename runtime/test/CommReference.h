//===- CommReference.h - Reference collectives for tests --------*- C++ -*-===//
//
// Plain loops that say what each collective computes, from the mesh and group
// definitions of runtime.h, and a checker that runs a collective on one
// rank's context and compares it, bit for bit, with them. Every rank can
// compute every other rank's input (a hash of (call, rank, element)), so no
// reference needs communication. Free of GoogleTest: the gtest suite (local
// backend) and the MPI check program run the same battery.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_TEST_COMMREFERENCE_H
#define TESSEL_RUNTIME_TEST_COMMREFERENCE_H

#include "Formats.h"

#include <functional>
#include <sstream>

namespace tt {

using Mesh = std::vector<int64_t>;

inline int64_t meshRanks(const Mesh &mesh) {
  int64_t n = 1;
  for (int64_t s : mesh)
    n *= s;
  return n;
}

/// Row-major coordinates, the last axis fastest.
inline std::vector<int64_t> meshCoords(const Mesh &mesh, int64_t rank) {
  std::vector<int64_t> coords(mesh.size());
  for (size_t a = mesh.size(); a-- > 0;) {
    coords[a] = rank % mesh[a];
    rank /= mesh[a];
  }
  return coords;
}

/// The world ranks of `rank`'s group for `mask`, in group-index order: the
/// ranks that share its coordinates off the mask. Row-major rank order
/// restricted to them is row-major order of the masked coordinates.
inline std::vector<int> groupRanks(const Mesh &mesh, uint32_t mask, int rank) {
  std::vector<int64_t> mine = meshCoords(mesh, rank);
  std::vector<int> ranks;
  for (int64_t q = 0; q < meshRanks(mesh); ++q) {
    std::vector<int64_t> theirs = meshCoords(mesh, q);
    bool same = true;
    for (size_t a = 0; a < mesh.size(); ++a)
      if (!(mask & (1u << a)) && theirs[a] != mine[a])
        same = false;
    if (same)
      ranks.push_back(int(q));
  }
  return ranks;
}

inline int groupIndexOf(const std::vector<int> &group, int rank) {
  return int(std::find(group.begin(), group.end(), rank) - group.begin());
}

inline std::vector<uint32_t> meshMasks(const Mesh &mesh) {
  std::vector<uint32_t> masks;
  for (uint32_t m = 0; m < (1u << mesh.size()); ++m)
    masks.push_back(m);
  return masks;
}

inline uint64_t mixBits(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// Element i of `rank`'s input to call `salt`: in [-4, 4) with as many
/// significant bits as the dtype holds (so f32/f64 sums round and the order
/// of the additions shows), exact in the dtype; integers in [-100, 100].
inline double commValue(int32_t dtype, uint64_t salt, int rank, int64_t i) {
  uint64_t h = mixBits(mixBits(mixBits(salt) ^ uint64_t(rank)) ^ uint64_t(i));
  if (isInt(dtype))
    return double(int64_t(h % 201) - 100);
  int bits = dtype == TESSEL_F16    ? 11
             : dtype == TESSEL_BF16 ? 8
             : dtype == TESSEL_F32  ? 24
                                    : 53;
  int64_t k = int64_t(h >> (64 - bits)) - (int64_t(1) << (bits - 1));
  return std::ldexp(double(k), 3 - bits);
}

/// The payload rank `from` sends rank `to` under `tag` in the
/// point-to-point tests: `bytes` bytes that differ with each of the four.
inline std::vector<uint8_t> p2pPayload(int from, int to, int64_t tag,
                                       int64_t bytes) {
  std::vector<uint8_t> data(static_cast<size_t>(bytes));
  const uint64_t salt =
      mixBits(uint64_t(from) * 1000003u + uint64_t(to) * 7919u + uint64_t(tag));
  for (int64_t i = 0; i < bytes; ++i)
    data[size_t(i)] = uint8_t(mixBits(salt + uint64_t(i)) >> 56);
  return data;
}

inline std::vector<double> commInput(int32_t dtype, uint64_t salt, int rank,
                                     int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[size_t(i)] = commValue(dtype, salt, rank, i);
  return v;
}

/// The spec's reduction: in group-index order, in f32 (f64 for f64, int64
/// for integers), MEAN dividing the sum by G, rounded once to the dtype.
inline double reduceRef(int32_t dtype, int32_t kind,
                        const std::vector<double> &xs) {
  const size_t n = xs.size();
  if (isInt(dtype)) {
    int64_t a = int64_t(xs[0]);
    for (size_t p = 1; p < n; ++p)
      a = kind == TESSEL_REDUCE_MAX ? std::max(a, int64_t(xs[p]))
                                    : a + int64_t(xs[p]);
    if (kind == TESSEL_REDUCE_MEAN)
      a /= int64_t(n);
    return dtype == TESSEL_I32 ? double(int32_t(a)) : double(a);
  }
  if (dtype == TESSEL_F64) {
    double a = xs[0];
    for (size_t p = 1; p < n; ++p)
      a = kind == TESSEL_REDUCE_MAX ? std::max(a, xs[p]) : a + xs[p];
    if (kind == TESSEL_REDUCE_MEAN)
      a /= double(n);
    return a;
  }
  float a = float(xs[0]);
  for (size_t p = 1; p < n; ++p)
    a = kind == TESSEL_REDUCE_MAX ? std::max(a, float(xs[p]))
                                  : a + float(xs[p]);
  if (kind == TESSEL_REDUCE_MEAN)
    a /= float(n);
  return quantize(dtype, double(a));
}

inline int64_t numElements(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

inline std::vector<int64_t> unravel(int64_t flat,
                                    const std::vector<int64_t> &shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}

inline int64_t ravel(const std::vector<int64_t> &idx,
                     const std::vector<int64_t> &shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    flat = flat * shape[d] + idx[d];
  return flat;
}

inline const char *reduceName(int32_t kind) {
  return kind == TESSEL_REDUCE_SUM    ? "sum"
         : kind == TESSEL_REDUCE_MEAN ? "mean"
                                      : "max";
}

inline std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s;
  for (int64_t d : shape)
    s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

/// Runs collectives on one rank's context and compares each result with the
/// reference, reporting mismatches (and errors the runtime recorded)
/// through `report`. Every rank of the mesh must run the same sequence of
/// calls (the salt counts them).
class CommChecker {
public:
  using Report = std::function<void(const std::string &)>;

  CommChecker(tessel_ctx *ctx, Mesh mesh, int rank, Report report)
      : ctx(ctx), mesh(std::move(mesh)), rank(rank), report(std::move(report)) {
  }

  int failures() const { return failed; }

  /// Issue the collectives with their *_start forms (all_slice has none).
  /// Each call computes its reference between the start and its
  /// tessel_comm_wait, so the started collective runs while this thread
  /// works.
  void useStart(bool on) { started = on; }

  /// What every checked call starts with: a fresh salt (every rank counts
  /// the same calls), this rank's group and its index in it, and this
  /// rank's encoded input of `elements` values.
  struct Call {
    uint64_t salt;
    std::vector<int> group;
    int64_t groupSize;
    int64_t g;
    std::vector<uint8_t> in;
  };
  Call begin(int32_t dtype, uint32_t mask, int64_t elements) {
    Call c;
    c.salt = ++calls;
    c.group = groupRanks(mesh, mask, rank);
    c.groupSize = int64_t(c.group.size());
    c.g = groupIndexOf(c.group, rank);
    c.in = encode(dtype, commInput(dtype, c.salt, rank, elements));
    return c;
  }

  void allReduce(int32_t dtype, int32_t kind, int64_t n, bool inPlace,
                 uint32_t mask) {
    auto [salt, group, groupSize, g, in] = begin(dtype, mask, n);
    std::vector<uint8_t> out(in.size());
    void *dst = inPlace ? in.data() : out.data();
    if (started)
      tessel_all_reduce_start(ctx, mask, dtype, in.data(), dst, n, kind);
    else
      tessel_all_reduce(ctx, mask, dtype, in.data(), dst, n, kind);
    std::vector<double> want(static_cast<size_t>(n)), xs(group.size());
    for (int64_t i = 0; i < n; ++i) {
      for (size_t p = 0; p < group.size(); ++p)
        xs[p] = commValue(dtype, salt, group[p], i);
      want[size_t(i)] = reduceRef(dtype, kind, xs);
    }
    tessel_comm_wait(ctx, dst);
    expectSame(decode(dtype, dst, size_t(n)), want, entry("tessel_all_reduce"),
               mask, dtype,
               std::string(reduceName(kind)) + " n=" + std::to_string(n) +
                   (inPlace ? " in place" : ""));
  }

  void allGather(int32_t dtype, uint32_t mask,
                 const std::vector<int64_t> &shape, int32_t dim) {
    auto [salt, group, groupSize, g, in] =
        begin(dtype, mask, numElements(shape));
    std::vector<int64_t> outShape = shape;
    outShape[size_t(dim)] *= groupSize;
    std::vector<uint8_t> out(in.size() * size_t(groupSize));
    if (started)
      tessel_all_gather_start(ctx, mask, dtype, in.data(), out.data(),
                              int32_t(shape.size()), shape.data(), dim);
    else
      tessel_all_gather(ctx, mask, dtype, in.data(), out.data(),
                        int32_t(shape.size()), shape.data(), dim);
    std::vector<double> want(size_t(numElements(outShape)));
    for (int64_t f = 0; f < int64_t(want.size()); ++f) {
      std::vector<int64_t> idx = unravel(f, outShape);
      const int64_t p = idx[size_t(dim)] / shape[size_t(dim)];
      idx[size_t(dim)] %= shape[size_t(dim)];
      want[size_t(f)] =
          commValue(dtype, salt, group[size_t(p)], ravel(idx, shape));
    }
    tessel_comm_wait(ctx, out.data());
    expectSame(decode(dtype, out.data(), want.size()), want,
               entry("tessel_all_gather"), mask, dtype,
               shapeText(shape) + " dim " + std::to_string(dim));
  }

  /// `shape` is the input's; shape[dim] must split over the group.
  void reduceScatter(int32_t dtype, uint32_t mask,
                     const std::vector<int64_t> &shape, int32_t dim,
                     int32_t kind) {
    auto [salt, group, groupSize, g, in] =
        begin(dtype, mask, numElements(shape));
    std::vector<int64_t> outShape = shape;
    outShape[size_t(dim)] /= groupSize;
    std::vector<uint8_t> out(in.size() / size_t(groupSize));
    if (started)
      tessel_reduce_scatter_start(ctx, mask, dtype, in.data(), out.data(),
                                  int32_t(shape.size()), shape.data(), dim,
                                  kind);
    else
      tessel_reduce_scatter(ctx, mask, dtype, in.data(), out.data(),
                            int32_t(shape.size()), shape.data(), dim, kind);
    std::vector<double> want(size_t(numElements(outShape))), xs(group.size());
    for (int64_t f = 0; f < int64_t(want.size()); ++f) {
      std::vector<int64_t> idx = unravel(f, outShape);
      idx[size_t(dim)] += g * outShape[size_t(dim)];
      for (size_t p = 0; p < group.size(); ++p)
        xs[p] = commValue(dtype, salt, group[p], ravel(idx, shape));
      want[size_t(f)] = reduceRef(dtype, kind, xs);
    }
    tessel_comm_wait(ctx, out.data());
    expectSame(decode(dtype, out.data(), want.size()), want,
               entry("tessel_reduce_scatter"), mask, dtype,
               shapeText(shape) + " dim " + std::to_string(dim) + " " +
                   reduceName(kind));
  }

  /// `shape` is the input's; shape[split] must split over the group.
  void allToAll(int32_t dtype, uint32_t mask, const std::vector<int64_t> &shape,
                int32_t split, int32_t concat) {
    auto [salt, group, groupSize, g, in] =
        begin(dtype, mask, numElements(shape));
    std::vector<int64_t> block = shape;
    block[size_t(split)] /= groupSize;
    std::vector<int64_t> outShape = block;
    outShape[size_t(concat)] *= groupSize;
    std::vector<uint8_t> out(in.size());
    if (started)
      tessel_all_to_all_start(ctx, mask, dtype, in.data(), out.data(),
                              int32_t(shape.size()), shape.data(), split,
                              concat);
    else
      tessel_all_to_all(ctx, mask, dtype, in.data(), out.data(),
                        int32_t(shape.size()), shape.data(), split, concat);
    // Output block p along concat is block g along split of p's input.
    std::vector<double> want(size_t(numElements(outShape)));
    for (int64_t f = 0; f < int64_t(want.size()); ++f) {
      std::vector<int64_t> idx = unravel(f, outShape);
      const int64_t p = idx[size_t(concat)] / block[size_t(concat)];
      idx[size_t(concat)] %= block[size_t(concat)];
      idx[size_t(split)] += g * block[size_t(split)];
      want[size_t(f)] =
          commValue(dtype, salt, group[size_t(p)], ravel(idx, shape));
    }
    tessel_comm_wait(ctx, out.data());
    expectSame(decode(dtype, out.data(), want.size()), want,
               entry("tessel_all_to_all"), mask, dtype,
               shapeText(shape) + " split " + std::to_string(split) +
                   " concat " + std::to_string(concat));
  }

  void allSlice(int32_t dtype, uint32_t mask, const std::vector<int64_t> &shape,
                int32_t dim) {
    auto [salt, group, groupSize, g, in] =
        begin(dtype, mask, numElements(shape));
    std::vector<int64_t> outShape = shape;
    outShape[size_t(dim)] /= groupSize;
    std::vector<uint8_t> out(in.size() / size_t(groupSize));
    tessel_all_slice(ctx, mask, dtype, in.data(), out.data(),
                     int32_t(shape.size()), shape.data(), dim);
    std::vector<double> want(size_t(numElements(outShape)));
    for (int64_t f = 0; f < int64_t(want.size()); ++f) {
      std::vector<int64_t> idx = unravel(f, outShape);
      idx[size_t(dim)] += g * outShape[size_t(dim)];
      want[size_t(f)] = commValue(dtype, salt, rank, ravel(idx, shape));
    }
    expectSame(decode(dtype, out.data(), want.size()), want, "tessel_all_slice",
               mask, dtype, shapeText(shape) + " dim " + std::to_string(dim));
  }

  //===--- Batteries: every mask of the mesh, the given dtypes ------------===//

  /// Small (every member reduces all) and, with `large`, chunked sizes
  /// (over 64 KiB), each out of place and in place.
  void allReduces(const std::vector<int32_t> &dtypes, bool large) {
    for (uint32_t mask : meshMasks(mesh))
      for (int32_t dtype : dtypes) {
        for (int32_t kind :
             {TESSEL_REDUCE_SUM, TESSEL_REDUCE_MEAN, TESSEL_REDUCE_MAX})
          for (int64_t n : {int64_t(0), int64_t(1), int64_t(37)})
            for (bool inPlace : {false, true})
              allReduce(dtype, kind, n, inPlace, mask);
        if (large && !isInt(dtype) && dtype != TESSEL_F16)
          for (int32_t kind : {TESSEL_REDUCE_SUM, TESSEL_REDUCE_MEAN})
            for (bool inPlace : {false, true})
              allReduce(dtype, kind, 40003, inPlace, mask);
      }
  }

  void allGathers(const std::vector<int32_t> &dtypes) {
    for (uint32_t mask : meshMasks(mesh))
      for (int32_t dtype : dtypes) {
        for (int32_t dim = 0; dim < 3; ++dim)
          allGather(dtype, mask, {3, 4, 5}, dim);
        allGather(dtype, mask, {7}, 0);
      }
  }

  void reduceScatters(const std::vector<int32_t> &dtypes) {
    for (uint32_t mask : meshMasks(mesh)) {
      const int64_t groupSize = int64_t(groupRanks(mesh, mask, rank).size());
      for (int32_t dtype : dtypes)
        for (int32_t dim = 0; dim < 3; ++dim)
          for (int32_t kind :
               {TESSEL_REDUCE_SUM, TESSEL_REDUCE_MEAN, TESSEL_REDUCE_MAX}) {
            std::vector<int64_t> shape = {2, 3, 5};
            shape[size_t(dim)] = 2 * groupSize;
            reduceScatter(dtype, mask, shape, dim, kind);
          }
    }
  }

  void allToAlls(const std::vector<int32_t> &dtypes) {
    for (uint32_t mask : meshMasks(mesh)) {
      const int64_t groupSize = int64_t(groupRanks(mesh, mask, rank).size());
      for (int32_t dtype : dtypes)
        for (int32_t split = 0; split < 3; ++split)
          for (int32_t concat = 0; concat < 3; ++concat) {
            std::vector<int64_t> shape = {2, 3, 4};
            shape[size_t(split)] *= groupSize;
            allToAll(dtype, mask, shape, split, concat);
          }
    }
  }

  void allSlices(const std::vector<int32_t> &dtypes) {
    for (uint32_t mask : meshMasks(mesh)) {
      const int64_t groupSize = int64_t(groupRanks(mesh, mask, rank).size());
      for (int32_t dtype : dtypes)
        for (int32_t dim = 0; dim < 3; ++dim) {
          std::vector<int64_t> shape = {2, 3, 5};
          shape[size_t(dim)] = 2 * groupSize;
          allSlice(dtype, mask, shape, dim);
        }
    }
  }

private:
  /// The entry point a checked call used, for the failure messages.
  std::string entry(const char *blocking) const {
    return started ? std::string(blocking) + "_start" : blocking;
  }
  void expectSame(const std::vector<double> &got,
                  const std::vector<double> &want, const std::string &name,
                  uint32_t mask, int32_t dtype, const std::string &what) {
    std::string where = "rank " + std::to_string(rank) + " " + name + " mask " +
                        std::to_string(mask) + " " + dtypeName(dtype) + " " +
                        what;
    if (const char *err = tessel_error(ctx)) {
      fail(where + ": error: " + err);
      tessel_clear_error(ctx);
      return;
    }
    int bad = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      // Bit for bit: equal values (no NaN is generated) of the same sign.
      if (got[i] == want[i] && std::signbit(got[i]) == std::signbit(want[i]))
        continue;
      if (bad++ < 3) {
        std::ostringstream msg;
        msg.precision(17);
        msg << where << ": element " << i << ": got " << got[i] << ", want "
            << want[i];
        fail(msg.str());
      }
    }
  }
  void fail(const std::string &message) {
    ++failed;
    report(message);
  }

  tessel_ctx *ctx;
  Mesh mesh;
  int rank;
  Report report;
  uint64_t calls = 0;
  int failed = 0;
  bool started = false;
};

/// One call of every collective on a {2, 2} mesh, over masks 1, 3, 0 (a
/// group of one), 2, 3 and 1 and with several dtypes: the workload whose
/// counters CommTest and the MPI check compare with the spec's payloads
/// (all_reduce mask 1: 40 bytes; mask 3: 14; all_gather mask 2: 48;
/// reduce_scatter mask 3: 192; all_to_all mask 1: 48; all_slice: nothing).
/// With `started`, through the *_start forms (all_slice has none), each on
/// buffers of its own, then tessel_comm_wait_all.
inline void issueOneOfEachCollective(tessel_ctx *ctx, bool started = false) {
  std::vector<std::vector<uint8_t>> ins(7, std::vector<uint8_t>(4096)),
      outs(7, std::vector<uint8_t>(4096));
  auto in = [&](int i) { return ins[size_t(i)].data(); };
  auto out = [&](int i) { return outs[size_t(i)].data(); };
  auto allReduce = started ? &tessel_all_reduce_start : &tessel_all_reduce;
  allReduce(ctx, 1, TESSEL_F32, in(0), out(0), 10, TESSEL_REDUCE_SUM);
  allReduce(ctx, 3, TESSEL_BF16, in(1), in(1), 7, TESSEL_REDUCE_MEAN);
  allReduce(ctx, 0, TESSEL_F32, in(2), out(2), 10, TESSEL_REDUCE_SUM);
  const int64_t gatherShape[] = {3, 2};
  (started ? &tessel_all_gather_start : &tessel_all_gather)(
      ctx, 2, TESSEL_F32, in(3), out(3), 2, gatherShape, 1);
  const int64_t scatterShape[] = {8, 3};
  (started ? &tessel_reduce_scatter_start : &tessel_reduce_scatter)(
      ctx, 3, TESSEL_F64, in(4), out(4), 2, scatterShape, 0, TESSEL_REDUCE_SUM);
  const int64_t a2aShape[] = {4, 3};
  (started ? &tessel_all_to_all_start : &tessel_all_to_all)(
      ctx, 1, TESSEL_F32, in(5), out(5), 2, a2aShape, 0, 1);
  tessel_all_slice(ctx, 1, TESSEL_F32, in(6), out(6), 2, a2aShape, 0);
  tessel_comm_wait_all(ctx);
}

} // namespace tt

#endif // TESSEL_RUNTIME_TEST_COMMREFERENCE_H
