//===- MasterCheckpointTest.cpp - Checkpoints across precisions -----------===//
//
// A bf16 model (bf16 parameters, f32 master copies) and an f32 one read each
// other's checkpoints, through a written safetensors file and a sharded
// directory: a bf16 run's own loads as is; an f32 run's gives the master
// its exact values and the parameter them rounded; parameters only give
// the masters the stored values; an f32 run takes a bf16 checkpoint's
// masters, not its rounded parameters. Saves hold the masters. What cannot
// load stays one line naming the file, and nothing is written.
//
//===----------------------------------------------------------------------===//

#include "runtime/launcher/Arena.h"
#include "runtime/launcher/Distributed.h"
#include "runtime/launcher/Error.h"
#include "runtime/launcher/Ranks.h"
#include "runtime/launcher/Safetensors.h"
#include "runtime/launcher/ShardedCheckpoint.h"
#include "test/launcher/LauncherTestSupport.h"
#include "test/launcher/LibraryTestSupport.h"
#include "test/launcher/MasterWeightsSupport.h"

#include <cstring>
#include <mutex>
#include <thread>

using namespace tessel::run;
using namespace tessel::run::test;

namespace {

/// A fresh folder, removed with the object.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string pattern =
        (fs::temp_directory_path() / "tessel-master-XXXXXX").string();
    EXPECT_NE(::mkdtemp(pattern.data()), nullptr);
    path = pattern;
  }
  ~TempDir() { fs::remove_all(path); }
  std::string operator/(const std::string &name) const {
    return (path / name).string();
  }
};

const MasterModelSpec bf16Spec = specWith("bf16");
const MasterModelSpec f32Spec = specWith("f32");

/// One device's arena of `m`: initialised from `seed`, the moments set to
/// distinct values (so a load that zeroes or skips them shows).
struct Trained {
  const ModelDesc &m;
  RankRuntime rt;
  Trained(const ModelDesc &m, uint64_t seed) : m(m), rt(m.arenaBytes) {
    initParams(m, rt.ctx, rt.arena, seed);
    zeroStates(m, rt.ctx, rt.arena);
    int k = 1;
    for (const TensorDesc *s : m.withRole("state"))
      if (!s->isMaster())
        setValues(rt.ctx, rt.arena, *s, offGridValues(s->numElements(), k++));
  }
  std::vector<float> values(const std::string &role,
                            const std::string &name) {
    return valuesAt(rt.ctx, rt.arena, tensorOf(m, role, name));
  }
  std::vector<char> bytes(const std::string &role, const std::string &name) {
    return bytesAt(rt.ctx, rt.arena, tensorOf(m, role, name));
  }
  void save(const std::string &path, bool withStates, int64_t step = 3) {
    std::map<std::string, std::string> metadata;
    if (withStates)
      metadata["tessel.step"] = std::to_string(step);
    writeSafetensorsAtomically(path, m, rt.ctx, rt.arena, metadata,
                               withStates);
  }
};

/// `model` read from `path` into a fresh arena (a training run when
/// `training`), its zeroStates after a parameters-only load as tessel-run
/// does.
struct Loaded {
  const ModelDesc &m;
  RankRuntime rt;
  LoadedCheckpoint info;
  Loaded(const std::string &path, const ModelDesc &m, bool training)
      : m(m), rt(m.arenaBytes) {
    CheckpointReader reader(path, m, training);
    reader.load(rt.ctx, rt.arena);
    if (training && reader.info().paramsOnly)
      zeroStates(m, rt.ctx, rt.arena);
    info = reader.info();
  }
  std::vector<float> values(const std::string &role,
                            const std::string &name) {
    return valuesAt(rt.ctx, rt.arena, tensorOf(m, role, name));
  }
  std::vector<char> bytes(const std::string &role, const std::string &name) {
    return bytesAt(rt.ctx, rt.arena, tensorOf(m, role, name));
  }
  std::vector<uint16_t> bits(const std::string &name) {
    return bf16BitsAt(rt.ctx, rt.arena, tensorOf(m, "param", name));
  }
};

bool allZero(const std::vector<float> &values) {
  for (float v : values)
    if (v != 0.0f)
      return false;
  return true;
}

