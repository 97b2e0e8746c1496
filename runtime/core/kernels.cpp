//===- kernels.cpp - Entry points of the forward kernels and init ---------===//
//
// Each entry point counts the kernel (KernelScope), checks its arguments as
// tessel/runtime.h documents them, and hands the call to the context's
// backend. A null context has no backend: the call does nothing. The
// attention and rope entries are in kernels_attention.cpp.
//
//===----------------------------------------------------------------------===//

#include "core/backend.h"
#include "core/checks.h"
#include "core/rng.h"

#include <cmath>
#include <cstring>

using namespace tessel;

extern "C" {

void tessel_init_param(tessel_ctx *ctx, void *dst, int32_t dtype, int64_t first,
                       int64_t count, int32_t kind, const double *args,
                       uint64_t seed, const char *name) {
  if (!ctx || refuseWhileCapturing(ctx, "tessel_init_param"))
    return;
  KernelScope scope(ctx, __func__);
  if (count <= 0)
    return;
  if (kind < TESSEL_INIT_ZEROS || kind > TESSEL_INIT_UNIFORM) {
    setError(ctx, "tessel_init_param: unknown init kind %d", kind);
    return;
  }
  if (kind >= TESSEL_INIT_CONSTANT && !args) {
    setError(ctx, "tessel_init_param: init kind %d needs args", kind);
    return;
  }
  if (kind >= TESSEL_INIT_NORMAL && isIntDtype(dtype)) {
    setError(ctx, "tessel_init_param: random init of an integer parameter");
    return;
  }
  if (!checkDtype(ctx, "tessel_init_param", dtype, isKnownDtype(dtype)))
    return;
  ctx->backend->initParam(ctx, dst, dtype, first, count, kind, args, seed,
                          fnv1a(name));
}

void tessel_matmul(tessel_ctx *ctx, int32_t dtype, const void *a, const void *b,
                   void *c, int64_t batch, int64_t m, int64_t n, int64_t k,
                   int32_t trans_a, int32_t trans_b, int32_t b_shared) {
  if (!ctx)
    return;
  KernelScope scope(ctx, __func__);
  if (batch < 0 || m < 0 || n < 0 || k < 0) {
    setError(ctx, "tessel_matmul: negative dimension");
    return;
  }
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX) {
    setError(ctx, "tessel_matmul: dimension beyond BLAS int range");
    return;
  }
  if (!checkDtype(ctx, "tessel_matmul", dtype, isFloatDtype(dtype)))
    return;
  ctx->backend->matmul(ctx, dtype, a, b, c, batch, m, n, k, trans_a != 0,
                       trans_b != 0, b_shared != 0);
}

