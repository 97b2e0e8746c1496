//===- grad_attention.cpp - Backward of multi-head attention --------------===//
//
// Per (batch, head), with P = softmax(scale · Q·Kᵀ) recomputed (causal keys
// masked to exactly zero weight):
//   dV  += Pᵀ · dO
//   dP   = dO · Vᵀ
//   dS   = P ⊙ (dP − rowsum(dP ⊙ P))
//   dQ   = scale · dS · K
//   dK  += scale · dSᵀ · Q
// dK and dV accumulate (GEMM beta = 1) over the query heads of a kv head
// (and a causal head's row blocks), in order, so the result is
// deterministic. The head slices are strided views of the [B, S, H, D]
// layouts, read through BLAS leading dimensions. Causal heads run in blocks
// of query rows, each through only the keys its last row sees (a quarter of
// the GEMM flops fewer at 64 positions), as the forward does.
//
//===----------------------------------------------------------------------===//

#include "cpu/backend.h"
#include "cpu/internal.h"
#include "cpu/vecmath.h"

#include <algorithm>
#include <climits>
#include <vector>

using namespace tessel::cpu;

namespace {

/// dS = P ⊙ (dP − rowsum(dP ⊙ P)) in place of dP, for `rows` rows of
/// `cols` (row stride ld). f32: the row dot in f32 lanes flushed into f64
/// (vecmath.h's kBlock), vectorised on AVX2 + FMA where the host has them.
void softmaxBackRows(const float *p, float *dp, int64_t rows, int64_t cols,
                     int64_t ld) {
  dispatch([&]() TESSEL_INLINE {
    for (int64_t i = 0; i < rows; ++i) {
      const float *pr = p + i * ld;
      float *dr = dp + i * ld;
      F64x4 lo = {}, hi = {};
      int64_t j = 0, whole = cols - cols % kLanes;
      while (j < whole) {
        F32x8 acc = {};
        int64_t end = std::min(whole, j + kBlock);
        for (; j < end; j += kLanes) {
          F32x8 pv, dv;
          load8(pv, pr + j);
          load8(dv, dr + j);
          acc += pv * dv;
        }
        flushWide(lo, hi, acc);
      }
      double dot = sumWide(lo, hi);
      for (; j < cols; ++j)
        dot += double(pr[j] * dr[j]);
      float d = float(dot);
      for (j = 0; j < cols; ++j)
        dr[j] = pr[j] * (dr[j] - d);
    }
  });
}

void softmaxBackRows(const double *p, double *dp, int64_t rows, int64_t cols,
                     int64_t ld) {
  for (int64_t i = 0; i < rows; ++i) {
    const double *pr = p + i * ld;
    double *dr = dp + i * ld;
    double dot = 0.0;
    for (int64_t j = 0; j < cols; ++j)
      dot += pr[j] * dr[j];
    for (int64_t j = 0; j < cols; ++j)
      dr[j] = pr[j] * (dr[j] - dot);
  }
}

/// Causal heads run in blocks of this many query rows, each touching only
/// the keys its last row sees, as in the forward (attention.cpp).

/// dq is overwritten; dk and dv must hold zeros (they accumulate).
template <class R>
void attentionGradReal(const R *q, const R *k, const R *v, const R *dout, R *dq,
                       R *dk, R *dv, int64_t batch, int64_t seq, int64_t kvSeq,
                       int64_t heads, int64_t kvHeads, int64_t dim,
                       int64_t vdim, double scale, bool causal) {
  AttentionLayout at{seq, kvSeq, heads, kvHeads, dim, vdim};
  int64_t ldq = at.ldq(), ldk = at.ldk(), ldv = at.ldv(), ldo = at.ldo();
  int64_t ldp = std::max<int64_t>(kvSeq, 1);
  std::vector<R> p(static_cast<size_t>(seq * kvSeq)),
      dp(static_cast<size_t>(seq * kvSeq)), inv(static_cast<size_t>(seq));
  int64_t rowBlock = causal ? kCausalRows : seq;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      const R *qb = q + at.queryHead(b, h, dim);
      const R *kb = k + at.kvHead(b, h, dim);
      const R *vb = v + at.kvHead(b, h, vdim);
      const R *dob = dout + at.queryHead(b, h, vdim);
      R *dqb = dq + at.queryHead(b, h, dim);
      R *dkb = dk + at.kvHead(b, h, dim);
      R *dvb = dv + at.kvHead(b, h, vdim);
      for (int64_t i0 = 0; i0 < seq; i0 += rowBlock) {
        int64_t rows = std::min(rowBlock, seq - i0);
        // Keys any row of the block sees: row i sees [0, min(i + 1, kvSeq));
        // the others have zero weight and zero gradient.
        int64_t keys = causal ? std::min(i0 + rows, kvSeq) : kvSeq;
        R *pb = p.data() + i0 * ldp, *dpb = dp.data() + i0 * ldp;
        const R *qi = qb + i0 * ldq, *doi = dob + i0 * ldo;
        // Scores, then the masked softmax in place.
        gemm(false, true, rows, keys, dim, R(scale), qi, ldq, kb, ldk, pb, ldp,
             R(0));
        expRows(pb, i0, rows, keys, ldp, causal, inv.data());
        scaleRows(pb, rows, keys, ldp, inv.data());
        // dV += Pᵀ · dO.
        gemm(true, false, keys, vdim, rows, R(1), pb, ldp, doi, ldo, dvb, ldv,
             R(1));
        // dP = dO · Vᵀ, then dS = P ⊙ (dP − rowsum(dP ⊙ P)) in its place.
        gemm(false, true, rows, keys, vdim, R(1), doi, ldo, vb, ldv, dpb, ldp,
             R(0));
        softmaxBackRows(pb, dpb, rows, keys, ldp);
        // dQ = scale · dS · K;  dK += scale · dSᵀ · Q.
        gemm(false, false, rows, dim, keys, R(scale), dpb, ldp, kb, ldk,
             dqb + i0 * ldq, ldq, R(0));
        gemm(true, false, keys, dim, rows, R(scale), dpb, ldp, qi, ldq, dkb,
             ldk, R(1));
      }
    }
  }
}

} // namespace

