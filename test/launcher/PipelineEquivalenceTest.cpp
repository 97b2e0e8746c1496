//===- PipelineEquivalenceTest.cpp - Pipelines against one device ---------===//
//
// Issue 13's acceptance: examples/gpt.mlir (and variants of 5, 6 and 8
// layers) compiled with a `pp` axis, under every schedule and combined
// with dp, tp and sequence parallelism, each stage keeping its forward's
// activations for its backward (or, --stage-recompute, recomputing them
// from its input), trains 3 steps with tessel-run and
// ends where one device ends with the same microbatches (--microbatches M,
// gradient accumulation): the losses within 1e-5 relative, and every
// parameter and optimizer state within
//   f32, SGD with momentum:  max |a − b| <= 1e-5 · max(max |b|, 1e-4)
//   f64, AdamW:              max |a − b| <= 1e-9 · max(max |b|, 1e-4)
// GPT's embedding is tied to its head, so every case also sums a tied
// gradient across the first and last stage. A checkpoint saved on pp=4
// loads on dp=2,tp=2 and on one device and continues as one device does.
// ZeRO (--zero) shards each stage's training state over its dp ranks:
// 1f1b on dp=2,pp=2 and dp=2,tp=2,pp=2 at stage 2 (the gradient chunks
// accumulate over 4 microbatches; and AdamW in f64), zb-h1 at stage 3 (the
// split backward gathers what its weight part reads) and zb-v at stage 2
// train as one device too, and ZeRO checkpoints, gathered or sharded,
// resume on other meshes and stages, pipelines included. With --clip the
// stages' parts of the gradient norm add up to one device's (the tied
// embedding once). A fine-tuning loss (ignore_index -100, synthetic
// prompts) on dp=2,tp=2,pp=2 (1f1b) and dp=2,pp=2 (zb-h1, AdamW in f64)
// counts each microbatch's labelled positions across its ranks on the last
// stage, and the step's over its microbatches (the last stage's counts
// shared over pp), as one device counts them.
//
// `ctest -L parallel`.
//
//===----------------------------------------------------------------------===//

#include "test/launcher/LauncherTestSupport.h"

#include <regex>

using namespace tessel::run::test;

