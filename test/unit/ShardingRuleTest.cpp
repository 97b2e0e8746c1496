//===- ShardingRuleTest.cpp - sharding rule of every nn op, by hand -------===//
//
// Loops, indexing maps, reduction kinds and unsplittable loops of every op,
// derived by hand from the sharding rule in its description (NNOps.td).
//
//===----------------------------------------------------------------------===//

#include "TestUtils.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

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

/// No ShardingConstraintOpInterface on the op.
constexpr const char *kNoConstraints = nullptr;

/// One op in a function with arguments `args`, and its hand-derived rule.
struct RuleCase {
  const char *name;
  const char *args;
  const char *body;
  const char *loops;
  const char *maps;
  const char *kinds;
  /// getUnsplittableLoops() as "0, 2", or kNoConstraints.
  const char *unsplittable;
};

std::string join(llvm::ArrayRef<int64_t> values) {
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::interleave(values, os, ", ");
  return text;
}

void checkRules(llvm::ArrayRef<RuleCase> cases) {
  for (const RuleCase &c : cases) {
    SCOPED_TRACE(c.name);
    test::ParsedOp parsed = test::parseFirstNNOp(c.args, c.body);
    ASSERT_TRUE(parsed.op);
    Operation *op = parsed.op;
    auto rule = dyn_cast<shard::ShardingInterface>(op);
    ASSERT_TRUE(rule) << "no ShardingInterface on " << c.name;
    SmallVector<utils::IteratorType> loops = rule.getLoopIteratorTypes();
    SmallVector<AffineMap> maps = rule.getIndexingMaps();
    SmallVector<shard::ReductionKind> kinds =
        rule.getReductionLoopIteratorKinds();
    EXPECT_EQ(test::toString(loops), c.loops);
    EXPECT_EQ(test::toString(maps), c.maps);
    EXPECT_EQ(test::toString(kinds), c.kinds);
    // Shape of the rule: one map per operand and result over all loops, one
    // kind per reduction loop.
    EXPECT_EQ(maps.size(), op->getNumOperands() + op->getNumResults());
    for (AffineMap map : maps)
      EXPECT_EQ(map.getNumDims(), loops.size());
    EXPECT_EQ(
        static_cast<size_t>(llvm::count(loops, utils::IteratorType::reduction)),
        kinds.size());
    auto constraints = dyn_cast<nn::ShardingConstraintOpInterface>(op);
    if (!c.unsplittable) {
      EXPECT_FALSE(constraints) << c.name << " should not constrain loops";
    } else {
      ASSERT_TRUE(constraints) << "no ShardingConstraintOpInterface";
      EXPECT_EQ(join(constraints.getUnsplittableLoops()), c.unsplittable);
    }
  }
}

TEST(ShardingRuleTest, ConstantAndCast) {
  checkRules({
      // Every loop splits (a split constant is rebuilt in the local shape).
      {"constant", "", "%c = nn.constant dense<1.0> : tensor<3x7xf32>",
       "parallel, parallel", "(d0, d1) -> (d0, d1)", "", ""},
      {"cast", "%x: tensor<3x1x7xi32>",
       "%y = nn.cast %x : tensor<3x1x7xi32> to tensor<3x1x7xbf16>",
       "parallel, parallel, parallel",
       "(d0, d1, d2) -> (d0, d1, d2)\n(d0, d1, d2) -> (d0, d1, d2)", "",
       kNoConstraints},
  });
}

TEST(ShardingRuleTest, Broadcast) {
  checkRules({
      // Operand dim 0 (size 1) expands to 3: it reads index 0.
      {"broadcast expanding", "%x: tensor<1x5xf16>",
       "%y = nn.broadcast %x dims = [0, 2] : tensor<1x5xf16> -> "
       "tensor<3x7x5xf16>",
       "parallel, parallel, parallel",
       "(d0, d1, d2) -> (0, d2)\n(d0, d1, d2) -> (d0, d1, d2)", "",
       kNoConstraints},
      // A size-1 dimension onto a size-1 dimension does not expand.
      {"broadcast size-1 kept", "%x: tensor<1x5xf32>",
       "%y = nn.broadcast %x dims = [0, 2] : tensor<1x5xf32> -> "
       "tensor<1x7x5xf32>",
       "parallel, parallel, parallel",
       "(d0, d1, d2) -> (d0, d2)\n(d0, d1, d2) -> (d0, d1, d2)", "",
       kNoConstraints},
      {"broadcast bias", "%x: tensor<11xf32>",
       "%y = nn.broadcast %x dims = [1] : tensor<11xf32> -> tensor<3x11xf32>",
       "parallel, parallel", "(d0, d1) -> (d1)\n(d0, d1) -> (d0, d1)", "",
       kNoConstraints},
      {"broadcast scalar", "%x: tensor<f32>",
       "%y = nn.broadcast %x dims = [] : tensor<f32> -> tensor<2x3xf32>",
       "parallel, parallel", "(d0, d1) -> ()\n(d0, d1) -> (d0, d1)", "",
       kNoConstraints},
  });
}

