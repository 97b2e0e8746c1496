//===- ShardedCheckpoint.cpp - A checkpoint as one file per rank ----------===//
//
// index.json (format version 1):
//
//   {"format": "tessel-sharded-checkpoint", "version": 1,
//    "run_id": "<32 hex digits, also in every shard's __metadata__>",
//    "step": 3,                       // a training run's tessel.step
//    "metadata": {"seed": "0"},       // the rest of __metadata__
//    "source": "...", "precision": "f32",
//    "mesh": {"axes": ["dp", "tp"], "shape": [2, 2]},   // none: one device
//    "files": [{"rank": 0, "file": "rank-0-of-4.safetensors",
//               "coordinates": [0, 0]}, ...],
//    "tensors": [{"name": "fc.weight", "role": "param", "dtype": "f32",
//                 "global_shape": [8, 5],
//                 "pieces": [{"ranks": [0, 2], "key": "fc.weight",
//                             "shape": [4, 5], "sharding": [["tp"], []],
//                             "layers": [0, 4], "zero": {...},
//                             "stage": 1}, ...]}, ...]}
//
// A piece is what each of its ranks' files holds under `key`, laid out as
// a description's tensor of that shape, sharding, layers and zero says
// (docs/model-abi.md) at the file's coordinates.
//
//===----------------------------------------------------------------------===//

#include "runtime/launcher/ShardedCheckpoint.h"
#include "runtime/launcher/Error.h"
#include "runtime/launcher/OutputFiles.h"
#include "runtime/launcher/Pipeline.h"
#include "runtime/launcher/Ranks.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace tessel::run;
using nlohmann::json;
using nlohmann::ordered_json;

namespace {

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// `path` without trailing slashes (but "/" stays): the temporary
/// directory goes beside DIR, never inside it.
std::string withoutTrailingSlash(std::string path) {
  while (path.size() > 1 && path.back() == '/')
    path.pop_back();
  return path;
}

/// A piece's layout in description terms (everything but the name, role,
/// dtype and offsets): what blockOf needs to place it.
ordered_json layoutJson(const TensorDesc &t) {
  ordered_json j = ordered_json::object();
  j["shape"] = t.shape;
  if (!t.sharding.empty())
    j["sharding"] = t.sharding;
  if (t.layers)
    j["layers"] = std::vector<int64_t>{t.layers->offset, t.layers->total};
  if (t.zero) {
    ordered_json zero = ordered_json::object();
    zero["axes"] = t.zero->axes;
    zero["dims"] = t.zero->dims;
    zero["block"] = t.zero->block;
    j["zero"] = zero;
  }
  return j;
}

ordered_json meshJson(const Mesh &mesh) {
  ordered_json j = ordered_json::object();
  j["axes"] = mesh.axes;
  j["shape"] = mesh.shape;
  return j;
}

/// 128 random bits as 32 hex digits.
std::string randomRunId() {
  std::random_device device;
  std::string id;
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < 4; ++i) {
    uint32_t word = device();
    for (int k = 0; k < 8; ++k)
      id += digits[(word >> (4 * k)) & 15];
  }
  return id;
}

/// Rank 0's `words` (each >= 0) on every rank of `axes`: an all-reduce MAX
/// to which the others bring zeros. Every rank waits in it for rank 0, so
/// it is also a barrier.
std::vector<int32_t> shareFromRankZero(tessel_ctx *ctx, uint32_t axes,
                                       std::vector<int32_t> words,
                                       const std::string &when) {
  int64_t bytes = int64_t(words.size() * sizeof(int32_t));
  void *buffer = tessel_alloc(ctx, std::max<int64_t>(bytes, 64));
  if (!buffer)
    throw RunError(when + ": cannot allocate " + std::to_string(bytes) +
                   " bytes");
  tessel_copy_to_device(ctx, buffer, words.data(), bytes);
  tessel_all_reduce(ctx, axes, TESSEL_I32, buffer, buffer,
                    int64_t(words.size()), TESSEL_REDUCE_MAX);
  tessel_copy_to_host(ctx, words.data(), buffer, bytes);
  tessel_synchronize(ctx);
  tessel_free(ctx, buffer);
  checkKernelError(ctx, when);
  return words;
}

} // namespace

