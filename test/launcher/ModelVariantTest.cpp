//===- ModelVariantTest.cpp - Variants of the examples on a mesh ----------===//
//
// Variants of the examples that no example file holds, each trained on one
// device and on the meshes that split what it adds, compared tensor by
// tensor within ParallelEquivalenceTest's tolerances (f32 with SGD and
// momentum: 1e-5 scaled; f64 with AdamW: 1e-9):
//
// - --local-batchnorm on dp=2 against one device with 2 microbatches;
// - a masked loss (ignore_index) accumulated over microbatches as one
//   batch;
// - per-layer attention (windows, rope thetas) on a pipeline;
// - dropout split over tp (each element's mask by its index in the whole
//   tensor), and under --sequence-parallel on the rank's block.
//
// Part of tessel-run-parallel-tests: `ctest -L parallel`.
//
//===----------------------------------------------------------------------===//

#include "test/launcher/LauncherTestSupport.h"

#include <regex>

using namespace tessel::run::test;

namespace {

/// The optimizer of the tensor comparisons: SGD with momentum in f32.
const std::string sgd = "--optimizer sgd --lr 0.1 --momentum 0.9";
constexpr int steps = 3;

/// Variants of the examples, compiled with SGD and trained on one device
/// and on meshes, compared tensor by tensor.
class ModelVariantTest : public TesselRunTest {
protected:
  /// examples/`example` with each `from` replaced by its `to`, written to
  /// `name`.
  fs::path edited(const std::string &example,
                  const std::vector<std::pair<std::string, std::string>> &edits,
                  const std::string &name) {
    return editedModel(std::string(TESSEL_EXAMPLES_DIR) + "/" + example, edits,
                       name);
  }

  /// `source` compiled with `optimizer` (SGD unless given) and
  /// `compileFlags` (--mesh and more), then trained for the steps by
  /// tessel-run with `runFlags`: its checkpoint.
  Checkpoint train(const fs::path &source, const std::string &compileFlags,
                   const std::string &runFlags, const std::string &name,
                   const std::string &optimizer = sgd) {
    std::string so = (dir / (name + ".so")).string();
    RunResult c =
        runShell(quote(std::string(TESSEL_BIN_DIR) + "/tessel-compile") + " " +
                 quote(source.string()) + " -o " + quote(so) + " " + optimizer +
                 compileFlags);
    EXPECT_EQ(c.exitCode, 0) << c.err;
    fs::path checkpoint = dir / (name + ".safetensors");
    RunResult r =
        run(quote(so) + runFlags + " --steps " + std::to_string(steps) +
            " --quiet --save " + quote(checkpoint.string()));
    EXPECT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(r.err.find("runtime counters differ"), std::string::npos)
        << r.err;
    return readCheckpoint(checkpoint);
  }

  /// Every tensor of `a` within the suite's tolerance of `b`'s (f32: 1e-5;
  /// f64: 1e-9); the largest error.
  static double expectSameTensors(Checkpoint &a, const Checkpoint &b,
                                  bool f64 = false) {
    double largest = 0;
    EXPECT_FALSE(b.tensors.empty());
    EXPECT_EQ(a.tensors.size(), b.tensors.size());
    for (auto &[tensor, bytes] : b.tensors) {
      if (!a.tensors.count(tensor)) {
        ADD_FAILURE() << tensor;
        continue;
      }
      double error =
          scaledError(a.tensors[tensor], bytes, 1e-4, f64 ? "F64" : "F32");
      largest = std::max(largest, error);
      EXPECT_LE(error, f64 ? 1e-9 : 1e-5) << tensor;
    }
    return largest;
  }

  /// The largest scaled error between the tensors of `a` and `b`.
  static double largestError(Checkpoint &a, const Checkpoint &b, bool f64) {
    double largest = 0;
    for (auto &[tensor, bytes] : b.tensors)
      if (a.tensors.count(tensor))
        largest = std::max(largest, scaledError(a.tensors[tensor], bytes, 1e-4,
                                                f64 ? "F64" : "F32"));
    return largest;
  }

