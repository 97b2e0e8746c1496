//===- grad_attention.cpp - Backward of multi-head attention --------------===//
//
// Per (batch, head), from the forward's output O and log-sum-exp per row
// (tessel_attention_lse), without running the forward again:
//   P    = e^(scale · Q·Kᵀ − lse)     (masked keys: exactly zero weight)
//          (under a soft cap, e^(cap(scale · Q·Kᵀ) − lse))
//   dV  += Pᵀ · dO
//   D    = rowsum(dO ⊙ O)            (= rowsum(dP ⊙ P), O being P·V)
//   dS   = P ⊙ (dO · Vᵀ − D)           (⊙ the cap's slope 1 − tanh²)
//   dQ   = scale · dS · K
//   dK  += scale · dSᵀ · Q
// dK and dV accumulate (GEMM beta = 1) over the query heads of a kv head
// (and a causal head's row blocks), in order, so the result is
// deterministic. The head slices are strided views of the [B, S, H, D]
// layouts, read through BLAS leading dimensions. Causal heads run in blocks
// of query rows, each through only the keys its rows see (a quarter of the
// GEMM flops fewer at 64 positions; a band under a sliding window), as the
// forward does. A model of
// ABI 10 or older (tessel_attention_grad) gives no O or lse: the forward
// runs for them first, into temporaries.
//
//===----------------------------------------------------------------------===//

#include "cpu/backend.h"
#include "cpu/internal.h"
#include "cpu/vecmath.h"

#include <algorithm>
#include <climits>
#include <vector>

using namespace tessel::cpu;
using tessel::AttnMask;

namespace {

/// dS = P ⊙ (dP − D) in place of dP, for `rows` rows of `cols` (row
/// stride ld), D per row in `rowDot`; with `slope` (a soft cap's
/// derivative, capRows), times it.
template <class R>
void scoreGradRows(const R *p, R *dp, int64_t rows, int64_t cols, int64_t ld,
                   const R *rowDot, const R *slope) {
  auto loop = [&]() TESSEL_INLINE {
    for (int64_t i = 0; i < rows; ++i) {
      const R *pr = p + i * ld;
      R *dr = dp + i * ld;
      R d = rowDot[i];
      for (int64_t j = 0; j < cols; ++j)
        dr[j] = pr[j] * (dr[j] - d);
      if (slope)
        for (int64_t j = 0; j < cols; ++j)
          dr[j] *= slope[i * ld + j];
    }
  };
  if constexpr (std::is_same<R, float>::value)
    dispatch(loop);
  else
    loop();
}

/// D_i = dO_i · O_i for the `seq` rows of one head (row stride ld), summed
/// in f64 and rounded once.
template <class R>
void rowDots(const R *dout, const R *out, int64_t seq, int64_t vdim,
             int64_t ld, R *rowDot) {
  for (int64_t i = 0; i < seq; ++i) {
    double dot = 0.0;
    for (int64_t e = 0; e < vdim; ++e)
      dot += double(dout[i * ld + e]) * double(out[i * ld + e]);
    rowDot[i] = R(dot);
  }
}

/// dq is overwritten; dk and dv must hold zeros (they accumulate).
template <class R>
void attentionGradReal(const R *q, const R *k, const R *v, const R *out,
                       const R *lse, const R *dout, R *dq, R *dk, R *dv,
                       int64_t batch, int64_t seq, int64_t kvSeq, int64_t heads,
                       int64_t kvHeads, int64_t dim, int64_t vdim, double scale,
                       AttnMask mask) {
  AttentionLayout at{seq, kvSeq, heads, kvHeads, dim, vdim};
  int64_t ldq = at.ldq(), ldk = at.ldk(), ldv = at.ldv(), ldo = at.ldo();
  // One block's probabilities and score gradients, reused by every block.
  ScoreBlocks blocks = ScoreBlocks::of(mask, seq, kvSeq);
  int64_t rowBlock = blocks.rows, ldp = blocks.ld;
  std::vector<R> p(blocks.size()), dp(blocks.size()),
      slope(mask.softcap > 0 ? blocks.size() : 0),
      rowDot(static_cast<size_t>(seq));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      const R *qb = q + at.queryHead(b, h, dim);
      const R *kb = k + at.kvHead(b, h, dim);
      const R *vb = v + at.kvHead(b, h, vdim);
      const R *dob = dout + at.queryHead(b, h, vdim);
      R *dqb = dq + at.queryHead(b, h, dim);
      R *dkb = dk + at.kvHead(b, h, dim);
      R *dvb = dv + at.kvHead(b, h, vdim);
      const R *lseb = lse + (b * heads + h) * seq;
      rowDots(dob, out + at.queryHead(b, h, vdim), seq, vdim, ldo,
              rowDot.data());
      for (int64_t i0 = 0; i0 < seq; i0 += rowBlock) {
        int64_t rows = std::min(rowBlock, seq - i0);
        // Keys some row of the block sees; the others have zero weight and
        // zero gradient.
        KeySpan keys = KeySpan::of(mask, i0, rows, kvSeq);
        int64_t n = keys.width;
        R *pb = p.data(), *dpb = dp.data();
        const R *qi = qb + i0 * ldq, *doi = dob + i0 * ldo;
        const R *ki = kb + keys.begin * ldk, *vi = vb + keys.begin * ldv;
        R *dki = dkb + keys.begin * ldk, *dvi = dvb + keys.begin * ldv;
        // Scores (capped, keeping the cap's slope), then the probabilities
        // in place.
        gemm(false, true, rows, n, dim, R(scale), qi, ldq, ki, ldk, pb, ldp,
             R(0));
        R *slopeb = slope.empty() ? nullptr : slope.data();
        if (slopeb)
          capRows(pb, i0, rows, keys, ldp, mask, slopeb);
        probRows(pb, i0, rows, keys, ldp, mask, lseb + i0);
        // dV += Pᵀ · dO.
        gemm(true, false, n, vdim, rows, R(1), pb, ldp, doi, ldo, dvi, ldv,
             R(1));
        // dP = dO · Vᵀ, then dS = P ⊙ (dP − D) in its place.
        gemm(false, true, rows, n, vdim, R(1), doi, ldo, vi, ldv, dpb, ldp,
             R(0));
        scoreGradRows(pb, dpb, rows, n, ldp, rowDot.data() + i0, slopeb);
        // dQ = scale · dS · K;  dK += scale · dSᵀ · Q.
        gemm(false, false, rows, dim, n, R(scale), dpb, ldp, ki, ldk,
             dqb + i0 * ldq, ldq, R(0));
        gemm(true, false, n, dim, rows, R(scale), dpb, ldp, qi, ldq, dki, ldk,
             R(1));
      }
    }
  }
}

} // namespace