TEST(ShardingRuleTest, Elementwise) {
  const char *binary3 = "(d0, d1, d2) -> (d0, d1, d2)\n"
                        "(d0, d1, d2) -> (d0, d1, d2)\n"
                        "(d0, d1, d2) -> (d0, d1, d2)";
  const char *unary2 = "(d0, d1) -> (d0, d1)\n(d0, d1) -> (d0, d1)";
  const char *par3 = "parallel, parallel, parallel";
  const char *par2 = "parallel, parallel";
  const char *bin = "%a: tensor<2x1x5xf32>, %b: tensor<2x1x5xf32>";
  const char *un = "%x: tensor<7x1xbf16>";
  checkRules({
      {"add", bin, "%c = nn.add %a, %b : tensor<2x1x5xf32>", par3, binary3, "",
       kNoConstraints},
      {"sub", bin, "%c = nn.sub %a, %b : tensor<2x1x5xf32>", par3, binary3, "",
       kNoConstraints},
      {"mul", bin, "%c = nn.mul %a, %b : tensor<2x1x5xf32>", par3, binary3, "",
       kNoConstraints},
      {"div", bin, "%c = nn.div %a, %b : tensor<2x1x5xf32>", par3, binary3, "",
       kNoConstraints},
      {"neg", un, "%y = nn.neg %x : tensor<7x1xbf16>", par2, unary2, "",
       kNoConstraints},
      {"exp", un, "%y = nn.exp %x : tensor<7x1xbf16>", par2, unary2, "",
       kNoConstraints},
      {"log", un, "%y = nn.log %x : tensor<7x1xbf16>", par2, unary2, "",
       kNoConstraints},
      {"sqrt", un, "%y = nn.sqrt %x : tensor<7x1xbf16>", par2, unary2, "",
       kNoConstraints},
      {"rsqrt", un, "%y = nn.rsqrt %x : tensor<7x1xbf16>", par2, unary2, "",
       kNoConstraints},
      {"tanh", un, "%y = nn.tanh %x : tensor<7x1xbf16>", par2, unary2, "",
       kNoConstraints},
      {"sigmoid", un, "%y = nn.sigmoid %x : tensor<7x1xbf16>", par2, unary2, "",
       kNoConstraints},
      {"relu", un, "%y = nn.relu %x : tensor<7x1xbf16>", par2, unary2, "",
       kNoConstraints},
      {"gelu", un, "%y = nn.gelu %x approximate : tensor<7x1xbf16>", par2,
       unary2, "", kNoConstraints},
      {"silu", un, "%y = nn.silu %x : tensor<7x1xbf16>", par2, unary2, "",
       kNoConstraints},
      // The mask depends on the global element index, so dropout still
      // shards elementwise.
      {"dropout", un,
       "%y = nn.dropout %x rate = 0.25 seed = 3 : tensor<7x1xbf16>", par2,
       unary2, "", ""},
      {"add scalar", "%a: tensor<f32>, %b: tensor<f32>",
       "%c = nn.add %a, %b : tensor<f32>", "", "() -> ()\n() -> ()\n() -> ()",
       "", kNoConstraints},
  });
}

TEST(ShardingRuleTest, Reductions) {
  checkRules({
      {"reduce_sum", "%x: tensor<3x5x7xf32>",
       "%y = nn.reduce_sum %x dims = [1] : tensor<3x5x7xf32> -> "
       "tensor<3x7xf32>",
       "parallel, reduction, parallel",
       "(d0, d1, d2) -> (d0, d1, d2)\n(d0, d1, d2) -> (d0, d2)", "sum",
       kNoConstraints},
      // keep_dims: the reduced dimensions of the result are index 0.
      {"reduce_mean keep_dims", "%x: tensor<3x5x7xf32>",
       "%y = nn.reduce_mean %x dims = [0, 2] keep_dims : tensor<3x5x7xf32> "
       "-> tensor<1x5x1xf32>",
       "reduction, parallel, reduction",
       "(d0, d1, d2) -> (d0, d1, d2)\n(d0, d1, d2) -> (0, d1, 0)",
       "average, average", kNoConstraints},
      {"reduce_max keep_dims", "%x: tensor<7x3xi32>",
       "%y = nn.reduce_max %x dims = [1] keep_dims : tensor<7x3xi32> -> "
       "tensor<7x1xi32>",
       "parallel, reduction", "(d0, d1) -> (d0, d1)\n(d0, d1) -> (d0, 0)",
       "max", kNoConstraints},
      {"reduce_sum to scalar", "%x: tensor<2x3xf32>",
       "%y = nn.reduce_sum %x dims = [1, 0] : tensor<2x3xf32> -> tensor<f32>",
       "reduction, reduction", "(d0, d1) -> (d0, d1)\n(d0, d1) -> ()",
       "sum, sum", kNoConstraints},
      {"reduce_mean", "%x: tensor<1x5xbf16>",
       "%y = nn.reduce_mean %x dims = [0] : tensor<1x5xbf16> -> "
       "tensor<5xbf16>",
       "reduction, parallel", "(d0, d1) -> (d0, d1)\n(d0, d1) -> (d1)",
       "average", kNoConstraints},
  });
}

TEST(ShardingRuleTest, Reshape) {
  checkRules({
      // Groups {8}, {12}, {64 <-> 4, 16}: loops d0, d1 and the finer side
      // d2, d3; the input reads d2·16 + d3. Leading d2 splits, d3 not.
      {"reshape split", "%x: tensor<8x12x64xf32>",
       "%y = nn.reshape %x : tensor<8x12x64xf32> -> tensor<8x12x4x16xf32>",
       "parallel, parallel, parallel, parallel",
       "(d0, d1, d2, d3) -> (d0, d1, d2 * 16 + d3)\n"
       "(d0, d1, d2, d3) -> (d0, d1, d2, d3)",
       "", "3"},
      // The merge is the same nest read the other way round.
      {"reshape merge", "%x: tensor<8x12x4x16xf32>",
       "%y = nn.reshape %x : tensor<8x12x4x16xf32> -> tensor<8x12x64xf32>",
       "parallel, parallel, parallel, parallel",
       "(d0, d1, d2, d3) -> (d0, d1, d2, d3)\n"
       "(d0, d1, d2, d3) -> (d0, d1, d2 * 16 + d3)",
       "", "3"},
      // 6x4 -> 4x6 is one many-to-many group: loops are the result's, the
      // input delinearises l = d0·6 + d1 as (l floordiv 4, l mod 4); the
      // floordiv is below 6 so its mod 6 may be folded away or kept.
      {"reshape many-to-many", "%x: tensor<6x4xf32>",
       "%y = nn.reshape %x : tensor<6x4xf32> -> tensor<4x6xf32>",
       "parallel, parallel",
       "(d0, d1) -> (((d0 * 6 + d1) floordiv 4) mod 6, (d0 * 6 + d1) mod 4)\n"
       "(d0, d1) -> (d0, d1)",
       "", "0, 1"},
      // Size-1 dimensions: {1, 8} <-> {8} reads d0·8 + d1 with d0 of size 1,
      // and the trailing {1} <-> {} adds loop d2. No loop of size > 1 other
      // than a leading one: everything splits.
      {"reshape size-1 dims", "%x: tensor<1x8x1xbf16>",
       "%y = nn.reshape %x : tensor<1x8x1xbf16> -> tensor<8xbf16>",
       "parallel, parallel, parallel",
       "(d0, d1, d2) -> (d0, d1, d2)\n(d0, d1, d2) -> (d0 * 8 + d1)", "", ""},
      // Unit dimension inserted: [8] -> [8, 1].
      {"reshape add unit dim", "%x: tensor<8xi64>",
       "%y = nn.reshape %x : tensor<8xi64> -> tensor<8x1xi64>",
       "parallel, parallel", "(d0, d1) -> (d0)\n(d0, d1) -> (d0, d1)", "", ""},
      // A size-1 dimension inside a split group: 30 -> 2x1x15 reads
      // (d0·1 + d1)·15 + d2; leading d0 splits, d1 is unit, d2 stays whole.
      {"reshape split with unit", "%x: tensor<30xf32>",
       "%y = nn.reshape %x : tensor<30xf32> -> tensor<2x1x15xf32>",
       "parallel, parallel, parallel",
       "(d0, d1, d2) -> ((d0 + d1) * 15 + d2)\n"
       "(d0, d1, d2) -> (d0, d1, d2)",
       "", "2"},
  });
}

