//===- MeshTest.cpp - Meshes, chunks, sharded descriptions, flags ---------===//

#include "runtime/launcher/MeshBlocks.h"
#include "runtime/launcher/Args.h"
#include "runtime/launcher/Arena.h"
#include "runtime/launcher/Compile.h"
#include "runtime/launcher/Distributed.h"
#include "runtime/launcher/Prefetch.h"
#include "runtime/launcher/Error.h"
#include "test/launcher/LibraryTestSupport.h"
#include "test/launcher/MeshTestSupport.h"
#include "runtime/launcher/ModelDescription.h"
#include "runtime/launcher/Ranks.h"
#include "runtime/launcher/Safetensors.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <mutex>
#include <numeric>
#include <thread>

using namespace tessel::run;
using namespace tessel::run::test;
using namespace tessel::run::meshtest;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

json collectiveJson(const std::string &kind,
                    const std::vector<std::string> &axes, int64_t calls,
                    int64_t bytes) {
  json c = json::object();
  c["kind"] = kind;
  c["axes"] = axes;
  c["calls"] = calls;
  c["bytes"] = bytes;
  return c;
}

json shardingJson(const std::vector<std::vector<std::string>> &sharding) {
  return json(sharding);
}

//===--- Meshes -----------------------------------------------------------===//

/// That every global element was covered once per replica: by the ranks
/// that hold the same block, `pieces` blocks (or chunks) per split.
void expectEachElementOncePerReplica(
    const std::vector<int> &covered, const Mesh &mesh,
    const std::vector<std::vector<std::string>> &sharding, int64_t pieces) {
  int64_t blocks = pieces;
  for (const std::vector<std::string> &axes : sharding)
    for (const std::string &axis : axes)
      blocks *= mesh.shape[axisOf(mesh, axis)];
  for (size_t g = 0; g < covered.size(); ++g)
    EXPECT_EQ(covered[g], mesh.worldSize() / blocks) << "global element " << g;
}

