//===- Mesh.h - Device meshes: named axes, sizes, ranks and axis groups ---===//
//
// A mesh is a list of named axes with sizes (`dp=2,tp=2`); rank r's
// coordinates are r in row-major order, the last axis fastest. A group of
// axes is also a bit mask (bit i = axis i), as the runtime takes it. One
// parser and one set of rules for the compiler (the passes' shard.grid) and
// the launcher (--mesh, the model description); no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_CONFIG_MESH_H
#define TESSEL_CONFIG_MESH_H

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessel {

/// The most axes a mesh may have (the runtime's TESSEL_MAX_MESH_AXES).
inline constexpr size_t kMaxMeshAxes = 8;

struct Mesh {
  std::vector<std::string> axes; // names, outermost first
  std::vector<int64_t> shape;    // sizes, one per axis

  /// Parses "dp=2,tp=2": names [a-z_][a-z0-9_]*, each once, sizes >= 1, at
  /// most kMaxMeshAxes axes and 2^31 - 1 devices (what the runtime takes).
  /// On failure returns nullopt and sets `error` to the problem.
  static std::optional<Mesh> parse(std::string_view text, std::string &error);

  /// The number of ranks: the product of the sizes.
  int64_t worldSize() const;
  /// The index of axis `name`.
  std::optional<int> axisIndex(std::string_view name) const;
  /// Rank `rank`'s coordinate on every axis (row-major, last axis fastest).
  std::vector<int64_t> coordinates(int64_t rank) const;
  /// The rank at `rank`'s coordinates but `coordinate` on `axis` (its peer
  /// along that axis, e.g. another pipeline stage's).
  int64_t withCoordinate(int64_t rank, int axis, int64_t coordinate) const;
  /// `dp=2,tp=2`.
  std::string toString() const;

  /// The product of the sizes of `axes` (indices): the ranks of a group.
  template <typename Range> int64_t groupSize(const Range &axisIndices) const {
    int64_t size = 1;
    for (auto axis : axisIndices)
      size *= shape[axis];
    return size;
  }
  /// "dp,tp": the names of `axes` (indices), comma-separated.
  template <typename Range>
  std::string axesText(const Range &axisIndices) const {
    std::string text;
    for (auto axis : axisIndices)
      text += (text.empty() ? "" : ",") + axes[axis];
    return text;
  }
  /// The runtime's group mask of `names`, or nullopt (with the unknown name
  /// in `error`).
  std::optional<uint32_t> axesMask(const std::vector<std::string> &names,
                                   std::string &error) const;
  /// The axis names of `mask`, in mesh order.
  std::vector<std::string> axesOf(uint32_t mask) const;

  bool operator==(const Mesh &other) const {
    return axes == other.axes && shape == other.shape;
  }
  bool operator!=(const Mesh &other) const { return !(*this == other); }
};

/// Logical-axis rules "batch=dp,mlp=tp" as (logical, mesh axis) pairs, in
/// order; on a malformed rule returns nullopt and sets `error` to
/// "'rule': expected logical=mesh, e.g. batch=dp".
std::optional<std::vector<std::pair<std::string, std::string>>>
parseRules(std::string_view text, std::string &error);

} // namespace tessel

#endif // TESSEL_CONFIG_MESH_H
