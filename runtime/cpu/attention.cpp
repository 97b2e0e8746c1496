//===- attention.cpp - Multi-head attention with grouped KV heads ---------===//
//
// Per (batch, head): S = scale · Q·Kᵀ and O = softmax(S)·V as two GEMMs. The
// head slices are strided views of the [B, S, H, D] layout, which BLAS reads
// through its leading dimensions without any copy. Causal heads run in row
// blocks that skip the keys no row of the block sees; the f32 softmax in
// between is vectorised (vecmath.h), and its normalisation is applied to
// the rows of softmax(S)·V rather than to the wider score rows.
//
//===----------------------------------------------------------------------===//

#include "cpu/backend.h"
#include "cpu/internal.h"
#include "cpu/vecmath.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

using namespace tessel::cpu;

namespace {

/// The softmax of a block of `rows` score rows (row stride kvSeq; the
/// first is row `first` of the head) in two halves around the P·V product:
/// expRows leaves the unnormalised weights e^(x - max) in place and the
/// reciprocal of each row's sum in `inv` (and, with `lse`, max + log Σ),
/// and scaleRows applies those to the rows of the product, which are
/// narrower (value_dim) than the score rows and no longer wait on the sum.
/// A causal row i sees keys [0, i] only; the keys it does not see get
/// exactly zero weight. The max is subtracted first, so e^(x - max) is in
/// (0, 1] and cannot overflow.
void expRows(double *p, int64_t first, int64_t rows, int64_t keys,
             int64_t kvSeq, bool causal, double *inv, double *lse) {
  for (int64_t r = 0; r < rows; ++r) {
    double *row = p + r * kvSeq;
    int64_t limit = causal ? std::min(first + r + 1, keys) : keys;
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < limit; ++j)
      mx = std::max(mx, row[j]);
    double sum = 0.0;
    for (int64_t j = 0; j < limit; ++j) {
      row[j] = std::exp(row[j] - mx);
      sum += row[j];
    }
    inv[r] = 1.0 / sum;
    if (lse)
      lse[r] = mx + std::log(sum);
    std::fill(row + limit, row + keys, 0.0);
  }
}

/// The same for f32, vectorised (AVX2 + FMA where the host has them). Each
/// row's exponentials run up to its limit rounded up to whole vectors (the
/// lanes past the limit give 0), so the loops have no scalar tails.
void expRows(float *p, int64_t first, int64_t rows, int64_t keys,
             int64_t kvSeq, bool causal, float *inv, float *lse) {
  dispatch([&]() TESSEL_INLINE {
    for (int64_t r = 0; r < rows; ++r) {
      float *row = p + r * kvSeq;
      int64_t limit = causal ? std::min(first + r + 1, keys) : keys;
      // e^ over whole vectors up to the limit, plain zeros after it.
      int64_t width = std::min(keys, (limit + kLanes - 1) / kLanes * kLanes);
      float mx = rowMax(row, limit);
      double sum = expSum(row, row, width, limit, mx);
      inv[r] = float(1.0 / sum);
      if (lse)
        lse[r] = float(double(mx) + std::log(sum));
      for (int64_t j = width; j < keys; ++j)
        row[j] = 0.0f;
    }
  });
}

template <class R>
void scaleRows(R *o, int64_t rows, int64_t cols, int64_t ld, const R *inv) {
  auto loop = [&]() TESSEL_INLINE {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < cols; ++j)
        o[r * ld + j] *= inv[r];
  };
  if constexpr (std::is_same<R, float>::value)
    dispatch(loop);
  else
    loop();
}

/// Causal rows go through the two GEMMs in blocks of this many rows, so
/// that a block multiplies only the keys its last row sees: about 1/4 fewer
/// GEMM flops at 64 rows, close to 1/2 for long sequences. (Smaller blocks
/// save more flops but make BLAS calls too small to run at speed.)

