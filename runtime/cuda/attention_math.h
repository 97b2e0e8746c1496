//===- attention_math.h - Tile steps of the flash attention kernels -*- C++ -*-===//
//
// What attention.cu's kernels compute per element, per score row and per
// tile, as TESSEL_HD functions: the [B, S, H, D] index math with grouped
// kv heads, which key tiles a query tile needs (and the reverse) under the
// causal mask and sliding window, the element mask, the online softmax's
// running max / sum update and log-sum-exp, and the backward's softmax
// recomputation from that log-sum-exp and score gradient. The host tests
// replay the kernels' tile loops with these functions and compare with the
// CPU backend, so the device and the tests share one definition of every
// step. The tile sizes live here for the same reason.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CUDA_ATTENTION_MATH_H
#define TESSEL_RUNTIME_CUDA_ATTENTION_MATH_H

#include "core/attention_mask.h"
#include "core/hd.h"

#include <cmath>
#include <cstdint>

namespace tessel {
namespace cuda {

/// The shapes of one attention call: q [B, S, H, D], k [B, T, Hkv, D],
/// v [B, T, Hkv, E], out / dout [B, S, H, E]; the per-row statistics (the
/// forward's lse, the backward's D) are [B, H, S].
struct AttnShape {
  int64_t batch, seq, kvSeq, heads, kvHeads, headDim, valueDim;