TEST(ShardingRuleTest, TransposeSliceConcat) {
  checkRules({
      // Loops are the operand's dimensions; result dimension i reads loop
      // perm[i].
      {"transpose", "%x: tensor<3x5x7xbf16>",
       "%y = nn.transpose %x perm = [2, 0, 1] : tensor<3x5x7xbf16> -> "
       "tensor<7x3x5xbf16>",
       "parallel, parallel, parallel",
       "(d0, d1, d2) -> (d0, d1, d2)\n(d0, d1, d2) -> (d2, d0, d1)", "",
       kNoConstraints},
      // Result element d reads d·stride + start; the sliced dimension 0
      // stays whole, the untouched dimension 1 splits.
      {"slice strided", "%x: tensor<7x11xf32>",
       "%y = nn.slice %x start = [1, 0] limit = [7, 11] strides = [2, 1] : "
       "tensor<7x11xf32> -> tensor<3x11xf32>",
       "parallel, parallel",
       "(d0, d1) -> (d0 * 2 + 1, d1)\n(d0, d1) -> (d0, d1)", "", "0"},
      {"slice offset", "%x: tensor<8x6xi32>",
       "%y = nn.slice %x start = [0, 2] limit = [8, 5] : tensor<8x6xi32> -> "
       "tensor<8x3xi32>",
       "parallel, parallel", "(d0, d1) -> (d0, d1 + 2)\n(d0, d1) -> (d0, d1)",
       "", "1"},
      // A stride alone (start 0, limit = size) still slices.
      {"slice stride only", "%x: tensor<6x5xf32>",
       "%y = nn.slice %x start = [0, 0] limit = [6, 5] strides = [1, 3] : "
       "tensor<6x5xf32> -> tensor<6x2xf32>",
       "parallel, parallel", "(d0, d1) -> (d0, d1 * 3)\n(d0, d1) -> (d0, d1)",
       "", "1"},
      // Input i reads d - (sizes of the inputs before it) along dim.
      {"concat",
       "%a: tensor<4x2xf16>, %b: tensor<4x3xf16>, %c: tensor<4x5xf16>",
       "%y = nn.concat %a, %b, %c dim = 1 : (tensor<4x2xf16>, "
       "tensor<4x3xf16>, tensor<4x5xf16>) -> tensor<4x10xf16>",
       "parallel, parallel",
       "(d0, d1) -> (d0, d1)\n(d0, d1) -> (d0, d1 - 2)\n"
       "(d0, d1) -> (d0, d1 - 5)\n(d0, d1) -> (d0, d1)",
       "", "1"},
      {"concat dim 0", "%a: tensor<1x3xi64>, %b: tensor<2x3xi64>",
       "%y = nn.concat %a, %b dim = 0 : (tensor<1x3xi64>, tensor<2x3xi64>) "
       "-> tensor<3x3xi64>",
       "parallel, parallel",
       "(d0, d1) -> (d0, d1)\n(d0, d1) -> (d0 - 1, d1)\n(d0, d1) -> (d0, d1)",
       "", "0"},
  });
}

