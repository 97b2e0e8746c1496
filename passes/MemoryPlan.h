//===- MemoryPlan.h - attributes the memory plan leaves on the IR -*- C++ -*-===//
//
// tessel-plan-memory writes these; the lowering to the runtime reads them.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_PASSES_MEMORYPLAN_H
#define TESSEL_PASSES_MEMORYPLAN_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>

namespace tessel::memory_plan {

/// On an op: the scratch byte offset of each result, or a negative code
/// for memory the caller provides: kArgumentView (a view or in-place update
/// of a function argument) or resultOffset(i) (computed straight into the
/// function's result i).
inline constexpr llvm::StringLiteral kOffsetsAttr = "tessel.offsets";
inline constexpr int64_t kArgumentView = -1;
inline constexpr int64_t resultOffset(int64_t resultIndex) {
  return -2 - resultIndex;
}
/// The result index of an offset below kArgumentView.
inline constexpr int64_t resultIndexOf(int64_t offset) { return -2 - offset; }
/// On an op whose results lie inside the caller's memory for a function
/// result (the inputs of an in-place concat that the function returns):
/// each result's byte offset from where its tessel.offsets code points (0
/// for the others).
inline constexpr llvm::StringLiteral kSubOffsetsAttr = "tessel.sub_offsets";
/// On an nn.concat: per input, whether the plan put it where the concat
/// writes it (its producer computes it into the concat's result: no copy).
inline constexpr llvm::StringLiteral kInPlaceInputsAttr =
    "tessel.in_place_inputs";
/// The byte alignment of an input computed into a concat's result (what a
/// kernel's 128-bit loads and cuBLASLt's fast paths need).
inline constexpr int64_t kInPlaceInputAlignment = 16;
/// On an nn.slice whose window is a contiguous run of its input: its
/// result is those bytes of the input (a view, no copy). On an
/// nn.broadcast that only binary ops read: they read its input where it
/// lies, along its rows or columns (tessel_binary_broadcast, no copy).
inline constexpr llvm::StringLiteral kViewAttr = "tessel.view";
/// On an nn.repeat: the scratch byte offset of its workspace.
inline constexpr llvm::StringLiteral kWorkspaceAttr = "tessel.workspace";
/// On a function: the bytes of scratch it needs (its peak).
inline constexpr llvm::StringLiteral kScratchBytesAttr = "tessel.scratch_bytes";
/// Every buffer starts at a multiple of this (a cache line, and what
/// vector loads and cuBLASLt like).
inline constexpr int64_t kAlignment = 64;

/// Arena sizes and offsets saturate here instead of wrapping; a plan that
/// reaches it does not fit in int64 and is refused.
inline constexpr int64_t kBytesOverflow = INT64_MAX;

inline int64_t alignUp(int64_t bytes) {
  int64_t padded;
  if (__builtin_add_overflow(bytes, kAlignment - 1, &padded))
    return kBytesOverflow;
  return padded / kAlignment * kAlignment;
}

/// a + b for byte counts, saturating at kBytesOverflow.
inline int64_t addBytes(int64_t a, int64_t b) {
  int64_t sum;
  return __builtin_add_overflow(a, b, &sum) ? kBytesOverflow : sum;
}

} // namespace tessel::memory_plan

#endif // TESSEL_PASSES_MEMORYPLAN_H