// Tests that a bf16 run's checkpoint with its states (masters included)
// loads into a bf16 run as it is: every tensor's bytes, the step, no note.
TEST(MasterCheckpoint, Bf16CheckpointWithStatesLoadsAsIs) {
  TempDir tmp;
  ModelDesc bf16 = masterModel(bf16Spec);
  Trained before(bf16, 1);
  // A master further from its parameter than rounding: a load that
  // rebuilt it from the parameter would show.
  setValues(before.rt.ctx, before.rt.arena, tensorOf(bf16, "state", "w.master"),
            offGridValues(21, 0.3f));
  before.save(tmp / "a.safetensors", true, 4);
  Checkpoint file = readCheckpoint(tmp / "a.safetensors");
  EXPECT_EQ(file.header["w"]["dtype"], "BF16");
  EXPECT_EQ(file.header["w.master"]["dtype"], "F32");
  EXPECT_EQ(file.header["w.m"]["dtype"], "F32");

  Loaded after(tmp / "a.safetensors", bf16, true);
  EXPECT_FALSE(after.info.paramsOnly);
  EXPECT_EQ(after.info.step, 4);
  EXPECT_EQ(after.info.conversions, "");
  for (const TensorDesc *t : checkpointTensors(bf16, true))
    EXPECT_EQ(after.bytes(t->role, t->name), before.bytes(t->role, t->name))
        << t->name;
}

// Tests that an f32 Adam run's checkpoint resumes a bf16 Adam run: the
// master is the f32 parameter exactly, the parameter it rounded, the
// moments and step loaded, and the note says so.
TEST(MasterCheckpoint, F32AdamCheckpointResumesBf16Run) {
  TempDir tmp;
  ModelDesc f32 = masterModel(f32Spec), bf16 = masterModel(bf16Spec);
  Trained before(f32, 2);
  setValues(before.rt.ctx, before.rt.arena, tensorOf(f32, "param", "w"),
            offGridValues(21, 0.9f));
  before.save(tmp / "f32.safetensors", true, 6);

  Loaded after(tmp / "f32.safetensors", bf16, true);
  EXPECT_FALSE(after.info.paramsOnly);
  EXPECT_EQ(after.info.step, 6);
  EXPECT_EQ(after.bytes("state", "w.master"), before.bytes("param", "w"));
  EXPECT_EQ(after.bits("w"), roundedBits(before.values("param", "w")));
  EXPECT_EQ(after.values("state", "w.m"), before.values("state", "w.m"));
  EXPECT_EQ(after.values("state", "w.v"), before.values("state", "w.v"));
  EXPECT_EQ(after.values("param", "frozen"), before.values("param", "frozen"));
  EXPECT_EQ(after.info.conversions,
            "converted 2 parameters from F32 to BF16; set 1 master copies "
            "from the parameters (F32)");
  // As an evaluation: the parameters alone, converted alike.
  Loaded eval(tmp / "f32.safetensors", bf16, false);
  EXPECT_EQ(eval.bits("w"), roundedBits(before.values("param", "w")));
  EXPECT_TRUE(allZero(eval.values("state", "w.master")));
}

// Tests that an f64 model's checkpoint of ABI 17, whose moments were f32,
// resumes the model compiled now, whose moments are f64 (ABI 18): the
// parameters as they are, the moments widened exactly, the step kept, the
// conversion named. The other way the moments would be rounded: refused in
// one line.
TEST(MasterCheckpoint, F32StatesResumeF64Model) {
  TempDir tmp;
  ModelDesc f64 = masterModel(specWith("f64"));
  EXPECT_EQ(tensorOf(f64, "state", "w.m").dtypeCode, TESSEL_F64);
  json old = masterModelJson(specWith("f64"));
  old["abi_version"] = 17;
  for (json &t : old["tensors"])
    if (t["role"] == "state" || t["role"] == "grad_scale") {
      t["dtype"] = "f32";
      t["bytes"] = t["bytes"].get<int64_t>() / 2;
    }
  ModelDesc abi17 = parseModelDescription(old.dump(), "m.so");
  Trained before(abi17, 2);
  before.save(tmp / "abi17.safetensors", true, 6);

  Loaded after(tmp / "abi17.safetensors", f64, true);
  EXPECT_EQ(after.info.step, 6);
  EXPECT_EQ(after.bytes("param", "w"), before.bytes("param", "w"));
  for (const char *state : {"w.m", "w.v"}) {
    std::vector<char> bytes = after.bytes("state", state);
    std::vector<double> got(bytes.size() / sizeof(double));
    std::memcpy(got.data(), bytes.data(), bytes.size());
    std::vector<float> stored = before.values("state", state);
    EXPECT_EQ(got, std::vector<double>(stored.begin(), stored.end())) << state;
  }
  EXPECT_EQ(after.info.conversions, "converted 2 states from F32 to F64");

  Trained wide(f64, 3);
  wide.save(tmp / "f64.safetensors", true, 2);
  try {
    CheckpointReader(tmp / "f64.safetensors", abi17, true);
    ADD_FAILURE() << "an f64 state loaded into f32";
  } catch (const RunError &e) {
    EXPECT_EQ(std::string(e.what()),
              "checkpoint '" + tmp / "f64.safetensors" +
                  "': state 'w.m' has dtype F64, the model expects F32");
  }
}