void CpuBackend::attentionGrad(tessel_ctx *, int32_t dtype, const void *q,
                               const void *k, const void *v, const void *dout,
                               void *dq, void *dk, void *dv, int64_t batch,
                               int64_t seq, int64_t kv_seq, int64_t heads,
                               int64_t kv_heads, int64_t head_dim,
                               int64_t value_dim, double scale, bool causal) {
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
  const bool c = causal;
  switch (dtype) {
  case TESSEL_F32:
    attentionGradReal(
        static_cast<const float *>(q), static_cast<const float *>(k),
        static_cast<const float *>(v), static_cast<const float *>(dout),
        static_cast<float *>(dq), static_cast<float *>(dk),
        static_cast<float *>(dv), batch, seq, kv_seq, heads, kv_heads, head_dim,
        value_dim, scale, c);
    return;
  case TESSEL_F64:
    attentionGradReal(
        static_cast<const double *>(q), static_cast<const double *>(k),
        static_cast<const double *>(v), static_cast<const double *>(dout),
        static_cast<double *>(dq), static_cast<double *>(dk),
        static_cast<double *>(dv), batch, seq, kv_seq, heads, kv_heads,
        head_dim, value_dim, scale, c);
    return;
  default:
    break;
  }
  // 16-bit: widen to f32, compute, round each gradient once.
  visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    std::vector<float> fq = widen<T>(q, qCount), fk = widen<T>(k, kCount),
                       fv = widen<T>(v, vCount), fo = widen<T>(dout, oCount);
    std::vector<float> gq(static_cast<size_t>(qCount)),
        gk(static_cast<size_t>(kCount)), gv(static_cast<size_t>(vCount));
    attentionGradReal(fq.data(), fk.data(), fv.data(), fo.data(), gq.data(),
                      gk.data(), gv.data(), batch, seq, kv_seq, heads, kv_heads,
                      head_dim, value_dim, scale, c);
    auto store = [](const std::vector<float> &src, void *dst) {
      T *d = static_cast<T *>(dst);
      for (size_t i = 0; i < src.size(); ++i)
        d[i] = Elem<T>::store(src[i]);
    };
    store(gq, dq);
    store(gk, dk);
    store(gv, dv);
  });
}
