//===- CapturedStepTest.cpp - tessel-run --graph against call by call -----===//
//
// --graph captures the training step once and launches it every step after.
// On the CPU the launch replays the recorded calls with the arguments they
// were issued with, so anything a step takes from the host when it is issued
// and should not (the step for dropout masks, bias correction and the
// learning-rate schedule; a microbatch's inputs) makes the run differ from
// the call-by-call one. Each case trains a model both ways and expects the
// same checkpoint byte for byte and the same losses.
//
//===----------------------------------------------------------------------===//

#include "LauncherTestSupport.h"

#include <regex>

using namespace tessel::run::test;

namespace {

class CapturedStepTest : public TesselRunTest {
protected:
  /// examples/<example> with each `from` replaced by its `to`.
  fs::path edited(const std::string &example,
                  const std::vector<std::pair<std::string, std::string>> &edits) {
    return editedModel(std::string(TESSEL_EXAMPLES_DIR) + "/" + example, edits,
                       "edited-" + example);
  }

  /// Compiles `source` with `compileFlags`, trains it call by call and with
  /// --graph (`runFlags` both times), and expects the same bytes.
  void expectGraphRunEqualsCallByCall(const fs::path &source,
                                      const std::string &compileFlags,
                                      const std::string &runFlags) {
    std::string so = (dir / "model.so").string();
    RunResult c = runShell(quote(std::string(TESSEL_BIN_DIR) +
                                 "/tessel-compile") +
                           " " + quote(source.string()) + " -o " + quote(so) +
                           compileFlags);
    ASSERT_EQ(c.exitCode, 0) << c.err;
    std::vector<double> loss[2];
    std::string saved[2];
    for (int graph = 0; graph < 2; ++graph) {
      fs::path checkpoint = dir / ("run" + std::to_string(graph) +
                                   ".safetensors");
      loss[graph] = losses(quote(so) + runFlags + " --steps 5 --save " +
                           quote(checkpoint.string()) +
                           (graph ? " --graph" : ""));
      saved[graph] = readFile(checkpoint);
    }
    ASSERT_EQ(loss[0].size(), 5u);
    EXPECT_EQ(loss[1], loss[0]);
    ASSERT_FALSE(saved[0].empty());
    EXPECT_TRUE(saved[1] == saved[0])
        << "the --graph run's checkpoint differs from the call-by-call one";
  }
};

/// GPT-2's dropout (embeddings and both residual branches of every block)
/// and AdamW over a warm-up and cosine schedule: the masks, the bias
/// correction and the rate all change every step; two microbatches each
/// copy their own inputs in.
TEST_F(CapturedStepTest, GptWithDropoutAndCosineScheduleTrainsAlike) {
  const std::string act = "tensor<8x64x128xf32>";
  fs::path source = edited(
      "gpt.mlir",
      {{"%h1 = nn.add %h, %o : " + act,
        "%od = nn.dropout %o rate = 0.1 seed = 21 : " + act +
            "\n  %h1 = nn.add %h, %od : " + act},
       {"%x = nn.add %tok, %pos : " + act,
        "%x0 = nn.add %tok, %pos : " + act +
            "\n  %x = nn.dropout %x0 rate = 0.1 seed = 20 : " + act}});
  expectGraphRunEqualsCallByCall(
      source,
      " --optimizer adamw --lr 3e-3 --schedule warmup_cosine --warmup 2 "
      "--total-steps 5 --clip 1.0",
      " --microbatches 2");
}

/// On dp=2, tp=2 (threads): the captured step holds the mesh's collectives,
/// started ones included, and every rank replays them in the same order.
TEST_F(CapturedStepTest, GptOnAMeshTrainsAlike) {
  expectGraphRunEqualsCallByCall(
      std::string(TESSEL_EXAMPLES_DIR) + "/gpt.mlir",
      " --mesh dp=2,tp=2 --optimizer sgd --lr 0.05 --momentum 0.9",
      " --microbatches 2");
}

/// ZeRO-3 (gathers prefetched a layer ahead, reduce-scatters of the
/// gradient buckets) and bf16 with f32 master weights.
TEST_F(CapturedStepTest, ZeroThreeAndMixedPrecisionTrainAlike) {
  expectGraphRunEqualsCallByCall(std::string(TESSEL_EXAMPLES_DIR) + "/gpt.mlir",
                                 " --mesh dp=2 --zero 3", "");
  expectGraphRunEqualsCallByCall(std::string(TESSEL_EXAMPLES_DIR) + "/mlp.mlir",
                                 " --precision bf16", " --microbatches 3");
}

/// A mean over labelled positions (llama_sft: its model returns the loss's
/// sum and count) scaled by one over the step's count: the captured step
/// adds its microbatches' counts and divides on the device what the
/// launcher divides on the host call by call, in f32 on dp=2 and in f64.
TEST_F(CapturedStepTest, MaskedLossScalesAlike) {
  fs::path sft = fs::path(TESSEL_TEST_INPUTS_DIR) / "llama_sft.mlir";
  expectGraphRunEqualsCallByCall(
      sft, " --mesh dp=2 --optimizer sgd --lr 0.1 --momentum 0.9",
      " --microbatches 3");
  fs::path f64 = dir / "llama_sft_f64.mlir";
  std::ofstream(f64) << std::regex_replace(readFile(sft), std::regex("f32"),
                                           "f64");
  expectGraphRunEqualsCallByCall(f64, " --optimizer adamw --lr 0.01",
                                 " --microbatches 2");
}

/// Evaluation (--eval: the forward on every microbatch) captured: dropout
/// off, as call by call, and each step its own samples.
TEST_F(CapturedStepTest, EvaluationWithDropoutEvaluatesAlike) {
  const std::string act = "tensor<8x64x128xf32>";
  fs::path source = edited(
      "gpt.mlir", {{"%x = nn.add %tok, %pos : " + act,
                    "%x0 = nn.add %tok, %pos : " + act +
                        "\n  %x = nn.dropout %x0 rate = 0.2 seed = 20 : " +
                        act}});
  std::string so = (dir / "eval.so").string();
  RunResult c = runShell(quote(std::string(TESSEL_BIN_DIR) + "/tessel-compile") +
                         " " + quote(source.string()) + " --no-train -o " +
                         quote(so));
  ASSERT_EQ(c.exitCode, 0) << c.err;
  std::vector<double> callByCall =
      losses(quote(so) + " --eval --steps 4 --microbatches 2");
  std::vector<double> launched =
      losses(quote(so) + " --eval --steps 4 --microbatches 2 --graph");
  ASSERT_EQ(callByCall.size(), 4u);
  EXPECT_EQ(launched, callByCall);
  EXPECT_NE(callByCall[1], callByCall[2]); // each step its samples and masks
}

/// The combinations --graph refuses, each with one line saying why.
TEST_F(CapturedStepTest, RefusesWhatItCannotCapture) {
  std::string mlp = quote(std::string(TESSEL_EXAMPLES_DIR) + "/mlp.mlir");
  RunResult grads = run(mlp + " --graph --check-grads");
  EXPECT_NE(grads.exitCode, 0);
  EXPECT_NE(grads.err.find("--graph captures a step; --check-grads runs"),
            std::string::npos)
      << grads.err;
  RunResult trace = run(mlp + " --graph --steps 2 --trace " + path("t.json"));
  EXPECT_NE(trace.exitCode, 0);
  EXPECT_NE(trace.err.find("drop --graph to trace"), std::string::npos)
      << trace.err;
  RunResult pipeline =
      run(mlp + " --graph --steps 2 --mesh pp=2 --quiet");
  EXPECT_NE(pipeline.exitCode, 0);
  EXPECT_NE(pipeline.err.find("--graph: a pipeline's stages exchange"),
            std::string::npos)
      << pipeline.err;
}

} // namespace
