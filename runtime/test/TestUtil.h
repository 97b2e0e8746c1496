//===- TestUtil.h - Shared helpers of the runtime tests ---------*- C++ -*-===//
//
// The GoogleTest side of the test helpers: tolerance checks and a one-rank
// context fixture. The formats (Formats.h) are written from the format
// definitions, independently of the runtime's bit tricks.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_TEST_TESTUTIL_H
#define TESSEL_RUNTIME_TEST_TESTUTIL_H

#include "Formats.h"

#include <gtest/gtest.h>

namespace tt {

/// Adam (kind TESSEL_OPT_ADAM) or AdamW with these constants.
inline tessel_optimizer adamOptimizer(int32_t kind, double beta1, double beta2,
                                      double eps, double weightDecay) {
  tessel_optimizer o{};
  o.kind = kind;
  o.beta1 = beta1;
  o.beta2 = beta2;
  o.eps = eps;
  o.weight_decay = weightDecay;
  return o;
}

/// SGD (dampening 0) with these constants.
inline tessel_optimizer sgdOptimizer(double momentum, int nesterov,
                                     double weightDecay) {
  tessel_optimizer o{};
  o.kind = TESSEL_OPT_SGD;
  o.momentum = momentum;
  o.nesterov = nesterov;
  o.weight_decay = weightDecay;
  return o;
}

/// Expects |got - ref| <= rtol·|ref| + atol elementwise; reports the first
/// few mismatches only.
inline void expectClose(const std::vector<double> &got,
                        const std::vector<double> &ref, double rtol,
                        double atol) {
  ASSERT_EQ(got.size(), ref.size());
  int bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    bool ok;
    if (std::isnan(ref[i]))
      ok = std::isnan(got[i]);
    else if (std::isinf(ref[i]))
      ok = got[i] == ref[i];
    else
      ok = std::fabs(got[i] - ref[i]) <= rtol * std::fabs(ref[i]) + atol;
    if (!ok && bad++ < 5)
      ADD_FAILURE() << "element " << i << ": got " << got[i] << ", want "
                    << ref[i] << " (rtol " << rtol << ", atol " << atol << ")";
  }
  EXPECT_EQ(bad, 0) << "mismatching elements";
}

/// A CPU context for rank 0 of 1; fails the test if a kernel leaves an
/// error behind that the test did not clear.
class RuntimeTest : public ::testing::Test {
protected:
  void SetUp() override {
    tessel_ctx_options options{TESSEL_BACKEND_CPU, 0, 1, 0};
    ctx = tessel_ctx_create(&options);
    ASSERT_NE(ctx, nullptr);
  }
  void TearDown() override {
    const char *err = tessel_error(ctx);
    EXPECT_EQ(err, nullptr) << (err ? err : "");
    tessel_ctx_destroy(ctx);
  }
  tessel_ctx *ctx = nullptr;
};

} // namespace tt

#endif // TESSEL_RUNTIME_TEST_TESTUTIL_H
