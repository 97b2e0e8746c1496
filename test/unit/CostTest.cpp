//===- CostTest.cpp - CostOpInterface of every nn op, by hand -------------===//
//
// Every expected value is derived by hand from the formula in the op's
// description (NNOps.td) and written as arithmetic: flops per the formula,
// bytes = elements of every operand and result times their element size
// (bf16/f16 2, f32/i32 4, f64/i64 8).
//
//===----------------------------------------------------------------------===//

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

/// One op in a function with arguments `args`, and its hand-derived cost.
struct CostCase {
  const char *name;
  const char *args;
  const char *body;
  int64_t flops;
  int64_t bytes;
};

void checkCosts(llvm::ArrayRef<CostCase> cases) {
  for (const CostCase &c : cases) {
    SCOPED_TRACE(c.name);
    test::ParsedOp parsed = test::parseFirstNNOp(c.args, c.body);
    ASSERT_TRUE(parsed.op);
    Operation *op = parsed.op;
    auto cost = dyn_cast<nn::CostOpInterface>(op);
    ASSERT_TRUE(cost) << "no CostOpInterface on " << c.name;
    EXPECT_EQ(cost.getFlops(), c.flops);
    EXPECT_EQ(cost.getBytesAccessed(), c.bytes);
  }
}

TEST(CostTest, ConstantCastBroadcast) {
  checkCosts({
      // A constant reads nothing and writes its result.
      {"constant bf16", "", "%c = nn.constant dense<1.0> : tensor<3x7xbf16>", 0,
       3 * 7 * 2},
      {"constant i64", "", "%c = nn.constant dense<5> : tensor<5xi64>", 0,
       5 * 8},
      // One flop per element; reads f32, writes bf16.
      {"cast f32->bf16", "%x: tensor<3x7xf32>",
       "%y = nn.cast %x : tensor<3x7xf32> to tensor<3x7xbf16>", 3 * 7,
       3 * 7 * 4 + 3 * 7 * 2},
      {"cast i32->f16", "%x: tensor<1x13xi32>",
       "%y = nn.cast %x : tensor<1x13xi32> to tensor<1x13xf16>", 13,
       13 * 4 + 13 * 2},
      {"cast f64->f32", "%x: tensor<5xf64>",
       "%y = nn.cast %x : tensor<5xf64> to tensor<5xf32>", 5, 5 * 8 + 5 * 4},
      // Data movement: no flops; reads 1x5, writes 3x7x5.
      {"broadcast f16", "%x: tensor<1x5xf16>",
       "%y = nn.broadcast %x dims = [0, 2] : tensor<1x5xf16> -> "
       "tensor<3x7x5xf16>",
       0, (1 * 5 + 3 * 7 * 5) * 2},
      {"broadcast i32 scalar", "%x: tensor<i32>",
       "%y = nn.broadcast %x dims = [] : tensor<i32> -> tensor<11xi32>", 0,
       (1 + 11) * 4},
  });
}

TEST(CostTest, BinaryElementwise) {
  // One flop per element; two operands and one result of the same type.
  checkCosts({
      {"add i32", "%a: tensor<3x1x7xi32>, %b: tensor<3x1x7xi32>",
       "%c = nn.add %a, %b : tensor<3x1x7xi32>", 3 * 1 * 7, 3 * (3 * 7) * 4},
      {"add i64", "%a: tensor<11xi64>, %b: tensor<11xi64>",
       "%c = nn.add %a, %b : tensor<11xi64>", 11, 3 * 11 * 8},
      {"sub f16", "%a: tensor<5x3xf16>, %b: tensor<5x3xf16>",
       "%c = nn.sub %a, %b : tensor<5x3xf16>", 5 * 3, 3 * (5 * 3) * 2},
      {"mul bf16", "%a: tensor<13xbf16>, %b: tensor<13xbf16>",
       "%c = nn.mul %a, %b : tensor<13xbf16>", 13, 3 * 13 * 2},
      {"div f32", "%a: tensor<2x3x5xf32>, %b: tensor<2x3x5xf32>",
       "%c = nn.div %a, %b : tensor<2x3x5xf32>", 2 * 3 * 5,
       3 * (2 * 3 * 5) * 4},
      {"add scalar f32", "%a: tensor<f32>, %b: tensor<f32>",
       "%c = nn.add %a, %b : tensor<f32>", 1, 3 * 4},
  });
}

