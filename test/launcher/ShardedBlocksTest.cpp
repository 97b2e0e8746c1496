//===- ShardedBlocksTest.cpp - Blocks and chunks in the runtime -----------===//

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

//===--- Blocks in the runtime --------------------------------------------===//

/// The values of a parameter's elements as floats.
std::vector<float> readFloats(tessel_ctx *ctx, const void *arena,
                              const TensorDesc &t) {
  std::vector<float> out(t.numElements());
  tessel_copy_to_host(ctx, out.data(),
                      static_cast<const char *>(arena) + t.offset, t.bytes);
  return out;
}

/// Element `local` of a block, looked up in the global tensor.
template <typename T>
T globalElement(const std::vector<T> &global, const TensorBlock &block,
                int64_t local) {
  std::vector<int64_t> index = rowMajorIndex(local, block.localShape);
  for (size_t d = 0; d < index.size(); ++d)
    index[d] += block.start[d];
  return global[flatIndex(index, block.globalShape)];
}

/// The global values one device's init gives parameter `t`.
std::vector<float> fullInit(tessel_ctx *ctx, const TensorDesc &t,
                            uint64_t seed) {
  int64_t n = t.globalNumElements();
  std::vector<float> out(n);
  void *buffer = tessel_alloc(ctx, n * 4);
  tessel_init_param(ctx, buffer, TESSEL_F32, 0, n, t.initKind, t.initArgs, seed,
                    t.name.c_str());
  tessel_copy_to_host(ctx, out.data(), buffer, n * 4);
  tessel_free(ctx, buffer);
  return out;
}

// Tests that each rank's init, run by run straight into the arena, equals
// its block of one device's init (the same parameters on every mesh).
TEST(ShardedBlocks, InitOfEveryBlockEqualsSlicingTheFullInit) {
  ModelDesc m =
      parse(describe(mesh2x2, {{"w", "param", {3, 2}, {{"tp"}, {"dp"}}},
                               {"v", "param", {2}, {{"dp", "tp"}}},
                               {"u", "param", {2, 3, 2}, {{}, {"tp"}, {}}},
                               {"r", "param", {5}}}));
  RankRuntime one(64);
  for (int64_t r = 0; r < 4; ++r) {
    std::vector<int64_t> coords = m.mesh->coordinates(r);
    RankRuntime rt(m.arenaBytes);
    initParams(m, rt.ctx, rt.arena, /*seed=*/11, coords);
    for (const TensorDesc *p : m.withRole("param")) {
      TensorBlock block = blockOf(m, *p, coords);
      std::vector<float> full = fullInit(one.ctx, *p, 11);
      std::vector<float> local = readFloats(rt.ctx, rt.arena, *p);
      for (int64_t i = 0; i < p->numElements(); ++i)
        ASSERT_EQ(local[i], globalElement(full, block, i))
            << p->name << " rank " << r << " element " << i;
    }
  }
}

/// Expects the feeds in `rt`'s arena (model `m`, the rank at `coords`) to
/// be their blocks of the feeds of `one` in `reference`'s arena, compared
/// as 4-byte words.
void expectFeedsAreBlocks(const ModelDesc &m,
                          const std::vector<int64_t> &coords,
                          const RankRuntime &rt, const ModelDesc &one,
                          const RankRuntime &reference) {
  for (const TensorDesc *t : m.feeds()) {
    const TensorDesc &whole = *one.find(t->role, t->name);
    std::vector<int32_t> global(whole.numElements()), local(t->numElements());
    tessel_copy_to_host(reference.ctx, global.data(),
                        static_cast<char *>(reference.arena) + whole.offset,
                        whole.bytes);
    tessel_copy_to_host(rt.ctx, local.data(),
                        static_cast<char *>(rt.arena) + t->offset, t->bytes);
    TensorBlock block = blockOf(m, *t, coords);
    for (int64_t i = 0; i < t->numElements(); ++i)
      ASSERT_EQ(local[i], globalElement(global, block, i))
          << t->name << " at " << coords[0] << "," << coords[1] << " element "
          << i;
  }
}

