//===- KernelProfile.h - Per-kernel time of a compiled model ----*- C++ -*-===//
//
// tessel-bench-step exports its own definitions of the runtime kernels a
// compiled model calls (KernelProfile.cpp). A model .so opened without
// RTLD_DEEPBIND binds its kernel calls to them: each one times the call and
// forwards to the real kernel in libtessel_runtime.so (dlsym RTLD_NEXT). A
// model .so opened with RTLD_DEEPBIND binds to libtessel_runtime.so directly
// and never sees them, so the headline step time carries no profiling cost.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_BENCH_KERNELPROFILE_H
#define TESSEL_BENCH_KERNELPROFILE_H

#include <cstdint>

namespace tessel_bench {

enum Kernel {
  kMatmul,
  kAttention,
  kLayerNorm,
  kSoftmax,
  kBinary,
  kUnary,
  kStridedCopy,
  kEmbedding,
  kCrossEntropy,
  kReduce,
  kBatchNorm,
  kCast,
  kDropout,
  kCopy,
  kCopyToDevice,
  kMatmulEpilogue,
  kAddLayerNorm,
  kFill,
  // The training step: backward kernels, the optimizer, zeroing.
  kUnaryGrad,
  kSoftmaxGrad,
  kLayerNormGrad,
  kBatchNormGrad,
  kCrossEntropyGrad,
  kEmbeddingGrad,
  kAttentionGrad,
  kLayerNormGradAdd,
  kLabelLogit,
  kSubLabel,
  kSumSquares,
  kClipScale,
  kOptimizerUpdate,
  kZero,
  kNumKernels
};

struct KernelStat {
  int64_t calls = 0;
  double seconds = 0;
};

/// The runtime's name of `k` without the tessel_ prefix ("matmul", ...).
const char *kernelName(int k);

/// Calls and wall time per kernel since the last reset (every call that went
/// through the interposed definitions).
const KernelStat *kernelStats();
void resetKernelStats();

} // namespace tessel_bench

#endif // TESSEL_BENCH_KERNELPROFILE_H
