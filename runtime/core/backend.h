//===- backend.h - The interface every backend implements -------*- C++ -*-===//
//
// The front (runtime/core) defines every C ABI entry point once: it checks
// the arguments, keeps the counters, and then calls the context's Backend.
// A backend therefore sees only valid arguments and does the work: memory,
// kernels, and (through its Communicator) the data movement of collectives
// and point-to-point messages.
//
// Why an abstract class rather than a struct of function pointers: a
// backend is C++ compiled into this library (CUDA host code is C++ too), so
// `override` turns every signature that drifts from this interface into a
// compile error instead of a silent mismatch; one object per context holds
// the backend's state (stream, events, BLAS handle) without a `void *self`;
// and a virtual call costs what a call through a function pointer costs.
// A plugin loaded with dlopen from C would want the function-pointer table;
// nothing needs that today.
//
// Conventions for every method:
//   - arguments are the C ABI's, already checked as the ABI documents
//     (dtypes, kinds, shapes, blocks); pointers are device memory unless
//     named host;
//   - `ctx` is passed so that errors only the data reveals (a label or id
//     out of range, an integer division by zero) go to setError(ctx, ...)
//     exactly as the ABI documents; a backend must not record errors the
//     front already checks;
//   - work may run asynchronously on the rank's stream; synchronize() waits
//     (and reports what the kernels found in the data meanwhile).
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CORE_BACKEND_H
#define TESSEL_RUNTIME_CORE_BACKEND_H

#include "core/attention_mask.h"
#include "core/collective.h"
#include "core/loss_options.h"
#include "core/rope.h"

#include <memory>
#include <string>
#include <vector>

namespace tessel {

/// A communicator that orders its collectives on a device stream (NCCL)
/// and so starts one without blocking the host: the front hands it the
/// started collectives (tessel_*_start) and their waits directly, with no
/// worker thread. Arguments are checked, the group has more than one rank.
class StreamCollectives {
public:
  virtual ~StreamCollectives() = default;
  /// Issues `c` ordered after the compute stream's work so far, without
  /// ordering the compute stream after it; false with the error recorded.
  /// The front counts it (bytes and async bytes) when it returns true.
  virtual bool start(tessel_ctx *ctx, const Group &group,
                     const Collective &c) = 0;
  /// Orders the compute stream's later work after every started collective
  /// whose output is `out` (none: nothing); no host wait.
  virtual void wait(tessel_ctx *ctx, const void *out) = 0;
  /// The same for every started collective.
  virtual void waitAll(tessel_ctx *ctx) = 0;
};

/// The data movement of the collectives over one group of more than one
/// rank (groups of one never reach it), and of point-to-point messages.
/// Backend-provided: ranks as threads with shared memory or MPI processes on
/// the CPU, NCCL communicators split per axes mask on CUDA. A collective is
/// blocking from the caller's view (on an asynchronous backend: ordered on
/// the rank's stream); it returns false with the error recorded on ctx (a
/// timeout, a failed peer, members that disagree on the call). The front
/// counts only calls that return true.
///
/// Started collectives (tessel_*_start) run one of three ways, chosen by
/// the two queries below: a stream-ordered communicator starts them itself
/// (streamCollectives()); one whose calls block the calling thread is
/// driven by the context's comm worker (core/async_comm.h), a thread that
/// runs the queued collectives one at a time in call order, so its
/// collectives may run on that thread while no other call of the context
/// is in it (runsOnWorkerThread()); otherwise a start runs the collective
/// before it returns.
class Communicator {
public:
  virtual ~Communicator() = default;

  /// Non-null when the communicator starts collectives itself.
  virtual StreamCollectives *streamCollectives() { return nullptr; }
  /// Whether its collectives may run on the comm worker's thread. The
  /// worker and the rank's thread never call the communicator at the same
  /// time (a blocking call waits for the queue, send and recv wait for
  /// every started collective first), but they do call it from two
  /// threads: false when that is not allowed (MPI below
  /// MPI_THREAD_SERIALIZED).
  virtual bool runsOnWorkerThread() const { return true; }