TEST(CostTest, UnaryElementwise) {
  // Flops per element from each description; one operand, one result.
  checkCosts({
      {"neg", "%x: tensor<7xf32>", "%y = nn.neg %x : tensor<7xf32>", 1 * 7,
       2 * 7 * 4},
      {"exp", "%x: tensor<3x5xbf16>", "%y = nn.exp %x : tensor<3x5xbf16>",
       1 * 15, 2 * 15 * 2},
      {"log", "%x: tensor<1x11xf16>", "%y = nn.log %x : tensor<1x11xf16>",
       1 * 11, 2 * 11 * 2},
      {"sqrt", "%x: tensor<13xf32>", "%y = nn.sqrt %x : tensor<13xf32>", 1 * 13,
       2 * 13 * 4},
      {"rsqrt", "%x: tensor<3x7xf32>", "%y = nn.rsqrt %x : tensor<3x7xf32>",
       2 * 21, 2 * 21 * 4},
      {"tanh", "%x: tensor<17xbf16>", "%y = nn.tanh %x : tensor<17xbf16>",
       1 * 17, 2 * 17 * 2},
      {"sigmoid", "%x: tensor<5x7xf16>", "%y = nn.sigmoid %x : tensor<5x7xf16>",
       3 * 35, 2 * 35 * 2},
      {"relu size 1", "%x: tensor<1xf32>", "%y = nn.relu %x : tensor<1xf32>",
       1 * 1, 2 * 1 * 4},
      {"gelu", "%x: tensor<3x11xf32>", "%y = nn.gelu %x : tensor<3x11xf32>",
       8 * 33, 2 * 33 * 4},
      {"gelu approximate", "%x: tensor<5xbf16>",
       "%y = nn.gelu %x approximate : tensor<5xbf16>", 8 * 5, 2 * 5 * 2},
      {"silu", "%x: tensor<7x3xbf16>", "%y = nn.silu %x : tensor<7x3xbf16>",
       4 * 21, 2 * 21 * 2},
      {"dropout", "%x: tensor<3x5xf32>",
       "%y = nn.dropout %x rate = 0.1 seed = 7 : tensor<3x5xf32>", 2 * 15,
       2 * 15 * 4},
      {"dropout f64", "%x: tensor<7xf64>",
       "%y = nn.dropout %x rate = 0.5 seed = 1 : tensor<7xf64>", 2 * 7,
       2 * 7 * 8},
  });
}

TEST(CostTest, Reductions) {
  checkCosts({
      // sum: N_in - N_out = 3*5*7 - 3*7.
      {"reduce_sum f32", "%x: tensor<3x5x7xf32>",
       "%y = nn.reduce_sum %x dims = [1] : tensor<3x5x7xf32> -> "
       "tensor<3x7xf32>",
       3 * 5 * 7 - 3 * 7, (3 * 5 * 7 + 3 * 7) * 4},
      {"reduce_sum i32 keep_dims", "%x: tensor<3x5xi32>",
       "%y = nn.reduce_sum %x dims = [0, 1] keep_dims : tensor<3x5xi32> -> "
       "tensor<1x1xi32>",
       15 - 1, (15 + 1) * 4},
      {"reduce_sum i64 no dims", "%x: tensor<3xi64>",
       "%y = nn.reduce_sum %x dims = [] : tensor<3xi64> -> tensor<3xi64>",
       3 - 3, (3 + 3) * 8},
      // mean: N_in.
      {"reduce_mean bf16", "%x: tensor<3x5x7xbf16>",
       "%y = nn.reduce_mean %x dims = [0, 2] : tensor<3x5x7xbf16> -> "
       "tensor<5xbf16>",
       3 * 5 * 7, (3 * 5 * 7 + 5) * 2},
      {"reduce_mean to scalar", "%x: tensor<11x13xf32>",
       "%y = nn.reduce_mean %x dims = [0, 1] : tensor<11x13xf32> -> "
       "tensor<f32>",
       11 * 13, (11 * 13 + 1) * 4},
      // max: N_in - N_out comparisons.
      {"reduce_max f16 keep_dims", "%x: tensor<7x3xf16>",
       "%y = nn.reduce_max %x dims = [1] keep_dims : tensor<7x3xf16> -> "
       "tensor<7x1xf16>",
       21 - 7, (21 + 7) * 2},
      {"reduce_max i64", "%x: tensor<2x3x5xi64>",
       "%y = nn.reduce_max %x dims = [0] : tensor<2x3x5xi64> -> "
       "tensor<3x5xi64>",
       30 - 15, (30 + 15) * 8},
  });
}

