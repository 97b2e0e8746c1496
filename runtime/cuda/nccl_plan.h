//===- nccl_plan.h - The host-testable half of the NCCL communicator -*- C++ -*-===//
//
// What comm_nccl.cu computes without touching a device, in plain C++ that
// the host tests compile too: which mesh axes a group really spans (the key
// of its NCCL communicator), how an all_reduce is chunked among the members,
// the strided copies that turn the ABI's block layouts into the contiguous
// buffers NCCL moves (and back), the record the members exchange before
// each collective, and the per-element ordered reduction the reduce kernel
// runs. The reduction follows cpu::reduceInOrder exactly (group-index order,
// f32 accumulation for 16-bit floats, int64 wrapping for integers, MEAN
// dividing once, MAX propagating NaN), so the CUDA backend gives the same
// bits as the CPU backends, which NCCL's own reductions (ring order, 16-bit
// accumulation per hop) would not.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CUDA_NCCL_PLAN_H
#define TESSEL_RUNTIME_CUDA_NCCL_PLAN_H

#include "core/collective.h"
#include "core/storage.h"

#include <cstdint>
#include <cstring>
#include <vector>

namespace tessel {
namespace cuda {

//===--- Groups -----------------------------------------------------------===//

/// `mask` without the axes of size 1: the same members in the same group
/// order (a size-1 axis adds a zero digit to the index and to the id), so
/// masks that differ only there share one NCCL communicator.
inline uint32_t canonicalMask(const std::vector<int64_t> &meshShape,
                              uint32_t mask) {
  for (size_t a = 0; a < meshShape.size() && a < 32; ++a)
    if (meshShape[a] == 1)
      mask &= ~(1u << a);
  return mask;
}

/// Chunk j of n elements split among G members: the first n % G chunks
/// have one element more. No product of j and n, so no overflow.
inline int64_t chunkBegin(int64_t j, int64_t n, int64_t groupSize) {
  const int64_t base = n / groupSize, extra = n % groupSize;
  return j * base + (j < extra ? j : extra);
}
inline int64_t chunkSize(int64_t j, int64_t n, int64_t groupSize) {
  return chunkBegin(j + 1, n, groupSize) - chunkBegin(j, n, groupSize);
}

//===--- Layouts ----------------------------------------------------------===//

/// One cudaMemcpy2D: `rows` rows of `width` bytes, row r from
/// src + srcOffset + r·srcPitch to dst + dstOffset + r·dstPitch.
struct Copy2d {
  int64_t dstOffset, dstPitch, srcOffset, srcPitch, width, rows;
};

/// all_gather: NCCL leaves member p's whole input at p·inBytes of a
/// staging buffer; the ABI wants it as block p of every [G·len] row.
inline std::vector<Copy2d> allGatherUnpack(const Collective &c,
                                           int64_t groupSize) {
  const int64_t rowBytes = c.len * c.inner * c.elemSize;
  std::vector<Copy2d> copies;
  if (rowBytes == 0 || c.outer == 0)
    return copies;
  for (int64_t p = 0; p < groupSize; ++p)
    copies.push_back({p * rowBytes, groupSize * rowBytes,
                      p * c.outer * rowBytes, rowBytes, rowBytes, c.outer});
  return copies;
}

/// reduce_scatter: block j of every row, packed contiguously as
/// [outer, len / G, inner] at j·(its bytes), is what goes to member j.
inline std::vector<Copy2d> reduceScatterPack(const Collective &c,
                                             int64_t groupSize) {
  const int64_t blockBytes = c.len / groupSize * c.inner * c.elemSize;
  std::vector<Copy2d> copies;
  if (blockBytes == 0 || c.outer == 0)
    return copies;
  for (int64_t j = 0; j < groupSize; ++j)
    copies.push_back({j * c.outer * blockBytes, blockBytes, j * blockBytes,
                      groupSize * blockBytes, blockBytes, c.outer});
  return copies;
}

/// A row-major shape seen as [before, at, after] around dimension `dim`.
struct Around {
  int64_t before = 1, at = 1, after = 1;
};
inline Around around(const std::vector<int64_t> &shape, int32_t dim) {
  Around a;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (int32_t(d) < dim)
      a.before *= shape[d];
    else if (int32_t(d) == dim)
      a.at = shape[d];
    else
      a.after *= shape[d];
  }
  return a;
}

/// all_to_all's block shape: the input with split_dim divided by G.
inline std::vector<int64_t> allToAllBlockShape(const Collective &c,
                                               int64_t groupSize) {
  std::vector<int64_t> block = c.shape;
  block[size_t(c.splitDim)] /= groupSize;
  return block;
}

/// all_to_all, sending side: block j along split_dim, packed row-major at
/// j·(block bytes), is what goes to member j.
inline std::vector<Copy2d> allToAllPack(const Collective &c,
                                        int64_t groupSize) {
  const Around s = around(c.shape, c.splitDim);
  const int64_t width = s.at / groupSize * s.after * c.elemSize;
  std::vector<Copy2d> copies;
  if (width == 0 || s.before == 0)
    return copies;
  for (int64_t j = 0; j < groupSize; ++j)
    copies.push_back({j * s.before * width, width, j * width,
                      s.at * s.after * c.elemSize, width, s.before});
  return copies;
}

/// all_to_all, receiving side: the block from member p (row-major at
/// p·(block bytes)) lands at p along concat_dim of the output.
inline std::vector<Copy2d> allToAllUnpack(const Collective &c,
                                          int64_t groupSize) {
  const Around b = around(allToAllBlockShape(c, groupSize), c.concatDim);
  const int64_t width = b.at * b.after * c.elemSize;
  std::vector<Copy2d> copies;
  if (width == 0 || b.before == 0)
    return copies;
  for (int64_t p = 0; p < groupSize; ++p)
    copies.push_back({p * width, groupSize * width, p * b.before * width,
                      width, width, b.before});
  return copies;
}

/// Runs `copies` with memcpy (the host tests' stand-in for cudaMemcpy2D).
inline void applyCopies(void *dst, const void *src,
                        const std::vector<Copy2d> &copies) {
  auto *d = static_cast<uint8_t *>(dst);
  auto *s = static_cast<const uint8_t *>(src);
  for (const Copy2d &k : copies)
    for (int64_t r = 0; r < k.rows; ++r)
      std::memcpy(d + k.dstOffset + r * k.dstPitch,
                  s + k.srcOffset + r * k.srcPitch, size_t(k.width));
}

//===--- The members' handshake -------------------------------------------===//

/// NCCL_UNIQUE_ID_BYTES (comm_nccl.cu checks that they agree).
constexpr size_t kNcclIdBytes = 128;

/// What each member contributes, through the host communicator's
/// all_gather, before a collective: the call's signature (so mismatched
/// calls fail before NCCL reads past a buffer) and whether it still needs
/// the group's NCCL communicator, with group index 0's unique id for it.
struct Handshake {
  enum : uint64_t { kHaveComm = 0, kNeedComm = 1, kNoId = 2 };
  uint64_t signature = 0;
  uint64_t state = kHaveComm;
  uint8_t id[kNcclIdBytes] = {};
};
static_assert(sizeof(Handshake) % 8 == 0, "gathered as 64-bit words");
constexpr int64_t kHandshakeWords = int64_t(sizeof(Handshake) / 8);

/// Why the gathered records cannot go on to NCCL, or null: every member
/// must have made the same call and agree on the communicator's state.
inline const char *handshakeMismatch(const std::vector<Handshake> &all) {
  for (const Handshake &h : all) {
    if (h.signature != all[0].signature)
      return "made different calls (collective, dtype, reduction or shape)";
    if ((h.state == Handshake::kHaveComm) !=
        (all[0].state == Handshake::kHaveComm))
      return "disagree on whether their NCCL communicator exists";
  }
  if (all[0].state == Handshake::kNoId)
    return "have no NCCL unique id (ncclGetUniqueId failed on group index 0)";
  return nullptr;
}

//===--- Ordered reduction ------------------------------------------------===//

/// Storage of the 16-bit floats (raw bits, as the CPU backend stores them;
/// the conversions are core/storage.h's).
using HalfBits = stored::Half;
using Bf16Bits = stored::BFloat;

/// The accumulator of a stored type, as cpu::reduceInOrder's: f32 for the
/// 16-bit floats and f32, f64 for f64, int64 (wrapping) for the integers.
template <class T> struct ReduceAcc {
  using type = T;
  static TESSEL_HD type load(T v) { return v; }
  static TESSEL_HD T store(type v) { return v; }
  static TESSEL_HD type add(type a, type b) { return a + b; }
  // NaN propagates: once the accumulator is NaN no comparison replaces it.
  static TESSEL_HD type max(type a, type b) {
    return (b > a || b != b) ? b : a;
  }
  static TESSEL_HD type mean(type a, int64_t n) { return a / type(n); }
};
template <> struct ReduceAcc<HalfBits> : ReduceAcc<float> {
  static TESSEL_HD float load(HalfBits v) { return stored::halfToFloat(v.bits); }
  static TESSEL_HD HalfBits store(float v) { return {stored::floatToHalf(v)}; }
};
template <> struct ReduceAcc<Bf16Bits> : ReduceAcc<float> {
  static TESSEL_HD float load(Bf16Bits v) { return stored::bf16ToFloat(v.bits); }
  static TESSEL_HD Bf16Bits store(float v) { return {stored::floatToBf16(v)}; }
};
template <class I> struct IntReduceAcc {
  using type = int64_t;
  static TESSEL_HD type load(I v) { return v; }
  static TESSEL_HD I store(type v) { return I(v); }
  static TESSEL_HD type add(type a, type b) {
    return type(uint64_t(a) + uint64_t(b));
  }
  static TESSEL_HD type max(type a, type b) { return b > a ? b : a; }
  static TESSEL_HD type mean(type a, int64_t n) { return a / n; }
};
template <> struct ReduceAcc<int32_t> : IntReduceAcc<int32_t> {};
template <> struct ReduceAcc<int64_t> : IntReduceAcc<int64_t> {};

/// Element i of the reduction of G blocks laid out `stride` elements apart
/// (block p = what member p sent), in group-index order.
template <class T>
TESSEL_HD T reduceOrdered(const T *blocks, int64_t stride, int64_t groupSize,
                          int64_t i, int32_t reduce) {
  using A = ReduceAcc<T>;
  typename A::type acc = A::load(blocks[i]);
  for (int64_t p = 1; p < groupSize; ++p) {
    const typename A::type v = A::load(blocks[p * stride + i]);
    acc = reduce == TESSEL_REDUCE_MAX ? A::max(acc, v) : A::add(acc, v);
  }
  if (reduce == TESSEL_REDUCE_MEAN)
    acc = A::mean(acc, groupSize);
  return A::store(acc);
}

} // namespace cuda
} // namespace tessel

#endif // TESSEL_RUNTIME_CUDA_NCCL_PLAN_H