  virtual bool allReduce(tessel_ctx *ctx, const Group &group,
                         const Collective &c) = 0;
  virtual bool allGather(tessel_ctx *ctx, const Group &group,
                         const Collective &c) = 0;
  virtual bool reduceScatter(tessel_ctx *ctx, const Group &group,
                             const Collective &c) = 0;
  virtual bool allToAll(tessel_ctx *ctx, const Group &group,
                        const Collective &c) = 0;

  /// Point-to-point between this rank and world rank `peer` (tessel_send,
  /// tessel_recv), arguments checked: peer is another rank of the world,
  /// bytes >= 0, buf non-null when bytes > 0. send takes a copy of the
  /// payload and returns without waiting for the receiver; recv blocks
  /// until the message from peer with `tag` is in buf. Messages of a pair
  /// match by tag, in any order; two with one tag arrive in send order.
  /// Both return false with the error recorded: a failed world, recv's
  /// timeout (setRecvTimeout) and a message of another size
  /// (setRecvSizeMismatch; the message is consumed), so that every backend
  /// words them alike.
  virtual bool send(tessel_ctx *ctx, int32_t peer, int64_t tag, const void *buf,
                    int64_t bytes) = 0;
  virtual bool recv(tessel_ctx *ctx, int32_t peer, int64_t tag, void *buf,
                    int64_t bytes) = 0;
};

/// recv's errors, worded once for every communicator. `detail` says what
/// the backend knows about the missing message (may be empty).
void setRecvTimeout(tessel_ctx *ctx, int32_t peer, int64_t tag,
                    const std::string &detail);
void setRecvSizeMismatch(tessel_ctx *ctx, int32_t peer, int64_t tag,
                         int64_t sentBytes, int64_t expectedBytes);

/// The step a dropout mask belongs to. `current` (ABI 9's
/// tessel_dropout*_current): the context's step as it stands when the work
/// runs (on an asynchronous backend, the step the last setStep ordered
/// before it on the stream), so a captured step replays with each launch's
/// step; otherwise `step`, the caller's.
struct StepRef {
  bool current = false;
  uint64_t step = 0;
};

/// An optimizer update's 1-based count and learning rate: the caller's
/// (tessel_optimizer_update), or when `current` the context's step + 1
/// (as StepRef) and `schedule` at that count (host memory, copied); and
/// the dtype of its optimizer states and *gradScale: F32, or F64 with f64
/// parameters (ABI 18's tessel_optimizer_update_f64_group_current; the
/// master form is always F32).
struct UpdateStep {
  bool current = false;
  int64_t count = 0;
  double lr = 0.0;
  tessel_lr_schedule schedule{};
  int32_t stateDtype = TESSEL_F32;
};

/// A step captured by a backend that captures natively (a CUDA graph):
/// tessel_graph_launch runs it on the context's stream.
class CapturedWork {
public:
  virtual ~CapturedWork() = default;
  /// Runs the captured work once; errors are recorded on ctx.
  virtual void launch(tessel_ctx *ctx) = 0;
};

/// One tensor of a grouped optimizer update (tessel_optimizer_update_group_
/// current): device pointers (master null without mixed precision) and its
/// size.
struct UpdateTensor {
  void *param, *master;
  const void *grad;
  void *state0, *state1;
  int64_t n;
};

/// One rank's backend. Created by its factory (see kBackends in
/// registry.cpp) for one context and destroyed with it.
class Backend {
public:
  virtual ~Backend() = default;

  /// The name tessel_ctx_backend reports ("cpu").
  virtual const char *name() const = 0;

  /// The communicator for ctx's comm kind (ctx's rank, world and mesh are
  /// set); null for TESSEL_COMM_NONE. On failure: null with the reason in
  /// `error`. An MPI or NCCL creation is collective over the world.
  virtual std::unique_ptr<Communicator>
  createCommunicator(tessel_ctx *ctx, const tessel_ctx_options &options,
                     std::string &error) = 0;

