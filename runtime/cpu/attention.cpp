//===- attention.cpp - Multi-head attention with grouped KV heads ---------===//
//
// Per (batch, head): S = scale · Q·Kᵀ and O = softmax(S)·V as two GEMMs. The
// head slices are strided views of the [B, S, H, D] layout, which BLAS reads
// through its leading dimensions without any copy. Causal heads run in row
// blocks that skip the keys no row of the block sees; the f32 softmax in
// between is vectorised (vecmath.h), and its normalisation is applied to
// the rows of softmax(S)·V rather than to the wider score rows. Under a
// soft cap (Gemma 2) each seen score is capped, cap · tanh(s / cap), before
// the softmax.
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
using tessel::AttnMask;

namespace {

/// The softmax of a block of `rows` score rows (row stride ld; the first
/// is query row `first` of the head, and column 0 key `keys.begin`) in two
/// halves around the P·V product: expRows leaves the unnormalised weights
/// e^(x - max) in place and the reciprocal of each row's sum in `inv` (and,
/// with `lse`, max + log Σ), and scaleRows applies those to the rows of the
/// product, which are narrower (value_dim) than the score rows and no
/// longer wait on the sum. The keys a row does not see (AttnMask) get
/// exactly zero weight; a row that sees none, zero output and lse -inf.
/// The max is subtracted first, so e^(x - max) is in (0, 1] and cannot
/// overflow.
void expRows(double *p, int64_t first, int64_t rows, KeySpan keys, int64_t ld,
             AttnMask mask, double *inv, double *lse) {
  for (int64_t r = 0; r < rows; ++r) {
    double *row = p + r * ld;
    RowSpan span = keys.row(mask, first + r);
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t j = span.lo; j < span.hi; ++j)
      mx = std::max(mx, row[j]);
    double sum = 0.0;
    for (int64_t j = span.lo; j < span.hi; ++j) {
      row[j] = std::exp(row[j] - mx);
      sum += row[j];
    }
    inv[r] = sum > 0.0 ? 1.0 / sum : 0.0;
    if (lse)
      lse[r] = sum > 0.0 ? mx + std::log(sum)
                         : -std::numeric_limits<double>::infinity();
    std::fill(row, row + span.lo, 0.0);
    std::fill(row + span.hi, row + keys.width, 0.0);
  }
}