TEST(CostTest, DataMovement) {
  // Reshape, transpose, slice and concat move data: no flops.
  checkCosts({
      {"reshape f32", "%x: tensor<8x12x64xf32>",
       "%y = nn.reshape %x : tensor<8x12x64xf32> -> tensor<8x12x4x16xf32>", 0,
       2 * (8 * 12 * 64) * 4},
      {"reshape i64", "%x: tensor<2x3xi64>",
       "%y = nn.reshape %x : tensor<2x3xi64> -> tensor<6xi64>", 0, 2 * 6 * 8},
      {"transpose bf16", "%x: tensor<3x5x7xbf16>",
       "%y = nn.transpose %x perm = [2, 0, 1] : tensor<3x5x7xbf16> -> "
       "tensor<7x3x5xbf16>",
       0, 2 * 105 * 2},
      // ceil((7 - 1) / 2) = 3 rows, ceil(11 / 3) = 4 columns.
      {"slice f32 strided", "%x: tensor<7x11xf32>",
       "%y = nn.slice %x start = [1, 0] limit = [7, 11] strides = [2, 3] : "
       "tensor<7x11xf32> -> tensor<3x4xf32>",
       0, (7 * 11 + 3 * 4) * 4},
      {"slice i32", "%x: tensor<5xi32>",
       "%y = nn.slice %x start = [2] limit = [3] : tensor<5xi32> -> "
       "tensor<1xi32>",
       0, (5 + 1) * 4},
      {"concat f16", "%a: tensor<3x2xf16>, %b: tensor<3x5xf16>",
       "%y = nn.concat %a, %b dim = 1 : (tensor<3x2xf16>, tensor<3x5xf16>) "
       "-> tensor<3x7xf16>",
       0, (3 * 2 + 3 * 5 + 3 * 7) * 2},
      {"concat three i64",
       "%a: tensor<1x3xi64>, %b: tensor<2x3xi64>, %c: tensor<4x3xi64>",
       "%y = nn.concat %a, %b, %c dim = 0 : (tensor<1x3xi64>, "
       "tensor<2x3xi64>, tensor<4x3xi64>) -> tensor<7x3xi64>",
       0, (3 + 6 + 12 + 21) * 8},
  });
}

TEST(CostTest, Matmul) {
  // 2·B·M·N·K.
  checkCosts({
      {"matmul 2d f32", "%a: tensor<3x5xf32>, %b: tensor<5x7xf32>",
       "%c = nn.matmul %a, %b : (tensor<3x5xf32>, tensor<5x7xf32>) -> "
       "tensor<3x7xf32>",
       2 * 3 * 7 * 5, (3 * 5 + 5 * 7 + 3 * 7) * 4},
      // B = 2·3, M = 5, K = 7, N = 11; the rhs is shared by every batch.
      {"matmul shared rhs bf16",
       "%a: tensor<2x3x5x7xbf16>, %b: tensor<7x11xbf16>",
       "%c = nn.matmul %a, %b : (tensor<2x3x5x7xbf16>, tensor<7x11xbf16>) -> "
       "tensor<2x3x5x11xbf16>",
       2 * (2 * 3) * 5 * 11 * 7, (210 + 77 + 330) * 2},
      // lhs [B, K, M] and rhs [B, N, K]: B = 3, M = 5, K = 7, N = 11.
      {"matmul transposes f16", "%a: tensor<3x7x5xf16>, %b: tensor<3x11x7xf16>",
       "%c = nn.matmul %a, %b transpose_lhs transpose_rhs : "
       "(tensor<3x7x5xf16>, tensor<3x11x7xf16>) -> tensor<3x5x11xf16>",
       2 * 3 * 5 * 11 * 7, (105 + 231 + 165) * 2},
      // M = N = 1, K = 13: a dot product.
      {"matmul dot f32", "%a: tensor<1x13xf32>, %b: tensor<13x1xf32>",
       "%c = nn.matmul %a, %b : (tensor<1x13xf32>, tensor<13x1xf32>) -> "
       "tensor<1x1xf32>",
       2 * 1 * 1 * 13, (13 + 13 + 1) * 4},
      // B = 4, M = 3, K = 5, N = 7, rhs [N, K] shared.
      {"matmul shared transposed rhs f64",
       "%a: tensor<4x3x5xf64>, %b: tensor<7x5xf64>",
       "%c = nn.matmul %a, %b transpose_rhs : (tensor<4x3x5xf64>, "
       "tensor<7x5xf64>) -> tensor<4x3x7xf64>",
       2 * 4 * 3 * 7 * 5, (60 + 35 + 84) * 8},
  });
}

