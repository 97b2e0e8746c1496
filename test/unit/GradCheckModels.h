//===- GradCheckModels.h - GradCheckTest's random models --------*- C++ -*-===//
//
// The cases of GradCheckTest: for every differentiable nn op, a generator
// of small f64 models with random shapes and attributes (GradCheckTest.cpp
// says what each model computes and how it is checked).
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_TEST_UNIT_GRADCHECKMODELS_H
#define TESSEL_TEST_UNIT_GRADCHECKMODELS_H

#include <functional>
#include <random>
#include <string>
#include <vector>

namespace tessel::gradcheck {

struct GradModel {
  std::string text;
  std::string flags; // extra tessel-run flags
};

using Generator = std::function<GradModel(std::mt19937 &)>;

struct GradCase {
  std::string name;
  int repetitions;
  Generator generate;
};

/// Every case, in a fixed order (the f32 variants last).
const std::vector<GradCase> &cases();

} // namespace tessel::gradcheck

#endif // TESSEL_TEST_UNIT_GRADCHECKMODELS_H