namespace {

const std::string sgd = "--optimizer sgd --lr 0.1 --momentum 0.9";
constexpr int steps = 3;

struct Case {
  int layers = 4;        // gpt's repeated blocks
  std::string mesh;      // --mesh, with a pp axis
  std::string schedule;  // --pipeline-schedule
  int microbatches = 0;  // --microbatches
  std::string extra;     // more tessel-compile flags
  bool adamwF64 = false; // AdamW on the f64 model, else SGD in f32
  std::string training;  // training flags of both runs (--clip)
  double tolerance = 0;  // the bar when not the precision's
  bool sft = false;      // the loss ignores -100 (synthetic prompts)
};

std::string caseName(const ::testing::TestParamInfo<Case> &info) {
  const Case &c = info.param;
  std::string name = "gpt" + std::to_string(c.layers) + "_" + c.mesh + "_" +
                     c.schedule + "_m" + std::to_string(c.microbatches) +
                     (c.extra.empty() ? "" : "_" + c.extra) +
                     (c.adamwF64 ? "_adamw_f64" : "") +
                     (c.training.empty() ? "" : "_" + c.training) +
                     (c.sft ? "_sft" : "");
  std::string out;
  for (char ch : name)
    if (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_')
      out += ch;
    else if (ch == ',' || ch == ' ' || ch == '.')
      out += '_';
  return out;
}

void PrintTo(const Case &c, std::ostream *out) { *out << caseName({c, 0}); }

class PipelineEquivalenceTest : public TesselRunTest,
                                public ::testing::WithParamInterface<Case> {
protected:
  static void SetUpTestSuite() {
    std::string pattern =
        (fs::temp_directory_path() / "tessel-pipeline-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    suiteDir() = pattern;
  }
  static void TearDownTestSuite() { fs::remove_all(suiteDir()); }
  static fs::path &suiteDir() {
    static fs::path path;
    return path;
  }

  /// examples/gpt.mlir with `layers` blocks, in f64 for AdamW; with `sft`
  /// its loss ignores the label -100, which the synthetic data puts over a
  /// prompt of random length in each sample.
  static std::string source(int layers, bool f64, bool sft = false) {
    fs::path path =
        suiteDir() / ("gpt" + std::to_string(layers) + (f64 ? "-f64" : "") +
                      (sft ? "-sft" : "") + ".mlir");
    if (!fs::exists(path)) {
      std::string text = readFile(fs::path(TESSEL_EXAMPLES_DIR) / "gpt.mlir");
      // The stacked parameters are the only tensors with 4 rows.
      text = std::regex_replace(text, std::regex("tensor<4x"),
                                "tensor<" + std::to_string(layers) + "x");
      if (f64)
        text = std::regex_replace(text, std::regex("f32"), "f64");
      if (sft)
        text = std::regex_replace(
            text, std::regex("nn.cross_entropy %logits, %targets :"),
            "nn.cross_entropy %logits, %targets {ignore_index = -100 : i64} :");
      writeFile(path, text);
    }
    return path.string();
  }

  /// tessel-compile `source` with `flags` into the suite's folder, once.
  static std::string compile(const std::string &src, const std::string &flags,
                             std::string &failure) {
    static std::map<std::string, std::string> done;
    std::string key = src + " " + flags;
    if (auto it = done.find(key); it != done.end())
      return it->second;
    fs::path so = suiteDir() / ("m" + std::to_string(done.size()) + ".so");
    fs::path log = suiteDir() / ("m" + std::to_string(done.size()) + ".log");
    std::string command = quote(std::string(TESSEL_BIN_DIR) +
                                "/tessel-compile") +
                          " " + quote(src) + " " + flags + " -o " +
                          quote(so.string()) + " >" + quote(log.string()) +
                          " 2>&1";
    if (std::system(command.c_str()) != 0 || !fs::exists(so)) {
      failure = "tessel-compile " + src + " " + flags + ":\n" + readFile(log);
      return "";
    }
    return done[key] = so.string();
  }

  /// The metrics' losses and the checkpoint of `args` (a tessel-run line).
  struct Trained {
    std::vector<double> losses;
    Checkpoint checkpoint;
  };
  Trained train(const std::string &command, const std::string &name) {
    fs::path metrics = dir / (name + ".jsonl"), saved = dir / (name + ".st");
    RunResult r = runShell(command + " --quiet --metrics " +
                           quote(metrics.string()) + " --save " +
                           quote(saved.string()));
    EXPECT_EQ(r.exitCode, 0) << command << "\n" << r.err;
    // What each rank kept between the schedule's actions is what the
    // compiler's report counts (tessel-run warns otherwise).
    EXPECT_EQ(r.err.find("pipeline stash differs"), std::string::npos)
        << r.err;
    Trained out;
    std::ifstream in(metrics);
    for (std::string line; std::getline(in, line);)
      out.losses.push_back(json::parse(line).at("loss").get<double>());
    if (fs::exists(saved))
      out.checkpoint = readCheckpoint(saved);
    return out;
  }

  static std::string optimizerFlags(bool adamwF64) {
    return adamwF64 ? "" : sgd;
  }

  /// One device's 3 steps at `microbatches`, the reference.
  Trained oneDevice(int layers, int microbatches, bool adamwF64,
                    const std::string &training = "", bool sft = false) {
    std::string failure;
    std::string so =
        compile(source(layers, adamwF64, sft),
                optimizerFlags(adamwF64) + " " + training, failure);
    EXPECT_EQ(failure, "");
    return train(quote(TESSEL_RUN_PATH) + " " + quote(so) + " --steps " +
                     std::to_string(steps) + " --microbatches " +
                     std::to_string(microbatches),
                 "one");
  }

  static void expectEqual(const Trained &got, const Trained &want,
                          double tolerance) {
    ASSERT_EQ(got.losses.size(), want.losses.size());
    for (size_t i = 0; i < want.losses.size(); ++i)
      EXPECT_LE(std::fabs(got.losses[i] - want.losses[i]),
                1e-5 * std::fabs(want.losses[i]))
          << "step " << i + 1 << ": " << got.losses[i] << " vs "
          << want.losses[i];
    ASSERT_FALSE(want.checkpoint.tensors.empty());
    ASSERT_EQ(got.checkpoint.tensors.size(), want.checkpoint.tensors.size());
    double worst = 0;
    for (auto &[name, bytes] : want.checkpoint.tensors) {
      auto it = got.checkpoint.tensors.find(name);
      ASSERT_NE(it, got.checkpoint.tensors.end()) << name;
      const json &header = want.checkpoint.header.at(name);
      EXPECT_EQ(got.checkpoint.header.at(name)["shape"], header["shape"])
          << name;
      double error = scaledError(it->second, bytes, 1e-4,
                                 header["dtype"].get<std::string>());
      worst = std::max(worst, error);
      EXPECT_LE(error, tolerance) << name;
    }
    // The measured error, in the test's XML/JSON output (--gtest_output).
    lastError() = worst;
    ::testing::Test::RecordProperty("max_tensor_error", errorText(worst));
  }
  /// The largest scaled error of the last expectEqual.
  static double &lastError() {
    static double error = 0;
    return error;
  }
};

TEST_P(PipelineEquivalenceTest, TrainsAsOneDevice) {
  const Case &c = GetParam();
  std::string failure;
  std::string flags = optimizerFlags(c.adamwF64) + " --mesh " + c.mesh +
                      " --pipeline-schedule " + c.schedule +
                      " --microbatches " + std::to_string(c.microbatches) +
                      " " + c.extra + " " + c.training;
  std::string so = compile(source(c.layers, c.adamwF64, c.sft), flags, failure);
  ASSERT_EQ(failure, "");
  Trained pipelined = train(quote(TESSEL_RUN_PATH) + " " + quote(so) +
                                " --steps " + std::to_string(steps),
                            "pipelined");
  Trained reference =
      oneDevice(c.layers, c.microbatches, c.adamwF64, c.training, c.sft);
  expectEqual(pipelined, reference,
              c.tolerance > 0 ? c.tolerance
              : c.adamwF64    ? 1e-9
                              : 1e-5);
}

std::vector<Case> pipelineCases() {
  std::vector<Case> cases = {
      // One microbatch: plain model parallelism (bit for bit one device's).
      {4, "pp=4", "gpipe", 1},
      // Every schedule on pp=2 and pp=4 (8 layers for interleaved on 4).
      {4, "pp=2", "gpipe", 2},
      {4, "pp=2", "1f1b", 4},
      {4, "pp=2", "interleaved", 2, "--virtual-stages 2"},
      {4, "pp=2", "zb-h1", 3},
      {4, "pp=4", "gpipe", 4},
      {4, "pp=4", "1f1b", 4},
      {8, "pp=4", "interleaved", 4, "--virtual-stages 2"},
      {4, "pp=4", "zb-h1", 5},
      // ZB-V: two stages a rank in a V, so rank 0 holds both copies of the
      // tied embedding and the middle rank hands its activations and
      // gradients over to itself; fewer microbatches than the pattern's
      // 2P - 1 (pp=4, M=4) keep its order.
      {4, "pp=2", "zb-v", 4},
      {8, "pp=4", "zb-v", 8},
      {8, "pp=4", "zb-v", 4, "", true},
      {4, "dp=2,tp=2,pp=2", "zb-v", 4},
      {4, "dp=2,pp=2", "zb-v", 4, "--zero 2"},
      {4, "pp=2", "zb-v", 4, "--stage-recompute"},
      {4, "pp=2", "zb-v", 2, "", true, "--clip 0.05"},
      // DualPipeV: ZB-V's V in DualPipe's order, some backwards split and
      // their weight parts queued; fewer microbatches than its 2P keep the
      // order too.
      {4, "pp=2", "dualpipev", 4},
      {8, "pp=4", "dualpipev", 8},
      {4, "dp=2,tp=2,pp=2", "dualpipev", 4},
      {4, "dp=2,pp=2", "dualpipev", 4, "--zero 2"},
      {4, "pp=2", "dualpipev", 3, "", true, "--clip 0.05"},
      // A stage keeps what its backward reads of its forward (the default,
      // every case here but these): per the recompute policy, which then
      // recomputes inside the backward; or, with --stage-recompute, keeps
      // only its input and recomputes its whole forward (GPipe).
      {4, "pp=2", "1f1b", 4, "--recompute full"},
      {4, "pp=2", "interleaved", 2, "--virtual-stages 2 --recompute selective"},
      {4, "pp=2", "1f1b", 4, "--stage-recompute"},
      {4, "dp=2,tp=2,pp=2", "zb-h1", 2, "--stage-recompute"},
      {4, "pp=4", "zb-h1", 4, "--stage-recompute", true},
      // Pinned and uneven layers.
      {6, "pp=2", "1f1b", 2, "--stage-layers 3,3"},
      {5, "pp=2", "1f1b", 2},
      // With data, tensor and sequence parallelism.
      {4, "dp=2,pp=2", "1f1b", 2},
      {4, "dp=2,pp=2", "zb-h1", 2},
      {4, "tp=2,pp=2", "1f1b", 2},
      {4, "tp=2,pp=2", "zb-h1", 2},
      {4, "dp=2,tp=2,pp=2", "1f1b", 2},
      {4, "dp=2,tp=2,pp=2", "zb-h1", 2},
      {4, "tp=2,pp=2", "1f1b", 2, "--sequence-parallel"},
      // AdamW in f64.
      {4, "pp=2", "1f1b", 2, "", true},
      {4, "pp=4", "zb-h1", 4, "", true},
      {8, "pp=4", "interleaved", 4, "--virtual-stages 2", true},
      {4, "dp=2,tp=2,pp=2", "1f1b", 2, "", true},
      // ZeRO.
      {4, "dp=2,pp=2", "1f1b", 4, "--zero 2"},
      {4, "dp=2,tp=2,pp=2", "1f1b", 4, "--zero 2"},
      // AdamW in f64 with 4 microbatches under tp and ZeRO: before ABI 18
      // the f64 model's moments were f32, and one device and the mesh
      // rounded one to different f32 neighbours (wte.m, 4.5e-8 scaled).
      {4, "dp=2,tp=2,pp=2", "1f1b", 4, "--zero 2", true},
      {4, "dp=2,tp=2,pp=2", "1f1b", 4, "", true},
      {4, "dp=2,pp=2", "zb-h1", 4, "--zero 3"},
      // Global-norm clipping at 0.05, which every step's norm exceeds: the
      // stages' parts summed over pp, the tied embedding counted once
      // (on 1f1b its copies are on two ranks, interleaved on two ranks of
      // two stages each), with dp and tp inside the stages, ZeRO's chunks,
      // and AdamW in f64. The stages' parts of the norm add in another
      // order than one device's operands (a stacked parameter's layers are
      // on two stages); in an f64 model the norm and the clip factor are
      // f64 scalars (ABI 18), so that order is below the 1e-9 bar (it was
      // 1.4e-7 while they were f32).
      {4, "pp=2", "1f1b", 4, "", false, "--clip 0.05"},
      {8, "pp=4", "interleaved", 4, "--virtual-stages 2", false, "--clip 0.05"},
      {4, "dp=2,tp=2,pp=2", "zb-h1", 2, "", false, "--clip 0.05"},
      {4, "dp=2,pp=2", "1f1b", 4, "--zero 2", false, "--clip 0.05"},
      {4, "pp=2", "1f1b", 4, "", true, "--clip 0.05"},
      {4, "dp=2,tp=2,pp=2", "zb-h1", 4, "--zero 1", true, "--clip 0.05"},
      // Fine-tuning: the loss's mean over each microbatch's labelled
      // positions, counted across dp and tp on the last stage.
      {4, "dp=2,tp=2,pp=2", "1f1b", 4, "", false, "", 0, true},
      {4, "dp=2,pp=2", "zb-h1", 4, "", true, "", 0, true},
  };
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Gpt, PipelineEquivalenceTest,
                         ::testing::ValuesIn(pipelineCases()), caseName);

class PipelineCheckpointTest : public PipelineEquivalenceTest {
protected:
  /// dp=2 x pp=2 (1F1B, 2 microbatches) trained as threads and as one
  /// process per rank started by `launch` (tessel-run's arguments followed
  /// by `extraArgs`), both compiled with `training` too: the processes
  /// train as one device and bit for bit as the threads.
  void expectProcessesTrainAsThreads(const std::string &launch,
                                     const std::string &extraArgs,
                                     const std::string &name,
                                     const std::string &training = "") {
    std::string failure;
    std::string so = compile(source(4, false),
                             sgd +
                                 " --mesh dp=2,pp=2 --pipeline-schedule 1f1b "
                                 "--microbatches 2 " +
                                 training,
                             failure);
    ASSERT_EQ(failure, "");
    const std::string run = quote(TESSEL_RUN_PATH) + " " + quote(so) +
                            " --steps " + std::to_string(steps);
    Trained processes = train(launch + " " + run + extraArgs, name);
    Trained threads = train(run, "threads");
    expectEqual(processes, oneDevice(4, 2, false, training), 1e-5);
    EXPECT_EQ(processes.losses, threads.losses);
    EXPECT_EQ(processes.checkpoint.tensors, threads.checkpoint.tensors);
  }
};

// Checkpoints stay global: 2 steps on pp=4 (4 microbatches), saved, then
// the third step on dp=2,tp=2 and on one device, equal to one device's
// uninterrupted 3 steps.
TEST_F(PipelineCheckpointTest, SavedOnPp4LoadsOnOtherMeshes) {
  std::string failure;
  std::string src = source(4, false);
  std::string pp4 = compile(src, sgd + " --mesh pp=4 --microbatches 4",
                            failure);
  ASSERT_EQ(failure, "");
  fs::path saved = dir / "pp4.st";
  RunResult r = runShell(quote(TESSEL_RUN_PATH) + " " + quote(pp4) +
                         " --steps 2 --quiet --save " + quote(saved.string()));
  ASSERT_EQ(r.exitCode, 0) << r.err;
  Trained reference = oneDevice(4, 4, false);
  std::string one = compile(src, sgd, failure);
  std::string dptp = compile(src, sgd + " --mesh dp=2,tp=2", failure);
  ASSERT_EQ(failure, "");
  for (const std::string &so : {one, dptp}) {
    Trained resumed =
        train(quote(TESSEL_RUN_PATH) + " " + quote(so) +
                  " --steps 1 --microbatches 4 --load " + quote(saved.string()),
              "resumed");
    ASSERT_EQ(resumed.losses.size(), 1u);
    Trained last = reference;
    last.losses = {reference.losses.back()};
    expectEqual(resumed, last, 1e-5);
  }
  // And back onto a pipeline of another shape.
  std::string pp2 = compile(src, sgd + " --mesh dp=2,pp=2 --microbatches 4",
                            failure);
  ASSERT_EQ(failure, "");
  Trained resumed = train(quote(TESSEL_RUN_PATH) + " " + quote(pp2) +
                              " --steps 1 --load " + quote(saved.string()),
                          "resumed-pp2");
  Trained last = reference;
  last.losses = {reference.losses.back()};
  expectEqual(resumed, last, 1e-5);
}

// ZeRO checkpoints move between meshes and stages: 2 steps on a ZeRO run
// saved (--save gathers the chunks into the global file; --save-sharded
// writes each rank's chunks, padding and all), then 2 more steps (--steps
// counts the steps this run adds; the step count and the momenta come
// from the checkpoint) on another mesh at another stage end where one
// device's uninterrupted 4 steps end. SGD with momentum, so the states'
// chunks matter; 2 microbatches throughout (a pipeline's, and one
// device's).
TEST_F(PipelineCheckpointTest, ZeroCheckpointsMoveBetweenMeshesAndStages) {
  std::string failure;
  std::string src = source(4, false);
  auto compiled = [&](const std::string &flags) {
    std::string so = compile(src, sgd + flags, failure);
    EXPECT_EQ(failure, "") << flags;
    return quote(so);
  };
  std::string one = compiled("");
  Trained whole =
      train(quote(TESSEL_RUN_PATH) + " " + one + " --steps 4 --microbatches 2",
            "whole");
  ASSERT_EQ(whole.losses.size(), 4u);
  Trained last = whole;
  last.losses = {whole.losses[2], whole.losses[3]};
  auto resume = [&](const std::string &so, const fs::path &from,
                    const std::string &name) {
    SCOPED_TRACE(name);
    Trained resumed =
        train(quote(TESSEL_RUN_PATH) + " " + so +
                  " --steps 2 --microbatches 2 --load " + quote(from.string()),
              name);
    EXPECT_EQ(resumed.checkpoint.header["__metadata__"]["tessel.step"], "4");
    expectEqual(resumed, last, 1e-5);
    RecordProperty("max_tensor_error_" + name, errorText(lastError()));
  };

  // (a), (b): dp=4 at ZeRO-3, saved both ways.
  std::string dp4 = compiled(" --mesh dp=4 --zero 3");
  RunResult r = runShell(quote(TESSEL_RUN_PATH) + " " + dp4 +
                         " --steps 2 --microbatches 2 --quiet --save " +
                         path("dp4.st") + " --save-sharded " + path("dp4"));
  ASSERT_EQ(r.exitCode, 0) << r.err;
  // The directory holds the chunks: wte's [256, 128], 8192 elements a rank.
  json index = json::parse(readFile(dir / "dp4" / "index.json"));
  bool chunked = false;
  for (const json &t : index["tensors"])
    if (t["name"] == "wte.momentum")
      for (const json &piece : t["pieces"])
        chunked = chunked ||
                  (piece.contains("zero") && piece["shape"] == json({8192}));
  EXPECT_TRUE(chunked) << index.dump();
  // (a) The gathered file on tp=2 without ZeRO.
  resume(compiled(" --mesh tp=2"), dir / "dp4.st", "tp2");
  // (b) The sharded directory on one device.
  resume(one, dir / "dp4", "one");

  // (c) dp=2,tp=2 at ZeRO-2, sharded, onto a dp=2,pp=2 pipeline at ZeRO-1
  // and onto dp=4 at ZeRO-1.
  std::string dp2tp2 = compiled(" --mesh dp=2,tp=2 --zero 2");
  r = runShell(quote(TESSEL_RUN_PATH) + " " + dp2tp2 +
               " --steps 2 --microbatches 2 --quiet --save-sharded " +
               path("dp2tp2"));
  ASSERT_EQ(r.exitCode, 0) << r.err;
  resume(compiled(" --mesh dp=2,pp=2 --pipeline-schedule 1f1b "
                  "--microbatches 2 --zero 1"),
         dir / "dp2tp2", "dp2pp2");
  resume(compiled(" --mesh dp=4 --zero 1"), dir / "dp2tp2", "dp4z1");
}

// A sharded checkpoint of a pipeline: each rank writes its stages' tensors
// (an interleaved or ZB-V rank holds two stages' rows of each stacked
// parameter; ZB-V's rank 0 both copies of the tied embedding),
// the index records each piece's stage rows, and the directory loads on
// one device and back on the pipeline exactly as the gathered file does.
TEST_F(PipelineCheckpointTest, ShardedSaveOfAPipelineLoadsAsTheGatheredFile) {
  std::string failure;
  std::string src = source(4, false);
  std::string one = compile(src, sgd, failure);
  ASSERT_EQ(failure, "");
  for (const std::string &flags :
       {std::string(" --mesh pp=2 --pipeline-schedule interleaved "
                    "--virtual-stages 2 --microbatches 2"),
        std::string(" --mesh pp=2 --pipeline-schedule zb-v --microbatches 2"),
        std::string(" --mesh dp=2,tp=2,pp=2 --pipeline-schedule 1f1b "
                    "--microbatches 2")}) {
    SCOPED_TRACE(flags);
    std::string so = compile(src, sgd + flags, failure);
    ASSERT_EQ(failure, "");
    fs::remove_all(dir / "sharded");
    RunResult r = run(quote(so) + " --steps 2 --quiet --save " +
                      path("global.st") + " --save-sharded " + path("sharded"));
    ASSERT_EQ(r.exitCode, 0) << r.err;
    json index = json::parse(readFile(dir / "sharded" / "index.json"));
    bool stacked = false;
    for (const json &t : index["tensors"])
      for (const json &piece : t["pieces"])
        if (piece.contains("layers")) {
          stacked = true;
          EXPECT_TRUE(piece.contains("stage")) << piece.dump();
          EXPECT_EQ(piece["key"].get<std::string>().rfind("stage", 0), 0u);
        }
    EXPECT_TRUE(stacked);
    for (const std::string &target : {one, so}) {
      auto tensorsAfter = [&](const std::string &load, const std::string &args,
                              const std::string &name) {
        RunResult r = run(quote(target) + args + " --quiet --load " +
                          path(load) + " --save " + path(name));
        EXPECT_EQ(r.exitCode, 0) << r.err;
        return readCheckpoint(dir / name).tensors;
      };
      // The parameters as loaded, then one more step from the same state.
      EXPECT_EQ(tensorsAfter("global.st", " --eval --steps 1", "a.st"),
                tensorsAfter("sharded", " --eval --steps 1", "b.st"));
      EXPECT_EQ(
          tensorsAfter("global.st", " --steps 1 --microbatches 2", "a.st"),
          tensorsAfter("sharded", " --steps 1 --microbatches 2", "b.st"));
    }
  }
}

// Dropout in the blocks: stage s's layer l draws the model's layer
// (first + l) mask, in the forward, its recomputation, and both parts of a
// split backward.
TEST_F(PipelineCheckpointTest, DropoutDrawsTheModelsMasks) {
  fs::path path = suiteDir() / "gpt-dropout.mlir";
  std::string text = readFile(fs::path(TESSEL_EXAMPLES_DIR) / "gpt.mlir");
  std::string from = "  %p0 = nn.matmul %f, %w_proj";
  ASSERT_NE(text.find(from), std::string::npos);
  text.replace(text.find(from), from.size(),
               "  %fd = nn.dropout %f rate = 0.1 seed = 7 : "
               "tensor<8x64x512xf32>\n  %p0 = nn.matmul %fd, %w_proj");
  writeFile(path, text);
  std::string failure;
  std::string one = compile(path.string(), sgd, failure);
  ASSERT_EQ(failure, "");
  Trained reference =
      train(quote(TESSEL_RUN_PATH) + " " + quote(one) + " --steps " +
                std::to_string(steps) + " --microbatches 2",
            "one-dropout");
  for (const std::string &flags :
       {std::string(" --mesh pp=2 --microbatches 2"),
        std::string(" --mesh pp=4 --pipeline-schedule gpipe --microbatches 2"),
        std::string(" --mesh pp=2 --pipeline-schedule zb-h1 --microbatches 2")}) {
    std::string so = compile(path.string(), sgd + flags, failure);
    ASSERT_EQ(failure, "");
    Trained pipelined = train(quote(TESSEL_RUN_PATH) + " " + quote(so) +
                                  " --steps " + std::to_string(steps),
                              "pipelined-dropout");
    expectEqual(pipelined, reference, 1e-5);
  }
}

// Under mpirun, one process per rank: the same run as one device, and bit
// for bit the threads' run.
TEST_F(PipelineCheckpointTest, TrainsUnderMpirun) {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "mpirun not found";
  expectProcessesTrainAsThreads(
      "mpirun --allow-run-as-root --oversubscribe -np 4", " --comm mpi", "mpi");
}

// Clipping under mpirun: the stages' parts of the gradient norm meet over
// pp between processes as between threads.
TEST_F(PipelineCheckpointTest, ClipsUnderMpirun) {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "mpirun not found";
  expectProcessesTrainAsThreads(
      "mpirun --allow-run-as-root --oversubscribe -np 4", " --comm mpi",
      "mpi-clip", "--clip 0.05");
}

// Under torchrun's environment, one process per rank over TCP: likewise.
TEST_F(PipelineCheckpointTest, TrainsUnderTorchrun) {
  expectProcessesTrainAsThreads(
      torchrunCommand(dir, 4, tessel::test::freeLoopbackPort()), "",
      "torchrun");
}

// tessel-run keeps the compiled microbatches.
TEST_F(PipelineCheckpointTest, RefusesOtherMicrobatches) {
  std::string failure;
  std::string so = compile(source(4, false), sgd + " --mesh pp=2", failure);
  ASSERT_EQ(failure, "");
  RunResult r = run(quote(so) + " --steps 1 --microbatches 3");
  EXPECT_NE(r.exitCode, 0);
  EXPECT_NE(r.err.find("compiled for 2 microbatches"), std::string::npos)
      << r.err;
}

// What the busiest rank keeps between its schedule's actions, as
// tessel-run's summary reports it, is exactly the compiled report's most
// activation bytes of a rank: on gpt pp=2 with 1F1B and 4 microbatches, 2
// microbatches' kept activations (the default), or nothing (--stage-recompute:
// stage 0's feeds are drawn again, and it receives no input); with ZB-V, the
// busiest rank's two stages' slots, and with DualPipeV fewer (its weight
// parts wait less deep, so less of the zero-bubble stash is held). The
// summary gives the most any rank holds and the first rank holding it.
TEST_F(PipelineCheckpointTest, SummaryHoldsTheReportsActivationBytes) {
  int64_t zbV = 0;
  for (std::string extra :
       {"", " --stage-recompute", " --pipeline-schedule zb-v",
        " --pipeline-schedule dualpipev"}) {
    SCOPED_TRACE(extra);
    fs::path report = dir / "report.json";
    std::string failure;
    std::string so = compile(source(4, false),
                             sgd + " --mesh pp=2 --microbatches 4" + extra +
                                 " --report-json " + quote(report.string()),
                             failure);
    ASSERT_EQ(failure, "");
    // The busiest rank's, and the first rank holding that much.
    int64_t compiled = -1, busiest = -1;
    json timeline = json::parse(readFile(report))["pipeline"]["timeline"];
    for (size_t rank = 0; rank < timeline.size(); ++rank)
      if (int64_t bytes = timeline[rank].at("activation_bytes").get<int64_t>();
          bytes > compiled) {
        compiled = bytes;
        busiest = int64_t(rank);
      }
    if (extra.empty()) {
      // 1F1B: rank 0 keeps the most (P − r microbatches in flight).
      EXPECT_EQ(compiled, 2 * 8404992);
      EXPECT_EQ(busiest, 0);
    } else if (extra == " --stage-recompute") {
      // Rank 0 keeps nothing; rank 1 one 8 x 64 x 128 f32 input in flight.
      EXPECT_EQ(compiled, 262144);
      EXPECT_EQ(busiest, 1);
    } else if (extra == " --pipeline-schedule zb-v") {
      zbV = compiled;
      EXPECT_GT(compiled, 0);
    } else {
      EXPECT_GT(compiled, 0);
      EXPECT_LT(compiled, zbV);
    }
    RunResult r = run(quote(so) + " --steps 1");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    std::smatch held;
    ASSERT_TRUE(std::regex_search(
        r.err, held,
        std::regex("plus up to ([0-9]+) bytes of microbatches held between "
                   "the schedule's actions \\(rank ([0-9]+)\\)\\) per "
                   "rank")))
        << r.err;
    EXPECT_EQ(std::stoll(held[1]), compiled);
    EXPECT_EQ(std::stoll(held[2]), busiest);
  }
}

} // namespace