TEST(ShardingRuleTest, MatmulAndEmbedding) {
  checkRules({
      // Loops b0, b1, m, n, k; the shared [K, N] rhs has no batch loops.
      {"matmul shared rhs", "%a: tensor<2x3x5x7xf32>, %b: tensor<7x11xf32>",
       "%c = nn.matmul %a, %b : (tensor<2x3x5x7xf32>, tensor<7x11xf32>) -> "
       "tensor<2x3x5x11xf32>",
       "parallel, parallel, parallel, parallel, reduction",
       "(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)\n"
       "(d0, d1, d2, d3, d4) -> (d4, d3)\n"
       "(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)",
       "sum", kNoConstraints},
      // Loops b, m, n, k; lhs [b, K, M], rhs [b, N, K].
      {"matmul transposes", "%a: tensor<3x7x5xbf16>, %b: tensor<3x11x7xbf16>",
       "%c = nn.matmul %a, %b transpose_lhs transpose_rhs : "
       "(tensor<3x7x5xbf16>, tensor<3x11x7xbf16>) -> tensor<3x5x11xbf16>",
       "parallel, parallel, parallel, reduction",
       "(d0, d1, d2, d3) -> (d0, d3, d1)\n(d0, d1, d2, d3) -> (d0, d2, d3)\n"
       "(d0, d1, d2, d3) -> (d0, d1, d2)",
       "sum", kNoConstraints},
      // Shared rhs [N, K].
      {"matmul shared transposed rhs",
       "%a: tensor<4x3x5xf16>, %b: tensor<7x5xf16>",
       "%c = nn.matmul %a, %b transpose_rhs : (tensor<4x3x5xf16>, "
       "tensor<7x5xf16>) -> tensor<4x3x7xf16>",
       "parallel, parallel, parallel, reduction",
       "(d0, d1, d2, d3) -> (d0, d1, d3)\n(d0, d1, d2, d3) -> (d2, d3)\n"
       "(d0, d1, d2, d3) -> (d0, d1, d2)",
       "sum", kNoConstraints},
      // A summed batch: loops b0, b1, m, n, k with b0, b1 and k sums; lhs
      // [b0, b1, K, M], rhs [b0, b1, K, N], the result [M, N].
      {"matmul sum_batch", "%a: tensor<2x3x7x5xf32>, %b: tensor<2x3x7x11xf32>",
       "%c = nn.matmul %a, %b transpose_lhs sum_batch : "
       "(tensor<2x3x7x5xf32>, tensor<2x3x7x11xf32>) -> tensor<5x11xf32>",
       "reduction, reduction, parallel, parallel, reduction",
       "(d0, d1, d2, d3, d4) -> (d0, d1, d4, d2)\n"
       "(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)\n"
       "(d0, d1, d2, d3, d4) -> (d2, d3)",
       "sum, sum, sum", kNoConstraints},
      // Only lhs transposed, 2-d: lhs [K, M].
      {"matmul transpose_lhs 2d", "%a: tensor<5x1xf32>, %b: tensor<5x3xf32>",
       "%c = nn.matmul %a, %b transpose_lhs : (tensor<5x1xf32>, "
       "tensor<5x3xf32>) -> tensor<1x3xf32>",
       "parallel, parallel, reduction",
       "(d0, d1, d2) -> (d2, d0)\n(d0, d1, d2) -> (d2, d1)\n"
       "(d0, d1, d2) -> (d0, d1)",
       "sum", kNoConstraints},
      // Loops i0, i1 (ids), h, v; table [V, H] reads (v, h); v is the
      // one-hot sum.
      {"embedding", "%t: tensor<11x5xf32>, %ids: tensor<3x7xi32>",
       "%e = nn.embedding %t, %ids : (tensor<11x5xf32>, tensor<3x7xi32>) -> "
       "tensor<3x7x5xf32>",
       "parallel, parallel, parallel, reduction",
       "(d0, d1, d2, d3) -> (d3, d2)\n(d0, d1, d2, d3) -> (d0, d1)\n"
       "(d0, d1, d2, d3) -> (d0, d1, d2)",
       "sum", ""},
      {"embedding 1-d ids", "%t: tensor<13x3xbf16>, %ids: tensor<7xi64>",
       "%e = nn.embedding %t, %ids : (tensor<13x3xbf16>, tensor<7xi64>) -> "
       "tensor<7x3xbf16>",
       "parallel, parallel, reduction",
       "(d0, d1, d2) -> (d2, d1)\n(d0, d1, d2) -> (d0)\n"
       "(d0, d1, d2) -> (d0, d1)",
       "sum", ""},
  });
}

TEST(ShardingRuleTest, Attention) {
  const char *loops =
      "parallel, parallel, parallel, reduction, reduction, parallel";
  checkRules({
      // Loops b, s, h, t, d, e; H = 4 query heads over Hkv = 2: key/value
      // head h floordiv 2. T and D are reductions and stay whole.
      {"attention gqa",
       "%q: tensor<2x3x4x5xf32>, %k: tensor<2x7x2x5xf32>, "
       "%v: tensor<2x7x2x11xf32>",
       "%o = nn.attention %q, %k, %v : (tensor<2x3x4x5xf32>, "
       "tensor<2x7x2x5xf32>, tensor<2x7x2x11xf32>) -> tensor<2x3x4x11xf32>",
       loops,
       "(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d4)\n"
       "(d0, d1, d2, d3, d4, d5) -> (d0, d3, d2 floordiv 2, d4)\n"
       "(d0, d1, d2, d3, d4, d5) -> (d0, d3, d2 floordiv 2, d5)\n"
       "(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d5)",
       "generic, generic", "3, 4"},
      // Multi-query: Hkv = 1, every head reads kv head h floordiv 3 = 0.
      {"attention mqa",
       "%q: tensor<1x5x3x2xbf16>, %k: tensor<1x5x1x2xbf16>, "
       "%v: tensor<1x5x1x2xbf16>",
       "%o = nn.attention %q, %k, %v causal : (tensor<1x5x3x2xbf16>, "
       "tensor<1x5x1x2xbf16>, tensor<1x5x1x2xbf16>) -> tensor<1x5x3x2xbf16>",
       loops,
       "(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d4)\n"
       "(d0, d1, d2, d3, d4, d5) -> (d0, d3, d2 floordiv 3, d4)\n"
       "(d0, d1, d2, d3, d4, d5) -> (d0, d3, d2 floordiv 3, d5)\n"
       "(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d5)",
       "generic, generic", "3, 4"},
      // Multi-head: Hkv = H, kv head is h.
      {"attention mha",
       "%q: tensor<2x3x4x5xf16>, %k: tensor<2x7x4x5xf16>, "
       "%v: tensor<2x7x4x5xf16>",
       "%o = nn.attention %q, %k, %v : (tensor<2x3x4x5xf16>, "
       "tensor<2x7x4x5xf16>, tensor<2x7x4x5xf16>) -> tensor<2x3x4x5xf16>",
       loops,
       "(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d4)\n"
       "(d0, d1, d2, d3, d4, d5) -> (d0, d3, d2, d4)\n"
       "(d0, d1, d2, d3, d4, d5) -> (d0, d3, d2, d5)\n"
       "(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d5)",
       "generic, generic", "3, 4"},
      // With its log-sum-exp: [B, H, S], the rows of the result.
      {"attention lse",
       "%q: tensor<2x3x4x5xbf16>, %k: tensor<2x7x2x5xbf16>, "
       "%v: tensor<2x7x2x11xbf16>",
       "%o, %lse = nn.attention %q, %k, %v lse : (tensor<2x3x4x5xbf16>, "
       "tensor<2x7x2x5xbf16>, tensor<2x7x2x11xbf16>) -> "
       "(tensor<2x3x4x11xbf16>, tensor<2x4x3xf32>)",
       loops,
       "(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d4)\n"
       "(d0, d1, d2, d3, d4, d5) -> (d0, d3, d2 floordiv 2, d4)\n"
       "(d0, d1, d2, d3, d4, d5) -> (d0, d3, d2 floordiv 2, d5)\n"
       "(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d5)\n"
       "(d0, d1, d2, d3, d4, d5) -> (d0, d2, d1)",
       "generic, generic", "3, 4"},
  });
}

