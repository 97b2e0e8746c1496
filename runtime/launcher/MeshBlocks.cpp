//===- MeshBlocks.cpp - Where a rank's block of a tensor lies on a mesh --===//

#include "runtime/launcher/MeshBlocks.h"
#include "runtime/launcher/Error.h"

using namespace tessel::run;

int tessel::run::axisOf(const Mesh &mesh, const std::string &name) {
  std::optional<int> axis = mesh.axisIndex(name);
  if (!axis)
    throw RunError("mesh " + mesh.toString() + " has no axis '" + name + "'");
  return *axis;
}

uint32_t tessel::run::axesMaskOf(const Mesh &mesh,
                                 const std::vector<std::string> &names) {
  std::string error;
  std::optional<uint32_t> mask = mesh.axesMask(names, error);
  if (!mask)
    throw RunError(error);
  return *mask;
}

std::string tessel::run::commKey(const CommCount &count) {
  std::string text = count.kind + " ";
  for (size_t i = 0; i < count.axes.size(); ++i)
    text += (i ? "," : "") + count.axes[i];
  return text;
}

Mesh tessel::run::parseMesh(const std::string &text, const std::string &flag) {
  std::string error;
  std::optional<Mesh> mesh = Mesh::parse(text, error);
  if (!mesh)
    throw UsageError("bad value '" + text + "' for " + flag + ": " + error +
                     " (expected AXIS=SIZE,..., e.g. dp=2,tp=2)");
  return *mesh;
}

int64_t TensorBlock::localElements() const { return product(localShape); }

int64_t tessel::run::blockIndex(const std::vector<std::string> &axes,
                                const Mesh &mesh,
                                const std::vector<int64_t> &coordinates) {
  int64_t index = 0;
  for (const std::string &name : axes) {
    int a = axisOf(mesh, name);
    index = index * mesh.shape[a] + coordinates[a];
  }
  return index;
}

TensorBlock
tessel::run::blockOf(const std::vector<int64_t> &localShape,
                     const std::vector<std::vector<std::string>> &sharding,
                     const Mesh &mesh,
                     const std::vector<int64_t> &coordinates) {
  TensorBlock block;
  block.localShape = localShape;
  block.globalShape = localShape;
  block.start.assign(localShape.size(), 0);
  for (size_t d = 0; d < sharding.size() && d < localShape.size(); ++d) {
    int64_t blocks = 1;
    for (const std::string &name : sharding[d]) {
      blocks *= mesh.shape[axisOf(mesh, name)];
    }
    block.globalShape[d] = localShape[d] * blocks;
    block.start[d] = blockIndex(sharding[d], mesh, coordinates) * localShape[d];
  }
  return block;
}

void tessel::run::forEachRun(
    const TensorBlock &block,
    const std::function<void(int64_t, int64_t, int64_t)> &run) {
  size_t rank = block.localShape.size();
  if (block.localElements() == 0)
    return;
  // Dimensions after `split` are whole, so one index of dimensions
  // 0..split-1 selects a run of local[split] · ... · local[rank-1] elements
  // that is contiguous in the global tensor too.
  size_t split = 0;
  for (size_t d = rank; d-- > 0;)
    if (block.localShape[d] != block.globalShape[d]) {
      split = d;
      break;
    }
  std::vector<int64_t> globalStrides = rowMajorStrides(block.globalShape);
  int64_t length = 1;
  for (size_t d = split; d < rank; ++d)
    length *= block.localShape[d];
  int64_t runStart =
      split < rank ? block.start[split] * globalStrides[split] : 0;
  // An odometer over the outer dimensions 0..split-1 of the block.
  std::vector<int64_t> index(split, 0);
  for (int64_t local = 0;; local += length) {
    int64_t global = runStart;
    for (size_t d = 0; d < split; ++d)
      global += (block.start[d] + index[d]) * globalStrides[d];
    run(local, global, length);
    size_t d = split;
    while (d > 0 && ++index[d - 1] == block.localShape[d - 1]) {
      index[d - 1] = 0;
      --d;
    }
    if (d == 0)
      return;
  }
}