TEST(CostTest, EmbeddingAndAttention) {
  checkCosts({
      // A gather: no flops; table f32, ids i64, result f32.
      {"embedding i64 ids", "%t: tensor<11x5xf32>, %ids: tensor<3x7xi64>",
       "%e = nn.embedding %t, %ids : (tensor<11x5xf32>, tensor<3x7xi64>) -> "
       "tensor<3x7x5xf32>",
       0, 11 * 5 * 4 + 3 * 7 * 8 + 3 * 7 * 5 * 4},
      {"embedding i32 ids", "%t: tensor<13x3xbf16>, %ids: tensor<7xi32>",
       "%e = nn.embedding %t, %ids : (tensor<13x3xbf16>, tensor<7xi32>) -> "
       "tensor<7x3xbf16>",
       0, 13 * 3 * 2 + 7 * 4 + 7 * 3 * 2},
      // B = 2, S = 3, H = 4, Hkv = 2, T = 7, D = 5, E = 11:
      // 2·B·H·S·T·D + 5·B·H·S·T + 2·B·H·S·T·E.
      {"attention gqa f32",
       "%q: tensor<2x3x4x5xf32>, %k: tensor<2x7x2x5xf32>, "
       "%v: tensor<2x7x2x11xf32>",
       "%o = nn.attention %q, %k, %v : (tensor<2x3x4x5xf32>, "
       "tensor<2x7x2x5xf32>, tensor<2x7x2x11xf32>) -> tensor<2x3x4x11xf32>",
       2 * 2 * 4 * 3 * 7 * 5 + 5 * 2 * 4 * 3 * 7 + 2 * 2 * 4 * 3 * 7 * 11,
       (2 * 3 * 4 * 5 + 2 * 7 * 2 * 5 + 2 * 7 * 2 * 11 + 2 * 3 * 4 * 11) * 4},
      // Causal keeps the dense count: B = 1, S = T = 5, H = 3, D = E = 2.
      {"attention causal bf16",
       "%q: tensor<1x5x3x2xbf16>, %k: tensor<1x5x3x2xbf16>, "
       "%v: tensor<1x5x3x2xbf16>",
       "%o = nn.attention %q, %k, %v causal : (tensor<1x5x3x2xbf16>, "
       "tensor<1x5x3x2xbf16>, tensor<1x5x3x2xbf16>) -> tensor<1x5x3x2xbf16>",
       2 * 1 * 3 * 5 * 5 * 2 + 5 * 1 * 3 * 5 * 5 + 2 * 1 * 3 * 5 * 5 * 2,
       4 * (1 * 5 * 3 * 2) * 2},
      // A sliding window of 2 bounds each row's keys: T' = 2 for T = 5.
      {"attention window f32",
       "%q: tensor<1x5x3x2xf32>, %k: tensor<1x5x3x2xf32>, "
       "%v: tensor<1x5x3x2xf32>",
       "%o = nn.attention %q, %k, %v causal window 2 : (tensor<1x5x3x2xf32>, "
       "tensor<1x5x3x2xf32>, tensor<1x5x3x2xf32>) -> tensor<1x5x3x2xf32>",
       2 * 1 * 3 * 5 * 2 * 2 + 5 * 1 * 3 * 5 * 2 + 2 * 1 * 3 * 5 * 2 * 2,
       4 * (1 * 5 * 3 * 2) * 4},
      // A window past the keys is the dense count.
      {"attention wide window bf16",
       "%q: tensor<1x5x3x2xbf16>, %k: tensor<1x5x3x2xbf16>, "
       "%v: tensor<1x5x3x2xbf16>",
       "%o = nn.attention %q, %k, %v causal window 64 : "
       "(tensor<1x5x3x2xbf16>, tensor<1x5x3x2xbf16>, tensor<1x5x3x2xbf16>) "
       "-> tensor<1x5x3x2xbf16>",
       2 * 1 * 3 * 5 * 5 * 2 + 5 * 1 * 3 * 5 * 5 + 2 * 1 * 3 * 5 * 5 * 2,
       4 * (1 * 5 * 3 * 2) * 2},
      // A soft cap adds 3 a score (divide, tanh, multiply): 8, not 5.
      {"attention softcap f32",
       "%q: tensor<1x5x3x2xf32>, %k: tensor<1x5x3x2xf32>, "
       "%v: tensor<1x5x3x2xf32>",
       "%o = nn.attention %q, %k, %v causal softcap 30.0 : "
       "(tensor<1x5x3x2xf32>, tensor<1x5x3x2xf32>, tensor<1x5x3x2xf32>) "
       "-> tensor<1x5x3x2xf32>",
       2 * 1 * 3 * 5 * 5 * 2 + 8 * 1 * 3 * 5 * 5 + 2 * 1 * 3 * 5 * 5 * 2,
       4 * (1 * 5 * 3 * 2) * 4},
  });
}

TEST(CostTest, Normalisations) {
  checkCosts({
      // rope: 3 per element (a pair: 4 products and 2 sums).
      {"rope f32", "%x: tensor<2x5x3x8xf32>",
       "%y = nn.rope %x : tensor<2x5x3x8xf32>", 3 * 240, 2 * 240 * 4},
      // softmax: 5 per element.
      {"softmax f32 dim 0", "%x: tensor<3x7xf32>",
       "%y = nn.softmax %x {dim = 0 : i64} : tensor<3x7xf32>", 5 * 21,
       2 * 21 * 4},
      {"softmax bf16", "%x: tensor<13xbf16>",
       "%y = nn.softmax %x : tensor<13xbf16>", 5 * 13, 2 * 13 * 2},
      // layer_norm: 8 per element; x, gamma [7], beta [7], result.
      {"layer_norm f16",
       "%x: tensor<3x5x7xf16>, %g: tensor<7xf16>, "
       "%b: tensor<7xf16>",
       "%y = nn.layer_norm %x, %g, %b : (tensor<3x5x7xf16>, tensor<7xf16>, "
       "tensor<7xf16>) -> tensor<3x5x7xf16>",
       8 * 105, (105 + 7 + 7 + 105) * 2},
      // rms_norm: 4 per element; x, gamma [11], result.
      {"rms_norm bf16", "%x: tensor<3x11xbf16>, %g: tensor<11xbf16>",
       "%y = nn.rms_norm %x, %g : (tensor<3x11xbf16>, tensor<11xbf16>) -> "
       "tensor<3x11xbf16>",
       4 * 33, (33 + 11 + 33) * 2},
      // batch_norm: 8 per element; gamma and beta have C elements.
      {"batch_norm f32",
       "%x: tensor<5x3x7xf32>, %g: tensor<3xf32>, "
       "%b: tensor<3xf32>",
       "%y = nn.batch_norm %x, %g, %b : (tensor<5x3x7xf32>, tensor<3xf32>, "
       "tensor<3xf32>) -> tensor<5x3x7xf32>",
       8 * 105, (105 + 3 + 3 + 105) * 4},
      {"batch_norm feature_dim 2",
       "%x: tensor<5x3x7xf64>, %g: tensor<7xf64>, "
       "%b: tensor<7xf64>",
       "%y = nn.batch_norm %x, %g, %b {feature_dim = 2 : i64} : "
       "(tensor<5x3x7xf64>, tensor<7xf64>, tensor<7xf64>) -> "
       "tensor<5x3x7xf64>",
       8 * 105, (105 + 7 + 7 + 105) * 8},
  });
}

