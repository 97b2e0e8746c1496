//===- ShardedCheckpointTest.cpp - --save-sharded and --load DIR ----------===//
//
// A checkpoint as one file per rank plus an index: saved by every rank of
// a mesh (threads or MPI processes) without gathering, swapped in at once
// over an existing directory, and loaded on any other mesh, or one device,
// exactly as the one global file --save writes loads. The bad directories
// fail with one line naming the file at fault before anything is written.
// The hand-written index with ZeRO pieces checks the assembly on its own.
//
//===----------------------------------------------------------------------===//

#include "runtime/launcher/ShardedCheckpoint.h"
#include "runtime/launcher/Error.h"
#include "runtime/launcher/MeshBlocks.h"
#include "runtime/launcher/ModelDescription.h"
#include "runtime/launcher/Ranks.h"
#include "runtime/launcher/Safetensors.h"
#include "test/launcher/LauncherTestSupport.h"
#include "test/launcher/LibraryTestSupport.h"
#include "test/launcher/MeshTestSupport.h"

#include <csignal>
#include <fcntl.h>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <unistd.h>
#include <utime.h>

using namespace tessel::run;
using namespace tessel::run::test;
using tessel::run::meshtest::meshJson;
using tessel::run::meshtest::zeroJson;

namespace {

const std::string oneDevice = quote(FAKE_TRAIN_MODEL_BATCH_16);
const std::string dp2 = quote(FAKE_SHARDED_DP2);
const std::string tp2 = quote(FAKE_SHARDED_TP2);
const std::string dp2tp2 = quote(FAKE_SHARDED_DP2_TP2);
const std::string dp4 = quote(FAKE_SHARDED_DP4);
// Adam's moments ZeRO-sharded over dp, dims 1: [4, 3] chunks of the [4, 5]
// block on dp=2,tp=2; [8, 2] on dp=4, the last rank's all padding.
const std::string dp2tp2Zero = quote(FAKE_SHARDED_DP2_TP2_ZERO);
const std::string dp4Zero = quote(FAKE_SHARDED_DP4_ZERO);

//===--- The format, in the library ---------------------------------------===//

/// A one-parameter evaluation description: "w" of `shape` (the stored
/// one), with `extra` fields, on `mesh` (null: one device).
ModelDesc oneParamModel(const json &mesh, const std::vector<int64_t> &shape,
                        const json &extra = json::object()) {
  json w = {{"name", "w"},
            {"role", "param"},
            {"dtype", "f32"},
            {"shape", shape},
            {"offset", 0},
            {"bytes", product(shape) * 4},
            {"init", {{"kind", "zeros"}}}};
  for (auto &[key, value] : extra.items())
    w[key] = value;
  int64_t loss = (product(shape) * 4 + 63) / 64 * 64;
  json j = {{"abi_version", 3},
            {"entry", "tessel_forward"},
            {"arena_bytes", loss + 64},
            {"tensors",
             {w,
              {{"name", "loss"},
               {"role", "loss"},
               {"dtype", "f32"},
               {"shape", json::array()},
               {"offset", loss},
               {"bytes", 4}}}}};
  if (!mesh.is_null())
    j["mesh"] = mesh;
  return parseModelDescription(j.dump(), "m.so");
}

/// A fresh folder, removed with the object.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string pattern =
        (fs::temp_directory_path() / "tessel-sharded-XXXXXX").string();
    EXPECT_NE(::mkdtemp(pattern.data()), nullptr);
    path = pattern;
  }
  ~TempDir() { fs::remove_all(path); }
};