namespace {

/// The checks every matmul-with-epilogue entry shares: A and B of dtype,
/// C (and a bias gradient) of outDtype. False with the error recorded.
bool matmulEpilogueChecked(tessel_ctx *ctx, const char *name, int32_t dtype,
                           int32_t outDtype, const void *c, int64_t batch,
                           int64_t m, int64_t n, int64_t k, double beta,
                           int32_t epilogue, const void *bias,
                           const void *aux) {
  if (batch < 0 || m < 0 || n < 0 || k < 0) {
    setError(ctx, "%s: negative dimension", name);
    return false;
  }
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX) {
    setError(ctx, "%s: dimension beyond BLAS int range", name);
    return false;
  }
  if (!checkDtype(ctx, name, dtype, isFloatDtype(dtype)))
    return false;
  if (beta != 0.0 && beta != 1.0) {
    setError(ctx, "%s: beta %g (expected 0 or 1)", name, beta);
    return false;
  }
  if (epilogue < TESSEL_EPILOGUE_NONE || epilogue > TESSEL_EPILOGUE_BGRADB) {
    setError(ctx, "%s: unknown epilogue %d", name, epilogue);
    return false;
  }
  const bool gelu = epilogue == TESSEL_EPILOGUE_GELU_BIAS ||
                    epilogue == TESSEL_EPILOGUE_DGELU;
  if (gelu && beta != 0.0) {
    setError(ctx, "%s: the GELU epilogues take beta 0, got %g", name, beta);
    return false;
  }
  const bool empty = batch == 0 || m == 0 || n == 0;
  if ((epilogue == TESSEL_EPILOGUE_BIAS ||
       epilogue == TESSEL_EPILOGUE_GELU_BIAS) &&
      !bias && !empty) {
    setError(ctx, "%s: null bias", name);
    return false;
  }
  if (epilogue == TESSEL_EPILOGUE_DGELU && !aux && !empty) {
    setError(ctx, "%s: null aux (the GELU's input) with the DGELU epilogue",
             name);
    return false;
  }
  const bool biasGrad = epilogue == TESSEL_EPILOGUE_BGRADB;
  if (biasGrad && !aux && n > 0) {
    setError(ctx, "%s: null aux (the bias gradient) with the BGRADB epilogue",
             name);
    return false;
  }
  if (biasGrad && batch != 1) {
    setError(ctx, "%s: the BGRADB epilogue on a batch of %lld (one GEMM only)",
             name, (long long)batch);
    return false;
  }
  if (aux && !gelu && !biasGrad) {
    setError(ctx, "%s: aux with an epilogue that neither writes nor reads it",
             name);
    return false;
  }
  // The GELU's aux is [batch, M, N] as C, the bias gradient [N].
  int64_t bytes = 0;
  if (aux && (__builtin_mul_overflow(batch, m, &bytes) ||
              __builtin_mul_overflow(bytes, n, &bytes) ||
              __builtin_mul_overflow(bytes, tessel_dtype_size(outDtype),
                                     &bytes))) {
    setError(ctx, "%s: output size overflows", name);
    return false;
  }
  const int64_t auxBytes =
      biasGrad ? n * tessel_dtype_size(outDtype) : bytes;
  if (aux && overlaps(aux, auxBytes, c, bytes)) {
    setError(ctx, "%s: aux overlaps the output", name);
    return false;
  }
  // cuBLASLt has no epilogue without a product; no backend takes one.
  if (epilogue != TESSEL_EPILOGUE_NONE && k == 0) {
    setError(ctx, "%s: k = 0 with an epilogue", name);
    return false;
  }
  return true;
}

} // namespace

void tessel_matmul_epilogue(tessel_ctx *ctx, int32_t dtype, const void *a,
                            const void *b, void *c, int64_t batch, int64_t m,
                            int64_t n, int64_t k, int32_t trans_a,
                            int32_t trans_b, int32_t b_shared, double beta,
                            int32_t epilogue, const void *bias) {
  if (!ctx)
    return;
  KernelScope scope(ctx, __func__);
  if (matmulEpilogueChecked(ctx, __func__, dtype, dtype, c, batch, m, n, k,
                            beta, epilogue, bias, nullptr))
    ctx->backend->matmulEpilogue(ctx, dtype, a, b, c, batch, m, n, k,
                                 trans_a != 0, trans_b != 0, b_shared != 0,
                                 beta, epilogue, bias, nullptr);
}

void tessel_matmul_epilogue_aux(tessel_ctx *ctx, int32_t dtype, const void *a,
                                const void *b, void *c, int64_t batch,
                                int64_t m, int64_t n, int64_t k,
                                int32_t trans_a, int32_t trans_b,
                                int32_t b_shared, double beta, int32_t epilogue,
                                const void *bias, void *aux) {
  if (!ctx)
    return;
  KernelScope scope(ctx, __func__);
  if (matmulEpilogueChecked(ctx, __func__, dtype, dtype, c, batch, m, n, k,
                            beta, epilogue, bias, aux))
    ctx->backend->matmulEpilogue(ctx, dtype, a, b, c, batch, m, n, k,
                                 trans_a != 0, trans_b != 0, b_shared != 0,
                                 beta, epilogue, bias, aux);
}

