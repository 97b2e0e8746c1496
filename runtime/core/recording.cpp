//===- recording.cpp - Captured steps on a backend without graphs ---------===//

#include "core/recording.h"

#include "core/context.h"

#include <tuple>
#include <type_traits>

using namespace tessel;

void RecordedWork::launch(tessel_ctx *) {
  for (const std::function<void()> &call : calls)
    call();
}

namespace {

/// A host array of `n` elements, copied (null stays null).
template <class T> std::vector<T> hostCopy(const T *p, int64_t n) {
  return p && n > 0 ? std::vector<T>(p, p + n) : std::vector<T>();
}

/// What both recording fronts hold: the real object (given back by
/// release) and the capture's call list.
template <class Real> class RecordingFront : public Real {
public:
  RecordingFront(std::unique_ptr<Real> real,
                 std::shared_ptr<RecordedCalls> calls)
      : real(std::move(real)), calls(std::move(calls)) {}
  std::unique_ptr<Real> release() { return std::move(real); }

protected:
  std::unique_ptr<Real> real;
  std::shared_ptr<RecordedCalls> calls;
};

/// The recording front of a backend. Kernels and device copies are kept;
/// what the front refuses while a step is being captured (allocation,
/// reading back, synchronising, the step, parameter init) never reaches
/// it, and would run at once if it did.
class RecordingBackend final : public RecordingFront<Backend> {
public:
  using RecordingFront::RecordingFront;

  const char *name() const override { return real->name(); }
  std::unique_ptr<Communicator>
  createCommunicator(tessel_ctx *ctx, const tessel_ctx_options &options,
                     std::string &error) override {
    return real->createCommunicator(ctx, options, error);
  }

  void *alloc(int64_t bytes) override { return real->alloc(bytes); }
  void free(void *ptr) override { real->free(ptr); }
  /// The host bytes as they are now: a captured copy writes a constant.
  void copyToDevice(void *dst, const void *hostSrc, int64_t bytes) override {
    auto data = std::make_shared<std::vector<char>>(
        static_cast<const char *>(hostSrc),
        static_cast<const char *>(hostSrc) + bytes);
    calls->push_back([in = real.get(), dst, data, bytes] {
      in->copyToDevice(dst, data->data(), bytes);
    });
  }
  void copyToHost(void *hostDst, const void *src, int64_t bytes) override {
    real->copyToHost(hostDst, src, bytes);
  }
  void copy(void *dst, const void *src, int64_t bytes) override {
    defer(&Backend::copy, dst, src, bytes);
  }
  void copy2d(void *dst, int64_t dstPitch, const void *src, int64_t srcPitch,
              int64_t rows, int64_t rowBytes) override {
    defer(&Backend::copy2d, dst, dstPitch, src, srcPitch, rows, rowBytes);
  }
  void zero(void *dst, int64_t bytes) override {
    defer(&Backend::zero, dst, bytes);
  }
  void synchronize(tessel_ctx *ctx) override { real->synchronize(ctx); }
  void setStep(tessel_ctx *ctx, uint64_t step) override {
    real->setStep(ctx, step);
  }