// Tests that each rank's feeds are its block of the global microbatch one
// device's run draws (the data of a mesh run is one device's).
TEST(ShardedBlocks, FeedsAreBlocksOfOneDevicesMicrobatch) {
  ModelDesc m =
      parse(describe(mesh2x2, {{"input0", "input", {2, 3}, {{"dp"}, {"tp"}}},
                               {"input1", "input", {4, 3}, {{}, {"tp"}}},
                               {"label0", "label", {2}, {{"dp"}}, "i32"}}));
  ModelDesc one =
      parse(describe(nullptr, {{"input0", "input", {4, 6}},
                               {"input1", "input", {4, 6}},
                               {"label0", "label", {4}, {}, "i32"}}));
  RankRuntime reference(one.arenaBytes);
  makeSyntheticData(one, 5)->fill(3, reference.ctx, reference.arena);
  for (int64_t r = 0; r < 4; ++r) {
    std::vector<int64_t> coords = m.mesh->coordinates(r);
    RankRuntime rt(m.arenaBytes);
    std::unique_ptr<BatchSource> feeds = makeRankFeeds(
        m, [](const ModelDesc &view) { return makeSyntheticData(view, 5); },
        coords, rt.ctx);
    feeds->fill(3, rt.ctx, rt.arena);
    ASSERT_EQ(tessel_error(rt.ctx), nullptr) << tessel_error(rt.ctx);
    expectFeedsAreBlocks(m, coords, rt, one, reference);
  }
}

// Tests that the prefetching source (the next microbatch drawn while a step
// runs) gives exactly the feeds a direct fill gives: for the index it drew
// ahead, for any other (a jump drops the draw), on two ranks of a mesh.
TEST(Prefetch, FeedsEqualADirectFill) {
  ModelDesc m =
      parse(describe(mesh2x2, {{"input0", "input", {2, 3}, {{"dp"}, {"tp"}}},
                               {"input1", "input", {4, 3}, {{}, {"tp"}}},
                               {"label0", "label", {2}, {{"dp"}}, "i32"}}));
  auto synthetic = [](const ModelDesc &view) {
    return makeSyntheticData(view, 5);
  };
  auto bytesOf = [](RankRuntime &rt, const TensorDesc &t) {
    std::vector<char> bytes(size_t(t.bytes));
    tessel_copy_to_host(rt.ctx, bytes.data(),
                        static_cast<char *>(rt.arena) + t.offset, t.bytes);
    return bytes;
  };
  for (int64_t r : {0, 3}) {
    std::vector<int64_t> coords = m.mesh->coordinates(r);
    RankRuntime direct(m.arenaBytes), ahead(m.arenaBytes);
    std::unique_ptr<BatchSource> plain =
        makeRankFeeds(m, synthetic, coords, direct.ctx);
    PrefetchingBatchSource prefetching(
        makeRankFeeds(m, synthetic, coords, ahead.ctx), m, "cpu");
    for (int64_t index : {0, 1, 2, 7, 8, 3}) {
      plain->fill(index, direct.ctx, direct.arena);
      prefetching.fill(index, ahead.ctx, ahead.arena);
      for (const TensorDesc *t : m.feeds())
        EXPECT_EQ(bytesOf(direct, *t), bytesOf(ahead, *t))
            << "rank " << r << " microbatch " << index << " " << t->name;
    }
    ASSERT_EQ(tessel_error(ahead.ctx), nullptr) << tessel_error(ahead.ctx);
  }
}

/// A batch source that records how it was asked for data.
class RecordingSource : public BatchSource {
public:
  RecordingSource(std::unique_ptr<BatchSource> inner,
                  std::vector<std::string> &log)
      : inner(std::move(inner)), log(log) {}
  void fill(int64_t index, tessel_ctx *ctx, void *arena) override {
    log.push_back("fill " + std::to_string(index));
    inner->fill(index, ctx, arena);
  }
  bool fillSamples(int64_t first, tessel_ctx *ctx, void *arena) override {
    log.push_back("samples " + std::to_string(first));
    return inner->fillSamples(first, ctx, arena);
  }

private:
  std::unique_ptr<BatchSource> inner;
  std::vector<std::string> &log;
};