TEST(ShardingRuleTest, Rope) {
  checkRules({
      // Every loop parallel and read in place; the rotated pairs'
      // dimension stays whole (a block of the positions is told its first,
      // block_axes).
      {"rope", "%x: tensor<2x3x8x4x6xbf16>",
       "%y = nn.rope %x interleaved : tensor<2x3x8x4x6xbf16>",
       "parallel, parallel, parallel, parallel, parallel",
       "(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)\n"
       "(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)",
       "", "4"},
  });
}

TEST(ShardingRuleTest, Normalisations) {
  const char *identity3 = "(d0, d1, d2) -> (d0, d1, d2)";
  const char *par3 = "parallel, parallel, parallel";
  std::string softmaxMaps = std::string(identity3) + "\n" + identity3;
  std::string layerNormMaps = std::string(identity3) +
                              "\n(d0, d1, d2) -> (d2)\n(d0, d1, d2) -> (d2)\n" +
                              identity3;
  std::string batchNormMaps = std::string(identity3) +
                              "\n(d0, d1, d2) -> (d1)\n(d0, d1, d2) -> (d1)\n" +
                              identity3;
  std::string batchNormDim2Maps =
      std::string(identity3) +
      "\n(d0, d1, d2) -> (d2)\n(d0, d1, d2) -> (d2)\n" + identity3;
  checkRules({
      // The softmax dimension stays whole: default last, 0, and -2 from the
      // end.
      {"softmax default", "%x: tensor<2x3x5xf32>",
       "%y = nn.softmax %x : tensor<2x3x5xf32>", par3, softmaxMaps.c_str(), "",
       "2"},
      {"softmax dim 0", "%x: tensor<2x3x5xf32>",
       "%y = nn.softmax %x {dim = 0 : i64} : tensor<2x3x5xf32>", par3,
       softmaxMaps.c_str(), "", "0"},
      {"softmax dim -2", "%x: tensor<2x3x5xbf16>",
       "%y = nn.softmax %x {dim = -2 : i64} : tensor<2x3x5xbf16>", par3,
       softmaxMaps.c_str(), "", "1"},
      // gamma and beta read the last loop, which stays whole.
      {"layer_norm",
       "%x: tensor<3x5x7xf16>, %g: tensor<7xf16>, %b: tensor<7xf16>",
       "%y = nn.layer_norm %x, %g, %b : (tensor<3x5x7xf16>, tensor<7xf16>, "
       "tensor<7xf16>) -> tensor<3x5x7xf16>",
       par3, layerNormMaps.c_str(), "", "2"},
      {"rms_norm", "%x: tensor<3x11xbf16>, %g: tensor<11xbf16>",
       "%y = nn.rms_norm %x, %g : (tensor<3x11xbf16>, tensor<11xbf16>) -> "
       "tensor<3x11xbf16>",
       "parallel, parallel",
       "(d0, d1) -> (d0, d1)\n(d0, d1) -> (d1)\n(d0, d1) -> (d0, d1)", "", "1"},
      // batch_norm: gamma/beta read the feature loop; every loop can split
      // (a split statistics loop is SyncBatchNorm, SyncBatchNorm.cpp).
      {"batch_norm",
       "%x: tensor<5x3x7xf32>, %g: tensor<3xf32>, "
       "%b: tensor<3xf32>",
       "%y = nn.batch_norm %x, %g, %b : (tensor<5x3x7xf32>, tensor<3xf32>, "
       "tensor<3xf32>) -> tensor<5x3x7xf32>",
       par3, batchNormMaps.c_str(), "", ""},
      {"batch_norm feature_dim 2",
       "%x: tensor<5x3x7xf32>, %g: tensor<7xf32>, %b: tensor<7xf32>",
       "%y = nn.batch_norm %x, %g, %b {feature_dim = 2 : i64} : "
       "(tensor<5x3x7xf32>, tensor<7xf32>, tensor<7xf32>) -> "
       "tensor<5x3x7xf32>",
       par3, batchNormDim2Maps.c_str(), "", ""},
      {"batch_norm feature_dim 0",
       "%x: tensor<6x4xf32>, %g: tensor<6xf32>, %b: tensor<6xf32>",
       "%y = nn.batch_norm %x, %g, %b {feature_dim = 0 : i64} : "
       "(tensor<6x4xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<6x4xf32>",
       "parallel, parallel",
       "(d0, d1) -> (d0, d1)\n(d0, d1) -> (d0)\n(d0, d1) -> (d0)\n"
       "(d0, d1) -> (d0, d1)",
       "", ""},
  });
}