  void initParam(tessel_ctx *ctx, void *dst, int32_t dtype, int64_t first,
                 int64_t count, int32_t kind, const double *hostArgs,
                 uint64_t seed, uint64_t nameHash) override {
    real->initParam(ctx, dst, dtype, first, count, kind, hostArgs, seed,
                     nameHash);
  }
  void matmul(tessel_ctx *ctx, int32_t dtype, const void *a, const void *b,
              void *c, int64_t batch, int64_t m, int64_t n, int64_t k,
              bool transA, bool transB, bool bShared) override {
    defer(&Backend::matmul, ctx, dtype, a, b, c, batch, m, n, k, transA,
          transB, bShared);
  }
  void matmulEpilogue(tessel_ctx *ctx, int32_t dtype, const void *a,
                      const void *b, void *c, int64_t batch, int64_t m,
                      int64_t n, int64_t k, bool transA, bool transB,
                      bool bShared, double beta, int32_t epilogue,
                      const void *bias, void *aux) override {
    defer(&Backend::matmulEpilogue, ctx, dtype, a, b, c, batch, m, n, k,
          transA, transB, bShared, beta, epilogue, bias, aux);
  }
  void matmulF32(tessel_ctx *ctx, int32_t dtype, const void *a, const void *b,
                 void *c, int64_t batch, int64_t m, int64_t n, int64_t k,
                 bool transA, bool transB, bool bShared, double beta,
                 int32_t epilogue, void *aux) override {
    defer(&Backend::matmulF32, ctx, dtype, a, b, c, batch, m, n, k, transA,
          transB, bShared, beta, epilogue, aux);
  }
  void binary(tessel_ctx *ctx, int32_t op, int32_t dtype, const void *a,
              const void *b, void *out, int64_t n) override {
    defer(&Backend::binary, ctx, op, dtype, a, b, out, n);
  }
  void binaryBroadcast(tessel_ctx *ctx, int32_t op, int32_t dtype,
                       const void *a, const void *b, void *out, int64_t rows,
                       int64_t cols, int32_t layout) override {
    defer(&Backend::binaryBroadcast, ctx, op, dtype, a, b, out, rows, cols,
          layout);
  }
  void unary(tessel_ctx *ctx, int32_t op, int32_t dtype, const void *x, void *y,
             int64_t n) override {
    defer(&Backend::unary, ctx, op, dtype, x, y, n);
  }
  void cast(tessel_ctx *ctx, int32_t srcDtype, int32_t dstDtype, const void *x,
            void *y, int64_t n) override {
    defer(&Backend::cast, ctx, srcDtype, dstDtype, x, y, n);
  }
  void dropout(tessel_ctx *ctx, int32_t dtype, const void *x, void *y,
               int64_t n, double rate, uint64_t seed, StepRef step,
               int64_t first, uint64_t stream) override {
    defer(&Backend::dropout, ctx, dtype, x, y, n, rate, seed, step, first,
          stream);
  }
  void dropoutBlock(tessel_ctx *ctx, int32_t dtype, const void *x, void *y,
                    int32_t rank, const int64_t *hostShape,
                    const int64_t *hostStrides, double rate, uint64_t seed,
                    StepRef step, int64_t first, uint64_t stream) override {
    calls->push_back([=, in = real.get(), shape = hostCopy(hostShape, rank),
                      strides = hostCopy(hostStrides, rank)] {
      in->dropoutBlock(ctx, dtype, x, y, rank, shape.data(), strides.data(),
                       rate, seed, step, first, stream);
    });
  }
  void fill(tessel_ctx *ctx, void *out, int64_t count, int64_t elementBytes,
            uint64_t bits) override {
    defer(&Backend::fill, ctx, out, count, elementBytes, bits);
  }
  void stridedCopy(tessel_ctx *ctx, int32_t dtype, const void *in, void *out,
                   int32_t rank, const int64_t *hostShape,
                   const int64_t *hostInStrides,
                   const int64_t *hostOutStrides) override {
    calls->push_back([=, backend = real.get(),
                      shape = hostCopy(hostShape, rank),
                      inStrides = hostCopy(hostInStrides, rank),
                      outStrides = hostCopy(hostOutStrides, rank)] {
      backend->stridedCopy(ctx, dtype, in, out, rank, shape.data(),
                           inStrides.data(), outStrides.data());
    });
  }
  void reduce(tessel_ctx *ctx, int32_t kind, int32_t dtype, int32_t outDtype,
              const void *in, void *out, int32_t rank, const int64_t *hostShape,
              uint64_t reduceMask) override {
    calls->push_back(
        [=, backend = real.get(), shape = hostCopy(hostShape, rank)] {
          backend->reduce(ctx, kind, dtype, outDtype, in, out, rank,
                          shape.data(), reduceMask);
        });
  }
  void softmax(tessel_ctx *ctx, int32_t dtype, const void *x, void *y,
               int64_t outer, int64_t dim, int64_t inner) override {
    defer(&Backend::softmax, ctx, dtype, x, y, outer, dim, inner);
  }
  void layerNorm(tessel_ctx *ctx, int32_t dtype, const void *x,
                 const void *gamma, const void *beta, void *y, int64_t rows,
                 int64_t cols, double eps, bool rms) override {
    defer(&Backend::layerNorm, ctx, dtype, x, gamma, beta, y, rows, cols, eps,
          rms);
  }
  void addLayerNorm(tessel_ctx *ctx, int32_t dtype, const void *a,
                    const void *b, const void *gamma, const void *beta,
                    void *sum, void *y, int64_t rows, int64_t cols, double eps,
                    bool rms) override {
    defer(&Backend::addLayerNorm, ctx, dtype, a, b, gamma, beta, sum, y, rows,
          cols, eps, rms);
  }
  void batchNorm(tessel_ctx *ctx, int32_t dtype, const void *x,
                 const void *gamma, const void *beta, void *y, int64_t outer,
                 int64_t channels, int64_t inner, double eps) override {
    defer(&Backend::batchNorm, ctx, dtype, x, gamma, beta, y, outer, channels,
          inner, eps);
  }
  void embedding(tessel_ctx *ctx, int32_t dtype, int32_t idsDtype,
                 const void *table, const void *ids, void *out, int64_t numIds,
                 int64_t rows, int64_t hidden, int64_t rowOffset,
                 int64_t vocab) override {
    defer(&Backend::embedding, ctx, dtype, idsDtype, table, ids, out, numIds,
          rows, hidden, rowOffset, vocab);
  }
  void crossEntropy(tessel_ctx *ctx, int32_t dtype, int32_t lossDtype,
                    int32_t labelDtype, const void *logits, const void *labels,
                    void *out, int64_t rows, int64_t classes, int32_t reduction,
                    LossOptions options) override {
    defer(&Backend::crossEntropy, ctx, dtype, lossDtype, labelDtype, logits,
          labels, out, rows, classes, reduction, options);
  }
  void attention(tessel_ctx *ctx, int32_t dtype, const void *q, const void *k,
                 const void *v, void *out, void *lse, int64_t batch,
                 int64_t seq, int64_t kvSeq, int64_t heads, int64_t kvHeads,
                 int64_t headDim, int64_t valueDim, double scale,
                 AttnMask mask) override {
    defer(&Backend::attention, ctx, dtype, q, k, v, out, lse, batch, seq, kvSeq,
          heads, kvHeads, headDim, valueDim, scale, mask);
  }
  void rope(tessel_ctx *ctx, int32_t dtype, const void *x, void *y,
            int64_t outer, int64_t positions, int64_t heads, int64_t headDim,
            int64_t rotaryDim, double theta, bool interleaved, bool inverse,
            const rope::Scaling &scaling, int64_t firstPosition) override {
    defer(&Backend::rope, ctx, dtype, x, y, outer, positions, heads, headDim,
          rotaryDim, theta, interleaved, inverse, scaling, firstPosition);
  }

