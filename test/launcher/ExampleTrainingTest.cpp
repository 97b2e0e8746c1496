//===- ExampleTrainingTest.cpp - tessel-run training the examples ---------===//
//
// examples/mlp.mlir, gpt.mlir, llama.mlir and mistral.mlir compiled by
// tessel-compile and trained by tessel-run as a subprocess: learning within a
// step budget, resuming, microbatches against one big batch, dropout masks,
// recompute, no-decay groups and finite-difference gradients. TesselRunTest.cpp
// drives tessel-run on hand-written model .so files.
//
//===----------------------------------------------------------------------===//

#include "test/launcher/LauncherTestSupport.h"
#include "runtime/launcher/ModelLibrary.h"

#include <cstdlib>

using namespace tessel::run::test;

namespace {

/// Example `name` (in examples/), quoted for a command line.
std::string example(const std::string &name) {
  return quote(std::string(TESSEL_EXAMPLES_DIR) + "/" + name);
}

/// Example `name` with every f32 written f64: what --precision f64 must
/// equal.
std::string exampleWrittenInF64(const std::string &name) {
  std::string text = readFile(fs::path(TESSEL_EXAMPLES_DIR) / name);
  for (size_t at; (at = text.find("f32")) != std::string::npos;)
    text.replace(at, 3, "f64");
  return text;
}

/// That --check-grads printed exactly one line for each of `names`.
void expectOneLineEach(const std::string &out,
                       std::initializer_list<const char *> names) {
  for (const char *name : names) {
    std::string line = "grad-check " + std::string(name) + ": ";
    size_t at = out.find(line);
    EXPECT_NE(at, std::string::npos) << name << "\n" << out;
    EXPECT_EQ(out.find(line, at + 1), std::string::npos) << name << "\n" << out;
  }
}

//===--- Training the examples (needs tessel-autodiff in tessel-compile) --===//

/// Compiles examples/mlp.mlir once per suite: as is (batch 32, the compiled
/// defaults), and with SGD for the equivalence checks at batch 32 and at
/// batch 8 (four microbatches of 8 must equal one batch of 32). Skips when
/// tessel-compile does not emit training entries yet.
class ExampleTrainingTest : public TesselRunTest {
protected:
  static void SetUpTestSuite() {
    std::string pattern =
        (fs::temp_directory_path() / "tessel-run-examples-XXXXXX").string();
    if (!::mkdtemp(pattern.data()))
      return;
    suiteDir = pattern;
    std::string mlp = readFile(fs::path(TESSEL_EXAMPLES_DIR) / "mlp.mlir");
    std::string mlp8 = mlp;
    for (size_t at; (at = mlp8.find("tensor<32x")) != std::string::npos;)
      mlp8.replace(at, 10, "tensor<8x");
    writeFile(suiteDir / "mlp8.mlir", mlp8);
    // Dropout on the input: microbatch m must draw the masks of samples
    // m·8 .. m·8 + 7 of the batch of 32.
    auto dropoutModel = [](int batch) {
      std::string b = std::to_string(batch);
      return "func.func @loss(%x: tensor<" + b +
             "x64xf32> {nn.input}, %y: tensor<" + b +
             "xi32> {nn.label},\n"
             "    %w: tensor<64x10xf32> {nn.param = \"w\", nn.init = "
             "#nn.init<normal, 0.1>}) -> tensor<f32> {\n"
             "  %d = nn.dropout %x rate = 0.5 seed = 7 : "
             "tensor<" + b + "x64xf32>\n"
             "  %z = nn.matmul %d, %w : (tensor<" + b +
             "x64xf32>, tensor<64x10xf32>) -> tensor<" + b + "x10xf32>\n"
             "  %l = nn.cross_entropy %z, %y : (tensor<" + b +
             "x10xf32>, tensor<" + b + "xi32>) -> tensor<f32>\n"
             "  return %l : tensor<f32>\n}\n";
    };
    writeFile(suiteDir / "dropout32.mlir", dropoutModel(32));
    writeFile(suiteDir / "dropout8.mlir", dropoutModel(8));
    auto compile = [](const std::string &source, const std::string &so,
                      const std::string &flags) {
      std::string command =
          quote(std::string(TESSEL_BIN_DIR) + "/tessel-compile") + " " +
          quote(source) + " -o " + quote((suiteDir / so).string()) + " " +
          flags + " >/dev/null 2>&1";
      return std::system(command.c_str()) == 0;
    };
    std::string sgd = "--optimizer sgd --lr 0.05 --momentum 0.9 --clip 1";
    std::string examples = TESSEL_EXAMPLES_DIR;
    if (!compile(examples + "/mlp.mlir", "mlp.so", "") ||
        !compile(examples + "/mlp.mlir", "mlp-sgd.so", sgd) ||
        !compile((suiteDir / "mlp8.mlir").string(), "mlp8-sgd.so", sgd) ||
        !compile((suiteDir / "dropout32.mlir").string(), "dropout32.so", sgd) ||
        !compile((suiteDir / "dropout8.mlir").string(), "dropout8.so", sgd))
      return;
    tessel::run::LoadedModel model =
        tessel::run::loadModel((suiteDir / "mlp.so").string());
    landed = model.desc.trains();
  }
  static void TearDownTestSuite() {
    if (!suiteDir.empty())
      fs::remove_all(suiteDir);
  }
  void SetUp() override {
    ASSERT_TRUE(landed) << "tessel-compile failed on the examples or emitted "
                           "no training entries for examples/mlp.mlir";
    TesselRunTest::SetUp();
  }
  static std::string so(const std::string &name) {
    return quote((suiteDir / name).string());
  }

