//===- AttentionBlockTest.cpp - Attention over blocks of the queries -----===//
//
// tessel_attention_block and its gradient (ABI 31), context parallelism's
// kernels: a rank holds its block of the sequence's queries and every key.
// Split into blocks at their offsets, causal attention (with a window and
// a soft cap) gives each block the whole sequence's rows of out, lse and
// dq, and the blocks' dk and dv sum to the whole sequence's.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include <numeric>

using namespace tt;

namespace {

using AttentionBlockTest = RuntimeTest;

/// The shape of the whole sequence's attention and its mask.
struct Shape {
  int64_t b, s, h, hkv, d, e;
  int64_t window = 0;
  double softcap = 0;
};

/// Rows [first, first + rows) of dimension 1 of a [B, S, width] tensor (lse
/// [B·H, S] as [B·H, S, 1]).
template <class T>
std::vector<T> rowsOf(const std::vector<T> &x, int64_t b, int64_t s,
                      int64_t width, int64_t first, int64_t rows) {
  std::vector<T> out;
  for (int64_t i = 0; i < b; ++i)
    out.insert(out.end(), x.begin() + (i * s + first) * width,
               x.begin() + (i * s + first + rows) * width);
  return out;
}

std::vector<double> widen(const std::vector<float> &x) {
  return {x.begin(), x.end()};
}
std::vector<double> widen(const std::vector<double> &x) { return x; }

/// The whole sequence's forward and gradient, then each block's, compared.
template <class T>
void checkBlocks(tessel_ctx *ctx, const Shape &c,
                 const std::vector<int64_t> &blocks, double tol) {
  const int32_t dt = std::is_same_v<T, double> ? TESSEL_F64 : TESSEL_F32;
  ASSERT_EQ(std::accumulate(blocks.begin(), blocks.end(), int64_t(0)), c.s);
  const int64_t qw = c.h * c.d, kw = c.hkv * c.d, vw = c.hkv * c.e,
                ow = c.h * c.e;
  auto values = [&](int64_t n, uint64_t seed) {
    auto r = randomValues(dt, n, -1, 1, seed);
    return std::vector<T>(r.begin(), r.end());
  };
  std::vector<T> q = values(c.b * c.s * qw, 1), k = values(c.b * c.s * kw, 2),
                 v = values(c.b * c.s * vw, 3),
                 dout = values(c.b * c.s * ow, 4);
  std::vector<T> out(dout.size()), lse(size_t(c.b * c.h * c.s)), dq(q.size()),
      dk(k.size()), dv(v.size());
  const double scale = 0.4;
  tessel_attention_block(ctx, dt, q.data(), k.data(), v.data(), out.data(),
                         lse.data(), c.b, c.s, c.s, c.h, c.hkv, c.d, c.e, scale,
                         1, c.window, c.softcap, 0);
  tessel_attention_grad_block(ctx, dt, q.data(), k.data(), v.data(), out.data(),
                              lse.data(), dout.data(), dq.data(), dk.data(),
                              dv.data(), c.b, c.s, c.s, c.h, c.hkv, c.d, c.e,
                              scale, 1, c.window, c.softcap, 0);
  ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);

  std::vector<double> dkSum(dk.size()), dvSum(dv.size());
  int64_t first = 0;
  for (int64_t rows : blocks) {
    SCOPED_TRACE("block at " + std::to_string(first) + " of " +
                 std::to_string(rows));
    std::vector<T> qb = rowsOf(q, c.b, c.s, qw, first, rows),
                   dob = rowsOf(dout, c.b, c.s, ow, first, rows);
    std::vector<T> ob(size_t(c.b * rows * ow)), lb(size_t(c.b * c.h * rows)),
        dqb(qb.size()), dkb(dk.size()), dvb(dv.size());
    tessel_attention_block(ctx, dt, qb.data(), k.data(), v.data(), ob.data(),
                           lb.data(), c.b, rows, c.s, c.h, c.hkv, c.d, c.e,
                           scale, 1, c.window, c.softcap, first);
    tessel_attention_grad_block(
        ctx, dt, qb.data(), k.data(), v.data(), ob.data(), lb.data(),
        dob.data(), dqb.data(), dkb.data(), dvb.data(), c.b, rows, c.s, c.h,
        c.hkv, c.d, c.e, scale, 1, c.window, c.softcap, first);
    ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
    expectClose(widen(ob), widen(rowsOf(out, c.b, c.s, ow, first, rows)), tol,
                tol);
    expectClose(widen(lb), widen(rowsOf(lse, c.b * c.h, c.s, 1, first, rows)),
                tol, tol);
    expectClose(widen(dqb), widen(rowsOf(dq, c.b, c.s, qw, first, rows)), tol,
                tol);
    for (size_t i = 0; i < dkb.size(); ++i)
      dkSum[i] += double(dkb[i]);
    for (size_t i = 0; i < dvb.size(); ++i)
      dvSum[i] += double(dvb[i]);
    first += rows;
  }
  expectClose(dkSum, widen(dk), tol, tol);
  expectClose(dvSum, widen(dv), tol, tol);
}

