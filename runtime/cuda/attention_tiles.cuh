//===- attention_tiles.cuh - attention.cu's building blocks -----*- CUDA -*-===//
//
// What the flash-style attention kernels share (attention.cu's forward,
// attention_grad.cu's backward): register tiles and their products on CUDA
// cores, the TF32 WMMA tile products of the 16-bit kernels, the tile loads
// into shared memory, the forward's shared-memory layout (the dQ kernel
// builds on it), the query-tile order of a grid, and the host side's
// launch helpers. attention_math.h holds the per-tile steps the host
// tests replay.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CUDA_ATTENTION_TILES_CUH
#define TESSEL_RUNTIME_CUDA_ATTENTION_TILES_CUH

#include "cuda/attention_math.h"
#include "cuda/backend.h"

#include "core/context.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <climits>
#include <cstdint>
#include <type_traits>

namespace tessel::cuda::attn {

__device__ __forceinline__ float loadAcc(float x) { return x; }
__device__ __forceinline__ double loadAcc(double x) { return x; }
__device__ __forceinline__ float loadAcc(__half x) { return __half2float(x); }
__device__ __forceinline__ float loadAcc(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
__device__ __forceinline__ void storeAcc(float *p, float x) { *p = x; }
__device__ __forceinline__ void storeAcc(double *p, double x) { *p = x; }
__device__ __forceinline__ void storeAcc(__half *p, float x) {
  *p = __float2half_rn(x);
}
__device__ __forceinline__ void storeAcc(__nv_bfloat16 *p, float x) {
  *p = __float2bfloat16_rn(x);
}

/// A rows x cols register tile spread over kAttnThreads threads
/// (attnTileColumns): this thread's rows are row(i), its columns col(j).
template <int ROWS, int COLS> struct TileMap {
  static constexpr int TX = attnTileColumns(ROWS, COLS, kAttnThreads);
  static_assert(TX > 0, "no thread cover of this tile");
  static constexpr int TY = kAttnThreads / TX;
  static constexpr int RM = ROWS / TY, CN = COLS / TX;
  __device__ static int row(int i) { return int(threadIdx.x) / TX + i * TY; }
  __device__ static int col(int j) { return int(threadIdx.x) % TX + j * TX; }
};

template <class M, class A> __device__ void clearTile(A (&acc)[M::RM][M::CN]) {
#pragma unroll
  for (int i = 0; i < M::RM; ++i)
#pragma unroll
    for (int j = 0; j < M::CN; ++j)
      acc[i][j] = A(0);
}

/// acc[i][j] += Σ_k a[row(i)][k] · b[col(j)][k]  (A · Bᵀ, both row-major).
template <class M, class A>
__device__ void productNT(A (&acc)[M::RM][M::CN], const A *a, int lda,
                          const A *b, int ldb, int depth) {
  const A *ar = a + M::row(0) * lda, *br = b + M::col(0) * ldb;
#pragma unroll 4
  for (int k = 0; k < depth; ++k) {
    A av[M::RM], bv[M::CN];
#pragma unroll
    for (int i = 0; i < M::RM; ++i)
      av[i] = ar[i * M::TY * lda + k];
#pragma unroll
    for (int j = 0; j < M::CN; ++j)
      bv[j] = br[j * M::TX * ldb + k];
#pragma unroll
    for (int i = 0; i < M::RM; ++i)
#pragma unroll
      for (int j = 0; j < M::CN; ++j)
        acc[i][j] = fma(av[i], bv[j], acc[i][j]);
  }
}

/// acc[i][j] += Σ_k a[row(i)][k] · b[k][col(j)]  (A · B).
template <class M, class A>
__device__ void productNN(A (&acc)[M::RM][M::CN], const A *a, int lda,
                          const A *b, int ldb, int depth) {
  const A *ar = a + M::row(0) * lda, *bc = b + M::col(0);
#pragma unroll 4
  for (int k = 0; k < depth; ++k) {
    A av[M::RM], bv[M::CN];
#pragma unroll
    for (int i = 0; i < M::RM; ++i)
      av[i] = ar[i * M::TY * lda + k];
#pragma unroll
    for (int j = 0; j < M::CN; ++j)
      bv[j] = bc[k * ldb + j * M::TX];
#pragma unroll
    for (int i = 0; i < M::RM; ++i)
#pragma unroll
      for (int j = 0; j < M::CN; ++j)
        acc[i][j] = fma(av[i], bv[j], acc[i][j]);
  }
}

/// Whether a kernel of storage T and arithmetic A runs its products on
/// tensor cores (16-bit storage, f32 arithmetic).
template <class T, class A> constexpr bool attnTensorCores() {
  return sizeof(T) == 2 && std::is_same<A, float>::value;
}

namespace wmma = nvcuda::wmma;
using AccFrag = wmma::fragment<wmma::accumulator, 16, 16, 8, float>;
constexpr int kAttnWarps = kAttnThreads / 32;

/// The 16x16 fragments of an R x C tile each warp holds: fragment
/// f = warp + i · kAttnWarps is the warp's i-th.
template <int R, int C> constexpr int fragsPerWarp() {
  static_assert(R % 16 == 0 && C % 16 == 0, "whole fragments");
  return ((R / 16) * (C / 16) + kAttnWarps - 1) / kAttnWarps;
}

template <int R, int C>
__device__ void clearFrags(AccFrag (&acc)[fragsPerWarp<R, C>()]) {
#pragma unroll
  for (int i = 0; i < fragsPerWarp<R, C>(); ++i)
    wmma::fill_fragment(acc[i], 0.0f);
}

/// acc += a[R x depth] · b[C x depth]ᵀ (BT) or a · b[depth x C], all
/// row-major f32 in shared memory, on tensor cores in TF32 (f32
/// accumulation), over the warp's fragments of the R x C tile. Operands
/// read from 16-bit tensors are exact in TF32 and go as they are; a
/// computed one (P, dS: ROUND_A) is rounded to nearest first. depth a
/// multiple of 8; leading dimensions multiples of 4 and every fragment
/// 32-byte aligned (WMMA's rules).
template <int R, int C, bool BT, bool ROUND_A>
__device__ void mmaAccumulate(AccFrag (&acc)[fragsPerWarp<R, C>()],
                              const float *a, int lda, const float *b,
                              int ldb, int depth) {
  constexpr int kFragCols = C / 16, kFrags = (R / 16) * kFragCols;
  using BLayout =
      typename std::conditional<BT, wmma::col_major, wmma::row_major>::type;
#pragma unroll
  for (int i = 0; i < fragsPerWarp<R, C>(); ++i) {
    const int f = int(threadIdx.x) / 32 + i * kAttnWarps;
    // (Guarded, not left: a loop with an exit would index acc at run time,
    // which puts the fragments in local memory.)
    const int fr = f / kFragCols * 16, fc = f % kFragCols * 16;
    for (int k = 0; f < kFrags && k < depth; k += 8) {
      wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32,
                     wmma::row_major>
          fa;
      wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32,
                     BLayout>
          fb;
      wmma::load_matrix_sync(fa, a + fr * lda + k, lda);
      // Bᵀ's element (k, n) is b[n][k]: column-major with b's stride.
      wmma::load_matrix_sync(fb, BT ? b + fc * ldb + k : b + k * ldb + fc,
                             ldb);
      if constexpr (ROUND_A) {
#pragma unroll
        for (int e = 0; e < fa.num_elements; ++e)
          fa.x[e] = wmma::__float_to_tf32(fa.x[e]);
      }
      wmma::mma_sync(acc[i], fa, fb, acc[i]);
    }
  }
}

/// Stores the warp's fragments of an R x C tile to out (row-major, ldo).
template <int R, int C>
__device__ void storeFrags(float *out, int ldo,
                           const AccFrag (&acc)[fragsPerWarp<R, C>()]) {
  constexpr int kFragCols = C / 16, kFrags = (R / 16) * kFragCols;
#pragma unroll
  for (int i = 0; i < fragsPerWarp<R, C>(); ++i) {
    const int f = int(threadIdx.x) / 32 + i * kAttnWarps;
    if (f < kFrags)
      wmma::store_matrix_sync(out + f / kFragCols * 16 * ldo +
                                  f % kFragCols * 16,
                              acc[i], ldo, wmma::mem_row_major);
  }
}

/// out[R x C] = the product mmaAccumulate adds; the caller synchronises
/// before reading out.
template <int R, int C, bool BT, bool ROUND_A>
__device__ void mmaTile(float *out, int ldo, const float *a, int lda,
                        const float *b, int ldb, int depth) {
  AccFrag acc[fragsPerWarp<R, C>()];
  clearFrags<R, C>(acc);
  mmaAccumulate<R, C, BT, ROUND_A>(acc, a, lda, b, ldb, depth);
  storeFrags<R, C>(out, ldo, acc);
}

/// e^x for the tensor-core kernels: the hardware's exp2 (about 2 ulp of
/// f32), far inside the 16-bit output's rounding.
__device__ __forceinline__ float attnFastExp(float x) {
  return exp2f(x * 1.4426950408889634f);
}

/// acc[i][j] = acc[i][j] · rowScale[row(i)] + t[row(i)][col(j)]: the
/// output rows rescaled by the online softmax plus a product mmaTile left
/// in shared memory.
template <class M>
__device__ void addTile(float (&acc)[M::RM][M::CN], const float *t, int ldt,
                        const float *rowScale) {
#pragma unroll
  for (int i = 0; i < M::RM; ++i) {
    float a = rowScale[M::row(i)];
#pragma unroll
    for (int j = 0; j < M::CN; ++j)
      acc[i][j] = acc[i][j] * a + t[M::row(i) * ldt + M::col(j)];
  }
}

/// Loads ROWS rows of `width` elements (row r at src + r * stride, for
/// r < valid) into dst [ROWS][DP] as A, zero past width and valid, so
/// products over the whole tile read no stale value. Whole rows of 16-byte
/// aligned vectors load as uint4, all of a thread's loads issued before its
/// stores (a load-store loop waits out the memory latency once per element).
template <int DIM, int DP, int ROWS, class T, class A>
__device__ void loadRows(A *dst, const T *src, int64_t stride, int valid,
                         int width) {
  constexpr int kVec = 16 / int(sizeof(T)), kChunks = ROWS * DIM / kVec;
  constexpr int kPer = (kChunks + kAttnThreads - 1) / kAttnThreads;
  static_assert(DIM % kVec == 0, "whole vectors per row");
  if (kPer <= 4 && width == DIM && stride % kVec == 0 &&
      reinterpret_cast<uintptr_t>(src) % 16 == 0) {
    uint4 buf[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      int idx = int(threadIdx.x) + i * kAttnThreads;
      int r = idx / (DIM / kVec), c = idx % (DIM / kVec) * kVec;
      buf[i] = idx < kChunks && r < valid
                   ? *reinterpret_cast<const uint4 *>(src + r * stride + c)
                   : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      int idx = int(threadIdx.x) + i * kAttnThreads;
      if (idx >= kChunks)
        break;
      int r = idx / (DIM / kVec), c = idx % (DIM / kVec) * kVec;
      const T *e = reinterpret_cast<const T *>(&buf[i]);
#pragma unroll
      for (int j = 0; j < kVec; ++j)
        dst[r * DP + c + j] = A(loadAcc(e[j]));
    }
    return;
  }
  for (int idx = int(threadIdx.x); idx < ROWS * DIM; idx += kAttnThreads) {
    int r = idx / DIM, c = idx % DIM;
    A x = A(0);
    if (r < valid && c < width)
      x = A(loadAcc(src[r * stride + c]));
    dst[r * DP + c] = x;
  }
}

/// Loads key tile [c0, c0 + S::BC) of kv head hk of batch b into sm.k and
/// sm.v (rows past kvSeq zero); the caller places the barriers.
template <int DIM, class S, class T>
__device__ void loadKeyTile(const S &sm, const T *k, const T *v,
                            const AttnShape &sh, int64_t b, int64_t c0,
                            int64_t hk) {
  const int keys = int(sh.kvSeq - c0 < S::BC ? sh.kvSeq - c0 : S::BC);
  loadRows<DIM, S::DP, S::BC>(sm.k, k + sh.kRow(b, c0, hk),
                              sh.kvHeads * sh.headDim, keys, int(sh.headDim));
  loadRows<DIM, S::DP, S::BC>(sm.v, v + sh.vRow(b, c0, hk),
                              sh.kvHeads * sh.valueDim, keys,
                              int(sh.valueDim));
}

/// Loads rows [r0, r0 + rows) of query head h of batch b from q and dout
/// into sm.q and sm.dout (rows past `rows` zero), for the two backward
/// kernels; the caller places the barriers.
template <int DIM, class S, class T>
__device__ void loadQueryAndGradRows(const S &sm, const T *q, const T *dout,
                                     const AttnShape &sh, int64_t b,
                                     int64_t r0, int64_t h, int rows) {
  loadRows<DIM, S::DP, S::BR>(sm.q, q + sh.qRow(b, r0, h),
                              sh.heads * sh.headDim, rows, int(sh.headDim));
  loadRows<DIM, S::DP, S::BR>(sm.dout, dout + sh.oRow(b, r0, h),
                              sh.heads * sh.valueDim, rows, int(sh.valueDim));
}

/// The shared memory of a forward block: the Q tile, a key tile (k, v),
/// the scores s and per row the rescale factor, 1 / l and lse. On tensor
/// cores (TC) also o, the tile a product of the output rows lands in.
template <class A, int DIM, bool TC> struct ForwardSmem {
  static constexpr AttnTiles kTiles = attnQueryTiles(sizeof(A) == 8, DIM);
  static constexpr int kPad = TC ? 4 : 1;
  static constexpr int BR = kTiles.rows, BC = kTiles.keys, DP = DIM + kPad;
  static constexpr int SP = BC + kPad;
  /// Where the tiles q, k, v and s end (elements); the backward's dQ block
  /// shares this layout up to there.
  static constexpr int kTilesEnd = (BR + 2 * BC) * DP + BR * SP;
  /// Where o starts (elements), and its length.
  static constexpr int kOAt = kTilesEnd + 3 * BR;
  static constexpr int kOut = TC ? BR * DP : 0;
  static_assert(!TC || kOAt * sizeof(A) % 32 == 0, "o aligned for WMMA");
  A *q, *k, *v, *s, *alpha, *rowInv, *lse, *o;
  __device__ explicit ForwardSmem(A *base)
      : q(base), k(q + BR * DP), v(k + BC * DP), s(v + BC * DP),
        alpha(s + BR * SP), rowInv(alpha + BR), lse(rowInv + BR),
        o(base + kOAt) {}
  static constexpr size_t bytes() { return sizeof(A) * size_t(kOAt + kOut); }
};

// 128-byte aligned: WMMA's fragments want 32 (the regions WMMA reads or
// writes start at multiples of 32 bytes).
extern __shared__ __align__(128) unsigned char attnSmem[];

/// The blocks of a query-tile grid: the last (causally heaviest) tiles of
/// every head first. Work item w -> (batch, head, first row).
__device__ inline void queryTileOf(int64_t w, const AttnShape &sh, int rows,
                                   int64_t &b, int64_t &h, int64_t &r0) {
  int64_t tiles = (sh.seq + rows - 1) / rows, bh = sh.batch * sh.heads;
  int64_t tile = tiles - 1 - w / bh;
  b = (w % bh) / sh.heads;
  h = w % sh.heads;
  r0 = tile * rows;
}


//===--- Host side ---------------------------------------------------------===//

/// Blocks for `work` tiles (a grid-stride loop covers any rest).
inline unsigned gridOf(int64_t work) {
  return unsigned(work < INT_MAX ? work : INT_MAX);
}

/// The dynamic shared memory a Hopper block may opt into.
constexpr size_t kMaxSmemBytes = size_t(227) << 10;

/// Allows `kernel` the dynamic shared memory it needs (over 48 KB).
template <class K>
bool allowSmem(tessel_ctx *ctx, K kernel, size_t bytes, const char *what) {
  return CudaBackend::check(
      ctx,
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           int(bytes)),
      what);
}

/// Calls f(T{}, A{}) with the storage and arithmetic types of `dtype`.
template <class F> void visitAttnDtype(int32_t dtype, F &&f) {
  switch (dtype) {
  case TESSEL_F32:
    return f(float{}, float{});
  case TESSEL_F64:
    return f(double{}, double{});
  case TESSEL_F16:
    return f(__half{}, float{});
  case TESSEL_BF16:
    return f(__nv_bfloat16{}, float{});
  default:
    return;
  }
}

/// The head-dim bucket, or false with the error recorded.
inline bool dimBucket(tessel_ctx *ctx, const char *kernel, int64_t headDim,
                      int64_t valueDim, int &bucket) {
  bucket = attnDimBucket(headDim, valueDim);
  if (bucket != 0)
    return true;
  if (headDim > kAttnMaxDim)
    setError(ctx, "%s: head dim %lld > %lld not supported by the cuda backend",
             kernel, (long long)headDim, (long long)kAttnMaxDim);
  else
    setError(ctx,
             "%s: value dim %lld > %lld not supported by the cuda backend",
             kernel, (long long)valueDim, (long long)kAttnMaxDim);
  return false;
}


/// Launches the forward of head-dim bucket `bucket` into out and, when not
/// null, lse (attention.cu); false with the error recorded (as `what`)
/// when it could not be launched.
bool launchForward(CudaBackend &be, tessel_ctx *ctx, int32_t dtype,
                   int bucket, const void *q, const void *k, const void *v,
                   void *out, void *lse, const AttnShape &sh, double scale,
                   AttnMask mask, const char *what);

} // namespace tessel::cuda::attn

#endif // TESSEL_RUNTIME_CUDA_ATTENTION_TILES_CUH