/// Writes one shard file of float tensors (name, shape, values).
void writeShard(const fs::path &file,
                const std::vector<std::tuple<std::string, std::vector<int64_t>,
                                             std::vector<float>>> &tensors,
                const std::map<std::string, std::string> &metadata) {
  std::vector<SafetensorsEntry> entries;
  for (auto &[name, shape, values] : tensors)
    entries.push_back({name, TESSEL_F32, shape});
  std::FILE *f = std::fopen(file.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  writeSafetensors(f, file.string(), entries, metadata,
                   [&](size_t i, std::vector<char> &bytes) {
                     const std::vector<float> &v = std::get<2>(tensors[i]);
                     bytes.resize(v.size() * 4);
                     std::memcpy(bytes.data(), v.data(), bytes.size());
                   });
  std::fclose(f);
}

std::vector<float> floatsAt(tessel_ctx *ctx, const void *arena,
                            const TensorDesc &t) {
  std::vector<float> out(size_t(t.numElements()));
  tessel_copy_to_host(ctx, out.data(),
                      static_cast<const char *>(arena) + t.offset, t.bytes);
  return out;
}

// Tests that a hand-written index with ZeRO pieces — [10] over dp=4 with
// dims 0 (s = 3, the last rank's chunk one element and two of padding), and
// a [3, 8] tensor split over tp with its block's rows chunked over dp
// (dims 1) — reassembles the global tensors, and loads onto one device and
// onto another ZeRO layout as their blocks.
TEST(ShardedIndex, HandWrittenZeroPiecesAssemble) {
  TempDir tmp;
  std::vector<float> bias(10), weight(24);
  for (int i = 0; i < 10; ++i)
    bias[i] = float(100 + i);
  for (int i = 0; i < 24; ++i)
    weight[i] = float(i);
  const std::string id = "0123456789abcdef0123456789abcdef";
  // Mesh dp=2,tp=2 for the weight; the bias over both axes (G = 4).
  for (int r = 0; r < 4; ++r) {
    int dp = r / 2, tp = r % 2;
    // Bias chunk g = r (dp slower): elements [3r, 3r + 3) of 10, padded.
    std::vector<float> b(3, 0.0f);
    for (int i = 0; i < 3; ++i)
      if (3 * r + i < 10)
        b[i] = bias[3 * r + i];
    // Weight block: columns [4 tp, 4 tp + 4) of each of 3 rows; dp holds
    // columns [2 dp, 2 dp + 2) of the block's row.
    std::vector<float> w;
    for (int row = 0; row < 3; ++row)
      for (int c = 0; c < 2; ++c)
        w.push_back(weight[row * 8 + 4 * tp + 2 * dp + c]);
    writeShard(tmp.path / shardFileName(r, 4),
               {{"fc2.bias", {3}, b}, {"fc2.weight", {3, 2}, w}},
               {{"tessel.run_id", id}, {"tessel.rank", std::to_string(r)}});
  }
  json index = json::parse(R"({
    "format": "tessel-sharded-checkpoint", "version": 1,
    "run_id": "0123456789abcdef0123456789abcdef", "metadata": {},
    "mesh": {"axes": ["dp", "tp"], "shape": [2, 2]},
    "files": [
      {"rank": 0, "file": "rank-0-of-4.safetensors", "coordinates": [0, 0]},
      {"rank": 1, "file": "rank-1-of-4.safetensors", "coordinates": [0, 1]},
      {"rank": 2, "file": "rank-2-of-4.safetensors", "coordinates": [1, 0]},
      {"rank": 3, "file": "rank-3-of-4.safetensors", "coordinates": [1, 1]}],
    "tensors": [
      {"name": "fc2.bias", "role": "param", "dtype": "f32",
       "global_shape": [10],
       "pieces": [{"ranks": [0, 1, 2, 3], "key": "fc2.bias", "shape": [3],
                   "zero": {"axes": ["dp", "tp"], "dims": 0,
                            "block": [10]}}]},
      {"name": "fc2.weight", "role": "param", "dtype": "f32",
       "global_shape": [3, 8],
       "pieces": [{"ranks": [0, 1, 2, 3], "key": "fc2.weight",
                   "shape": [3, 2], "sharding": [[], ["tp"]],
                   "zero": {"axes": ["dp"], "dims": 1, "block": [3, 4]}}]}]
  })");
  writeFile(tmp.path / "index.json", index.dump());

  ShardedCheckpoint sharded(tmp.path.string());
  std::map<std::string, SafetensorsFile::Entry> entries =
      sharded.globalEntries();
  EXPECT_EQ(entries.at("fc2.weight").shape, (std::vector<int64_t>{3, 8}));
  std::vector<float> out(10);
  sharded.assemble("fc2.bias", reinterpret_cast<char *>(out.data()));
  EXPECT_EQ(out, bias);
  out.assign(24, -1.0f);
  sharded.assemble("fc2.weight", reinterpret_cast<char *>(out.data()));
  EXPECT_EQ(out, weight);
  // The source layout is a model description's: rank 3's bias chunk.
  const ModelDesc &layout = sharded.layoutOfRank(3);
  TensorBlock block =
      blockOf(layout, layout.tensors[0], sharded.coordinatesOfRank(3));
  EXPECT_EQ(block.zeroFirst, 9);
  EXPECT_EQ(block.localElements(), 1);

  // Loaded onto one device: the global tensors.
  json model = json::parse(R"({
    "abi_version": 3, "entry": "f", "arena_bytes": 256, "tensors": [
      {"name": "fc2.bias", "role": "param", "dtype": "f32", "shape": [10],
       "offset": 0, "bytes": 40},
      {"name": "fc2.weight", "role": "param", "dtype": "f32",
       "shape": [3, 8], "offset": 64, "bytes": 96},
      {"name": "loss", "role": "loss", "dtype": "f32", "shape": [],
       "offset": 192, "bytes": 4}]})");
  ModelDesc one = parseModelDescription(model.dump(), "one.so");
  CheckpointReader reader(tmp.path.string(), one, false);
  RankRuntime rt(one.arenaBytes);
  reader.load(rt.ctx, rt.arena);
  EXPECT_EQ(floatsAt(rt.ctx, rt.arena, one.tensors[0]), bias);
  EXPECT_EQ(floatsAt(rt.ctx, rt.arena, one.tensors[1]), weight);

  // A model without those tensors is refused naming the index.
  std::string error = errorOf([&] {
    CheckpointReader(tmp.path.string(), oneParamModel(nullptr, {10}), false);
  });
  EXPECT_NE(error.find("checkpoint '" + (tmp.path / "index.json").string() +
                       "': missing parameters w; unexpected keys fc2.bias, "
                       "fc2.weight"),
            std::string::npos)
      << error;
  // A missing shard is named.
  fs::remove(tmp.path / shardFileName(0, 4));
  error = errorOf([&] { ShardedCheckpoint again(tmp.path.string()); });
  EXPECT_NE(error.find("checkpoint '" +
                       (tmp.path / shardFileName(0, 4)).string() +
                       "' (rank 0's shard, listed in '"),
            std::string::npos)
      << error;
}