  //===--- Memory (the front counts bytes and checks sizes) ---------------===//

  /// `bytes` (>= 0) of device memory, 64-byte aligned, zero-filled; a
  /// zero-byte request still gets a distinct, freeable pointer. Null when
  /// out of memory.
  virtual void *alloc(int64_t bytes) = 0;
  virtual void free(void *ptr) = 0;
  /// bytes > 0 in the copies and zero. copy: device to device, overlapping
  /// ranges allowed (memmove), dst != src.
  virtual void copyToDevice(void *dst, const void *hostSrc, int64_t bytes) = 0;
  virtual void copyToHost(void *hostDst, const void *src, int64_t bytes) = 0;
  virtual void copy(void *dst, const void *src, int64_t bytes) = 0;
  /// `rows` rows of `rowBytes` (> 0) bytes, row r from src + r·srcPitch to
  /// dst + r·dstPitch, device to device, not overlapping (all_slice, a
  /// cudaMemcpy2DAsync).
  virtual void copy2d(void *dst, int64_t dstPitch, const void *src,
                      int64_t srcPitch, int64_t rows, int64_t rowBytes) = 0;
  virtual void zero(void *dst, int64_t bytes) = 0;
  /// Waits for every kernel and copy issued so far; an error a kernel found
  /// in the data on an asynchronous backend is recorded on ctx here.
  virtual void synchronize(tessel_ctx *ctx) = 0;
  /// tessel_set_step: orders the context's new step (already in ctx->step)
  /// before the work issued after it, for the kernels that read the step
  /// when they run (StepRef::current). A backend whose work runs when it
  /// is issued reads ctx->step and needs nothing here.
  virtual void setStep(tessel_ctx *ctx, uint64_t step) {
    (void)ctx;
    (void)step;
  }

  //===--- Captured steps (tessel_graph_*) --------------------------------===//

  /// Whether the backend captures work itself (CUDA stream capture). When
  /// not, the front records the calls instead (core/recording.h).
  virtual bool capturesNatively() const { return false; }
  /// Starts capturing the work issued from now on (nothing of it runs);
  /// false with the error recorded.
  virtual bool beginCapture(tessel_ctx *ctx) {
    (void)ctx;
    return false;
  }
  /// Ends the capture: the work, or null with the error recorded. With
  /// `discard` (an error was recorded meanwhile) it ends the capture and
  /// returns null without recording another error.
  virtual std::unique_ptr<CapturedWork> endCapture(tessel_ctx *ctx,
                                                   bool discard) {
    (void)ctx;
    (void)discard;
    return nullptr;
  }

  //===--- Kernels (tessel/runtime.h documents each) ----------------------===//