void CpuBackend::attentionGrad(tessel_ctx *ctx, int32_t dtype, const void *q,
                               const void *k, const void *v, const void *out,
                               const void *lse, const void *dout, void *dq,
                               void *dk, void *dv, int64_t batch, int64_t seq,
                               int64_t kv_seq, int64_t heads, int64_t kv_heads,
                               int64_t head_dim, int64_t value_dim,
                               double scale, AttnMask mask) {
  int64_t es = tessel_dtype_size(dtype);
  int64_t qCount = batch * seq * heads * head_dim;
  int64_t kCount = batch * kv_seq * kv_heads * head_dim;
  int64_t vCount = batch * kv_seq * kv_heads * value_dim;
  int64_t oCount = batch * seq * heads * value_dim;
  // Every gradient is overwritten: zero them, so the empty cases (no keys,
  // no queries) are done and dk/dv can accumulate.
  if (qCount > 0)
    std::memset(dq, 0, size_t(qCount * es));
  if (kCount > 0)
    std::memset(dk, 0, size_t(kCount * es));
  if (vCount > 0)
    std::memset(dv, 0, size_t(vCount * es));
  if (batch * heads * seq * kv_seq == 0)
    return;
  // ABI 10 and older: no saved output or lse, so the forward runs first
  // (into doubles: storage aligned for every dtype).
  std::vector<double> forwardOut, forwardLse;
  if (!out || !lse) {
    forwardOut.resize(size_t((oCount * es + 7) / 8));
    forwardLse.resize(size_t(batch * heads * seq));
    attention(ctx, dtype, q, k, v, forwardOut.data(), forwardLse.data(), batch,
              seq, kv_seq, heads, kv_heads, head_dim, value_dim, scale, mask);
    out = forwardOut.data();
    lse = forwardLse.data();
  }
  switch (dtype) {
  case TESSEL_F32:
    attentionGradReal(
        static_cast<const float *>(q), static_cast<const float *>(k),
        static_cast<const float *>(v), static_cast<const float *>(out),
        static_cast<const float *>(lse), static_cast<const float *>(dout),
        static_cast<float *>(dq), static_cast<float *>(dk),
        static_cast<float *>(dv), batch, seq, kv_seq, heads, kv_heads, head_dim,
        value_dim, scale, mask);
    return;
  case TESSEL_F64:
    attentionGradReal(
        static_cast<const double *>(q), static_cast<const double *>(k),
        static_cast<const double *>(v), static_cast<const double *>(out),
        static_cast<const double *>(lse), static_cast<const double *>(dout),
        static_cast<double *>(dq), static_cast<double *>(dk),
        static_cast<double *>(dv), batch, seq, kv_seq, heads, kv_heads,
        head_dim, value_dim, scale, mask);
    return;
  default:
    break;
  }
  // 16-bit: widen to f32 (lse is f32 already), compute, round each gradient
  // once.
  visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    std::vector<float> fq = widen<T>(q, qCount), fk = widen<T>(k, kCount),
                       fv = widen<T>(v, vCount), fo = widen<T>(out, oCount),
                       fd = widen<T>(dout, oCount);
    std::vector<float> gq(static_cast<size_t>(qCount)),
        gk(static_cast<size_t>(kCount)), gv(static_cast<size_t>(vCount));
    attentionGradReal(fq.data(), fk.data(), fv.data(), fo.data(),
                      static_cast<const float *>(lse), fd.data(), gq.data(),
                      gk.data(), gv.data(), batch, seq, kv_seq, heads, kv_heads,
                      head_dim, value_dim, scale, mask);
    roundInto(gq.data(), static_cast<T *>(dq), qCount);
    roundInto(gk.data(), static_cast<T *>(dk), kCount);
    roundInto(gv.data(), static_cast<T *>(dv), vCount);
  });
}