// Tests that a parameters-only checkpoint starts a bf16 training run with
// its masters from the stored values — an F32 file's exactly, a BF16 file's
// widened — and the other states at zero.
TEST(MasterCheckpoint, ParametersOnlyGiveTheMasters) {
  TempDir tmp;
  ModelDesc f32 = masterModel(f32Spec), bf16 = masterModel(bf16Spec);
  Trained f32Run(f32, 3);
  setValues(f32Run.rt.ctx, f32Run.rt.arena, tensorOf(f32, "param", "w"),
            offGridValues(21, 1.7f));
  f32Run.save(tmp / "f32-params.safetensors", false);
  Loaded fromF32(tmp / "f32-params.safetensors", bf16, true);
  EXPECT_TRUE(fromF32.info.paramsOnly);
  EXPECT_EQ(fromF32.bytes("state", "w.master"), f32Run.bytes("param", "w"));
  EXPECT_EQ(fromF32.bits("w"), roundedBits(f32Run.values("param", "w")));
  EXPECT_TRUE(allZero(fromF32.values("state", "w.m")));
  EXPECT_TRUE(allZero(fromF32.values("state", "w.v")));

  Trained bf16Run(bf16, 4);
  bf16Run.save(tmp / "bf16-params.safetensors", false);
  EXPECT_EQ(readCheckpoint(tmp / "bf16-params.safetensors").tensors.size(),
            2u);
  Loaded fromBf16(tmp / "bf16-params.safetensors", bf16, true);
  EXPECT_EQ(fromBf16.bytes("param", "w"), bf16Run.bytes("param", "w"));
  EXPECT_EQ(fromBf16.values("state", "w.master"),
            bf16Run.values("param", "w"));
  EXPECT_TRUE(allZero(fromBf16.values("state", "w.m")));
  EXPECT_EQ(fromBf16.info.conversions,
            "set 1 master copies from the parameters (BF16)");
}

// Tests that an f32 run reading a bf16 run's checkpoint takes each
// parameter from its master (exact), not from the rounded parameter, in
// training (with the moments, the master key no unexpected state) and in
// evaluation; and a bf16 parameters-only file widened.
TEST(MasterCheckpoint, Bf16CheckpointIntoF32Run) {
  TempDir tmp;
  ModelDesc f32 = masterModel(f32Spec), bf16 = masterModel(bf16Spec);
  Trained bf16Run(bf16, 5);
  bf16Run.save(tmp / "bf16.safetensors", true, 9);
  bf16Run.save(tmp / "bf16-params.safetensors", false);
  for (bool training : {true, false}) {
    Loaded run(tmp / "bf16.safetensors", f32, training);
    EXPECT_EQ(run.info.paramsOnly, !training);
    EXPECT_EQ(run.bytes("param", "w"), bf16Run.bytes("state", "w.master"))
        << training;
    EXPECT_NE(run.values("param", "w"), bf16Run.values("param", "w"));
    EXPECT_EQ(run.values("param", "frozen"), bf16Run.values("param", "frozen"));
    EXPECT_EQ(run.info.conversions,
              "converted 1 parameters from BF16 to F32; read 1 parameters "
              "from their master copies (F32)");
    if (training) {
      EXPECT_EQ(run.info.step, 9);
      EXPECT_EQ(run.bytes("state", "w.m"), bf16Run.bytes("state", "w.m"));
      EXPECT_EQ(run.bytes("state", "w.v"), bf16Run.bytes("state", "w.v"));
    }
  }
  Loaded widened(tmp / "bf16-params.safetensors", f32, true);
  EXPECT_EQ(widened.values("param", "w"), bf16Run.values("param", "w"));
  EXPECT_TRUE(allZero(widened.values("state", "w.m")));
}