const Shape kShapes[] = {
    {2, 16, 4, 2, 8, 6},          // causal, grouped-query heads
    {1, 24, 2, 2, 5, 7, 5},       // a window narrower than a block
    {2, 20, 3, 1, 8, 8, 9, 30.0}, // a window and a soft cap
    {1, 96, 2, 1, 16, 16},        // blocks past the CPU's row blocks
};

TEST_F(AttentionBlockTest, BlocksOfTheQueriesEqualTheWholeSequence) {
  for (const Shape &c : kShapes) {
    SCOPED_TRACE("S " + std::to_string(c.s) + ", window " +
                 std::to_string(c.window) + ", softcap " +
                 std::to_string(c.softcap));
    // Even blocks (context parallelism's), and uneven ones with a
    // single-row block.
    std::vector<int64_t> halves{c.s / 2, c.s - c.s / 2};
    std::vector<int64_t> uneven{1, c.s / 3, c.s - 1 - c.s / 3};
    checkBlocks<double>(ctx, c, halves, 1e-12);
    checkBlocks<double>(ctx, c, uneven, 1e-12);
    checkBlocks<float>(ctx, c, halves, 5e-5);
  }
}

// Offset 0 is tessel_attention_softcap, bit for bit.
TEST_F(AttentionBlockTest, OffsetZeroIsTheSoftcapEntry) {
  auto r = randomValues(TESSEL_F32, 2 * 40 * 2 * 8, -1, 1, 11);
  std::vector<float> x(r.begin(), r.end()), plain(x.size()), block(x.size()),
      lseA(2 * 2 * 40), lseB(lseA.size());
  tessel_attention_softcap(ctx, TESSEL_F32, x.data(), x.data(), x.data(),
                           plain.data(), lseA.data(), 2, 40, 40, 2, 2, 8, 8,
                           0.3, 1, 7, 20.0);
  tessel_attention_block(ctx, TESSEL_F32, x.data(), x.data(), x.data(),
                         block.data(), lseB.data(), 2, 40, 40, 2, 2, 8, 8, 0.3,
                         1, 7, 20.0, 0);
  ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
  EXPECT_EQ(block, plain);
  EXPECT_EQ(lseB, lseA);
}

TEST_F(AttentionBlockTest, BadOffsetSetsError) {
  std::vector<float> q(4 * 2), k(8 * 2), o(4 * 2), lse(4);
  struct Bad {
    int32_t causal;
    int64_t offset;
  };
  for (Bad bad : {Bad{0, 4}, Bad{1, -1}, Bad{1, 5}}) {
    SCOPED_TRACE(bad.offset);
    tessel_attention_block(ctx, TESSEL_F32, q.data(), k.data(), k.data(),
                           o.data(), lse.data(), 1, 4, 8, 1, 1, 2, 2, 1.0,
                           bad.causal, 0, 0, bad.offset);
    ASSERT_NE(tessel_error(ctx), nullptr);
    EXPECT_EQ(std::string(tessel_error(ctx)),
              "tessel_attention_block: query_offset " +
                  std::to_string(bad.offset) +
                  " needs the causal mask and a block of 4 queries inside "
                  "the 8 keys");
    tessel_clear_error(ctx);
    tessel_attention_grad_block(ctx, TESSEL_F32, q.data(), k.data(), k.data(),
                                o.data(), lse.data(), o.data(), q.data(),
                                k.data(), k.data(), 1, 4, 8, 1, 1, 2, 2, 1.0,
                                bad.causal, 0, 0, bad.offset);
    ASSERT_NE(tessel_error(ctx), nullptr);
    EXPECT_NE(std::string(tessel_error(ctx))
                  .find("tessel_attention_grad_block: query_offset"),
              std::string::npos)
        << tessel_error(ctx);
    tessel_clear_error(ctx);
  }
}

} // namespace