/// The same for f32, vectorised (AVX2 + FMA where the host has them). Each
/// row's exponentials run over its keys rounded up to whole vectors (the
/// lanes past its last key give 0), so the loops have no scalar tails.
void expRows(float *p, int64_t first, int64_t rows, KeySpan keys, int64_t ld,
             AttnMask mask, float *inv, float *lse) {
  dispatch([&]() TESSEL_INLINE {
    for (int64_t r = 0; r < rows; ++r) {
      float *row = p + r * ld;
      RowSpan span = keys.row(mask, first + r);
      int64_t seen = span.hi - span.lo;
      // e^ over whole vectors from the first key seen, plain zeros around.
      int64_t width =
          std::min(keys.width - span.lo, (seen + kLanes - 1) / kLanes * kLanes);
      float mx = rowMax(row + span.lo, seen);
      double sum =
          seen > 0 ? expSum(row + span.lo, row + span.lo, width, seen, mx) : 0;
      inv[r] = sum > 0.0 ? float(1.0 / sum) : 0.0f;
      if (lse)
        lse[r] = sum > 0.0 ? float(double(mx) + std::log(sum))
                           : -std::numeric_limits<float>::infinity();
      std::fill(row, row + span.lo, 0.0f);
      std::fill(row + span.lo + width, row + keys.width, 0.0f);
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

/// Causal rows go through the two GEMMs in blocks of kCausalRows rows, so
/// that a block multiplies only the keys some row of it sees: about 1/4
/// fewer GEMM flops at 64 rows, close to 1/2 for long sequences, and under
/// a sliding window a band of window + kCausalRows keys whatever the
/// length. (Smaller blocks save more flops but make BLAS calls too small
/// to run at speed.)

/// lse, when not null, gets each row's max + log Σ ([B, H, S]).
template <class R>
void attentionReal(const R *q, const R *k, const R *v, R *o, R *lse,
                   int64_t batch, int64_t seq, int64_t kvSeq, int64_t heads,
                   int64_t kvHeads, int64_t dim, int64_t vdim, double scale,
                   AttnMask mask) {
  AttentionLayout at{seq, kvSeq, heads, kvHeads, dim, vdim};
  int64_t ldq = at.ldq(), ldk = at.ldk(), ldv = at.ldv(), ldo = at.ldo();
  // One block's score buffer for the call, reused by every block, and the
  // rows' reciprocal sums.
  ScoreBlocks blocks = ScoreBlocks::of(mask, seq, kvSeq);
  int64_t rowBlock = blocks.rows, ld = blocks.ld;
  std::vector<R> p(blocks.size()), inv(static_cast<size_t>(seq));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      const R *qb = q + at.queryHead(b, h, dim);
      const R *kb = k + at.kvHead(b, h, dim);
      const R *vb = v + at.kvHead(b, h, vdim);
      R *ob = o + at.queryHead(b, h, vdim);
      R *lseb = lse ? lse + (b * heads + h) * seq : nullptr;
      for (int64_t i0 = 0; i0 < seq; i0 += rowBlock) {
        int64_t rows = std::min(rowBlock, seq - i0);
        KeySpan keys = KeySpan::of(mask, i0, rows, kvSeq);
        R *pb = p.data();
        // With dim = 0 the dot products are empty: gemm writes zeros.
        gemm(false, true, rows, keys.width, dim, R(scale), qb + i0 * ldq, ldq,
             kb + keys.begin * ldk, ldk, pb, ld);
        if (mask.softcap > 0)
          capRows(pb, i0, rows, keys, ld, mask, nullptr);
        expRows(pb, i0, rows, keys, ld, mask, inv.data(),
                lseb ? lseb + i0 : nullptr);
        gemm(false, false, rows, vdim, keys.width, R(1), pb, ld,
             vb + keys.begin * ldv, ldv, ob + i0 * ldo, ldo);
        scaleRows(ob + i0 * ldo, rows, vdim, ldo, inv.data());
      }
    }
  }
}

template <class R>
void capRowsReal(R *s, int64_t first, int64_t rows, KeySpan keys, int64_t ld,
                 AttnMask mask, R *slope) {
  const R cap = R(mask.softcap);
  for (int64_t r = 0; r < rows; ++r) {
    R *row = s + r * ld;
    RowSpan span = keys.row(mask, first + r);
    for (int64_t j = span.lo; j < span.hi; ++j)
      row[j] = tessel::softcapValue(row[j], cap);
    if (!slope)
      continue;
    R *sr = slope + r * ld;
    std::fill(sr, sr + keys.width, R(0));
    for (int64_t j = span.lo; j < span.hi; ++j)
      sr[j] = tessel::softcapSlope(row[j], cap);
  }
}

} // namespace

void tessel::cpu::capRows(float *s, int64_t first, int64_t rows, KeySpan keys,
                          int64_t ld, AttnMask mask, float *slope) {
  capRowsReal(s, first, rows, keys, ld, mask, slope);
}

void tessel::cpu::capRows(double *s, int64_t first, int64_t rows, KeySpan keys,
                          int64_t ld, AttnMask mask, double *slope) {
  capRowsReal(s, first, rows, keys, ld, mask, slope);
}

void tessel::cpu::probRows(double *p, int64_t first, int64_t rows, KeySpan keys,
                           int64_t ld, AttnMask mask, const double *lse) {
  for (int64_t r = 0; r < rows; ++r) {
    double *row = p + r * ld;
    RowSpan span = keys.row(mask, first + r);
    for (int64_t j = span.lo; j < span.hi; ++j)
      row[j] = std::exp(row[j] - lse[r]);
    std::fill(row, row + span.lo, 0.0);
    std::fill(row + span.hi, row + keys.width, 0.0);
  }
}

void tessel::cpu::probRows(float *p, int64_t first, int64_t rows, KeySpan keys,
                           int64_t ld, AttnMask mask, const float *lse) {
  dispatch([&]() TESSEL_INLINE {
    for (int64_t r = 0; r < rows; ++r) {
      float *row = p + r * ld;
      RowSpan span = keys.row(mask, first + r);
      int64_t seen = span.hi - span.lo;
      int64_t width =
          std::min(keys.width - span.lo, (seen + kLanes - 1) / kLanes * kLanes);
      if (seen > 0)
        expSum(row + span.lo, row + span.lo, width, seen, lse[r]);
      std::fill(row, row + span.lo, 0.0f);
      std::fill(row + span.lo + width, row + keys.width, 0.0f);
    }
  });
}

void CpuBackend::attention(tessel_ctx *, int32_t dtype, const void *q,
                           const void *k, const void *v, void *out, void *lse,
                           int64_t batch, int64_t seq, int64_t kv_seq,
                           int64_t heads, int64_t kv_heads, int64_t head_dim,
                           int64_t value_dim, double scale, AttnMask mask) {
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
  switch (dtype) {
  case TESSEL_F32:
    attentionReal(static_cast<const float *>(q), static_cast<const float *>(k),
                  static_cast<const float *>(v), static_cast<float *>(out),
                  static_cast<float *>(lse), batch, seq, kv_seq, heads,
                  kv_heads, head_dim, value_dim, scale, mask);
    return;
  case TESSEL_F64:
    attentionReal(static_cast<const double *>(q),
                  static_cast<const double *>(k),
                  static_cast<const double *>(v), static_cast<double *>(out),
                  static_cast<double *>(lse), batch, seq, kv_seq, heads,
                  kv_heads, head_dim, value_dim, scale, mask);
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
                  kv_heads, head_dim, value_dim, scale, mask);
    T *o = static_cast<T *>(out);
    for (int64_t i = 0; i < outCount; ++i)
      o[i] = Elem<T>::store(fo[size_t(i)]);
  });
}
