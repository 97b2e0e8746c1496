//===- Mesh.cpp - Device meshes: parsing, ranks and axis groups -----------===//

#include "runtime/config/Mesh.h"
#include "tessel/runtime.h"

#include <climits>

using namespace tessel;

static_assert(kMaxMeshAxes == TESSEL_MAX_MESH_AXES,
              "the mesh and the runtime disagree on the most axes");

namespace {

bool isIdentifier(std::string_view name) {
  auto alpha = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  };
  if (name.empty() || !alpha(name[0]))
    return false;
  for (char c : name)
    if (!alpha(c) && !(c >= '0' && c <= '9'))
      return false;
  return true;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t'))
    text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t'))
    text.remove_suffix(1);
  return text;
}

/// `text` split at every ',' (empty pieces kept).
std::vector<std::string_view> splitCommas(std::string_view text) {
  std::vector<std::string_view> pieces;
  for (size_t begin = 0;;) {
    size_t end = text.find(',', begin);
    pieces.push_back(text.substr(begin, end - begin));
    if (end == std::string_view::npos)
      return pieces;
    begin = end + 1;
  }
}

/// A decimal integer >= 1 that fits in int64_t.
std::optional<int64_t> parseSize(std::string_view text) {
  if (text.empty())
    return std::nullopt;
  int64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9' || value > (INT64_MAX - (c - '0')) / 10)
      return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value >= 1 ? std::optional<int64_t>(value) : std::nullopt;
}

} // namespace

std::optional<Mesh> Mesh::parse(std::string_view text, std::string &error) {
  Mesh mesh;
  int64_t devices = 1;
  for (std::string_view entry : splitCommas(text)) {
    entry = trim(entry);
    size_t eq = entry.find('=');
    std::string_view name = trim(entry.substr(0, eq));
    std::optional<int64_t> size =
        eq == std::string_view::npos ? std::nullopt
                                     : parseSize(trim(entry.substr(eq + 1)));
    if (!isIdentifier(name) || !size) {
      error = "mesh entry '" + std::string(entry) +
              "' is not name=size (a name and a positive size)";
      return std::nullopt;
    }
    // The runtime and the launcher spell axes in lower case.
    for (char c : name)
      if (c >= 'A' && c <= 'Z') {
        error = "the axis name '" + std::string(name) +
                "' is not [a-z_][a-z0-9_]*";
        return std::nullopt;
      }
    if (mesh.axisIndex(name)) {
      error = "mesh axis '" + std::string(name) + "' is given twice";
      return std::nullopt;
    }
    if (*size > INT32_MAX / devices) {
      error = "more than 2^31 - 1 devices (at the axis '" + std::string(name) +
              "')";
      return std::nullopt;
    }
    devices *= *size;
    mesh.axes.emplace_back(name);
    mesh.shape.push_back(*size);
  }
  if (mesh.axes.size() > kMaxMeshAxes) {
    error = "a mesh has at most " + std::to_string(kMaxMeshAxes) + " axes";
    return std::nullopt;
  }
  return mesh;
}

int64_t Mesh::worldSize() const {
  int64_t n = 1;
  for (int64_t size : shape)
    n *= size;
  return n;
}

std::optional<int> Mesh::axisIndex(std::string_view name) const {
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] == name)
      return int(i);
  return std::nullopt;
}

std::vector<int64_t> Mesh::coordinates(int64_t rank) const {
  std::vector<int64_t> coords(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    coords[i] = rank % shape[i];
    rank /= shape[i];
  }
  return coords;
}

int64_t Mesh::withCoordinate(int64_t rank, int axis,
                             int64_t coordinate) const {
  // Row-major, last axis fastest: the axis's stride.
  int64_t stride = 1;
  for (size_t a = size_t(axis) + 1; a < shape.size(); ++a)
    stride *= shape[a];
  return rank + (coordinate - coordinates(rank)[axis]) * stride;
}

std::string Mesh::toString() const {
  std::string text;
  for (size_t i = 0; i < axes.size(); ++i)
    text += (i ? "," : "") + axes[i] + "=" + std::to_string(shape[i]);
  return text;
}

std::optional<uint32_t>
Mesh::axesMask(const std::vector<std::string> &names,
               std::string &error) const {
  uint32_t mask = 0;
  for (const std::string &name : names) {
    std::optional<int> axis = axisIndex(name);
    if (!axis) {
      error = "mesh " + toString() + " has no axis '" + name + "'";
      return std::nullopt;
    }
    mask |= 1u << *axis;
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

std::optional<std::vector<std::pair<std::string, std::string>>>
tessel::parseRules(std::string_view text, std::string &error) {
  std::vector<std::pair<std::string, std::string>> rules;
  for (std::string_view entry : splitCommas(text)) {
    entry = trim(entry);
    size_t eq = entry.find('=');
    std::string_view logical = trim(entry.substr(0, eq));
    std::string_view axis =
        eq == std::string_view::npos ? "" : trim(entry.substr(eq + 1));
    if (!isIdentifier(logical) || !isIdentifier(axis)) {
      error = "'" + std::string(entry) +
              "': expected logical=mesh, e.g. batch=dp";
      return std::nullopt;
    }
    rules.emplace_back(logical, axis);
  }
  return rules;
}
