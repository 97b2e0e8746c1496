//===- comm.h - Collectives of the local and MPI backends -------*- C++ -*-===//
//
// Private to runtime/cpu. comm.cpp checks a collective's arguments, turns its
// shape into the block view below, handles groups of one and counts; the
// backends (comm_local.cpp: ranks as threads, comm_mpi.cpp: MPI) only move
// and reduce the data, through the block-copy and ordered-reduction helpers
// here, so both produce the same bits.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CPU_COMM_H
#define TESSEL_RUNTIME_CPU_COMM_H

#include "internal.h"

#include <string>
#include <vector>

namespace tessel {
namespace cpu {

/// The calling rank's group for an axes mask.
struct Group {
  uint32_t mask = 0;
  int64_t size = 1;  /// G: product of the masked axes' sizes.
  int64_t index = 0; /// g: row-major coordinates on the masked axes.
  /// Row-major coordinates on the other axes: the groups of one mask are
  /// numbered 0 .. world / G - 1 (the MPI split's colour).
  int64_t id = 0;
};

/// The group of `ctx` for `mask`; false if the mask names an axis beyond the
/// mesh.
bool groupOf(const tessel_ctx *ctx, uint32_t mask, Group &group);

/// The world rank of group index `j` of `group` (the calling rank's group).
int32_t groupMemberRank(const tessel_ctx *ctx, const Group &group, int64_t j);

/// all_slice's kind in a Collective: past the counted collectives (it
/// counts nothing and never reaches a backend).
constexpr int32_t kAllSlice = TESSEL_NUM_COLLECTIVES;

/// One collective call after its arguments were checked, in the views the
/// backends use. Every tensor is [outer, len, inner] around its `dim`
/// except all_to_all's, which keeps the full shape.
struct Collective {
  int32_t kind = TESSEL_COLL_ALL_REDUCE; /// tessel_collective or kAllSlice
  const char *name = "";                 /// the entry point, for errors
  int32_t dtype = TESSEL_F32;
  int64_t elemSize = 4;
  int32_t reduce = TESSEL_REDUCE_SUM; /// tessel_reduce_kind (reductions)
  const void *in = nullptr;
  void *out = nullptr;
  /// all_reduce: count. all_gather, reduce_scatter, all_slice: the input as
  /// [outer, len, inner] around `dim` (all_gather's out has G·len,
  /// reduce_scatter's and all_slice's len / G).
  int64_t count = 0;
  int64_t outer = 1, len = 0, inner = 1;
  /// all_to_all: the input shape and dims.
  std::vector<int64_t> shape;
  int32_t splitDim = 0, concatDim = 0;

  /// Bytes of the input.
  int64_t inBytes() const;
  /// A digest of everything the members must agree on, to catch mismatched
  /// calls before they read past a buffer.
  uint64_t signature() const;
};

/// When a collective that starts now must have completed: the context's
/// timeout, capped at a year so that the clock arithmetic cannot overflow.
inline std::chrono::steady_clock::time_point
commDeadline(const tessel_ctx *ctx) {
  const double seconds = std::min(ctx->commTimeoutSeconds, 3.15e7);
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(
             std::chrono::duration<double>(seconds));
}

/// Runs `c` on the calling rank's group (G > 1) with the local (threads) or
/// MPI backend; false with an error recorded on ctx on failure.
bool localCollective(tessel_ctx *ctx, const Group &group, const Collective &c);
bool mpiCollective(tessel_ctx *ctx, const Group &group, const Collective &c);

/// Joins the MPI world for a new context (collective: creates the
/// single-axis communicators); false with the reason in `error`.
bool mpiAttach(tessel_ctx *ctx, std::string &error);
/// Frees the context's communicators.
void mpiDetach(tessel_ctx *ctx);
/// Sets what tessel_error(NULL) reports on this thread (context.cpp).
void setCreateError(std::string message);
/// Joins / leaves the context's local world (one context per rank).
bool localAttach(tessel_ctx *ctx, tessel_local_world *world,
                 std::string &error);
void localDetach(tessel_ctx *ctx);

//===--- Data movement and reduction helpers ------------------------------===//

/// Copies `rows` rows of `rowBytes` bytes, row r from src + r·srcStride to
/// dst + r·dstStride (strides in bytes).
void copyRows(void *dst, int64_t dstStride, const void *src, int64_t srcStride,
              int64_t rows, int64_t rowBytes);

/// Copies a box of `shape` (rank dims) of `elemSize`-byte elements from src
/// to dst with the given element strides: the innermost dimensions that are
/// contiguous in both move as one memcpy.
void copyBox(int64_t elemSize, const std::vector<int64_t> &shape,
             const void *src, const std::vector<int64_t> &srcStrides, void *dst,
             const std::vector<int64_t> &dstStrides);

/// Row-major strides (in elements) of `shape`.
std::vector<int64_t> rowMajorStrides(const std::vector<int64_t> &shape);

/// all_to_all's blocks: block j of the input is its box of `blockShape` at
/// offset j·blockShape[splitDim] along splitDim; the block received from
/// group index p lands at offset p·blockShape[concatDim] along concatDim of
/// the output. Offsets in elements.
struct AllToAllLayout {
  std::vector<int64_t> blockShape, inStrides, outStrides;
  int64_t blockElems = 0;
  int32_t splitDim = 0, concatDim = 0;
  int64_t inOffset(int64_t j) const;
  int64_t outOffset(int64_t p) const;
};
AllToAllLayout allToAllLayout(const Collective &c, int64_t groupSize);

/// out[i] = inputs[0][i] ⊕ inputs[1][i] ⊕ … ⊕ inputs[G-1][i] for i < n, in
/// that order, accumulated in f32 (f64 for f64, int64 for integers) and
/// stored once (MEAN divides the sum by G first). `out` may be one of the
/// inputs (the same elements): each block of elements is read from every
/// input before any of it is written.
void reduceInOrder(int32_t dtype, int32_t reduce, int64_t groupSize,
                   const void *const *inputs, void *out, int64_t n);

} // namespace cpu
} // namespace tessel

#endif // TESSEL_RUNTIME_CPU_COMM_H
