//===- CostTest.cpp - CostOpInterface of every nn op, by hand -------------===//

#include "TestUtils.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace tessel;

namespace {

TEST(CostTest, MatmulIsTwoMNK) {
  auto ctx = test::makeContext();
  auto module = test::parse(*ctx, R"mlir(
    func.func @f(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
      %c = nn.matmul %a, %b : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
      return %c : tensor<2x4xf32>
    })mlir");
  ASSERT_TRUE(module);
  auto op = test::firstOp<nn::MatmulOp>(*module);
  auto cost = cast<nn::CostOpInterface>(op.getOperation());
  EXPECT_EQ(cost.getFlops(), 2 * 2 * 4 * 3);
  EXPECT_EQ(cost.getBytesAccessed(), (6 + 12 + 8) * 4);
}

} // namespace
