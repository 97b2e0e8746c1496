//===- internal.h - Shared helpers of the Tessel CPU runtime ----*- C++ -*-===//
//
// Private to runtime/cpu: 16-bit float conversions, dtype dispatch, the
// BLAS wrappers and the attention layout the kernels share.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CPU_INTERNAL_H
#define TESSEL_RUNTIME_CPU_INTERNAL_H

#include "core/backend.h"
#include "core/rng.h"
#include "core/storage.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace tessel {
namespace cpu {

// The front's names the CPU sources use unqualified.
using tessel::Collective;
using tessel::commDeadline;
using tessel::Communicator;
using tessel::Group;
using tessel::groupMemberRank;
using tessel::groupOf;
using tessel::hash4;
using tessel::kDropoutDomain;
using tessel::kInitDomain;
using tessel::KernelScope;
using tessel::mix64;
using tessel::setCreateError;
using tessel::setError;
using tessel::setRecvSizeMismatch;
using tessel::setRecvTimeout;
using tessel::uniformOpen;

//===--- Element types (core/storage.h) -----------------------------------===//

using stored::bf16ToFloat;
using stored::BFloat;
using stored::bitsFloat;
using stored::doubleToFloatOdd;
using stored::Elem;
using stored::floatBits;
using stored::floatToBf16;
using stored::floatToHalf;
using stored::fromDouble;
using stored::Half;
using stored::halfToFloat;
using stored::visitAny;
using stored::visitFloat;

template <class T> constexpr bool isIntegral() {
  return std::is_integral<T>::value;
}

template <class T> inline double toDouble(T v) {
  return double(Elem<T>::load(v));
}

/// Widens `count` elements of a 16-bit float tensor into f32 `dst`.
template <class T> void widenInto(const T *src, float *dst, int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    dst[i] = Elem<T>::load(src[i]);
}

/// Widens `count` elements of a 16-bit float tensor to f32 scratch.
template <class T> std::vector<float> widen(const void *p, int64_t count) {
  std::vector<float> out(static_cast<size_t>(count));
  widenInto(static_cast<const T *>(p), out.data(), count);
  return out;
}

/// Rounds `count` f32 elements into `dst` of T (to nearest even, as
/// tessel_cast rounds).
template <class T> void roundInto(const float *src, T *dst, int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    dst[i] = Elem<T>::store(src[i]);
}

//===--- BLAS -------------------------------------------------------------===//

/// Row-major C = alpha · op(A) · op(B) + beta · C on OpenBLAS. An empty
/// product (k = 0) scales C by beta (zeroes it for beta = 0), which BLAS
/// does not promise for every implementation.
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
          const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
          int64_t ldc, float beta = 0.0f);
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
          const double *a, int64_t lda, const double *b, int64_t ldb,
          double *c, int64_t ldc, double beta = 0.0);

//===--- Attention's masked softmax (attention.cpp) -----------------------===//

/// Query rows per block of a causal head: a block only touches the keys its
/// last row sees. The forward and the gradient block the same way.
constexpr int64_t kCausalRows = 32;
/// Query rows per block of an unmasked head: every row sees every key, so
/// blocks only bound the score buffer (kDenseRows x kvSeq, not seq x
/// kvSeq) and stay large enough for BLAS to run at speed.
constexpr int64_t kDenseRows = 256;

/// The strided views both attention kernels read: q and out [B, S, H, *],
/// k and v [B, T, Hkv, *]; query head h reads kv head h / (H / Hkv). Leading
/// dimensions (in elements) of one head's rows, and the offset of a head's
/// first row.
struct AttentionLayout {
  int64_t seq, kvSeq, heads, kvHeads, dim, vdim;

  int64_t ldq() const { return std::max<int64_t>(heads * dim, 1); }
  int64_t ldk() const { return std::max<int64_t>(kvHeads * dim, 1); }
  int64_t ldv() const { return std::max<int64_t>(kvHeads * vdim, 1); }
  int64_t ldo() const { return std::max<int64_t>(heads * vdim, 1); }
  /// Query head h of batch b in a [B, S, H, width] tensor.
  int64_t queryHead(int64_t b, int64_t h, int64_t width) const {
    return (b * seq * heads + h) * width;
  }
  /// The kv head query head h reads, of batch b, in a [B, T, Hkv, width]
  /// tensor.
  int64_t kvHead(int64_t b, int64_t h, int64_t width) const {
    return (b * kvSeq * kvHeads + h / (heads / kvHeads)) * width;
  }
};

