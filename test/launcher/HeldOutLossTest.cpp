//===- HeldOutLossTest.cpp - tessel-run --eval-every against --eval
//--------===//
//
// A held-out loss while training (Megatron's --eval-interval/--eval-iters,
// Hugging Face's eval_steps): after every N-th step and the last, the
// forward entry with dropout off on the same --eval-steps batches of
// --eval-data. Each case checks it against what --eval computes from the
// checkpoint saved at that step on the same file: the held-out loss is
// exactly that evaluation, dropout included (off: a model without its
// dropout evaluates alike), on one device, on dp=2 and on a pipeline, and
// for a loss over labelled positions one mean over all the held-out
// positions; with --graph, launched from a captured forward, bit for bit
// the call-by-call loss.
//
//===----------------------------------------------------------------------===//

#include "LauncherTestSupport.h"

#include <random>
#include <regex>

using namespace tessel::run::test;

namespace {

const std::string sgd = " --optimizer sgd --lr 0.1 --momentum 0.9";

class HeldOutLossTest : public TesselRunTest {
protected:
  /// `count` random tokens below `vocab` as a u16 .bin file; its path.
  std::string tokenFile(const std::string &name, int64_t count, int vocab,
                        unsigned seed) {
    std::mt19937 rng(seed);
    std::string bytes;
    for (int64_t i = 0; i < count; ++i) {
      uint16_t token = uint16_t(rng() % unsigned(vocab));
      bytes.append(reinterpret_cast<const char *>(&token), 2);
    }
    writeFile(dir / name, bytes);
    return (dir / name).string();
  }

  /// tessel-compile `source` with `flags` into the test's folder.
  std::string compile(const fs::path &source, const std::string &flags,
                      const std::string &name) {
    std::string so = (dir / (name + ".so")).string();
    RunResult c = runShell(quote(std::string(TESSEL_BIN_DIR) +
                                 "/tessel-compile") +
                           " " + quote(source.string()) + " -o " + quote(so) +
                           flags);
    EXPECT_EQ(c.exitCode, 0) << c.err;
    return so;
  }

  /// examples/gpt.mlir with dropout (rate 0.3) on its embeddings.
  fs::path gptWithDropout() {
    const std::string act = "tensor<8x64x128xf32>";
    return editedModel(
        std::string(TESSEL_EXAMPLES_DIR) + "/gpt.mlir",
        {{"%x = nn.add %tok, %pos : " + act,
          "%x0 = nn.add %tok, %pos : " + act +
              "\n  %x = nn.dropout %x0 rate = 0.3 seed = 20 : " + act}},
        "gpt_dropout.mlir");
  }

  /// The held-out losses of a training run of `so` (its metrics' eval_loss
  /// by step); the checkpoint it saves at the end.
  std::map<int64_t, double> heldOut(const std::string &so,
                                    const std::string &flags,
                                    const std::string &checkpoint) {
    std::map<int64_t, double> out;
    for (const json &line :
         metricLines(quote(so) + flags + " --save " + quote(checkpoint)))
      if (line.contains("eval_loss"))
        out[line.at("step").get<int64_t>()] =
            line.at("eval_loss").get<double>();
    return out;
  }

