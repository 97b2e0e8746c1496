//===- MeshBlocks.h - Where a rank's block of a tensor lies on a mesh -----===//
//
// The mesh itself is runtime/config/Mesh.h (shared with the compiler). A tensor
// dimension split by axes [a1, a2] (outer first) is cut into
// size(a1)·size(a2) equal blocks, and a rank holds the block whose index is
// the row-major linearisation of its coordinates on (a1, a2). Everything
// here is arithmetic on shapes: no runtime calls.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_LAUNCHER_MESHBLOCKS_H
#define TESSEL_LAUNCHER_MESHBLOCKS_H

#include "runtime/config/Mesh.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tessel::run {

/// The product of `sizes` (1 for none): elements of a shape, ranks of a mesh.
inline int64_t product(const std::vector<int64_t> &sizes) {
  int64_t n = 1;
  for (int64_t size : sizes)
    n *= size;
  return n;
}

/// The row-major strides (in elements) of `shape`.
inline std::vector<int64_t> rowMajorStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    strides[d - 1] = strides[d] * shape[d];
  return strides;
}

using tessel::Mesh;

/// The index of axis `name` of `mesh`; throws RunError naming both when the
/// mesh has no such axis.
int axisOf(const Mesh &mesh, const std::string &name);
/// The runtime's group mask of `names`; throws RunError on an unknown name.
uint32_t axesMaskOf(const Mesh &mesh, const std::vector<std::string> &names);

/// The traffic of one kind of collective over one group of mesh axes: what
/// the description's "collectives" list per entry, and what the runtime's
/// counters measure.
struct CommCount {
  std::string kind;              // all_reduce, all_gather, reduce_scatter,
                                 // all_to_all
  std::vector<std::string> axes; // in mesh order
  int64_t calls = 0;
  int64_t bytes = 0;
  int64_t asyncBytes = 0; // of bytes, started asynchronously (ABI 5)
  // Of asyncBytes, those with a kernel before their wait (the description's
  // overlapped_bytes; its async_bytes where it has none).
  int64_t overlappedBytes = 0;
};

/// The key of a count in the metrics: "all_reduce dp,tp".
std::string commKey(const CommCount &count);

/// Parses `dp=2,tp=2` (Mesh::parse); throws UsageError naming `flag`.
Mesh parseMesh(const std::string &text, const std::string &flag = "--mesh");

/// Where one rank's block of a tensor lies in the global tensor: its local
/// shape and, per dimension, the global index of its first element. A
/// ZeRO-sharded tensor (zeroDims >= 0) stores only a chunk of that block:
/// dimensions [zeroDims, rank) of it flattened into zeroInner elements per
/// prefix row, of which the rank holds [zeroFirst, zeroFirst + zeroChunk)
/// (elements at or past zeroInner are padding: no global element), laid out
/// as storedShape() = localShape[0:zeroDims] + [zeroChunk].
struct TensorBlock {
  std::vector<int64_t> globalShape;
  std::vector<int64_t> localShape;
  std::vector<int64_t> start;
  int64_t zeroDims = -1; // -1: no ZeRO chunk, the rank stores the block
  int64_t zeroChunk = 0; // s = ceil(zeroInner / G)
  int64_t zeroFirst = 0; // g · s
  int64_t zeroInner = 0; // I = prod(localShape[zeroDims:])

  bool zeroSharded() const { return zeroDims >= 0; }
  /// What the rank's arena holds: localShape, or the ZeRO chunk's shape.
  std::vector<int64_t> storedShape() const;
  /// Elements of the block (before ZeRO).
  int64_t blockElements() const;
  /// Elements the rank stores that are global elements (padding excluded):
  /// what forEachRun's runs add up to.
  int64_t localElements() const;
  /// The rank stores the whole tensor (nothing split, every split of size
  /// 1, and a ZeRO chunk, if any, is its whole block).
  bool whole() const;
};

/// The block of a tensor of `localShape` split per dimension by `sharding`
/// (axis names, outer first; empty = not split) that the rank at
/// `coordinates` of `mesh` holds. `sharding` empty: the whole tensor.
TensorBlock blockOf(const std::vector<int64_t> &localShape,
                    const std::vector<std::vector<std::string>> &sharding,
                    const Mesh &mesh, const std::vector<int64_t> &coordinates);

/// The index of the block a rank holds along a dimension split by `axes`
/// (outer first): its coordinates on them, row-major.
int64_t blockIndex(const std::vector<std::string> &axes, const Mesh &mesh,
                   const std::vector<int64_t> &coordinates);

/// The number of ranks along `axes`: the product of their sizes.
int64_t groupSizeOf(const std::vector<std::string> &axes, const Mesh &mesh);

/// Makes `block` a ZeRO chunk: dimensions [dims, rank) flattened, padded to
/// `groups` chunks, the rank holding chunk `chunk` of each prefix row.
void setZeroChunk(TensorBlock &block, int64_t dims, int64_t chunk,
                  int64_t groups);

/// Calls `run(localFirst, globalFirst, count)` for each maximal run of
/// elements the rank stores that is contiguous in both its storage
/// (row-major storedShape()) and the global tensor, in local order; indices
/// are flat element indices. A block that is the whole tensor is one run.
/// A ZeRO chunk's runs are the block's runs cut at prefix-row boundaries
/// and intersected with the chunk; its padding is in no run.
void forEachRun(
    const TensorBlock &block,
    const std::function<void(int64_t localFirst, int64_t globalFirst,
                             int64_t count)> &run);

} // namespace tessel::run

#endif // TESSEL_LAUNCHER_MESHBLOCKS_H
