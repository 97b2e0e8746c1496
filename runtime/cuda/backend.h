//===- backend.h - The CUDA backend: cuBLASLt, CUDA kernels, NCCL -*- C++ -*-===//
//
// Private to runtime/cuda. Built as its own shared library
// (libtessel_cuda.so) that the runtime loads when a context asks for the
// "cuda" backend (core/cuda_plugin.cpp), so a CPU-only run never maps the
// CUDA libraries. Every kernel is issued on the context's compute stream
// and runs asynchronously; synchronize() waits for it. Device memory is
// cudaMalloc'd on the context's device. The kernels' definitions live with
// their families (matmul.cu, elementwise.cu, data.cu, norm.cu and
// batch_norm.cu, loss.cu, attention.cu and attention_grad.cu, optimizer.cu,
// init.cu); the communicator in comm_nccl.cu.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CUDA_BACKEND_H
#define TESSEL_RUNTIME_CUDA_BACKEND_H

#include "core/backend.h"
#include "cuda/device_errors.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <vector>

namespace tessel {
namespace cuda {

class CudaBackend final : public Backend {
public:
  /// Binds `device`, creates the streams and the cuBLASLt handle; false
  /// with the reason in `error`.
  bool init(int32_t device, std::string &error);
  ~CudaBackend() override;

  const char *name() const override { return "cuda"; }
  std::unique_ptr<Communicator>
  createCommunicator(tessel_ctx *ctx, const tessel_ctx_options &options,
                     std::string &error) override;

  void *alloc(int64_t bytes) override;
  void free(void *ptr) override;
  void copyToDevice(void *dst, const void *hostSrc, int64_t bytes) override;
  void copyToHost(void *hostDst, const void *src, int64_t bytes) override;
  void copy(void *dst, const void *src, int64_t bytes) override;
  void copy2d(void *dst, int64_t dstPitch, const void *src, int64_t srcPitch,
              int64_t rows, int64_t rowBytes) override;
  void zero(void *dst, int64_t bytes) override;
  void synchronize(tessel_ctx *ctx) override;
  void setStep(tessel_ctx *ctx, uint64_t step) override;
  bool capturesNatively() const override { return true; }
  bool beginCapture(tessel_ctx *ctx) override;
  std::unique_ptr<CapturedWork> endCapture(tessel_ctx *ctx,
                                           bool discard) override;

  void initParam(tessel_ctx *ctx, void *dst, int32_t dtype, int64_t first,
                 int64_t count, int32_t kind, const double *hostArgs,
                 uint64_t seed, uint64_t nameHash) override;
  void matmul(tessel_ctx *ctx, int32_t dtype, const void *a, const void *b,
              void *c, int64_t batch, int64_t m, int64_t n, int64_t k,
              bool transA, bool transB, bool bShared) override;
  void matmulEpilogue(tessel_ctx *ctx, int32_t dtype, const void *a,
                      const void *b, void *c, int64_t batch, int64_t m,
                      int64_t n, int64_t k, bool transA, bool transB,
                      bool bShared, double beta, int32_t epilogue,
                      const void *bias, void *aux) override;
  void matmulF32(tessel_ctx *ctx, int32_t dtype, const void *a, const void *b,
                 void *c, int64_t batch, int64_t m, int64_t n, int64_t k,
                 bool transA, bool transB, bool bShared, double beta,
                 int32_t epilogue, void *aux) override;
  void binary(tessel_ctx *ctx, int32_t op, int32_t dtype, const void *a,
              const void *b, void *out, int64_t n) override;
  void binaryBroadcast(tessel_ctx *ctx, int32_t op, int32_t dtype,
                       const void *a, const void *b, void *out, int64_t rows,
                       int64_t cols, int32_t layout) override;
  void unary(tessel_ctx *ctx, int32_t op, int32_t dtype, const void *x, void *y,
             int64_t n) override;
  void cast(tessel_ctx *ctx, int32_t srcDtype, int32_t dstDtype, const void *x,
            void *y, int64_t n) override;
  void dropout(tessel_ctx *ctx, int32_t dtype, const void *x, void *y,
               int64_t n, double rate, uint64_t seed, StepRef step,
               int64_t first, uint64_t stream) override;
  void dropoutBlock(tessel_ctx *ctx, int32_t dtype, const void *x, void *y,
                    int32_t rank, const int64_t *hostShape,
                    const int64_t *hostStrides, double rate, uint64_t seed,
                    StepRef step, int64_t first, uint64_t stream) override;
  void fill(tessel_ctx *ctx, void *out, int64_t count, int64_t elementBytes,
            uint64_t bits) override;
  void stridedCopy(tessel_ctx *ctx, int32_t dtype, const void *in, void *out,
                   int32_t rank, const int64_t *hostShape,
                   const int64_t *hostInStrides,
                   const int64_t *hostOutStrides) override;
  void reduce(tessel_ctx *ctx, int32_t kind, int32_t dtype, int32_t outDtype,
              const void *in, void *out, int32_t rank, const int64_t *hostShape,
              uint64_t reduceMask) override;
  void softmax(tessel_ctx *ctx, int32_t dtype, const void *x, void *y,
               int64_t outer, int64_t dim, int64_t inner) override;
  void layerNorm(tessel_ctx *ctx, int32_t dtype, const void *x,
                 const void *gamma, const void *beta, void *y, int64_t rows,
                 int64_t cols, double eps, bool rms) override;
  void addLayerNorm(tessel_ctx *ctx, int32_t dtype, const void *a,
                    const void *b, const void *gamma, const void *beta,
                    void *sum, void *y, int64_t rows, int64_t cols, double eps,
                    bool rms) override;
  void batchNorm(tessel_ctx *ctx, int32_t dtype, const void *x,
                 const void *gamma, const void *beta, void *y, int64_t outer,
                 int64_t channels, int64_t inner, double eps) override;
  void embedding(tessel_ctx *ctx, int32_t dtype, int32_t idsDtype,
                 const void *table, const void *ids, void *out, int64_t numIds,
                 int64_t rows, int64_t hidden, int64_t rowOffset,
                 int64_t vocab) override;
  void crossEntropy(tessel_ctx *ctx, int32_t dtype, int32_t lossDtype,
                    int32_t labelDtype, const void *logits, const void *labels,
                    void *out, int64_t rows, int64_t classes, int32_t reduction,
                    LossOptions options) override;
  void attention(tessel_ctx *ctx, int32_t dtype, const void *q, const void *k,
                 const void *v, void *out, void *lse, int64_t batch,
                 int64_t seq, int64_t kvSeq, int64_t heads, int64_t kvHeads,
                 int64_t headDim, int64_t valueDim, double scale,
                 AttnMask mask) override;
  void rope(tessel_ctx *ctx, int32_t dtype, const void *x, void *y,
            int64_t outer, int64_t positions, int64_t heads, int64_t headDim,
            int64_t rotaryDim, double theta, bool interleaved, bool inverse,
            const rope::Scaling &scaling, int64_t firstPosition) override;

