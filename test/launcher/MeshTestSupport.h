//===- MeshTestSupport.h - Hand-written mesh descriptions -------*- C++ -*-===//
//
// What MeshTest.cpp and ShardedBlocksTest.cpp share: index arithmetic over
// a row-major shape, and model descriptions written by hand (tensors with
// their sharding and ZeRO chunks, on a mesh) parsed as tessel-run parses a
// model's.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUN_TEST_MESHTESTSUPPORT_H
#define TESSEL_RUN_TEST_MESHTESTSUPPORT_H

#include "runtime/launcher/MeshBlocks.h"
#include "runtime/launcher/ModelDescription.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::run::meshtest {

using nlohmann::json;

inline std::vector<int64_t> rowMajorIndex(int64_t flat,
                                          const std::vector<int64_t> &shape) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

inline int64_t flatIndex(const std::vector<int64_t> &index,
                         const std::vector<int64_t> &shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    flat = flat * shape[d] + index[d];
  return flat;
}

/// A tensor of a hand-written description.
struct Spec {
  std::string name, role;
  std::vector<int64_t> shape; // local
  // Per dimension the axes that split it; empty: no "sharding" key.
  std::vector<std::vector<std::string>> sharding = {};
  std::string dtype = "f32";
  // A ZeRO-sharded tensor's "zero" (then `shape` is the stored chunk's and
  // `sharding` is about the block); null: none.
  json zero = nullptr;
};

/// A description's "zero".
inline json zeroJson(const std::vector<std::string> &axes, int64_t dims,
                     const std::vector<int64_t> &block) {
  json zero = json::object();
  zero["axes"] = axes;
  zero["dims"] = dims;
  zero["block"] = block;
  return zero;
}

/// An evaluation-only description (ABI v1 shape) on `mesh` (null: none):
/// the tensors packed 64-byte aligned, then the loss.
inline json describe(const json &mesh, const std::vector<Spec> &specs) {
  json tensors = json::array();
  int64_t offset = 0;
  for (const Spec &s : specs) {
    int64_t size = s.dtype == "i32" || s.dtype == "f32" ? 4 : 8;
    json t = {{"name", s.name},   {"role", s.role},
              {"dtype", s.dtype}, {"shape", s.shape},
              {"offset", offset}, {"bytes", product(s.shape) * size}};
    if (s.role == "param")
      t["init"] = {{"kind", "normal"}, {"args", {1.0, 0.5}}};
    if (s.role == "input")
      t["axes"] = {"batch", "embed"};
    if (s.role == "label") {
      t["axes"] = {"batch"};
      t["limit"] = 7;
    }
    if (!s.sharding.empty())
      t["sharding"] = s.sharding;
    if (!s.zero.is_null())
      t["zero"] = s.zero;
    tensors.push_back(t);
    offset += (product(s.shape) * size + 63) / 64 * 64;
  }
  tensors.push_back({{"name", "loss"},
                     {"role", "loss"},
                     {"dtype", "f32"},
                     {"shape", json::array()},
                     {"offset", offset},
                     {"bytes", 4}});
  json j = {{"abi_version", 1},
            {"entry", "tessel_forward"},
            {"arena_bytes", offset + 64},
            {"tensors", tensors}};
  if (!mesh.is_null())
    j["mesh"] = mesh;
  return j;
}

inline ModelDesc parse(const json &j) {
  return parseModelDescription(j.dump(), "m.so");
}

/// A description's "mesh" (built from vectors: a braced list of two
/// strings would become a JSON object).
inline json meshJson(const std::vector<std::string> &axes,
                     const std::vector<int64_t> &shape) {
  json mesh = json::object();
  mesh["axes"] = axes;
  mesh["shape"] = shape;
  return mesh;
}

/// The 2 x 2 (dp, tp) mesh most tests use.
inline const json mesh2x2 = meshJson({"dp", "tp"}, {2, 2});

} // namespace tessel::run::meshtest

#endif // TESSEL_RUN_TEST_MESHTESTSUPPORT_H