namespace {

/// tessel_matmul_accumulate_f32 (beta 1) and tessel_matmul_f32 (beta 0):
/// 16-bit operands, an f32 C, no epilogue or BGRADB.
void matmulF32Checked(tessel_ctx *ctx, const char *name, int32_t dtype,
                      const void *a, const void *b, void *c, int64_t batch,
                      int64_t m, int64_t n, int64_t k, int32_t transA,
                      int32_t transB, int32_t bShared, double beta,
                      int32_t epilogue, void *aux) {
  if (!checkDtype(ctx, name, dtype, isHalfDtype(dtype)))
    return;
  if (epilogue != TESSEL_EPILOGUE_NONE && epilogue != TESSEL_EPILOGUE_BGRADB) {
    setError(ctx, "%s: epilogue %d (expected none or BGRADB)", name, epilogue);
    return;
  }
  if (matmulEpilogueChecked(ctx, name, dtype, TESSEL_F32, c, batch, m, n, k,
                            beta, epilogue, nullptr, aux))
    ctx->backend->matmulF32(ctx, dtype, a, b, c, batch, m, n, k, transA != 0,
                            transB != 0, bShared != 0, beta, epilogue, aux);
}

} // namespace

void tessel_matmul_accumulate_f32(tessel_ctx *ctx, int32_t dtype,
                                  const void *a, const void *b, void *c,
                                  int64_t batch, int64_t m, int64_t n,
                                  int64_t k, int32_t trans_a, int32_t trans_b,
                                  int32_t b_shared, int32_t epilogue,
                                  void *aux) {
  if (!ctx)
    return;
  KernelScope scope(ctx, __func__);
  matmulF32Checked(ctx, __func__, dtype, a, b, c, batch, m, n, k, trans_a,
                   trans_b, b_shared, /*beta=*/1.0, epilogue, aux);
}

void tessel_matmul_f32(tessel_ctx *ctx, int32_t dtype, const void *a,
                       const void *b, void *c, int64_t batch, int64_t m,
                       int64_t n, int64_t k, int32_t trans_a, int32_t trans_b,
                       int32_t b_shared, int32_t epilogue, void *aux) {
  if (!ctx)
    return;
  KernelScope scope(ctx, __func__);
  matmulF32Checked(ctx, __func__, dtype, a, b, c, batch, m, n, k, trans_a,
                   trans_b, b_shared, /*beta=*/0.0, epilogue, aux);
}

/// A binary entry's op (tessel_binary_op) and dtype; otherwise records
/// "<entry>: ..." and fails.
static bool checkBinary(tessel_ctx *ctx, const char *entry, int32_t op,
                        int32_t dtype) {
  if (op < TESSEL_ADD || op > TESSEL_EQUAL) {
    setError(ctx, "%s: unknown op %d", entry, op);
    return false;
  }
  return checkDtype(ctx, entry, dtype, isKnownDtype(dtype));
}

void tessel_binary(tessel_ctx *ctx, int32_t op, int32_t dtype, const void *a,
                   const void *b, void *out, int64_t n) {
  if (!ctx)
    return;
  KernelScope scope(ctx, __func__);
  if (checkBinary(ctx, __func__, op, dtype))
    ctx->backend->binary(ctx, op, dtype, a, b, out, n);
}

void tessel_binary_broadcast(tessel_ctx *ctx, int32_t op, int32_t dtype,
                             const void *a, const void *b, void *out,
                             int64_t rows, int64_t cols, int32_t layout) {
  if (!ctx)
    return;
  KernelScope scope(ctx, __func__);
  if (!checkBinary(ctx, __func__, op, dtype))
    return;
  if (layout < 0 ||
      layout > (TESSEL_BROADCAST_ROWS | TESSEL_BROADCAST_B_FIRST)) {
    setError(ctx, "tessel_binary_broadcast: unknown layout %d", layout);
    return;
  }
  if (!checkRows(ctx, __func__, rows, cols))
    return;
  if (rows == 0 || cols == 0)
    return;
  // b's elements are read by many of out's: writing out over them would
  // change what later elements read.
  const int64_t size = tessel_dtype_size(dtype);
  const int64_t bCount = layout & TESSEL_BROADCAST_ROWS ? rows : cols;
  int64_t outBytes;
  if (__builtin_mul_overflow(rows * cols, size, &outBytes)) {
    setError(ctx, "tessel_binary_broadcast: [%lld, %lld] elements overflow "
                  "int64 bytes",
             (long long)rows, (long long)cols);
    return;
  }
  if (overlaps(out, outBytes, b, bCount * size)) {
    setError(ctx, "tessel_binary_broadcast: out overlaps b");
    return;
  }
  ctx->backend->binaryBroadcast(ctx, op, dtype, a, b, out, rows, cols, layout);
}

