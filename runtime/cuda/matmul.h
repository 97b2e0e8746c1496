//===- matmul.h - cuBLASLt GEMMs with beta and epilogues --------*- C++ -*-===//
//
// The CUDA backend's one GEMM entry (matmul.cu): row-major, batched,
// C = op(A)·op(B) + beta·C with an optional fused cuBLASLt epilogue. The
// backend's matmul calls it with beta 0 and no epilogue; fused kernels
// (bias, GELU, their gradients) call it directly.
//
// cuBLASLt is column-major, so a row-major C[M, N] is computed as its
// column-major transpose: Cᵀ[N, M] = op(B)ᵀ·op(A)ᵀ, i.e. cuBLASLt's "A" is
// our B and its "B" is our A, with the same transpose flags (a row-major
// matrix is its own transpose read column-major). ltGemmLayout computes
// that mapping; the host tests check it for every transA/transB/bShared.
//
// A shared B (one [K, N] matrix for every batch): with an untransposed A the
// batch folds into M (one [batch·M, K] × [K, N] GEMM, as the CPU backend);
// otherwise B's batch stride is 0, which cuBLASLt's strided batch allows.
//
// Plain C++ (no CUDA headers): the host tests include it.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CUDA_MATMUL_H
#define TESSEL_RUNTIME_CUDA_MATMUL_H

#include "tessel/runtime.h"

#include <climits>
#include <cstdint>

namespace tessel {
namespace cuda {

class CudaBackend;

/// What cuBLASLt fuses after the product, in row-major terms (C is
/// [M, N]; bias vectors have N elements of the GEMM's dtype).
///
/// GELU here is cuBLASLt's, the tanh approximation: the CPU backend's
/// TESSEL_GELU_TANH, NOT TESSEL_GELU (exact, erf). Use GeluBias and DGelu
/// only for a model that asks for the tanh GELU; an exact GELU stays a
/// separate tessel_unary / tessel_unary_grad.
enum class GemmEpilogue : int32_t {
  None = 0,
  /// C = op(A)·op(B) + beta·C + bias[j] on every row.
  Bias,
  /// C = gelu_tanh(op(A)·op(B) + beta·C + bias[j]); with `aux`, the
  /// pre-GELU values are stored there too ([M, N], for the backward).
  GeluBias,
  /// C = (op(A)·op(B) + beta·C) ⊙ gelu_tanh'(aux): the gradient through the
  /// GELU, `aux` the forward's pre-GELU values ([M, N]).
  DGelu,
  /// C = op(A)·op(B) + beta·C and biasGrad[j] = Σ_k op(B)[k, j] (the bias
  /// gradient of a weight-gradient GEMM dW = Xᵀ·dY: B is dY). biasGrad is
  /// overwritten even with beta = 1. cuBLASLt's BGRADA under the swap.
  BGradB,
};

struct GemmArgs {
  int32_t dtype = TESSEL_F32; // f32, f16, bf16 (f32 accumulation) or f64
  /// C's (and a bias gradient's) dtype when it is not dtype's: f32 for a
  /// 16-bit GEMM accumulating into an f32 buffer
  /// (tessel_matmul_accumulate_f32); -1 for dtype.
  int32_t outDtype = -1;
  const void *a = nullptr, *b = nullptr;
  void *c = nullptr;
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool transA = false, transB = false, bShared = false;
  /// 0 overwrites C; 1 accumulates into it (a gradient over microbatches).
  double beta = 0.0;
  GemmEpilogue epilogue = GemmEpilogue::None;
  const void *bias = nullptr; // Bias, GeluBias
  /// GeluBias (optional output) and DGelu (input): [batch, M, N] row-major
  /// of dtype, N a multiple of 8 (cuBLASLt's rule for its leading
  /// dimension).
  void *aux = nullptr;
  /// BGradB: [N] of dtype; one GEMM (batch 1, or a shared B folded).
  void *biasGrad = nullptr;
};

enum class GemmResult {
  Done,
  /// "tessel_matmul: ..." recorded on ctx: cuBLASLt refused the GEMM (or
  /// k = 0 with an epilogue or a beta other than 0 and 1).
  Failed,
  /// cuBLASLt has no kernel for this epilogue with these operands (its
  /// BGRADA wants dY untransposed, say); nothing was issued or recorded:
  /// the caller runs the GEMM and the epilogue apart.
  EpilogueUnsupported,
};

/// Issues the GEMM on backend's stream. m, n or batch 0: nothing to do.
GemmResult gemm(CudaBackend &backend, tessel_ctx *ctx, const GemmArgs &args);

//===--- The row-major to column-major mapping ----------------------------===//

/// One matrix as cuBLASLt sees it: column-major rows × cols, leading
/// dimension ld, batchStride elements between batches.
struct LtMatrix {
  int64_t rows = 0, cols = 0, ld = 0, batchStride = 0;
};

/// cuBLASLt's D[m, n] = opX(X)·opY(Y) (+ beta·D) for the row-major call:
/// X is our B, Y our A, D our C; batch GEMMs of the strided batch.
struct LtGemmLayout {
  int64_t m = 0, n = 0, k = 0, batch = 0;
  bool transX = false, transY = false;
  LtMatrix x, y, d;
};

inline LtGemmLayout ltGemmLayout(int64_t batch, int64_t m, int64_t n, int64_t k,
                                 bool transA, bool transB, bool bShared) {
  auto atLeast1 = [](int64_t v) { return v < 1 ? 1 : v; };
  LtGemmLayout l;
  // Fold the batch into M: every batch's [M, K] block is one [batch·M, K]
  // matrix when A is untransposed and B shared.
  bool fold = bShared && !transA && batch * m <= INT_MAX;
  int64_t rowsOfC = fold ? batch * m : m;
  l.m = n;
  l.n = rowsOfC;
  l.k = k;
  l.batch = fold ? 1 : batch;
  l.transX = transB;
  l.transY = transA;
  // B row-major [K, N] is column-major [N, K] (ld N); transposed, [N, K]
  // row-major is column-major [K, N] (ld K).
  l.x.rows = transB ? k : n;
  l.x.cols = transB ? n : k;
  l.x.ld = atLeast1(l.x.rows);
  l.x.batchStride = bShared ? 0 : k * n;
  // A row-major [M, K] is column-major [K, M] (ld K); transposed [K, M]
  // row-major is column-major [M, K] (ld M).
  l.y.rows = transA ? m : k;
  l.y.cols = transA ? k : rowsOfC;
  l.y.ld = atLeast1(l.y.rows);
  l.y.batchStride = m * k;
  l.d.rows = n;
  l.d.cols = rowsOfC;
  l.d.ld = atLeast1(n);
  l.d.batchStride = m * n;
  return l;
}

} // namespace cuda
} // namespace tessel

#endif // TESSEL_RUNTIME_CUDA_MATMUL_H