  /// Trains `source` on one device and with each of `meshFlags`
  /// (tessel-compile's flags: --mesh and more; the .so runs on the mesh it
  /// was compiled for), expecting one device's parameters and momenta.
  void expectMeshesTrainAsOneDevice(const fs::path &source,
                                    const std::vector<std::string> &meshFlags) {
    Checkpoint one = train(source, "", "", "one");
    for (const std::string &flags : meshFlags) {
      SCOPED_TRACE(flags);
      std::string name = "mesh" + flags;
      for (char &c : name)
        if (!std::isalnum(static_cast<unsigned char>(c)))
          c = '-';
      Checkpoint split = train(source, " " + flags, "", name);
      expectSameTensors(split, one);
    }
  }
};

/// --local-batchnorm: each dp rank normalises its own block of the batch
/// (PyTorch's BatchNorm under DDP), which is what one device does with each
/// block as a microbatch: bn_mlp (batch 64) on dp=2 with per-rank
/// statistics trains as bn_mlp at batch 32 with --microbatches 2 (the
/// same samples: rank r's block is microbatch r).
TEST_F(ModelVariantTest, LocalBatchNormTrainsAsOneDeviceWithMicrobatches) {
  std::string model =
      readFile(std::string(TESSEL_EXAMPLES_DIR) + "/bn_mlp.mlir");
  ASSERT_NE(model.find("tensor<64x"), std::string::npos);
  std::string half = std::regex_replace(model, std::regex("tensor<64(x|xi32>)"),
                                        "tensor<32$1");
  fs::path halfModel = dir / "bn_mlp_half.mlir";
  std::ofstream(halfModel) << half;
  Checkpoint local =
      train(std::string(TESSEL_EXAMPLES_DIR) + "/bn_mlp.mlir",
            " --mesh dp=2 --local-batchnorm", " --mesh dp=2", "local");
  Checkpoint one = train(halfModel, "", " --microbatches 2", "one");
  expectSameTensors(local, one);
}

/// Gradient accumulation of a mean over labelled positions: llama_sft
/// (batch 4, each sample's prompt ignored) trains at batch 2 with
/// --microbatches 2 as at batch 4 in one microbatch (the same samples), and
/// so does dp=2 with --microbatches 2 (one sample per rank and
/// microbatch): the model returns the loss's sum and count
/// (nn.loss_count), and the launcher divides the step's sum by the step's
/// count, where the mean of the microbatches' means weighs a microbatch
/// of few labels as much as one of many. SGD in f32 and AdamW in f64. The
/// same model whose loss is scaled after the mean (by 1) keeps the
/// microbatches' means, and ends elsewhere.
TEST_F(ModelVariantTest, MaskedLossAccumulatesAsOneBatch) {
  std::string sft =
      readFile(std::string(TESSEL_TEST_INPUTS_DIR) + "/llama_sft.mlir");
  ASSERT_NE(sft.find("tensor<4x32"), std::string::npos);
  const std::string loss = "  return %l : tensor<f32>";
  ASSERT_NE(sft.find(loss), std::string::npos);
  auto write = [&](const std::string &text, const std::string &name) {
    fs::path path = dir / name;
    std::ofstream(path) << text;
    return path;
  };
  for (bool f64 : {false, true}) {
    SCOPED_TRACE(f64 ? "adamw, f64" : "sgd, f32");
    std::string kind = f64 ? "f64" : "f32";
    std::string optimizer = f64 ? "--optimizer adamw --lr 0.01" : sgd;
    std::string model =
        f64 ? std::regex_replace(sft, std::regex("f32"), "f64") : sft;
    std::string half =
        std::regex_replace(model, std::regex("tensor<4x32"), "tensor<2x32");
    std::string scaled = half;
    std::string type = "tensor<" + kind + ">";
    scaled.replace(scaled.find("  return %l :"), loss.size(),
                   "  %one = nn.constant dense<1.0> : " + type +
                       "\n  %scaled = nn.mul %l, %one : " + type +
                       "\n  return %scaled : " + type);
    Checkpoint whole = train(write(model, "sft-" + kind + ".mlir"), "", "",
                             "whole-" + kind, optimizer);
    fs::path halfModel = write(half, "sft-half-" + kind + ".mlir");
    Checkpoint accumulated = train(halfModel, "", " --microbatches 2",
                                   "accumulated-" + kind, optimizer);
    Checkpoint dp =
        train(halfModel, " --mesh dp=2", " --mesh dp=2 --microbatches 2",
              "dp-" + kind, optimizer);
    double error = std::max(expectSameTensors(accumulated, whole, f64),
                            expectSameTensors(dp, whole, f64));
    RecordProperty("max_tensor_error_" + kind, errorText(error));
    Checkpoint means = train(write(scaled, "sft-scaled-" + kind + ".mlir"), "",
                             " --microbatches 2", "means-" + kind, optimizer);
    double meansError = largestError(means, whole, f64);
    RecordProperty("means_tensor_error_" + kind, errorText(meansError));
    EXPECT_GT(meansError, 1e3 * (f64 ? 1e-9 : 1e-5));
  }
}

/// Per-layer windows and rope thetas on a pipeline: llama_local_global's
/// layers 0-2 are local (a window of 8, theta 10000) and layer 3 global;
/// on pp=2 the second stage runs the model's layers 2 and 3, so it reads
/// their entries (its first layer added to its own index), and trains as
/// one device with the same 2 microbatches.
TEST_F(ModelVariantTest, PerLayerAttentionTrainsAsOneDeviceOnAPipeline) {
  fs::path source =
      fs::path(TESSEL_TEST_INPUTS_DIR) / "llama_local_global.mlir";
  Checkpoint pipelined =
      train(source, " --mesh pp=2 --pipeline-schedule 1f1b --microbatches 2",
            "", "pipelined");
  Checkpoint one = train(source, "", " --microbatches 2", "one");
  RecordProperty("max_tensor_error",
                 errorText(expectSameTensors(pipelined, one)));
}

/// Dropout split across ranks: each element draws the bit one device draws
/// for it (by its index in the whole tensor), so the MLP with dropout after
/// its GELU trains on dp=2 (a batch split), tp=2 (the hidden dimension
/// split) and dp=2,tp=2 exactly as on one device.
TEST_F(ModelVariantTest, SplitDropoutTrainsAsOneDevice) {
  fs::path source = edited(
      "mlp.mlir",
      {{"%a = nn.gelu %hb : tensor<32x1024xf32>",
        "%g = nn.gelu %hb : tensor<32x1024xf32>\n"
        "  %a = nn.dropout %g rate = 0.25 seed = 5 : tensor<32x1024xf32>"}},
      "mlp_dropout.mlir");
  expectMeshesTrainAsOneDevice(
      source, {"--mesh dp=2", "--mesh tp=2", "--mesh dp=2,tp=2"});
}

/// GPT-2's dropout (after the embeddings and on each residual branch, in
/// every repeated block, each block drawing its own mask): with
/// --sequence-parallel the residual dropouts run on the rank's block of the
/// sequence, after the reduce-scatter, and the model still trains as one
/// device on tp=2 and dp=2,tp=2 (and without SP on tp=2, where they run
/// whole on every tp rank).
TEST_F(ModelVariantTest, SequenceParallelDropoutTrainsAsOneDevice) {
  const std::string act = "tensor<8x64x128xf32>";
  fs::path source =
      edited("gpt.mlir",
             {{"%h1 = nn.add %h, %o : " + act,
               "%od = nn.dropout %o rate = 0.1 seed = 21 : " + act +
                   "\n  %h1 = nn.add %h, %od : " + act},
              {"%h2 = nn.add %h1, %p : " + act,
               "%pd = nn.dropout %p rate = 0.1 seed = 22 : " + act +
                   "\n  %h2 = nn.add %h1, %pd : " + act},
              {"%x = nn.add %tok, %pos : " + act,
               "%x0 = nn.add %tok, %pos : " + act +
                   "\n  %x = nn.dropout %x0 rate = 0.1 seed = 20 : " + act}},
             "gpt_dropout.mlir");
  expectMeshesTrainAsOneDevice(
      source, {"--mesh tp=2", "--mesh tp=2 --sequence-parallel",
               "--mesh dp=2,tp=2 --sequence-parallel"});
}

} // namespace