void tessel_unary(tessel_ctx *ctx, int32_t op, int32_t dtype, const void *x,
                  void *y, int64_t n) {
  if (!ctx)
    return;
  KernelScope scope(ctx, __func__);
  if (!checkDtype(ctx, "tessel_unary", dtype, isFloatDtype(dtype)))
    return;
  if (op < TESSEL_NEG || op > TESSEL_SILU) {
    setError(ctx, "tessel_unary: unknown op %d", op);
    return;
  }
  ctx->backend->unary(ctx, op, dtype, x, y, n);
}

void tessel_cast(tessel_ctx *ctx, int32_t src_dtype, int32_t dst_dtype,
                 const void *x, void *y, int64_t n) {
  if (!ctx)
    return;
  KernelScope scope(ctx, __func__);
  if (!isKnownDtype(src_dtype) || !isKnownDtype(dst_dtype)) {
    setError(ctx, "tessel_cast: unsupported dtypes %d -> %d", src_dtype,
             dst_dtype);
    return;
  }
  ctx->backend->cast(ctx, src_dtype, dst_dtype, x, y, n);
}

/// The checks every dropout entry makes: the rate and the dtype.
static bool checkDropout(tessel_ctx *ctx, const char *entry, int32_t dtype,
                         double rate) {
  if (!(rate >= 0.0 && rate <= 1.0)) {
    setError(ctx, "%s: rate %g outside [0, 1]", entry, rate);
    return false;
  }
  return checkDtype(ctx, entry, dtype, isFloatDtype(dtype));
}

/// The whole of tessel_dropout and tessel_dropout_current.
static void dropout(tessel_ctx *ctx, const char *entry, int32_t dtype,
                    const void *x, void *y, int64_t n, double rate,
                    uint64_t seed, StepRef step, int64_t first) {
  if (!checkDropout(ctx, entry, dtype, rate))
    return;
  // Evaluation (tessel_set_dropout 0): rate 0 keeps every element, x / 1.
  ctx->backend->dropout(ctx, dtype, x, y, n, ctx->dropoutEnabled ? rate : 0.0,
                        seed, step, first, ctx->rngStream);
}

/// The whole of tessel_dropout_block and tessel_dropout_block_current.
static void dropoutBlock(tessel_ctx *ctx, const char *entry, int32_t dtype,
                         const void *x, void *y, int32_t rank,
                         const int64_t *shape, const int64_t *strides,
                         double rate, uint64_t seed, StepRef step,
                         int64_t first) {
  if (!checkDropout(ctx, entry, dtype, rate))
    return;
  if (rank < 0 || (rank > 0 && (!shape || !strides))) {
    setError(ctx, "%s: bad rank %d or null shape", entry, rank);
    return;
  }
  for (int32_t d = 0; d < rank; ++d) {
    if (shape[d] < 0) {
      setError(ctx, "%s: negative shape", entry);
      return;
    }
  }
  ctx->backend->dropoutBlock(ctx, dtype, x, y, rank, shape, strides,
                             ctx->dropoutEnabled ? rate : 0.0, seed, step,
                             first, ctx->rngStream);
}

