//===- Mesh.cpp - Device meshes and where a rank's block of a tensor lies -===//

#include "Mesh.h"
#include "Error.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>

using namespace tessel::run;

int64_t Mesh::worldSize() const { return product(shape); }

int Mesh::axisIndex(const std::string &name) const {
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] == name)
      return int(i);
  return -1;
}

std::vector<int64_t> Mesh::coordinates(int64_t rank) const {
  std::vector<int64_t> coords(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    coords[i] = rank % shape[i];
    rank /= shape[i];
  }
  return coords;
}

std::string Mesh::toString() const {
  std::string text;
  for (size_t i = 0; i < axes.size(); ++i)
    text += (i ? "," : "") + axes[i] + "=" + std::to_string(shape[i]);
  return text;
}

uint32_t Mesh::axesMask(const std::vector<std::string> &names) const {
  uint32_t mask = 0;
  for (const std::string &name : names) {
    int i = axisIndex(name);
    if (i < 0)
      throw RunError("mesh " + toString() + " has no axis '" + name + "'");
    mask |= 1u << i;
  }
  return mask;
}

std::vector<std::string> Mesh::axesOf(uint32_t mask) const {
  std::vector<std::string> names;
  for (size_t i = 0; i < axes.size(); ++i)
    if (mask & (1u << i))
      names.push_back(axes[i]);
  return names;
}

std::string tessel::run::commKey(const CommCount &count) {
  std::string text = count.kind + " ";
  for (size_t i = 0; i < count.axes.size(); ++i)
    text += (i ? "," : "") + count.axes[i];
  return text;
}

Mesh tessel::run::parseMesh(const std::string &text, const std::string &flag) {
  auto fail = [&](const std::string &problem) {
    throw UsageError("bad value '" + text + "' for " + flag + ": " + problem +
                     " (expected AXIS=SIZE,..., e.g. dp=2,tp=2)");
  };
  Mesh mesh;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos)
      end = text.size();
    std::string item = text.substr(begin, end - begin);
    size_t eq = item.find('=');
    if (eq == std::string::npos)
      fail("'" + item + "' has no '='");
    std::string name = item.substr(0, eq), size = item.substr(eq + 1);
    bool identifier =
        !name.empty() &&
        (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_');
    for (char c : name)
      identifier &= std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    if (!identifier)
      fail("axis name '" + name + "' is not an identifier");
    if (mesh.axisIndex(name) >= 0)
      fail("axis '" + name + "' appears twice");
    errno = 0;
    char *stop = nullptr;
    long long value = std::strtoll(size.c_str(), &stop, 10);
    if (size.empty() || *stop != '\0' || errno == ERANGE || value < 1)
      fail("size '" + size + "' of axis '" + name + "' is not an integer >= 1");
    mesh.axes.push_back(name);
    mesh.shape.push_back(value);
    begin = end + 1;
  }
  if (mesh.axes.size() > maxMeshAxes)
    fail("more than " + std::to_string(maxMeshAxes) + " axes");
  return mesh;
}

int64_t TensorBlock::localElements() const { return product(localShape); }

int64_t tessel::run::blockIndex(const std::vector<std::string> &axes,
                                const Mesh &mesh,
                                const std::vector<int64_t> &coordinates) {
  int64_t index = 0;
  for (const std::string &name : axes) {
    int a = mesh.axisIndex(name);
    if (a < 0)
      throw RunError("mesh " + mesh.toString() + " has no axis '" + name + "'");
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
      int a = mesh.axisIndex(name);
      if (a < 0)
        throw RunError("mesh " + mesh.toString() + " has no axis '" + name +
                       "'");
      blocks *= mesh.shape[a];
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
