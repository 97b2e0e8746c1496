//===- BadInputTest.cpp - tessel-run on data files and checkpoints that lie
//===//
//
// Sizes that wrap 64-bit arithmetic, headers that disagree with the file,
// safetensors headers the format forbids: each is one line on stderr and
// exit 1, never a read past a mapping or a run on nonsense.
//
//===----------------------------------------------------------------------===//

#include "test/launcher/LauncherTestSupport.h"

using namespace tessel::run::test;

namespace {

const std::string linear = quote(FAKE_LINEAR_MODEL);
const std::string lm = quote(FAKE_LM_MODEL);

/// A .npy v1 file: the dict padded as numpy pads it, then `data`.
std::string npyFile(const std::string &descr, const std::string &shape,
                    const std::string &data) {
  std::string dict = "{'descr': '" + descr +
                     "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + dict.size() + 1) % 64 != 0)
    dict += ' ';
  dict += '\n';
  std::string npy = std::string("\x93NUMPY\x01\x00", 8);
  npy += char(dict.size() & 0xff);
  npy += char(dict.size() >> 8);
  return npy + dict + data;
}

/// A safetensors file from the header's exact text (so a test can repeat a
/// key, which a json object cannot hold) and raw data.
std::string safetensorsText(const std::string &header,
                            const std::string &data) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[i] = char(uint64_t(header.size()) >> (8 * i));
  return out + header + data;
}

std::string weightEntry(const std::string &offsets) {
  return R"("fc.weight": {"dtype": "F32", "shape": [8, 5], "data_offsets": )" +
         offsets + "}";
}

class BadInputTest : public TesselRunTest {
protected:
  /// Runs tessel-run and expects exit 1 with one line containing `what`.
  void expectOneLineError(const std::string &args, const std::string &what) {
    RunResult r = run(args);
    EXPECT_EQ(r.exitCode, 1) << r.err;
    EXPECT_TRUE(isOneLine(r.err)) << r.err;
    EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
  }

  void expectCheckpointError(const std::string &header, size_t dataBytes,
                             const std::string &what) {
    writeFile(dir / "bad.safetensors",
              safetensorsText(header, std::string(dataBytes, '\0')));
    expectOneLineError(linear + " --steps 1 --load " + path("bad.safetensors"),
                       "bad.safetensors': " + what);
  }
};

// Tests that a shape whose byte count wraps 2^64 (4 · (2^62 + 16) = 64 mod
// 2^64, under the 80 data bytes) is refused, not read past the mapping.
TEST_F(BadInputTest, NpyShapeThatWrapsIsRefused) {
  writeFile(dir / "wrap.npy",
            npyFile("<i4", "(4611686018427387920,)", std::string(80, '\0')));
  expectOneLineError(lm + " --steps 1 --data " + path("wrap.npy"),
                     "wrap.npy': .npy header says 4611686018427387920 tokens "
                     "of 4 bytes, the file holds 80 data bytes");
}

// Tests that a negative or too large dimension is refused (stoull read "-5"
// as 2^64 - 5).
TEST_F(BadInputTest, NpyNegativeOrHugeShapeIsRefused) {
  writeFile(dir / "neg.npy", npyFile("<i4", "(-5,)", std::string(80, '\0')));
  expectOneLineError(lm + " --steps 1 --data " + path("neg.npy"),
                     "neg.npy': malformed .npy shape (-5,)");
  writeFile(dir / "huge.npy",
            npyFile("<i4", "(99999999999999999999,)", std::string(80, '\0')));
  expectOneLineError(lm + " --steps 1 --data " + path("huge.npy"),
                     "huge.npy': .npy shape (99999999999999999999,) does not "
                     "fit in 64 bits");
}

// Tests that a header disagreeing with the file size either way is refused.
TEST_F(BadInputTest, NpyHeaderDisagreeingWithFileSizeIsRefused) {
  writeFile(dir / "short.npy", npyFile("<i4", "(30,)", std::string(80, '\0')));
  expectOneLineError(lm + " --steps 1 --data " + path("short.npy"),
                     "short.npy': .npy header says 30 tokens of 4 bytes, the "
                     "file holds 80 data bytes");
  writeFile(dir / "long.npy", npyFile("<i4", "(10,)", std::string(80, '\0')));
  expectOneLineError(lm + " --steps 1 --data " + path("long.npy"),
                     "long.npy': .npy header says 10 tokens of 4 bytes, the "
                     "file holds 80 data bytes");
  // The exact size still trains.
  writeFile(dir / "good.npy", npyFile("<i4", "(20,)", std::string(80, '\0')));
  EXPECT_EQ(run(lm + " --steps 1 --quiet --data " + path("good.npy")).exitCode,
            0);
}

// Tests that a key given twice is refused: nlohmann keeps the last silently.
TEST_F(BadInputTest, DuplicateCheckpointKeyIsRefused) {
  expectCheckpointError("{" + weightEntry("[0, 160]") + ", " +
                            weightEntry("[0, 160]") + "}",
                        160, "duplicate key 'fc.weight' in the header");
  expectCheckpointError(R"({"__metadata__": {"seed": "1", "seed": "2"}, )" +
                            weightEntry("[0, 160]") + "}",
                        160, "duplicate key 'seed' in the header");
}

