//===- optimizer.h - One fused Adam(W) launch over many tensors -*- C++ -*-===//
//
// tessel_optimizer_update updates one tensor per launch; a model of
// hundreds of small tensors pays a launch each. multiTensorAdamW updates
// them all in one launch, as apex's multi_tensor_apply: the host cuts every
// tensor into chunks of kAdamChunkElements, writes one descriptor per chunk
// (pointers already offset to the chunk) to a device table, and block b of
// the grid updates chunk b with the same per-element arithmetic as
// optimizerUpdate (optimizer_math.h). The chunk walk is plain C++ here so
// the host tests follow it exactly. The C ABI reaches it through
// tessel_optimizer_update_group_current (generated code groups the
// consecutive updates that share their constants), for Adam and AdamW,
// plain or on master weights, and tessel_optimizer_update_f64_group_current
// (ABI 18: f64 parameters with f64 states).
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

/// One block's share: `count` elements starting at the pointers. `param`
/// is what the update computes in (the f32 master under mixed precision),
/// `copy` its rounded low-precision copy (null without masters); m and v
/// are the states, f32 or (ABI 18) f64.
struct AdamChunk {
  void *param;
  void *copy;
  const void *grad;
  void *m;
  void *v;
  int64_t count;
};

constexpr int64_t kAdamChunkElements = int64_t(1) << 16;

/// Element sizes of a group's parameters (the master's, f32, under mixed
/// precision), gradients, low-precision copies (0: none) and states (4, or
/// 8 for f64 states).
struct ChunkElementBytes {
  int64_t param, grad, copy, state;
};

/// The chunks of `tensors` in order, each tensor cut at multiples of
/// chunkElements (`master`: param is the f32 master weights and copy the
/// tensor's param). Empty tensors give no chunk.
inline std::vector<AdamChunk>
adamChunks(const std::vector<UpdateTensor> &tensors, bool master,
           ChunkElementBytes bytes,
           int64_t chunkElements = kAdamChunkElements) {
  std::vector<AdamChunk> chunks;
  for (const UpdateTensor &t : tensors) {
    char *param = static_cast<char *>(master ? t.master : t.param);
    char *copy = master ? static_cast<char *>(t.param) : nullptr;
    for (int64_t begin = 0; begin < t.n; begin += chunkElements) {
      int64_t count = t.n - begin < chunkElements ? t.n - begin : chunkElements;
      chunks.push_back({param + begin * bytes.param,
                        copy ? copy + begin * bytes.copy : nullptr,
                        static_cast<const char *>(t.grad) + begin * bytes.grad,
                        static_cast<char *>(t.state0) + begin * bytes.state,
                        static_cast<char *>(t.state1) + begin * bytes.state,
                        count});
    }
  }
  return chunks;
}

/// One Adam or AdamW step of every tensor (checked by the front; the
/// arithmetic of tessel_optimizer_update, or of the master form), issued as
/// one kernel over the chunks on the backend's stream; the states and
/// *gradScale are at.stateDtype's (F64 only with f64 parameters and
/// gradients, no master). The chunk table goes to the device stream-ordered
/// (a constant of the graph while capturing).
void multiTensorAdamW(CudaBackend &backend, tessel_ctx *ctx,
                      const tessel_optimizer &opt, const UpdateStep &at,
                      int32_t paramDtype, int32_t gradDtype, bool master,
                      const std::vector<UpdateTensor> &tensors,
                      const void *gradScale);

} // namespace cuda
} // namespace tessel

#endif // TESSEL_RUNTIME_CUDA_OPTIMIZER_H