  virtual void initParam(tessel_ctx *ctx, void *dst, int32_t dtype,
                         int64_t first, int64_t count, int32_t kind,
                         const double *hostArgs, uint64_t seed,
                         uint64_t nameHash) = 0;
  virtual void matmul(tessel_ctx *ctx, int32_t dtype, const void *a,
                      const void *b, void *c, int64_t batch, int64_t m,
                      int64_t n, int64_t k, bool transA, bool transB,
                      bool bShared) = 0;
  /// beta 0 or 1 (0 with a GELU epilogue); epilogue a
  /// tessel_matmul_epilogue_kind (the front checks them), bias null unless
  /// a bias epilogue; aux [batch, M, N], written by GELU_BIAS when not null,
  /// read by DGELU; [N] written by BGRADB (batch 1); null otherwise, never
  /// overlapping c.
  virtual void matmulEpilogue(tessel_ctx *ctx, int32_t dtype, const void *a,
                              const void *b, void *c, int64_t batch, int64_t m,
                              int64_t n, int64_t k, bool transA, bool transB,
                              bool bShared, double beta, int32_t epilogue,
                              const void *bias, void *aux) = 0;
  /// tessel_matmul_accumulate_f32 (beta 1) and tessel_matmul_f32 (beta
  /// 0): C (f32) = op(A)·op(B) + beta·C, A and B f16 or bf16, the product
  /// summed in f32; BGRADB (batch 1) also writes op(B)'s column sums, f32,
  /// to aux (the front checks the rest).
  virtual void matmulF32(tessel_ctx *ctx, int32_t dtype, const void *a,
                         const void *b, void *c, int64_t batch, int64_t m,
                         int64_t n, int64_t k, bool transA, bool transB,
                         bool bShared, double beta, int32_t epilogue,
                         void *aux) = 0;
  /// An aux epilogue by the backend's own kernels, as the unfused ops run:
  /// GELU_BIAS is the biased product (into aux, or into c when aux is
  /// null) then tessel_unary's GELU; DGELU the product then tessel_unary_
  /// grad's; BGRADB the product then tessel_reduce's sum of op(B)'s rows.
  /// The CPU's arithmetic, and a GPU's where cuBLASLt refuses the fused
  /// form.
  void matmulEpilogueByParts(tessel_ctx *ctx, int32_t dtype, const void *a,
                             const void *b, void *c, int64_t batch, int64_t m,
                             int64_t n, int64_t k, bool transA, bool transB,
                             bool bShared, double beta, int32_t epilogue,
                             const void *bias, void *aux) {
    const int64_t count = batch * m * n;
    if (epilogue == TESSEL_EPILOGUE_GELU_BIAS) {
      void *pre = aux ? aux : c;
      matmulEpilogue(ctx, dtype, a, b, pre, batch, m, n, k, transA, transB,
                     bShared, 0.0, TESSEL_EPILOGUE_BIAS, bias, nullptr);
      unary(ctx, TESSEL_GELU_TANH, dtype, pre, c, count);
      return;
    }
    matmulEpilogue(ctx, dtype, a, b, c, batch, m, n, k, transA, transB,
                   bShared, beta, TESSEL_EPILOGUE_NONE, nullptr, nullptr);
    if (epilogue == TESSEL_EPILOGUE_DGELU) {
      unaryGrad(ctx, TESSEL_GELU_TANH, dtype, aux, c, c, count);
    } else {
      // op(B) is [k, n]; stored transposed it is [n, k], summed over k.
      const int64_t shape[2] = {transB ? n : k, transB ? k : n};
      reduce(ctx, TESSEL_REDUCE_SUM, dtype, dtype, b, aux, 2, shape,
             transB ? 0b10 : 0b01);
    }
  }
  virtual void binary(tessel_ctx *ctx, int32_t op, int32_t dtype, const void *a,
                      const void *b, void *out, int64_t n) = 0;
  /// tessel_binary_broadcast: b paired by column or row of an [rows, cols]
  /// view of a (`layout`, tessel_broadcast_layout); rows, cols > 0.
  virtual void binaryBroadcast(tessel_ctx *ctx, int32_t op, int32_t dtype,
                               const void *a, const void *b, void *out,
                               int64_t rows, int64_t cols, int32_t layout) = 0;
  virtual void unary(tessel_ctx *ctx, int32_t op, int32_t dtype, const void *x,
                     void *y, int64_t n) = 0;
  virtual void cast(tessel_ctx *ctx, int32_t srcDtype, int32_t dstDtype,
                    const void *x, void *y, int64_t n) = 0;
  /// `stream` is the context's random stream (tessel_set_rng_stream).
  virtual void dropout(tessel_ctx *ctx, int32_t dtype, const void *x, void *y,
                       int64_t n, double rate, uint64_t seed, StepRef step,
                       int64_t first, uint64_t stream) = 0;
  virtual void dropoutBlock(tessel_ctx *ctx, int32_t dtype, const void *x,
                            void *y, int32_t rank, const int64_t *hostShape,
                            const int64_t *hostStrides, double rate,
                            uint64_t seed, StepRef step, int64_t first,
                            uint64_t stream) = 0;
  /// count > 0 elements of `elementBytes` (1, 2, 4 or 8) at out, each the
  /// low `elementBytes` bytes of `bits` (the front read them from the host).
  virtual void fill(tessel_ctx *ctx, void *out, int64_t count,
                    int64_t elementBytes, uint64_t bits) = 0;
  /// Every extent > 0 (the front returns early on an empty copy).
  virtual void stridedCopy(tessel_ctx *ctx, int32_t dtype, const void *in,
                           void *out, int32_t rank, const int64_t *hostShape,
                           const int64_t *hostInStrides,
                           const int64_t *hostOutStrides) = 0;
  /// At least one output element. `outDtype` is `dtype`, or f32 for a
  /// 16-bit dtype (tessel_reduce_f32).
  virtual void reduce(tessel_ctx *ctx, int32_t kind, int32_t dtype,
                      int32_t outDtype, const void *in, void *out, int32_t rank,
                      const int64_t *hostShape, uint64_t reduceMask) = 0;
  virtual void softmax(tessel_ctx *ctx, int32_t dtype, const void *x, void *y,
                       int64_t outer, int64_t dim, int64_t inner) = 0;
  /// cols > 0.
  virtual void layerNorm(tessel_ctx *ctx, int32_t dtype, const void *x,
                         const void *gamma, const void *beta, void *y,
                         int64_t rows, int64_t cols, double eps, bool rms) = 0;
  /// A residual add and the norm of its result in one pass (rows, cols > 0;
  /// rows·cols fits int64): sum = a + b rounded to dtype, then y =
  /// layerNorm(sum). sum may be a or b; y overlaps none of a, b, sum. The
  /// default is the two kernels; a backend that fuses them computes the
  /// same values (the norm reads the rounded sum).
  virtual void addLayerNorm(tessel_ctx *ctx, int32_t dtype, const void *a,
                            const void *b, const void *gamma, const void *beta,
                            void *sum, void *y, int64_t rows, int64_t cols,
                            double eps, bool rms) {
    binary(ctx, TESSEL_ADD, dtype, a, b, sum, rows * cols);
    layerNorm(ctx, dtype, sum, gamma, beta, y, rows, cols, eps, rms);
  }
  /// outer·inner > 0.
  virtual void batchNorm(tessel_ctx *ctx, int32_t dtype, const void *x,
                         const void *gamma, const void *beta, void *y,
                         int64_t outer, int64_t channels, int64_t inner,
                         double eps) = 0;
  virtual void embedding(tessel_ctx *ctx, int32_t dtype, int32_t idsDtype,
                         const void *table, const void *ids, void *out,
                         int64_t numIds, int64_t rows, int64_t hidden,
                         int64_t rowOffset, int64_t vocab) = 0;
  /// lossDtype is dtype's, or f32 for f16/bf16 logits
  /// (tessel_cross_entropy_f32: the f32 kernel's arithmetic on the widened
  /// logits). options.softcap > 0: the loss of the soft-capped logits
  /// softcapValue(x, softcap) (core/softcap.h), computed in the arithmetic
  /// type; options.smoothing ε > 0: of the smoothed target
  /// (core/loss_options.h).
  virtual void crossEntropy(tessel_ctx *ctx, int32_t dtype, int32_t lossDtype,
                            int32_t labelDtype, const void *logits,
                            const void *labels, void *out, int64_t rows,
                            int64_t classes, int32_t reduction,
                            LossOptions options) = 0;
  /// lse ([B, H, S], f64 for f64 and f32 otherwise) may be null.
  virtual void attention(tessel_ctx *ctx, int32_t dtype, const void *q,
                         const void *k, const void *v, void *out, void *lse,
                         int64_t batch, int64_t seq, int64_t kvSeq,
                         int64_t heads, int64_t kvHeads, int64_t headDim,
                         int64_t valueDim, double scale, AttnMask mask) = 0;
  /// Sizes >= 0 with headDim even, rotaryDim (the first elements of each
  /// row turned, the rest copied) even and in (0, headDim], theta finite
  /// and positive, the scaling none or valid (rope::Scaling::valid); y is x
  /// or overlaps it nowhere. Position p of x is turned as position
  /// firstPosition + p (>= 0; a block of the sequence under context
  /// parallelism).
  virtual void rope(tessel_ctx *ctx, int32_t dtype, const void *x, void *y,
                    int64_t outer, int64_t positions, int64_t heads,
                    int64_t headDim, int64_t rotaryDim, double theta,
                    bool interleaved, bool inverse,
                    const rope::Scaling &scaling, int64_t firstPosition) = 0;

