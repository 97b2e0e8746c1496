//===- RopeBlockTest.cpp - Rope over blocks of the positions -------------===//
//
// The _block rope entries (ABI 31), context parallelism's: a rank holds its
// block of the sequence and turns position p of it as first_position + p.
// Each form (Llama 3.1's scaling, YaRN's, per-pair factors of a partial
// rope), forward and inverse, over blocks at their offsets gives the whole
// sequence's rows bit for bit, since each angle is computed from the
// position alone.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include <functional>

using namespace tt;

namespace {

using RopeBlockTest = RuntimeTest;

constexpr int64_t kOuter = 2, kPositions = 24, kHeads = 3, kDim = 16;

/// One rope call over `positions` positions of x from `first`.
using RopeCall = std::function<void(tessel_ctx *, int32_t, const void *, void *,
                                    int64_t, int64_t, bool)>;

/// Rows [first, first + rows) of the positions of [outer, positions, width].
std::vector<uint8_t> blockOf(const std::vector<uint8_t> &x, int64_t width,
                             int64_t first, int64_t rows) {
  std::vector<uint8_t> out;
  for (int64_t o = 0; o < kOuter; ++o)
    out.insert(out.end(), x.begin() + (o * kPositions + first) * width,
               x.begin() + (o * kPositions + first + rows) * width);
  return out;
}

void checkBlocks(tessel_ctx *ctx, const RopeCall &rope) {
  for (int32_t dtype : {TESSEL_F64, TESSEL_F32, TESSEL_BF16})
    for (bool inverse : {false, true}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + (inverse ? " inverse" : ""));
      auto x = encode(dtype, randomValues(TESSEL_F64,
                                          kOuter * kPositions * kHeads * kDim,
                                          -1, 1, 3));
      std::vector<uint8_t> whole(x.size());
      rope(ctx, dtype, x.data(), whole.data(), kPositions, 0, inverse);
      ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
      const int64_t width = kHeads * kDim * tessel_dtype_size(dtype);
      int64_t first = 0;
      for (int64_t rows : {5, 1, 10, 8}) {
        std::vector<uint8_t> xb = blockOf(x, width, first, rows), yb(xb.size());
        rope(ctx, dtype, xb.data(), yb.data(), rows, first, inverse);
        ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
        EXPECT_EQ(yb, blockOf(whole, width, first, rows))
            << "block of " << rows << " at " << first;
        first += rows;
      }
      ASSERT_EQ(first, kPositions);
    }
}

TEST_F(RopeBlockTest, Llama31ScalingBlocksEqualTheWholeSequence) {
  checkBlocks(ctx, [](tessel_ctx *c, int32_t dt, const void *x, void *y,
                      int64_t positions, int64_t first, bool inv) {
    tessel_rope_block(c, dt, x, y, kOuter, positions, kHeads, kDim, 500000.0, 0,
                      inv, 8.0, 1.0, 4.0, 8.0, first);
  });
}

TEST_F(RopeBlockTest, YarnBlocksEqualTheWholeSequence) {
  checkBlocks(ctx, [](tessel_ctx *c, int32_t dt, const void *x, void *y,
                      int64_t positions, int64_t first, bool inv) {
    tessel_rope_yarn_block(c, dt, x, y, kOuter, positions, kHeads, kDim,
                           10000.0, 1, inv, 4.0, 32.0, 1.0, 8.0, 1, first);
  });
}

TEST_F(RopeBlockTest, PartialRopeWithFactorsBlocksEqualTheWholeSequence) {
  const double factors[] = {1.0, 1.5, 2.25, 4.0, 7.5, 9.0};
  checkBlocks(ctx, [&](tessel_ctx *c, int32_t dt, const void *x, void *y,
                       int64_t positions, int64_t first, bool inv) {
    tessel_rope_factors_block(c, dt, x, y, kOuter, positions, kHeads, kDim, 12,
                              10000.0, 0, inv, factors, 1.19, first);
  });
}

// First position 0 is the entry without _block, bit for bit.
TEST_F(RopeBlockTest, FirstPositionZeroIsThePlainEntry) {
  auto x =
      encode(TESSEL_F32, randomValues(TESSEL_F64, 2 * 9 * 2 * 8, -1, 1, 5));
  std::vector<uint8_t> plain(x.size()), block(x.size());
  tessel_rope(ctx, TESSEL_F32, x.data(), plain.data(), 2, 9, 2, 8, 10000.0, 0,
              0, 0, 0, 0, 0);
  tessel_rope_block(ctx, TESSEL_F32, x.data(), block.data(), 2, 9, 2, 8,
                    10000.0, 0, 0, 0, 0, 0, 0, 0);
  ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
  EXPECT_EQ(block, plain);
}

TEST_F(RopeBlockTest, BadFirstPositionSetsError) {
  float x[8] = {0}, y[8];
  for (int64_t first : {int64_t(-1), INT64_MAX}) {
    SCOPED_TRACE(first);
    tessel_rope_block(ctx, TESSEL_F32, x, y, 1, 2, 1, 4, 10000.0, 0, 0, 0, 0, 0,
                      0, first);
    ASSERT_NE(tessel_error(ctx), nullptr);
    EXPECT_EQ(std::string(tessel_error(ctx)),
              "tessel_rope_block: first_position " + std::to_string(first) +
                  " must be >= 0 with 2 positions after it within int64");
    tessel_clear_error(ctx);
  }
}

} // namespace