void tessel_dropout(tessel_ctx *ctx, int32_t dtype, const void *x, void *y,
                    int64_t n, double rate, uint64_t seed, uint64_t step,
                    int64_t first) {
  if (!ctx)
    return;
  KernelScope scope(ctx, __func__);
  dropout(ctx, "tessel_dropout", dtype, x, y, n, rate, seed,
          StepRef{false, step}, first);
}

void tessel_dropout_current(tessel_ctx *ctx, int32_t dtype, const void *x,
                            void *y, int64_t n, double rate, uint64_t seed,
                            int64_t first) {
  if (!ctx)
    return;
  KernelScope scope(ctx, __func__);
  dropout(ctx, "tessel_dropout_current", dtype, x, y, n, rate, seed,
          StepRef{true, 0}, first);
}

void tessel_dropout_block(tessel_ctx *ctx, int32_t dtype, const void *x,
                          void *y, int32_t rank, const int64_t *shape,
                          const int64_t *strides, double rate, uint64_t seed,
                          uint64_t step, int64_t first) {
  if (!ctx)
    return;
  KernelScope scope(ctx, __func__);
  dropoutBlock(ctx, "tessel_dropout_block", dtype, x, y, rank, shape, strides,
               rate, seed, StepRef{false, step}, first);
}

void tessel_dropout_block_current(tessel_ctx *ctx, int32_t dtype,
                                  const void *x, void *y, int32_t rank,
                                  const int64_t *shape, const int64_t *strides,
                                  double rate, uint64_t seed, int64_t first) {
  if (!ctx)
    return;
  KernelScope scope(ctx, __func__);
  dropoutBlock(ctx, "tessel_dropout_block_current", dtype, x, y, rank, shape,
               strides, rate, seed, StepRef{true, 0}, first);
}

void tessel_fill(tessel_ctx *ctx, int32_t dtype, void *out, int64_t count,
                 const void *value) {
  if (!ctx)
    return;
  KernelScope scope(ctx, __func__);
  if (!checkDtype(ctx, "tessel_fill", dtype, isKnownDtype(dtype)))
    return;
  if (count < 0 || !value) {
    setError(ctx, "tessel_fill: %s",
             count < 0 ? "negative count" : "null value");
    return;
  }
  if (count == 0)
    return;
  // The element's bytes, read here on the host: the backend gets a value.
  int64_t elementBytes = tessel_dtype_size(dtype);
  uint64_t bits = 0;
  std::memcpy(&bits, value, size_t(elementBytes));
  ctx->backend->fill(ctx, out, count, elementBytes, bits);
}

void tessel_strided_copy(tessel_ctx *ctx, int32_t dtype, const void *in,
                         void *out, int32_t rank, const int64_t *shape,
                         const int64_t *in_strides,
                         const int64_t *out_strides) {
  if (!ctx)
    return;
  KernelScope scope(ctx, __func__);
  if (!checkDtype(ctx, "tessel_strided_copy", dtype, isKnownDtype(dtype)))
    return;
  if (rank < 0) {
    setError(ctx, "tessel_strided_copy: negative rank");
    return;
  }
  // The first empty extent ends the call: nothing to copy (a negative one
  // before it is an error).
  for (int32_t d = 0; d < rank; ++d) {
    if (shape[d] <= 0) {
      if (shape[d] < 0)
        setError(ctx, "tessel_strided_copy: negative extent");
      return;
    }
  }
  ctx->backend->stridedCopy(ctx, dtype, in, out, rank, shape, in_strides,
                            out_strides);
}

