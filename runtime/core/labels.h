//===- labels.h - The labels of a loss that ignores positions -*- C++ -*-===//
//
// What tessel_mask_labels computes per label, for the CPU backend and the
// CUDA kernel alike: a label equal to the loss's ignore_index (PyTorch's,
// fine-tuning's -100 over prompt and padding) is read as class 0 by the
// cross-entropy and weighs 0 in the loss and in its mean's count.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CORE_LABELS_H
#define TESSEL_RUNTIME_CORE_LABELS_H

#include "core/hd.h"

#include <cstdint>

namespace tessel {

/// One label: what the cross-entropy reads and the position's weight.
struct MaskedLabel {
  int64_t label;
  bool weight;
};

TESSEL_HD MaskedLabel maskLabel(int64_t label, int64_t ignoreIndex) {
  bool ignored = label == ignoreIndex;
  return {ignored ? 0 : label, !ignored};
}

} // namespace tessel

#endif // TESSEL_RUNTIME_CORE_LABELS_H
