//===- comm.h - The CPU communicators and their helpers ---------*- C++ -*-===//
//
// Private to runtime/cpu. The front (core/collectives.cpp) checks a
// collective's arguments, handles groups of one and all_slice, and counts;
// the communicators here (comm_local.cpp: ranks as threads, comm_mpi.cpp:
// MPI) only move and reduce the data, through the block-copy and
// ordered-reduction helpers below, so both produce the same bits.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CPU_COMM_H
#define TESSEL_RUNTIME_CPU_COMM_H

#include "cpu/internal.h"

#include <memory>
#include <string>
#include <vector>

namespace tessel {
namespace cpu {

/// The communicator of a new context of `world` (TESSEL_COMM_LOCAL): joins
/// the world (one context per rank); null with the reason in `error`.
std::unique_ptr<Communicator>
createLocalCommunicator(tessel_ctx *ctx, tessel_local_world *world,
                        std::string &error);
/// The communicator of a new TESSEL_COMM_MPI context: checks the rank
/// against MPI_COMM_WORLD and splits it per mesh axis (collective); null
/// with the reason in `error`.
std::unique_ptr<Communicator> createMpiCommunicator(tessel_ctx *ctx,
                                                    std::string &error);

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
