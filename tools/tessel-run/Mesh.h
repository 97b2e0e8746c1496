//===- Mesh.h - Device meshes and where a rank's block of a tensor lies ---===//
//
// A mesh is a list of named axes with sizes (`dp=2,tp=2`); rank r's
// coordinates are r in row-major order, the last axis fastest. A tensor
// dimension split by axes [a1, a2] (outer first) is cut into
// size(a1)·size(a2) equal blocks, and a rank holds the block whose index is
// the row-major linearisation of its coordinates on (a1, a2). Everything
// here is arithmetic on shapes: no runtime calls.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUN_MESH_H
#define TESSEL_RUN_MESH_H

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

/// The most axes a mesh may have (the runtime's TESSEL_MAX_MESH_AXES).
constexpr size_t maxMeshAxes = 8;

struct Mesh {
  std::vector<std::string> axes; // names, outermost first
  std::vector<int64_t> shape;    // sizes, one per axis

  /// The number of ranks: the product of the sizes.
  int64_t worldSize() const;
  /// The index of axis `name`, or -1.
  int axisIndex(const std::string &name) const;
  /// Rank `rank`'s coordinate on every axis (row-major, last axis fastest).
  std::vector<int64_t> coordinates(int64_t rank) const;
  /// `dp=2,tp=2`.
  std::string toString() const;
  /// The runtime's group mask of `names` (bit i = axis i); every name must
  /// be an axis of this mesh.
  uint32_t axesMask(const std::vector<std::string> &names) const;
  /// The axis names of `mask`, in mesh order.
  std::vector<std::string> axesOf(uint32_t mask) const;

  bool operator==(const Mesh &other) const {
    return axes == other.axes && shape == other.shape;
  }
  bool operator!=(const Mesh &other) const { return !(*this == other); }
};

/// The traffic of one kind of collective over one group of mesh axes: what
/// the description's "collectives" list per entry, and what the runtime's
/// counters measure.
struct CommCount {
  std::string kind;              // all_reduce, all_gather, reduce_scatter,
                                 // all_to_all
  std::vector<std::string> axes; // in mesh order
  int64_t calls = 0;
  int64_t bytes = 0;
};

/// The key of a count in the metrics: "all_reduce dp,tp".
std::string commKey(const CommCount &count);

/// Parses `dp=2,tp=2`: identifiers, each once, sizes >= 1, at most
/// maxMeshAxes axes. Throws UsageError naming `flag`.
Mesh parseMesh(const std::string &text, const std::string &flag = "--mesh");

/// Where one rank's block of a tensor lies in the global tensor: its local
/// shape and, per dimension, the global index of its first element.
struct TensorBlock {
  std::vector<int64_t> globalShape;
  std::vector<int64_t> localShape;
  std::vector<int64_t> start;

  int64_t localElements() const;
  /// The block is the whole tensor (nothing split or every split of size 1).
  bool whole() const { return localShape == globalShape; }
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

/// Calls `run(localFirst, globalFirst, count)` for each maximal run of
/// elements of `block` that is contiguous in both the block (row-major,
/// local shape) and the global tensor, in local order; indices are flat
/// element indices. A block that is the whole tensor is one run.
void forEachRun(
    const TensorBlock &block,
    const std::function<void(int64_t localFirst, int64_t globalFirst,
                             int64_t count)> &run);

} // namespace tessel::run

#endif // TESSEL_RUN_MESH_H
