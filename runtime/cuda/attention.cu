//===- attention.cu - Flash-style attention, forward and backward -----------===//
//
// tessel_attention(_lse) and tessel_attention_grad(_lse) in the
// flash-attention-2 form, on CUDA cores (f32 arithmetic for f32, f16 and
// bf16 storage; f64 in f64):
//
// - forward: a block per (batch, head, tile of query rows) keeps its Q tile
//   in shared memory and walks the key tiles its rows see (causal: the
//   tiles above the diagonal are skipped whole), with an online softmax
//   (running max and sum per row) and the output rows accumulated in
//   registers, written once, normalised; with lse, also each row's
//   log-sum-exp ([B, H, S], in the arithmetic type).
// - backward, two kernels and no float atomics, so the result is
//   deterministic, from the forward's O and lse, P = e^(scale · q·kᵀ - lse):
//   the first, a block per query tile, computes D = rowsum(dO ∘ O) of its
//   rows (kept in a temporary [B, H, S] buffer), then walks the key tiles
//   for dQ = scale · dS·K; the second, a block per (batch, kv head, key
//   tile), walks the query tiles of every query head of its group in a
//   fixed order for dV = Σ Pᵀ·dO and dK = scale · Σ dSᵀ·Q, so a kv head's
//   sum over its query heads needs no second pass. tessel_attention_grad
//   (ABI 10 and older models, which keep neither O nor lse) runs the
//   forward into temporaries first.
// For f32 and f64, products of tiles run from shared memory into per-thread
// register tiles (attnTileColumns) on CUDA cores; rows are padded by one
// element against bank conflicts. For f16 and bf16 they run on tensor cores
// (TF32 WMMA with f32 accumulation: the 16-bit inputs are exact in TF32;
// P and dS round to TF32, finer than the 16-bit output) from and into
// shared memory, rows padded by four elements (WMMA's alignment), and the
// register tiles add the products in. Kernels are built per head-dim
// bucket (64, 128, 256).
// attention_math.h holds the per-tile steps the host tests replay.
//
//===----------------------------------------------------------------------===//

#include "cuda/attention_math.h"
#include "cuda/backend.h"

#include "core/context.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

using namespace tessel;
using namespace tessel::cuda;

