//===- attention_mask.h - The keys attention's query rows see ---*- C++ -*-===//
//
// The mask of tessel_attention and its gradient, shared by the CPU backend
// and the CUDA kernels (TESSEL_HD), so the host tests check the ranges the
// device skips to. With `causal`, query i sees keys [0, i] (the diagonal
// aligned at the top left); a sliding `window` w > 0 (causal only, as
// Mistral's and Gemma's local layers) narrows that to its last w keys,
// [i - w + 1, i]. Every range here is clamped to the sequences.
//
// A block of the queries (context parallelism: a rank holds the queries of
// its block of the sequence and every key) gives its first row's position
// in the sequence, `queryOffset`: local row i is query i + queryOffset, so
// the causal diagonal and the window move down the keys by that much.
//
// The mask also carries the scores' soft cap (Gemma 2's
// attn_logit_softcapping, ABI 24): a scaled score s becomes
// cap · tanh(s / cap) before the mask and the softmax, so that no score
// leaves (-cap, cap) (core/softcap.h). It rides here because every kernel
// that reads the mask computes the scores it shapes.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CORE_ATTENTION_MASK_H
#define TESSEL_RUNTIME_CORE_ATTENTION_MASK_H

#include "core/hd.h"
#include "core/softcap.h"

#include <cmath>
#include <cstdint>

namespace tessel {

struct AttnMask {
  bool causal = false;
  /// Keys a causal row sees at most, itself included; 0: no limit.
  int64_t window = 0;
  /// The scores' soft cap (> 0), or 0: none.
  double softcap = 0;
  /// The position of query row 0 among the keys (>= 0; 0: the whole
  /// sequence's queries).
  int64_t queryOffset = 0;

  /// The first key query row i sees.
  TESSEL_HD int64_t keyBegin(int64_t i) const {
    int64_t p = i + queryOffset;
    return window > 0 && p >= window ? p - window + 1 : 0;
  }
  /// One past the last key query row i sees, of kvSeq keys.
  TESSEL_HD int64_t keyEnd(int64_t i, int64_t kvSeq) const {
    int64_t p = i + queryOffset;
    return causal && p + 1 < kvSeq ? p + 1 : kvSeq;
  }
  /// The first query row that sees key j.
  TESSEL_HD int64_t rowBegin(int64_t j) const {
    return causal && j > queryOffset ? j - queryOffset : 0;
  }
  /// One past the last query row that sees key j, of seq rows.
  TESSEL_HD int64_t rowEnd(int64_t j, int64_t seq) const {
    if (window <= 0)
      return seq;
    int64_t end = j + window - queryOffset;
    return end < 0 ? 0 : end < seq ? end : seq;
  }
  /// Whether key j lies past query row i's diagonal (causal only).
  TESSEL_HD bool afterDiagonal(int64_t j, int64_t i) const {
    return causal && j > i + queryOffset;
  }
  /// Whether query i attends to key j (both inside their sequences).
  TESSEL_HD bool visible(int64_t i, int64_t j, int64_t seq,
                         int64_t kvSeq) const {
    return i < seq && j < kvSeq && j >= keyBegin(i) && j < keyEnd(i, kvSeq);
  }
};

} // namespace tessel

#endif // TESSEL_RUNTIME_CORE_ATTENTION_MASK_H