namespace {
/// tessel_reduce (`widened` false) and tessel_reduce_f32 (true, out f32):
/// the arguments checked, then the backend's reduction.
void reduceEntry(tessel_ctx *ctx, const char *entry, bool widened, int32_t kind,
                 int32_t dtype, const void *in, void *out, int32_t rank,
                 const int64_t *shape, uint64_t reduce_mask) {
  if (!ctx)
    return;
  KernelScope scope(ctx, entry);
  if (kind < TESSEL_REDUCE_SUM || kind > TESSEL_REDUCE_MAX) {
    setError(ctx, "%s: unknown kind %d", entry, kind);
    return;
  }
  if (rank < 0 || rank > 64) {
    setError(ctx, "%s: rank %d outside [0, 64]", entry, rank);
    return;
  }
  if (rank < 64 && (reduce_mask >> rank) != 0) {
    setError(ctx, "%s: mask names a dimension beyond rank %d", entry, rank);
    return;
  }
  if (kind == TESSEL_REDUCE_MEAN && isIntDtype(dtype)) {
    setError(ctx, "%s: mean of an integer tensor", entry);
    return;
  }
  int64_t outCount = 1;
  for (int32_t d = 0; d < rank; ++d) {
    if (shape[d] < 0) {
      setError(ctx, "%s: negative extent", entry);
      return;
    }
    if (!((reduce_mask >> d) & 1))
      outCount *= shape[d];
  }
  // No output: nothing to compute, whatever the dtype.
  if (outCount == 0)
    return;
  if (!(widened ? checkWidenedDtype(ctx, entry, dtype, true)
                : checkDtype(ctx, entry, dtype, isKnownDtype(dtype))))
    return;
  ctx->backend->reduce(ctx, kind, dtype, widened ? TESSEL_F32 : dtype, in, out,
                       rank, shape, reduce_mask);
}
} // namespace

void tessel_reduce(tessel_ctx *ctx, int32_t kind, int32_t dtype, const void *in,
                   void *out, int32_t rank, const int64_t *shape,
                   uint64_t reduce_mask) {
  reduceEntry(ctx, __func__, /*widened=*/false, kind, dtype, in, out, rank,
              shape, reduce_mask);
}

void tessel_reduce_f32(tessel_ctx *ctx, int32_t kind, int32_t dtype,
                       const void *in, void *out, int32_t rank,
                       const int64_t *shape, uint64_t reduce_mask) {
  reduceEntry(ctx, __func__, /*widened=*/true, kind, dtype, in, out, rank,
              shape, reduce_mask);
}

void tessel_softmax(tessel_ctx *ctx, int32_t dtype, const void *x, void *y,
                    int64_t outer, int64_t dim, int64_t inner) {
  if (!ctx)
    return;
  KernelScope scope(ctx, __func__);
  if (!checkDtype(ctx, "tessel_softmax", dtype, isFloatDtype(dtype)))
    return;
  ctx->backend->softmax(ctx, dtype, x, y, outer, dim, inner);
}

void tessel_layer_norm(tessel_ctx *ctx, int32_t dtype, const void *x,
                       const void *gamma, const void *beta, void *y,
                       int64_t rows, int64_t cols, double eps, int32_t rms) {
  if (!ctx)
    return;
  KernelScope scope(ctx, __func__);
  if (cols <= 0)
    return;
  if (!checkDtype(ctx, "tessel_layer_norm", dtype, isFloatDtype(dtype)))
    return;
  ctx->backend->layerNorm(ctx, dtype, x, gamma, beta, y, rows, cols, eps,
                          rms != 0);
}

void tessel_add_layer_norm(tessel_ctx *ctx, int32_t dtype, const void *a,
                           const void *b, const void *gamma, const void *beta,
                           void *sum, void *y, int64_t rows, int64_t cols,
                           double eps, int32_t rms) {
  if (!ctx)
    return;
  KernelScope scope(ctx, __func__);
  if (!checkRows(ctx, "tessel_add_layer_norm", rows, cols) ||
      !checkDtype(ctx, "tessel_add_layer_norm", dtype, isFloatDtype(dtype)))
    return;
  if (rows == 0 || cols == 0)
    return;
  ctx->backend->addLayerNorm(ctx, dtype, a, b, gamma, beta, sum, y, rows, cols,
                             eps, rms != 0);
}

void tessel_batch_norm(tessel_ctx *ctx, int32_t dtype, const void *x,
                       const void *gamma, const void *beta, void *y,
                       int64_t outer, int64_t channels, int64_t inner,
                       double eps) {
  if (!ctx)
    return;
  KernelScope scope(ctx, __func__);
  if (outer * inner <= 0)
    return;
  if (!checkDtype(ctx, "tessel_batch_norm", dtype, isFloatDtype(dtype)))
    return;
  ctx->backend->batchNorm(ctx, dtype, x, gamma, beta, y, outer, channels, inner,
                          eps);
}

