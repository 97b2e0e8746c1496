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
//   - so does the run with bf16 gradients (--grad-precision bf16);
//   - the checkpoint holds bf16 parameters, each exactly its f32 master
//     rounded to nearest even, and the f32 master weights and Adam state;
//   - under SGD with momentum, every parameter after 10 steps within 5% of
//     f32's scale (max |a − b| / max |b|).
// Also: data and pipeline parallelism in bf16 track one device in bf16, a bf16
// checkpoint continues in f32, and a .so compiled in f32 refuses
// --precision bf16 with the command that would compile it.
//
//===----------------------------------------------------------------------===//

#include "test/launcher/LauncherTestSupport.h"

#include <cstdio>

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

  /// The f32 weights of tensor `name` (a parameter, or a state) in a
  /// checkpoint: a bf16 run's master copy of a parameter.
  static const std::string &weightsOf(const Trained &run,
                                      const std::string &name) {
    auto master = run.checkpoint.tensors.find(name + ".master");
    return master != run.checkpoint.tensors.end()
               ? master->second
               : run.checkpoint.tensors.at(name);
  }

  /// A mesh's 3 SGD steps against one device's, both bf16: losses within
  /// 1e-3 relative, f32 weights (masters and states) within
  /// kSgdWeightTolerance.
  static void expectTracks(const Trained &mesh, const Trained &one) {
    ASSERT_EQ(mesh.losses.size(), 3u);
    for (size_t i = 0; i < 3; ++i)
      EXPECT_NEAR(mesh.losses[i], one.losses[i], 1e-3 * one.losses[i])
          << "step " << i + 1;
    ASSERT_FALSE(one.checkpoint.tensors.empty());
    for (auto &[name, bytes] : one.checkpoint.tensors) {
      if (one.checkpoint.header.at(name)["dtype"] == "F32") {
        EXPECT_LE(scaledError(mesh.checkpoint.tensors.at(name), bytes, 1e-4),
                  kSgdWeightTolerance)
            << name;
      }
    }
  }

  /// round-to-nearest-even of f32 `bits` to bf16 (finite values).
  static uint16_t roundToBf16(uint32_t bits) {
    return uint16_t((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
  }
};

TEST_F(PrecisionTest, Bf16TracksF32Over100Steps) {
  Trained f32 = train("--steps 100", "f32");
  ASSERT_EQ(f32.losses.size(), 100u);
  double f32End = mean(f32.losses, 80, 100);
  EXPECT_LT(f32End, f32.losses.front() - 1.5);
  for (const char *grads : {"f32", "bf16"}) {
    SCOPED_TRACE(std::string("gradients ") + grads);
    Trained bf16 = train(std::string("--precision bf16 --grad-precision ") +
                             grads + " --steps 100",
                         "bf16");
    ASSERT_EQ(bf16.losses.size(), 100u);
    for (size_t w = 0; w < 100; w += 10)
      EXPECT_NEAR(mean(bf16.losses, w, w + 10), mean(f32.losses, w, w + 10),
                  0.05 * mean(f32.losses, w, w + 10))
          << "steps " << w + 1 << ".." << w + 10;
    double bf16End = mean(bf16.losses, 80, 100);
    EXPECT_NEAR(bf16End, f32End, 0.02 * f32End);
    EXPECT_LT(bf16End, bf16.losses.front() - 1.5);
    std::printf("last 20 steps' mean loss: f32 %.5f, bf16 (%s gradients) "
                "%.5f\n",
                f32End, grads, bf16End);

    // bf16 parameters, each its f32 master rounded; the master weights and
    // Adam's state in f32: one more tensor per parameter.
    size_t masters = 0;
    for (auto &[name, bytes] : f32.checkpoint.tensors) {
      auto master = bf16.checkpoint.tensors.find(name + ".master");
      if (master == bf16.checkpoint.tensors.end()) {
        EXPECT_EQ(bf16.checkpoint.header.at(name)["dtype"], "F32") << name;
        continue;
      }
      ++masters;
      EXPECT_EQ(bf16.checkpoint.header.at(name)["dtype"], "BF16") << name;
      const std::string &param = bf16.checkpoint.tensors.at(name);
      ASSERT_EQ(param.size() * 2, master->second.size()) << name;
      for (size_t i = 0; i < param.size() / 2; ++i) {
        uint32_t wide;
        uint16_t low;
        std::memcpy(&wide, master->second.data() + 4 * i, 4);
        std::memcpy(&low, param.data() + 2 * i, 2);
        ASSERT_EQ(low, roundToBf16(wide)) << name << " element " << i;
      }
    }
    EXPECT_GT(masters, 0u);
    EXPECT_EQ(bf16.checkpoint.tensors.size(),
              f32.checkpoint.tensors.size() + masters);
  }
}

TEST_F(PrecisionTest, Bf16WeightsTrackF32WithSgd) {
  // Parameters are compared under SGD: Adam's g/sqrt(v) turns the bf16
  // rounding of a gradient that is 0 in exact arithmetic (the key bias's)
  // into whole steps, so its parameters are not comparable element-wise.
  Trained f32 = train(sgd + " --steps 10", "f32");
  Trained bf16 = train(sgd + " --precision bf16 --steps 10", "bf16");
  ASSERT_FALSE(f32.checkpoint.tensors.empty());
  for (auto &[name, bytes] : f32.checkpoint.tensors)
    EXPECT_LE(scaledError(weightsOf(bf16, name), bytes, 1e-4),
              kSgdWeightTolerance)
        << name;
}

TEST_F(PrecisionTest, Bf16MeshesTrackOneDevice) {
  // Each rank's forward rounds as one device's does up to the order of f32
  // sums; bf16 tensor-parallel weights keep their priority over the
  // sequence split of sequence parallelism; the f32 gradients are reduced
  // in f32. Under ZeRO the master weights are sharded with the state and
  // the bf16 parameters gathered.
  Trained one = train(sgd + " --precision bf16 --steps 3", "one");
  for (const char *mesh :
       {"dp=2", "dp=2,tp=2", "tp=2 --sequence-parallel", "dp=2 --zero 2",
        "dp=2,tp=2 --zero 3", "dp=2 --zero 1 --grad-precision bf16"}) {
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
  // The gradients' type of a bf16 .so is checked the same way.
  fs::path bf16 = dir / "gpt-bf16.so";
  ASSERT_EQ(runShell(quote(std::string(TESSEL_BIN_DIR) + "/tessel-compile") +
                     " " + quote(gpt) + " --precision bf16 -o " +
                     quote(bf16.string()))
                .exitCode,
            0);
  RunResult grads =
      run(quote(bf16.string()) + " --grad-precision bf16 --steps 1");
  EXPECT_NE(grads.exitCode, 0);
  EXPECT_NE(grads.err.find("--grad-precision bf16 differs from the f32 "
                           "gradients model"),
            std::string::npos)
      << grads.err;
  RunResult f32Grads = run(quote(so.string()) + " --grad-precision f32 --steps 1");
  EXPECT_NE(f32Grads.err.find("--grad-precision applies to --precision bf16"),
            std::string::npos)
      << f32Grads.err;
  RunResult bad = run(quote(gpt) + " --precision fp8 --steps 1");
  EXPECT_NE(bad.exitCode, 0);
  EXPECT_NE(bad.err.find("bad value 'fp8' for --precision (expected f32, "
                         "bf16 or f64)"),
            std::string::npos)
      << bad.err;
}

} // namespace
