//===- AbiTest.cpp - the runtime defines what generated code calls --------===//

#include "tessel/runtime.h"

#include <gtest/gtest.h>

namespace {

// Each address taken makes this test's compile fail when runtime.h lacks a
// function of runtime_abi.def, and its link fail when the runtime does not
// define one (a compiled model calling it would not load).
TEST(Abi, RuntimeDefinesEveryFunctionGeneratedCodeCalls) {
  const void *functions[] = {
#define TESSEL_ABI_FN(name) reinterpret_cast<const void *>(&name),
#include "tessel/runtime_abi.def"
  };
  for (const void *function : functions)
    EXPECT_NE(function, nullptr);
}

} // namespace
