//===- PrecisionTest.cpp - bf16 mixed precision against f32 ---------------===//
//
// Issue 14's CPU acceptance of `--precision bf16`: examples/gpt.mlir trains
// 100 AdamW steps on a byte-level text (a snapshot of this repository's
// README, Inputs/precision-corpus.txt: the bounds below were measured on it,
// and the README changes with the docs) in f32 and in bf16 from the same
// seed and data, and the bf16 run tracks the f32 one:
//   - every 10-step window's mean loss within 5% of f32's (one step may
//     differ more: two trajectories that round differently meet different
//     hard batches at different steps), the last 20 steps' mean within 2%;
//   - both learn: the last 20 steps' mean is 1.5 nats below the first step;
//   - the checkpoint holds the same f32 tensors (master weights and Adam
//     state);
//   - under SGD with momentum, every parameter after 10 steps within 5% of
//     f32's scale (max |a − b| / max |b|).
// Also: data and pipeline parallelism in bf16 track one device in bf16, a bf16
// checkpoint continues in f32, and a .so compiled in f32 refuses
// --precision bf16 with the command that would compile it.
//
//===----------------------------------------------------------------------===//

#include "test/launcher/LauncherTestSupport.h"

using namespace tessel::run::test;

namespace {

const std::string gpt = std::string(TESSEL_EXAMPLES_DIR) + "/gpt.mlir";
const std::string text = std::string(TESSEL_EXAMPLES_DIR) +
                         "/../test/launcher/Inputs/precision-corpus.txt";
const std::string sgd = "--optimizer sgd --lr 0.1 --momentum 0.9";
/// max |a − b| / max |b| per parameter, bf16 against f32 (or dp against
/// one device, both bf16) after SGD steps: bf16 keeps 8 bits, so a value
/// rounds by up to 0.4% and a different f32 summation order flips roundings.
constexpr double kSgdWeightTolerance = 5e-2; // measured worst: 2.6%

class PrecisionTest : public TesselRunTest {
protected:
  struct Trained {
    std::vector<double> losses;
    Checkpoint checkpoint;
  };
  /// tessel-run `args` on gpt.mlir with the text as data, saved.
  Trained train(const std::string &args, const std::string &name) {
    fs::path saved = dir / (name + ".st");
    Trained out;
    out.losses = losses(quote(gpt) + " --data " + quote(text) +
                        " --data-dtype u8 " + args + " --save " +
                        quote(saved.string()));
    if (fs::exists(saved))
      out.checkpoint = readCheckpoint(saved);
    return out;
  }

