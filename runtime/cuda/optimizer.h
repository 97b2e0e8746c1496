//===- optimizer.h - One fused Adam(W) launch over many tensors -*- C++ -*-===//
//
// tessel_optimizer_update updates one tensor per launch; a model of
// hundreds of small tensors pays a launch each. multiTensorAdamW updates
// them all in one launch, as apex's multi_tensor_apply: the host cuts every
// tensor into chunks of kAdamChunkElements, writes one descriptor per chunk
// (pointers already offset to the chunk) to a device table, and block b of
// the grid updates chunk b with the same per-element arithmetic as
// optimizerUpdate (optimizer_math.h). The chunk walk is plain C++ here so
// the host tests follow it exactly. Not yet reachable from the C ABI.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CUDA_OPTIMIZER_H
#define TESSEL_RUNTIME_CUDA_OPTIMIZER_H

#include "core/backend.h"
#include "tessel/runtime.h"

#include <cstdint>
#include <vector>

namespace tessel {
namespace cuda {

class CudaBackend;

/// One parameter tensor and its Adam state: n elements of the call's dtype
/// (param, grad) and f32 (m, v), device memory.
struct AdamTensor {
  void *param;
  const void *grad;
  float *m;
  float *v;
  int64_t n;
};

struct TensorChunkList {
  std::vector<AdamTensor> tensors;
};

/// One block's share: `count` elements starting at the pointers.
struct AdamChunk {
  void *param;
  const void *grad;
  float *m;
  float *v;
  int64_t count;
};

constexpr int64_t kAdamChunkElements = int64_t(1) << 16;

/// The chunks of `list` in order, each tensor cut at multiples of
/// chunkElements; `elementBytes` is the parameters' element size. Empty
/// tensors give no chunk.
inline std::vector<AdamChunk>
adamChunks(const TensorChunkList &list, int64_t elementBytes,
           int64_t chunkElements = kAdamChunkElements) {
  std::vector<AdamChunk> chunks;
  for (const AdamTensor &t : list.tensors) {
    for (int64_t begin = 0; begin < t.n; begin += chunkElements) {
      int64_t count = t.n - begin < chunkElements ? t.n - begin : chunkElements;
      chunks.push_back({static_cast<char *>(t.param) + begin * elementBytes,
                        static_cast<const char *>(t.grad) + begin * elementBytes,
                        t.m + begin, t.v + begin, count});
    }
  }
  return chunks;
}

/// One Adam step of every tensor in `list` (opt.kind Adam or AdamW; the
/// same checks and arithmetic as tessel_optimizer_update, of the caller's
/// step or the context's as `at` says; gradScale a device f32 or null),
/// issued as one kernel on the backend's stream.
void multiTensorAdamW(CudaBackend &backend, tessel_ctx *ctx,
                      const tessel_optimizer &opt, const UpdateStep &at,
                      int32_t dtype, const TensorChunkList &list,
                      const void *gradScale);

} // namespace cuda
} // namespace tessel

#endif // TESSEL_RUNTIME_CUDA_OPTIMIZER_H