// Tests that saveShardedCheckpoint on a ZeRO layout (every rank of a local
// world writing its chunk) and --load of the directory onto one device and
// onto another ZeRO layout give the global tensor and the chunks.
TEST(ShardedIndex, ZeroChunksSaveAndLoadOnOtherLayouts) {
  TempDir tmp;
  std::string dir = (tmp.path / "ck").string();
  // [3, 7] over dp=4, dims 1: s = 2, the last chunk one column of padding.
  ModelDesc zero = oneParamModel(meshJson({"dp"}, {4}), {3, 2},
                                 {{"zero", zeroJson({"dp"}, 1, {3, 7})}});
  std::vector<float> global(21);
  for (int i = 0; i < 21; ++i)
    global[i] = float(i) + 0.5f;
  std::string failure = onLocalWorld(zero, [&](int32_t r, RankRuntime &rt) {
    const TensorDesc &w = zero.tensors[0];
    std::vector<float> chunk(size_t(w.numElements()), 0.0f);
    forEachRun(blockOf(zero, w, {r}),
               [&](int64_t l, int64_t g, int64_t count) {
                 for (int64_t i = 0; i < count; ++i)
                   chunk[l + i] = global[g + i];
               });
    tessel_copy_to_device(rt.ctx, rt.arena, chunk.data(), w.bytes);
    saveShardedCheckpoint(
        dir, zero, r, rt.ctx, [&](int) { return rt.arena; },
        {{"seed", "3"}}, false);
  });
  ASSERT_EQ(failure, "");
  for (const auto &entry : fs::directory_iterator(tmp.path))
    EXPECT_EQ(entry.path().filename(), "ck") << "a temporary left behind";
  // Each rank's file holds its chunk, padding included.
  Checkpoint last = readCheckpoint(fs::path(dir) / shardFileName(3, 4));
  EXPECT_EQ(last.header["w"]["shape"], json({3, 2}));
  EXPECT_EQ(floatsOf(last.tensors["w"]),
            (std::vector<float>{6.5f, 0, 13.5f, 0, 20.5f, 0}));

  ModelDesc one = oneParamModel(nullptr, {3, 7});
  CheckpointReader reader(dir, one, false);
  RankRuntime rt(one.arenaBytes);
  reader.load(rt.ctx, rt.arena);
  EXPECT_EQ(floatsAt(rt.ctx, rt.arena, one.tensors[0]), global);
  // Onto dp=2,tp=2 with the rows split over tp and chunked over dp.
  // Global shapes that are not the checkpoint's are refused.
  ModelDesc other = oneParamModel(meshJson({"dp", "tp"}, {2, 2}), {2, 4},
                                  json::parse(R"({"sharding": [["tp"], []],
                      "zero": {"axes": ["dp"], "dims": 1, "block": [2, 7]}})"));
  std::string error = errorOf([&] { CheckpointReader(dir, other, false); });
  EXPECT_NE(error.find("parameter 'w' has shape [3, 7], the model expects "
                       "[4, 7]"),
            std::string::npos)
      << error;
  ModelDesc rows = oneParamModel(meshJson({"dp", "tp"}, {2, 2}), {3, 4},
                                 json::parse(R"({"sharding": [[], ["tp"]]})"));
  error = errorOf([&] { CheckpointReader(dir, rows, false); });
  EXPECT_NE(error.find("has shape [3, 7], the model expects [3, 8]"),
            std::string::npos)
      << error;
  ModelDesc dp2zero = oneParamModel(meshJson({"dp"}, {2}), {3, 4},
                                    {{"zero", zeroJson({"dp"}, 1, {3, 7})}});
  CheckpointReader again(dir, dp2zero, false);
  for (int64_t r = 0; r < 2; ++r) {
    RankRuntime local(dp2zero.arenaBytes);
    again.load(local.ctx, local.arena, {r});
    std::vector<float> expected(12, 0.0f);
    for (int row = 0; row < 3; ++row)
      for (int c = 0; c < 4 && 4 * r + c < 7; ++c)
        expected[row * 4 + c] = global[row * 7 + 4 * r + c];
    EXPECT_EQ(floatsAt(local.ctx, local.arena, dp2zero.tensors[0]), expected)
        << "rank " << r;
  }
}

