//===- backend.h - The CPU backend: BLAS kernels, host memory ---*- C++ -*-===//
//
// Private to runtime/cpu. Kernels run when they are issued on the calling
// thread (synchronize has nothing to wait for); device memory is host
// memory. The kernels' definitions live with their families (matmul.cpp,
// elementwise.cpp, data.cpp, norm.cpp, attention.cpp, backward.cpp,
// grad_attention.cpp, vocab_parallel.cpp, optimizer.cpp, init.cpp); the
// communicators in comm_local.cpp and comm_mpi.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CPU_BACKEND_H
#define TESSEL_RUNTIME_CPU_BACKEND_H

#include "core/backend.h"

namespace tessel {
namespace cpu {

class CpuBackend final : public Backend {
public:
  const char *name() const override { return "cpu"; }
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
  void synchronize(tessel_ctx *) override {}

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
  void batchNormGrad(tessel_ctx *ctx, int32_t dtype, const void *x,
                     const void *gamma, const void *dy, void *dx, void *dgamma,
                     void *dbeta, int64_t outer, int64_t channels,
                     int64_t inner, double eps) override;
  void crossEntropyGrad(tessel_ctx *ctx, int32_t dtype, int32_t lossDtype,
                        int32_t labelDtype, const void *logits,
                        const void *labels, const void *dloss, void *dlogits,
                        int64_t rows, int64_t classes, int32_t reduction,
                        LossOptions options) override;
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
};

} // namespace cpu
} // namespace tessel

#endif // TESSEL_RUNTIME_CPU_BACKEND_H