std::string tessel::run::shardFileName(int64_t rank, int64_t world) {
  return "rank-" + std::to_string(rank) + "-of-" + std::to_string(world) +
         ".safetensors";
}

std::vector<ShardPiece> tessel::run::shardPieces(const ModelDesc &model,
                                                 int32_t rank,
                                                 bool withStates) {
  std::vector<ShardPiece> pieces;
  if (!model.pipeline) {
    for (const TensorDesc *t : checkpointTensors(model, withStates))
      pieces.push_back({t->name, &model, t, -1});
    return pieces;
  }
  const PipelineDesc &pipe = *model.pipeline;
  int64_t ppRank = model.mesh->coordinates(rank).at(pipe.axis);
  for (int s : pipe.stagesOfRank(ppRank)) {
    const ModelDesc &stage = pipe.stages[s];
    for (const TensorDesc *t : checkpointTensors(stage, withStates))
      pieces.push_back(
          {"stage" + std::to_string(s) + "/" + t->name, &stage, t, s});
  }
  return pieces;
}

std::string tessel::run::shardIndexText(
    const ModelDesc &model, bool withStates, const std::string &runId,
    const std::map<std::string, std::string> &metadata) {
  int64_t world = model.worldSize();
  ordered_json index = ordered_json::object();
  index["format"] = kShardedCheckpointFormat;
  index["version"] = kShardedCheckpointVersion;
  index["run_id"] = runId;
  ordered_json rest = ordered_json::object();
  for (auto &[key, value] : metadata) {
    if (key == "tessel.step")
      index["step"] = std::stoll(value);
    else
      rest[key] = value;
  }
  index["metadata"] = rest;
  index["source"] = model.source;
  index["precision"] = model.precision;
  if (model.mesh)
    index["mesh"] = meshJson(*model.mesh);
  ordered_json files = ordered_json::array();
  // Per tensor, its distinct pieces (layout and key, compared without
  // their rank lists) with the ranks holding each, in rank order.
  std::map<std::string, std::vector<ordered_json>> pieces, layouts;
  for (int64_t r = 0; r < world; ++r) {
    ordered_json file = ordered_json::object();
    file["rank"] = r;
    file["file"] = shardFileName(r, world);
    file["coordinates"] =
        model.mesh ? model.mesh->coordinates(r) : std::vector<int64_t>{};
    files.push_back(file);
    for (const ShardPiece &p : shardPieces(model, int32_t(r), withStates)) {
      ordered_json layout = ordered_json::object();
      layout["key"] = p.key;
      ordered_json fields = layoutJson(*p.tensor);
      for (auto &[field, value] : fields.items())
        layout[field] = value;
      if (p.stage >= 0)
        layout["stage"] = p.stage;
      std::vector<ordered_json> &seen = layouts[p.tensor->name];
      std::vector<ordered_json> &list = pieces[p.tensor->name];
      size_t i =
          size_t(std::find(seen.begin(), seen.end(), layout) - seen.begin());
      if (i == seen.size()) {
        seen.push_back(layout);
        ordered_json piece = ordered_json::object();
        piece["ranks"] = ordered_json::array();
        for (auto &[field, value] : layout.items())
          piece[field] = value;
        list.push_back(piece);
      }
      list[i]["ranks"].push_back(r);
    }
  }
  ordered_json tensors = ordered_json::array();
  for (const TensorDesc *t : checkpointTensors(model, withStates)) {
    ordered_json entry = ordered_json::object();
    entry["name"] = t->name;
    entry["role"] = t->role;
    entry["dtype"] = t->dtype;
    entry["global_shape"] = t->globalShape;
    entry["pieces"] = pieces[t->name];
    tensors.push_back(entry);
  }
  // One line per field, file and tensor: readable, and small for a large
  // mesh (a tensor's ranks share a piece).
  std::string text = "{\n";
  for (auto &[key, value] : index.items())
    text += " " + json(key).dump() + ": " + value.dump() + ",\n";
  text += " \"files\": [\n";
  for (size_t i = 0; i < files.size(); ++i)
    text += "  " + files[i].dump() + (i + 1 < files.size() ? ",\n" : "\n");
  text += " ],\n \"tensors\": [\n";
  for (size_t i = 0; i < tensors.size(); ++i)
    text += "  " + tensors[i].dump() + (i + 1 < tensors.size() ? ",\n" : "\n");
  return text + " ]\n}\n";
}