//===--- tessel-run --save-sharded, --load DIR ----------------------------===//

class ShardedRunTest : public TesselRunTest {
protected:
  /// Runs tessel-run with `args` and expects success.
  void ok(const std::string &args) {
    RunResult r = run(args + " --quiet");
    ASSERT_EQ(r.exitCode, 0) << args << "\n" << r.err;
    EXPECT_EQ(r.err, "") << args;
  }

  /// The tensors of the one-file checkpoint at `name`.
  std::map<std::string, std::string> tensorsOf(const std::string &name) {
    return readCheckpoint(dir / name).tensors;
  }

  std::string indexText(const std::string &sharded) {
    return readFile(dir / sharded / "index.json");
  }

  /// Every entry of the test folder whose name has ".tmp.".
  std::vector<std::string> temporaries() {
    std::vector<std::string> out;
    for (const auto &entry : fs::directory_iterator(dir))
      if (entry.path().filename().string().find(".tmp.") != std::string::npos)
        out.push_back(entry.path().filename());
    return out;
  }
};

// Tests that a sharded checkpoint of dp=2,tp=2 (tp-split and replicated
// tensors, no ZeRO) holds each rank's blocks, and loads on one device, on
// dp=2 and on the other fakes exactly as the global file --save wrote at
// the same step: the same loaded parameters bit for bit, and 2 more
// training steps to the same checkpoint and losses.
TEST_F(ShardedRunTest, LoadsOnAnyMeshAsTheGlobalFile) {
  ok(dp2tp2 + " --steps 2 --save " + path("global.st") + " --save-sharded " +
     path("sharded"));
  EXPECT_EQ(temporaries(), std::vector<std::string>{});
  // Rank 1 (dp 0, tp 1) holds rows 4..7 of W and the whole frozen vector.
  Checkpoint shard = readCheckpoint(dir / "sharded" / shardFileName(1, 4));
  EXPECT_EQ(shard.header["fc.weight"]["shape"], json({4, 5}));
  EXPECT_EQ(shard.header["fc.weight.m"]["shape"], json({4, 5}));
  EXPECT_EQ(shard.header["fc.frozen"]["shape"], json({3}));
  EXPECT_EQ(shard.header["__metadata__"]["tessel.step"], "2");
  EXPECT_EQ(shard.header["__metadata__"]["tessel.rank"], "1");
  Checkpoint global = readCheckpoint(dir / "global.st");
  std::vector<float> w = floatsOf(global.tensors["fc.weight"]);
  EXPECT_EQ(floatsOf(shard.tensors["fc.weight"]),
            std::vector<float>(w.begin() + 20, w.end()));
  json index = json::parse(indexText("sharded"));
  EXPECT_EQ(index["step"], 2);
  EXPECT_EQ(index["mesh"],
            json::parse(R"({"axes":["dp","tp"],"shape":[2,2]})"));
  EXPECT_EQ(index["run_id"].get<std::string>(),
            shard.header["__metadata__"]["tessel.run_id"].get<std::string>());

  for (const std::string &model : {oneDevice, dp2, tp2, dp4, dp2tp2}) {
    SCOPED_TRACE(model);
    // The parameters as loaded (an evaluation saves them unchanged).
    ok(model + " --eval --steps 1 --load " + path("global.st") + " --save " +
       path("a.st"));
    ok(model + " --eval --steps 1 --load " + path("sharded") + " --save " +
       path("b.st"));
    EXPECT_EQ(tensorsOf("a.st"), tensorsOf("b.st"));
    // Training continues from the same state (step count, moments).
    std::vector<json> a =
        metricLines(model + " --steps 2 --load " + path("global.st") +
                    " --save " + path("a.st"));
    std::vector<json> b =
        metricLines(model + " --steps 2 --load " + path("sharded") +
                    " --save " + path("b.st"));
    ASSERT_EQ(a.size(), 2u);
    ASSERT_EQ(b.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(a[i]["step"], 3 + int(i));
      EXPECT_EQ(a[i]["step"], b[i]["step"]);
      EXPECT_EQ(a[i]["loss"], b[i]["loss"]);
    }
    EXPECT_EQ(readFile(dir / "a.st"), readFile(dir / "b.st"));
  }
  // A sharded checkpoint of one device is one file plus the index.
  ok(oneDevice + " --steps 2 --save " + path("one.st") + " --save-sharded " +
     path("one"));
  EXPECT_TRUE(fs::exists(dir / "one" / shardFileName(0, 1)));
  ok(dp2tp2 + " --eval --steps 1 --load " + path("one") + " --save " +
     path("c.st"));
  ok(dp2tp2 + " --eval --steps 1 --load " + path("one.st") + " --save " +
     path("d.st"));
  EXPECT_EQ(tensorsOf("c.st"), tensorsOf("d.st"));
}