// Tests that a ZeRO-1 bf16 run on dp=2 (each rank's master and moments a
// chunk) saves its masters with --save-sharded and with the gathered
// --save; that both load onto one device in bf16 as they were and in f32
// from the masters; and the directory onto the ZeRO layout again.
TEST(MasterCheckpoint, ZeroMastersThroughShardedAndGatheredSaves) {
  TempDir tmp;
  MasterModelSpec spec;
  spec.mesh = {{"axes", {"dp"}}, {"shape", {2}}};
  spec.stateShape = {3, 4};
  spec.stateExtra = {
      {"zero", {{"axes", {"dp"}}, {"dims", 1}, {"block", {3, 7}}}}};
  ModelDesc zero = masterModel(spec);
  std::vector<float> moments = offGridValues(21, 0.25f);
  std::string dir = tmp / "ck", gathered = tmp / "all.safetensors";
  std::map<std::string, std::string> metadata = {{"tessel.step", "2"}};
  std::string failure = onLocalWorld(zero, [&](int32_t r, RankRuntime &rt) {
    initParams(zero, rt.ctx, rt.arena, 8, {r});
    zeroStates(zero, rt.ctx, rt.arena);
    const TensorDesc &m = tensorOf(zero, "state", "w.m");
    std::vector<float> chunk(size_t(m.numElements()), 0.0f);
    forEachRun(blockOf(zero, m, {r}), [&](int64_t l, int64_t g, int64_t c) {
      for (int64_t i = 0; i < c; ++i)
        chunk[size_t(l + i)] = moments[size_t(g + i)];
    });
    setValues(rt.ctx, rt.arena, m, chunk);
    saveShardedCheckpoint(
        dir, zero, r, rt.ctx, [&](int) { return rt.arena; }, metadata, true);
    std::map<std::string, std::vector<char>> tensors =
        gatherCheckpoint(zero, rt.ctx, rt.arena, true, r == 0);
    if (r == 0)
      writeSafetensorsAtomically(gathered, zero, tensors, metadata, true);
  });
  ASSERT_EQ(failure, "");
  json index = json::parse(readFile(fs::path(dir) / "index.json"));
  std::map<std::string, std::string> roles;
  for (const json &t : index["tensors"])
    roles[t["name"].get<std::string>() + " " + t["dtype"].get<std::string>()] =
        t["role"];
  EXPECT_EQ(roles["w.master f32"], "state");
  EXPECT_EQ(roles["w bf16"], "param");
  EXPECT_EQ(readCheckpoint(gathered).header["w.master"]["dtype"], "F32");

  // The one device a fresh bf16 run at seed 8 is: what both must hold.
  ModelDesc bf16 = masterModel(bf16Spec), f32 = masterModel(f32Spec);
  Trained fresh(bf16, 8);
  for (const std::string &path : {dir, gathered}) {
    Loaded one(path, bf16, true);
    EXPECT_EQ(one.info.step, 2) << path;
    EXPECT_EQ(one.bytes("state", "w.master"),
              fresh.bytes("state", "w.master"))
        << path;
    EXPECT_EQ(one.bytes("param", "w"), fresh.bytes("param", "w")) << path;
    EXPECT_EQ(one.values("state", "w.m"), moments) << path;
    EXPECT_EQ(one.info.conversions, "") << path;
    Loaded asF32(path, f32, true);
    EXPECT_EQ(asF32.bytes("param", "w"), fresh.bytes("state", "w.master"))
        << path;
    EXPECT_EQ(asF32.values("state", "w.m"), moments) << path;
  }
  // Back onto the ZeRO layout: each rank's chunks as saved.
  CheckpointReader reader(dir, zero, true);
  for (int64_t r = 0; r < 2; ++r) {
    RankRuntime rt(zero.arenaBytes);
    reader.load(rt.ctx, rt.arena, {r});
    const TensorDesc &master = tensorOf(zero, "state", "w.master");
    std::vector<float> global = fresh.values("state", "w.master");
    std::vector<float> expected(size_t(master.numElements()), 0.0f);
    forEachRun(blockOf(zero, master, {r}),
               [&](int64_t l, int64_t g, int64_t c) {
                 for (int64_t i = 0; i < c; ++i)
                   expected[size_t(l + i)] = global[size_t(g + i)];
               });
    EXPECT_EQ(valuesAt(rt.ctx, rt.arena, master), expected) << "rank " << r;
  }
}