TEST(CostTest, CrossEntropy) {
  // 4·N + 2·R with N logits and R positions.
  checkCosts({
      {"cross_entropy mean", "%l: tensor<3x5x11xf32>, %y: tensor<3x5xi32>",
       "%c = nn.cross_entropy %l, %y : (tensor<3x5x11xf32>, tensor<3x5xi32>) "
       "-> tensor<f32>",
       4 * (3 * 5 * 11) + 2 * (3 * 5), 3 * 5 * 11 * 4 + 3 * 5 * 4 + 1 * 4},
      {"cross_entropy none", "%l: tensor<7x13xbf16>, %y: tensor<7xi64>",
       "%c = nn.cross_entropy %l, %y {reduction = #nn.reduction<none>} : "
       "(tensor<7x13xbf16>, tensor<7xi64>) -> tensor<7xbf16>",
       4 * (7 * 13) + 2 * 7, 7 * 13 * 2 + 7 * 8 + 7 * 2},
      // One position (scalar labels).
      {"cross_entropy sum", "%l: tensor<13xf16>, %y: tensor<i32>",
       "%c = nn.cross_entropy %l, %y {reduction = #nn.reduction<sum>} : "
       "(tensor<13xf16>, tensor<i32>) -> tensor<f16>",
       4 * 13 + 2 * 1, 13 * 2 + 1 * 4 + 1 * 2},
  });
}