// Tests that ZeRO-1 runs (moments chunked over dp, padded) train, gather
// (--save) and save sharded exactly what the same meshes without ZeRO do,
// and that checkpoints move between ZeRO and plain layouts, both ways, bit
// for bit.
TEST_F(ShardedRunTest, ZeroRunsSaveAndLoadAsPlainOnes) {
  for (auto [plain, zero] :
       {std::pair{dp2tp2, dp2tp2Zero}, std::pair{dp4, dp4Zero}}) {
    SCOPED_TRACE(zero);
    fs::remove_all(dir / "zero");
    ok(plain + " --steps 3 --save " + path("plain.st"));
    ok(zero + " --steps 3 --save " + path("zero.st") + " --save-sharded " +
       path("zero"));
    EXPECT_EQ(readFile(dir / "zero.st"), readFile(dir / "plain.st"));
    // The sharded directory holds the chunks and loads as the file.
    for (const std::string &model : {oneDevice, dp2tp2, dp4Zero}) {
      ok(model + " --steps 2 --load " + path("zero") + " --save " +
         path("a.st"));
      ok(model + " --steps 2 --load " + path("zero.st") + " --save " +
         path("b.st"));
      EXPECT_EQ(readFile(dir / "a.st"), readFile(dir / "b.st")) << model;
    }
    // A file loaded into the ZeRO layout continues as the plain one.
    ok(zero + " --steps 2 --load " + path("plain.st") + " --save " +
       path("a.st"));
    ok(plain + " --steps 2 --load " + path("plain.st") + " --save " +
       path("b.st"));
    EXPECT_EQ(readFile(dir / "a.st"), readFile(dir / "b.st"));
  }
  json index = json::parse(indexText("zero"));
  const json &m = index["tensors"][2];
  EXPECT_EQ(m["name"], "fc.weight.m");
  EXPECT_EQ(m["pieces"][0]["zero"],
            json::parse(R"({"axes": ["dp"], "dims": 1, "block": [8, 5]})"));
  Checkpoint last = readCheckpoint(dir / "zero" / shardFileName(3, 4));
  EXPECT_EQ(last.header["fc.weight.m"]["shape"], json({8, 2}));
  EXPECT_EQ(floatsOf(last.tensors["fc.weight.m"]),
            std::vector<float>(16, 0.0f)); // Padding only.
  Checkpoint first = readCheckpoint(dir / "zero" / shardFileName(0, 4));
  EXPECT_NE(floatsOf(first.tensors["fc.weight.m"]),
            std::vector<float>(16, 0.0f));
}