// Tests that a pipeline stage (rows [2, 4) of 6 of a stacked parameter)
// reads its rows of a whole-model checkpoint: a bf16 run's as they are, an
// f32 run's with the master rows exact and the parameter rows rounded.
TEST(MasterCheckpoint, PipelineStageReadsItsRows) {
  TempDir tmp;
  MasterModelSpec wholeSpec;
  wholeSpec.paramShape = wholeSpec.stateShape = {6, 7};
  MasterModelSpec stageSpec;
  stageSpec.mesh = {{"axes", {"pp"}}, {"shape", {2}}};
  stageSpec.paramShape = stageSpec.stateShape = {2, 7};
  stageSpec.paramExtra = stageSpec.stateExtra = {{"layers", {2, 6}}};
  ModelDesc stage = masterModel(stageSpec);
  auto rows = [](const std::vector<float> &all) {
    return std::vector<float>(all.begin() + 14, all.begin() + 28);
  };
  for (std::string dtype : {"bf16", "f32"}) {
    MasterModelSpec spec = wholeSpec;
    spec.paramDtype = dtype;
    ModelDesc whole = masterModel(spec);
    Trained run(whole, 12);
    run.save(tmp / (dtype + ".safetensors"), true, 5);
    ModelDesc bf16Whole = masterModel(wholeSpec);
    CheckpointReader reader(tmp / (dtype + ".safetensors"), bf16Whole, true);
    RankRuntime rt(stage.arenaBytes);
    reader.load(rt.ctx, rt.arena, {1}, &stage);
    std::vector<float> master =
        rows(run.values(dtype == "f32" ? "param" : "state",
                        dtype == "f32" ? "w" : "w.master"));
    EXPECT_EQ(valuesAt(rt.ctx, rt.arena, tensorOf(stage, "state", "w.master")),
              master)
        << dtype;
    EXPECT_EQ(bf16BitsAt(rt.ctx, rt.arena, tensorOf(stage, "param", "w")),
              roundedBits(master))
        << dtype;
    EXPECT_EQ(valuesAt(rt.ctx, rt.arena, tensorOf(stage, "state", "w.v")),
              rows(run.values("state", "w.v")))
        << dtype;
  }
}