TEST(CostTest, BackwardOps) {
  checkCosts({
      // Activation gradients: x and dy in, dx out; flops per element from
      // each description (gelu 12, silu 8, relu 1).
      {"gelu_grad f32", "%x: tensor<3x11xf32>, %dy: tensor<3x11xf32>",
       "%y = nn.gelu_grad %x, %dy : tensor<3x11xf32>", 12 * 33, 3 * 33 * 4},
      {"gelu_grad approximate bf16", "%x: tensor<5xbf16>, %dy: tensor<5xbf16>",
       "%y = nn.gelu_grad %x, %dy approximate : tensor<5xbf16>", 12 * 5,
       3 * 5 * 2},
      {"silu_grad bf16", "%x: tensor<7x3xbf16>, %dy: tensor<7x3xbf16>",
       "%y = nn.silu_grad %x, %dy : tensor<7x3xbf16>", 8 * 21, 3 * 21 * 2},
      {"relu_grad f16", "%x: tensor<13xf16>, %dy: tensor<13xf16>",
       "%y = nn.relu_grad %x, %dy : tensor<13xf16>", 1 * 13, 3 * 13 * 2},
      // equal: one comparison per element, in the operands' type.
      {"equal i32", "%a: tensor<3x5xi32>, %b: tensor<3x5xi32>",
       "%y = nn.equal %a, %b : tensor<3x5xi32>", 15, 3 * 15 * 4},
      {"equal f64", "%a: tensor<7xf64>, %b: tensor<7xf64>",
       "%y = nn.equal %a, %b : tensor<7xf64>", 7, 3 * 7 * 8},
      // softmax_grad: 4 per element; y, dy, dx.
      {"softmax_grad dim 0", "%y: tensor<3x7xf32>, %dy: tensor<3x7xf32>",
       "%d = nn.softmax_grad %y, %dy {dim = 0 : i64} : tensor<3x7xf32>", 4 * 21,
       3 * 21 * 4},
      // layer_norm_grad: 15 per element of x; x, gamma, dy in; dx, dgamma,
      // dbeta out.
      {"layer_norm_grad f16",
       "%x: tensor<3x5x7xf16>, %g: tensor<7xf16>, %dy: tensor<3x5x7xf16>",
       "%dx, %dg, %db = nn.layer_norm_grad %x, %g, %dy : (tensor<3x5x7xf16>, "
       "tensor<7xf16>, tensor<3x5x7xf16>) -> (tensor<3x5x7xf16>, "
       "tensor<7xf16>, tensor<7xf16>)",
       15 * 105, (105 + 7 + 105 + 105 + 7 + 7) * 2},
      // rms_norm_grad: 11 per element; dx and dgamma out.
      {"rms_norm_grad bf16",
       "%x: tensor<3x11xbf16>, %g: tensor<11xbf16>, %dy: tensor<3x11xbf16>",
       "%dx, %dg = nn.rms_norm_grad %x, %g, %dy : (tensor<3x11xbf16>, "
       "tensor<11xbf16>, tensor<3x11xbf16>) -> (tensor<3x11xbf16>, "
       "tensor<11xbf16>)",
       11 * 33, (33 + 11 + 33 + 33 + 11) * 2},
      // batch_norm_grad: 15 per element; gamma, dgamma, dbeta have C = 3.
      {"batch_norm_grad f32",
       "%x: tensor<5x3x7xf32>, %g: tensor<3xf32>, %dy: tensor<5x3x7xf32>",
       "%dx, %dg, %db = nn.batch_norm_grad %x, %g, %dy : (tensor<5x3x7xf32>, "
       "tensor<3xf32>, tensor<5x3x7xf32>) -> (tensor<5x3x7xf32>, "
       "tensor<3xf32>, tensor<3xf32>)",
       15 * 105, (105 + 3 + 105 + 105 + 3 + 3) * 4},
      // cross_entropy_grad: 6·N + R; logits, labels, dloss in, dlogits out.
      {"cross_entropy_grad mean",
       "%l: tensor<3x5x11xf32>, %y: tensor<3x5xi32>, %d: tensor<f32>",
       "%g = nn.cross_entropy_grad %l, %y, %d : (tensor<3x5x11xf32>, "
       "tensor<3x5xi32>, tensor<f32>) -> tensor<3x5x11xf32>",
       6 * 165 + 15, 165 * 4 + 15 * 4 + 1 * 4 + 165 * 4},
      {"cross_entropy_grad none",
       "%l: tensor<7x13xbf16>, %y: tensor<7xi64>, %d: tensor<7xbf16>",
       "%g = nn.cross_entropy_grad %l, %y, %d {reduction = "
       "#nn.reduction<none>} : (tensor<7x13xbf16>, tensor<7xi64>, "
       "tensor<7xbf16>) -> tensor<7x13xbf16>",
       6 * 91 + 7, 91 * 2 + 7 * 8 + 7 * 2 + 91 * 2},
      // embedding_grad: one add per element of dout; ids i64, dout, table.
      {"embedding_grad", "%ids: tensor<3x7xi64>, %d: tensor<3x7x5xf32>",
       "%t = nn.embedding_grad %ids, %d : (tensor<3x7xi64>, "
       "tensor<3x7x5xf32>) -> tensor<11x5xf32>",
       105, 21 * 8 + 105 * 4 + 55 * 4},
      // attention_grad, B = 2, S = 3, H = 4, Hkv = 2, T = 7, D = 5, E = 11:
      // 6·B·H·S·T·D + 4·B·H·S·T·E + 5·B·H·S·T + 2·B·H·S·E; q, k, v, out,
      // lse (24), dout in, dq, dk, dv out.
      {"attention_grad gqa",
       "%q: tensor<2x3x4x5xf32>, %k: tensor<2x7x2x5xf32>, "
       "%v: tensor<2x7x2x11xf32>, %o: tensor<2x3x4x11xf32>, "
       "%lse: tensor<2x4x3xf32>, %do: tensor<2x3x4x11xf32>",
       "%dq, %dk, %dv = nn.attention_grad %q, %k, %v, %o, %lse, %do : "
       "(tensor<2x3x4x5xf32>, tensor<2x7x2x5xf32>, tensor<2x7x2x11xf32>, "
       "tensor<2x3x4x11xf32>, tensor<2x4x3xf32>, tensor<2x3x4x11xf32>) -> "
       "(tensor<2x3x4x5xf32>, tensor<2x7x2x5xf32>, tensor<2x7x2x11xf32>)",
       6 * 2 * 4 * 3 * 7 * 5 + 4 * 2 * 4 * 3 * 7 * 11 + 5 * 2 * 4 * 3 * 7 +
           2 * 2 * 4 * 3 * 11,
       (2 * (120 + 140 + 308) + 2 * 264 + 24) * 4},
      // The same, causal (S = T = 3) under a window of 2: T' = 2.
      {"attention_grad window",
       "%q: tensor<2x3x4x5xf32>, %k: tensor<2x3x2x5xf32>, "
       "%v: tensor<2x3x2x11xf32>, %o: tensor<2x3x4x11xf32>, "
       "%lse: tensor<2x4x3xf32>, %do: tensor<2x3x4x11xf32>",
       "%dq, %dk, %dv = nn.attention_grad %q, %k, %v, %o, %lse, %do causal "
       "window 2 : (tensor<2x3x4x5xf32>, tensor<2x3x2x5xf32>, "
       "tensor<2x3x2x11xf32>, tensor<2x3x4x11xf32>, tensor<2x4x3xf32>, "
       "tensor<2x3x4x11xf32>) -> (tensor<2x3x4x5xf32>, tensor<2x3x2x5xf32>, "
       "tensor<2x3x2x11xf32>)",
       6 * 2 * 4 * 3 * 2 * 5 + 4 * 2 * 4 * 3 * 2 * 11 + 5 * 2 * 4 * 3 * 2 +
           2 * 2 * 4 * 3 * 11,
       (2 * (120 + 60 + 132) + 2 * 264 + 24) * 4},
      // The same under a soft cap: the capped scores and their slope again,
      // 11 a score, not 5.
      {"attention_grad softcap",
       "%q: tensor<2x3x4x5xf32>, %k: tensor<2x3x2x5xf32>, "
       "%v: tensor<2x3x2x11xf32>, %o: tensor<2x3x4x11xf32>, "
       "%lse: tensor<2x4x3xf32>, %do: tensor<2x3x4x11xf32>",
       "%dq, %dk, %dv = nn.attention_grad %q, %k, %v, %o, %lse, %do causal "
       "window 2 softcap 50.0 : (tensor<2x3x4x5xf32>, tensor<2x3x2x5xf32>, "
       "tensor<2x3x2x11xf32>, tensor<2x3x4x11xf32>, tensor<2x4x3xf32>, "
       "tensor<2x3x4x11xf32>) -> (tensor<2x3x4x5xf32>, tensor<2x3x2x5xf32>, "
       "tensor<2x3x2x11xf32>)",
       6 * 2 * 4 * 3 * 2 * 5 + 4 * 2 * 4 * 3 * 2 * 11 + 11 * 2 * 4 * 3 * 2 +
           2 * 2 * 4 * 3 * 11,
       (2 * (120 + 60 + 132) + 2 * 264 + 24) * 4},
      // slice_grad moves data: reads 3x4, writes 7x11.
      {"slice_grad strided", "%d: tensor<3x4xf32>",
       "%x = nn.slice_grad %d start = [1, 0] limit = [7, 11] strides = [2, 3] "
       ": tensor<3x4xf32> -> tensor<7x11xf32>",
       0, (3 * 4 + 7 * 11) * 4},
  });
}