// Tests that a save over an existing sharded checkpoint (every step with
// --save-every 1) leaves the last one, whole, with no temporary directory;
// that stale temporaries of dead writers go while a live writer's stays;
// and that a directory which is not a sharded checkpoint is refused before
// the first step and left alone.
TEST_F(ShardedRunTest, SavingOverADirectoryKeepsItWhole) {
  ok(dp2 + " --steps 2 --save-sharded " + path("ck"));
  std::string first = json::parse(indexText("ck"))["run_id"];
  // A dead writer's temporary (an hour old) and a live one's.
  pid_t dead = ::fork();
  if (dead == 0)
    ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  std::string deadName = "ck.tmp." + std::to_string(dead) + ".abcdef";
  std::string liveName = "ck.tmp." + std::to_string(::getpid()) + ".abcdef";
  for (const std::string &name : {deadName, liveName}) {
    fs::create_directory(dir / name);
    writeFile(dir / name / "rank-0-of-2.safetensors", "partial");
    struct utimbuf old = {::time(nullptr) - 3600, ::time(nullptr) - 3600};
    ASSERT_EQ(::utime((dir / name).c_str(), &old), 0);
  }
  ok(dp2 + " --steps 3 --save-every 1 --load " + path("ck") +
     " --save-sharded " + path("ck") + " --save " + path("ck.st"));
  json index = json::parse(indexText("ck"));
  EXPECT_EQ(index["step"], 5);
  EXPECT_NE(index["run_id"], first);
  EXPECT_EQ(temporaries(), std::vector<std::string>{liveName});
  std::set<std::string> files;
  for (const auto &entry : fs::directory_iterator(dir / "ck"))
    files.insert(entry.path().filename());
  EXPECT_EQ(files, (std::set<std::string>{"index.json", shardFileName(0, 2),
                                          shardFileName(1, 2)}));
  // The directory is the run's last state: it loads as the file does.
  ok(oneDevice + " --eval --steps 1 --load " + path("ck") + " --save " +
     path("a.st"));
  ok(oneDevice + " --eval --steps 1 --load " + path("ck.st") + " --save " +
     path("b.st"));
  EXPECT_EQ(tensorsOf("a.st"), tensorsOf("b.st"));

  // Not a sharded checkpoint: refused at once, untouched.
  fs::create_directory(dir / "mine");
  writeFile(dir / "mine" / "notes.txt", "keep me");
  RunResult r = run(dp2 + " --steps 1000000000 --save-sharded " + path("mine"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_TRUE(isOneLine(r.err)) << r.err;
  EXPECT_NE(r.err.find("cannot write --save-sharded directory '" +
                       (dir / "mine").string() +
                       "': it exists and is not a sharded checkpoint (no "
                       "index.json): refusing to replace it"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(readFile(dir / "mine" / "notes.txt"), "keep me");
  writeFile(dir / "file", "x");
  r = run(dp2 + " --steps 1 --save-sharded " + path("file"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("it exists and is not a directory"), std::string::npos)
      << r.err;
  // An output that is an input is a usage error, as for --save.
  r = run(dp2 + " --steps 1 --save-sharded " + dp2);
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("is the model"), std::string::npos) << r.err;
  // --save-every needs one of the two.
  r = run(dp2 + " --save-every 2");
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("--save-every needs --save FILE or --save-sharded DIR"),
            std::string::npos)
      << r.err;
  // An empty directory is fine (a new checkpoint's place).
  fs::create_directory(dir / "empty");
  ok(dp2 + " --steps 1 --save-sharded " + path("empty") + "/");
  EXPECT_TRUE(fs::exists(dir / "empty" / "index.json"));
}

// Tests that kill -9 at random moments of a --save-every 1 run over an
// existing sharded checkpoint always leaves a whole one that loads.
TEST_F(ShardedRunTest, KillNineAlwaysLeavesALoadableDirectory) {
  std::mt19937 random(2024);
  fs::path metrics = dir / "m.jsonl";
  for (int trial = 0; trial < 8; ++trial) {
    fs::remove(metrics);
    fs::path err = dir / "spawn.txt";
    pid_t pid = ::fork();
    if (pid == 0) {
      int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, STDERR_FILENO);
      ::execl(TESSEL_RUN_PATH, TESSEL_RUN_PATH, FAKE_SHARDED_DP2_TP2, "--steps",
              "1000000000", "--quiet", "--metrics", metrics.c_str(),
              "--save-sharded", (dir / "ck").c_str(), "--save-every", "1",
              static_cast<char *>(nullptr));
      ::_exit(127);
    }
    for (int i = 0;
         i < 20000 && readFile(metrics).find('\n') == std::string::npos; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::microseconds(random() % 20000));
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    if (!fs::exists(dir / "ck"))
      continue; // Killed before the first save.
    RunResult r = run(oneDevice + " --steps 1 --quiet --load " + path("ck"));
    EXPECT_EQ(r.exitCode, 0) << "trial " << trial << ": " << r.err;
  }
}

// Tests that each broken sharded checkpoint fails with one line naming the
// file at fault, before anything is written.
TEST_F(ShardedRunTest, BadDirectoriesNameTheFileAndWriteNothing) {
  ok(dp2tp2 + " --steps 2 --save-sharded " + path("good"));
  ok(dp2tp2 + " --steps 1 --save-sharded " + path("other"));
  std::string goodIndex = indexText("good");
  struct Case {
    const char *what;
    std::function<void(const fs::path &)> edit;
    std::string file;    // the file the error names
    std::string message; // after it
  };
  auto editIndex = [](const fs::path &ck,
                      const std::function<void(json &)> &edit) {
    json index = json::parse(readFile(ck / "index.json"));
    edit(index);
    writeFile(ck / "index.json", index.dump());
  };
  std::vector<Case> cases = {
      {"missing shard",
       [](const fs::path &ck) { fs::remove(ck / shardFileName(1, 4)); },
       shardFileName(1, 4), " (rank 1's shard, listed in '"},
      {"truncated shard",
       [](const fs::path &ck) {
         std::string bytes = readFile(ck / shardFileName(2, 4));
         writeFile(ck / shardFileName(2, 4), bytes.substr(0, bytes.size() - 8));
       },
       shardFileName(2, 4), ": truncated"},
      {"piece shape",
       [&](const fs::path &ck) {
         editIndex(ck, [](json &j) {
           j["tensors"][0]["pieces"][0]["shape"] = {2, 5};
         });
       },
       shardFileName(0, 4),
       ": tensor 'fc.weight' has shape [4, 5], index.json says [2, 5]"},
      {"another save's shard",
       [&](const fs::path &ck) {
         fs::copy_file(dir / "other" / shardFileName(3, 4),
                       ck / shardFileName(3, 4),
                       fs::copy_options::overwrite_existing);
       },
       shardFileName(3, 4), "is not index.json's"},
      {"a tensor the model lacks",
       [&](const fs::path &ck) {
         editIndex(ck, [](json &j) { j["tensors"][1]["name"] = "fc.other"; });
       },
       "index.json",
       ": missing parameters fc.frozen; unexpected keys fc.other"},
      {"a global shape",
       [&](const fs::path &ck) {
         editIndex(ck, [](json &j) {
           j["tensors"][0]["global_shape"] = {8, 6};
         });
       },
       "index.json",
       ": rank 0's tensor 'fc.weight': \"global_shape\" [8, 6] is not its "
       "shape [4, 5] times its splits [8, 5]"},
      {"a piece missing",
       [&](const fs::path &ck) {
         editIndex(ck, [](json &j) {
           j["tensors"][0]["pieces"][0]["ranks"] = {0, 2, 3};
         });
       },
       shardFileName(1, 4), ": tensor 'fc.weight' is not in index.json"},
      {"a corrupt index",
       [](const fs::path &ck) { writeFile(ck / "index.json", "{\"format"); },
       "index.json", ": corrupt index"},
      {"no index", [](const fs::path &ck) { fs::remove(ck / "index.json"); },
       "", " is a directory without index.json"},
  };
  writeFile(dir / "out.st", "keep me");
  fs::copy(dir / "good", dir / "kept");
  std::string keptIndex = indexText("kept");
  for (const Case &c : cases) {
    SCOPED_TRACE(c.what);
    fs::path ck = dir / "bad";
    fs::remove_all(ck);
    fs::copy(dir / "good", ck);
    c.edit(ck);
    for (const std::string &model : {oneDevice, dp2}) {
      RunResult r = run(model + " --steps 1 --load " + path("bad") +
                        " --save " + path("out.st") + " --save-sharded " +
                        path("kept") + " --metrics " + path("m.jsonl"));
      EXPECT_EQ(r.exitCode, 1);
      EXPECT_TRUE(isOneLine(r.err)) << r.err;
      std::string named =
          "tessel-run: error: checkpoint '" +
          (c.file.empty() ? ck.string() : (ck / c.file).string()) + "'";
      EXPECT_EQ(r.err.find(named), 0u)
          << "expected: " << named << "\n got: " << r.err;
      EXPECT_NE(r.err.find(c.message), std::string::npos)
          << "expected: " << c.message << "\n got: " << r.err;
      EXPECT_EQ(readFile(dir / "out.st"), "keep me");
      EXPECT_EQ(indexText("kept"), keptIndex);
      EXPECT_FALSE(fs::exists(dir / "m.jsonl"));
    }
    EXPECT_EQ(temporaries(), std::vector<std::string>{});
  }
  EXPECT_EQ(indexText("good"), goodIndex);
}

// Tests that a stop signal saves the sharded checkpoint too, and names it.
TEST_F(ShardedRunTest, ASignalSavesTheDirectory) {
  fs::path metrics = dir / "m.jsonl", err = dir / "spawn.txt";
  pid_t pid = ::fork();
  if (pid == 0) {
    int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, STDERR_FILENO);
    ::execl(TESSEL_RUN_PATH, TESSEL_RUN_PATH, FAKE_SHARDED_DP2_TP2, "--steps",
            "1000000000", "--quiet", "--metrics", metrics.c_str(), "--save",
            (dir / "ck.st").c_str(), "--save-sharded", (dir / "ck").c_str(),
            static_cast<char *>(nullptr));
    ::_exit(127);
  }
  for (int i = 0;
       i < 20000 && readFile(metrics).find('\n') == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_EQ(WEXITSTATUS(status), 143);
  std::string text = readFile(err);
  EXPECT_TRUE(isOneLine(text)) << text;
  EXPECT_NE(text.find("; saved '" + (dir / "ck.st").string() + "' and '" +
                      (dir / "ck").string() + "'"),
            std::string::npos)
      << text;
  int64_t step = json::parse(indexText("ck"))["step"];
  EXPECT_EQ(readCheckpoint(dir / "ck.st").header["__metadata__"]["tessel.step"],
            std::to_string(step));
}

// Tests that MPI processes (each writing its own file, the temporary
// directory's name and the run id handed out by rank 0) save what threads
// save.
TEST_F(ShardedRunTest, MpiProcessesSaveWhatThreadsSave) {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "mpirun not found";
  RunResult r = runShell("mpirun --allow-run-as-root --oversubscribe -np 1 " +
                         quote(TESSEL_RUN_PATH) + " " + oneDevice +
                         " --steps 1 --quiet --comm mpi");
  if (r.err.find("without MPI") != std::string::npos)
    GTEST_SKIP() << r.err;
  r = runShell("mpirun --allow-run-as-root --oversubscribe -np 4 " +
               quote(TESSEL_RUN_PATH) + " " + dp2tp2 +
               " --comm mpi --steps 2 --quiet --save-sharded " + path("mpi"));
  ASSERT_EQ(r.exitCode, 0) << r.err;
  ok(dp2tp2 + " --steps 2 --save-sharded " + path("threads"));
  for (int rank = 0; rank < 4; ++rank) {
    Checkpoint a = readCheckpoint(dir / "mpi" / shardFileName(rank, 4));
    Checkpoint b = readCheckpoint(dir / "threads" / shardFileName(rank, 4));
    EXPECT_EQ(a.tensors, b.tensors) << "rank " << rank;
  }
  EXPECT_EQ(temporaries(), std::vector<std::string>{});
  ok(oneDevice + " --steps 1 --load " + path("mpi"));
}

} // namespace