  /// The loss --eval computes from `checkpoint` on `flags`' data: one step
  /// of `microbatches` microbatches (the held-out batches, in order).
  double evaluated(const std::string &so, const std::string &checkpoint,
                   const std::string &flags, int64_t microbatches) {
    std::vector<double> loss =
        losses(quote(so) + " --eval --steps 1 --load " + quote(checkpoint) +
               " --microbatches " + std::to_string(microbatches) + flags);
    EXPECT_EQ(loss.size(), 1u);
    return loss.empty() ? 0.0 : loss[0];
  }
};

/// GPT with dropout on its embeddings, --data and --eval-data: a held-out
/// loss after steps 2, 4 and 5 (the last), each over the same 3 batches of
/// 2 microbatches; the last equals --eval of the saved parameters on those
/// 6 microbatches, and so does --eval of GPT without its dropout (it is off).
TEST_F(HeldOutLossTest, EqualsTheEvaluationOfTheSavedParameters) {
  fs::path dropout = gptWithDropout();
  std::string so = compile(dropout, sgd, "dropout");
  std::string plain = compile(std::string(TESSEL_EXAMPLES_DIR) + "/gpt.mlir",
                              sgd, "plain");
  std::string train = tokenFile("train.bin", 8 * 65 * 12, 256, 1);
  std::string held = tokenFile("held.bin", 8 * 65 * 6, 256, 2);
  std::string data = " --data " + quote(train) + " --eval-data " + quote(held);
  std::string saved = (dir / "five.safetensors").string();
  std::map<int64_t, double> losses =
      heldOut(so,
              " --steps 5 --microbatches 2 --eval-every 2 --eval-steps 3" +
                  data,
              saved);
  ASSERT_EQ(losses.size(), 3u);
  EXPECT_TRUE(losses.count(2) && losses.count(4) && losses.count(5));
  std::string onHeld = " --data " + quote(held);
  double evaluatedLoss = evaluated(so, saved, onHeld, 6);
  EXPECT_NEAR(losses[5], evaluatedLoss, 1e-6 * std::fabs(evaluatedLoss));
  EXPECT_NEAR(evaluated(plain, saved, onHeld, 6), evaluatedLoss,
              1e-6 * std::fabs(evaluatedLoss));
  // The training loss of the step (dropout on, other samples) differs.
  std::vector<json> lines = metricLines(
      quote(so) + " --steps 1 --eval-every 1 --eval-steps 3" + data);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].at("loss"), lines[0].at("eval_loss"));
}

/// dp=2 (each rank its half of every held-out batch) and a pipeline (pp=2,
/// the last stage's losses shared) take the held-out loss one device takes
/// after the same steps.
TEST_F(HeldOutLossTest, MeshesTakeOneDevicesHeldOutLoss) {
  fs::path gpt = std::string(TESSEL_EXAMPLES_DIR) + "/gpt.mlir";
  std::string train = tokenFile("train.bin", 8 * 65 * 8, 256, 3);
  std::string held = tokenFile("held.bin", 8 * 65 * 4, 256, 4);
  std::string flags = " --steps 3 --eval-every 3 --eval-steps 2 --data " +
                      quote(train) + " --eval-data " + quote(held);
  std::string one = compile(gpt, sgd, "one");
  double want = heldOut(one, flags + " --microbatches 2",
                        (dir / "one.safetensors").string())
                    .at(3);
  std::string dp = compile(gpt, sgd + " --mesh dp=2", "dp");
  EXPECT_NEAR(heldOut(dp, flags + " --mesh dp=2 --microbatches 2",
                      (dir / "dp.safetensors").string())
                  .at(3),
              want, 1e-5 * want);
  std::string pp = compile(
      gpt, sgd + " --mesh pp=2 --pipeline-schedule 1f1b --microbatches 2",
      "pp");
  EXPECT_NEAR(heldOut(pp, flags + " --mesh pp=2",
                      (dir / "pp.safetensors").string())
                  .at(3),
              want, 1e-5 * want);
}