void tessel::run::saveShardedCheckpoint(
    const std::string &path, const ModelDesc &model, int32_t rank,
    tessel_ctx *ctx, const std::function<const void *(int)> &arenaOf,
    const std::map<std::string, std::string> &metadata, bool withStates) {
  const std::string dir = withoutTrailingSlash(path);
  int64_t world = model.worldSize();
  uint32_t allAxes = model.mesh ? (1u << model.mesh->axes.size()) - 1 : 0;
  // Rank 0's temporary directory (its pid and mkdtemp's six characters)
  // and the run id (eight 16-bit words), handed to every rank.
  std::vector<int32_t> words(1 + 6 + 8, 0);
  std::string tmp;
  if (rank == 0) {
    tmp = createTemporaryDirectory(dir, "--save-sharded");
    words[0] = int32_t(::getpid());
    for (int i = 0; i < 6; ++i)
      words[1 + i] = static_cast<unsigned char>(tmp[tmp.size() - 6 + i]);
    std::string id = randomRunId();
    for (int i = 0; i < 8; ++i)
      words[7 + i] = int32_t(std::stoul(id.substr(4 * i, 4), nullptr, 16));
  }
  try {
    if (allAxes)
      words = shareFromRankZero(ctx, allAxes, words,
                                "starting the sharded checkpoint");
    std::string suffix;
    for (int i = 0; i < 6; ++i)
      suffix += char(words[1 + i]);
    tmp = dir + ".tmp." + std::to_string(words[0]) + "." + suffix;
    std::string runId;
    for (int i = 0; i < 8; ++i) {
      char hex[5];
      std::snprintf(hex, sizeof(hex), "%04x", unsigned(words[7 + i]));
      runId += hex;
    }

    std::vector<ShardPiece> pieces = shardPieces(model, rank, withStates);
    std::vector<SafetensorsEntry> entries;
    for (const ShardPiece &p : pieces)
      entries.push_back({p.key, p.tensor->dtypeCode, p.tensor->shape});
    std::map<std::string, std::string> shardMetadata = metadata;
    shardMetadata["tessel.run_id"] = runId;
    shardMetadata["tessel.rank"] = std::to_string(rank);
    shardMetadata["tessel.world"] = std::to_string(world);
    writeFileDurably(
        tmp + "/" + shardFileName(rank, world), "sharded checkpoint",
        [&](std::FILE *f, const std::string &file) {
          writeSafetensors(f, file, entries, shardMetadata,
                           [&](size_t i, std::vector<char> &host) {
                             const TensorDesc &t = *pieces[i].tensor;
                             host.resize(size_t(t.bytes));
                             tessel_copy_to_host(ctx, host.data(),
                                                 static_cast<const char *>(
                                                     arenaOf(pieces[i].stage)) +
                                                     t.offset,
                                                 t.bytes);
                           });
        });
    if (rank == 0) {
      std::string text = shardIndexText(model, withStates, runId, metadata);
      writeFileDurably(tmp + "/index.json", "sharded checkpoint",
                       [&](std::FILE *f, const std::string &file) {
                         if (std::fwrite(text.data(), 1, text.size(), f) !=
                             text.size())
                           throw RunError("cannot write sharded checkpoint '" +
                                          file + "': " + std::strerror(errno));
                       });
    }
    // Every shard is on disk before the directory takes DIR's name.
    if (allAxes)
      shareFromRankZero(ctx, allAxes, {0}, "finishing the sharded checkpoint");
    if (rank == 0) {
      syncDirectoryOf(tmp);
      replaceDirectory(tmp, dir, "--save-sharded");
    }
  } catch (...) {
    if (rank == 0) {
      std::error_code ignored;
      std::filesystem::remove_all(tmp, ignored);
    }
    throw;
  }
}

//===--- Reading ----------------------------------------------------------===//

struct ShardedCheckpoint::Piece {
  int64_t rank = 0;
  size_t tensor = 0; // in the rank's layout
  TensorBlock block;
};

