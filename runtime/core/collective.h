//===- collective.h - Groups and checked collective calls -------*- C++ -*-===//
//
// What the front hands a communicator: the calling rank's group for an axes
// mask, and one collective call after its arguments were checked, in the
// block views every communicator uses. The front (collectives.cpp) does the
// checks, groups of one, all_slice and the counters; a communicator only
// moves and reduces data among a group of more than one rank.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CORE_COLLECTIVE_H
#define TESSEL_RUNTIME_CORE_COLLECTIVE_H

#include "core/context.h"

#include <algorithm>
#include <chrono>
#include <vector>

namespace tessel {

/// The calling rank's group for an axes mask.
struct Group {
  uint32_t mask = 0;
  int64_t size = 1;  /// G: product of the masked axes' sizes.
  int64_t index = 0; /// g: row-major coordinates on the masked axes.
  /// Row-major coordinates on the other axes: the groups of one mask are
  /// numbered 0 .. world / G - 1 (the MPI split's colour, the NCCL split's).
  int64_t id = 0;
};

/// The group of `ctx` for `mask`; false if the mask names an axis beyond the
/// mesh.
bool groupOf(const tessel_ctx *ctx, uint32_t mask, Group &group);

/// The world rank of group index `j` of `group` (the calling rank's group).
int32_t groupMemberRank(const tessel_ctx *ctx, const Group &group, int64_t j);

/// One collective call after its arguments were checked, in the views the
/// communicators use. Every tensor is [outer, len, inner] around its `dim`
/// except all_to_all's, which keeps the full shape.
struct Collective {
  int32_t kind = TESSEL_COLL_ALL_REDUCE; /// tessel_collective
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
  /// Its event in the context's trace, or -1 (not traced).
  int64_t traceIndex = -1;

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

} // namespace tessel

#endif // TESSEL_RUNTIME_CORE_COLLECTIVE_H
