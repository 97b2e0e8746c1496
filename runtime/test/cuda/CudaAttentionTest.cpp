//===- CudaAttentionTest.cpp - The CUDA flash attention against the CPU ---===//
//
// Host tests replay the tile loops of the three attention kernels (the
// forward in attention.cu, the dQ and dK/dV kernels in attention_grad.cu)
// with their steps from attention_math.h, the same tile sizes, tile skipping
// and order of accumulation, and compare with the CPU backend's
// tessel_attention_softcap and tessel_attention_grad_softcap through the C
// ABI: grouped kv heads, kvSeq != seq, causal and not, sliding windows,
// soft-capped scores, odd
// lengths and head dims across the three buckets. The GPU tests (CpuVsCuda,
// skipped without a device) run the same cases on a CUDA context, in every
// float dtype, through both the entries with lse and the older ones (whose
// backward recomputes the forward).
//
//===----------------------------------------------------------------------===//

#include "cuda/CudaTestUtil.h"
#include "cuda/attention_math.h"

#include "Formats.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

using namespace tessel;
using namespace tessel::cuda;
using namespace tessel::cudatest;

namespace {

struct Case {
  int64_t b, s, t, h, hkv, d, e;
};

// seq 1, 7, 45, 64, 130; more and fewer keys than queries; 4 heads over
// 1, 2 and 4 kv heads; head dims in every bucket, value dim != head dim.
const Case kCases[] = {
    {1, 1, 1, 4, 1, 16, 16},    {2, 7, 7, 4, 2, 16, 24},
    {1, 7, 19, 4, 4, 64, 64},   {1, 64, 64, 4, 2, 64, 48},
    {1, 130, 130, 4, 1, 80, 80}, {1, 130, 67, 4, 2, 80, 96},
    {1, 45, 130, 4, 4, 16, 40}, {1, 33, 40, 4, 2, 200, 136},
};

// No mask, causal, and causal under windows narrower than a tile and
// wider than one; a soft cap (below the largest scores, so tanh bends
// them) without a mask and under a window.
const AttnMask kMasks[] = {{false, 0}, {true, 0},       {true, 5},
                           {true, 40}, {false, 0, 0.7}, {true, 5, 0.7}};

std::string describe(const Case &c, AttnMask mask) {
  return "B" + std::to_string(c.b) + " S" + std::to_string(c.s) + " T" +
         std::to_string(c.t) + " H" + std::to_string(c.h) + "/" +
         std::to_string(c.hkv) + " D" + std::to_string(c.d) + " E" +
         std::to_string(c.e) + (mask.causal ? " causal" : "") +
         (mask.window ? " window " + std::to_string(mask.window) : "") +
         (mask.softcap > 0 ? " softcap " + std::to_string(mask.softcap) : "");
}

AttnShape shapeOf(const Case &c) { return {c.b, c.s, c.t, c.h, c.hkv, c.d, c.e}; }

double scaleOf(const Case &c) { return 1.3 / std::sqrt(double(c.d)); }

/// Inputs of a case, representable in `dtype`.
struct Inputs {
  std::vector<double> q, k, v, dout;
};
Inputs inputsOf(int32_t dtype, const Case &c, uint64_t seed) {
  using tt::randomValues;
  return {randomValues(dtype, size_t(c.b * c.s * c.h * c.d), -1, 1, seed),
          randomValues(dtype, size_t(c.b * c.t * c.hkv * c.d), -1, 1, seed + 1),
          randomValues(dtype, size_t(c.b * c.t * c.hkv * c.e), -2, 2, seed + 2),
          randomValues(dtype, size_t(c.b * c.s * c.h * c.e), -1, 1, seed + 3)};
}

//===----------------------------------------------------------------------===//
// Host replay of the kernels' tile loops
//===----------------------------------------------------------------------===//

/// One query tile through the forward (forwardTile in attention.cu): the
/// unnormalised output rows acc [rows][E] and each row's online softmax.
template <class A>
void forwardTile(const AttnShape &sh, const A *q, const A *k, const A *v,
                 int64_t b, int64_t h, int64_t r0, AttnTiles tiles, A scale,
                 AttnMask mask, std::vector<A> &acc,
                 std::vector<OnlineRow<A>> &rows) {
  const int64_t hk = sh.kvHeadOf(h), E = sh.valueDim;
  const A cap = A(mask.softcap);
  const int64_t rowEnd = std::min<int64_t>(r0 + tiles.rows, sh.seq);
  acc.assign(size_t(tiles.rows * E), A(0));
  rows.assign(size_t(tiles.rows), OnlineRow<A>::start());
  std::vector<A> s(size_t(tiles.keys));
  for (int64_t c0 = attnKeyTileBegin(r0, tiles.keys, mask);
       c0 < attnKeyEnd(rowEnd, sh.kvSeq, mask); c0 += tiles.keys) {
    for (int64_t r = 0; r < tiles.rows; ++r) {
      OnlineRow<A> &row = rows[size_t(r)];
      A tileMax = attnNegInf<A>(), tileSum = A(0);
      for (int64_t c = 0; c < tiles.keys; ++c) {
        int64_t i = r0 + r, j = c0 + c;
        A dot = A(0);
        if (attnVisible(i, j, sh.seq, sh.kvSeq, mask))
          for (int64_t x = 0; x < sh.headDim; ++x)
            dot = std::fma(q[sh.qRow(b, i, h) + x], k[sh.kRow(b, j, hk) + x],
                           dot);
        s[size_t(c)] = attnVisible(i, j, sh.seq, sh.kvSeq, mask)
                           ? softcapValue(dot * scale, cap)
                           : attnNegInf<A>();
        tileMax = std::max(tileMax, s[size_t(c)]);
      }
      A alpha = row.rescale(tileMax);
      for (A &x : s) {
        x = row.weight(x);
        tileSum += x;
      }
      row.add(tileSum);
      for (int64_t e = 0; e < E; ++e) {
        A &o = acc[size_t(r * E + e)];
        o *= alpha;
        for (int64_t c = 0; c < tiles.keys; ++c)
          if (c0 + c < sh.kvSeq)
            o = std::fma(s[size_t(c)], v[sh.vRow(b, c0 + c, hk) + e], o);
      }
    }
  }
}

/// The forward kernel's out and lse ([B, H, S]).
template <class A> struct Forward {
  std::vector<A> out, lse;
};
template <class A>
Forward<A> emulateForward(const AttnShape &sh, const A *q, const A *k,
                          const A *v, A scale, AttnMask mask) {
  int dim = attnDimBucket(sh.headDim, sh.valueDim);
  AttnTiles tiles = attnQueryTiles(sizeof(A) == 8, dim);
  Forward<A> f{std::vector<A>(
                   size_t(sh.batch * sh.seq * sh.heads * sh.valueDim)),
               std::vector<A>(size_t(sh.batch * sh.heads * sh.seq))};
  std::vector<A> acc;
  std::vector<OnlineRow<A>> rows;
  for (int64_t b = 0; b < sh.batch; ++b)
    for (int64_t h = 0; h < sh.heads; ++h)
      for (int64_t r0 = 0; r0 < sh.seq; r0 += tiles.rows) {
        forwardTile(sh, q, k, v, b, h, r0, tiles, scale, mask, acc, rows);
        for (int64_t r = 0; r < tiles.rows && r0 + r < sh.seq; ++r) {
          for (int64_t e = 0; e < sh.valueDim; ++e)
            f.out[size_t(sh.oRow(b, r0 + r, h) + e)] =
                acc[size_t(r * sh.valueDim + e)] * rows[size_t(r)].inverse();
          f.lse[size_t(sh.statIndex(b, h, r0 + r))] =
              rows[size_t(r)].logSumExp();
        }
      }
  return f;
}

/// The backward as its two kernels, from the forward's out and lse: D and
/// dQ per query tile, then dK / dV per key tile over the group's query
/// heads.
template <class A>
void emulateGrad(const AttnShape &sh, const A *q, const A *k, const A *v,
                 const A *out, const A *lse, const A *dout, A scale,
                 AttnMask mask, std::vector<A> &dq, std::vector<A> &dk,
                 std::vector<A> &dv) {
  const int dim = attnDimBucket(sh.headDim, sh.valueDim);
  const AttnTiles qt = attnQueryTiles(sizeof(A) == 8, dim);
  const int64_t D = sh.headDim, E = sh.valueDim;
  const A cap = A(mask.softcap);
  std::vector<A> rowDots(size_t(sh.batch * sh.heads * sh.seq));
  dq.assign(size_t(sh.batch * sh.seq * sh.heads * D), A(0));
  for (int64_t b = 0; b < sh.batch; ++b)
    for (int64_t h = 0; h < sh.heads; ++h)
      for (int64_t r0 = 0; r0 < sh.seq; r0 += qt.rows) {
        const int64_t hk = sh.kvHeadOf(h);
        const int64_t rowEnd = std::min<int64_t>(r0 + qt.rows, sh.seq);
        for (int64_t i = r0; i < rowEnd; ++i) {
          A dot = A(0);
          for (int64_t e = 0; e < E; ++e)
            dot = std::fma(dout[sh.oRow(b, i, h) + e],
                           out[sh.oRow(b, i, h) + e], dot);
          rowDots[size_t(sh.statIndex(b, h, i))] = dot;
        }
        for (int64_t i = r0; i < rowEnd; ++i) {
          A rowLse = lse[sh.statIndex(b, h, i)];
          A rowDot = rowDots[size_t(sh.statIndex(b, h, i))];
          std::vector<A> g(size_t(D), A(0));
          for (int64_t c0 = attnKeyTileBegin(r0, qt.keys, mask);
               c0 < attnKeyEnd(rowEnd, sh.kvSeq, mask); c0 += qt.keys)
            for (int64_t j = c0; j < c0 + qt.keys && j < sh.kvSeq; ++j) {
              bool visible = attnVisible(i, j, sh.seq, sh.kvSeq, mask);
              A s = A(0), dp = A(0);
              for (int64_t x = 0; x < D; ++x)
                s = std::fma(q[sh.qRow(b, i, h) + x], k[sh.kRow(b, j, hk) + x],
                             s);
              for (int64_t e = 0; e < E; ++e)
                dp = std::fma(dout[sh.oRow(b, i, h) + e],
                              v[sh.vRow(b, j, hk) + e], dp);
              A x = softcapValue(s * scale, cap);
              A ds = attnScoreGrad(attnProb(visible, x, rowLse), dp, rowDot) *
                     softcapSlope(x, cap);
              for (int64_t x = 0; x < D; ++x)
                g[size_t(x)] = std::fma(ds, k[sh.kRow(b, j, hk) + x],
                                        g[size_t(x)]);
            }
          for (int64_t x = 0; x < D; ++x)
            dq[size_t(sh.qRow(b, i, h) + x)] = g[size_t(x)] * scale;
        }
      }
  const AttnTiles kt = attnKeyTiles(sizeof(A) == 8, dim);
  const int64_t group = sh.heads / sh.kvHeads;
  dk.assign(size_t(sh.batch * sh.kvSeq * sh.kvHeads * D), A(0));
  dv.assign(size_t(sh.batch * sh.kvSeq * sh.kvHeads * E), A(0));
  for (int64_t b = 0; b < sh.batch; ++b)
    for (int64_t hk = 0; hk < sh.kvHeads; ++hk)
      for (int64_t c0 = 0; c0 < sh.kvSeq; c0 += kt.keys)
        for (int64_t j = c0; j < std::min<int64_t>(c0 + kt.keys, sh.kvSeq);
             ++j) {
          std::vector<A> gk(size_t(D), A(0)), gv(size_t(E), A(0));
          int64_t first = attnFirstRow(c0, mask) / kt.rows * kt.rows;
          int64_t rowEnd =
              attnRowEnd(std::min(c0 + kt.keys, sh.kvSeq), sh.seq, mask);
          // The kernel walks whole query tiles up to rowEnd.
          int64_t last =
              std::min((rowEnd + kt.rows - 1) / kt.rows * kt.rows, sh.seq);
          for (int64_t h = hk * group; h < (hk + 1) * group; ++h)
            for (int64_t i = first; i < last; ++i) {
              bool visible = attnVisible(i, j, sh.seq, sh.kvSeq, mask);
              A s = A(0), dp = A(0);
              for (int64_t x = 0; x < D; ++x)
                s = std::fma(k[sh.kRow(b, j, hk) + x], q[sh.qRow(b, i, h) + x],
                             s);
              for (int64_t e = 0; e < E; ++e)
                dp = std::fma(v[sh.vRow(b, j, hk) + e],
                              dout[sh.oRow(b, i, h) + e], dp);
              A x = softcapValue(s * scale, cap);
              A p = attnProb(visible, x, lse[sh.statIndex(b, h, i)]);
              A ds =
                  attnScoreGrad(p, dp, rowDots[size_t(sh.statIndex(b, h, i))]) *
                  softcapSlope(x, cap);
              for (int64_t e = 0; e < E; ++e)
                gv[size_t(e)] =
                    std::fma(p, dout[sh.oRow(b, i, h) + e], gv[size_t(e)]);
              for (int64_t x = 0; x < D; ++x)
                gk[size_t(x)] =
                    std::fma(ds, q[sh.qRow(b, i, h) + x], gk[size_t(x)]);
            }
          for (int64_t x = 0; x < D; ++x)
            dk[size_t(sh.kRow(b, j, hk) + x)] = gk[size_t(x)] * scale;
          for (int64_t e = 0; e < E; ++e)
            dv[size_t(sh.vRow(b, j, hk) + e)] = gv[size_t(e)];
        }
}

/// |got - want| <= rtol · (|want| + max(max |want|, 1)) elementwise:
/// relative to the tensor's scale, as gradients mix terms of either sign,
/// and to the inputs' unit scale where the exact gradient is 0 (one key:
/// dS = P (dP − D) cancels, with D = dO · O here and Σ P dP on the CPU).
template <class A>
void expectNear(const std::vector<A> &got, const std::vector<double> &want,
                double rtol, const char *what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double top = 1;
  for (double w : want)
    if (std::isfinite(w))
      top = std::max(top, std::fabs(w));
  int bad = 0;
  // (An lse of -inf, a row that sees no key, must be -inf exactly.)
  for (size_t i = 0; i < want.size(); ++i)
    if (!(double(got[i]) == want[i] || std::fabs(double(got[i]) - want[i]) <=
                                           rtol * (std::fabs(want[i]) + top)) &&
        bad++ < 5)
      ADD_FAILURE() << what << " element " << i << ": got " << double(got[i])
                    << ", want " << want[i];
  EXPECT_EQ(bad, 0) << what << ": mismatching elements";
}

template <class A> std::vector<A> narrow(const std::vector<double> &x) {
  return std::vector<A>(x.begin(), x.end());
}

/// lse's element: f64 for TESSEL_F64, f32 for every other dtype.
size_t lseElementBytes(int32_t dtype) { return dtype == TESSEL_F64 ? 8 : 4; }

std::vector<double> decodeLse(int32_t dtype,
                              const std::vector<uint8_t> &bytes) {
  std::vector<double> lse(bytes.size() / lseElementBytes(dtype));
  for (size_t i = 0; i < lse.size(); ++i) {
    if (dtype == TESSEL_F64) {
      std::memcpy(&lse[i], bytes.data() + 8 * i, 8);
    } else {
      float x;
      std::memcpy(&x, bytes.data() + 4 * i, 4);
      lse[i] = x;
    }
  }
  return lse;
}

/// A case's forward (out, and lse where the entry writes it) and backward,
/// decoded.
struct Results {
  std::vector<double> out, lse, dq, dk, dv;
};

/// The CPU backend's tessel_attention_softcap and
/// tessel_attention_grad_softcap (from that out and lse) of a case on
/// `ctx`.
Results cpuResults(tessel_ctx *ctx, int32_t dtype, const Case &c,
                   const Inputs &in, AttnMask mask) {
  auto q = tt::encode(dtype, in.q), k = tt::encode(dtype, in.k),
       v = tt::encode(dtype, in.v), g = tt::encode(dtype, in.dout);
  size_t es = size_t(tessel_dtype_size(dtype));
  std::vector<uint8_t> out(in.dout.size() * es), dq(in.q.size() * es),
      dk(in.k.size() * es), dv(in.v.size() * es),
      lse(size_t(c.b * c.h * c.s) * lseElementBytes(dtype));
  tessel_attention_softcap(ctx, dtype, q.data(), k.data(), v.data(), out.data(),
                           lse.data(), c.b, c.s, c.t, c.h, c.hkv, c.d, c.e,
                           scaleOf(c), mask.causal, mask.window, mask.softcap);
  tessel_attention_grad_softcap(
      ctx, dtype, q.data(), k.data(), v.data(), out.data(), lse.data(),
      g.data(), dq.data(), dk.data(), dv.data(), c.b, c.s, c.t, c.h, c.hkv, c.d,
      c.e, scaleOf(c), mask.causal, mask.window, mask.softcap);
  EXPECT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
  return {tt::decode(dtype, out), decodeLse(dtype, lse), tt::decode(dtype, dq),
          tt::decode(dtype, dk), tt::decode(dtype, dv)};
}

template <class A> void replayMatchesCpu(int32_t dtype, double rtol) {
  tessel_ctx *cpu = createContext("cpu");
  ASSERT_NE(cpu, nullptr) << tessel_error(nullptr);
  uint64_t seed = 11;
  for (const Case &c : kCases)
    for (AttnMask mask : kMasks) {
      SCOPED_TRACE(describe(c, mask));
      Inputs in = inputsOf(dtype, c, seed += 4);
      Results want = cpuResults(cpu, dtype, c, in, mask);
      AttnShape sh = shapeOf(c);
      auto q = narrow<A>(in.q), k = narrow<A>(in.k), v = narrow<A>(in.v),
           g = narrow<A>(in.dout);
      A scale = A(scaleOf(c));
      Forward<A> f =
          emulateForward(sh, q.data(), k.data(), v.data(), scale, mask);
      expectNear(f.out, want.out, rtol, "out");
      expectNear(f.lse, want.lse, rtol, "lse");
      std::vector<A> dq, dk, dv;
      emulateGrad(sh, q.data(), k.data(), v.data(), f.out.data(), f.lse.data(),
                  g.data(), scale, mask, dq, dk, dv);
      expectNear(dq, want.dq, rtol, "dq");
      expectNear(dk, want.dk, rtol, "dk");
      expectNear(dv, want.dv, rtol, "dv");
    }
  tessel_ctx_destroy(cpu);
}

//===----------------------------------------------------------------------===//
// Host tests
//===----------------------------------------------------------------------===//

TEST(CudaAttentionMath, TileReplayMatchesCpuF32) {
  replayMatchesCpu<float>(TESSEL_F32, 2e-6);
}

TEST(CudaAttentionMath, TileReplayMatchesCpuF64) {
  replayMatchesCpu<double>(TESSEL_F64, 1e-13);
}

// Every tile configuration has a thread cover; its shared memory (rows
// padded by one element on CUDA cores; on tensor cores, f32 arithmetic
// only, by four, plus the product tiles: the forward's o, the dQ kernel's
// dp) fits in the 227 KB an H100 / H200 block may opt into.
TEST(CudaAttentionMath, TileConfigurations) {
  for (bool f64 : {false, true})
    for (int dim : {64, 128, 256}) {
      SCOPED_TRACE(std::to_string(dim) + (f64 ? " f64" : " f32"));
      size_t es = f64 ? 8 : 4;
      AttnTiles qt = attnQueryTiles(f64, dim), kt = attnKeyTiles(f64, dim);
      EXPECT_GT(attnTileColumns(qt.rows, qt.keys, kAttnThreads), 0);
      EXPECT_GT(attnTileColumns(qt.rows, dim, kAttnThreads), 0);
      EXPECT_GT(attnTileColumns(kt.keys, kt.rows, kAttnThreads), 0);
      EXPECT_GT(attnTileColumns(kt.keys, dim, kAttnThreads), 0);
      // A score row's lanes (and a row of D's): a power of two within a
      // warp.
      int group = kAttnThreads / qt.rows;
      EXPECT_TRUE(group >= 1 && group <= 32 && (group & (group - 1)) == 0);
      // The dQ kernel stages the O tile in the key tile's k and v.
      EXPECT_GE(2 * qt.keys, qt.rows);
      for (bool tc : {false, true}) {
        if (tc && f64)
          continue;
        SCOPED_TRACE(tc ? "tensor cores" : "CUDA cores");
        int pad = tc ? 4 : 1, dp = dim + pad;
        size_t forwardSmem =
            es * size_t((qt.rows + 2 * qt.keys) * dp +
                        qt.rows * (qt.keys + pad) + 3 * qt.rows +
                        (tc ? qt.rows * dp : 0));
        size_t querySmem =
            es * size_t((2 * qt.rows + 2 * qt.keys) * dp +
                        (tc ? 2 : 1) * qt.rows * (qt.keys + pad) +
                        2 * qt.rows);
        size_t keySmem = es * size_t((2 * kt.rows + 2 * kt.keys) * dp +
                                     2 * kt.keys * (kt.rows + pad) +
                                     2 * kt.rows);
        EXPECT_LE(forwardSmem, size_t(227) << 10);
        EXPECT_LE(querySmem, size_t(227) << 10);
        EXPECT_LE(keySmem, size_t(227) << 10);
      }
    }
  EXPECT_EQ(attnDimBucket(0, 0), 64);
  EXPECT_EQ(attnDimBucket(80, 16), 128);
  EXPECT_EQ(attnDimBucket(16, 256), 256);
  EXPECT_EQ(attnDimBucket(257, 16), 0);
}

// The online softmax over any split into tiles gives the softmax: its
// weights sum to 1 after the last rescale, whatever the order of maxima,
// and its log-sum-exp is the row's; a fully masked tile leaves the row as
// it was.
TEST(CudaAttentionMath, OnlineRowRescales) {
  const double scores[] = {0.5, -3.0, 7.25, 2.0, 7.0, -40.0, 1.0};
  double mx = 7.25, sum = 0;
  for (double s : scores)
    sum += std::exp(s - mx);
  for (int width : {1, 2, 3, 7}) {
    OnlineRow<double> row = OnlineRow<double>::start();
    double acc = 0; // Σ weight · score, rescaled as an output row is
    for (int c0 = 0; c0 < 7; c0 += width) {
      double tileMax = attnNegInf<double>();
      for (int c = c0; c < std::min(c0 + width, 7); ++c)
        tileMax = std::max(tileMax, scores[c]);
      double alpha = row.rescale(tileMax), tileSum = 0;
      acc *= alpha;
      for (int c = c0; c < std::min(c0 + width, 7); ++c) {
        tileSum += row.weight(scores[c]);
        acc += row.weight(scores[c]) * scores[c];
      }
      row.add(tileSum);
      OnlineRow<double> before = row;
      EXPECT_EQ(row.rescale(attnNegInf<double>()), 1.0);
      EXPECT_EQ(row.m, before.m);
      EXPECT_EQ(row.l, before.l);
    }
    double want = 0;
    for (double s : scores)
      want += std::exp(s - mx) / sum * s;
    EXPECT_NEAR(acc * row.inverse(), want, 1e-14);
    EXPECT_NEAR(row.logSumExp(), mx + std::log(sum), 1e-14);
  }
  // A row that sees no key: lse -inf, as tessel_attention_lse reports it.
  OnlineRow<float> none = OnlineRow<float>::start();
  EXPECT_EQ(none.rescale(attnNegInf<float>()), 0.0f);
  EXPECT_EQ(none.weight(attnNegInf<float>()), 0.0f);
  EXPECT_EQ(none.inverse(), 0.0f);
  EXPECT_EQ(none.logSumExp(), -INFINITY);
  EXPECT_EQ(OnlineRow<double>::start().logSumExp(), -double(INFINITY));
}

// The mask's predicates: the causal diagonal at the top left (moved down
// by a block of the queries' offset, ABI 31), a window of the last w keys,
// and tiles skipped (or tested per score) exactly when none (or not all)
// of their pairs is visible.
TEST(CudaAttentionMath, MaskTileSkipping) {
  std::vector<AttnMask> masks(std::begin(kMasks), std::end(kMasks));
  for (int64_t offset : {1, 17, 40, 67})
    for (int64_t window : {0, 5, 40})
      masks.push_back(AttnMask{true, window, 0, offset});
  for (AttnMask mask : masks)
    for (int64_t seq : {1, 7, 64, 130})
      for (int64_t kvSeq : {1, 19, 64, 131}) {
        if (mask.queryOffset + seq > kvSeq && mask.queryOffset > 0)
          continue; // a block lies inside the keys' sequence
        SCOPED_TRACE(describe(Case{1, seq, kvSeq, 1, 1, 1, 1}, mask) +
                     " offset " + std::to_string(mask.queryOffset));
        AttnShape sh{1, seq, kvSeq, 1, 1, 1, 1};
        for (int64_t r0 = 0; r0 < seq; r0 += 32) {
          int64_t rowEnd = std::min<int64_t>(r0 + 32, seq);
          int64_t firstSeen = kvSeq, lastSeen = 0;
          for (int64_t i = r0; i < rowEnd; ++i)
            for (int64_t j = 0; j < kvSeq; ++j)
              if (attnVisible(i, j, seq, kvSeq, mask)) {
                firstSeen = std::min(firstSeen, j);
                lastSeen = std::max(lastSeen, j + 1);
              }
          // (A block none of whose rows sees a key, past the last key's
          // window, may walk any tiles: every score of them is masked.)
          if (lastSeen > 0) {
            EXPECT_EQ(attnKeyEnd(rowEnd, kvSeq, mask), lastSeen);
            EXPECT_EQ(attnKeyTileBegin(r0, 16, mask), firstSeen / 16 * 16);
          }
          for (int64_t c0 = 0; c0 < kvSeq; c0 += 16) {
            bool all = true;
            for (int64_t i = r0; i < r0 + 32; ++i)
              for (int64_t j = c0; j < c0 + 16; ++j)
                all = all && attnVisible(i, j, seq, kvSeq, mask);
            EXPECT_EQ(attnTileMasked(r0, 32, c0, 16, sh, mask), !all)
                << "rows " << r0 << ", keys " << c0;
          }
        }
        for (int64_t c0 = 0; c0 < kvSeq; c0 += 16) {
          int64_t first = seq, end = 0;
          for (int64_t i = 0; i < seq; ++i)
            for (int64_t j = c0; j < std::min<int64_t>(c0 + 16, kvSeq); ++j)
              if (attnVisible(i, j, seq, kvSeq, mask)) {
                first = std::min(first, i);
                end = std::max(end, i + 1);
              }
          // Rows outside [first, end) see none of the tile; past seq there
          // are none, and a tile no row sees walks no rows.
          int64_t keyEnd = std::min<int64_t>(c0 + 16, kvSeq);
          if (end > 0) {
            EXPECT_EQ(attnFirstRow(c0, mask), first);
            EXPECT_EQ(attnRowEnd(keyEnd, seq, mask), end);
          } else {
            EXPECT_LE(attnRowEnd(keyEnd, seq, mask),
                      std::min(attnFirstRow(c0, mask), seq));
          }
        }
      }
  AttnMask causal{true, 0}, window{true, 3};
  EXPECT_FALSE(attnVisible(3, 4, 10, 10, causal));
  EXPECT_TRUE(attnVisible(3, 4, 10, 10, AttnMask{}));
  EXPECT_FALSE(attnVisible(10, 0, 10, 10, AttnMask{}));
  EXPECT_FALSE(attnVisible(0, 10, 10, 10, AttnMask{}));
  EXPECT_TRUE(attnVisible(5, 3, 10, 10, window));
  EXPECT_FALSE(attnVisible(5, 2, 10, 10, window));
  AttnShape sh{2, 5, 3, 6, 2, 4, 7};
  EXPECT_EQ(sh.kvHeadOf(2), 0);
  EXPECT_EQ(sh.kvHeadOf(3), 1);
  EXPECT_EQ(sh.qRow(1, 2, 3), ((1 * 5 + 2) * 6 + 3) * 4);
  EXPECT_EQ(sh.vRow(1, 2, 1), ((1 * 3 + 2) * 2 + 1) * 7);
}

//===----------------------------------------------------------------------===//
// GPU tests
//===----------------------------------------------------------------------===//

class CudaAttention : public CpuVsCuda {
protected:
  /// The CUDA backend's results of a case, decoded: withLse through
  /// tessel_attention_softcap and tessel_attention_grad_softcap from its
  /// out and lse, else through tessel_attention and tessel_attention_grad
  /// (which recompute the forward, and take no window or cap; lse stays
  /// empty).
  Results gpuResults(int32_t dtype, const Case &c, const Inputs &in,
                     AttnMask mask, bool withLse) {
    size_t es = size_t(tessel_dtype_size(dtype));
    size_t rows = size_t(c.b * c.h * c.s);
    void *q = upload(gpu, tt::encode(dtype, in.q));
    void *k = upload(gpu, tt::encode(dtype, in.k));
    void *v = upload(gpu, tt::encode(dtype, in.v));
    void *g = upload(gpu, tt::encode(dtype, in.dout));
    void *out = tessel_alloc(gpu, int64_t(in.dout.size() * es));
    void *lse = tessel_alloc(gpu, int64_t(rows * lseElementBytes(dtype)));
    void *dq = tessel_alloc(gpu, int64_t(in.q.size() * es));
    void *dk = tessel_alloc(gpu, int64_t(in.k.size() * es));
    void *dv = tessel_alloc(gpu, int64_t(in.v.size() * es));
    if (withLse) {
      tessel_attention_softcap(gpu, dtype, q, k, v, out, lse, c.b, c.s, c.t,
                               c.h, c.hkv, c.d, c.e, scaleOf(c), mask.causal,
                               mask.window, mask.softcap);
      tessel_attention_grad_softcap(
          gpu, dtype, q, k, v, out, lse, g, dq, dk, dv, c.b, c.s, c.t, c.h,
          c.hkv, c.d, c.e, scaleOf(c), mask.causal, mask.window, mask.softcap);
    } else {
      // (The older entries have no window or cap.)
      tessel_attention(gpu, dtype, q, k, v, out, c.b, c.s, c.t, c.h, c.hkv, c.d,
                       c.e, scaleOf(c), mask.causal);
      tessel_attention_grad(gpu, dtype, q, k, v, g, dq, dk, dv, c.b, c.s, c.t,
                            c.h, c.hkv, c.d, c.e, scaleOf(c), mask.causal);
    }
    auto fetch = [&](void *p, size_t n) {
      auto bytes = download<uint8_t>(gpu, p, n * es);
      return tt::decode(dtype, bytes);
    };
    Results r{fetch(out, in.dout.size()),
              {},
              fetch(dq, in.q.size()),
              fetch(dk, in.k.size()),
              fetch(dv, in.v.size())};
    if (withLse)
      r.lse = decodeLse(
          dtype, download<uint8_t>(gpu, lse, rows * lseElementBytes(dtype)));
    for (void *p : {q, k, v, g, out, lse, dq, dk, dv})
      tessel_free(gpu, p);
    return r;
  }
};

/// lse's bound, relative as expectNear's: f64 to its arithmetic; every
/// other dtype has an f32 lse computed from the same inputs on both
/// backends, where the scores' f32 sums (in another order, on tensor cores
/// for 16-bit storage) and e^x (the hardware exp2 there, about 2 ulp of
/// the sum) differ by a few ulp of f32: about 1e-6 absolute in the log of
/// rows of at most a few hundred keys.
double lseTolerance(int32_t dtype) {
  return dtype == TESSEL_F64 ? 1e-12 : 1e-5;
}

TEST_F(CudaAttention, MatchesCpu) {
  for (int32_t dtype : tt::kFloatTypes) {
    // f32 / f64: the arithmetic's precision; 16-bit: both round the same
    // f32 results once, so they differ by about an ulp of the format.
    double rtol = dtype == TESSEL_F64   ? 1e-12
                  : dtype == TESSEL_F32 ? 1e-5
                                        : 2 * tt::eps(dtype);
    uint64_t seed = 101;
    for (const Case &c : kCases)
      for (AttnMask mask : kMasks) {
        SCOPED_TRACE(std::string(tt::dtypeName(dtype)) + " " +
                     describe(c, mask));
        Inputs in = inputsOf(dtype, c, seed += 4);
        Results want = cpuResults(cpu, dtype, c, in, mask);
        Results got = gpuResults(dtype, c, in, mask, true);
        expectNear(got.out, want.out, rtol, "out");
        expectNear(got.lse, want.lse, lseTolerance(dtype), "lse");
        expectNear(got.dq, want.dq, rtol, "dq");
        expectNear(got.dk, want.dk, rtol, "dk");
        expectNear(got.dv, want.dv, rtol, "dv");
        if (mask.window || mask.softcap > 0)
          continue;
        Results plain = gpuResults(dtype, c, in, mask, false);
        // One kernel: writing lse changes no output element.
        EXPECT_EQ(got.out, plain.out);
        // The older entry: the forward recomputed into temporaries.
        expectNear(plain.dq, want.dq, rtol, "dq (recomputed)");
        expectNear(plain.dk, want.dk, rtol, "dk (recomputed)");
        expectNear(plain.dv, want.dv, rtol, "dv (recomputed)");
      }
  }
}

// Many query tiles, batches and heads: the grid-stride work order and the
// causal tile skipping (and a window's) at a realistic size; the backward
// is bitwise deterministic, and from the saved out and lse it is the
// recomputing one's to f32 rounding.
TEST_F(CudaAttention, LargeCausalAndDeterministic) {
  const Case c{2, 300, 300, 8, 2, 128, 128};
  Inputs in = inputsOf(TESSEL_F32, c, 7);
  for (AttnMask mask :
       {AttnMask{true, 0}, AttnMask{true, 100}, AttnMask{true, 0, 0.7}}) {
    SCOPED_TRACE(describe(c, mask));
    Results want = cpuResults(cpu, TESSEL_F32, c, in, mask);
    Results first = gpuResults(TESSEL_F32, c, in, mask, true);
    Results second = gpuResults(TESSEL_F32, c, in, mask, true);
    expectNear(first.out, want.out, 1e-5, "out");
    expectNear(first.lse, want.lse, lseTolerance(TESSEL_F32), "lse");
    expectNear(first.dq, want.dq, 1e-5, "dq");
    expectNear(first.dk, want.dk, 1e-5, "dk");
    expectNear(first.dv, want.dv, 1e-5, "dv");
    EXPECT_EQ(first.lse, second.lse);
    EXPECT_EQ(first.dq, second.dq);
    EXPECT_EQ(first.dk, second.dk);
    EXPECT_EQ(first.dv, second.dv);
    if (mask.window || mask.softcap > 0)
      continue;
    Results plain = gpuResults(TESSEL_F32, c, in, mask, false);
    expectNear(plain.dq, want.dq, 1e-5, "dq (recomputed)");
    expectNear(plain.dk, want.dk, 1e-5, "dk (recomputed)");
    expectNear(plain.dv, want.dv, 1e-5, "dv (recomputed)");
  }
}

// No keys: a zero output, lse -inf, and zero gradients, overwriting what
// was there, through both entries, with an f32 and an f64 lse.
TEST_F(CudaAttention, NoKeys) {
  const Case c{2, 5, 0, 4, 2, 16, 8};
  for (int32_t dtype : {TESSEL_F32, TESSEL_F64}) {
    SCOPED_TRACE(tt::dtypeName(dtype));
    size_t rows = size_t(c.b * c.h * c.s);
    size_t es = size_t(tessel_dtype_size(dtype));
    auto ones = [&](size_t n) {
      return upload(gpu, tt::encode(dtype, std::vector<double>(n, 1.0)));
    };
    size_t qCount = rows * size_t(c.d), oCount = rows * size_t(c.e);
    void *q = ones(qCount), *g = ones(oCount), *kv = ones(1);
    void *lse = upload(gpu, std::vector<double>(rows, 1.0));
    for (bool withLse : {false, true}) {
      void *out = ones(oCount), *dq = ones(qCount);
      if (withLse) {
        tessel_attention_lse(gpu, dtype, q, kv, kv, out, lse, c.b, c.s, c.t,
                             c.h, c.hkv, c.d, c.e, 1.0, 1);
        tessel_attention_grad_lse(gpu, dtype, q, kv, kv, out, lse, g, dq, kv,
                                  kv, c.b, c.s, c.t, c.h, c.hkv, c.d, c.e,
                                  1.0, 1);
      } else {
        tessel_attention(gpu, dtype, q, kv, kv, out, c.b, c.s, c.t, c.h,
                         c.hkv, c.d, c.e, 1.0, 1);
        tessel_attention_grad(gpu, dtype, q, kv, kv, g, dq, kv, kv, c.b, c.s,
                              c.t, c.h, c.hkv, c.d, c.e, 1.0, 1);
      }
      auto fetch = [&](void *p, size_t n) {
        return tt::decode(dtype, download<uint8_t>(gpu, p, n * es));
      };
      for (double x : fetch(out, oCount))
        EXPECT_EQ(x, 0.0);
      for (double x : fetch(dq, qCount))
        EXPECT_EQ(x, 0.0);
      tessel_free(gpu, out);
      tessel_free(gpu, dq);
    }
    auto l = decodeLse(
        dtype, download<uint8_t>(gpu, lse, rows * lseElementBytes(dtype)));
    for (double x : l)
      EXPECT_EQ(x, -double(INFINITY));
    for (void *p : {q, g, kv, lse})
      tessel_free(gpu, p);
  }
}

// Value dim 0: no output, but every row's lse, as the CPU backend's.
TEST_F(CudaAttention, ValueDimZeroStillWritesLse) {
  const Case c{1, 37, 19, 4, 2, 64, 0};
  const size_t rows = size_t(c.b * c.h * c.s);
  for (AttnMask mask : kMasks) {
    SCOPED_TRACE(describe(c, mask));
    Inputs in = inputsOf(TESSEL_F32, c, 5);
    std::vector<float> q = narrow<float>(in.q), k = narrow<float>(in.k);
    std::vector<float> want(rows), none(1); // (v and out have no element)
    tessel_attention_softcap(cpu, TESSEL_F32, q.data(), k.data(), none.data(),
                             none.data(), want.data(), c.b, c.s, c.t, c.h,
                             c.hkv, c.d, c.e, scaleOf(c), mask.causal,
                             mask.window, mask.softcap);
    ASSERT_EQ(tessel_error(cpu), nullptr) << tessel_error(cpu);
    void *gq = upload(gpu, q), *gk = upload(gpu, k), *gnone = upload(gpu, none);
    void *lse = upload(gpu, std::vector<float>(rows, 0.0f));
    tessel_attention_softcap(gpu, TESSEL_F32, gq, gk, gnone, gnone, lse, c.b,
                             c.s, c.t, c.h, c.hkv, c.d, c.e, scaleOf(c),
                             mask.causal, mask.window, mask.softcap);
    expectNear(download<float>(gpu, lse, rows),
               std::vector<double>(want.begin(), want.end()),
               lseTolerance(TESSEL_F32), "lse");
    for (void *p : {gq, gk, gnone, lse})
      tessel_free(gpu, p);
  }
}

TEST_F(CudaAttention, HeadDimBeyond256IsRefused) {
  void *buf = tessel_alloc(gpu, 4 * 300 * 4);
  tessel_attention(gpu, TESSEL_F32, buf, buf, buf, buf, 1, 1, 1, 1, 1, 300, 4,
                   1.0, 0);
  const char *err = tessel_error(gpu);
  ASSERT_NE(err, nullptr);
  EXPECT_NE(std::string(err).find("head dim 300 > 256 not supported"),
            std::string::npos)
      << err;
  tessel_clear_error(gpu);
  tessel_free(gpu, buf);
}

} // namespace