/// lse, when not null, gets each row's max + log Σ ([B, H, S]).
template <class R>
void attentionReal(const R *q, const R *k, const R *v, R *o, R *lse,
                   int64_t batch, int64_t seq, int64_t kvSeq, int64_t heads,
                   int64_t kvHeads, int64_t dim, int64_t vdim, double scale,
                   bool causal) {
  AttentionLayout at{seq, kvSeq, heads, kvHeads, dim, vdim};
  int64_t ldq = at.ldq(), ldk = at.ldk(), ldv = at.ldv(), ldo = at.ldo();
  // One [seq, kvSeq] score buffer for the call, reused by every head, and
  // the rows' reciprocal sums.
  std::vector<R> p(static_cast<size_t>(seq * kvSeq)),
      inv(static_cast<size_t>(seq));
  int64_t rowBlock = causal ? kCausalRows : seq;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      const R *qb = q + at.queryHead(b, h, dim);
      const R *kb = k + at.kvHead(b, h, dim);
      const R *vb = v + at.kvHead(b, h, vdim);
      R *ob = o + at.queryHead(b, h, vdim);
      R *lseb = lse ? lse + (b * heads + h) * seq : nullptr;
      for (int64_t i0 = 0; i0 < seq; i0 += rowBlock) {
        int64_t rows = std::min(rowBlock, seq - i0);
        // Keys any row of the block sees: row i sees [0, min(i + 1, kvSeq)).
        int64_t keys = causal ? std::min(i0 + rows, kvSeq) : kvSeq;
        R *pb = p.data() + i0 * kvSeq;
        // With dim = 0 the dot products are empty: gemm writes zeros.
        gemm(false, true, rows, keys, dim, R(scale), qb + i0 * ldq, ldq, kb,
             ldk, pb, kvSeq);
        expRows(pb, i0, rows, keys, kvSeq, causal, inv.data(),
                lseb ? lseb + i0 : nullptr);
        gemm(false, false, rows, vdim, keys, R(1), pb, kvSeq, vb, ldv,
             ob + i0 * ldo, ldo);
        scaleRows(ob + i0 * ldo, rows, vdim, ldo, inv.data());
      }
    }
  }
}

} // namespace

void tessel::cpu::probRows(double *p, int64_t first, int64_t rows,
                           int64_t keys, int64_t ld, bool causal,
                           const double *lse) {
  for (int64_t r = 0; r < rows; ++r) {
    double *row = p + r * ld;
    int64_t limit = causal ? std::min(first + r + 1, keys) : keys;
    for (int64_t j = 0; j < limit; ++j)
      row[j] = std::exp(row[j] - lse[r]);
    std::fill(row + limit, row + keys, 0.0);
  }
}

void tessel::cpu::probRows(float *p, int64_t first, int64_t rows,
                           int64_t keys, int64_t ld, bool causal,
                           const float *lse) {
  dispatch([&]() TESSEL_INLINE {
    for (int64_t r = 0; r < rows; ++r) {
      float *row = p + r * ld;
      int64_t limit = causal ? std::min(first + r + 1, keys) : keys;
      int64_t width = std::min(keys, (limit + kLanes - 1) / kLanes * kLanes);
      expSum(row, row, width, limit, lse[r]);
      for (int64_t j = width; j < keys; ++j)
        row[j] = 0.0f;
    }
  });
}

void CpuBackend::attention(tessel_ctx *, int32_t dtype, const void *q,
                           const void *k, const void *v, void *out, void *lse,
                           int64_t batch, int64_t seq, int64_t kv_seq,
                           int64_t heads, int64_t kv_heads, int64_t head_dim,
                           int64_t value_dim, double scale, bool causal) {
  int64_t outCount = batch * seq * heads * value_dim;
  int64_t rowCount = batch * heads * seq;
  if (kv_seq == 0) {
    // No keys: every weighted sum is empty, every denominator 0.
    if (outCount > 0)
      std::memset(out, 0, size_t(outCount * tessel_dtype_size(dtype)));
    if (lse && dtype == TESSEL_F64)
      std::fill_n(static_cast<double *>(lse), rowCount,
                  -std::numeric_limits<double>::infinity());
    else if (lse)
      std::fill_n(static_cast<float *>(lse), rowCount,
                  -std::numeric_limits<float>::infinity());
    return;
  }
  if (rowCount == 0)
    return; // (value_dim = 0 still has each row's lse to write)
  const bool c = causal;
  switch (dtype) {
  case TESSEL_F32:
    attentionReal(static_cast<const float *>(q), static_cast<const float *>(k),
                  static_cast<const float *>(v), static_cast<float *>(out),
                  static_cast<float *>(lse), batch, seq, kv_seq, heads,
                  kv_heads, head_dim, value_dim, scale, c);
    return;
  case TESSEL_F64:
    attentionReal(
        static_cast<const double *>(q), static_cast<const double *>(k),
        static_cast<const double *>(v), static_cast<double *>(out),
        static_cast<double *>(lse), batch, seq, kv_seq, heads, kv_heads,
        head_dim, value_dim, scale, c);
    return;
  default:
    break;
  }
  visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    std::vector<float> fq = widen<T>(q, batch * seq * heads * head_dim);
    std::vector<float> fk = widen<T>(k, batch * kv_seq * kv_heads * head_dim);
    std::vector<float> fv = widen<T>(v, batch * kv_seq * kv_heads * value_dim);
    std::vector<float> fo(static_cast<size_t>(outCount));
    attentionReal(fq.data(), fk.data(), fv.data(), fo.data(),
                  static_cast<float *>(lse), batch, seq, kv_seq, heads,
                  kv_heads, head_dim, value_dim, scale, c);
    T *o = static_cast<T *>(out);
    for (int64_t i = 0; i < outCount; ++i)
      o[i] = Elem<T>::store(fo[size_t(i)]);
  });
}
