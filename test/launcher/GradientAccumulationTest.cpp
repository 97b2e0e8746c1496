//===- GradientAccumulationTest.cpp - One gradient reduction per step -----===//
//
// Under --microbatches M > 1 on a mesh, each rank sums its microbatches'
// gradients unreduced (backward_no_sync) and the sum is all-reduced once
// before the update (reduce_grads: tessel-defer-gradient-reduction), as
// PyTorch's no_sync and Megatron's gradient accumulation do, instead of
// once per microbatch. Checked here:
//
// - the examples on dp, dp×tp, with sequence parallelism and SyncBatchNorm
//   train 3 steps of 4 microbatches as one device does with the same 4
//   microbatches (every parameter and momentum within 1e-5 scaled, SGD
//   with momentum in f32; gpt on dp=2 and mlp on dp=4 also with AdamW in
//   f64 within 1e-9), and so does ZeRO-2, which keeps its
//   reduce-scatters in every microbatch; so do pipelines (dp=2,pp=2 with
//   1f1b, interleaved and zb-h1; dp=2,tp=2,pp=2 with 1f1b and with zb-h1
//   and sequence parallelism), each stage reducing once after the
//   schedule (a zero-bubble stage's weight part runs as
//   backward_weight_no_sync);
// - the counters of a step are M backward_no_sync, one reduce_grads and
//   the update by the description (tessel-run warns otherwise), the
//   deferral moves the backward's gradient bytes and adds none, and gpt on
//   dp=2 all-reduces 4 · 4 + 3,337,216 bytes a step of 4 microbatches
//   where reducing each microbatch took 4 · 3,337,220;
// - a step captured whole (--graph) and processes under mpirun end bit for
//   bit where the eager threads end.
//
// `ctest -L parallel`.
//
//===----------------------------------------------------------------------===//

#include "test/launcher/LauncherTestSupport.h"

#include <dlfcn.h>

using namespace tessel::run::test;

namespace {

const std::string sgd = " --optimizer sgd --lr 0.1 --momentum 0.9";
constexpr int steps = 3;
constexpr int microbatches = 4;

struct Case {
  std::string model;     // examples/<model>.mlir
  std::string flags;     // tessel-compile's: --mesh and more
  bool defers;           // whether the compiled model reduces once per step
  bool adamwF64 = false; // AdamW on the example in f64, else f32 SGD
};

void PrintTo(const Case &c, std::ostream *out) {
  *out << c.model << " " << c.flags << (c.adamwF64 ? " (adamw, f64)" : "");
}

/// "gpt_mesh_dp_2_tp_2_sequence_parallel".
std::string caseName(const ::testing::TestParamInfo<Case> &info) {
  std::string name;
  for (char c : info.param.model + info.param.flags +
                    (info.param.adamwF64 ? " adamw f64" : ""))
    if (std::isalnum(static_cast<unsigned char>(c)))
      name += c;
    else if (!name.empty() && name.back() != '_')
      name += '_';
  return name;
}

class GradientAccumulation : public TesselRunTest {
protected:
  /// examples/`model` compiled with `flags` into `name`.so: with SGD, or
  /// with AdamW with every f32 made f64.
  std::string compile(const std::string &model, const std::string &flags,
                      const std::string &name, bool adamwF64 = false) {
    std::string so = (dir / (name + ".so")).string();
    fs::path source = fs::path(TESSEL_EXAMPLES_DIR) / (model + ".mlir"),
             f64 = dir / "f64.mlir";
    if (adamwF64) {
      std::string text = readFile(source);
      for (size_t at = 0; (at = text.find("f32", at)) != std::string::npos;)
        text.replace(at, 3, "f64");
      writeFile(f64, text);
    }
    RunResult c =
        runShell(quote(std::string(TESSEL_BIN_DIR) + "/tessel-compile") + " " +
                 quote((adamwF64 ? f64 : source).string()) +
                 (adamwF64 ? "" : sgd) + flags + " -o " + quote(so));
    EXPECT_EQ(c.exitCode, 0) << c.err;
    return so;
  }

  /// `so`'s description (tessel_model_json).
  static json describe(const std::string &so) {
    void *library = ::dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(library, nullptr) << ::dlerror();
    if (!library)
      return json();
    auto fn = reinterpret_cast<const char *(*)()>(
        ::dlsym(library, "tessel_model_json"));
    json description = fn ? json::parse(fn()) : json();
    ::dlclose(library);
    return description;
  }

  /// `steps` steps of `microbatches` by `prefix` (tessel-run, or it under
  /// mpirun) with `flags`: the checkpoint. Fails on a counter warning.
  Checkpoint train(const std::string &so, const std::string &name,
                   const std::string &flags = "",
                   const std::string &prefix = "") {
    fs::path checkpoint = dir / (name + ".safetensors");
    std::string args = quote(so) + " --steps " + std::to_string(steps) +
                       " --microbatches " + std::to_string(microbatches) +
                       flags + " --quiet --save " + quote(checkpoint.string());
    RunResult r =
        prefix.empty()
            ? run(args)
            : runShell(prefix + " " + quote(TESSEL_RUN_PATH) + " " + args);
    EXPECT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(r.err.find("runtime counters differ"), std::string::npos)
        << r.err;
    return readCheckpoint(checkpoint);
  }

  /// The largest scaled error of `a`'s tensors against `b`'s, each within
  /// `tolerance`.
  static double maxError(Checkpoint &a, const Checkpoint &b, double tolerance) {
    EXPECT_FALSE(b.tensors.empty());
    EXPECT_EQ(a.tensors.size(), b.tensors.size());
    double worst = 0;
    for (auto &[tensor, bytes] : b.tensors) {
      EXPECT_TRUE(a.tensors.count(tensor)) << tensor;
      double error = scaledError(a.tensors[tensor], bytes, 1e-4,
                                 a.header[tensor]["dtype"].get<std::string>());
      EXPECT_LE(error, tolerance) << tensor;
      worst = std::max(worst, error);
    }
    return worst;
  }