  /// Trains `big` for 3 steps and `small` for 3 steps of 4 microbatches,
  /// saved as `name`1 and `name`4, and expects the same losses and
  /// parameters (relative error <= 1e-5); a checkpoint of `tensors`
  /// tensors when that is not 0.
  void expectMicrobatchesMatchOneBatch(const std::string &big,
                                       const std::string &small,
                                       const std::string &name,
                                       size_t tensors = 0) {
    std::vector<double> whole =
        losses(so(big) + " --steps 3 --save " + path(name + "1.safetensors"));
    std::vector<double> split =
        losses(so(small) + " --steps 3 --microbatches 4 --save " +
               path(name + "4.safetensors"));
    ASSERT_EQ(whole.size(), 3u);
    ASSERT_EQ(split.size(), 3u);
    for (int i = 0; i < 3; ++i)
      EXPECT_NEAR(split[i], whole[i], 1e-5 * whole[i]);
    Checkpoint a = readCheckpoint(dir / (name + "1.safetensors"));
    Checkpoint b = readCheckpoint(dir / (name + "4.safetensors"));
    if (tensors != 0) {
      ASSERT_EQ(a.tensors.size(), tensors);
    }
    for (auto &[tensor, bytes] : a.tensors)
      EXPECT_LE(relativeError(b.tensors[tensor], bytes), 1e-5) << tensor;
  }

  /// Runs `train` on each of `meshes` and expects every saved tensor
  /// within 1e-5 (scaled, floor 1e-4) of `reference`'s.
  void expectMeshesEndAt(const std::string &train, const Checkpoint &reference,
                         std::initializer_list<const char *> meshes) {
    for (const std::string mesh : meshes) {
      SCOPED_TRACE(mesh);
      RunResult r = run(train + " --mesh " + mesh + " --save " +
                        path("mesh.safetensors"));
      ASSERT_EQ(r.exitCode, 0) << r.err;
      Checkpoint meshed = readCheckpoint(dir / "mesh.safetensors");
      ASSERT_EQ(meshed.tensors.size(), reference.tensors.size());
      for (auto &[name, bytes] : reference.tensors)
        EXPECT_LE(scaledError(meshed.tensors.at(name), bytes, 1e-4), 1e-5)
            << name;
    }
  }