TEST(Mesh, ParsesAxesInOrder) {
  Mesh mesh = parseMesh("dp=2,tp=4");
  EXPECT_EQ(mesh.axes, (std::vector<std::string>{"dp", "tp"}));
  EXPECT_EQ(mesh.shape, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(mesh.worldSize(), 8);
  EXPECT_EQ(mesh.toString(), "dp=2,tp=4");
  EXPECT_EQ(mesh.axisIndex("tp"), 1);
  EXPECT_EQ(mesh.axisIndex("pp"), std::nullopt);
  EXPECT_EQ(axesMaskOf(mesh, {"tp"}), 2u);
  EXPECT_EQ(axesMaskOf(mesh, {"tp", "dp"}), 3u);
  EXPECT_THROW(axesMaskOf(mesh, {"pp"}), RunError);
  EXPECT_EQ(mesh.axesOf(3u), (std::vector<std::string>{"dp", "tp"}));
  EXPECT_EQ(parseMesh("x_1=1").worldSize(), 1);
}

TEST(Mesh, BadValuesAreUsageErrors) {
  std::vector<std::pair<std::string, std::string>> cases = {
      {"", "mesh entry '' is not name=size"},
      {"dp", "mesh entry 'dp' is not name=size"},
      {"dp=2,", "mesh entry '' is not name=size"},
      {"dp=0", "mesh entry 'dp=0' is not name=size (a name and a positive "
               "size)"},
      {"dp=x", "mesh entry 'dp=x' is not name=size"},
      {"dp=2,dp=2", "mesh axis 'dp' is given twice"},
      {"2=2", "mesh entry '2=2' is not name=size"},
      {"DP=2", "the axis name 'DP' is not [a-z_][a-z0-9_]*"},
      {"a=65536,b=65536", "more than 2^31 - 1 devices (at the axis 'b')"},
      {"a=1,b=1,c=1,d=1,e=1,f=1,g=1,h=1,i=1", "a mesh has at most 8 axes"},
  };
  for (auto &[text, message] : cases) {
    std::string error;
    try {
      parseMesh(text);
    } catch (const UsageError &e) {
      error = e.what();
    }
    EXPECT_NE(error.find("bad value '" + text + "' for --mesh: " + message),
              std::string::npos)
        << text << ": " << error;
  }
}

// Tests that rank r's coordinates are row-major with the last axis fastest
// (spec §1: dp=2,tp=2 gives rank r the coordinates (r / 2, r % 2)).
TEST(Mesh, CoordinatesAreRowMajorLastAxisFastest) {
  Mesh mesh = parseMesh("dp=2,tp=3");
  for (int64_t r = 0; r < 6; ++r)
    EXPECT_EQ(mesh.coordinates(r), (std::vector<int64_t>{r / 3, r % 3})) << r;
  Mesh three = parseMesh("a=2,b=2,c=2");
  EXPECT_EQ(three.coordinates(6), (std::vector<int64_t>{1, 1, 0}));
}

// Tests that a dimension split by [a1, a2] takes block a1·size(a2) + a2,
// whatever the axes' order in the mesh.
TEST(Mesh, BlockIndexLinearisesTheSplitAxesOuterFirst) {
  Mesh mesh = parseMesh("dp=2,tp=3");
  std::vector<int64_t> coords = {1, 2};
  EXPECT_EQ(blockIndex({"dp"}, mesh, coords), 1);
  EXPECT_EQ(blockIndex({"tp"}, mesh, coords), 2);
  EXPECT_EQ(blockIndex({"dp", "tp"}, mesh, coords), 1 * 3 + 2);
  EXPECT_EQ(blockIndex({"tp", "dp"}, mesh, coords), 2 * 2 + 1);
  EXPECT_EQ(blockIndex({}, mesh, coords), 0);

  TensorBlock block = blockOf({3, 4}, {{"tp", "dp"}, {}}, mesh, coords);
  EXPECT_EQ(block.globalShape, (std::vector<int64_t>{18, 4}));
  EXPECT_EQ(block.start, (std::vector<int64_t>{15, 0}));
  EXPECT_FALSE(block.whole());
}

// Tests that the contiguous runs of every rank's block are exactly the
// block's elements, in local order, and that the ranks' blocks tile the
// global tensor (once per replica).
TEST(Mesh, RunsOfEveryBlockTileTheGlobalTensor) {
  struct Case {
    const char *mesh;
    std::vector<int64_t> local;
    std::vector<std::vector<std::string>> sharding;
  };
  std::vector<Case> cases = {
      {"dp=2,tp=2", {3, 4}, {{"dp"}, {"tp"}}},
      {"dp=2,tp=2", {3, 4}, {{}, {"tp"}}},
      {"dp=2,tp=2", {3, 4}, {{"tp", "dp"}, {}}},
      {"dp=2,tp=2", {2, 3, 5}, {{}, {"dp", "tp"}, {}}},
      {"dp=2,tp=2", {2, 3, 5}, {{"tp"}, {}, {"dp"}}},
      {"dp=2,tp=2", {6}, {{"dp"}}},
      {"dp=2,tp=2", {4, 1}, {{}, {"dp"}}},
      {"a=2,b=3,c=2", {2, 2, 3}, {{"c"}, {"a"}, {"b"}}},
      {"a=2,b=3,c=2", {5, 2}, {{"b", "c", "a"}, {}}},
      {"dp=4", {}, {}},
      {"dp=4", {2, 0}, {{"dp"}, {}}},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(std::string(c.mesh) + " " + json(c.sharding).dump());
    Mesh mesh = parseMesh(c.mesh);
    std::vector<int> covered;
    for (int64_t r = 0; r < mesh.worldSize(); ++r) {
      TensorBlock block =
          blockOf(c.local, c.sharding, mesh, mesh.coordinates(r));
      covered.resize(product(block.globalShape));
      std::vector<int64_t> viaRuns(block.localElements(), -1);
      int64_t nextLocal = 0;
      forEachRun(block, [&](int64_t local, int64_t global, int64_t count) {
        EXPECT_EQ(local, nextLocal); // In local order, no gaps.
        nextLocal = local + count;
        for (int64_t i = 0; i < count; ++i)
          viaRuns[local + i] = global + i;
      });
      EXPECT_EQ(nextLocal, block.localElements());
      for (int64_t i = 0; i < block.localElements(); ++i) {
        std::vector<int64_t> index = rowMajorIndex(i, block.localShape);
        for (size_t d = 0; d < index.size(); ++d)
          index[d] += block.start[d];
        int64_t global = flatIndex(index, block.globalShape);
        EXPECT_EQ(viaRuns[i], global) << "rank " << r << " element " << i;
        ++covered[global];
      }
    }
    // Replicated over the axes that split nothing: each element once per
    // rank of theirs.
    expectEachElementOncePerReplica(covered, mesh, c.sharding, 1);
  }
}

// Tests that a split dimension whose inner dimensions are whole makes one
// run per outer index (no element-wise copies).
TEST(Mesh, RunsMergeWholeInnerDimensions) {
  Mesh mesh = parseMesh("dp=2,tp=2");
  int runs = 0;
  forEachRun(blockOf({3, 4, 5}, {{"dp"}, {}, {}}, mesh, {1, 0}),
             [&](int64_t local, int64_t global, int64_t count) {
               EXPECT_EQ(local, 0);
               EXPECT_EQ(global, 60);
               EXPECT_EQ(count, 60);
               ++runs;
             });
  EXPECT_EQ(runs, 1);
  runs = 0;
  forEachRun(blockOf({3, 4, 5}, {{}, {"tp"}, {}}, mesh, {0, 1}),
             [&](int64_t, int64_t, int64_t count) {
               EXPECT_EQ(count, 20);
               ++runs;
             });
  EXPECT_EQ(runs, 3);
}

//===--- ZeRO chunks ------------------------------------------------------===//

/// A ZeRO chunk of a block for the tests: the block split by `sharding`,
/// its rows [layerOffset, layerOffset + block[0]) of `layerTotal` (0: no
/// layers), chunked over `zeroAxes` below dimension `dims`.
struct ZeroCase {
  const char *mesh;
  std::vector<int64_t> block;
  std::vector<std::vector<std::string>> sharding;
  std::vector<std::string> zeroAxes;
  int64_t dims;
  // Pipeline stages holding rows of the block's first dimension: each an
  // offset into `layerTotal` rows; empty: no layers.
  std::vector<int64_t> layerOffsets = {};
  int64_t layerTotal = 0;
};

TensorBlock zeroBlock(const ZeroCase &c, const Mesh &mesh,
                      const std::vector<int64_t> &coords, int64_t layerOffset) {
  TensorBlock block = blockOf(c.block, c.sharding, mesh, coords);
  if (c.layerTotal) {
    block.globalShape[0] = c.layerTotal;
    block.start[0] += layerOffset;
  }
  setZeroChunk(block, c.dims, blockIndex(c.zeroAxes, mesh, coords),
               groupSizeOf(c.zeroAxes, mesh));
  return block;
}

// Tests that a ZeRO chunk's runs are exactly its stored elements that are
// global ones (dims 0 and 1, uneven rows with padding, with tp sharding and
// layer rows, G = 1, 2, 4), in storage order, never in the padding; and
// that the ranks' runs cover the global tensor exactly once per replica.
TEST(ZeroChunks, RunsOfEveryChunkTileTheGlobalTensorOnce) {
  std::vector<ZeroCase> cases = {
      // The spec's example: [10] over dp=4, s = 3, the last chunk 1 + 2
      // padding.
      {"dp=4", {10}, {}, {"dp"}, 0},
      {"dp=2", {10}, {}, {"dp"}, 0},
      {"dp=1,tp=2", {3, 4}, {{}, {"tp"}}, {"dp"}, 0}, // G = 1
      {"dp=1,tp=2", {3, 4}, {{}, {"tp"}}, {"dp"}, 1},
      {"dp=2,tp=2", {3, 5}, {{"tp"}, {}}, {"dp"}, 0}, // I 15, s 8
      {"dp=2,tp=2", {3, 5}, {{}, {"tp"}}, {"dp"}, 1}, // I 5, s 3
      {"dp=2,tp=2", {3, 5}, {{"tp"}, {}}, {"dp"}, 2}, // I 1, s 1
      {"dp=4,tp=2", {2, 3, 5}, {{}, {"tp"}, {}}, {"dp"}, 1, {0, 2}, 4},
      {"dp=4,tp=2", {2, 3, 5}, {{}, {"tp"}, {}}, {"dp"}, 0, {0, 2}, 4},
      {"dp=2,tp=2", {7}, {}, {"tp", "dp"}, 0}, // against the mesh's order
      {"dp=2,tp=2", {2, 9}, {}, {"dp", "tp"}, 1},
      {"dp=2,tp=2", {3, 0}, {{"tp"}, {}}, {"dp"}, 1}, // I = 0
  };
  for (const ZeroCase &c : cases) {
    SCOPED_TRACE(std::string(c.mesh) + " block " + json(c.block).dump() + " " +
                 json(c.sharding).dump() + " zero " + json(c.zeroAxes).dump() +
                 " dims " + std::to_string(c.dims));
    Mesh mesh = parseMesh(c.mesh);
    std::vector<int> covered;
    std::vector<int64_t> offsets =
        c.layerOffsets.empty() ? std::vector<int64_t>{0} : c.layerOffsets;
    int64_t groups = groupSizeOf(c.zeroAxes, mesh);
    for (int64_t offset : offsets)
      for (int64_t r = 0; r < mesh.worldSize(); ++r) {
        std::vector<int64_t> coords = mesh.coordinates(r);
        TensorBlock block = zeroBlock(c, mesh, coords, offset);
        int64_t inner = product(
            std::vector<int64_t>(c.block.begin() + c.dims, c.block.end()));
        int64_t chunk = (inner + groups - 1) / groups;
        std::vector<int64_t> stored(c.block.begin(), c.block.begin() + c.dims);
        stored.push_back(chunk);
        EXPECT_EQ(block.storedShape(), stored);
        EXPECT_EQ(block.zeroInner, inner);
        EXPECT_EQ(block.zeroChunk, chunk);
        EXPECT_EQ(block.whole(),
                  groups == 1 && block.localShape == block.globalShape);
        covered.resize(product(block.globalShape));
        int64_t nextLocal = 0, counted = 0;
        forEachRun(block, [&](int64_t local, int64_t global, int64_t count) {
          EXPECT_GE(local, nextLocal); // In storage order, no overlap.
          EXPECT_GT(count, 0);
          nextLocal = local + count;
          counted += count;
          for (int64_t i = 0; i < count; ++i) {
            // Stored element local + i: row `row`, flat `flat` of the row.
            int64_t row = (local + i) / chunk;
            int64_t flat = block.zeroFirst + (local + i) % chunk;
            ASSERT_LT(flat, inner) << "a run in the padding";
            std::vector<int64_t> index =
                rowMajorIndex(row * inner + flat, block.localShape);
            for (size_t d = 0; d < index.size(); ++d)
              index[d] += block.start[d];
            int64_t expected = flatIndex(index, block.globalShape);
            ASSERT_EQ(global + i, expected)
                << "rank " << r << " stored element " << local + i;
            ++covered[expected];
          }
        });
        EXPECT_LE(nextLocal, product(stored));
        EXPECT_EQ(counted, block.localElements()) << "rank " << r;
      }
    expectEachElementOncePerReplica(covered, mesh, c.sharding, groups);
  }
}

// Tests that a chunk of whole rows (G = 1) is one run, as the block is, and
// that a chunk's runs break where its rows do.
TEST(ZeroChunks, RunsMergeAcrossRowsOnlyWhenContiguous) {
  Mesh mesh = parseMesh("dp=1,tp=2");
  std::vector<std::tuple<int64_t, int64_t, int64_t>> runs;
  auto record = [&](int64_t local, int64_t global, int64_t count) {
    runs.push_back({local, global, count});
  };
  TensorBlock whole = blockOf({3, 4}, {}, mesh, {0, 0});
  setZeroChunk(whole, 1, 0, 1);
  forEachRun(whole, record);
  EXPECT_EQ(runs,
            (std::vector<std::tuple<int64_t, int64_t, int64_t>>{{0, 0, 12}}));
  runs.clear();
  Mesh dp2 = parseMesh("dp=2");
  TensorBlock half = blockOf({3, 5}, {}, dp2, {1});
  setZeroChunk(half, 1, 1, 2); // columns 3, 4 of each row, s = 3
  forEachRun(half, record);
  EXPECT_EQ(runs, (std::vector<std::tuple<int64_t, int64_t, int64_t>>{
                      {0, 3, 2}, {3, 8, 2}, {6, 13, 2}}));
  EXPECT_EQ(half.localElements(), 6);
  EXPECT_FALSE(half.whole());
}

//===--- Sharded descriptions ---------------------------------------------===//

TEST(MeshDescription, ParsesMeshShardingGlobalShapesAndCollectives) {
  json j = describe(mesh2x2, {{"w", "param", {3, 4}, {{"dp"}, {"tp"}}},
                              {"b", "param", {4}},
                              {"x", "input", {2, 8}, {{"dp"}, {}}}});
  j["tensors"][0]["global_shape"] = {6, 8};
  j["tensors"][1]["sharding"] = shardingJson({{}});
  j["collectives"]["forward"] = {
      collectiveJson("all_reduce", {"tp", "dp"}, 2, 64),
      collectiveJson("all_gather", {"tp"}, 1, 32)};
  ModelDesc m = parse(j);
  ASSERT_TRUE(m.mesh);
  EXPECT_EQ(m.mesh->toString(), "dp=2,tp=2");
  EXPECT_EQ(m.worldSize(), 4);
  const TensorDesc &w = *m.find("param", "w");
  EXPECT_TRUE(w.isSharded());
  EXPECT_EQ(w.shape, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(w.globalShape, (std::vector<int64_t>{6, 8}));
  EXPECT_EQ(w.globalBytes(), 6 * 8 * 4);
  // A "sharding" that splits nothing is no split.
  EXPECT_FALSE(m.find("param", "b")->isSharded());
  EXPECT_EQ(m.find("param", "b")->globalShape, (std::vector<int64_t>{4}));
  // Without "global_shape", it follows from the sharding.
  EXPECT_EQ(m.find("input", "x")->globalShape, (std::vector<int64_t>{4, 8}));
  ASSERT_EQ(m.collectives.at("forward").size(), 2u);
  EXPECT_EQ(m.collectives.at("forward")[0].axes,
            (std::vector<std::string>{"dp", "tp"})); // Mesh order.
  EXPECT_EQ(m.collectives.at("forward")[1].bytes, 32);
  // The feeds of one device: global shapes, packed.
  ModelDesc feeds = globalFeedView(m);
  ASSERT_EQ(feeds.tensors.size(), 1u);
  EXPECT_EQ(feeds.tensors[0].shape, (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(feeds.batchSize(), 4);
  EXPECT_EQ(m.batchSize(), 2);

  ModelDesc plain = parse(describe(nullptr, {{"w", "param", {3, 4}}}));
  EXPECT_FALSE(plain.mesh);
  EXPECT_EQ(plain.worldSize(), 1);
  EXPECT_EQ(plain.find("param", "w")->globalShape,
            (std::vector<int64_t>{3, 4}));
}

// Tests that every malformed mesh, sharding or collectives entry fails with
// one line naming the file and the problem.
TEST(MeshDescription, InvalidDescriptionsNameTheProblem) {
  struct Case {
    const char *what;
    std::function<void(json &)> edit;
    const char *message;
  };
  std::vector<Case> cases = {
      {"mesh sizes", [](json &j) { j["mesh"]["shape"] = {2}; },
       "\"mesh\" needs one size per axis"},
      {"mesh size 0",
       [](json &j) {
         j["mesh"]["shape"] = {2, 0};
       },
       "mesh entry 'tp=0' is not name=size"},
      {"sharding without mesh", [](json &j) { j.erase("mesh"); },
       "tensor 'w': \"sharding\" but the model has no \"mesh\""},
      {"sharding rank",
       [](json &j) { j["tensors"][0]["sharding"] = shardingJson({{"dp"}}); },
       "tensor 'w': \"sharding\" has 1 dimensions, its shape 2"},
      {"unknown axis",
       [](json &j) {
         j["tensors"][0]["sharding"] = shardingJson({{"pp"}, {}});
       },
       "\"sharding\" names axis 'pp', not one of mesh dp=2,tp=2"},
      {"axis twice",
       [](json &j) {
         j["tensors"][0]["sharding"] = shardingJson({{"dp"}, {"dp"}});
       },
       "\"sharding\" splits over axis 'dp' twice"},
      {"global shape",
       [](json &j) {
         j["tensors"][0]["global_shape"] = {3, 8};
       },
       "\"global_shape\" [3, 8] is not its shape [3, 4] times its splits "
       "[6, 8]"},
      {"collective kind",
       [](json &j) {
         j["collectives"]["forward"] = {
             collectiveJson("broadcast", {"dp"}, 1, 4)};
       },
       "\"collectives\": unknown kind 'broadcast'"},
      {"collective axis",
       [](json &j) {
         j["collectives"]["forward"] = {
             collectiveJson("all_reduce", {"pp"}, 1, 4)};
       },
       "\"collectives\": axis 'pp' is not one of mesh dp=2,tp=2"},
      {"collective entry",
       [](json &j) { j["collectives"]["backward"] = json::array(); },
       "\"collectives\" of entry 'backward', which the model does not have"},
  };
  for (const Case &c : cases) {
    json j = describe(mesh2x2, {{"w", "param", {3, 4}, {{"dp"}, {"tp"}}}});
    c.edit(j);
    std::string error = errorOf([&] { parse(j); });
    EXPECT_NE(error.find(c.message), std::string::npos)
        << c.what << ": " << error;
    EXPECT_NE(error.find("model 'm.so': bad description"), std::string::npos)
        << c.what;
    EXPECT_EQ(error.find('\n'), std::string::npos) << c.what;
  }
}

// Tests that a ZeRO tensor's description (the spec's example: [10] over
// dp=4, dims 0, s = 3) parses into its block, global shape and chunks, and
// that every rank's runs place its chunk (the last rank holds one element
// and two of padding).
TEST(ZeroDescription, ParsesTheChunkAndPlacesEveryRanksPiece) {
  ModelDesc m = parse(describe(
      meshJson({"dp"}, {4}),
      {{"fc2.bias", "param", {3}, {}, "f32", zeroJson({"dp"}, 0, {10})}}));
  const TensorDesc &b = *m.find("param", "fc2.bias");
  ASSERT_TRUE(b.zero);
  EXPECT_EQ(b.zero->axes, (std::vector<std::string>{"dp"}));
  EXPECT_EQ(b.blockShape(), (std::vector<int64_t>{10}));
  EXPECT_EQ(b.shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(b.bytes, 12);
  EXPECT_EQ(b.globalShape, (std::vector<int64_t>{10}));
  EXPECT_FALSE(b.isSharded());
  for (int64_t r = 0; r < 4; ++r) {
    TensorBlock block = blockOf(m, b, {r});
    EXPECT_EQ(block.zeroFirst, 3 * r);
    EXPECT_FALSE(block.whole());
    std::vector<std::tuple<int64_t, int64_t, int64_t>> runs;
    forEachRun(block, [&](int64_t local, int64_t global, int64_t count) {
      runs.push_back({local, global, count});
    });
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0],
              std::make_tuple(int64_t(0), 3 * r, int64_t(r == 3 ? 1 : 3)));
  }

  // With tp sharding and dims 1: the block [3, 4] of [3, 8], rows chunked.
  m = parse(describe(mesh2x2, {{"w",
                                "param",
                                {3, 2},
                                {{}, {"tp"}},
                                "f32",
                                zeroJson({"dp"}, 1, {3, 4})}}));
  const TensorDesc &w = *m.find("param", "w");
  EXPECT_EQ(w.globalShape, (std::vector<int64_t>{3, 8}));
  EXPECT_EQ(w.blockShape(), (std::vector<int64_t>{3, 4}));
  TensorBlock block = blockOf(m, w, {1, 1});
  EXPECT_EQ(block.start, (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(block.zeroFirst, 2);
  EXPECT_EQ(block.storedShape(), (std::vector<int64_t>{3, 2}));
}

// Tests that every malformed "zero" fails with one line naming the file,
// the tensor and the problem.
TEST(ZeroDescription, InvalidZeroEntriesNameTheProblem) {
  struct Case {
    const char *what;
    std::vector<Spec> specs;
    bool mesh;
    const char *message;
  };
  std::vector<Case> cases = {
      {"unknown axis",
       {{"w", "param", {3}, {}, "f32", zeroJson({"pp"}, 0, {10})}},
       true,
       "tensor 'w': \"zero\" names axis 'pp', not one of mesh dp=2,tp=2"},
      {"axis also in sharding",
       {{"w",
         "param",
         {2, 2},
         {{"dp"}, {}},
         "f32",
         zeroJson({"dp"}, 1, {2, 4})}},
       true,
       "tensor 'w': \"zero\" axis 'dp' also splits it in \"sharding\""},
      {"dims past the rank",
       {{"w", "param", {3}, {}, "f32", zeroJson({"dp"}, 2, {10})}},
       true,
       "\"zero\": \"dims\" 2 outside [0, 1] (the block's rank)"},
      {"shape not the chunk",
       {{"w", "param", {4}, {}, "f32", zeroJson({"dp"}, 0, {10})}},
       true,
       "tensor 'w': shape [4] is not the ZeRO chunk [5] of block [10] (dims "
       "0: 10 elements per row over 2 ranks)"},
      {"no mesh",
       {{"w", "param", {5}, {}, "f32", zeroJson({"dp"}, 0, {10})}},
       false,
       "tensor 'w': \"zero\" but the model has no \"mesh\""},
      {"a feed",
       {{"input0", "input", {5}, {}, "f32", zeroJson({"dp"}, 0, {10})}},
       true,
       "\"zero\" on a input tensor (only parameters, gradients and states "
       "are ZeRO-sharded)"},
      {"no axes",
       {{"w", "param", {10}, {}, "f32", zeroJson({}, 0, {10})}},
       true,
       "tensor 'w': \"zero\" names no axis"},
      {"sharding against the block",
       {{"w", "param", {2}, {{"tp"}, {}}, "f32", zeroJson({"dp"}, 0, {3})}},
       true,
       "\"sharding\" has 2 dimensions, its block 1"},
  };
  for (const Case &c : cases) {
    json j = describe(c.mesh ? mesh2x2 : json(nullptr), c.specs);
    std::string error = errorOf([&] { parse(j); });
    EXPECT_NE(error.find(c.message), std::string::npos)
        << c.what << ": " << error;
    EXPECT_NE(error.find("model 'm.so': bad description"), std::string::npos)
        << c.what;
    EXPECT_EQ(error.find('\n'), std::string::npos) << c.what;
  }
  // A "global_shape" is checked against the block, not the chunk.
  json j = describe(
      mesh2x2, {{"w", "param", {5}, {}, "f32", zeroJson({"dp"}, 0, {10})}});
  j["tensors"][0]["global_shape"] = {5};
  EXPECT_NE(errorOf([&] { parse(j); })
                .find("\"global_shape\" [5] is not its block [10] times its "
                      "splits [10]"),
            std::string::npos);
}

//===--- Communication counts ---------------------------------------------===//

CommCount count(const std::string &kind, std::vector<std::string> axes,
                int64_t calls, int64_t bytes) {
  return {kind, std::move(axes), calls, bytes};
}

TEST(CommCounts, AStepIsBackwardTimesMicrobatchesPlusUpdate) {
  ModelDesc m =
      parse(describe(mesh2x2, {{"w", "param", {3, 4}, {{"dp"}, {"tp"}}}}));
  // Training needs grads and states: this description stays eval-only for
  // the parser, so the counts are set directly.
  m.entries = {{"forward", "f"}, {"backward", "b"}, {"update", "u"}};
  m.collectives["forward"] = {count("all_reduce", {"tp"}, 1, 40)};
  m.collectives["backward"] = {count("all_reduce", {"tp"}, 2, 80),
                               count("all_reduce", {"dp"}, 1, 48),
                               count("reduce_scatter", {"tp", "dp"}, 1, 16)};
  m.collectives["update"] = {count("all_reduce", {"dp"}, 1, 4)};
  std::vector<CommCount> step = expectedCommPerStep(m, true, 3);
  ASSERT_EQ(step.size(), 3u);
  EXPECT_EQ(commKey(step[0]), "all_reduce dp");
  EXPECT_EQ(step[0].calls, 4);
  EXPECT_EQ(step[0].bytes, 3 * 48 + 4);
  EXPECT_EQ(commKey(step[1]), "all_reduce tp");
  EXPECT_EQ(step[1].calls, 6);
  EXPECT_EQ(commKey(step[2]), "reduce_scatter dp,tp");
  EXPECT_EQ(step[2].bytes, 48);
  std::vector<CommCount> eval = expectedCommPerStep(m, false, 2);
  ASSERT_EQ(eval.size(), 1u);
  EXPECT_EQ(eval[0].calls, 2);
  EXPECT_EQ(eval[0].bytes, 80);

  EXPECT_EQ(describeComm(eval), "all_reduce over tp: 2 calls, 80 bytes");
  EXPECT_EQ(describeComm({}), "none");
  EXPECT_EQ(commDifference(step, step), "");
  std::vector<CommCount> measured = step;
  measured[1].calls = 5;
  measured.pop_back();
  EXPECT_EQ(commDifference(step, measured),
            "all_reduce over tp: 5 calls, 240 bytes (compiled: 6 calls, 240 "
            "bytes); reduce_scatter over dp,tp: 0 calls, 0 bytes (compiled: "
            "3 calls, 48 bytes)");
}

//===--- Flags ------------------------------------------------------------===//

TEST(MeshFlags, ParseMeshCommAndPartitioningFlags) {
  Options o = parseFlags({"m.mlir", "--mesh", "dp=2,tp=2", "--comm", "mpi",
                          "--rules", "rules.txt", "--sequence-parallel",
                          "--local-batchnorm", "--bucket-mb=25"});
  ASSERT_TRUE(o.mesh);
  EXPECT_EQ(o.mesh->toString(), "dp=2,tp=2");
  EXPECT_EQ(o.comm, CommBackend::Mpi);
  EXPECT_EQ(o.partitioningFlags(),
            (std::vector<std::string>{"--rules", "--sequence-parallel",
                                      "--local-batchnorm", "--bucket-mb"}));
  EXPECT_EQ(compileArgs(o), (std::vector<std::string>{
                                "--mesh", "dp=2,tp=2", "--rules", "rules.txt",
                                "--sequence-parallel", "--local-batchnorm",
                                "--bucket-mb", "25"}));
  EXPECT_EQ(compileArgs(parseFlags({"m.mlir", "--mesh", "dp=4", "--zero", "3",
                                    "--no-reshard-after-forward"})),
            (std::vector<std::string>{"--mesh", "dp=4", "--zero", "3",
                                      "--no-reshard-after-forward"}));
  // A pipeline's flags, --stage-recompute among them; with --mesh auto it
  // constrains the search (a pipeline it chooses recomputes its stages).
  EXPECT_EQ(
      compileArgs(
          parseFlags({"m.mlir", "--mesh", "dp=2,pp=2", "--pipeline-schedule",
                      "zb-v", "--virtual-stages", "2", "--microbatches", "4",
                      "--stage-recompute"})),
      (std::vector<std::string>{"--mesh", "dp=2,pp=2", "--microbatches", "4",
                                "--pipeline-schedule", "zb-v",
                                "--virtual-stages", "2", "--stage-recompute"}));
  EXPECT_EQ(compileArgs(parseFlags({"m.mlir", "--mesh", "auto", "--devices",
                                    "4", "--stage-recompute"})),
            (std::vector<std::string>{"--mesh", "auto", "--devices", "4",
                                      "--stage-recompute"}));
  EXPECT_EQ(parseFlags({"m.so"}).comm, CommBackend::Local);
  // An evaluation is partitioned too.
  EXPECT_EQ(compileArgs(parseFlags({"m.mlir", "--eval", "--mesh", "tp=2"})),
            (std::vector<std::string>{"--no-train", "--mesh", "tp=2"}));
  EXPECT_EQ(
      compileArgs(parseFlags({"m.mlir", "--lr", "0.1", "--mesh", "dp=4"})),
      (std::vector<std::string>{"--lr", "0.1", "--mesh", "dp=4"}));
}

TEST(MeshFlags, BadCombinationsAreUsageErrors) {
  std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"m.so", "--comm", "nccl"},
       "bad value 'nccl' for --comm (expected local, mpi or tcp)"},
      {{"m.so", "--mesh", "dp=2", "--rules", "r"},
       "--rules only with a .mlir model"},
      {{"m.so", "--mesh", "tp=2", "--sequence-parallel"},
       "--sequence-parallel only with a .mlir model"},
      {{"m.so", "--local-batchnorm"}, "--local-batchnorm only with a .mlir"},
      {{"m.so", "--bucket-mb", "4"}, "--bucket-mb only with a .mlir model"},
      {{"m.mlir", "--sequence-parallel"}, "--sequence-parallel needs --mesh"},
      {{"m.mlir", "--mesh", "dp=2", "--bucket-mb", "-1"},
       "bad value '-1' for --bucket-mb"},
      {{"m.so", "--mesh", "dp=2,dp=2"}, "mesh axis 'dp' is given twice"},
      {{"m.so", "--mesh", "dp=2", "--zero", "2"},
       "--zero only with a .mlir model"},
      {{"m.mlir", "--zero", "1"}, "--zero needs --mesh"},
      {{"m.mlir", "--mesh", "dp=2", "--zero", "4"},
       "bad value '4' for --zero (expected a ZeRO stage 0, 1, 2 or 3)"},
      {{"m.mlir", "--mesh", "tp=2", "--zero", "1"},
       "--zero shards the training state over the dp and cp axes; --mesh "
       "tp=2 has neither"},
      {{"m.mlir", "--mesh", "dp=2", "--zero", "3", "--eval"},
       "--zero shards the training state; not with --eval"},
      {{"m.mlir", "--mesh", "dp=2", "--zero", "2",
        "--no-reshard-after-forward"},
       "--no-reshard-after-forward applies to --zero 3"},
      {{"m.mlir", "--mesh", "dp=2", "--stage-recompute"},
       "--stage-recompute needs a mesh whose pp axis has more than one rank"},
      {{"m.so", "--stage-recompute"},
       "--stage-recompute only with a .mlir model"},
      {{"m.mlir", "--mesh", "auto", "--devices", "4", "--virtual-stages", "2"},
       "--virtual-stages is what --mesh auto chooses; give --mesh to set it"},
  };
  for (auto &[args, message] : cases) {
    std::string error = usageErrorOf(args);
    EXPECT_NE(error.find(message), std::string::npos)
        << json(args).dump() << ": " << error;
  }
}

TEST(MeshFlags, TheMeshMustBeTheOneTheSoWasCompiledFor) {
  ModelDesc sharded =
      parse(describe(mesh2x2, {{"w", "param", {3, 4}, {{"dp"}, {"tp"}}}}));
  sharded.source = "m.mlir";
  ModelDesc plain = parse(describe(nullptr, {{"w", "param", {3, 4}}}));
  auto check = [&](const ModelDesc &m, std::vector<std::string> args,
                   bool compiledHere = false) {
    Options o = parseFlags(args);
    return errorOf([&] { checkMesh(o, m, "m.so", compiledHere); });
  };
  EXPECT_EQ(check(sharded, {"m.so", "--mesh", "dp=2,tp=2"}), "");
  EXPECT_EQ(check(sharded, {"m.so"}), ""); // Runs on its own mesh.
  EXPECT_EQ(check(plain, {"m.so"}), "");
  EXPECT_EQ(check(sharded, {"m.so", "--mesh", "tp=2,dp=2"}),
            "--mesh tp=2,dp=2 differs from the mesh dp=2,tp=2 that model "
            "'m.so' was compiled for (the partitioning is compiled in); "
            "recompile with tessel-compile m.mlir --mesh tp=2,dp=2 -o m.so, "
            "or drop --mesh");
  EXPECT_NE(check(plain, {"m.so", "--mesh", "dp=2"})
                .find("--mesh dp=2 differs from the one device that model "
                      "'m.so' was compiled for"),
            std::string::npos);
  EXPECT_EQ(check(plain, {"m.mlir", "--mesh", "dp=2"}, true),
            "tessel-compile ignored --mesh dp=2: 'm.mlir' was compiled for "
            "one device");
  // A dp/tp mesh is checked as one device is (GradCheckTest).
  EXPECT_EQ(check(sharded, {"m.so", "--check-grads"}), "");
}

} // namespace