TEST(ShardingRuleTest, CrossEntropy) {
  checkRules({
      // Loops: positions d0, d1, then classes d2. With mean the positions
      // are average reductions into a scalar; the classes a generic
      // log-sum-exp, split by the vocabulary-parallel strategy.
      {"cross_entropy mean", "%l: tensor<3x5x11xf32>, %y: tensor<3x5xi32>",
       "%c = nn.cross_entropy %l, %y : (tensor<3x5x11xf32>, tensor<3x5xi32>) "
       "-> tensor<f32>",
       "reduction, reduction, reduction",
       "(d0, d1, d2) -> (d0, d1, d2)\n(d0, d1, d2) -> (d0, d1)\n"
       "(d0, d1, d2) -> ()",
       "average, average, generic", ""},
      {"cross_entropy sum", "%l: tensor<3x5x11xf32>, %y: tensor<3x5xi64>",
       "%c = nn.cross_entropy %l, %y {reduction = #nn.reduction<sum>} : "
       "(tensor<3x5x11xf32>, tensor<3x5xi64>) -> tensor<f32>",
       "reduction, reduction, reduction",
       "(d0, d1, d2) -> (d0, d1, d2)\n(d0, d1, d2) -> (d0, d1)\n"
       "(d0, d1, d2) -> ()",
       "sum, sum, generic", ""},
      // none keeps the positions parallel.
      {"cross_entropy none", "%l: tensor<7x13xbf16>, %y: tensor<7xi32>",
       "%c = nn.cross_entropy %l, %y {reduction = #nn.reduction<none>} : "
       "(tensor<7x13xbf16>, tensor<7xi32>) -> tensor<7xbf16>",
       "parallel, reduction",
       "(d0, d1) -> (d0, d1)\n(d0, d1) -> (d0)\n(d0, d1) -> (d0)", "generic",
       ""},
      // The vocabulary-parallel pieces: the label's logit sums over the
      // classes (one-hot view), the subtraction at the label is parallel.
      {"label_logit", "%l: tensor<7x13xf32>, %y: tensor<7xi64>",
       "%p = nn.label_logit %l, %y : (tensor<7x13xf32>, tensor<7xi64>) -> "
       "tensor<7xf32>",
       "parallel, reduction",
       "(d0, d1) -> (d0, d1)\n(d0, d1) -> (d0)\n(d0, d1) -> (d0)", "sum",
       ""},
      {"sub_label", "%l: tensor<7x13xf32>, %y: tensor<7xi32>, %g: tensor<7xf32>",
       "%d = nn.sub_label %l, %y, %g : (tensor<7x13xf32>, tensor<7xi32>, "
       "tensor<7xf32>) -> tensor<7x13xf32>",
       "parallel, parallel",
       "(d0, d1) -> (d0, d1)\n(d0, d1) -> (d0)\n(d0, d1) -> (d0)\n"
       "(d0, d1) -> (d0, d1)",
       "", ""},
      // A single position: only the class loop.
      {"cross_entropy one position", "%l: tensor<13xf16>, %y: tensor<i32>",
       "%c = nn.cross_entropy %l, %y : (tensor<13xf16>, tensor<i32>) -> "
       "tensor<f16>",
       "reduction", "(d0) -> (d0)\n(d0) -> ()\n(d0) -> ()", "generic", ""},
  });
}