// Tests that offsets must be non-negative integers, in order.
TEST_F(BadInputTest, NonIntegerCheckpointOffsetsAreRefused) {
  expectCheckpointError("{" + weightEntry("[0, 160.0]") + "}", 160,
                        "tensor 'fc.weight' has data_offsets [0,160.0], not a "
                        "list of non-negative integers");
  expectCheckpointError("{" + weightEntry("[-1, 159]") + "}", 160,
                        "tensor 'fc.weight' has data_offsets [-1,159], not a "
                        "list of non-negative integers");
  expectCheckpointError("{" + weightEntry("[\"0\", 160]") + "}", 160,
                        "tensor 'fc.weight' has data_offsets [\"0\",160], not "
                        "a list of non-negative integers");
  expectCheckpointError("{" + weightEntry("[160, 0]") + "}", 160,
                        "tensor 'fc.weight' has bad data_offsets [160,0]");
  expectCheckpointError(
      R"({"fc.weight": {"dtype": "F32", "shape": [8, -5], "data_offsets": [0, 160]}})",
      160,
      "tensor 'fc.weight' has shape [8,-5], not a list of non-negative "
      "integers");
}

// Tests that the tensors must tile the data: no overlap, hole or tail.
TEST_F(BadInputTest, OverlappingOrHolingCheckpointOffsetsAreRefused) {
  expectCheckpointError(
      "{" + weightEntry("[0, 160]") +
          R"(, "fc.weight.m": {"dtype": "F32", "shape": [8, 5], )"
          R"("data_offsets": [80, 240]}})",
      240,
      "tensor 'fc.weight.m' (data_offsets [80, 240]) overlaps tensor "
      "'fc.weight'");
  expectCheckpointError("{" + weightEntry("[8, 168]") + "}", 168,
                        "bytes [0, 8) of the data belong to no tensor");
  expectCheckpointError("{" + weightEntry("[0, 160]") + "}", 200,
                        "the data has 200 bytes, its tensors end at byte 160");
}

} // namespace

namespace {

/// `checkpoint` with its metadata's tessel.step replaced by `step`.
std::string withStep(const std::string &checkpoint, const std::string &step) {
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= uint64_t(static_cast<unsigned char>(checkpoint[i])) << (8 * i);
  json header = json::parse(checkpoint.substr(8, n));
  header["__metadata__"]["tessel.step"] = step;
  std::string text = header.dump();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[i] = char(uint64_t(text.size()) >> (8 * i));
  return out + text + checkpoint.substr(8 + n);
}

// Tests that a step count whose continuation overflows the sample index
// (step · microbatches · batch) is refused before any step runs.
TEST_F(BadInputTest, CheckpointStepThatOverflowsIsRefused) {
  const std::string trainable = quote(FAKE_TRAIN_MODEL);
  ASSERT_EQ(
      run(trainable + " --steps 1 --quiet --save " + path("ck.safetensors"))
          .exitCode,
      0);
  std::string checkpoint = readFile(dir / "ck.safetensors");
  for (const char *step : {"4611686018427387904", "9223372036854775807"}) {
    writeFile(dir / "big.safetensors", withStep(checkpoint, step));
    expectOneLineError(trainable + " --steps 2 --load " +
                           path("big.safetensors"),
                       "the sample index does not fit in int64");
  }
  // Far below the limit ((2^63 - 1) / 4 samples per step) still runs.
  writeFile(dir / "edge.safetensors",
            withStep(checkpoint, "1152921504606846970"));
  RunResult r =
      run(trainable + " --steps 2 --quiet --load " + path("edge.safetensors"));
  EXPECT_EQ(r.exitCode, 0) << r.err;
}

// Tests that --steps alone cannot overflow the sample index either.
TEST_F(BadInputTest, StepsThatOverflowAreRefused) {
  expectOneLineError(quote(FAKE_TRAIN_MODEL) +
                         " --steps 9223372036854775807 --microbatches 4",
                     "the sample index does not fit in int64");
}

// Tests that a model whose batch dimension is 0 is refused by the launcher
// (its mean loss would be 0/0: NaN with exit 0).
TEST_F(BadInputTest, ZeroSizeBatchIsRefused) {
  writeFile(dir / "zero.mlir",
            "func.func @loss(%x: tensor<0x8xf32> {nn.input}, %y: "
            "tensor<0xi32> {nn.label},\n"
            "    %w: tensor<8x5xf32> {nn.param = \"w\", nn.init = "
            "#nn.init<normal, 0.1>}) -> tensor<f32> {\n"
            "  %z = nn.matmul %x, %w : (tensor<0x8xf32>, tensor<8x5xf32>) -> "
            "tensor<0x5xf32>\n"
            "  %l = nn.cross_entropy %z, %y : (tensor<0x5xf32>, tensor<0xi32>) "
            "-> tensor<f32>\n"
            "  return %l : tensor<f32>\n}\n");
  std::string compile = quote(std::string(TESSEL_BIN_DIR) + "/tessel-compile") +
                        " " + path("zero.mlir") + " -o " + path("zero.so");
  RunResult c = runShell(compile);
  ASSERT_EQ(c.exitCode, 0) << c.err;
  expectOneLineError(
      path("zero.so") + " --steps 1",
      "input 'input0' has shape [0, 8]: a batch needs at least one "
      "sample");
}

} // namespace