  static inline fs::path suiteDir;
  static inline bool landed = false;
};

// Issue 4: "examples/mlp.mlir on its synthetic task reaches a loss under a
// stated fraction of its start within 200 steps". The task: labels from a
// random linear teacher on 16 of the 784 features. With the compiled
// defaults (AdamW, lr 1e-3) the mean loss of steps 191-200 is 0.49 of the
// first step's (2.39 -> 1.18); the bound is 0.65.
TEST_F(ExampleTrainingTest, MlpLearnsItsSyntheticTaskIn200Steps) {
  std::vector<double> loss = losses(so("mlp.so") + " --steps 200");
  ASSERT_EQ(loss.size(), 200u);
  EXPECT_NEAR(loss[0], std::log(10.0), 0.2); // Untrained: ln(classes).
  EXPECT_LT(mean(loss, 190, 200), 0.65 * loss[0])
      << loss[0] << " -> " << mean(loss, 190, 200);
}

TEST_F(ExampleTrainingTest, MlpResumeEqualsAnUninterruptedRun) {
  std::vector<double> whole =
      losses(so("mlp.so") + " --steps 4 --save " + path("whole.safetensors"));
  losses(so("mlp.so") + " --steps 2 --save " + path("half.safetensors"));
  std::vector<double> resumed =
      losses(so("mlp.so") + " --steps 2 --load " + path("half.safetensors") +
             " --save " + path("resumed.safetensors"));
  ASSERT_EQ(whole.size(), 4u);
  ASSERT_EQ(resumed.size(), 2u);
  EXPECT_EQ(resumed[0], whole[2]);
  EXPECT_EQ(resumed[1], whole[3]);
  Checkpoint a = readCheckpoint(dir / "whole.safetensors");
  Checkpoint b = readCheckpoint(dir / "resumed.safetensors");
  EXPECT_EQ(a.header["__metadata__"]["tessel.step"], "4");
  EXPECT_EQ(a.tensors.count("fc1.weight.m"), 1u); // AdamW's moments.
  EXPECT_EQ(a.tensors, b.tensors);
}

// Issue 4: microbatches M = 1 and M = 4 give the same parameters after 3
// steps (relative error <= 1e-5). SGD with momentum and clipping: Adam's
// first step is g / |g|, which turns rounding in a near-zero gradient into
// a full step.
TEST_F(ExampleTrainingTest, MlpFourMicrobatchesEqualOneBigBatch) {
  // 4 parameters, 4 momentum buffers.
  expectMicrobatchesMatchOneBatch("mlp-sgd.so", "mlp8-sgd.so", "m", 8);
}

// Dropout under microbatches draws, in microbatch m, the masks of the
// samples one big batch would give m·B .. m·B + B − 1: M = 4 of 8 equals
// one batch of 32 (and would not if every microbatch drew microbatch 0's).
TEST_F(ExampleTrainingTest, DropoutMicrobatchesDrawTheBigBatchMasks) {
  expectMicrobatchesMatchOneBatch("dropout32.so", "dropout8.so", "d");
}

// Issue 4: "examples/gpt.mlir as a character-level model on a text file
// that every Debian machine has falls well below ln(vocab)". AdamW lr 1e-3
// with clipping at 1: 5.41 -> 2.58 (mean of steps 91-100); the bound is
// 0.6 ln 256 = 3.33.
TEST_F(ExampleTrainingTest, GptLearnsTheGplAsCharacters) {
  const std::string gpl = "/usr/share/common-licenses/GPL-3";
  if (!fs::exists(gpl))
    GTEST_SKIP() << gpl << " is missing";
  std::vector<double> loss =
      losses(quote(std::string(TESSEL_EXAMPLES_DIR) + "/gpt.mlir") +
             " --clip 1 --steps 100 --data-dtype u8 --data " + quote(gpl));
  ASSERT_EQ(loss.size(), 100u);
  EXPECT_NEAR(loss[0], std::log(256.0), 0.3);
  EXPECT_LT(mean(loss, 90, 100), 0.6 * std::log(256.0))
      << loss[0] << " -> " << mean(loss, 90, 100);
}

// examples/llama.mlir learns the same text: from log 256 to under 0.6 of
// it in 100 steps (measured: 5.58 -> 2.44 at step 100, mean of steps
// 91-100 2.35; gpt 2.62 there).
TEST_F(ExampleTrainingTest, LlamaLearnsTheGplAsCharacters) {
  const std::string gpl = "/usr/share/common-licenses/GPL-3";
  if (!fs::exists(gpl))
    GTEST_SKIP() << gpl << " is missing";
  std::vector<double> loss = losses(example("llama.mlir") +
                                    " --clip 1 --steps 100 --data-dtype u8 "
                                    "--data " +
                                    quote(gpl));
  ASSERT_EQ(loss.size(), 100u);
  EXPECT_NEAR(loss[0], std::log(256.0), 0.3);
  EXPECT_LT(mean(loss, 90, 100), 0.6 * std::log(256.0))
      << loss[0] << " -> " << mean(loss, 90, 100);
}

// The gradients through rope (the query and key projections, the only
// parameters it lies behind) against finite differences in f64, at the
// default bound of 1e-6. Without biases their gradients are small at
// initialisation (the scores are near uniform), O(1e-5): from a first step
// of 1e-3 the differences ran into the loss's rounding (errors of 5e-11,
// 1.5e-6 and 1.8e-6 relative, and a bound of 1e-5 here); from 1e-2 they
// settle at once (measured 5.4e-8 and 6.0e-8).
TEST_F(ExampleTrainingTest, LlamaGradientsThroughRopeMatchFiniteDifferences) {
  RunResult r = run(example("llama.mlir") +
                    " --precision f64 --check-grads --quiet "
                    "--grad-params "
                    "'layers.attention.wq.weight,layers.attention.wk.weight'");
  EXPECT_EQ(r.exitCode, 0) << r.err << r.out;
  expectOneLineEach(r.out,
                    {"layers.attention.wq.weight", "layers.attention.wk.weight"});
}

// examples/mistral.mlir: the gradients through attention under a sliding
// window of 16 of its 64 positions (the key and value projections) against
// finite differences in f64, at the default bound.
TEST_F(ExampleTrainingTest,
       MistralGradientsThroughTheWindowMatchFiniteDifferences) {
  RunResult r = run(example("mistral.mlir") +
                    " --precision f64 --check-grads --quiet "
                    "--grad-params "
                    "'layers.attention.wk.weight,layers.attention.wv.weight'");
  EXPECT_EQ(r.exitCode, 0) << r.err << r.out;
  expectOneLineEach(
      r.out, {"layers.attention.wk.weight", "layers.attention.wv.weight"});
}

// Llama's pipelines (SGD, 2 microbatches, 3 steps) end where one device
// does: 1F1B bit for bit, and DualPipeV with its two key/value heads split
// over tp=2 inside each stage within 1e-5.
TEST_F(ExampleTrainingTest, LlamaPipelinesTrainAsOneDevice) {
  const std::string train = example("llama.mlir") +
                            " --optimizer sgd --lr 0.1 --momentum 0.9 "
                            "--steps 3 --microbatches 2 --quiet";
  RunResult one = run(train + " --save " + path("one.safetensors"));
  ASSERT_EQ(one.exitCode, 0) << one.err;
  Checkpoint reference = readCheckpoint(dir / "one.safetensors");
  expectMeshesEndAt(train, reference,
                    {"pp=2", "tp=2,pp=2 --pipeline-schedule dualpipev"});
}

// Issue 4: recompute on and off give the same parameters after 3 steps
// (relative error <= 1e-5).
TEST_F(ExampleTrainingTest, GptRecomputeGivesTheSameParameters) {
  std::string gpt = quote(std::string(TESSEL_EXAMPLES_DIR) + "/gpt.mlir") +
                    " --steps 3 --optimizer sgd --lr 0.1 --momentum 0.9";
  std::map<std::string, Checkpoint> runs;
  for (const char *mode : {"none", "selective", "full"}) {
    std::string file = std::string(mode) + ".safetensors";
    losses(gpt + " --recompute " + mode + " --save " + path(file));
    runs[mode] = readCheckpoint(dir / file);
  }
  ASSERT_FALSE(runs["none"].tensors.empty());
  for (const char *mode : {"selective", "full"})
    for (auto &[name, bytes] : runs["none"].tensors)
      EXPECT_LE(relativeError(runs[mode].tensors[name], bytes), 1e-5)
          << mode << " " << name;
}

// Parameter groups (--no-decay): after one AdamW step each parameter's
// update depends only on its own gradient, the same in every run, so a
// parameter in the no-decay group equals, bit for bit, the run without
// weight decay, and the others the run where everything decays.
TEST_F(ExampleTrainingTest, MlpNoDecayGroupStepsWithoutWeightDecay) {
  std::string mlp = quote(std::string(TESSEL_EXAMPLES_DIR) + "/mlp.mlir") +
                    " --steps 1 --optimizer adamw --lr 0.1";
  auto train = [&](const std::string &flags, const std::string &file) {
    EXPECT_EQ(losses(mlp + " " + flags + " --save " + path(file)).size(), 1u)
        << flags;
    return readCheckpoint(dir / file);
  };
  Checkpoint grouped = train("--weight-decay 0.1 --no-decay 'fc1.bias,fc2.*'",
                             "grouped.safetensors");
  Checkpoint undecayed = train("--weight-decay 0", "undecayed.safetensors");
  Checkpoint decayed = train("--weight-decay 0.1", "decayed.safetensors");
  // The parameters and their m and v.
  ASSERT_EQ(grouped.tensors.size(), 12u);
  // lr 0.1 × weight decay 0.1 shrinks a weight by 1%: the runs differ.
  EXPECT_NE(decayed.tensors["fc1.weight"], undecayed.tensors["fc1.weight"]);
  EXPECT_NE(decayed.tensors["fc2.weight"], undecayed.tensors["fc2.weight"]);
  for (auto &[name, bytes] : grouped.tensors) {
    bool exempt = name.rfind("fc1.bias", 0) == 0 || name.rfind("fc2.", 0) == 0;
    EXPECT_EQ(bytes, (exempt ? undecayed : decayed).tensors[name])
        << name << (exempt ? " (no decay)" : " (decayed)");
  }
}

// --no-decay '*' exempts every parameter: three steps equal, bit for bit,
// training with --weight-decay 0.
TEST_F(ExampleTrainingTest, MlpNoDecayOnEveryParameterIsNoWeightDecay) {
  std::string mlp = quote(std::string(TESSEL_EXAMPLES_DIR) + "/mlp.mlir") +
                    " --steps 3 --optimizer adamw --lr 0.01";
  std::vector<double> exempt =
      losses(mlp + " --weight-decay 0.1 --no-decay '*' --save " +
             path("exempt.safetensors"));
  std::vector<double> zero =
      losses(mlp + " --weight-decay 0 --save " + path("zero.safetensors"));
  ASSERT_EQ(exempt.size(), 3u);
  EXPECT_EQ(exempt, zero);
  Checkpoint a = readCheckpoint(dir / "exempt.safetensors");
  Checkpoint b = readCheckpoint(dir / "zero.safetensors");
  ASSERT_EQ(a.tensors.size(), 12u);
  EXPECT_EQ(a.tensors, b.tensors);
}

TEST_F(ExampleTrainingTest, MlpGradientsMatchFiniteDifferences) {
  RunResult r = run(so("mlp.so") + " --check-grads");
  EXPECT_EQ(r.exitCode, 0) << r.err << r.out;
  for (const char *name : {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"})
    EXPECT_NE(r.out.find("grad-check " + std::string(name) + ": "),
              std::string::npos)
        << r.out;
}

// --precision f64 compiles the model as if it were written in f64: GPT
// (attention and its log-sum-exp, layer norms, an nn.repeat, a tied
// head) trained 3 AdamW steps saves the same bytes as the file with every
// f32 replaced, and a .so of either describes itself as f64.
TEST_F(ExampleTrainingTest, PromotedF64EqualsWrittenF64) {
  writeFile(dir / "gpt64.mlir", exampleWrittenInF64("gpt.mlir"));
  RunResult promoted =
      run(example("gpt.mlir") + " --precision f64 --steps 3 --quiet --save " +
          path("promoted.safetensors"));
  ASSERT_EQ(promoted.exitCode, 0) << promoted.err;
  RunResult written = run(path("gpt64.mlir") + " --steps 3 --quiet --save " +
                          path("written.safetensors"));
  ASSERT_EQ(written.exitCode, 0) << written.err;
  Checkpoint a = readCheckpoint(dir / "promoted.safetensors");
  Checkpoint b = readCheckpoint(dir / "written.safetensors");
  ASSERT_FALSE(a.tensors.empty());
  EXPECT_EQ(a.header.at("wte")["dtype"], "F64");
  EXPECT_EQ(a.tensors, b.tensors);

  // The written f64 model's .so takes --precision f64; an f32 one refuses
  // it, naming the command that compiles it.
  for (const auto &[source, so] :
       {std::pair{path("gpt64.mlir"), "gpt64.so"},
        std::pair{example("gpt.mlir"), "gpt32.so"}}) {
    ASSERT_EQ(runShell(quote(std::string(TESSEL_BIN_DIR) + "/tessel-compile") +
                       " " + source + " -o " + path(so))
                  .exitCode,
              0);
  }
  EXPECT_EQ(
      run(path("gpt64.so") + " --precision f64 --steps 1 --quiet").exitCode, 0);
  RunResult refused = run(path("gpt32.so") + " --precision f64 --steps 1");
  EXPECT_NE(refused.err.find("--precision f64 differs from the f32 that "
                             "model"),
            std::string::npos)
      << refused.err;
}

// An f32 run's checkpoint widens into a --precision f64 run, so a check
// at f64's noise looks at the gradients where the f32 run stopped.
TEST_F(ExampleTrainingTest, F32CheckpointChecksInF64) {
  ASSERT_EQ(
      run(so("mlp.so") + " --steps 5 --quiet --save " + path("f32.safetensors"))
          .exitCode,
      0);
  RunResult r = run(example("mlp.mlir") + " --precision f64 --load " +
                    path("f32.safetensors") + " --check-grads --quiet");
  EXPECT_EQ(r.exitCode, 0) << r.err << r.out;
  EXPECT_NE(r.err.find("converted 4 parameters from F32 to F64"),
            std::string::npos)
      << r.err;
  expectOneLineEach(r.out,
                    {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"});
}

// --freeze (PyTorch's requires_grad=False): frozen parameters keep their
// initial values and hold no optimizer state, the others train, and every
// mesh trains to one device's parameters with the same ones frozen: a
// frozen tied embedding on a pipeline (its copies on two stages exchange
// no gradient), ZeRO's chunks, tensor parallelism. SGD with momentum, f32,
// within 1e-5 (measured at most 1e-6).
TEST_F(ExampleTrainingTest, FrozenParametersStayAndMeshesTrainAsOneDevice) {
  const std::string train = example("gpt.mlir") +
                            " --optimizer sgd --lr 0.1 --momentum 0.9 "
                            "--steps 3 --microbatches 2 --quiet "
                            "--freeze 'wte,h.ln_1.*,h.attn.q.weight'";
  ASSERT_EQ(run(example("gpt.mlir") + " --eval --quiet --save " +
                path("init.safetensors"))
                .exitCode,
            0);
  RunResult one = run(train + " --save " + path("one.safetensors"));
  ASSERT_EQ(one.exitCode, 0) << one.err;
  Checkpoint init = readCheckpoint(dir / "init.safetensors");
  Checkpoint reference = readCheckpoint(dir / "one.safetensors");
  for (const char *frozen :
       {"wte", "h.ln_1.weight", "h.ln_1.bias", "h.attn.q.weight"}) {
    EXPECT_EQ(reference.tensors.at(frozen), init.tensors.at(frozen)) << frozen;
    EXPECT_EQ(reference.tensors.count(std::string(frozen) + ".momentum"), 0u)
        << frozen;
  }
  EXPECT_NE(reference.tensors.at("h.attn.k.weight"),
            init.tensors.at("h.attn.k.weight"));
  EXPECT_EQ(reference.tensors.count("h.attn.k.weight.momentum"), 1u);

  // Fine-tuning from a run that trained everything leaves the frozen
  // parameters' momenta unread; resuming the frozen run's checkpoint in a
  // run that trains them finds none and says why.
  const std::string sgd = example("gpt.mlir") +
                          " --optimizer sgd --lr 0.1 --momentum 0.9 "
                          "--microbatches 2 --quiet";
  ASSERT_EQ(run(sgd + " --steps 1 --save " + path("all.safetensors")).exitCode,
            0);
  RunResult tuned = run(train + " --load " + path("all.safetensors"));
  EXPECT_EQ(tuned.exitCode, 0) << tuned.err;
  EXPECT_NE(tuned.err.find("left 4 optimizer states of frozen parameters "
                           "unread"),
            std::string::npos)
      << tuned.err;
  RunResult unfrozen =
      run(sgd + " --steps 4 --load " + path("one.safetensors"));
  EXPECT_NE(unfrozen.exitCode, 0);
  EXPECT_NE(unfrozen.err.find("(the checkpoint's run froze those parameters"),
            std::string::npos)
      << unfrozen.err;

  expectMeshesEndAt(train, reference,
                    {"dp=2,tp=2 --zero 1", "dp=2 --zero 3", "pp=2",
                     "dp=2,pp=2 --pipeline-schedule zb-v --zero 2"});
}

// On a dp/tp mesh (and ZeRO-3, whose parameters are chunks) every rank
// takes part in the check: the reduced gradients gathered whole, the loss
// the mean over the ranks, a perturbed element written wherever it is
// held. mlp in f64 passes at 1e-6 on each, printed once (rank 0); a
// pipeline is refused in one line.
// Batch norm then ReLU: perturbing fc1.weight moves every row of the
// normalised column and, through fc2, the 64 x 512 pre-activations of the
// second ReLU, so a kink lies every ~1e-4 of the weight and some sampled
// elements' finite differences cannot settle (seed 1: 21 of fc1.weight's
// first 53 candidates). They are passed over, counted, and the rest match
// at f64's 1e-6, on one device and with SyncBatchNorm over dp=2.
TEST_F(ExampleTrainingTest, BnMlpGradientsPassOverReluKinks) {
  for (const std::string mesh : {"", " --mesh dp=2"}) {
    SCOPED_TRACE(mesh);
    RunResult r = run(example("bn_mlp.mlir") +
                      " --precision f64 --check-grads --quiet --seed 1" + mesh);
    EXPECT_EQ(r.exitCode, 0) << r.err << r.out;
    size_t at = r.out.find("grad-check fc1.weight: ");
    ASSERT_NE(at, std::string::npos) << r.out;
    std::string line = r.out.substr(at, r.out.find('\n', at) - at);
    EXPECT_NE(line.find("(32 elements, "), std::string::npos) << line;
    EXPECT_NE(line.find(" passed over: finite differences did not settle)"),
              std::string::npos)
        << line;
  }
}

// Where kinks are as dense as the smallest stencil is wide (every element
// of w moves 65,536 ReLU inputs: ~1e-4 of it apart, against the stencil's
// ±6e-5 after five halvings), hardly any element's finite differences
// settle: the check says so and fails, instead of comparing
// averages of slopes or passing on the one element it could compare.
TEST_F(ExampleTrainingTest, DenseKinksMakeTheCheckInconclusive) {
  writeFile(dir / "kinks.mlir", R"mlir(
func.func @loss(
    %x: tensor<65536x4xf64> {nn.input, nn.axes = ["batch", "features"]},
    %r: tensor<65536x2xf64> {nn.input, nn.axes = ["batch", "classes"]},
    %w: tensor<4x2xf64> {nn.param = "w", nn.init = #nn.init<normal, 1.0>,
                         nn.axes = ["features", "classes"]})
    -> tensor<f64> {
  %h = nn.matmul %x, %w : (tensor<65536x4xf64>, tensor<4x2xf64>) -> tensor<65536x2xf64>
  %a = nn.relu %h : tensor<65536x2xf64>
  %p = nn.mul %a, %r : tensor<65536x2xf64>
  %l = nn.reduce_sum %p dims = [0, 1] : tensor<65536x2xf64> -> tensor<f64>
  return %l : tensor<f64>
}
)mlir");
  RunResult r = run(path("kinks.mlir") + " --check-grads");
  EXPECT_EQ(r.exitCode, 1) << r.err << r.out;
  EXPECT_NE(r.out.find(" passed over: finite differences did not settle)"),
            std::string::npos)
      << r.out;
  EXPECT_TRUE(isOneLine(r.err)) << r.err;
  EXPECT_NE(r.err.find("gradient check inconclusive: parameter 'w': "),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("sampled elements are not differentiable at the "
                       "finite-difference step (check it with a smooth "
                       "activation in place of ReLU or max)"),
            std::string::npos)
      << r.err;
}

// --grad-params checks fewer parameters, each judged as the whole check
// judges it: the relative errors' floor is the scale of every trainable
// parameter's gradient, not of the ones picked. GPT's q.bias in f64 has
// gradients of ~1e-5 against f64 finite differences good to ~1e-11; judged
// by its own scale it read 2.5e-5 (a failure at 1e-6), by the model's
// 1.2e-7, as in the whole check.
TEST_F(ExampleTrainingTest, GradParamsJudgeAsTheWholeCheck) {
  RunResult r =
      run(example("gpt.mlir") + " --precision f64 --check-grads "
                                "--quiet --grad-params h.attn.q.bias");
  EXPECT_EQ(r.exitCode, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("grad-check h.attn.q.bias: "), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("grad-check h.attn.q.weight"), std::string::npos)
      << r.out;
}

TEST_F(ExampleTrainingTest, MlpGradientsMatchFiniteDifferencesOnMeshes) {
  for (const std::string mesh :
       {"dp=2", "tp=2", "dp=2,tp=2", "dp=2 --zero 3"}) {
    SCOPED_TRACE(mesh);
    RunResult r = run(example("mlp.mlir") +
                      " --precision f64 --check-grads --quiet --mesh " + mesh);
    EXPECT_EQ(r.exitCode, 0) << r.err << r.out;
    expectOneLineEach(r.out,
                      {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"});
  }
}

// A small pipeline model in f64: a token embedding tied to the output head
// (its copies on the first and last stage, summed by the tied exchange)
// around an nn.repeat of tanh residual layers (stacked: each stage holds
// its layers' rows).
constexpr const char *kTiedRepeatModel = R"mlir(
func.func private @layer(%h: tensor<4x8x16xf64>, %w: tensor<16x16xf64>, %b: tensor<16xf64>) -> tensor<4x8x16xf64> {
  %z = nn.matmul %h, %w : (tensor<4x8x16xf64>, tensor<16x16xf64>) -> tensor<4x8x16xf64>
  %bb = nn.broadcast %b dims = [2] : tensor<16xf64> -> tensor<4x8x16xf64>
  %z1 = nn.add %z, %bb : tensor<4x8x16xf64>
  %t = nn.tanh %z1 : tensor<4x8x16xf64>
  %h2 = nn.add %h, %t : tensor<4x8x16xf64>
  return %h2 : tensor<4x8x16xf64>
}

func.func @loss(
    %tokens: tensor<4x8xi32> {nn.input, nn.axes = ["batch", "seq"]},
    %targets: tensor<4x8xi32> {nn.label, nn.axes = ["batch", "seq"]},
    %wte: tensor<32x16xf64> {nn.param = "wte", nn.init = #nn.init<normal, 0.5>,
                             nn.axes = ["vocab", "embed"]},
    %w: tensor<4x16x16xf64> {nn.param = "h.weight", nn.init = #nn.init<normal, 0.3>,
                             nn.axes = ["layers", "embed", "mlp"]},
    %b: tensor<4x16xf64> {nn.param = "h.bias", nn.init = #nn.init<normal, 0.1>,
                          nn.axes = ["layers", "mlp"]})
    -> tensor<f64> {
  %x = nn.embedding %wte, %tokens : (tensor<32x16xf64>, tensor<4x8xi32>) -> tensor<4x8x16xf64>
  %h = nn.repeat @layer(%x) params(%w, %b) : (tensor<4x8x16xf64>, tensor<4x16x16xf64>, tensor<4x16xf64>) -> tensor<4x8x16xf64>
  %logits = nn.matmul %h, %wte transpose_rhs : (tensor<4x8x16xf64>, tensor<32x16xf64>) -> tensor<4x8x32xf64>
  %l = nn.cross_entropy %logits, %targets : (tensor<4x8x32xf64>, tensor<4x8xi32>) -> tensor<f64>
  return %l : tensor<f64>
}
)mlir";

// --check-grads on a pipeline: the gradients the schedule accumulates over
// the step's microbatches (tied copies exchanged, dp reduced) against
// finite differences of the step's loss, perturbing every stage holding an
// element. Every schedule and placement, with dp, tp and ZeRO inside the
// stages, passes at f64's 1e-6. (Without the tied exchange, wte is 1.6
// off: the check sees what the pipeline gets wrong.)
TEST_F(ExampleTrainingTest, PipelineGradientsMatchFiniteDifferences) {
  writeFile(dir / "tied.mlir", kTiedRepeatModel);
  for (const std::string mesh :
       {"pp=2", "dp=2,pp=2 --pipeline-schedule zb-v",
        "tp=2,pp=2 --pipeline-schedule zb-h1",
        "dp=2,pp=2 --zero 3 --pipeline-schedule interleaved "
        "--virtual-stages 2"}) {
    SCOPED_TRACE(mesh);
    RunResult r = run(path("tied.mlir") +
                      " --check-grads --quiet --microbatches 2 --mesh " + mesh);
    EXPECT_EQ(r.exitCode, 0) << r.err << r.out;
    expectOneLineEach(r.out, {"wte", "h.weight", "h.bias"});
  }
  // --grad-params: the stacked parameters only.
  RunResult some = run(path("tied.mlir") +
                       " --check-grads --quiet --microbatches 2 --mesh pp=2 "
                       "--grad-params 'h.*'");
  EXPECT_EQ(some.exitCode, 0) << some.err;
  EXPECT_EQ(some.out.find("grad-check wte"), std::string::npos) << some.out;
  EXPECT_NE(some.out.find("grad-check h.bias"), std::string::npos) << some.out;
}

} // namespace