TEST(ShardingRuleTest, BackwardOps) {
  const char *binary2 = "(d0, d1) -> (d0, d1)\n(d0, d1) -> (d0, d1)\n"
                        "(d0, d1) -> (d0, d1)";
  const char *par2 = "parallel, parallel";
  const char *par3 = "parallel, parallel, parallel";
  const char *bin = "%x: tensor<7x3xbf16>, %dy: tensor<7x3xbf16>";
  const char *identity3 = "(d0, d1, d2) -> (d0, d1, d2)";
  std::string softmaxMaps =
      std::string(identity3) + "\n" + identity3 + "\n" + identity3;
  // x, gamma, dy, then dx, dgamma, dbeta.
  std::string layerNormMaps =
      std::string(identity3) + "\n(d0, d1, d2) -> (d2)\n" + identity3 + "\n" +
      identity3 + "\n(d0, d1, d2) -> (d2)\n(d0, d1, d2) -> (d2)";
  std::string batchNormMaps =
      std::string(identity3) + "\n(d0, d1, d2) -> (d1)\n" + identity3 + "\n" +
      identity3 + "\n(d0, d1, d2) -> (d1)\n(d0, d1, d2) -> (d1)";
  checkRules({
      {"gelu_grad", bin,
       "%y = nn.gelu_grad %x, %dy approximate : tensor<7x3xbf16>", par2,
       binary2, "", kNoConstraints},
      {"silu_grad", bin, "%y = nn.silu_grad %x, %dy : tensor<7x3xbf16>", par2,
       binary2, "", kNoConstraints},
      {"relu_grad", bin, "%y = nn.relu_grad %x, %dy : tensor<7x3xbf16>", par2,
       binary2, "", kNoConstraints},
      {"equal", "%a: tensor<7x3xi64>, %b: tensor<7x3xi64>",
       "%y = nn.equal %a, %b : tensor<7x3xi64>", par2, binary2, "",
       kNoConstraints},
      // The softmax dimension stays whole, as the forward's.
      {"softmax_grad default", "%y: tensor<2x3x5xf32>, %dy: tensor<2x3x5xf32>",
       "%d = nn.softmax_grad %y, %dy : tensor<2x3x5xf32>", par3,
       softmaxMaps.c_str(), "", "2"},
      {"softmax_grad dim 0", "%y: tensor<2x3x5xf32>, %dy: tensor<2x3x5xf32>",
       "%d = nn.softmax_grad %y, %dy {dim = 0 : i64} : tensor<2x3x5xf32>", par3,
       softmaxMaps.c_str(), "", "0"},
      // The forward's loops; the rows are sum reductions for dgamma and
      // dbeta, the normalised dimension stays whole.
      {"layer_norm_grad",
       "%x: tensor<3x5x7xf16>, %g: tensor<7xf16>, %dy: tensor<3x5x7xf16>",
       "%dx, %dg, %db = nn.layer_norm_grad %x, %g, %dy : (tensor<3x5x7xf16>, "
       "tensor<7xf16>, tensor<3x5x7xf16>) -> (tensor<3x5x7xf16>, "
       "tensor<7xf16>, tensor<7xf16>)",
       "reduction, reduction, parallel", layerNormMaps.c_str(), "sum, sum",
       "2"},
      {"rms_norm_grad",
       "%x: tensor<3x11xbf16>, %g: tensor<11xbf16>, %dy: tensor<3x11xbf16>",
       "%dx, %dg = nn.rms_norm_grad %x, %g, %dy : (tensor<3x11xbf16>, "
       "tensor<11xbf16>, tensor<3x11xbf16>) -> (tensor<3x11xbf16>, "
       "tensor<11xbf16>)",
       "reduction, parallel",
       "(d0, d1) -> (d0, d1)\n(d0, d1) -> (d1)\n(d0, d1) -> (d0, d1)\n"
       "(d0, d1) -> (d0, d1)\n(d0, d1) -> (d1)",
       "sum", "1"},
      // The statistics loops are sum reductions (SyncBatchNorm completes
      // them itself).
      {"batch_norm_grad",
       "%x: tensor<5x3x7xf32>, %g: tensor<3xf32>, %dy: tensor<5x3x7xf32>",
       "%dx, %dg, %db = nn.batch_norm_grad %x, %g, %dy : (tensor<5x3x7xf32>, "
       "tensor<3xf32>, tensor<5x3x7xf32>) -> (tensor<5x3x7xf32>, "
       "tensor<3xf32>, tensor<3xf32>)",
       "reduction, parallel, reduction", batchNormMaps.c_str(), "sum, sum",
       ""},
      // Every row's gradient is its own: the positions are parallel (mean
      // reads the scalar dloss); split classes take the vocabulary-parallel
      // strategy.
      {"cross_entropy_grad mean",
       "%l: tensor<3x5x11xf32>, %y: tensor<3x5xi32>, %d: tensor<f32>",
       "%g = nn.cross_entropy_grad %l, %y, %d : (tensor<3x5x11xf32>, "
       "tensor<3x5xi32>, tensor<f32>) -> tensor<3x5x11xf32>",
       par3,
       "(d0, d1, d2) -> (d0, d1, d2)\n(d0, d1, d2) -> (d0, d1)\n"
       "(d0, d1, d2) -> ()\n(d0, d1, d2) -> (d0, d1, d2)",
       "", ""},
      {"cross_entropy_grad none",
       "%l: tensor<7x13xbf16>, %y: tensor<7xi32>, %d: tensor<7xbf16>",
       "%g = nn.cross_entropy_grad %l, %y, %d {reduction = "
       "#nn.reduction<none>} : (tensor<7x13xbf16>, tensor<7xi32>, "
       "tensor<7xbf16>) -> tensor<7x13xbf16>",
       par2,
       "(d0, d1) -> (d0, d1)\n(d0, d1) -> (d0)\n(d0, d1) -> (d0)\n"
       "(d0, d1) -> (d0, d1)",
       "", ""},
      // Loops i0, i1 (ids, sum reductions), h, v (a rank's block of rows).
      {"embedding_grad", "%ids: tensor<3x7xi32>, %d: tensor<3x7x5xf32>",
       "%t = nn.embedding_grad %ids, %d : (tensor<3x7xi32>, "
       "tensor<3x7x5xf32>) -> tensor<11x5xf32>",
       "reduction, reduction, parallel, parallel",
       "(d0, d1, d2, d3) -> (d0, d1)\n(d0, d1, d2, d3) -> (d0, d1, d2)\n"
       "(d0, d1, d2, d3) -> (d3, d2)",
       "sum, sum", ""},
      // The forward's loops b, s, h, t, d, e; out and dout read as the
      // result, lse [B, H, S] as its rows, dq, dk, dv as q, k, v. Batch and
      // heads split; the queries s split as a sum (dk and dv's), whose
      // indexed dq is the block's rows.
      {"attention_grad gqa",
       "%q: tensor<2x3x4x5xf32>, %k: tensor<2x7x2x5xf32>, "
       "%v: tensor<2x7x2x11xf32>, %o: tensor<2x3x4x11xf32>, "
       "%lse: tensor<2x4x3xf32>, %do: tensor<2x3x4x11xf32>",
       "%dq, %dk, %dv = nn.attention_grad %q, %k, %v, %o, %lse, %do : "
       "(tensor<2x3x4x5xf32>, tensor<2x7x2x5xf32>, tensor<2x7x2x11xf32>, "
       "tensor<2x3x4x11xf32>, tensor<2x4x3xf32>, tensor<2x3x4x11xf32>) -> "
       "(tensor<2x3x4x5xf32>, tensor<2x7x2x5xf32>, tensor<2x7x2x11xf32>)",
       "parallel, reduction, parallel, reduction, reduction, parallel",
       "(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d4)\n"
       "(d0, d1, d2, d3, d4, d5) -> (d0, d3, d2 floordiv 2, d4)\n"
       "(d0, d1, d2, d3, d4, d5) -> (d0, d3, d2 floordiv 2, d5)\n"
       "(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d5)\n"
       "(d0, d1, d2, d3, d4, d5) -> (d0, d2, d1)\n"
       "(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d5)\n"
       "(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d4)\n"
       "(d0, d1, d2, d3, d4, d5) -> (d0, d3, d2 floordiv 2, d4)\n"
       "(d0, d1, d2, d3, d4, d5) -> (d0, d3, d2 floordiv 2, d5)",
       "sum, generic, generic", "3, 4, 5"},
      // Loops are dy's; dx element d·stride + start. The sliced dimension 0
      // stays whole.
      {"slice_grad strided", "%d: tensor<3x11xf32>",
       "%x = nn.slice_grad %d start = [1, 0] limit = [7, 11] strides = [2, 1] "
       ": tensor<3x11xf32> -> tensor<7x11xf32>",
       par2, "(d0, d1) -> (d0, d1)\n(d0, d1) -> (d0 * 2 + 1, d1)", "", "0"},
  });
}