// Tests that under data parallelism (feeds split along their batch only) a
// rank reads only its own samples, never the global microbatch, and that
// they are its block of one device's microbatch.
TEST(ShardedBlocks, DataParallelRanksReadOnlyTheirSamples) {
  ModelDesc m =
      parse(describe(mesh2x2, {{"input0", "input", {2, 6}, {{"dp"}, {}}},
                               {"label0", "label", {2}, {{"dp"}}, "i32"}}));
  ModelDesc one =
      parse(describe(nullptr, {{"input0", "input", {4, 6}},
                               {"label0", "label", {4}, {}, "i32"}}));
  RankRuntime reference(one.arenaBytes);
  makeSyntheticData(one, 5)->fill(3, reference.ctx, reference.arena);
  for (int64_t r = 0; r < 4; ++r) {
    std::vector<int64_t> coords = m.mesh->coordinates(r);
    RankRuntime rt(m.arenaBytes);
    std::vector<std::string> log;
    std::unique_ptr<BatchSource> feeds = makeRankFeeds(
        m,
        [&](const ModelDesc &view) {
          return std::make_unique<RecordingSource>(makeSyntheticData(view, 5),
                                                   log);
        },
        coords, rt.ctx);
    feeds->fill(3, rt.ctx, rt.arena);
    ASSERT_EQ(tessel_error(rt.ctx), nullptr) << tessel_error(rt.ctx);
    // Microbatch 3 of a global batch of 4: samples 12..15; dp rank d reads
    // 12 + 2d and 13 + 2d.
    EXPECT_EQ(log, std::vector<std::string>{
                       "samples " + std::to_string(12 + 2 * coords[0])});
    expectFeedsAreBlocks(m, coords, rt, one, reference);
  }
}

