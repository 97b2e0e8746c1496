//===- attention_mask.h - The keys attention's query rows see ---*- C++ -*-===//
//
// The mask of tessel_attention and its gradient, shared by the CPU backend
// and the CUDA kernels (TESSEL_HD), so the host tests check the ranges the
// device skips to. With `causal`, query i sees keys [0, i] (the diagonal
// aligned at the top left); a sliding `window` w > 0 (causal only, as
// Mistral's and Gemma's local layers) narrows that to its last w keys,
// [i - w + 1, i]. Every range here is clamped to the sequences.
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

  /// The first key query i sees.
  TESSEL_HD int64_t keyBegin(int64_t i) const {
    return window > 0 && i >= window ? i - window + 1 : 0;
  }
  /// One past the last key query i sees, of kvSeq keys.
  TESSEL_HD int64_t keyEnd(int64_t i, int64_t kvSeq) const {
    return causal && i + 1 < kvSeq ? i + 1 : kvSeq;
  }
  /// The first query row that sees key j.
  TESSEL_HD int64_t rowBegin(int64_t j) const { return causal ? j : 0; }
  /// One past the last query row that sees key j, of seq rows.
  TESSEL_HD int64_t rowEnd(int64_t j, int64_t seq) const {
    return window > 0 && j + window < seq ? j + window : seq;
  }
  /// Whether query i attends to key j (both inside their sequences).
  TESSEL_HD bool visible(int64_t i, int64_t j, int64_t seq,
                         int64_t kvSeq) const {
    return i < seq && j < kvSeq && j >= keyBegin(i) && j < keyEnd(i, kvSeq);
  }
};

} // namespace tessel

#endif // TESSEL_RUNTIME_CORE_ATTENTION_MASK_H