  void unaryGrad(tessel_ctx *ctx, int32_t op, int32_t dtype, const void *x,
                 const void *dy, void *dx, int64_t n) override {
    defer(&Backend::unaryGrad, ctx, op, dtype, x, dy, dx, n);
  }
  void softmaxGrad(tessel_ctx *ctx, int32_t dtype, const void *y,
                   const void *dy, void *dx, int64_t outer, int64_t dim,
                   int64_t inner) override {
    defer(&Backend::softmaxGrad, ctx, dtype, y, dy, dx, outer, dim, inner);
  }
  void layerNormGrad(tessel_ctx *ctx, int32_t dtype, int32_t paramDtype,
                     const void *x, const void *gamma, const void *dy, void *dx,
                     void *dgamma, void *dbeta, int64_t rows, int64_t cols,
                     double eps, bool rms) override {
    defer(&Backend::layerNormGrad, ctx, dtype, paramDtype, x, gamma, dy, dx,
          dgamma, dbeta, rows, cols, eps, rms);
  }
  void layerNormGradAdd(tessel_ctx *ctx, int32_t dtype, int32_t paramDtype,
                        const void *x, const void *gamma, const void *dy,
                        const void *residual, void *dx, void *dgamma,
                        void *dbeta, int64_t rows, int64_t cols, double eps,
                        bool rms) override {
    defer(&Backend::layerNormGradAdd, ctx, dtype, paramDtype, x, gamma, dy,
          residual, dx, dgamma, dbeta, rows, cols, eps, rms);
  }
  void batchNormGrad(tessel_ctx *ctx, int32_t dtype, const void *x,
                     const void *gamma, const void *dy, void *dx, void *dgamma,
                     void *dbeta, int64_t outer, int64_t channels,
                     int64_t inner, double eps) override {
    defer(&Backend::batchNormGrad, ctx, dtype, x, gamma, dy, dx, dgamma, dbeta,
          outer, channels, inner, eps);
  }
  void crossEntropyGrad(tessel_ctx *ctx, int32_t dtype, int32_t lossDtype,
                        int32_t labelDtype, const void *logits,
                        const void *labels, const void *dloss, void *dlogits,
                        int64_t rows, int64_t classes, int32_t reduction,
                        LossOptions options) override {
    defer(&Backend::crossEntropyGrad, ctx, dtype, lossDtype, labelDtype, logits,
          labels, dloss, dlogits, rows, classes, reduction, options);
  }
  void crossEntropyWithGrad(tessel_ctx *ctx, int32_t dtype, int32_t lossDtype,
                            int32_t labelDtype, const void *logits,
                            const void *labels, const void *dloss, void *out,
                            void *dlogits, int64_t rows, int64_t classes,
                            int32_t reduction, LossOptions options) override {
    defer(&Backend::crossEntropyWithGrad, ctx, dtype, lossDtype, labelDtype,
          logits, labels, dloss, out, dlogits, rows, classes, reduction,
          options);
  }
  void labelLogit(tessel_ctx *ctx, int32_t dtype, int32_t labelDtype,
                  const void *logits, const void *labels, void *out,
                  int64_t rows, int64_t classes, int64_t classOffset,
                  int64_t totalClasses) override {
    defer(&Backend::labelLogit, ctx, dtype, labelDtype, logits, labels, out,
          rows, classes, classOffset, totalClasses);
  }
  void maskLabels(tessel_ctx *ctx, int32_t labelDtype, int32_t dtype,
                  const void *labels, int64_t ignoreIndex, void *safe,
                  void *weights, int64_t n) override {
    defer(&Backend::maskLabels, ctx, labelDtype, dtype, labels, ignoreIndex,
          safe, weights, n);
  }
  void vocabLossStats(tessel_ctx *ctx, int32_t dtype, int32_t statsDtype,
                      int32_t labelDtype, const void *logits,
                      const void *labels, VocabStats stats, int64_t rows,
                      int64_t classes, int64_t classOffset,
                      int64_t totalClasses, double softcap) override {
    defer(&Backend::vocabLossStats, ctx, dtype, statsDtype, labelDtype, logits,
          labels, stats, rows, classes, classOffset, totalClasses, softcap);
  }
  void vocabLossGrad(tessel_ctx *ctx, int32_t dtype, int32_t statsDtype,
                     int32_t labelDtype, const void *logits, const void *labels,
                     const void *max, const void *sumExp, const void *rowGrad,
                     void *dlogits, int64_t rows, int64_t classes,
                     int64_t classOffset, int64_t totalClasses,
                     LossOptions options) override {
    defer(&Backend::vocabLossGrad, ctx, dtype, statsDtype, labelDtype, logits,
          labels, max, sumExp, rowGrad, dlogits, rows, classes, classOffset,
          totalClasses, options);
  }
  void subLabel(tessel_ctx *ctx, int32_t dtype, int32_t labelDtype,
                const void *x, const void *labels, const void *values,
                void *out, int64_t rows, int64_t classes, int64_t classOffset,
                int64_t totalClasses) override {
    defer(&Backend::subLabel, ctx, dtype, labelDtype, x, labels, values, out,
          rows, classes, classOffset, totalClasses);
  }
  void embeddingGrad(tessel_ctx *ctx, int32_t dtype, int32_t tableDtype,
                     int32_t idsDtype, const void *ids, const void *dout,
                     void *dtable, int64_t numIds, int64_t rows, int64_t hidden,
                     int64_t rowOffset, int64_t vocab) override {
    defer(&Backend::embeddingGrad, ctx, dtype, tableDtype, idsDtype, ids, dout,
          dtable, numIds, rows, hidden, rowOffset, vocab);
  }
  void attentionGrad(tessel_ctx *ctx, int32_t dtype, const void *q,
                     const void *k, const void *v, const void *out,
                     const void *lse, const void *dout, void *dq, void *dk,
                     void *dv, int64_t batch, int64_t seq, int64_t kvSeq,
                     int64_t heads, int64_t kvHeads, int64_t headDim,
                     int64_t valueDim, double scale, AttnMask mask) override {
    defer(&Backend::attentionGrad, ctx, dtype, q, k, v, out, lse, dout, dq, dk,
          dv, batch, seq, kvSeq, heads, kvHeads, headDim, valueDim, scale,
          mask);
  }