namespace {

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

/// Whether any score of the tile of rows [r0, r0 + rows) and keys
/// [c0, c0 + keys) is masked (past a sequence, or above the causal
/// diagonal): only those tiles test each score.
__device__ inline bool attnTileMasked(int64_t r0, int rows, int64_t c0,
                                      int keys, const AttnShape &sh,
                                      bool causal) {
  return r0 + rows > sh.seq || c0 + keys > sh.kvSeq ||
         (causal && c0 + keys - 1 > r0);
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

/// The shared memory of a dQ block: the forward's tiles less its softmax
/// state, plus per row D and the dO tile. Before the key loop, k and v
/// hold the O tile (2·BC >= BR). On tensor cores (TC) also dp, the tile of
/// dO·Vᵀ; dQ leaves through q.
template <class A, int DIM, bool TC> struct GradQuerySmem {
  using Tiles = ForwardSmem<A, DIM, TC>;
  static constexpr int BR = Tiles::BR, BC = Tiles::BC, DP = Tiles::DP,
                       SP = Tiles::SP;
  static_assert(2 * BC >= BR, "the O tile fits in k and v");
  /// Where dout and dp start (elements), and dp's length.
  static constexpr int kDoutAt = Tiles::kTilesEnd + 2 * BR;
  static constexpr int kDpAt = kDoutAt + BR * DP;
  static constexpr int kDp = TC ? BR * SP : 0;
  static_assert(!TC || (kDoutAt * sizeof(A) % 32 == 0 &&
                        kDpAt * sizeof(A) % 32 == 0),
                "dout and dp aligned for WMMA");
  A *q, *k, *v, *s, *lse, *rowDot, *dout, *dp;
  __device__ explicit GradQuerySmem(A *base)
      : q(base), k(q + BR * DP), v(k + BC * DP), s(v + BC * DP),
        lse(s + BR * SP), rowDot(lse + BR), dout(base + kDoutAt),
        dp(base + kDpAt) {}
  static constexpr size_t bytes() { return sizeof(A) * size_t(kDpAt + kDp); }
};

// 128-byte aligned: WMMA's fragments want 32 (the regions WMMA reads or
// writes start at multiples of 32 bytes).
extern __shared__ __align__(128) unsigned char attnSmem[];

/// The forward over the key tiles of query tile [r0, r0 + BR) of head h:
/// leaves the unnormalised output rows in `acc`, 1 / l per row in
/// sm.rowInv and lse per row in sm.lse (both after a barrier).
template <int DIM, class T, class A, bool TC>
__device__ void
forwardTile(const ForwardSmem<A, DIM, TC> &sm,
            A (&acc)[TileMap<ForwardSmem<A, DIM, TC>::BR, DIM>::RM]
                    [TileMap<ForwardSmem<A, DIM, TC>::BR, DIM>::CN],
            const T *q, const T *k, const T *v, const AttnShape &sh,
            int64_t b, int64_t h, int64_t r0, A scale, bool causal) {
  using S = ForwardSmem<A, DIM, TC>;
  using MS = TileMap<S::BR, S::BC>;
  using MO = TileMap<S::BR, DIM>;
  constexpr int G = kAttnThreads / S::BR; // threads per score row
  static_assert(G >= 1 && G <= 32 && (G & (G - 1)) == 0, "row group");
  const int64_t hk = sh.kvHeadOf(h);
  const int64_t rowEnd = r0 + S::BR < sh.seq ? r0 + S::BR : sh.seq;
  const int64_t keyEnd = attnKeyEnd(rowEnd, sh.kvSeq, causal);
  const int myRow = int(threadIdx.x) / G, myLane = int(threadIdx.x) % G;
  OnlineRow<A> row = OnlineRow<A>::start();

  __syncthreads(); // the previous tile's readers of shared memory are done
  loadRows<DIM, S::DP, S::BR>(sm.q, q + sh.qRow(b, r0, h),
                              sh.heads * sh.headDim, int(rowEnd - r0),
                              int(sh.headDim));
  clearTile<MO>(acc);
  for (int64_t c0 = 0; c0 < keyEnd; c0 += S::BC) {
    __syncthreads();
    loadKeyTile<DIM>(sm, k, v, sh, b, c0, hk);
    __syncthreads();
    if constexpr (TC) {
      // Raw scores, -inf where masked; the softmax below scales them.
      mmaTile<S::BR, S::BC, true, false>(sm.s, S::SP, sm.q, S::DP, sm.k,
                                         S::DP, DIM);
      if (attnTileMasked(r0, S::BR, c0, S::BC, sh, causal)) {
        __syncthreads();
        for (int idx = int(threadIdx.x); idx < S::BR * S::BC;
             idx += kAttnThreads) {
          int r = idx / S::BC, c = idx % S::BC;
          if (!attnVisible(r0 + r, c0 + c, sh.seq, sh.kvSeq, causal))
            sm.s[r * S::SP + c] = attnNegInf<A>();
        }
      }
    } else {
      A sc[MS::RM][MS::CN];
      clearTile<MS>(sc);
      productNT<MS>(sc, sm.q, S::DP, sm.k, S::DP, int(sh.headDim));
#pragma unroll
      for (int i = 0; i < MS::RM; ++i)
#pragma unroll
        for (int j = 0; j < MS::CN; ++j)
          sm.s[MS::row(i) * S::SP + MS::col(j)] =
              attnVisible(r0 + MS::row(i), c0 + MS::col(j), sh.seq,
                          sh.kvSeq, causal)
                  ? sc[i][j] * scale
                  : attnNegInf<A>();
    }
    __syncthreads();
    // Online softmax of the tile, G lanes per row (on tensor cores the
    // scores are scaled here and weighed with the fast exp).
    A *srow = sm.s + myRow * S::SP;
    auto score = [&](int c) {
      A x = srow[c];
      if constexpr (TC)
        return x == attnNegInf<A>() ? x : x * scale;
      else
        return x;
    };
    A tileMax = attnNegInf<A>();
    for (int c = myLane; c < S::BC; c += G)
      tileMax = fmax(tileMax, score(c));
#pragma unroll
    for (int off = G / 2; off > 0; off /= 2)
      tileMax = fmax(tileMax, __shfl_xor_sync(0xffffffffu, tileMax, off, G));
    A alpha = row.rescale(tileMax), tileSum = A(0);
    for (int c = myLane; c < S::BC; c += G) {
      A x = score(c), p;
      if constexpr (TC)
        p = x == attnNegInf<A>() ? A(0) : attnFastExp(x - row.m);
      else
        p = row.weight(x);
      srow[c] = p;
      tileSum += p;
    }
#pragma unroll
    for (int off = G / 2; off > 0; off /= 2)
      tileSum += __shfl_xor_sync(0xffffffffu, tileSum, off, G);
    row.add(tileSum);
    if (myLane == 0)
      sm.alpha[myRow] = alpha;
    __syncthreads();
    if constexpr (TC) {
      mmaTile<S::BR, DIM, false, true>(sm.o, S::DP, sm.s, S::SP, sm.v, S::DP,
                                       S::BC);
      __syncthreads();
      addTile<MO>(acc, sm.o, S::DP, sm.alpha);
    } else {
#pragma unroll
      for (int i = 0; i < MO::RM; ++i) {
        A a = sm.alpha[MO::row(i)];
#pragma unroll
        for (int j = 0; j < MO::CN; ++j)
          acc[i][j] *= a;
      }
      productNN<MO>(acc, sm.s, S::SP, sm.v, S::DP, S::BC);
    }
  }
  if (myLane == 0) {
    sm.rowInv[myRow] = row.inverse();
    sm.lse[myRow] = row.logSumExp();
  }
  __syncthreads();
}

/// Blocks per SM the backward kernels are built for: two for the tensor-core
/// kernel of head dim 64 (about 105 KB of shared memory each), else one.
template <class T, class A, int DIM> constexpr int attnGradMinBlocks() {
  return attnTensorCores<T, A>() && DIM == 64 ? 2 : 1;
}

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

/// Blocks per SM the forward is built for: two where two blocks' shared
/// memory fits in an SM (228 KB, 1 KB of it reserved per block); else one
/// (the tensor-core kernel of head dim 256, 135 KB), as asking for two
/// would only cap its registers at 128 and spill.
template <class T, class A, int DIM> constexpr int attnForwardMinBlocks() {
  using S = ForwardSmem<A, DIM, attnTensorCores<T, A>()>;
  return 2 * (S::bytes() + 1024) <= (size_t(228) << 10) ? 2 : 1;
}

/// out, and each row's log-sum-exp into lse ([B, H, S]) when not null.
template <int DIM, class T, class A>
__global__ void __launch_bounds__(kAttnThreads,
                                  attnForwardMinBlocks<T, A, DIM>())
    attentionForwardKernel(const T *q, const T *k, const T *v, T *out, A *lse,
                           AttnShape sh, A scale, bool causal, int64_t work) {
  using S = ForwardSmem<A, DIM, attnTensorCores<T, A>()>;
  using MO = TileMap<S::BR, DIM>;
  S sm(reinterpret_cast<A *>(attnSmem));
  for (int64_t w = blockIdx.x; w < work; w += gridDim.x) {
    int64_t b, h, r0;
    queryTileOf(w, sh, S::BR, b, h, r0);
    A acc[MO::RM][MO::CN];
    forwardTile<DIM>(sm, acc, q, k, v, sh, b, h, r0, scale, causal);
#pragma unroll
    for (int i = 0; i < MO::RM; ++i) {
      int64_t qi = r0 + MO::row(i);
      if (qi >= sh.seq)
        continue;
      A inv = sm.rowInv[MO::row(i)];
      T *o = out + sh.oRow(b, qi, h);
#pragma unroll
      for (int j = 0; j < MO::CN; ++j)
        if (MO::col(j) < sh.valueDim)
          storeAcc(o + MO::col(j), acc[i][j] * inv);
    }
    // (After the output rows, when acc no longer holds registers.)
    if (lse)
      for (int r = int(threadIdx.x); r < S::BR && r0 + r < sh.seq;
           r += kAttnThreads)
        lse[sh.statIndex(b, h, r0 + r)] = sm.lse[r];
  }
}

/// dQ of a query tile from the forward's out and lse, and the rows' D into
/// rowDot ([B, H, S]) for the dK/dV kernel.
template <int DIM, class T, class A>
__global__ void __launch_bounds__(kAttnThreads,
                                  attnGradMinBlocks<T, A, DIM>())
    attentionGradQueryKernel(const T *q, const T *k, const T *v,
                             const T *out, const A *lse, const T *dout,
                             T *dq, A *rowDot, AttnShape sh, A scale,
                             bool causal, int64_t work) {
  constexpr bool TC = attnTensorCores<T, A>();
  using S = GradQuerySmem<A, DIM, TC>;
  using MS = TileMap<S::BR, S::BC>;
  using MO = TileMap<S::BR, DIM>;
  constexpr int G = kAttnThreads / S::BR; // threads per row of D
  static_assert(G >= 1 && G <= 32 && (G & (G - 1)) == 0, "row group");
  const int myRow = int(threadIdx.x) / G, myLane = int(threadIdx.x) % G;
  S sm(reinterpret_cast<A *>(attnSmem));
  for (int64_t w = blockIdx.x; w < work; w += gridDim.x) {
    int64_t b, h, r0;
    queryTileOf(w, sh, S::BR, b, h, r0);
    const int64_t hk = sh.kvHeadOf(h);
    const int64_t rowEnd = r0 + S::BR < sh.seq ? r0 + S::BR : sh.seq;
    const int rows = int(rowEnd - r0);
    __syncthreads(); // the previous tile's readers of shared memory are done
    loadQueryAndGradRows<DIM>(sm, q, dout, sh, b, r0, h, rows);
    // The O tile in k and v, which the key loop loads after its barrier.
    loadRows<DIM, S::DP, S::BR>(sm.k, out + sh.oRow(b, r0, h),
                                sh.heads * sh.valueDim, rows,
                                int(sh.valueDim));
    for (int r = int(threadIdx.x); r < S::BR; r += kAttnThreads)
      sm.lse[r] = r < rows ? lse[sh.statIndex(b, h, r0 + r)] : A(0);
    __syncthreads();
    {
      // D_i = dO_i · O_i, reduced over the G lanes of row i.
      const A *g = sm.dout + myRow * S::DP, *o = sm.k + myRow * S::DP;
      A dot = A(0);
      for (int c = myLane; c < int(sh.valueDim); c += G)
        dot = fma(g[c], o[c], dot);
#pragma unroll
      for (int off = G / 2; off > 0; off /= 2)
        dot += __shfl_xor_sync(0xffffffffu, dot, off, G);
      if (myLane == 0) {
        sm.rowDot[myRow] = dot;
        if (myRow < rows)
          rowDot[sh.statIndex(b, h, r0 + myRow)] = dot;
      }
    }
    const int64_t keyEnd = attnKeyEnd(rowEnd, sh.kvSeq, causal);
    if constexpr (TC) {
      // dQ / scale in the warps' fragments; dP lands in sm.dp.
      AccFrag dqFrags[fragsPerWarp<S::BR, DIM>()];
      clearFrags<S::BR, DIM>(dqFrags);
      for (int64_t c0 = 0; c0 < keyEnd; c0 += S::BC) {
        __syncthreads();
        loadKeyTile<DIM>(sm, k, v, sh, b, c0, hk);
        __syncthreads();
        mmaTile<S::BR, S::BC, true, false>(sm.s, S::SP, sm.q, S::DP, sm.k,
                                           S::DP, DIM);
        mmaTile<S::BR, S::BC, true, false>(sm.dp, S::SP, sm.dout, S::DP,
                                           sm.v, S::DP, DIM);
        const bool masked = attnTileMasked(r0, S::BR, c0, S::BC, sh, causal);
        __syncthreads();
        for (int idx = int(threadIdx.x); idx < S::BR * S::BC;
             idx += kAttnThreads) {
          int r = idx / S::BC, c = idx % S::BC;
          bool visible = !masked || attnVisible(r0 + r, c0 + c, sh.seq,
                                                sh.kvSeq, causal);
          A p = visible ? attnFastExp(sm.s[r * S::SP + c] * scale - sm.lse[r])
                        : A(0);
          sm.s[r * S::SP + c] =
              attnScoreGrad(p, sm.dp[r * S::SP + c], sm.rowDot[r]);
        }
        __syncthreads();
        mmaAccumulate<S::BR, DIM, false, true>(dqFrags, sm.s, S::SP, sm.k,
                                               S::DP, S::BC);
      }
      __syncthreads(); // the loop's readers of q are done
      storeFrags<S::BR, DIM>(sm.q, S::DP, dqFrags);
      __syncthreads();
      for (int idx = int(threadIdx.x); idx < S::BR * DIM;
           idx += kAttnThreads) {
        int r = idx / DIM, c = idx % DIM;
        if (r0 + r < sh.seq && c < sh.headDim)
          storeAcc(dq + sh.qRow(b, r0 + r, h) + c, sm.q[r * S::DP + c] * scale);
      }
    } else {
      A acc[MO::RM][MO::CN]; // dQ / scale
      clearTile<MO>(acc);
      for (int64_t c0 = 0; c0 < keyEnd; c0 += S::BC) {
        __syncthreads();
        loadKeyTile<DIM>(sm, k, v, sh, b, c0, hk);
        __syncthreads();
        A sc[MS::RM][MS::CN], dp[MS::RM][MS::CN];
        clearTile<MS>(sc);
        clearTile<MS>(dp);
        productNT<MS>(sc, sm.q, S::DP, sm.k, S::DP, int(sh.headDim));
        productNT<MS>(dp, sm.dout, S::DP, sm.v, S::DP, int(sh.valueDim));
#pragma unroll
        for (int i = 0; i < MS::RM; ++i) {
          int r = MS::row(i);
#pragma unroll
          for (int j = 0; j < MS::CN; ++j) {
            bool visible = attnVisible(r0 + r, c0 + MS::col(j), sh.seq,
                                       sh.kvSeq, causal);
            A p = attnProb(visible, sc[i][j] * scale, sm.lse[r]);
            sm.s[r * S::SP + MS::col(j)] =
                attnScoreGrad(p, dp[i][j], sm.rowDot[r]);
          }
        }
        __syncthreads();
        productNN<MO>(acc, sm.s, S::SP, sm.k, S::DP, S::BC);
      }
#pragma unroll
      for (int i = 0; i < MO::RM; ++i) {
        int64_t qi = r0 + MO::row(i);
        if (qi >= sh.seq)
          continue;
        T *g = dq + sh.qRow(b, qi, h);
#pragma unroll
        for (int j = 0; j < MO::CN; ++j)
          if (MO::col(j) < sh.headDim)
            storeAcc(g + MO::col(j), acc[i][j] * scale);
      }
    }
  }
}

/// The shared memory of a key-tile block (dK/dV kernel); scores are held
/// transposed, [key][query]. On tensor cores (TC) dK and dV stay in the
/// warps' fragments and leave through q and dO's rows (2·BR >= BC).
template <class A, int DIM, bool TC> struct KeyTileSmem {
  static constexpr AttnTiles kTiles = attnKeyTiles(sizeof(A) == 8, DIM);
  static constexpr int kPad = TC ? 4 : 1;
  static constexpr int BR = kTiles.rows, BC = kTiles.keys, DP = DIM + kPad;
  static constexpr int SP = BR + kPad;
  static_assert(2 * BR >= BC, "a key tile's rows fit in q and dO's");
  A *k, *v, *q, *dout, *p, *ds, *lse, *rowDot;
  __device__ explicit KeyTileSmem(A *base)
      : k(base), v(k + BC * DP), q(v + BC * DP), dout(q + BR * DP),
        p(dout + BR * DP), ds(p + BC * SP), lse(ds + BC * SP),
        rowDot(lse + BR) {}
  static constexpr size_t bytes() {
    return sizeof(A) * size_t((2 * BC + 2 * BR) * DP + 2 * BC * SP + 2 * BR);
  }
};


template <int DIM, class T, class A>
__global__ void __launch_bounds__(kAttnThreads,
                                  attnGradMinBlocks<T, A, DIM>())
    attentionGradKeyKernel(const T *q, const T *k, const T *v, const T *dout,
                           const A *lse, const A *rowDot, T *dk, T *dv,
                           AttnShape sh, A scale, bool causal, int64_t work) {
  constexpr bool TC = attnTensorCores<T, A>();
  using S = KeyTileSmem<A, DIM, TC>;
  using MS = TileMap<S::BC, S::BR>;
  using MO = TileMap<S::BC, DIM>;
  S sm(reinterpret_cast<A *>(attnSmem));
  const int64_t group = sh.heads / sh.kvHeads, bhk = sh.batch * sh.kvHeads;
  for (int64_t w = blockIdx.x; w < work; w += gridDim.x) {
    // The first key tiles are seen by the most queries: they go first.
    const int64_t c0 = (w / bhk) * S::BC, b = (w % bhk) / sh.kvHeads,
                  hk = w % sh.kvHeads;
    __syncthreads();
    loadKeyTile<DIM>(sm, k, v, sh, b, c0, hk);
    // On tensor cores dK and dV live in fragments; the register tiles are
    // the CUDA-core kernels'.
    A gk[TC ? 1 : MO::RM][TC ? 1 : MO::CN],
        gv[TC ? 1 : MO::RM][TC ? 1 : MO::CN];
    AccFrag gkFrags[TC ? fragsPerWarp<S::BC, DIM>() : 1],
        gvFrags[TC ? fragsPerWarp<S::BC, DIM>() : 1];
    if constexpr (TC) {
      clearFrags<S::BC, DIM>(gkFrags);
      clearFrags<S::BC, DIM>(gvFrags);
    } else {
      clearTile<MO>(gk);
      clearTile<MO>(gv);
    }
    const int64_t firstTile = attnFirstRow(c0, causal) / S::BR;
    for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
      for (int64_t r0 = firstTile * S::BR; r0 < sh.seq; r0 += S::BR) {
        int rows = int(sh.seq - r0 < S::BR ? sh.seq - r0 : S::BR);
        __syncthreads();
        loadQueryAndGradRows<DIM>(sm, q, dout, sh, b, r0, h, rows);
        const int64_t stat = sh.statIndex(b, h, r0);
        for (int r = int(threadIdx.x); r < S::BR; r += kAttnThreads) {
          bool in = r < rows;
          sm.lse[r] = in ? lse[stat + r] : A(0);
          sm.rowDot[r] = in ? rowDot[stat + r] : A(0);
        }
        __syncthreads();
        if constexpr (TC) {
          // Scores and dP land in p and ds, then become P and dS in place.
          mmaTile<S::BC, S::BR, true, false>(sm.p, S::SP, sm.k, S::DP, sm.q,
                                             S::DP, DIM);
          mmaTile<S::BC, S::BR, true, false>(sm.ds, S::SP, sm.v, S::DP,
                                             sm.dout, S::DP, DIM);
          const bool masked =
              attnTileMasked(r0, S::BR, c0, S::BC, sh, causal);
          __syncthreads();
          for (int idx = int(threadIdx.x); idx < S::BC * S::BR;
               idx += kAttnThreads) {
            int key = idx / S::BR, r = idx % S::BR;
            bool visible = !masked || attnVisible(r0 + r, c0 + key, sh.seq,
                                                  sh.kvSeq, causal);
            A p = visible ? attnFastExp(sm.p[key * S::SP + r] * scale -
                                        sm.lse[r])
                          : A(0);
            sm.ds[key * S::SP + r] =
                attnScoreGrad(p, sm.ds[key * S::SP + r], sm.rowDot[r]);
            sm.p[key * S::SP + r] = p;
          }
          __syncthreads();
          mmaAccumulate<S::BC, DIM, false, true>(gvFrags, sm.p, S::SP,
                                                 sm.dout, S::DP, S::BR);
          mmaAccumulate<S::BC, DIM, false, true>(gkFrags, sm.ds, S::SP, sm.q,
                                                 S::DP, S::BR);
        } else {
          A sc[MS::RM][MS::CN], dp[MS::RM][MS::CN];
          clearTile<MS>(sc);
          clearTile<MS>(dp);
          productNT<MS>(sc, sm.k, S::DP, sm.q, S::DP, int(sh.headDim));
          productNT<MS>(dp, sm.v, S::DP, sm.dout, S::DP, int(sh.valueDim));
#pragma unroll
          for (int i = 0; i < MS::RM; ++i) {
            int key = MS::row(i);
#pragma unroll
            for (int j = 0; j < MS::CN; ++j) {
              int r = MS::col(j);
              bool visible =
                  attnVisible(r0 + r, c0 + key, sh.seq, sh.kvSeq, causal);
              A p = attnProb(visible, sc[i][j] * scale, sm.lse[r]);
              sm.p[key * S::SP + r] = p;
              sm.ds[key * S::SP + r] =
                  attnScoreGrad(p, dp[i][j], sm.rowDot[r]);
            }
          }
          __syncthreads();
          productNN<MO>(gv, sm.p, S::SP, sm.dout, S::DP, S::BR);
          productNN<MO>(gk, sm.ds, S::SP, sm.q, S::DP, S::BR);
        }
      }
    }
    if constexpr (TC) {
      // dV, then dK, through q and dO's rows (one array each: selecting
      // between them at run time would put both in local memory).
      auto flush = [&](const AccFrag(&frags)[fragsPerWarp<S::BC, DIM>()],
                       bool isV) {
        __syncthreads();
        storeFrags<S::BC, DIM>(sm.q, S::DP, frags);
        __syncthreads();
        for (int idx = int(threadIdx.x); idx < S::BC * DIM;
             idx += kAttnThreads) {
          int key = idx / DIM, c = idx % DIM;
          if (c0 + key >= sh.kvSeq)
            continue;
          A x = sm.q[key * S::DP + c];
          if (isV && c < sh.valueDim)
            storeAcc(dv + sh.vRow(b, c0 + key, hk) + c, x);
          if (!isV && c < sh.headDim)
            storeAcc(dk + sh.kRow(b, c0 + key, hk) + c, x * scale);
        }
      };
      flush(gvFrags, true);
      flush(gkFrags, false);
    } else {
#pragma unroll
      for (int i = 0; i < MO::RM; ++i) {
        int64_t kj = c0 + MO::row(i);
        if (kj >= sh.kvSeq)
          continue;
        T *gkRow = dk + sh.kRow(b, kj, hk), *gvRow = dv + sh.vRow(b, kj, hk);
#pragma unroll
        for (int j = 0; j < MO::CN; ++j) {
          int c = MO::col(j);
          if (c < sh.headDim)
            storeAcc(gkRow + c, gk[i][j] * scale);
          if (c < sh.valueDim)
            storeAcc(gvRow + c, gv[i][j]);
        }
      }
    }
  }
}

/// Blocks for `work` tiles (a grid-stride loop covers any rest).
unsigned gridOf(int64_t work) {
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

/// The forward into out and, when not null, lse; false with the error
/// recorded when it could not be launched.
template <int DIM, class T, class A>
bool launchForward(CudaBackend &be, tessel_ctx *ctx, const void *q,
                   const void *k, const void *v, void *out, A *lse,
                   const AttnShape &sh, double scale, bool causal,
                   const char *what) {
  using S = ForwardSmem<A, DIM, attnTensorCores<T, A>()>;
  static_assert(S::bytes() <= kMaxSmemBytes, "shared memory");
  auto kernel = attentionForwardKernel<DIM, T, A>;
  if (!allowSmem(ctx, kernel, S::bytes(), what))
    return false;
  int64_t work = sh.batch * sh.heads * ((sh.seq + S::BR - 1) / S::BR);
  kernel<<<gridOf(work), kAttnThreads, S::bytes(), be.stream()>>>(
      static_cast<const T *>(q), static_cast<const T *>(k),
      static_cast<const T *>(v), static_cast<T *>(out), lse, sh, A(scale),
      causal, work);
  return CudaBackend::checkLaunch(ctx, what);
}

/// The backward from the forward's out and lse or, both null (ABI 10 and
/// older), from a forward run first into temporaries.
template <int DIM, class T, class A>
void launchGrad(CudaBackend &be, tessel_ctx *ctx, const void *q,
                const void *k, const void *v, const void *out,
                const void *lse, const void *dout, void *dq, void *dk,
                void *dv, const AttnShape &sh, double scale, bool causal) {
  using SQ = GradQuerySmem<A, DIM, attnTensorCores<T, A>()>;
  using SK = KeyTileSmem<A, DIM, attnTensorCores<T, A>()>;
  static_assert(SQ::bytes() <= kMaxSmemBytes && SK::bytes() <= kMaxSmemBytes,
                "shared memory");
  const bool recompute = !out || !lse;
  const char *what =
      recompute ? "tessel_attention_grad" : "tessel_attention_grad_lse";
  auto queryKernel = attentionGradQueryKernel<DIM, T, A>;
  auto keyKernel = attentionGradKeyKernel<DIM, T, A>;
  if (!allowSmem(ctx, queryKernel, SQ::bytes(), what) ||
      !allowSmem(ctx, keyKernel, SK::bytes(), what))
    return;
  // One stream-ordered temporary (legal under graph capture): D per row,
  // and for a recomputing call the forward's lse and out after it (each
  // part 256-byte aligned, for the tile loads' vectors).
  const int64_t rowCount = sh.batch * sh.heads * sh.seq;
  auto aligned = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
  const size_t rowBytes = aligned(sizeof(A) * size_t(rowCount));
  const size_t outBytes = sizeof(T) * size_t(rowCount * sh.valueDim);
  unsigned char *temp = nullptr;
  if (!CudaBackend::check(
          ctx,
          cudaMallocAsync(reinterpret_cast<void **>(&temp),
                          recompute ? 2 * rowBytes + outBytes : rowBytes,
                          be.stream()),
          "tessel_attention_grad: cudaMallocAsync"))
    return;
  A *rowDot = reinterpret_cast<A *>(temp);
  bool launched = true;
  if (recompute) {
    A *forwardLse = reinterpret_cast<A *>(temp + rowBytes);
    void *forwardOut = temp + 2 * rowBytes;
    launched = launchForward<DIM, T, A>(be, ctx, q, k, v, forwardOut,
                                        forwardLse, sh, scale, causal, what);
    out = forwardOut;
    lse = forwardLse;
  }
  int64_t queryWork = sh.batch * sh.heads * ((sh.seq + SQ::BR - 1) / SQ::BR);
  if (launched) {
    queryKernel<<<gridOf(queryWork), kAttnThreads, SQ::bytes(),
                  be.stream()>>>(
        static_cast<const T *>(q), static_cast<const T *>(k),
        static_cast<const T *>(v), static_cast<const T *>(out),
        static_cast<const A *>(lse), static_cast<const T *>(dout),
        static_cast<T *>(dq), rowDot, sh, A(scale), causal, queryWork);
    launched = CudaBackend::checkLaunch(ctx, what);
  }
  if (launched) {
    int64_t keyWork =
        sh.batch * sh.kvHeads * ((sh.kvSeq + SK::BC - 1) / SK::BC);
    keyKernel<<<gridOf(keyWork), kAttnThreads, SK::bytes(), be.stream()>>>(
        static_cast<const T *>(q), static_cast<const T *>(k),
        static_cast<const T *>(v), static_cast<const T *>(dout),
        static_cast<const A *>(lse), rowDot, static_cast<T *>(dk),
        static_cast<T *>(dv), sh, A(scale), causal, keyWork);
    CudaBackend::checkLaunch(ctx, what);
  }
  CudaBackend::check(ctx, cudaFreeAsync(temp, be.stream()),
                     "tessel_attention_grad: cudaFreeAsync");
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
bool dimBucket(tessel_ctx *ctx, const char *kernel, int64_t headDim,
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

} // namespace

void CudaBackend::attention(tessel_ctx *ctx, int32_t dtype, const void *q,
                            const void *k, const void *v, void *out, void *lse,
                            int64_t batch, int64_t seq, int64_t kvSeq,
                            int64_t heads, int64_t kvHeads, int64_t headDim,
                            int64_t valueDim, double scale, bool causal) {
  const char *what = lse ? "tessel_attention_lse" : "tessel_attention";
  int64_t rowCount = batch * heads * seq, outCount = rowCount * valueDim;
  // (With value dim 0 there is no output, but still each row's lse.)
  if (outCount == 0 && (!lse || rowCount == 0))
    return;
  if (!check(ctx, cudaSetDevice(device()), what))
    return;
  if (kvSeq == 0) {
    // No keys: every weighted sum is empty and every row's lse -inf (as
    // the CPU backend).
    if (outCount > 0 &&
        !check(ctx,
               cudaMemsetAsync(out, 0,
                               size_t(outCount * tessel_dtype_size(dtype)),
                               stream()),
               what))
      return;
    if (lse && dtype == TESSEL_F64) {
      const double negInf = -INFINITY;
      uint64_t bits;
      std::memcpy(&bits, &negInf, sizeof(bits));
      fill(ctx, lse, rowCount, sizeof(double), bits);
    } else if (lse) {
      const float negInf = -INFINITY;
      uint32_t bits;
      std::memcpy(&bits, &negInf, sizeof(bits));
      fill(ctx, lse, rowCount, sizeof(float), bits);
    }
    return;
  }
  int bucket = 0;
  if (!dimBucket(ctx, what, headDim, valueDim, bucket))
    return;
  AttnShape sh{batch, seq, kvSeq, heads, kvHeads, headDim, valueDim};
  visitAttnDtype(dtype, [&](auto t, auto a) {
    using T = decltype(t);
    using A = decltype(a);
    A *rowLse = static_cast<A *>(lse);
    if (bucket == 64)
      launchForward<64, T, A>(*this, ctx, q, k, v, out, rowLse, sh, scale,
                              causal, what);
    else if (bucket == 128)
      launchForward<128, T, A>(*this, ctx, q, k, v, out, rowLse, sh, scale,
                               causal, what);
    else
      launchForward<256, T, A>(*this, ctx, q, k, v, out, rowLse, sh, scale,
                               causal, what);
  });
}

void CudaBackend::attentionGrad(tessel_ctx *ctx, int32_t dtype, const void *q,
                                const void *k, const void *v, const void *out,
                                const void *lse, const void *dout, void *dq,
                                void *dk, void *dv, int64_t batch, int64_t seq,
                                int64_t kvSeq, int64_t heads, int64_t kvHeads,
                                int64_t headDim, int64_t valueDim,
                                double scale, bool causal) {
  const char *what =
      out && lse ? "tessel_attention_grad_lse" : "tessel_attention_grad";
  // The stream's device is current: cudaMallocAsync takes from its pool.
  if (!check(ctx, cudaSetDevice(device()), what))
    return;
  if (batch * heads * seq * kvSeq == 0) {
    // No scores: every gradient is zero (and every one is overwritten).
    int64_t es = tessel_dtype_size(dtype);
    int64_t counts[3] = {batch * seq * heads * headDim,
                         batch * kvSeq * kvHeads * headDim,
                         batch * kvSeq * kvHeads * valueDim};
    void *grads[3] = {dq, dk, dv};
    for (int i = 0; i < 3; ++i)
      if (counts[i] > 0 &&
          !check(ctx, cudaMemsetAsync(grads[i], 0, size_t(counts[i] * es),
                                      stream()),
                 what))
        return;
    return;
  }
  int bucket = 0;
  if (!dimBucket(ctx, what, headDim, valueDim, bucket))
    return;
  AttnShape sh{batch, seq, kvSeq, heads, kvHeads, headDim, valueDim};
  visitAttnDtype(dtype, [&](auto t, auto a) {
    using T = decltype(t);
    using A = decltype(a);
    if (bucket == 64)
      launchGrad<64, T, A>(*this, ctx, q, k, v, out, lse, dout, dq, dk, dv, sh,
                           scale, causal);
    else if (bucket == 128)
      launchGrad<128, T, A>(*this, ctx, q, k, v, out, lse, dout, dq, dk, dv,
                            sh, scale, causal);
    else
      launchGrad<256, T, A>(*this, ctx, q, k, v, out, lse, dout, dq, dk, dv,
                            sh, scale, causal);
  });
}