  /// The kv head query head h reads (h / (H / Hkv)).
  TESSEL_HD int64_t kvHeadOf(int64_t h) const {
    return h / (heads / kvHeads);
  }
  /// Where row i of query head h of batch b starts in q (and dq).
  TESSEL_HD int64_t qRow(int64_t b, int64_t i, int64_t h) const {
    return ((b * seq + i) * heads + h) * headDim;
  }
  /// Where row i of query head h starts in out (and dout).
  TESSEL_HD int64_t oRow(int64_t b, int64_t i, int64_t h) const {
    return ((b * seq + i) * heads + h) * valueDim;
  }
  /// Where key j of kv head hk starts in k (and dk).
  TESSEL_HD int64_t kRow(int64_t b, int64_t j, int64_t hk) const {
    return ((b * kvSeq + j) * kvHeads + hk) * headDim;
  }
  /// Where key j of kv head hk starts in v (and dv).
  TESSEL_HD int64_t vRow(int64_t b, int64_t j, int64_t hk) const {
    return ((b * kvSeq + j) * kvHeads + hk) * valueDim;
  }
  /// Row i of head h of batch b in a [B, H, S] statistics buffer.
  TESSEL_HD int64_t statIndex(int64_t b, int64_t h, int64_t i) const {
    return (b * heads + h) * seq + i;
  }
};

/// Whether query i attends to key j: both exist (tiles overhang the
/// sequences) and the mask lets it (AttnMask: the causal diagonal aligned
/// at the top left as in the CPU backend, and the sliding window).
TESSEL_HD bool attnVisible(int64_t i, int64_t j, int64_t seq, int64_t kvSeq,
                           AttnMask mask) {
  return mask.visible(i, j, seq, kvSeq);
}

/// The key tiles of `tile` keys from which the query rows [rowBegin,
/// rowEnd) see anything (rowEnd already clamped to seq, > rowBegin): from
/// attnKeyTileBegin to before attnKeyEnd; the others are skipped whole.
TESSEL_HD int64_t attnKeyTileBegin(int64_t rowBegin, int64_t tile,
                                   AttnMask mask) {
  return mask.keyBegin(rowBegin) / tile * tile;
}
TESSEL_HD int64_t attnKeyEnd(int64_t rowEnd, int64_t kvSeq, AttnMask mask) {
  return mask.keyEnd(rowEnd - 1, kvSeq);
}

/// The query rows that see any key of [keyBegin, keyEnd) (keyEnd clamped
/// to kvSeq, > keyBegin): the backward's key-tile blocks skip the query
/// tiles before attnFirstRow and from attnRowEnd on.
TESSEL_HD int64_t attnFirstRow(int64_t keyBegin, AttnMask mask) {
  return mask.rowBegin(keyBegin);
}
TESSEL_HD int64_t attnRowEnd(int64_t keyEnd, int64_t seq, AttnMask mask) {
  return mask.rowEnd(keyEnd - 1, seq);
}

/// Whether any score of the tile of rows [r0, r0 + rows) and keys
/// [c0, c0 + keys) is masked (past a sequence, above the causal diagonal
/// or before the window of the tile's last row): only those tiles test
/// each score.
TESSEL_HD bool attnTileMasked(int64_t r0, int rows, int64_t c0, int keys,
                              const AttnShape &sh, AttnMask mask) {
  return r0 + rows > sh.seq || c0 + keys > sh.kvSeq ||
         mask.afterDiagonal(c0 + keys - 1, r0) ||
         c0 < mask.keyBegin(r0 + rows - 1);
}

template <class A> TESSEL_HD A attnNegInf() { return -A(INFINITY); }

TESSEL_HD float attnExp(float x) { return expf(x); }
TESSEL_HD double attnExp(double x) { return exp(x); }
TESSEL_HD float attnLog(float x) { return logf(x); }
TESSEL_HD double attnLog(double x) { return log(x); }

/// The online softmax of one score row, over key tiles in order: the
/// running max m and the running sum l of e^(s - m). A row with no visible
/// key so far has m = -inf and l = 0 (only rows past seq stay so).
template <class A> struct OnlineRow {
  A m, l;

  TESSEL_HD static OnlineRow start() { return {attnNegInf<A>(), A(0)}; }
  /// Moves the max to cover a tile whose largest score is tileMax; returns
  /// the factor the sum so far and the output row are rescaled by.
  TESSEL_HD A rescale(A tileMax) {
    A next = tileMax > m ? tileMax : m;
    A alpha = m == attnNegInf<A>() ? A(0) : attnExp(m - next);
    m = next;
    l *= alpha;
    return alpha;
  }
  /// The unnormalised weight of score s (0 for a masked score, -inf).
  TESSEL_HD A weight(A s) const {
    return s == attnNegInf<A>() ? A(0) : attnExp(s - m);
  }
  TESSEL_HD void add(A tileSum) { l += tileSum; }
  /// 1 / l, what the output row is multiplied by at the end.
  TESSEL_HD A inverse() const { return l > A(0) ? A(1) / l : A(0); }
  /// m + log l (natural log, of the scaled scores): the backward's
  /// probabilities are e^(s - lse). -inf for a row that has seen no key,
  /// as tessel_attention_lse reports it.
  TESSEL_HD A logSumExp() const {
    return l > A(0) ? m + attnLog(l) : attnNegInf<A>();
  }
};

/// softmax(S)_ij recomputed from the row's log-sum-exp (0 when masked).
template <class A> TESSEL_HD A attnProb(bool visible, A s, A lse) {
  return visible ? attnExp(s - lse) : A(0);
}

/// dS_ij = P_ij (dP_ij − D_i), D_i = Σ_j P_ij dP_ij = dO_i · O_i.
template <class A> TESSEL_HD A attnScoreGrad(A p, A dp, A rowDot) {
  return p * (dp - rowDot);
}

/// The head-dim bucket a kernel instance is built for (both headDim and
/// valueDim at most it): 64, 128 or 256; 0 beyond what the backend runs.
TESSEL_HD int attnDimBucket(int64_t headDim, int64_t valueDim) {
  int64_t d = headDim > valueDim ? headDim : valueDim;
  return d <= 64 ? 64 : d <= 128 ? 128 : d <= 256 ? 256 : 0;
}
constexpr int64_t kAttnMaxDim = 256;

/// Tile sizes: `rows` query rows and `keys` keys per tile. Shared memory
/// holds whole rows of the bucket's width, so wide buckets and f64 take
/// smaller tiles (every configuration stays under ~150 KB).
struct AttnTiles {
  int rows, keys;
};
/// The forward and dQ kernels (a block per query tile, looping over keys).
constexpr AttnTiles attnQueryTiles(bool f64, int dim) {
  return f64 ? (dim <= 128 ? AttnTiles{32, 32} : AttnTiles{16, 16})
             : (dim <= 64    ? AttnTiles{64, 64}
                : dim <= 128 ? AttnTiles{64, 32}
                             : AttnTiles{32, 32});
}
/// The dK/dV kernel (a block per key tile, looping over query rows).
constexpr AttnTiles attnKeyTiles(bool f64, int dim) {
  return f64 ? (dim <= 128 ? AttnTiles{32, 32} : AttnTiles{16, 16})
             : (dim <= 64    ? AttnTiles{64, 64}
                : dim <= 128 ? AttnTiles{32, 64}
                             : AttnTiles{32, 32});
}
constexpr int kAttnThreads = 256;

/// How `threads` threads cover a rows x cols register tile: thread t owns
/// rows t / tx + i * ty and columns t % tx + j * tx, tx a power of two that
/// divides 32 (a row's owners are consecutive lanes of one warp), chosen to
/// make the rows + columns per thread (shared loads per multiply-add
/// step) smallest. 0 when no such cover exists.
constexpr int attnTileColumns(int rows, int cols, int threads) {
  int best = 0, bestCost = 1 << 30;
  for (int tx = 1; tx <= 32; tx *= 2) {
    int ty = threads / tx;
    if (cols % tx != 0 || ty == 0 || rows % ty != 0)
      continue;
    int cost = rows / ty + cols / tx;
    if (cost < bestCost) {
      best = tx;
      bestCost = cost;
    }
  }
  return best;
}

} // namespace cuda
} // namespace tessel

#endif // TESSEL_RUNTIME_CUDA_ATTENTION_MATH_H