void tessel_embedding(tessel_ctx *ctx, int32_t dtype, int32_t ids_dtype,
                      const void *table, const void *ids, void *out,
                      int64_t num_ids, int64_t rows, int64_t hidden,
                      int64_t row_offset, int64_t vocab) {
  if (!ctx)
    return;
  KernelScope scope(ctx, __func__);
  const char *kernel = "tessel_embedding";
  if (!checkDtype(ctx, kernel, dtype, isKnownDtype(dtype)) ||
      !checkIndexDtype(ctx, kernel, "ids", ids_dtype))
    return;
  if (num_ids < 0 || hidden < 0) {
    setError(ctx, "tessel_embedding: negative shape");
    return;
  }
  if (!checkBlock(ctx, kernel, "rows", rows, row_offset, vocab))
    return;
  ctx->backend->embedding(ctx, dtype, ids_dtype, table, ids, out, num_ids, rows,
                          hidden, row_offset, vocab);
}

void tessel_cross_entropy(tessel_ctx *ctx, int32_t dtype, int32_t label_dtype,
                          const void *logits, const void *labels, void *out,
                          int64_t rows, int64_t classes, int32_t reduction) {
  lossEntry(ctx, __func__, dtype, false, label_dtype, rows, classes, reduction,
            [&](int32_t lossDtype) {
              ctx->backend->crossEntropy(ctx, dtype, lossDtype, label_dtype,
                                         logits, labels, out, rows, classes,
                                         reduction, LossOptions{});
            });
}

void tessel_cross_entropy_f32(tessel_ctx *ctx, int32_t dtype,
                              int32_t label_dtype, const void *logits,
                              const void *labels, void *out, int64_t rows,
                              int64_t classes, int32_t reduction) {
  lossEntry(ctx, __func__, dtype, true, label_dtype, rows, classes, reduction,
            [&](int32_t lossDtype) {
              ctx->backend->crossEntropy(ctx, dtype, lossDtype, label_dtype,
                                         logits, labels, out, rows, classes,
                                         reduction, LossOptions{});
            });
}

/// The _softcap and _smoothed losses' front and call.
static void optionsLoss(tessel_ctx *ctx, const char *entry, int32_t dtype,
                        int32_t loss_dtype, int32_t label_dtype,
                        const void *logits, const void *labels, void *out,
                        int64_t rows, int64_t classes, int32_t reduction,
                        LossOptions options) {
  optionsLossEntry(ctx, entry, dtype, loss_dtype, label_dtype, rows, classes,
                   reduction, options, [&] {
                     ctx->backend->crossEntropy(
                         ctx, dtype, loss_dtype, label_dtype, logits, labels,
                         out, rows, classes, reduction, options);
                   });
}

void tessel_cross_entropy_softcap(tessel_ctx *ctx, int32_t dtype,
                                  int32_t loss_dtype, int32_t label_dtype,
                                  const void *logits, const void *labels,
                                  void *out, int64_t rows, int64_t classes,
                                  int32_t reduction, double softcap) {
  optionsLoss(ctx, __func__, dtype, loss_dtype, label_dtype, logits, labels,
              out, rows, classes, reduction, LossOptions{softcap, 0.0});
}

void tessel_cross_entropy_smoothed(tessel_ctx *ctx, int32_t dtype,
                                   int32_t loss_dtype, int32_t label_dtype,
                                   const void *logits, const void *labels,
                                   void *out, int64_t rows, int64_t classes,
                                   int32_t reduction, double softcap,
                                   double label_smoothing) {
  optionsLoss(ctx, __func__, dtype, loss_dtype, label_dtype, logits, labels,
              out, rows, classes, reduction,
              LossOptions{softcap, label_smoothing});
}

} // extern "C"