/// A row's visible keys within a block's KeySpan: columns [lo, hi), empty
/// (lo == hi) for a row that sees none.
struct RowSpan {
  int64_t lo, hi;
};

/// The keys [begin, begin + width) some row of a block of query rows sees:
/// the columns the block's GEMMs run over (AttnMask's ranges only grow
/// with the row).
struct KeySpan {
  int64_t begin, width;

  static KeySpan of(AttnMask mask, int64_t first, int64_t rows, int64_t kvSeq) {
    int64_t begin = std::min(mask.keyBegin(first), kvSeq);
    int64_t end = rows > 0 ? mask.keyEnd(first + rows - 1, kvSeq) : begin;
    return {begin, std::max<int64_t>(end - begin, 0)};
  }
  /// Query row i's visible columns, clamped to the span.
  RowSpan row(AttnMask mask, int64_t i) const {
    int64_t lo = std::clamp<int64_t>(mask.keyBegin(i) - begin, 0, width);
    int64_t hi =
        std::clamp<int64_t>(mask.keyEnd(i, begin + width) - begin, lo, width);
    return {lo, hi};
  }
};

/// How a head's query rows go through attention's GEMMs: in blocks of
/// kCausalRows (causal) or kDenseRows rows, each over its KeySpan, into one
/// score buffer of `rows` x `ld` a call reuses (the widest span: under a
/// window, kCausalRows rows by at most window + kCausalRows - 1 keys), not
/// the whole [seq, kvSeq].
struct ScoreBlocks {
  int64_t rows, ld;

  static ScoreBlocks of(AttnMask mask, int64_t seq, int64_t kvSeq) {
    int64_t rows = std::min(mask.causal ? kCausalRows : kDenseRows, seq);
    int64_t widest = 0;
    for (int64_t i0 = 0; i0 < seq; i0 += std::max<int64_t>(rows, 1))
      widest = std::max(
          widest, KeySpan::of(mask, i0, std::min(rows, seq - i0), kvSeq).width);
    return {rows, std::max<int64_t>(widest, 1)};
  }
  size_t size() const { return size_t(rows * ld); }
};

/// Gemma 2's soft cap over the keys each of `rows` score rows sees (as
/// probRows): each scaled score s becomes cap · tanh(s / cap) in place
/// (AttnMask::softcap > 0; callers skip it otherwise). With `slope`
/// (same layout), the cap's derivative at each capped score, 1 - tanh²,
/// which the gradient multiplies the capped scores' gradient by; zero
/// where no key is seen.
void capRows(float *s, int64_t first, int64_t rows, KeySpan keys, int64_t ld,
             AttnMask mask, float *slope);
void capRows(double *s, int64_t first, int64_t rows, KeySpan keys, int64_t ld,
             AttnMask mask, double *slope);

/// The probabilities the gradient recomputes from the forward's
/// log-sum-exp: e^(x - lse[r]) over the keys each of `rows` score rows
/// sees (row stride ld; the first is query row `first` of the head, and
/// column 0 key `keys.begin`), zero elsewhere in the span. The forward's
/// own softmax stays in attention.cpp.
void probRows(float *p, int64_t first, int64_t rows, KeySpan keys, int64_t ld,
              AttnMask mask, const float *lse);
void probRows(double *p, int64_t first, int64_t rows, KeySpan keys, int64_t ld,
              AttnMask mask, const double *lse);

/// Element i of an index tensor (i32 or i64, checked by the front).
inline int64_t loadIndex(int32_t dtype, const void *p, int64_t i) {
  return dtype == TESSEL_I32 ? static_cast<const int32_t *>(p)[i]
                             : static_cast<const int64_t *>(p)[i];
}

} // namespace cpu
} // namespace tessel

#endif // TESSEL_RUNTIME_CPU_INTERNAL_H