TEST(CostTest, TrainingOps) {
  checkCosts({
      // sum_squares: 2 per element of every input; an f32 scalar out.
      {"sum_squares mixed",
       "%a: tensor<8x16xf32>, %b: tensor<16xbf16>, %c: tensor<f64>",
       "%s = nn.sum_squares %a, %b, %c : (tensor<8x16xf32>, tensor<16xbf16>, "
       "tensor<f64>) -> tensor<f32>",
       2 * (128 + 16 + 1), 128 * 4 + 16 * 2 + 8 + 4},
      // clip_scale: six scalar flops; three f32 scalars.
      {"clip_scale", "%ss: tensor<f32>, %gs: tensor<f32>",
       "%s = nn.clip_scale %ss, %gs : tensor<f32>", 6, 3 * 4},
      // adamw with weight decay: 1 + 2 + 3 + 4 + 7 per element; grad and the
      // scale in, every init read and written (bf16 param, f32 m and v).
      {"optimizer_step adamw",
       "%p: tensor<8x16xbf16>, %g: tensor<8x16xbf16>, %s: tensor<f32>, "
       "%m: tensor<8x16xf32>, %v: tensor<8x16xf32>",
       "%p2, %m2, %v2 = nn.optimizer_step adamw %g, %s outs(%p, %m, %v : "
       "tensor<8x16xbf16>, tensor<8x16xf32>, tensor<8x16xf32>) "
       "{weight_decay = 0.1 : f64} : tensor<8x16xbf16>",
       17 * 128, 128 * 2 + 4 + 2 * (128 * 2 + 2 * 128 * 4)},
      {"optimizer_step adam",
       "%p: tensor<16xf32>, %g: tensor<16xf32>, %s: tensor<f32>, "
       "%m: tensor<16xf32>, %v: tensor<16xf32>",
       "%p2, %m2, %v2 = nn.optimizer_step adam %g, %s outs(%p, %m, %v : "
       "tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) : tensor<16xf32>",
       15 * 16, 64 + 4 + 2 * (3 * 64)},
      // Plain SGD: scale (1) and update (2).
      {"optimizer_step sgd",
       "%p: tensor<4x4xf32>, %g: tensor<4x4xf32>, %s: tensor<f32>",
       "%p2 = nn.optimizer_step sgd %g, %s outs(%p : tensor<4x4xf32>) : "
       "tensor<4x4xf32>",
       3 * 16, 64 + 4 + 2 * 64},
      // SGD with weight decay, momentum and Nesterov: 1 + 2 + 2 + 2 + 2.
      {"optimizer_step sgd nesterov",
       "%p: tensor<4x4xf32>, %g: tensor<4x4xf32>, %s: tensor<f32>, "
       "%b: tensor<4x4xf32>",
       "%p2, %b2 = nn.optimizer_step sgd %g, %s outs(%p, %b : "
       "tensor<4x4xf32>, tensor<4x4xf32>) {momentum = 0.9 : f64, nesterov, "
       "weight_decay = 0.01 : f64} : tensor<4x4xf32>",
       9 * 16, 64 + 4 + 2 * (2 * 64)},
      // accumulate: one add per element; value and acc in, result out.
      {"accumulate", "%g: tensor<8x16xf32>, %acc: tensor<8x16xf32>",
       "%a = nn.accumulate %g outs(%acc) : tensor<8x16xf32>", 128, 3 * 128 * 4},
  });
}