  void unaryGrad(tessel_ctx *ctx, int32_t op, int32_t dtype, const void *x,
                 const void *dy, void *dx, int64_t n) override;
  void softmaxGrad(tessel_ctx *ctx, int32_t dtype, const void *y,
                   const void *dy, void *dx, int64_t outer, int64_t dim,
                   int64_t inner) override;
  void layerNormGrad(tessel_ctx *ctx, int32_t dtype, int32_t paramDtype,
                     const void *x, const void *gamma, const void *dy, void *dx,
                     void *dgamma, void *dbeta, int64_t rows, int64_t cols,
                     double eps, bool rms) override;
  void layerNormGradAdd(tessel_ctx *ctx, int32_t dtype, int32_t paramDtype,
                        const void *x, const void *gamma, const void *dy,
                        const void *residual, void *dx, void *dgamma,
                        void *dbeta, int64_t rows, int64_t cols, double eps,
                        bool rms) override;
  void batchNormGrad(tessel_ctx *ctx, int32_t dtype, const void *x,
                     const void *gamma, const void *dy, void *dx, void *dgamma,
                     void *dbeta, int64_t outer, int64_t channels,
                     int64_t inner, double eps) override;
  void crossEntropyGrad(tessel_ctx *ctx, int32_t dtype, int32_t lossDtype,
                        int32_t labelDtype, const void *logits,
                        const void *labels, const void *dloss, void *dlogits,
                        int64_t rows, int64_t classes, int32_t reduction,
                        LossOptions options) override;
  void crossEntropyWithGrad(tessel_ctx *ctx, int32_t dtype, int32_t lossDtype,
                            int32_t labelDtype, const void *logits,
                            const void *labels, const void *dloss, void *out,
                            void *dlogits, int64_t rows, int64_t classes,
                            int32_t reduction, LossOptions options) override;
  void labelLogit(tessel_ctx *ctx, int32_t dtype, int32_t labelDtype,
                  const void *logits, const void *labels, void *out,
                  int64_t rows, int64_t classes, int64_t classOffset,
                  int64_t totalClasses) override;
  void maskLabels(tessel_ctx *ctx, int32_t labelDtype, int32_t dtype,
                  const void *labels, int64_t ignoreIndex, void *safe,
                  void *weights, int64_t n) override;
  void vocabLossStats(tessel_ctx *ctx, int32_t dtype, int32_t statsDtype,
                      int32_t labelDtype, const void *logits,
                      const void *labels, VocabStats stats, int64_t rows,
                      int64_t classes, int64_t classOffset,
                      int64_t totalClasses, double softcap) override;
  void vocabLossGrad(tessel_ctx *ctx, int32_t dtype, int32_t statsDtype,
                     int32_t labelDtype, const void *logits, const void *labels,
                     const void *max, const void *sumExp, const void *rowGrad,
                     void *dlogits, int64_t rows, int64_t classes,
                     int64_t classOffset, int64_t totalClasses,
                     LossOptions options) override;
  void subLabel(tessel_ctx *ctx, int32_t dtype, int32_t labelDtype,
                const void *x, const void *labels, const void *values,
                void *out, int64_t rows, int64_t classes, int64_t classOffset,
                int64_t totalClasses) override;
  void embeddingGrad(tessel_ctx *ctx, int32_t dtype, int32_t tableDtype,
                     int32_t idsDtype, const void *ids, const void *dout,
                     void *dtable, int64_t numIds, int64_t rows, int64_t hidden,
                     int64_t rowOffset, int64_t vocab) override;
  void attentionGrad(tessel_ctx *ctx, int32_t dtype, const void *q,
                     const void *k, const void *v, const void *out,
                     const void *lse, const void *dout, void *dq, void *dk,
                     void *dv, int64_t batch, int64_t seq, int64_t kvSeq,
                     int64_t heads, int64_t kvHeads, int64_t headDim,
                     int64_t valueDim, double scale, AttnMask mask) override;

