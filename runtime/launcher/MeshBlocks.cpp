//===- MeshBlocks.cpp - Where a rank's block of a tensor lies on a mesh --===//

#include "runtime/launcher/MeshBlocks.h"
#include "runtime/launcher/Error.h"

#include <algorithm>

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

std::vector<int64_t> TensorBlock::storedShape() const {
  if (!zeroSharded())
    return localShape;
  std::vector<int64_t> shape(localShape.begin(), localShape.begin() + zeroDims);
  shape.push_back(zeroChunk);
  return shape;
}

int64_t TensorBlock::blockElements() const { return product(localShape); }

int64_t TensorBlock::localElements() const {
  if (!zeroSharded())
    return blockElements();
  int64_t rows = product(
      std::vector<int64_t>(localShape.begin(), localShape.begin() + zeroDims));
  int64_t held = std::max<int64_t>(
      0, std::min(zeroFirst + zeroChunk, zeroInner) - zeroFirst);
  return rows * held;
}

bool TensorBlock::whole() const {
  return localShape == globalShape &&
         (!zeroSharded() || (zeroFirst == 0 && zeroChunk >= zeroInner));
}

int64_t tessel::run::groupSizeOf(const std::vector<std::string> &axes,
                                 const Mesh &mesh) {
  int64_t size = 1;
  for (const std::string &name : axes)
    size *= mesh.shape[axisOf(mesh, name)];
  return size;
}

void tessel::run::setZeroChunk(TensorBlock &block, int64_t dims, int64_t chunk,
                               int64_t groups) {
  block.zeroDims = dims;
  block.zeroInner = product(std::vector<int64_t>(
      block.localShape.begin() + dims, block.localShape.end()));
  block.zeroChunk = (block.zeroInner + groups - 1) / groups;
  block.zeroFirst = chunk * block.zeroChunk;
}

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

namespace {

using RunFn = std::function<void(int64_t, int64_t, int64_t)>;

/// forEachRun of the whole block (local = flat index in the block).
void forEachBlockRun(const TensorBlock &block, const RunFn &run) {
  size_t rank = block.localShape.size();
  if (block.blockElements() == 0)
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

} // namespace

void tessel::run::forEachRun(const TensorBlock &block, const RunFn &run) {
  if (!block.zeroSharded()) {
    forEachBlockRun(block, run);
    return;
  }
  int64_t inner = block.zeroInner, chunk = block.zeroChunk;
  // The chunk's elements of each prefix row: [lo, hi) of the row's flat
  // elements, stored at [row · chunk, row · chunk + hi - lo).
  int64_t lo = std::min(block.zeroFirst, inner);
  int64_t hi = std::min(block.zeroFirst + chunk, inner);
  if (hi <= lo)
    return;
  // Pieces of consecutive rows that continue each other in storage and in
  // the global tensor (a chunk that is whole rows) merge into one run.
  int64_t pendingLocal = 0, pendingGlobal = 0, pendingCount = 0;
  auto emit = [&](int64_t local, int64_t global, int64_t count) {
    if (pendingCount && local == pendingLocal + pendingCount &&
        global == pendingGlobal + pendingCount) {
      pendingCount += count;
      return;
    }
    if (pendingCount)
      run(pendingLocal, pendingGlobal, pendingCount);
    pendingLocal = local;
    pendingGlobal = global;
    pendingCount = count;
  };
  forEachBlockRun(block, [&](int64_t first, int64_t global, int64_t count) {
    // Block elements [first, first + count), row by row.
    for (int64_t at = first, end = first + count; at < end;) {
      int64_t row = at / inner, inRow = at - row * inner;
      int64_t rowEnd = std::min(end, (row + 1) * inner);
      int64_t from = std::max(inRow, lo),
              to = std::min(rowEnd - row * inner, hi);
      if (from < to)
        emit(row * chunk + (from - lo), global + (row * inner + from - first),
             to - from);
      at = rowEnd;
    }
  });
  if (pendingCount)
    run(pendingLocal, pendingGlobal, pendingCount);
}
