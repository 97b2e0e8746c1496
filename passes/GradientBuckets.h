//===- GradientBuckets.h - DDP gradient buckets of a partitioned step -----===//
//
// The last step of tessel-partition: the gradient all-reduces of each
// function fused into buckets of at most `bucketBytes`, in the order their
// gradients become complete, each issued where its last gradient is, so
// the rest of the backward can overlap it (PyTorch DDP's buckets).
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_PASSES_GRADIENTBUCKETS_H
#define TESSEL_PASSES_GRADIENTBUCKETS_H

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>

namespace tessel {

/// Buckets the gradient all-reduces of every function of `module` (a
/// repeated layer's within its layer function, one bucket set per layer);
/// 0 bytes: one all-reduce per gradient.
void bucketGradientAllReduces(mlir::ModuleOp module, int64_t bucketBytes);

} // namespace tessel

#endif // TESSEL_PASSES_GRADIENTBUCKETS_H