  void sumSquares(tessel_ctx *ctx, int32_t dtype, const void *x, int64_t n,
                  int32_t sumDtype, void *sum) override {
    defer(&Backend::sumSquares, ctx, dtype, x, n, sumDtype, sum);
  }
  void clipScale(tessel_ctx *ctx, int32_t dtype, const void *sumSquares,
                 double maxNorm, const void *gradScale, void *scale) override {
    defer(&Backend::clipScale, ctx, dtype, sumSquares, maxNorm, gradScale,
          scale);
  }
  void optimizerUpdate(tessel_ctx *ctx, const tessel_optimizer &opt,
                       const UpdateStep &at, int32_t dtype, void *param,
                       const void *grad, const void *gradScale, void *state0,
                       void *state1, int64_t n) override {
    defer(&Backend::optimizerUpdate, ctx, opt, at, dtype, param, grad,
          gradScale, state0, state1, n);
  }
  void optimizerUpdateMaster(tessel_ctx *ctx, const tessel_optimizer &opt,
                             const UpdateStep &at, int32_t paramDtype,
                             void *param, void *master, int32_t gradDtype,
                             const void *grad, const void *gradScale,
                             void *state0, void *state1, int64_t n) override {
    defer(&Backend::optimizerUpdateMaster, ctx, opt, at, paramDtype, param,
          master, gradDtype, grad, gradScale, state0, state1, n);
  }
  void optimizerUpdateGroup(tessel_ctx *ctx, const tessel_optimizer &opt,
                            const UpdateStep &at, int32_t paramDtype,
                            int32_t gradDtype, bool master,
                            const void *gradScale,
                            const std::vector<UpdateTensor> &tensors) override {
    defer(&Backend::optimizerUpdateGroup, ctx, opt, at, paramDtype, gradDtype,
          master, gradScale, tensors);
  }

private:
  /// Keeps the call of inner's `fn` with these arguments, each stored as
  /// its parameter's value type (a const reference's referent is copied).
  template <class... P, class... A>
  void defer(void (Backend::*fn)(P...), A... args) {
    static_assert(sizeof...(P) == sizeof...(A), "one argument per parameter");
    calls->push_back([in = real.get(), fn,
                      stored = std::make_tuple(std::decay_t<P>(args)...)] {
      std::apply([&](const auto &...a) { (in->*fn)(a...); }, stored);
    });
  }

};

/// The recording front of a communicator: collectives are kept and run,
/// blocking, at the launch (the members replay them in the same order, as
/// they issued them); started ones come here synchronously (no worker
/// thread, no stream), so they are kept in call order too. Point-to-point
/// messages are refused by the front while capturing.
class RecordingCommunicator final : public RecordingFront<Communicator> {
public:
  using RecordingFront::RecordingFront;