// Tests that checkpoints that still cannot load fail with one line naming
// the file, before the arena is written: a dtype no conversion covers
// (F64 parameter, BF16 moment), a master of the wrong shape, a state
// mismatch that lists the moments but never the master, a truncated file.
TEST(MasterCheckpoint, BadInputsStayOneLineErrors) {
  TempDir tmp;
  ModelDesc bf16 = masterModel(bf16Spec);
  Trained good(bf16, 6);
  good.save(tmp / "good.safetensors", true);
  Checkpoint file = readCheckpoint(tmp / "good.safetensors");
  /// Writes `file`'s tensors to `name` with `edit` applied to the entries.
  auto rewrite = [&](const std::string &name,
                     const std::function<void(std::vector<SafetensorsEntry> &,
                                              std::map<std::string, std::string>
                                                  &)> &edit) {
    std::vector<SafetensorsEntry> entries;
    std::map<std::string, std::string> bytes = file.tensors;
    for (auto &[key, value] : file.header.items())
      if (key != "__metadata__")
        entries.push_back(
            {key, safetensorsDtypeCode(value["dtype"].get<std::string>()),
             value["shape"].get<std::vector<int64_t>>()});
    edit(entries, bytes);
    std::FILE *f = std::fopen((tmp / name).c_str(), "wb");
    writeSafetensors(f, tmp / name, entries, {{"tessel.step", "3"}},
                     [&](size_t i, std::vector<char> &out) {
                       const std::string &b = bytes[entries[i].name];
                       out.assign(b.begin(), b.end());
                     });
    std::fclose(f);
    return tmp / name;
  };
  auto entryOf = [](std::vector<SafetensorsEntry> &entries,
                    const std::string &name) -> SafetensorsEntry & {
    for (SafetensorsEntry &e : entries)
      if (e.name == name)
        return e;
    throw std::runtime_error("no " + name);
  };
  struct Case {
    std::string path;
    std::string message;
  };
  std::vector<Case> cases = {
      {rewrite("f64.safetensors",
               [&](auto &entries, auto &bytes) {
                 entryOf(entries, "w").dtypeCode = TESSEL_F64;
                 bytes["w"] = std::string(21 * 8, '\0');
               }),
       "parameter 'w' has dtype F64, the model expects BF16"},
      {rewrite("moment.safetensors",
               [&](auto &entries, auto &bytes) {
                 entryOf(entries, "w.m").dtypeCode = TESSEL_BF16;
                 bytes["w.m"].resize(42);
               }),
       "state 'w.m' has dtype BF16, the model expects F32"},
      {rewrite("master-shape.safetensors",
               [&](auto &entries, auto &) {
                 entryOf(entries, "w.master").shape = {7, 3};
               }),
       "state 'w.master' has shape [7, 3], the model expects [3, 7]"},
      {rewrite("no-m.safetensors",
               [&](auto &entries, auto &) {
                 for (size_t i = 0; i < entries.size(); ++i)
                   if (entries[i].name == "w.m")
                     entries.erase(entries.begin() + long(i));
               }),
       "optimizer state does not match the model's optimizer adamw: missing "
       "w.m"},
  };
  std::string good16 = readFile(tmp / "good.safetensors");
  writeFile(tmp / "short.safetensors", good16.substr(0, good16.size() - 10));
  cases.push_back({tmp / "short.safetensors", "truncated"});
  // The reader's constructor checks everything: a failure leaves no arena
  // touched.
  for (const Case &c : cases) {
    std::string error =
        errorOf([&] { CheckpointReader reader(c.path, bf16, true); });
    EXPECT_NE(error.find("checkpoint '" + c.path + "': "), std::string::npos)
        << error;
    EXPECT_NE(error.find(c.message), std::string::npos) << error;
    EXPECT_EQ(error.find("w.master,"), std::string::npos) << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  }
  // An SGD file into Adam: the moments are named, the master is not.
  ModelDesc sgd = masterModel(specWith("bf16", "sgd"));
  Trained sgdRun(sgd, 6);
  sgdRun.save(tmp / "sgd.safetensors", true);
  std::string error =
      errorOf([&] { CheckpointReader(tmp / "sgd.safetensors", bf16, true); });
  EXPECT_NE(error.find("optimizer state does not match the model's optimizer "
                       "adamw: missing w.m, w.v; unexpected w.momentum"),
            std::string::npos)
      << error;
}

//===--- tessel-run on a bf16 model -----------------------------------===//

const std::string bf16Fake = quote(FAKE_TRAIN_MODEL_BF_16);
const std::string f32Fake = quote(FAKE_TRAIN_MODEL);

class MasterRunTest : public TesselRunTest {
protected:
  /// tessel-run `args`, which must succeed; its stderr.
  std::string ok(const std::string &args) {
    RunResult r = run(args + " --quiet");
    EXPECT_EQ(r.exitCode, 0) << args << "\n" << r.err;
    return r.err;
  }
};

/// `bytes` of a BF16 tensor widened, or an F32 one, as floats.
std::vector<float> floatValues(const std::string &bytes,
                               const std::string &dtype) {
  std::vector<double> wide = valuesOf(bytes, dtype);
  return {wide.begin(), wide.end()};
}