TEST(ShardingRuleTest, TrainingOps) {
  const char *identity2 = "(d0, d1) -> (d0, d1)";
  std::string adamMaps = std::string(identity2) + "\n(d0, d1) -> ()";
  for (int i = 0; i < 6; ++i)
    adamMaps += std::string("\n") + identity2;
  checkRules({
      // The inputs' dimensions one after the other, all sum reductions.
      {"sum_squares", "%a: tensor<8x16xf32>, %b: tensor<16xbf16>",
       "%s = nn.sum_squares %a, %b : (tensor<8x16xf32>, tensor<16xbf16>) -> "
       "tensor<f32>",
       "reduction, reduction, reduction",
       "(d0, d1, d2) -> (d0, d1)\n(d0, d1, d2) -> (d2)\n(d0, d1, d2) -> ()",
       "sum, sum, sum", kNoConstraints},
      {"clip_scale", "%ss: tensor<f32>, %gs: tensor<f32>",
       "%s = nn.clip_scale %ss, %gs : tensor<f32>", "",
       "() -> ()\n() -> ()\n() -> ()", "", kNoConstraints},
      // grad, the scalar scale, the three inits and the three results.
      {"optimizer_step adamw",
       "%p: tensor<8x16xf32>, %g: tensor<8x16xf32>, %s: tensor<f32>, "
       "%m: tensor<8x16xf32>, %v: tensor<8x16xf32>",
       "%p2, %m2, %v2 = nn.optimizer_step adamw %g, %s outs(%p, %m, %v : "
       "tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) : "
       "tensor<8x16xf32>",
       "parallel, parallel", adamMaps.c_str(), "", kNoConstraints},
      {"accumulate", "%g: tensor<8x16xf32>, %acc: tensor<8x16xf32>",
       "%a = nn.accumulate %g outs(%acc) : tensor<8x16xf32>",
       "parallel, parallel",
       "(d0, d1) -> (d0, d1)\n(d0, d1) -> (d0, d1)\n(d0, d1) -> (d0, d1)", "",
       kNoConstraints},
  });
}

// nn.repeat has no upstream ShardingInterface on purpose: its rule is the
// layer body's, and propagation and partitioning look inside the layer
// function instead of treating the repeat as one op.
TEST(ShardingRuleTest, RepeatHasNoRuleOfItsOwn) {
  auto ctx = test::makeContext();
  auto module = test::parse(*ctx, R"mlir(
    func.func private @block(%h: tensor<3x5xf32>, %w: tensor<5x5xf32>) -> tensor<3x5xf32> {
      %y = nn.matmul %h, %w : (tensor<3x5xf32>, tensor<5x5xf32>) -> tensor<3x5xf32>
      return %y : tensor<3x5xf32>
    }
    func.func @f(%h: tensor<3x5xf32>, %w: tensor<7x5x5xf32>) -> tensor<3x5xf32> {
      %out = nn.repeat @block(%h) params(%w) : (tensor<3x5xf32>, tensor<7x5x5xf32>) -> tensor<3x5xf32>
      return %out : tensor<3x5xf32>
    })mlir");
  ASSERT_TRUE(module);
  Operation *repeat = test::firstOp<nn::RepeatOp>(*module).getOperation();
  ASSERT_TRUE(repeat);
  EXPECT_FALSE(isa<shard::ShardingInterface>(repeat));
  EXPECT_FALSE(isa<nn::ShardingConstraintOpInterface>(repeat));
  // The body op carries the rule.
  EXPECT_TRUE(isa<shard::ShardingInterface>(
      test::firstOp<nn::MatmulOp>(*module).getOperation()));
}

TEST(ShardingRuleTest, DataMovementEdgeCases) {
  checkRules({
      // A size-1 operand dimension expanding to 3 reads index 0.
      {"broadcast 1 -> 3 in a new position", "%x: tensor<1xf32>",
       "%y = nn.broadcast %x dims = [0] : tensor<1xf32> -> tensor<3x4xf32>",
       "parallel, parallel", "(d0, d1) -> (0)\n(d0, d1) -> (d0, d1)", "",
       kNoConstraints},
      // Scalar to [1, 1]: two unit groups on the result side.
      {"reshape scalar to units", "%x: tensor<f32>",
       "%y = nn.reshape %x : tensor<f32> -> tensor<1x1xf32>",
       "parallel, parallel", "(d0, d1) -> ()\n(d0, d1) -> (d0, d1)", "", ""},
      {"reshape units to scalar", "%x: tensor<1x1xf32>",
       "%y = nn.reshape %x : tensor<1x1xf32> -> tensor<f32>",
       "parallel, parallel", "(d0, d1) -> (d0, d1)\n(d0, d1) -> ()", "", ""},
      // [2, 3] -> [3, 2] is many-to-many like 6x4 -> 4x6.
      {"reshape 2x3 -> 3x2", "%x: tensor<2x3xi32>",
       "%y = nn.reshape %x : tensor<2x3xi32> -> tensor<3x2xi32>",
       "parallel, parallel",
       "(d0, d1) -> (((d0 * 2 + d1) floordiv 3) mod 2, (d0 * 2 + d1) mod 3)\n"
       "(d0, d1) -> (d0, d1)",
       "", "0, 1"},
      // A limit below the size slices even with start 0 and stride 1.
      {"slice prefix", "%x: tensor<8x6xf32>",
       "%y = nn.slice %x start = [0, 0] limit = [5, 6] : tensor<8x6xf32> -> "
       "tensor<5x6xf32>",
       "parallel, parallel", "(d0, d1) -> (d0, d1)\n(d0, d1) -> (d0, d1)", "",
       "0"},
      // A size-1 dimension taken whole is not sliced.
      {"slice with unit dim", "%x: tensor<1x5xbf16>",
       "%y = nn.slice %x start = [0, 1] limit = [1, 4] : tensor<1x5xbf16> -> "
       "tensor<1x3xbf16>",
       "parallel, parallel", "(d0, d1) -> (d0, d1 + 1)\n(d0, d1) -> (d0, d1)",
       "", "1"},
      // Transposing a 3-d tensor with perm [1, 2, 0].
      {"transpose 120", "%x: tensor<2x3x5xf32>",
       "%y = nn.transpose %x perm = [1, 2, 0] : tensor<2x3x5xf32> -> "
       "tensor<3x5x2xf32>",
       "parallel, parallel, parallel",
       "(d0, d1, d2) -> (d0, d1, d2)\n(d0, d1, d2) -> (d1, d2, d0)", "",
       kNoConstraints},
  });
}

} // namespace