  bool runsOnWorkerThread() const override { return false; }
  bool allReduce(tessel_ctx *ctx, const Group &group,
                 const Collective &c) override {
    return keep(&Communicator::allReduce, ctx, group, c);
  }
  bool allGather(tessel_ctx *ctx, const Group &group,
                 const Collective &c) override {
    return keep(&Communicator::allGather, ctx, group, c);
  }
  bool reduceScatter(tessel_ctx *ctx, const Group &group,
                     const Collective &c) override {
    return keep(&Communicator::reduceScatter, ctx, group, c);
  }
  bool allToAll(tessel_ctx *ctx, const Group &group,
                const Collective &c) override {
    return keep(&Communicator::allToAll, ctx, group, c);
  }
  bool send(tessel_ctx *ctx, int32_t peer, int64_t tag, const void *buf,
            int64_t bytes) override {
    return real->send(ctx, peer, tag, buf, bytes);
  }
  bool recv(tessel_ctx *ctx, int32_t peer, int64_t tag, void *buf,
            int64_t bytes) override {
    return real->recv(ctx, peer, tag, buf, bytes);
  }

private:
  using Fn = bool (Communicator::*)(tessel_ctx *, const Group &,
                                    const Collective &);
  /// Keeps the collective; true (it is counted at the capture, and its
  /// failure at a launch is recorded on ctx then).
  bool keep(Fn fn, tessel_ctx *ctx, const Group &group, const Collective &c) {
    Collective copy = c;
    copy.traceIndex = -1; // a launch is traced as one event
    calls->push_back([in = real.get(), fn, ctx, group, copy] {
      (in->*fn)(ctx, group, copy);
    });
    return true;
  }
};

} // namespace

CallRecorder::CallRecorder(tessel_ctx *ctx)
    : ctx(ctx), calls(std::make_shared<RecordedCalls>()) {
  ctx->backend =
      std::make_unique<RecordingBackend>(std::move(ctx->backend), calls);
  if (ctx->communicator)
    ctx->communicator = std::make_unique<RecordingCommunicator>(
        std::move(ctx->communicator), calls);
  installed = true;
}

CallRecorder::~CallRecorder() { finish(); }

std::unique_ptr<CapturedWork> CallRecorder::finish() {
  if (!installed)
    return nullptr;
  installed = false;
  ctx->backend =
      static_cast<RecordingBackend &>(*ctx->backend).release();
  if (ctx->communicator)
    ctx->communicator =
        static_cast<RecordingCommunicator &>(*ctx->communicator).release();
  return std::make_unique<RecordedWork>(std::move(*calls));
}