// Tests that tessel-run starts a bf16 model with its master at the
// parameter's init (one Adam step away after step 1, not zero) and the
// parameter its rounding, saves both, and that a run resumed from its
// checkpoint ends bit for bit where the uninterrupted run does.
TEST_F(MasterRunTest, Bf16RunSavesMastersAndResumesExactly) {
  ok(f32Fake + " --eval --steps 1 --seed 3 --save " + path("init.safetensors"));
  ok(bf16Fake + " --steps 1 --seed 3 --save " + path("one.safetensors"));
  Checkpoint init = readCheckpoint(dir / "init.safetensors");
  Checkpoint one = readCheckpoint(dir / "one.safetensors");
  EXPECT_EQ(one.header["fc.weight"]["dtype"], "BF16");
  EXPECT_EQ(one.header["fc.weight.master"]["dtype"], "F32");
  EXPECT_EQ(one.header["fc.weight.m"]["dtype"], "F32");
  std::vector<float> start = floatsOf(init.tensors["fc.weight"]);
  std::vector<float> master = floatsOf(one.tensors["fc.weight.master"]);
  ASSERT_EQ(master.size(), start.size());
  double moved = 0;
  for (size_t i = 0; i < master.size(); ++i)
    moved = std::max(moved, std::fabs(double(master[i]) - start[i]));
  EXPECT_GT(moved, 0.0);
  EXPECT_LT(moved, 0.03); // lr 0.025 at step 1: one Adam step from the init
  EXPECT_EQ(floatValues(one.tensors["fc.weight"], "BF16"),
            floatValues(std::string(reinterpret_cast<const char *>(
                                        roundedBits(master).data()),
                                    master.size() * 2),
                        "BF16"));

  ok(bf16Fake + " --steps 4 --seed 3 --save " + path("full.safetensors"));
  ok(bf16Fake + " --steps 2 --seed 3 --save " + path("half.safetensors"));
  ok(bf16Fake + " --steps 2 --seed 3 --load " + path("half.safetensors") +
     " --save " + path("resumed.safetensors"));
  Checkpoint full = readCheckpoint(dir / "full.safetensors");
  Checkpoint resumed = readCheckpoint(dir / "resumed.safetensors");
  EXPECT_EQ(resumed.header["__metadata__"]["tessel.step"], "4");
  ASSERT_EQ(resumed.tensors.size(), 5u); // weight, frozen, master, m, v
  EXPECT_EQ(resumed.tensors, full.tensors);
}

// Tests that an f32 run's checkpoint trains the bf16 model on (with a note
// of the conversion) and a bf16 run's the f32 model (from the masters);
// evaluation too.
TEST_F(MasterRunTest, CheckpointsCrossPrecisions) {
  ok(f32Fake + " --steps 2 --save " + path("f32.safetensors"));
  ok(bf16Fake + " --steps 2 --save " + path("bf16.safetensors"));
  std::string err = ok(bf16Fake + " --steps 1 --load " +
                       path("f32.safetensors") + " --save " +
                       path("from-f32.safetensors"));
  EXPECT_NE(err.find("note: checkpoint '" + (dir / "f32.safetensors").string() +
                     "': converted 2 parameters from F32 to BF16; set 1 "
                     "master copies from the parameters (F32)"),
            std::string::npos)
      << err;
  EXPECT_EQ(readCheckpoint(dir / "from-f32.safetensors")
                .header["__metadata__"]["tessel.step"],
            "3");
  err = ok(f32Fake + " --steps 1 --load " + path("bf16.safetensors"));
  EXPECT_NE(err.find("read 1 parameters from their master copies (F32)"),
            std::string::npos)
      << err;
  ok(bf16Fake + " --eval --steps 1 --load " + path("f32.safetensors"));
  ok(f32Fake + " --eval --steps 1 --load " + path("bf16.safetensors"));
  // Its own checkpoint: no note.
  err = ok(bf16Fake + " --steps 1 --load " + path("bf16.safetensors"));
  EXPECT_EQ(err.find("note:"), std::string::npos) << err;
}

// Tests that --check-grads refuses a bf16 model in one line: finite
// differences would measure the bf16 rounding of its perturbations.
TEST_F(MasterRunTest, CheckGradsRefusesBf16Parameters) {
  RunResult r = run(bf16Fake + " --check-grads");
  EXPECT_NE(r.exitCode, 0);
  EXPECT_NE(r.err.find("--check-grads: parameter 'fc.weight' is stored in "
                       "bf16, too coarse for finite differences; check the "
                       "model compiled with --precision f32"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(isOneLine(r.err)) << r.err;
}

} // namespace
