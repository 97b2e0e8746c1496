//===- TesselRunTest.cpp - tessel-run driven as a subprocess --------------===//

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <vector>

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct RunResult {
  int exitCode;
  std::string err;
};

std::string readFile(const fs::path &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void writeFile(const fs::path &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string quote(const std::string &s) { return "'" + s + "'"; }

class TesselRunTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string pattern =
        (fs::temp_directory_path() / "tessel-run-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir = pattern;
  }
  void TearDown() override { fs::remove_all(dir); }

  /// Runs tessel-run with `args` (shell words); stderr is captured, stdout
  /// discarded.
  RunResult run(const std::string &args,
                const std::string &binary = TESSEL_RUN_PATH) {
    fs::path errFile = dir / "stderr.txt";
    std::string command =
        quote(binary) + " " + args + " >/dev/null 2>" + quote(errFile);
    int status = std::system(command.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, readFile(errFile)};
  }

  /// The losses of a run's metrics file, in step order.
  std::vector<double> losses(const std::string &args,
                             const std::string &binary = TESSEL_RUN_PATH) {
    fs::path metrics = dir / "losses.jsonl";
    RunResult r = run(args + " --quiet --metrics " + quote(metrics), binary);
    EXPECT_EQ(r.exitCode, 0) << r.err;
    std::vector<double> out;
    std::ifstream in(metrics);
    for (std::string line; std::getline(in, line);)
      out.push_back(json::parse(line).at("loss").get<double>());
    return out;
  }

  std::string path(const std::string &name) const {
    return quote((dir / name).string());
  }

  fs::path dir;
};

const std::string linear = quote(FAKE_LINEAR_MODEL);
const std::string lm = quote(FAKE_LM_MODEL);

/// A safetensors file from a header and raw data.
std::string safetensors(const json &header, const std::string &data) {
  std::string text = header.dump();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[i] = char(uint64_t(text.size()) >> (8 * i));
  return out + text + data;
}

bool isOneLine(const std::string &text) {
  return !text.empty() && text.find('\n') == text.size() - 1;
}

std::string u16Tokens(const std::vector<uint16_t> &tokens) {
  return std::string(reinterpret_cast<const char *>(tokens.data()),
                     tokens.size() * 2);
}

TEST_F(TesselRunTest, RunsStepsAndWritesOneMetricLineEach) {
  RunResult r = run(linear + " --steps 5 --quiet --metrics " + path("m.jsonl"));
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.err, "");
  std::ifstream in(dir / "m.jsonl");
  int step = 0;
  for (std::string line; std::getline(in, line);) {
    json j = json::parse(line);
    EXPECT_EQ(j.at("step").get<int>(), ++step);
    double loss = j.at("loss").get<double>();
    EXPECT_GT(loss, 0.0);
    EXPECT_LT(loss, 20.0);
    // 4 samples per step for a non-sequence model.
    EXPECT_GT(j.at("tokens_per_s").get<double>(), 0.0);
    EXPECT_NEAR(j.at("tokens_per_s").get<double>() *
                    j.at("step_ms").get<double>() / 1e3,
                4.0, 1e-6);
  }
  EXPECT_EQ(step, 5);
}

TEST_F(TesselRunTest, SameSeedSameLossDifferentSeedDifferent) {
  std::vector<double> a = losses(linear + " --steps 3 --seed 1");
  std::vector<double> b = losses(linear + " --steps 3 --seed 1");
  std::vector<double> c = losses(linear + " --steps 3 --seed 2");
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // Synthetic batches change from step to step.
  EXPECT_NE(a[0], a[1]);
}

