//===- ShardingRuleTest.cpp - sharding rule of every nn op, by hand -------===//

#include "TestUtils.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace tessel;

namespace {

TEST(ShardingRuleTest, MatmulContractsK) {
  auto ctx = test::makeContext();
  auto module = test::parse(*ctx, R"mlir(
    func.func @f(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
      %c = nn.matmul %a, %b : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
      return %c : tensor<2x4xf32>
    })mlir");
  ASSERT_TRUE(module);
  auto rule = cast<shard::ShardingInterface>(
      test::firstOp<nn::MatmulOp>(*module).getOperation());
  EXPECT_EQ(test::toString(rule.getLoopIteratorTypes()),
            "parallel, parallel, reduction");
  EXPECT_EQ(test::toString(rule.getIndexingMaps()),
            "(d0, d1, d2) -> (d0, d2)\n(d0, d1, d2) -> (d2, d1)\n"
            "(d0, d1, d2) -> (d0, d1)");
  EXPECT_EQ(test::toString(rule.getReductionLoopIteratorKinds()), "sum");
}

} // namespace