  //===--- Backward kernels -----------------------------------------------===//

  virtual void unaryGrad(tessel_ctx *ctx, int32_t op, int32_t dtype,
                         const void *x, const void *dy, void *dx,
                         int64_t n) = 0;
  virtual void softmaxGrad(tessel_ctx *ctx, int32_t dtype, const void *y,
                           const void *dy, void *dx, int64_t outer, int64_t dim,
                           int64_t inner) = 0;
  /// dgamma and dbeta of paramDtype: dtype's, or f32 for f16/bf16 x
  /// (tessel_layer_norm_grad_f32: the column sums rounded to f32 only).
  virtual void layerNormGrad(tessel_ctx *ctx, int32_t dtype, int32_t paramDtype,
                             const void *x, const void *gamma, const void *dy,
                             void *dx, void *dgamma, void *dbeta, int64_t rows,
                             int64_t cols, double eps, bool rms) = 0;
  /// layerNormGrad whose dx is then added to `residual` (the gradient the
  /// residual stream carries past the norm): dx = residual + the norm's dx
  /// rounded to dtype, as the two kernels compute it. dx overlaps none of
  /// x, dy, residual; rows, cols > 0 (the front takes an empty one to
  /// layerNormGrad). The default is the two kernels.
  virtual void layerNormGradAdd(tessel_ctx *ctx, int32_t dtype,
                                int32_t paramDtype, const void *x,
                                const void *gamma, const void *dy,
                                const void *residual, void *dx, void *dgamma,
                                void *dbeta, int64_t rows, int64_t cols,
                                double eps, bool rms) {
    layerNormGrad(ctx, dtype, paramDtype, x, gamma, dy, dx, dgamma, dbeta, rows,
                  cols, eps, rms);
    binary(ctx, TESSEL_ADD, dtype, residual, dx, dx, rows * cols);
  }
  virtual void batchNormGrad(tessel_ctx *ctx, int32_t dtype, const void *x,
                             const void *gamma, const void *dy, void *dx,
                             void *dgamma, void *dbeta, int64_t outer,
                             int64_t channels, int64_t inner, double eps) = 0;
  /// dloss of lossDtype (crossEntropy's), dlogits of dtype: with an f32
  /// loss of 16-bit logits, the f32 gradient of the widened logits rounded
  /// to dtype (tessel_cross_entropy_grad_f32). A cap: the gradient of the
  /// capped logits' loss, times the cap's slope; smoothing: of the
  /// smoothed target.
  virtual void crossEntropyGrad(tessel_ctx *ctx, int32_t dtype,
                                int32_t lossDtype, int32_t labelDtype,
                                const void *logits, const void *labels,
                                const void *dloss, void *dlogits, int64_t rows,
                                int64_t classes, int32_t reduction,
                                LossOptions options) = 0;
  /// crossEntropy into out, then crossEntropyGrad into dlogits, which is
  /// logits (in place) or apart from every other operand. The default is
  /// the two kernels, the loss first (it reads the logits the gradient may
  /// overwrite).
  virtual void crossEntropyWithGrad(tessel_ctx *ctx, int32_t dtype,
                                    int32_t lossDtype, int32_t labelDtype,
                                    const void *logits, const void *labels,
                                    const void *dloss, void *out, void *dlogits,
                                    int64_t rows, int64_t classes,
                                    int32_t reduction, LossOptions options) {
    crossEntropy(ctx, dtype, lossDtype, labelDtype, logits, labels, out, rows,
                 classes, reduction, options);
    crossEntropyGrad(ctx, dtype, lossDtype, labelDtype, logits, labels, dloss,
                     dlogits, rows, classes, reduction, options);
  }
  virtual void labelLogit(tessel_ctx *ctx, int32_t dtype, int32_t labelDtype,
                          const void *logits, const void *labels, void *out,
                          int64_t rows, int64_t classes, int64_t classOffset,
                          int64_t totalClasses) = 0;
  /// tessel_vocab_loss_stats(_f32): the block's row statistics (stats.max
  /// ... stats.logitSum, each [rows] of statsDtype: dtype, or f32 for
  /// 16-bit logits), classes > 0.
  virtual void vocabLossStats(tessel_ctx *ctx, int32_t dtype,
                              int32_t statsDtype, int32_t labelDtype,
                              const void *logits, const void *labels,
                              VocabStats stats, int64_t rows, int64_t classes,
                              int64_t classOffset, int64_t totalClasses,
                              double softcap) = 0;
  /// tessel_vocab_loss_grad(_f32): the block's gradient (of dtype) from
  /// the whole rows' max and sum of exponentials and each row's gradient
  /// (of statsDtype).
  virtual void vocabLossGrad(tessel_ctx *ctx, int32_t dtype, int32_t statsDtype,
                             int32_t labelDtype, const void *logits,
                             const void *labels, const void *max,
                             const void *sumExp, const void *rowGrad,
                             void *dlogits, int64_t rows, int64_t classes,
                             int64_t classOffset, int64_t totalClasses,
                             LossOptions options) = 0;
  virtual void subLabel(tessel_ctx *ctx, int32_t dtype, int32_t labelDtype,
                        const void *x, const void *labels, const void *values,
                        void *out, int64_t rows, int64_t classes,
                        int64_t classOffset, int64_t totalClasses) = 0;
  /// tessel_mask_labels: labels equal to ignoreIndex become 0 with weight
  /// 0, the others keep their value with weight 1.
  virtual void maskLabels(tessel_ctx *ctx, int32_t labelDtype, int32_t dtype,
                          const void *labels, int64_t ignoreIndex, void *safe,
                          void *weights, int64_t n) = 0;
  /// dtable of tableDtype: dtype's, or f32 for f16/bf16 dout
  /// (tessel_embedding_grad_f32: each row's sum rounded to f32 only).
  virtual void embeddingGrad(tessel_ctx *ctx, int32_t dtype, int32_t tableDtype,
                             int32_t idsDtype, const void *ids,
                             const void *dout, void *dtable, int64_t numIds,
                             int64_t rows, int64_t hidden, int64_t rowOffset,
                             int64_t vocab) = 0;
  /// From the forward's out and lse; both null (a model of ABI 10 or
  /// older, tessel_attention_grad): the backend runs the forward for them
  /// into temporaries first.
  virtual void attentionGrad(tessel_ctx *ctx, int32_t dtype, const void *q,
                             const void *k, const void *v, const void *out,
                             const void *lse, const void *dout, void *dq,
                             void *dk, void *dv, int64_t batch, int64_t seq,
                             int64_t kvSeq, int64_t heads, int64_t kvHeads,
                             int64_t headDim, int64_t valueDim, double scale,
                             AttnMask mask) = 0;