  /// A mesh's 3 SGD steps against one device's, both bf16: losses within
  /// 1e-3 relative, weights within kSgdWeightTolerance.
  static void expectTracks(const Trained &mesh, const Trained &one) {
    ASSERT_EQ(mesh.losses.size(), 3u);
    for (size_t i = 0; i < 3; ++i)
      EXPECT_NEAR(mesh.losses[i], one.losses[i], 1e-3 * one.losses[i])
          << "step " << i + 1;
    ASSERT_FALSE(one.checkpoint.tensors.empty());
    for (auto &[name, bytes] : one.checkpoint.tensors)
      EXPECT_LE(scaledError(mesh.checkpoint.tensors.at(name), bytes, 1e-4),
                kSgdWeightTolerance)
          << name;
  }
};

TEST_F(PrecisionTest, Bf16TracksF32Over100Steps) {
  Trained f32 = train("--steps 100", "f32");
  Trained bf16 = train("--precision bf16 --steps 100", "bf16");
  ASSERT_EQ(f32.losses.size(), 100u);
  ASSERT_EQ(bf16.losses.size(), 100u);
  for (size_t w = 0; w < 100; w += 10)
    EXPECT_NEAR(mean(bf16.losses, w, w + 10), mean(f32.losses, w, w + 10),
                0.05 * mean(f32.losses, w, w + 10))
        << "steps " << w + 1 << ".." << w + 10;
  double f32End = mean(f32.losses, 80, 100);
  double bf16End = mean(bf16.losses, 80, 100);
  EXPECT_NEAR(bf16End, f32End, 0.02 * f32End);
  EXPECT_LT(f32End, f32.losses.front() - 1.5);
  EXPECT_LT(bf16End, bf16.losses.front() - 1.5);

  // The checkpoint is f32 either way: master weights and their state.
  ASSERT_EQ(bf16.checkpoint.tensors.size(), f32.checkpoint.tensors.size());
  for (auto &[name, bytes] : f32.checkpoint.tensors)
    EXPECT_EQ(bf16.checkpoint.header.at(name)["dtype"], "F32") << name;
}

TEST_F(PrecisionTest, Bf16WeightsTrackF32WithSgd) {
  // Parameters are compared under SGD: Adam's g/sqrt(v) turns the bf16
  // rounding of a gradient that is 0 in exact arithmetic (the key bias's)
  // into whole steps, so its parameters are not comparable element-wise.
  Trained f32 = train(sgd + " --steps 10", "f32");
  Trained bf16 = train(sgd + " --precision bf16 --steps 10", "bf16");
  ASSERT_FALSE(f32.checkpoint.tensors.empty());
  for (auto &[name, bytes] : f32.checkpoint.tensors)
    EXPECT_LE(scaledError(bf16.checkpoint.tensors.at(name), bytes, 1e-4),
              kSgdWeightTolerance)
        << name;
}

TEST_F(PrecisionTest, Bf16MeshesTrackOneDevice) {
  // Each rank's forward rounds as one device's does up to the order of f32
  // sums; the bf16 copies of tensor-parallel weights are split as their
  // f32 masters (and keep their priority over the sequence split of
  // sequence parallelism); the f32 gradients are reduced.
  Trained one = train(sgd + " --precision bf16 --steps 3", "one");
  for (const char *mesh :
       {"dp=2", "dp=2,tp=2", "tp=2 --sequence-parallel"}) {
    SCOPED_TRACE(mesh);
    expectTracks(train(sgd + " --precision bf16 --steps 3 --mesh " + mesh,
                       "mesh"),
                 one);
  }
}

TEST_F(PrecisionTest, Bf16PipelineTracksOneDevice) {
  // dp=2 x pp=2 with 2 microbatches: the stages send bf16 activations.
  Trained one =
      train(sgd + " --precision bf16 --microbatches 2 --steps 3", "one");
  Trained pp = train(sgd + " --precision bf16 --mesh dp=2,pp=2 "
                           "--microbatches 2 --steps 3",
                     "pp");
  expectTracks(pp, one);
}

TEST_F(PrecisionTest, Bf16CheckpointContinuesInF32) {
  Trained bf16 = train("--precision bf16 --steps 2", "bf16");
  ASSERT_FALSE(bf16.checkpoint.tensors.empty());
  Trained f32 = train("--steps 2 --load " + quote((dir / "bf16.st").string()),
                      "f32");
  ASSERT_EQ(f32.losses.size(), 2u);
  // It continued from the bf16 weights: its first loss is close to where
  // the bf16 run was, not a fresh start.
  EXPECT_LT(f32.losses.front(), bf16.losses.front());
}

TEST_F(PrecisionTest, CompiledPrecisionIsChecked) {
  fs::path so = dir / "gpt.so";
  ASSERT_EQ(runShell(quote(std::string(TESSEL_BIN_DIR) + "/tessel-compile") +
                     " " + quote(gpt) + " -o " + quote(so.string()))
                .exitCode,
            0);
  RunResult r = run(quote(so.string()) + " --precision bf16 --steps 1");
  EXPECT_NE(r.exitCode, 0);
  EXPECT_NE(r.err.find("--precision bf16 differs from the f32 that model"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("--precision bf16 -o"), std::string::npos) << r.err;
  RunResult bad = run(quote(gpt) + " --precision fp8 --steps 1");
  EXPECT_NE(bad.exitCode, 0);
  EXPECT_NE(bad.err.find("bad value 'fp8' for --precision (expected f32 or "
                         "bf16)"),
            std::string::npos)
      << bad.err;
}

} // namespace
