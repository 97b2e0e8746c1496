//===- LauncherTestSupport.h - Driving tessel-run as a subprocess in tests ===//
//
// The fixture and helpers the launcher's tests share: run the real binary
// with shell words, read its metrics and checkpoints, compare tensors.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUN_TEST_LAUNCHERTESTSUPPORT_H
#define TESSEL_RUN_TEST_LAUNCHERTESTSUPPORT_H

#include "runtime/test/LoopbackPort.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <utility>
#include <vector>

namespace tessel::run::test {

namespace fs = std::filesystem;
using nlohmann::json;

struct RunResult {
  int exitCode;
  std::string err;
  std::string out;
};

inline std::string readFile(const fs::path &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void writeFile(const fs::path &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

inline std::string quote(const std::string &s) { return "'" + s + "'"; }

/// Each test in a fresh temporary folder; run() drives the real binary.
class TesselRunTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string pattern =
        (fs::temp_directory_path() / "tessel-run-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir = pattern;
  }
  void TearDown() override { fs::remove_all(dir); }

  /// Runs tessel-run with `args` (shell words); stderr and stdout are
  /// captured.
  RunResult run(const std::string &args,
                const std::string &binary = TESSEL_RUN_PATH) {
    return runShell(quote(binary) + " " + args);
  }

  /// Runs a shell command line (e.g. tessel-run under mpirun) the same way.
  RunResult runShell(const std::string &commandLine) {
    fs::path errFile = dir / "stderr.txt", outFile = dir / "stdout.txt";
    std::string command =
        commandLine + " >" + quote(outFile) + " 2>" + quote(errFile);
    int status = std::system(command.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, readFile(errFile),
            readFile(outFile)};
  }

  /// The metrics lines of a run, in step order.
  std::vector<json> metricLines(const std::string &args,
                                const std::string &binary = TESSEL_RUN_PATH) {
    fs::path metrics = dir / "losses.jsonl";
    RunResult r = run(args + " --quiet --metrics " + quote(metrics), binary);
    EXPECT_EQ(r.exitCode, 0) << r.err;
    std::vector<json> out;
    std::ifstream in(metrics);
    for (std::string line; std::getline(in, line);)
      out.push_back(json::parse(line));
    return out;
  }

  /// The losses of a run's metrics file, in step order.
  std::vector<double> losses(const std::string &args,
                             const std::string &binary = TESSEL_RUN_PATH) {
    std::vector<double> out;
    for (const json &line : metricLines(args, binary))
      out.push_back(line.at("loss").get<double>());
    return out;
  }

  /// `model` with each `from` replaced by its `to` (each expected once),
  /// written to `name` in the test's folder.
  fs::path editedModel(
      const fs::path &model,
      const std::vector<std::pair<std::string, std::string>> &edits,
      const std::string &name) {
    std::string text = readFile(model);
    for (const auto &[from, to] : edits) {
      size_t at = text.find(from);
      EXPECT_NE(at, std::string::npos) << from;
      if (at != std::string::npos)
        text.replace(at, from.size(), to);
    }
    fs::path source = dir / name;
    std::ofstream(source) << text;
    return source;
  }

  std::string path(const std::string &name) const {
    return quote((dir / name).string());
  }

  fs::path dir;
};

inline bool isOneLine(const std::string &text) {
  return !text.empty() && text.find('\n') == text.size() - 1;
}

/// A checkpoint's header and each tensor's bytes.
struct Checkpoint {
  json header;
  std::map<std::string, std::string> tensors;
};

inline Checkpoint readCheckpoint(const fs::path &path) {
  std::string bytes = readFile(path);
  Checkpoint c;
  if (bytes.size() < 8)
    return c;
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= uint64_t(uint8_t(bytes[i])) << (8 * i);
  c.header = json::parse(bytes.substr(8, n));
  for (auto &[name, entry] : c.header.items()) {
    if (name == "__metadata__")
      continue;
    auto offsets = entry["data_offsets"].get<std::vector<uint64_t>>();
    c.tensors[name] = bytes.substr(8 + n + offsets[0], offsets[1] - offsets[0]);
  }
  return c;
}

inline std::vector<float> floatsOf(const std::string &bytes) {
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

/// The values of a safetensors tensor of `dtype` ("F32", "F64", or a bf16
/// run's "BF16"/"F16" parameters, widened exactly).
inline std::vector<double> valuesOf(const std::string &bytes,
                                    const std::string &dtype) {
  if (dtype == "F64") {
    std::vector<double> out(bytes.size() / 8);
    std::memcpy(out.data(), bytes.data(), out.size() * 8);
    return out;
  }
  if (dtype == "BF16" || dtype == "F16") {
    std::vector<uint16_t> bits(bytes.size() / 2);
    std::memcpy(bits.data(), bytes.data(), bits.size() * 2);
    std::vector<double> out;
    for (uint16_t b : bits) {
      if (dtype == "BF16") {
        uint32_t word = uint32_t(b) << 16;
        float value;
        std::memcpy(&value, &word, 4);
        out.push_back(value);
        continue;
      }
      int exponent = (b >> 10) & 0x1f, mantissa = b & 0x3ff;
      double sign = (b & 0x8000) ? -1.0 : 1.0;
      out.push_back(exponent == 0 ? sign * std::ldexp(mantissa, -24)
                    : exponent == 31
                        ? (mantissa ? NAN : sign * HUGE_VAL)
                        : sign * std::ldexp(mantissa | 0x400, exponent - 25));
    }
    return out;
  }
  EXPECT_EQ(dtype, "F32");
  std::vector<float> floats = floatsOf(bytes);
  return {floats.begin(), floats.end()};
}

/// max |a − b| and max |b| over one tensor of `dtype`.
inline std::pair<double, double>
maxDifferenceAndScale(const std::string &a, const std::string &b,
                      const std::string &dtype = "F32") {
  std::vector<double> x = valuesOf(a, dtype), y = valuesOf(b, dtype);
  EXPECT_EQ(x.size(), y.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    diff = std::max(diff, std::fabs(x[i] - y[i]));
    scale = std::max(scale, std::fabs(y[i]));
  }
  return {diff, scale};
}

/// max |a − b| / max |b| over one f32 tensor.
inline double relativeError(const std::string &a, const std::string &b) {
  auto [diff, scale] = maxDifferenceAndScale(a, b);
  return scale > 0 ? diff / scale : diff;
}

inline double mean(const std::vector<double> &v, size_t from, size_t to) {
  double sum = 0;
  for (size_t i = from; i < to; ++i)
    sum += v[i];
  return sum / double(to - from);
}

/// An error as the equivalence tests' output records it (RecordProperty):
/// 3 significant digits.
inline std::string errorText(double error) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3g", error);
  return text;
}

/// max |a − b| / max(max |b|, floor) over one tensor of `dtype`: the
/// tolerance measure of the mesh equivalence tests (a tensor of values
/// below `floor` is judged against it, not against its own rounding noise).
inline double scaledError(const std::string &a, const std::string &b,
                          double floor = 1e-6,
                          const std::string &dtype = "F32") {
  auto [diff, scale] = maxDifferenceAndScale(a, b, dtype);
  return diff / std::max(scale, floor);
}

/// The collectives of a model description's `entries`, each times its
/// count, keyed as tessel-run's metrics key them ("all_reduce dp"), with
/// the bytes started asynchronously where there are any.
inline json
describedComm(const json &description,
              const std::vector<std::pair<std::string, int64_t>> &entries) {
  json comm = json::object();
  for (const auto &[entry, times] : entries) {
    if (!description["collectives"].contains(entry))
      continue;
    for (const json &c : description["collectives"][entry]) {
      std::string key = c["kind"].get<std::string>() + " ";
      for (size_t i = 0; i < c["axes"].size(); ++i)
        key += (i ? "," : "") + c["axes"][i].get<std::string>();
      json &count = comm[key];
      if (count.is_null())
        count = {{"calls", 0}, {"bytes", 0}};
      count["calls"] =
          count.value("calls", int64_t(0)) + times * c["calls"].get<int64_t>();
      count["bytes"] =
          count.value("bytes", int64_t(0)) + times * c["bytes"].get<int64_t>();
      if (int64_t started = c.value("async_bytes", int64_t(0)))
        count["async_bytes"] =
            count.value("async_bytes", int64_t(0)) + times * started;
    }
  }
  return comm;
}

/// A shell command prefix that starts `processes` copies of the command
/// line appended to it, each with the environment torchrun gives its
/// processes (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
/// MASTER_PORT = `port`, TORCHELASTIC_RUN_ID, and `extraEnv`), waits for
/// all and exits with the last non-zero status. No torchrun binary needed:
/// the script is written into `dir`.
inline std::string torchrunCommand(const std::filesystem::path &dir,
                                   int processes, int port,
                                   const std::string &extraEnv = "") {
  const std::filesystem::path script = dir / "torchrun.sh";
  const std::string n = std::to_string(processes);
  std::ofstream(script)
      << "pids=''\nr=0\nwhile [ $r -lt " << n << " ]; do\n"
      << "  RANK=$r WORLD_SIZE=" << n << " LOCAL_RANK=$r LOCAL_WORLD_SIZE=" << n
      << " MASTER_ADDR=127.0.0.1 MASTER_PORT=" << port
      << " TORCHELASTIC_RUN_ID=test " << extraEnv << " \"$@\" &\n"
      << "  pids=\"$pids $!\"\n  r=$((r + 1))\ndone\nrc=0\n"
      << "for p in $pids; do wait $p || rc=$?; done\nexit $rc\n";
  return "sh '" + script.string() + "'";
}

} // namespace tessel::run::test

#endif // TESSEL_RUN_TEST_LAUNCHERTESTSUPPORT_H