struct ShardedCheckpoint::Tensor {
  std::string name, role;
  int32_t dtypeCode = 0;
  std::vector<int64_t> globalShape;
  /// One piece per distinct block (replicas are read once).
  std::vector<Piece> pieces;
};

struct ShardedCheckpoint::Shard {
  std::string path;
  std::vector<int64_t> coordinates;
  std::unique_ptr<SafetensorsFile> file;
  ModelDesc layout;
  std::set<std::string> listed; // the keys the index lists for this rank
};

namespace {

/// Where a block lies, as a key: two pieces with equal keys hold the same
/// elements.
std::vector<int64_t> blockIdentity(const TensorBlock &b) {
  std::vector<int64_t> key = b.start;
  key.insert(key.end(), b.localShape.begin(), b.localShape.end());
  for (int64_t v : {b.zeroDims, b.zeroFirst, b.zeroChunk, b.zeroInner})
    key.push_back(v);
  return key;
}

} // namespace

ShardedCheckpoint::ShardedCheckpoint(const std::string &path) {
  std::string dir = withoutTrailingSlash(path);
  index = dir + "/index.json";
  auto fail = [&](const std::string &problem) {
    throw RunError("checkpoint '" + index + "': " + problem);
  };
  struct stat st;
  if (::stat(index.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    throw RunError("checkpoint '" + dir +
                   "' is a directory without index.json (not a sharded "
                   "checkpoint of --save-sharded)");
  std::ifstream in(index, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in)
    fail("cannot read it");
  try {
    json j = json::parse(text.str());
    if (!j.is_object() || j.value("format", "") != kShardedCheckpointFormat)
      fail("not a sharded checkpoint index (\"format\" is not \"" +
           std::string(kShardedCheckpointFormat) + "\")");
    int64_t version = j.at("version").get<int64_t>();
    if (version != kShardedCheckpointVersion)
      fail("format version " + std::to_string(version) +
           ", this tessel-run reads version " +
           std::to_string(kShardedCheckpointVersion));
    std::string runId = j.at("run_id").get<std::string>();
    if (runId.empty())
      fail("empty run_id");
    if (j.contains("metadata"))
      for (auto &[key, value] : j.at("metadata").items())
        metadata_[key] = value.get<std::string>();
    if (j.contains("step")) {
      int64_t step = j.at("step").get<int64_t>();
      if (step < 0)
        fail("negative step " + std::to_string(step));
      metadata_["tessel.step"] = std::to_string(step);
    }
    std::optional<Mesh> mesh;
    if (j.contains("mesh")) {
      Mesh m;
      m.axes = j.at("mesh").at("axes").get<std::vector<std::string>>();
      m.shape = j.at("mesh").at("shape").get<std::vector<int64_t>>();
      if (m.axes.size() != m.shape.size() || m.axes.empty())
        fail("\"mesh\" needs one size per axis");
      try {
        mesh = parseMesh(m.toString(), "\"mesh\"");
      } catch (const UsageError &e) {
        fail(e.what());
      }
    }
    int64_t world = mesh ? mesh->worldSize() : 1;

    // The files: one per rank, each opened and its header checked.
    const json &files = j.at("files");
    if (!files.is_array() || int64_t(files.size()) != world)
      fail("\"files\" must list " + std::to_string(world) +
           " shard files, one per rank of " +
           (mesh ? "mesh " + mesh->toString() : std::string("one device")));
    shards.resize(size_t(world));
    for (const json &f : files) {
      int64_t r = f.at("rank").get<int64_t>();
      if (r < 0 || r >= world || shards[size_t(r)])
        fail("\"files\" lists rank " + std::to_string(r) +
             " twice or outside [0, " + std::to_string(world) + ")");
      std::string name = f.at("file").get<std::string>();
      if (name != shardFileName(r, world))
        fail("rank " + std::to_string(r) + "'s file is '" + name +
             "', expected '" + shardFileName(r, world) + "'");
      auto shard = std::make_unique<Shard>();
      shard->coordinates = f.at("coordinates").get<std::vector<int64_t>>();
      std::vector<int64_t> expected =
          mesh ? mesh->coordinates(r) : std::vector<int64_t>{};
      if (shard->coordinates != expected)
        fail("rank " + std::to_string(r) + "'s coordinates " +
             shapeText(shard->coordinates) + " are not " + shapeText(expected) +
             " on its mesh");
      shard->path = dir + "/" + name;
      if (::stat(shard->path.c_str(), &st) != 0)
        throw RunError("checkpoint '" + shard->path + "' (rank " +
                       std::to_string(r) + "'s shard, listed in '" + index +
                       "'): " + std::strerror(errno));
      shard->file = std::make_unique<SafetensorsFile>(shard->path);
      const std::map<std::string, std::string> &meta = shard->file->metadata();
      auto id = meta.find("tessel.run_id");
      if (id == meta.end() || id->second != runId)
        throw RunError("checkpoint '" + shard->path + "': run id '" +
                       (id == meta.end() ? std::string() : id->second) +
                       "' is not index.json's '" + runId +
                       "' (a shard of another save)");
      auto rankOf = meta.find("tessel.rank");
      if (rankOf == meta.end() || rankOf->second != std::to_string(r))
        throw RunError("checkpoint '" + shard->path + "': it is not rank " +
                       std::to_string(r) + "'s shard (its tessel.rank is '" +
                       (rankOf == meta.end() ? std::string() : rankOf->second) +
                       "')");
      shard->layout.abiVersion = 3;
      shard->layout.mesh = mesh;
      uint64_t dataBytes = 0;
      for (auto &[key, entry] : shard->file->entries())
        dataBytes = std::max(dataBytes, entry.end);
      shard->layout.arenaBytes = int64_t(dataBytes);
      shards[size_t(r)] = std::move(shard);
    }

    // The tensors and their pieces, each checked against its shard.
    std::set<std::string> names;
    std::vector<std::vector<std::pair<int64_t, size_t>>> holders;
    for (const json &tj : j.at("tensors")) {
      Tensor t;
      t.name = tj.at("name").get<std::string>();
      if (!names.insert(t.name).second)
        fail("tensor '" + t.name + "' is listed twice");
      t.role = tj.at("role").get<std::string>();
      if (t.role != "param" && t.role != "state")
        fail("tensor '" + t.name + "' has role '" + t.role +
             "' (expected param or state)");
      std::string dtype = tj.at("dtype").get<std::string>();
      t.globalShape = tj.at("global_shape").get<std::vector<int64_t>>();
      const json &pieces = tj.at("pieces");
      if (!pieces.is_array() || pieces.empty())
        fail("tensor '" + t.name + "' has no pieces");
      std::vector<std::pair<int64_t, size_t>> held;
      for (const json &pj : pieces) {
        std::string key = pj.at("key").get<std::string>();
        std::vector<int64_t> shape = pj.at("shape").get<std::vector<int64_t>>();
        for (const json &rj : pj.at("ranks")) {
          int64_t r = rj.get<int64_t>();
          if (r < 0 || r >= world)
            fail("tensor '" + t.name + "': a piece of rank " +
                 std::to_string(r) + ", outside [0, " + std::to_string(world) +
                 ")");
          Shard &shard = *shards[size_t(r)];
          if (!shard.listed.insert(key).second)
            fail("rank " + std::to_string(r) + "'s key '" + key +
                 "' is listed twice");
          auto entry = shard.file->entries().find(key);
          auto failShard = [&](const std::string &problem) {
            throw RunError("checkpoint '" + shard.path + "': " + problem);
          };
          if (entry == shard.file->entries().end())
            failShard("no tensor '" + key + "', which index.json lists");
          const SafetensorsFile::Entry &e = entry->second;
          int32_t code = dtypeCodeOf(dtype);
          if (code < 0)
            fail("tensor '" + t.name + "' has unknown dtype '" + dtype + "'");
          if (e.shape != shape)
            failShard("tensor '" + key + "' has shape " + shapeText(e.shape) +
                      ", index.json says " + shapeText(shape));
          if (e.dtype != safetensorsDtype(code))
            failShard("tensor '" + key + "' has dtype " + e.dtype +
                      ", index.json says " + dtype);
          int64_t bytes = product(shape) * tessel_dtype_size(code);
          if (int64_t(e.end - e.begin) != bytes)
            failShard("tensor '" + key + "' holds " +
                      std::to_string(e.end - e.begin) +
                      " bytes, its shape needs " + std::to_string(bytes));
          // The piece as a description's tensor: the same checks place it.
          json desc = pj;
          desc.erase("ranks");
          desc.erase("key");
          desc.erase("stage");
          desc["name"] = key;
          desc["role"] = t.role;
          desc["dtype"] = dtype;
          desc["offset"] = e.begin;
          desc["bytes"] = bytes;
          desc["global_shape"] = t.globalShape;
          shard.layout.tensors.push_back(parseTensorDescription(
              desc.dump(), shard.layout,
              "checkpoint '" + index + "': rank " + std::to_string(r) + "'s "));
          held.push_back({r, shard.layout.tensors.size() - 1});
        }
      }
      t.dtypeCode = shards[size_t(held.front().first)]
                        ->layout.tensors[held.front().second]
                        .dtypeCode;
      tensors.push_back(std::move(t));
      holders.push_back(std::move(held));
    }
    for (const auto &shard : shards)
      for (auto &[key, entry] : shard->file->entries())
        if (!shard->listed.count(key))
          throw RunError("checkpoint '" + shard->path + "': tensor '" + key +
                         "' is not in index.json");

    // The distinct pieces of each tensor must cover it exactly once.
    for (size_t i = 0; i < tensors.size(); ++i) {
      Tensor &t = tensors[i];
      std::set<std::vector<int64_t>> seen;
      int64_t elements = product(t.globalShape);
      std::vector<bool> covered(size_t(elements), false);
      // Not a structured binding: C++17 lambdas cannot capture one.
      for (const auto &holder : holders[i]) {
        auto r = std::get<0>(holder);
        auto k = std::get<1>(holder);
        const Shard &shard = *shards[size_t(r)];
        Piece piece{
            r, k,
            blockOf(shard.layout, shard.layout.tensors[k], shard.coordinates)};
        if (!seen.insert(blockIdentity(piece.block)).second)
          continue;
        forEachRun(piece.block, [&](int64_t, int64_t global, int64_t count) {
          for (int64_t g = global; g < global + count; ++g) {
            if (covered[size_t(g)])
              fail("tensor '" + t.name + "': rank " + std::to_string(r) +
                   "'s piece overlaps another at element " + std::to_string(g));
            covered[size_t(g)] = true;
          }
        });
        t.pieces.push_back(std::move(piece));
      }
      for (int64_t g = 0; g < elements; ++g)
        if (!covered[size_t(g)])
          fail("tensor '" + t.name + "': no piece holds element " +
               std::to_string(g) + " of " + std::to_string(elements));
    }
  } catch (const json::exception &e) {
    fail(std::string("corrupt index: ") + e.what());
  }
}

ShardedCheckpoint::~ShardedCheckpoint() = default;

std::map<std::string, SafetensorsFile::Entry>
ShardedCheckpoint::globalEntries() const {
  std::map<std::string, SafetensorsFile::Entry> out;
  uint64_t offset = 0;
  for (const Tensor &t : tensors) {
    SafetensorsFile::Entry &e = out[t.name];
    e.dtype = safetensorsDtype(t.dtypeCode);
    e.shape = t.globalShape;
    e.begin = offset;
    offset += uint64_t(product(t.globalShape) * tessel_dtype_size(t.dtypeCode));
    e.end = offset;
  }
  return out;
}

void ShardedCheckpoint::assemble(const std::string &name, char *out) const {
  for (const Tensor &t : tensors) {
    if (t.name != name)
      continue;
    int64_t size = tessel_dtype_size(t.dtypeCode);
    for (const Piece &piece : t.pieces) {
      const Shard &shard = *shards[size_t(piece.rank)];
      const char *src =
          shard.file->data() + shard.layout.tensors[piece.tensor].offset;
      forEachRun(piece.block,
                 [&](int64_t local, int64_t global, int64_t count) {
                   std::memcpy(out + global * size, src + local * size,
                               size_t(count * size));
                 });
    }
    return;
  }
  throw RunError("checkpoint '" + index + "' has no tensor '" + name + "'");
}

const ModelDesc &ShardedCheckpoint::layoutOfRank(int64_t rank) const {
  return shards.at(size_t(rank))->layout;
}

const std::vector<int64_t> &
ShardedCheckpoint::coordinatesOfRank(int64_t rank) const {
  return shards.at(size_t(rank))->coordinates;
}