/// A loss over labelled positions (llama_sft: ignore_index -100 over each
/// sample's random prompt): the held-out loss is one mean over all the
/// held-out batches' labelled positions, which --eval of the saved
/// parameters computes over the same microbatches in one step. Synthetic
/// held-out samples (no --eval-data) are not training's.
TEST_F(HeldOutLossTest, CountedLossIsOneMeanOverTheHeldOutPositions) {
  fs::path sft = fs::path(TESSEL_TEST_INPUTS_DIR) / "llama_sft.mlir";
  std::string so = compile(sft, sgd, "sft");
  std::string saved = (dir / "sft.safetensors").string();
  std::map<int64_t, double> synthetic =
      heldOut(so, " --steps 2 --eval-every 2 --eval-steps 3 --microbatches 2",
              saved);
  ASSERT_EQ(synthetic.size(), 1u);
  // Evaluating the training stream's first 6 microbatches gives another
  // loss: the held-out samples are others.
  EXPECT_NE(evaluated(so, saved, "", 6), synthetic.at(2));


  // From files (i32): 24 windows of 32 held out (3 batches of 2
  // microbatches of 4), -100 over a prompt of another length in each.
  std::mt19937 rng(7);
  auto int32File = [&](const std::string &name, int64_t windows,
                       bool labels) {
    std::string bytes;
    for (int64_t w = 0; w < windows; ++w) {
      unsigned prompt = rng() % 32;
      for (unsigned t = 0; t < 32 + (w + 1 == windows); ++t) {
        int32_t value = labels && t < prompt ? -100 : int32_t(rng() % 128);
        bytes.append(reinterpret_cast<const char *>(&value), 4);
      }
    }
    writeFile(dir / name, bytes);
    return quote((dir / name).string());
  };
  std::string files =
      " --data-dtype i32 --data " + int32File("train.bin", 16, false) +
      " --labels " + int32File("train_labels.bin", 16, true) +
      " --eval-data " + int32File("held.bin", 24, false) + " --eval-labels " +
      int32File("held_labels.bin", 24, true);
  std::map<int64_t, double> fromFiles = heldOut(
      so, " --steps 2 --eval-every 2 --eval-steps 3 --microbatches 2" + files,
      saved);
  ASSERT_EQ(fromFiles.size(), 1u);
  std::string onHeld = " --data-dtype i32 --data " +
                       quote((dir / "held.bin").string()) + " --labels " +
                       quote((dir / "held_labels.bin").string());
  double whole = evaluated(so, saved, onHeld, 6);
  EXPECT_NEAR(fromFiles.at(2), whole, 1e-6 * whole);
  // The mean of the 6 microbatches' means is another loss.
  std::vector<double> each =
      losses(quote(so) + " --eval --steps 6 --load " + quote(saved) + onHeld);
  ASSERT_EQ(each.size(), 6u);
  double meanOfMeans = 0;
  for (double loss : each)
    meanOfMeans += loss / 6;
  EXPECT_GT(std::fabs(meanOfMeans - whole), 1e-4 * whole);
}

/// --graph captures the held-out forward too (dropout off, a graph of its
/// own launched once per held-out batch): GPT with dropout on its
/// embeddings, and llama_sft's loss over labelled positions (the counts
/// read back with the losses), give the call-by-call held-out losses and
/// checkpoint bit for bit, after steps 2, 4 and 5. A captured forward
/// that kept dropout on, or read the held-out batches' inputs from the
/// host at its capture, would not.
TEST_F(HeldOutLossTest, CapturedEqualsCallByCall) {
  fs::path dropout = gptWithDropout();
  for (const fs::path &source :
       {dropout, fs::path(TESSEL_TEST_INPUTS_DIR) / "llama_sft.mlir"}) {
    SCOPED_TRACE(source.filename().string());
    std::string so = compile(source, sgd, source.stem().string());
    std::map<int64_t, double> held[2];
    std::string saved[2];
    for (int graph = 0; graph < 2; ++graph) {
      fs::path checkpoint =
          dir / ("run" + std::to_string(graph) + ".safetensors");
      held[graph] =
          heldOut(so,
                  " --steps 5 --microbatches 2 --eval-every 2 --eval-steps 3" +
                      std::string(graph ? " --graph" : ""),
                  checkpoint.string());
      saved[graph] = readFile(checkpoint);
    }
    ASSERT_EQ(held[0].size(), 3u);
    EXPECT_EQ(held[1], held[0]);
    EXPECT_NE(held[0].at(2), held[0].at(4)); // trained in between
    ASSERT_FALSE(saved[0].empty());
    EXPECT_TRUE(saved[1] == saved[0]);
  }
}

/// The flags that make no held-out loss, each refused in one line.
TEST_F(HeldOutLossTest, RefusesWhatHoldsNothingOut) {
  std::string mlp = quote(std::string(TESSEL_EXAMPLES_DIR) + "/mlp.mlir");
  auto refused = [&](const std::string &args, const std::string &message) {
    RunResult r = run(mlp + " " + args);
    EXPECT_NE(r.exitCode, 0) << args;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << "\n" << r.err;
    EXPECT_TRUE(isOneLine(r.err)) << r.err;
  };
  refused("--eval-every 2 --eval", "--eval-every evaluates while training; "
                                   "not with --eval");
  refused("--eval-steps 3", "--eval-steps applies to --eval-every N");
  refused("--eval-data " + path("x.bin"),
          "--eval-data applies to --eval-every N");
  refused("--eval-every 2 --eval-labels " + path("l.bin"),
          "--eval-labels needs --eval-data FILE");
  refused("--eval-every 2 --data " + path("x.bin"),
          "--eval-every with --data needs --eval-data FILE");
  refused("--eval-every 0", "--eval-every");
}

} // namespace