TEST(CostTest, RepeatIsLTimesItsBody) {
  auto ctx = test::makeContext();
  auto module = test::parse(*ctx, R"mlir(
    func.func private @block(%h: tensor<3x5xf32>, %w: tensor<5x5xf32>) -> tensor<3x5xf32> {
      %y = nn.matmul %h, %w : (tensor<3x5xf32>, tensor<5x5xf32>) -> tensor<3x5xf32>
      %z = nn.relu %y : tensor<3x5xf32>
      return %z : tensor<3x5xf32>
    }
    func.func @f(%h: tensor<3x5xf32>, %w: tensor<7x5x5xf32>) -> tensor<3x5xf32> {
      %out = nn.repeat @block(%h) params(%w) : (tensor<3x5xf32>, tensor<7x5x5xf32>) -> tensor<3x5xf32>
      return %out : tensor<3x5xf32>
    })mlir");
  ASSERT_TRUE(module);
  auto cost = cast<nn::CostOpInterface>(
      test::firstOp<nn::RepeatOp>(*module).getOperation());
  // L = 7 layers of matmul (2·3·5·5 flops; 3x5, 5x5, 3x5 f32) + relu
  // (3·5 flops; 3x5 in and out).
  EXPECT_EQ(cost.getFlops(), 7 * (2 * 3 * 5 * 5 + 3 * 5));
  EXPECT_EQ(cost.getBytesAccessed(), 7 * ((15 + 25 + 15) * 4 + (15 + 15) * 4));
}

TEST(CostTest, RepeatWithTwoParamsAndNestedRepeat) {
  auto ctx = test::makeContext();
  auto module = test::parse(*ctx, R"mlir(
    func.func private @inner(%h: tensor<2x3xbf16>, %g: tensor<3xbf16>) -> tensor<2x3xbf16> {
      %y = nn.rms_norm %h, %g : (tensor<2x3xbf16>, tensor<3xbf16>) -> tensor<2x3xbf16>
      return %y : tensor<2x3xbf16>
    }
    func.func private @outer(%h: tensor<2x3xbf16>, %w: tensor<3x3xbf16>, %g: tensor<5x3xbf16>) -> tensor<2x3xbf16> {
      %y = nn.matmul %h, %w : (tensor<2x3xbf16>, tensor<3x3xbf16>) -> tensor<2x3xbf16>
      %z = nn.repeat @inner(%y) params(%g) : (tensor<2x3xbf16>, tensor<5x3xbf16>) -> tensor<2x3xbf16>
      return %z : tensor<2x3xbf16>
    }
    func.func @f(%h: tensor<2x3xbf16>, %w: tensor<11x3x3xbf16>, %g: tensor<11x5x3xbf16>) -> tensor<2x3xbf16> {
      %out = nn.repeat @outer(%h) params(%w, %g) : (tensor<2x3xbf16>, tensor<11x3x3xbf16>, tensor<11x5x3xbf16>) -> tensor<2x3xbf16>
      return %out : tensor<2x3xbf16>
    })mlir");
  ASSERT_TRUE(module);
  nn::RepeatOp outer;
  module->walk([&](nn::RepeatOp op) {
    if (op.getLayer() == "outer")
      outer = op;
  });
  ASSERT_TRUE(outer);
  auto cost = cast<nn::CostOpInterface>(outer.getOperation());
  // Inner body: rms_norm, 4·6 flops, (6 + 3 + 6)·2 bytes; 5 layers of it.
  int64_t innerFlops = 5 * (4 * 6), innerBytes = 5 * ((6 + 3 + 6) * 2);
  // Outer body: matmul 2·2·3·3 flops, (6 + 9 + 6)·2 bytes, then the inner
  // repeat; 11 layers of it.
  EXPECT_EQ(cost.getFlops(), 11 * (2 * 2 * 3 * 3 + innerFlops));
  EXPECT_EQ(cost.getBytesAccessed(), 11 * ((6 + 9 + 6) * 2 + innerBytes));
}

} // namespace