  //===--- Optimizer (device-side scalars) --------------------------------===//

  /// *sum (a device scalar of sumDtype, F32 or F64) += Σ x² accumulated
  /// in f64.
  virtual void sumSquares(tessel_ctx *ctx, int32_t dtype, const void *x,
                          int64_t n, int32_t sumDtype, void *sum) = 0;
  /// The three scalars are device `dtype`s, F32 or F64.
  virtual void clipScale(tessel_ctx *ctx, int32_t dtype, const void *sumSquares,
                         double maxNorm, const void *gradScale,
                         void *scale) = 0;
  /// `opt` is host memory; kind, count, schedule and state presence are
  /// checked.
  virtual void optimizerUpdate(tessel_ctx *ctx, const tessel_optimizer &opt,
                               const UpdateStep &at, int32_t dtype,
                               void *param, const void *grad,
                               const void *gradScale, void *state0,
                               void *state1, int64_t n) = 0;
  /// Mixed precision: the same step on the f32 `master`, then `param`
  /// (bf16 or f16) = master rounded; dtypes checked.
  virtual void optimizerUpdateMaster(tessel_ctx *ctx,
                                     const tessel_optimizer &opt,
                                     const UpdateStep &at, int32_t paramDtype,
                                     void *param, void *master,
                                     int32_t gradDtype, const void *grad,
                                     const void *gradScale, void *state0,
                                     void *state1, int64_t n) = 0;
  /// The same update of every tensor (master: the mixed-precision form),
  /// all checked; by default one call each, in order.
  virtual void optimizerUpdateGroup(tessel_ctx *ctx,
                                    const tessel_optimizer &opt,
                                    const UpdateStep &at, int32_t paramDtype,
                                    int32_t gradDtype, bool master,
                                    const void *gradScale,
                                    const std::vector<UpdateTensor> &tensors) {
    for (const UpdateTensor &t : tensors) {
      if (master)
        optimizerUpdateMaster(ctx, opt, at, paramDtype, t.param, t.master,
                              gradDtype, t.grad, gradScale, t.state0,
                              t.state1, t.n);
      else
        optimizerUpdate(ctx, opt, at, paramDtype, t.param, t.grad, gradScale,
                        t.state0, t.state1, t.n);
    }
  }
};

/// One backend compiled into this library: its name, whether it can run on
/// this host (a CUDA backend: a device is present), and its factory (null
/// with the reason in `error` on failure).
struct BackendFactory {
  const char *name;
  bool (*available)();
  std::unique_ptr<Backend> (*create)(const tessel_ctx_options &options,
                                     std::string &error);
};

/// The backend called `name`, or null.
const BackendFactory *findBackend(const char *name);
/// "cpu" or "cpu, cuda": the names compiled in, for error messages.
std::string backendNames();

namespace cpu {
bool available();
std::unique_ptr<Backend> createBackend(const tessel_ctx_options &options,
                                       std::string &error);

/// The worlds the C ABI's bootstrap calls (world.cpp) forward to: ranks as
/// threads (comm_local.cpp) or MPI processes (comm_mpi.cpp). They exist
/// before any context, so they belong to no backend object; a CUDA backend
/// bootstraps from the same worlds (its NCCL id goes through them).
tessel_local_world *createLocalWorld(int32_t worldSize);
void destroyLocalWorld(tessel_local_world *world);
void abortLocalWorld(tessel_local_world *world, int32_t rank,
                     const char *message);
/// 0 on success; otherwise non-zero with setCreateError called.
int32_t mpiInit(int32_t *rank, int32_t *worldSize);
void mpiFinalize();
[[noreturn]] void mpiAbort(int32_t code);
} // namespace cpu

/// The CUDA backend, loaded on first use from libtessel_cuda.so beside the
/// runtime (core/cuda_plugin.cpp). available(): the plugin loads and sees
/// at least one device; otherwise unavailableReason() says why.
namespace cuda {
bool available();
std::string unavailableReason();
int32_t deviceCount();
std::unique_ptr<Backend> createBackend(const tessel_ctx_options &options,
                                       std::string &error);
} // namespace cuda

} // namespace tessel

#endif // TESSEL_RUNTIME_CORE_BACKEND_H