// Tests that blocks gathered on a 2x2 world are the global tensors (also a
// dimension split by [tp, dp], against the mesh's order), that the
// checkpoint written from them loads on another mesh as that mesh's
// blocks, and that the gathers' counters follow the runtime's rules.
TEST(ShardedBlocks, GatherThenLoadOnAnotherMeshRoundTrips) {
  std::vector<Spec> specs = {{"w", "param", {3, 2}, {{"tp"}, {"dp"}}},
                             {"v", "param", {2, 5}, {{"tp", "dp"}, {}}},
                             {"r", "param", {5}}};
  ModelDesc m = parse(describe(mesh2x2, specs));
  // The global values: element i of tensor k is 1000·k + i.
  std::map<std::string, std::vector<float>> global;
  int k = 0;
  for (const TensorDesc *p : m.withRole("param")) {
    std::vector<float> &values = global[p->name];
    values.resize(p->globalNumElements());
    for (size_t i = 0; i < values.size(); ++i)
      values[i] = float(1000 * k + int(i));
    ++k;
  }
  fs::path dir = fs::temp_directory_path() /
                 ("tessel-mesh-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string file = (dir / "ck.safetensors").string();
  std::string failure = onLocalWorld(m, [&](int32_t rank, RankRuntime &rt) {
    std::vector<int64_t> coords = m.mesh->coordinates(rank);
    for (const TensorDesc *p : m.withRole("param")) {
      TensorBlock block = blockOf(m, *p, coords);
      std::vector<float> local(p->numElements());
      for (size_t i = 0; i < local.size(); ++i)
        local[i] = globalElement(global[p->name], block, int64_t(i));
      tessel_copy_to_device(rt.ctx, static_cast<char *>(rt.arena) + p->offset,
                            local.data(), p->bytes);
    }
    tessel_reset_counters(rt.ctx);
    std::map<std::string, std::vector<char>> tensors =
        gatherCheckpoint(m, rt.ctx, rt.arena, false, rank == 0);
    // all_gather counts its output: w over tp ([6, 2], 48 bytes), then
    // over dp ([6, 4], 96); v over dp first ([4, 5], 80), then tp ([8, 5],
    // 160).
    std::vector<CommCount> measured = readCommCounters(rt.ctx, *m.mesh);
    if (measured.size() != 2 || commKey(measured[0]) != "all_gather dp" ||
        measured[0].calls != 2 || measured[0].bytes != 96 + 80 ||
        measured[1].calls != 2 || measured[1].bytes != 48 + 160)
      throw RunError("unexpected counters " + describeComm(measured));
    if (rank != 0) {
      if (!tensors.empty())
        throw RunError("rank " + std::to_string(rank) + " kept tensors");
      return;
    }
    for (auto &[name, bytes] : tensors) {
      std::vector<float> values(bytes.size() / 4);
      std::memcpy(values.data(), bytes.data(), bytes.size());
      if (values != global[name])
        throw RunError("gathered '" + name + "' differs");
    }
    writeSafetensorsAtomically(file, m, tensors, {}, false);
  });
  ASSERT_EQ(failure, "");

  // The same tensors on a 4-rank mesh split otherwise.
  json other = describe(meshJson({"x", "y"}, {1, 4}),
                        {{"w", "param", {6, 1}, {{}, {"y"}}},
                         {"v", "param", {8, 5}, {{"x"}, {}}},
                         {"r", "param", {5}}});
  ModelDesc m4 = parse(other);
  CheckpointReader reader(file, m4, false);
  for (int64_t r = 0; r < 4; ++r) {
    std::vector<int64_t> coords = m4.mesh->coordinates(r);
    RankRuntime rt(m4.arenaBytes);
    reader.load(rt.ctx, rt.arena, coords);
    for (const TensorDesc *p : m4.withRole("param")) {
      std::vector<float> local = readFloats(rt.ctx, rt.arena, *p);
      TensorBlock block = blockOf(m4, *p, coords);
      for (int64_t i = 0; i < p->numElements(); ++i)
        ASSERT_EQ(local[i], globalElement(global[p->name], block, i))
            << p->name << " rank " << r << " element " << i;
    }
  }
  fs::remove_all(dir);
}

// Tests that a ZeRO chunk's init is its slice of one device's init, with
// its padding left zero.
TEST(ZeroChunks, InitOfEveryChunkEqualsSlicingTheFullInit) {
  ModelDesc m = parse(describe(
      mesh2x2,
      {{"w", "param", {3, 2}, {{}, {"tp"}}, "f32", zeroJson({"dp"}, 1, {3, 3})},
       {"v", "param", {4}, {}, "f32", zeroJson({"tp", "dp"}, 0, {13})}}));
  RankRuntime one(64);
  for (int64_t r = 0; r < 4; ++r) {
    std::vector<int64_t> coords = m.mesh->coordinates(r);
    RankRuntime rt(m.arenaBytes);
    initParams(m, rt.ctx, rt.arena, /*seed=*/11, coords);
    for (const TensorDesc *p : m.withRole("param")) {
      TensorBlock block = blockOf(m, *p, coords);
      std::vector<float> full = fullInit(one.ctx, *p, 11);
      std::vector<float> local = readFloats(rt.ctx, rt.arena, *p);
      std::vector<float> expected(local.size(), 0.0f);
      forEachRun(block, [&](int64_t l, int64_t g, int64_t count) {
        for (int64_t i = 0; i < count; ++i)
          expected[l + i] = full[g + i];
      });
      EXPECT_EQ(local, expected) << p->name << " rank " << r;
    }
  }
}

// Tests that gathering ZeRO chunks (dims 0 and 1, padding, with tp
// sharding, over axes in and against the mesh's order) gives the global
// tensors, and that a one-file checkpoint loads back into the chunks.
TEST(ZeroChunks, GatherThenLoadRoundTrips) {
  std::vector<Spec> specs = {
      {"w", "param", {3, 2}, {{}, {"tp"}}, "f32", zeroJson({"dp"}, 1, {3, 3})},
      {"u", "param", {8}, {{"tp"}, {}}, "f32", zeroJson({"dp"}, 0, {3, 5})},
      {"v", "param", {4}, {}, "f32", zeroJson({"tp", "dp"}, 0, {13})},
      {"x", "param", {2, 4}, {}, "f32", zeroJson({"dp", "tp"}, 1, {2, 13})}};
  ModelDesc m = parse(describe(mesh2x2, specs));
  std::map<std::string, std::vector<float>> global;
  int k = 0;
  for (const TensorDesc *p : m.withRole("param")) {
    std::vector<float> &values = global[p->name];
    values.resize(p->globalNumElements());
    for (size_t i = 0; i < values.size(); ++i)
      values[i] = float(1000 * ++k + int(i));
  }
  auto chunkOf = [&](const TensorDesc &p, const std::vector<int64_t> &coords) {
    std::vector<float> local(p.numElements(), 0.0f);
    forEachRun(blockOf(m, p, coords), [&](int64_t l, int64_t g, int64_t count) {
      for (int64_t i = 0; i < count; ++i)
        local[l + i] = global[p.name][g + i];
    });
    return local;
  };
  fs::path dir = fs::temp_directory_path() /
                 ("tessel-zero-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string file = (dir / "ck.safetensors").string();
  std::string failure = onLocalWorld(m, [&](int32_t rank, RankRuntime &rt) {
    std::vector<int64_t> coords = m.mesh->coordinates(rank);
    for (const TensorDesc *p : m.withRole("param")) {
      std::vector<float> local = chunkOf(*p, coords);
      tessel_copy_to_device(rt.ctx, static_cast<char *>(rt.arena) + p->offset,
                            local.data(), p->bytes);
    }
    std::map<std::string, std::vector<char>> tensors =
        gatherCheckpoint(m, rt.ctx, rt.arena, false, rank == 0);
    if (rank != 0)
      return;
    for (auto &[name, bytes] : tensors) {
      std::vector<float> values(bytes.size() / 4);
      std::memcpy(values.data(), bytes.data(), bytes.size());
      if (values != global[name])
        throw RunError("gathered '" + name + "' differs");
    }
    writeSafetensorsAtomically(file, m, tensors, {}, false);
  });
  ASSERT_EQ(failure, "");
  CheckpointReader reader(file, m, false);
  for (int64_t r = 0; r < 4; ++r) {
    std::vector<int64_t> coords = m.mesh->coordinates(r);
    RankRuntime rt(m.arenaBytes);
    reader.load(rt.ctx, rt.arena, coords);
    for (const TensorDesc *p : m.withRole("param"))
      EXPECT_EQ(readFloats(rt.ctx, rt.arena, *p), chunkOf(*p, coords))
          << p->name << " rank " << r;
  }
  fs::remove_all(dir);
}

// Tests that a rank failing outside a collective stops the others at their
// next one with its message instead of leaving them waiting.
TEST(ShardedBlocks, AFailedRankAbortsThePeersWaitingInAGather) {
  ModelDesc m =
      parse(describe(mesh2x2, {{"w", "param", {3, 2}, {{"tp"}, {"dp"}}}}));
  std::vector<std::string> errors(4);
  std::string failure = onLocalWorld(m, [&](int32_t rank, RankRuntime &rt) {
    if (rank == 2)
      throw RunError("disk full");
    try {
      gatherCheckpoint(m, rt.ctx, rt.arena, false, rank == 0);
    } catch (const RunError &e) {
      errors[rank] = e.what();
      throw;
    }
  });
  // Rank 2 records its failure before it aborts the world, so it is first;
  // every peer that waited for rank 2 names it.
  EXPECT_EQ(failure, "rank 2: disk full");
  for (int r : {0, 1, 3}) {
    if (!errors[r].empty()) {
      EXPECT_NE(errors[r].find("rank 2 failed: disk full"), std::string::npos)
          << errors[r];
    }
  }
  EXPECT_FALSE(errors[0].empty()) << "rank 0 waits for rank 2 over tp or dp";
}

} // namespace