TEST_F(TesselRunTest, LogsProgressAndSummaryWhenNotATerminal) {
  RunResult r = run(linear + " --steps 4 --log-every 2");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.err.find("step 2/4 loss"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("step 4/4 loss"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("step 3/4"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("done: 4 steps"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("peak 80 B"), std::string::npos) << r.err;
}

TEST_F(TesselRunTest, SaveThenLoadReproducesTheLoss) {
  std::vector<double> saved =
      losses(linear + " --steps 2 --seed 3 --save " + path("ck.safetensors"));
  ASSERT_TRUE(fs::exists(dir / "ck.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "ck.safetensors.tmp"));
  std::vector<double> loaded =
      losses(linear + " --steps 2 --seed 3 --load " + path("ck.safetensors"));
  EXPECT_EQ(saved, loaded);
  // With --load, --seed 4 changes the data but not the parameters.
  EXPECT_NE(
      losses(linear + " --steps 2 --seed 4"),
      losses(linear + " --steps 2 --seed 4 --load " + path("ck.safetensors")));

  std::string bytes = readFile(dir / "ck.safetensors");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= uint64_t(uint8_t(bytes[i])) << (8 * i);
  json header = json::parse(bytes.substr(8, n));
  EXPECT_EQ(header["fc.weight"]["dtype"], "F32");
  EXPECT_EQ(header["fc.weight"]["shape"], json({8, 5}));
  EXPECT_EQ(header["fc.weight"]["data_offsets"], json({0, 160}));
  EXPECT_EQ(header["__metadata__"]["step"], "2");
  EXPECT_EQ(header["__metadata__"]["seed"], "3");
  EXPECT_EQ(bytes.size(), 8 + n + 160);
}

TEST_F(TesselRunTest, LoadedParametersAreUsed) {
  // Zero weights give zero logits: the loss is ln 5 whatever the data.
  json header = {
      {"fc.weight",
       {{"dtype", "F32"}, {"shape", {8, 5}}, {"data_offsets", {0, 160}}}}};
  writeFile(dir / "zero.safetensors",
            safetensors(header, std::string(160, '\0')));
  for (double loss :
       losses(linear + " --steps 3 --load " + path("zero.safetensors")))
    EXPECT_NEAR(loss, std::log(5.0), 1e-6);
}

TEST_F(TesselRunTest, TruncatedCheckpointFailsAndTouchesNothing) {
  ASSERT_EQ(run(linear + " --steps 1 --quiet --save " + path("ck.safetensors"))
                .exitCode,
            0);
  std::string full = readFile(dir / "ck.safetensors");
  std::string truncated = full.substr(0, full.size() - 40);
  writeFile(dir / "ck.safetensors", truncated);
  writeFile(dir / "out.safetensors", "keep me");
  RunResult r = run(linear + " --load " + path("ck.safetensors") + " --save " +
                    path("out.safetensors"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_TRUE(isOneLine(r.err)) << r.err;
  EXPECT_NE(r.err.find("ck.safetensors': truncated"), std::string::npos)
      << r.err;
  EXPECT_EQ(readFile(dir / "ck.safetensors"), truncated);
  EXPECT_EQ(readFile(dir / "out.safetensors"), "keep me");

  writeFile(dir / "short.safetensors", "abc");
  r = run(linear + " --load " + path("short.safetensors"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("truncated"), std::string::npos) << r.err;
}

TEST_F(TesselRunTest, WrongShapeCheckpointFails) {
  json header = {
      {"fc.weight",
       {{"dtype", "F32"}, {"shape", {5, 8}}, {"data_offsets", {0, 160}}}}};
  std::string file = safetensors(header, std::string(160, '\0'));
  writeFile(dir / "bad.safetensors", file);
  RunResult r = run(linear + " --load " + path("bad.safetensors"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_TRUE(isOneLine(r.err)) << r.err;
  EXPECT_NE(r.err.find("parameter 'fc.weight' has shape [5, 8], the model "
                       "expects [8, 5]"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(readFile(dir / "bad.safetensors"), file);
}

TEST_F(TesselRunTest, MissingAndExtraCheckpointKeysAreNamed) {
  json header = {
      {"fc.bias",
       {{"dtype", "F32"}, {"shape", {5}}, {"data_offsets", {0, 20}}}}};
  writeFile(dir / "keys.safetensors",
            safetensors(header, std::string(20, '\0')));
  RunResult r = run(linear + " --load " + path("keys.safetensors"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("missing parameters fc.weight; unexpected keys "
                       "fc.bias"),
            std::string::npos)
      << r.err;
}

TEST_F(TesselRunTest, MissingOrBrokenModelFails) {
  RunResult r = run(path("nope.so"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_TRUE(isOneLine(r.err)) << r.err;
  EXPECT_NE(r.err.find("cannot open model"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("nope.so"), std::string::npos) << r.err;

  writeFile(dir / "text.so", "not an ELF file");
  r = run(path("text.so"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_TRUE(isOneLine(r.err)) << r.err;
  EXPECT_NE(r.err.find("text.so' cannot be loaded"), std::string::npos)
      << r.err;

  writeFile(dir / "cut.so", readFile(FAKE_LINEAR_MODEL).substr(0, 600));
  r = run(path("cut.so"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_TRUE(isOneLine(r.err)) << r.err;
  EXPECT_NE(r.err.find("cut.so' cannot be loaded"), std::string::npos) << r.err;

  // A real shared object that is not a model: the runtime itself.
  fs::path runtime = fs::path(TESSEL_RUN_PATH).parent_path().parent_path() /
                     "lib" / "libtessel_runtime.so";
  r = run(quote(runtime.string()));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("is not a Tessel model"), std::string::npos) << r.err;
}

TEST_F(TesselRunTest, MlirWithoutTesselCompileSaysSo) {
  // A copy of tessel-run in a folder with no tessel-compile beside it.
  fs::copy_file(TESSEL_RUN_PATH, dir / "tessel-run");
  writeFile(dir / "m.mlir", "func.func @loss() { return }\n");
  RunResult r = run(path("m.mlir"), (dir / "tessel-run").string());
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_TRUE(isOneLine(r.err)) << r.err;
  EXPECT_NE(r.err.find("tessel-compile not found"), std::string::npos) << r.err;
}

TEST_F(TesselRunTest, MlirIsCompiledByTheTesselCompileBesideIt) {
  // A stand-in tessel-compile that "compiles" any file to the fake model.
  fs::copy_file(TESSEL_RUN_PATH, dir / "tessel-run");
  writeFile(dir / "tessel-compile",
            "#!/bin/sh\n[ \"$2\" = -o ] && cp " + linear + " \"$3\"\n");
  fs::permissions(dir / "tessel-compile", fs::perms::owner_all);
  writeFile(dir / "m.mlir", "func.func @loss() { return }\n");
  RunResult r =
      run(path("m.mlir") + " --steps 2 --quiet --metrics " + path("m.jsonl"),
          (dir / "tessel-run").string());
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(
      losses(linear + " --steps 2"),
      losses(path("m.mlir") + " --steps 2", (dir / "tessel-run").string()));
  // --quiet: a successful run prints nothing.
  EXPECT_EQ(r.err, "");

  writeFile(dir / "tessel-compile",
            "#!/bin/sh\necho 'bad input' >&2\nexit 1\n");
  r = run(path("m.mlir"), (dir / "tessel-run").string());
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("tessel-compile failed on"), std::string::npos) << r.err;
}

TEST_F(TesselRunTest, BadCommandLinesExitTwo) {
  RunResult r = run(linear + " --bogus");
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_TRUE(isOneLine(r.err)) << r.err;
  EXPECT_NE(r.err.find("unknown flag '--bogus'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--help"), std::string::npos) << r.err;

  for (std::string args : {" --steps abc", " --steps 0", " --steps",
                           " --data-dtype f32 --data x", " --seed -1"}) {
    r = run(linear + args);
    EXPECT_EQ(r.exitCode, 2) << args;
    EXPECT_TRUE(isOneLine(r.err)) << r.err;
  }
  EXPECT_EQ(run("").exitCode, 2);
}

TEST_F(TesselRunTest, HelpDocumentsThatTrainingComesLater) {
  fs::path out = dir / "help.txt";
  int status = std::system(
      (quote(TESSEL_RUN_PATH) + " --help >" + quote(out.string())).c_str());
  EXPECT_EQ(WEXITSTATUS(status), 0);
  std::string help = readFile(out);
  EXPECT_NE(help.find("evaluates the loss; training comes with autodiff"),
            std::string::npos)
      << help;
  for (const char *flag :
       {"--steps", "--seed", "--data", "--data-dtype", "--metrics", "--save",
        "--load", "--log-every", "--quiet"})
    EXPECT_NE(help.find(flag), std::string::npos) << flag;
}

TEST_F(TesselRunTest, DataFileFeedsTheLanguageModel) {
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 41; ++i)
    tokens.push_back(uint16_t(i * 7 % 16));
  writeFile(dir / "tokens.bin", u16Tokens(tokens));
  std::vector<double> a =
      losses(lm + " --steps 6 --data " + path("tokens.bin"));
  ASSERT_EQ(a.size(), 6u);
  // 40 / 4 = 10 windows, 2 per step: step 6 wraps to step 1's windows.
  EXPECT_EQ(a[0], a[5]);
  EXPECT_NE(a[0], a[1]);
  // The data, not the seed, decides the batches.
  std::vector<double> b =
      losses(lm + " --steps 6 --data " + path("tokens.bin") + " --seed 0");
  EXPECT_EQ(a, b);

  // The same tokens as i32 and as .npy give the same losses.
  std::vector<int32_t> wide(tokens.begin(), tokens.end());
  std::string raw(reinterpret_cast<const char *>(wide.data()), wide.size() * 4);
  writeFile(dir / "tokens.i32", raw);
  EXPECT_EQ(a, losses(lm + " --steps 6 --data-dtype i32 --data " +
                      path("tokens.i32")));
  std::string dict =
      "{'descr': '<i4', 'fortran_order': False, 'shape': (41,), }";
  // Padded so the data starts at a multiple of 64, as numpy writes it.
  while ((10 + dict.size() + 1) % 64 != 0)
    dict += ' ';
  dict += '\n';
  std::string npy = std::string("\x93NUMPY\x01\x00", 8);
  npy += char(dict.size() & 0xff);
  npy += char(dict.size() >> 8);
  writeFile(dir / "tokens.npy", npy + dict + raw);
  EXPECT_EQ(a, losses(lm + " --steps 6 --data " + path("tokens.npy")));
}

TEST_F(TesselRunTest, BadDataFilesFail) {
  writeFile(dir / "short.bin", u16Tokens({1, 2, 3, 4}));
  RunResult r = run(lm + " --data " + path("short.bin"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_TRUE(isOneLine(r.err)) << r.err;
  EXPECT_NE(r.err.find("short.bin has 4 tokens, one batch needs 5"),
            std::string::npos)
      << r.err;

  writeFile(dir / "big.bin", u16Tokens({1, 2, 3, 40000, 4, 5, 6, 7, 8}));
  r = run(lm + " --data " + path("big.bin"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_TRUE(isOneLine(r.err)) << r.err;
  EXPECT_NE(r.err.find("big.bin: token 40000"), std::string::npos) << r.err;

  // The linear model is not a language model.
  writeFile(dir / "ok.bin", u16Tokens({1, 2, 3, 4, 5, 6}));
  r = run(linear + " --data " + path("ok.bin"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("--data needs a language model"), std::string::npos)
      << r.err;

  r = run(lm + " --data " + path("absent.bin"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("cannot open data file"), std::string::npos) << r.err;
}

} // namespace
