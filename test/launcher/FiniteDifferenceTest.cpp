//===- FiniteDifferenceTest.cpp - The gradient check's stencil ------------===//
//
// adaptiveDifference (runtime/launcher/GradCheck.h) against functions whose
// derivative is known: smooth ones settle on it, a kink within the steps
// is reported as not settling, and rounding beyond the loss's noise model
// settles within the given resolution.
//
//===----------------------------------------------------------------------===//

#include "runtime/launcher/GradCheck.h"

#include <gtest/gtest.h>

#include <cmath>

using tessel::run::adaptiveDifference;

namespace {

TEST(FiniteDifferenceTest, SmoothFunctionsSettleOnTheirDerivative) {
  // sin at 0.3 and exp at -1, from steps of 1e-2 (f64's first step), 1e-3
  // and 0.1 (f32's), settled at a resolution of 1e-9: the O(h⁴) stencil's
  // successive estimates fall below it, and the last is closer still.
  auto sine = [](double t) { return std::sin(0.3 + t); };
  auto exponential = [](double t) { return std::exp(-1 + t); };
  for (double h : {1e-2, 1e-3, 1e-1}) {
    std::optional<double> d = adaptiveDifference(sine, h, 1e-16, 1e-9);
    ASSERT_TRUE(d.has_value()) << h;
    EXPECT_NEAR(*d, std::cos(0.3), 1e-10) << h;
    d = adaptiveDifference(exponential, h, 1e-16, 1e-9);
    ASSERT_TRUE(d.has_value()) << h;
    EXPECT_NEAR(*d, std::exp(-1), 1e-10) << h;
  }
}

TEST(FiniteDifferenceTest, AKinkWithinTheStepsDoesNotSettle) {
  // relu(t − k) + t/2 has slope 1/2 left of k and 3/2 right of it. A kink
  // inside the smallest stencil (2h/32 = 6.25e-5 from h = 1e-3 after 5
  // halvings; 2h/256 ≈ 7.8e-5 from f64's h = 1e-2 after 8) averages the
  // two slopes at every step: no estimate settles.
  for (double k : {1e-5, -3e-5, 5e-7}) {
    auto kinked = [k](double t) { return std::max(0.0, t - k) + t / 2; };
    EXPECT_FALSE(adaptiveDifference(kinked, 1e-3, 1e-16, 1e-9).has_value())
        << k;
    EXPECT_FALSE(adaptiveDifference(kinked, 1e-2, 1e-16, 1e-9, 8).has_value())
        << k;
  }
  // One the steps leave behind after halving is no obstacle: the smaller
  // stencils see slope 1/2 only.
  auto farKink = [](double t) { return std::max(0.0, t - 1.5e-3) + t / 2; };
  std::optional<double> d = adaptiveDifference(farKink, 1e-3, 1e-16, 1e-9);
  ASSERT_TRUE(d.has_value());
  EXPECT_NEAR(*d, 0.5, 1e-12);
}

TEST(FiniteDifferenceTest, RoundingBeyondTheNoiseModelSettlesAtResolution) {
  // A linear function (slope 2) whose evaluations carry deterministic
  // "rounding" of 1e-12, a thousand times the noise the caller assumes:
  // the estimates drift by ~1e-12/h and never agree within noise / h, but
  // do within a resolution of 1e-7, and the settled estimate is that close.
  auto noisy = [](double t) { return 2 * t + 1e-12 * std::sin(1e7 * t + 0.4); };
  EXPECT_FALSE(adaptiveDifference(noisy, 1e-3, 1e-15, 0).has_value());
  std::optional<double> d = adaptiveDifference(noisy, 1e-3, 1e-15, 1e-7);
  ASSERT_TRUE(d.has_value());
  EXPECT_NEAR(*d, 2, 1e-7);
}

} // namespace
