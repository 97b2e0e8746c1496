//===- GradCheckTest.cpp - Every VJP rule against finite differences ------===//
//
// For every differentiable nn op, a small f64 model with random shapes and
// attributes: loss = reduce_sum(op(params...) * r), r an nn.input of the
// result's shape (tessel-run fills it with N(0, 1): a random cotangent),
// float operands nn.param, integer operands nn.input. Each model goes through
// `tessel-run FILE --check-grads`, which compiles it (the tessel-autodiff
// pass and the VJP rules), runs the backward entry and compares every
// parameter's gradient with central finite differences of the forward loss
// (f64: relative error <= 1e-6). A case draws its shapes from a
// std::mt19937 seeded by its name and repetition, so a failure reproduces;
// the failure message holds the model text and tessel-run's output. The ops
// whose backward is a kernel of its own also run once in f32 (inF32).
//
// Kinks: relu (at 0) and reduce_max (at ties) are not differentiable
// everywhere. Parameters are drawn from continuous distributions, and where
// x ± 2h crosses a kink the check passes the element over for another
// (runtime/launcher/GradCheck.cpp), so neither needs special handling here.
// Dropout is linear in its input for a fixed mask, and the mask is a function
// of (seed, step, index) only, the same in the forward and backward entries.
//
//===----------------------------------------------------------------------===//

#include "test/unit/GradCheckModels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;
using namespace tessel::gradcheck;

namespace {

//===----------------------------------------------------------------------===//
// The test
//===----------------------------------------------------------------------===//

struct Instance {
  size_t caseIndex;
  int repetition;
};

/// TESSEL_GRAD_CHECK_REPETITIONS=N multiplies every case's repetitions: a
/// longer random search than the suite's default (which keeps ctest near 30 s
/// on two cores). Repetition r has the same model whatever N is.
int repetitionFactor() {
  const char *value = std::getenv("TESSEL_GRAD_CHECK_REPETITIONS");
  return value ? std::max(1, std::atoi(value)) : 1;
}

std::vector<Instance> instances() {
  std::vector<Instance> out;
  for (size_t i = 0; i < cases().size(); ++i)
    for (int r = 0; r < cases()[i].repetitions * repetitionFactor(); ++r)
      out.push_back({i, r});
  return out;
}

std::string instanceName(const Instance &instance) {
  return cases()[instance.caseIndex].name + "_" +
         std::to_string(instance.repetition);
}

void PrintTo(const Instance &instance, std::ostream *os) {
  *os << instanceName(instance);
}

/// The seed of an instance: FNV-1a of its name, so adding a case leaves the
/// others' models unchanged.
uint32_t seedOf(const std::string &name) {
  uint32_t h = 2166136261u;
  for (unsigned char c : name)
    h = (h ^ c) * 16777619u;
  return h;
}

std::string readFile(const fs::path &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string quote(const std::string &s) { return "'" + s + "'"; }

class GradCheckTest : public ::testing::TestWithParam<Instance> {
protected:
  static void SetUpTestSuite() {
    std::string pattern =
        (fs::temp_directory_path() / "tessel-grad-check-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir = pattern;
  }
  static void TearDownTestSuite() { fs::remove_all(dir); }

  static fs::path dir;
};

fs::path GradCheckTest::dir;

TEST_P(GradCheckTest, BackwardMatchesFiniteDifferences) {
  std::string name = instanceName(GetParam());
  uint32_t seed = seedOf(name);
  std::mt19937 rng(seed);
  GradModel model = cases()[GetParam().caseIndex].generate(rng);

  fs::path file = dir / (name + ".mlir");
  fs::path out = dir / (name + ".out");
  std::ofstream(file) << model.text;
  // --seed varies parameter values and synthetic data between cases too.
  std::string command = quote(TESSEL_RUN_PATH) + " " + quote(file.string()) +
                        " --check-grads --quiet --seed " +
                        std::to_string(seed % 1000) + " " + model.flags + " >" +
                        quote(out.string()) + " 2>&1";
  int status = std::system(command.c_str());
  int exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  EXPECT_EQ(exitCode, 0) << "case " << name << " (mt19937 seed " << seed
                         << ")\n$ " << command << "\n"
                         << readFile(out) << "model:\n"
                         << model.text;
}

INSTANTIATE_TEST_SUITE_P(Ops, GradCheckTest, ::testing::ValuesIn(instances()),
                         [](const ::testing::TestParamInfo<Instance> &info) {
                           return instanceName(info.param);
                         });

} // namespace
