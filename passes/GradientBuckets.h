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

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <cstdint>

namespace tessel {

/// Buckets the gradient all-reduces of every function of `module` (a
/// repeated layer's within its layer function, one bucket set per layer);
/// 0 bytes: one all-reduce per gradient.
void bucketGradientAllReduces(mlir::ModuleOp module, int64_t bucketBytes);

/// Buckets the gradient all-reduces of `func` alone, whose results it may
/// return from result `returnedFrom` on (a layer function's per-layer
/// results; 0 for an entry that returns reduced gradients).
void bucketGradientAllReducesOf(mlir::func::FuncOp func, int64_t bucketBytes,
                                unsigned returnedFrom);

} // namespace tessel

#endif // TESSEL_PASSES_GRADIENTBUCKETS_H