  void sumSquares(tessel_ctx *ctx, int32_t dtype, const void *x, int64_t n,
                  int32_t sumDtype, void *sum) override;
  void clipScale(tessel_ctx *ctx, int32_t dtype, const void *sumSquares,
                 double maxNorm, const void *gradScale, void *scale) override;
  void optimizerUpdate(tessel_ctx *ctx, const tessel_optimizer &opt,
                       const UpdateStep &at, int32_t dtype, void *param,
                       const void *grad, const void *gradScale, void *state0,
                       void *state1, int64_t n) override;
  void optimizerUpdateMaster(tessel_ctx *ctx, const tessel_optimizer &opt,
                             const UpdateStep &at, int32_t paramDtype,
                             void *param, void *master, int32_t gradDtype,
                             const void *grad, const void *gradScale,
                             void *state0, void *state1, int64_t n) override;
  void optimizerUpdateGroup(tessel_ctx *ctx, const tessel_optimizer &opt,
                            const UpdateStep &at, int32_t paramDtype,
                            int32_t gradDtype, bool master,
                            const void *gradScale,
                            const std::vector<UpdateTensor> &tensors) override;

  //===--- What the kernel families share ---------------------------------===//

  int32_t device() const { return deviceOrdinal; }
  /// The stream every kernel and copy of this context is issued on.
  cudaStream_t stream() const { return computeStream; }
  /// The stream collectives run on (ordered against compute by events).
  cudaStream_t commStream() const { return communicationStream; }
  cublasLtHandle_t blasLt() const { return ltHandle; }
  /// cuBLASLt's workspace on the device (kLtWorkspaceBytes).
  void *ltWorkspace() const { return workspace; }
  static constexpr size_t kLtWorkspaceBytes = size_t(32) << 20;
  /// Where kernels record an error found in the data (device pointer of
  /// mapped pinned memory; see device_errors.h).
  DeviceError *deviceErrors() const { return deviceErrorSlot; }
  /// The context's step on the device (setStep writes it in stream
  /// order), read by the kernels of StepRef::current work.
  const uint64_t *deviceStep() const { return stepSlot; }
  /// Between beginCapture and endCapture: work issued on the stream is
  /// captured into a CUDA graph, not run.
  bool capturing() const { return captureActive; }

  /// `bytes` of host memory (kernel arguments too large to pass by value)
  /// in device memory for the work issued next on the stream: a stream-
  /// ordered temporary, or while capturing a constant the graph keeps (a
  /// host source cannot be captured). Null with the error recorded.
  void *stageHostArray(tessel_ctx *ctx, const void *host, size_t bytes,
                       const char *what);
  /// Gives a stageHostArray pointer back once the work that reads it is
  /// issued (nothing while capturing: the graph owns it).
  void releaseHostArray(tessel_ctx *ctx, void *device, const char *what);

  /// Records a launch or API failure of `what` on ctx (the first error
  /// wins, as everywhere); true when `status` is success.
  static bool check(tessel_ctx *ctx, cudaError_t status, const char *what);
  /// The same after a kernel launch: cudaGetLastError.
  static bool checkLaunch(tessel_ctx *ctx, const char *what);

private:
  int32_t deviceOrdinal = -1;
  cudaStream_t computeStream = nullptr;
  cudaStream_t communicationStream = nullptr;
  cublasLtHandle_t ltHandle = nullptr;
  void *workspace = nullptr;
  DeviceError *hostErrorSlot = nullptr;   // pinned, mapped
  DeviceError *deviceErrorSlot = nullptr; // the same memory, device view
  uint64_t *stepSlot = nullptr;           // device memory
  bool captureActive = false;
  /// Device copies of the host bytes copyToDevice was given while
  /// capturing (a captured copy reads them); the graph takes them.
  std::vector<void *> captureConstants;
};

/// Blocks of `threads` covering `n` elements, capped at what a grid-stride
/// loop needs (kernels loop over the rest).
inline unsigned gridFor(int64_t n, unsigned threads = 256) {
  int64_t blocks = (n + threads - 1) / threads;
  const int64_t kMaxBlocks = int64_t(1) << 20;
  return unsigned(blocks < 1 ? 1 : blocks > kMaxBlocks ? kMaxBlocks : blocks);
}

} // namespace cuda
} // namespace tessel

#endif // TESSEL_RUNTIME_CUDA_BACKEND_H