  /// Every tensor of `a` bit for bit `b`'s.
  static void expectSameBits(Checkpoint &a, const Checkpoint &b) {
    ASSERT_EQ(a.tensors.size(), b.tensors.size());
    for (auto &[tensor, bytes] : b.tensors)
      EXPECT_TRUE(a.tensors[tensor] == bytes) << tensor;
  }
};

class GradientAccumulationEquivalence
    : public GradientAccumulation,
      public ::testing::WithParamInterface<Case> {};

TEST_P(GradientAccumulationEquivalence, TrainsAsOneDevice) {
  const Case &c = GetParam();
  std::string mesh = compile(c.model, c.flags, "mesh", c.adamwF64);
  json description = describe(mesh);
  // A pipeline's stages each (tessel-link-stages), else the model.
  std::vector<json> models =
      description.contains("stages")
          ? description["stages"].get<std::vector<json>>()
          : std::vector<json>{description};
  for (const json &model : models) {
    ASSERT_TRUE(model.contains("entries")) << model.dump();
    EXPECT_EQ(model["entries"].contains("backward_no_sync"), c.defers);
    EXPECT_EQ(model["entries"].contains("reduce_grads"), c.defers);
  }
  Checkpoint one = train(compile(c.model, "", "one", c.adamwF64), "one");
  Checkpoint split = train(mesh, "mesh");
  double error = maxError(split, one, c.adamwF64 ? 1e-9 : 1e-5);
  char text[32];
  std::snprintf(text, sizeof(text), "%.3g", error);
  RecordProperty("max_tensor_error", text);
}

INSTANTIATE_TEST_SUITE_P(
    Examples, GradientAccumulationEquivalence,
    ::testing::Values(
        Case{"gpt", " --mesh dp=2", true},
        Case{"gpt", " --mesh dp=2,tp=2", true},
        Case{"gpt", " --mesh dp=2,tp=2 --sequence-parallel", true},
        Case{"mlp", " --mesh dp=4", true}, Case{"bn_mlp", " --mesh dp=2", true},
        Case{"gpt", " --mesh dp=2 --zero 2", false},
        // AdamW divides by each gradient's magnitude: f64.
        Case{"gpt", " --mesh dp=2", true, true},
        Case{"mlp", " --mesh dp=4", true, true},
        // Each stage reduces once after the schedule.
        Case{"gpt", " --mesh dp=2,pp=2 --microbatches 4", true},
        Case{"gpt",
             " --mesh dp=2,pp=2 --pipeline-schedule interleaved "
             "--virtual-stages 2 --microbatches 4",
             true},
        Case{"gpt", " --mesh dp=2,tp=2,pp=2 --microbatches 4", true},
        // A zero-bubble stage's W runs without reductions too.
        Case{"gpt",
             " --mesh dp=2,pp=2 --pipeline-schedule zb-h1 --microbatches 4",
             true},
        Case{"gpt",
             " --mesh dp=2,tp=2,pp=2 --pipeline-schedule zb-h1 "
             "--sequence-parallel --microbatches 4",
             true}),
    caseName);

TEST_F(GradientAccumulation, OneReductionPerStepOfMicrobatches) {
  for (const std::string &flags :
       {std::string(" --mesh dp=2"), std::string(" --mesh dp=2,tp=2")}) {
    SCOPED_TRACE(flags);
    std::string so = compile("gpt", flags, "gpt");
    json description = describe(so);
    ASSERT_TRUE(description.contains("collectives"));
    // The deferral moves the backward's gradient bytes; it adds none.
    json before = describedComm(description, {{"backward", 1}});
    json after = describedComm(description,
                               {{"backward_no_sync", 1}, {"reduce_grads", 1}});
    ASSERT_EQ(before.size(), after.size());
    for (auto &[key, count] : before.items())
      EXPECT_EQ(after[key]["bytes"], count["bytes"]) << key;

    std::vector<json> lines =
        metricLines(quote(so) + " --steps 1 --microbatches " +
                    std::to_string(microbatches));
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_EQ(lines[0]["comm"],
              describedComm(description, {{"backward_no_sync", microbatches},
                                          {"reduce_grads", 1},
                                          {"update", 1}}));
    if (flags == " --mesh dp=2") {
      // The loss (4 bytes) per microbatch and every gradient (4Ψ) once.
      EXPECT_EQ(lines[0]["comm"]["all_reduce dp"]["bytes"],
                microbatches * 4 + 3337216);
      EXPECT_EQ(before["all_reduce dp"]["bytes"], 3337220);
    }
    // One microbatch keeps the backward, whose buckets overlap it.
    lines = metricLines(quote(so) + " --steps 1");
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_EQ(lines[0]["comm"],
              describedComm(description, {{"backward", 1}, {"update", 1}}));
  }
}

TEST_F(GradientAccumulation, CapturedAndMpiStepsEqualTheThreads) {
  std::string so = compile("gpt", " --mesh dp=2", "gpt");
  Checkpoint eager = train(so, "eager");
  Checkpoint graph = train(so, "graph", " --graph");
  expectSameBits(graph, eager);
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "mpirun not found";
  Checkpoint mpi = train(so, "mpi", " --comm mpi",
                         "mpirun --allow-run-as-root --oversubscribe -np 2");
  expectSameBits(mpi, eager);
}

} // namespace
