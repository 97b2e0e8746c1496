//===- attention_grad.cu - Flash-style attention, the backward ------------===//
//
// tessel_attention_grad(_lse): two kernels and no float atomics, so the
// result is deterministic, from the forward's O and lse,
// P = e^(scale · q·kᵀ - lse) (under AttnMask::softcap, the scaled score
// capped first and dS times the cap's slope): the first, a block per
// query tile, computes D = rowsum(dO ∘ O) of its rows (kept in a
// temporary [B, H, S] buffer), then walks the key tiles for
// dQ = scale · dS·K; the second, a block per (batch, kv head, key tile),
// walks the query tiles of every query head of its group in a fixed order
// for dV = Σ Pᵀ·dO and dK = scale · Σ dSᵀ·Q, so a kv head's sum over its
// query heads needs no second pass.
// tessel_attention_grad (ABI 10 and older models, which keep neither O nor
// lse) runs the forward (attention.cu) into temporaries first. Tile
// products as the forward's: CUDA cores for f32 and f64, TF32 WMMA for f16
// and bf16, with dQ, dK and dV accumulated in the warps' fragments.
//
//===----------------------------------------------------------------------===//

#include "cuda/attention_tiles.cuh"

#include <cmath>

using namespace tessel;
using namespace tessel::cuda;
using namespace tessel::cuda::attn;

namespace {

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

/// Blocks per SM the backward kernels are built for: two for the tensor-core
/// kernel of head dim 64 (about 105 KB of shared memory each), else one.
template <class T, class A, int DIM> constexpr int attnGradMinBlocks() {
  return attnTensorCores<T, A>() && DIM == 64 ? 2 : 1;
}

/// dQ of a query tile from the forward's out and lse, and the rows' D into
/// rowDot ([B, H, S]) for the dK/dV kernel.
template <int DIM, class T, class A>
__global__ void __launch_bounds__(kAttnThreads,
                                  attnGradMinBlocks<T, A, DIM>())
    attentionGradQueryKernel(const T *q, const T *k, const T *v,
                             const T *out, const A *lse, const T *dout,
                             T *dq, A *rowDot, AttnShape sh, A scale,
                             AttnMask mask, int64_t work) {
  constexpr bool TC = attnTensorCores<T, A>();
  using S = GradQuerySmem<A, DIM, TC>;
  using MS = TileMap<S::BR, S::BC>;
  using MO = TileMap<S::BR, DIM>;
  constexpr int G = kAttnThreads / S::BR; // threads per row of D
  static_assert(G >= 1 && G <= 32 && (G & (G - 1)) == 0, "row group");
  const int myRow = int(threadIdx.x) / G, myLane = int(threadIdx.x) % G;
  const A cap = A(mask.softcap); // 0: scores uncapped
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
    const int64_t keyBegin = attnKeyTileBegin(r0, S::BC, mask);
    const int64_t keyEnd = attnKeyEnd(rowEnd, sh.kvSeq, mask);
    if constexpr (TC) {
      // dQ / scale in the warps' fragments; dP lands in sm.dp.
      AccFrag dqFrags[fragsPerWarp<S::BR, DIM>()];
      clearFrags<S::BR, DIM>(dqFrags);
      for (int64_t c0 = keyBegin; c0 < keyEnd; c0 += S::BC) {
        __syncthreads();
        loadKeyTile<DIM>(sm, k, v, sh, b, c0, hk);
        __syncthreads();
        mmaTile<S::BR, S::BC, true, false>(sm.s, S::SP, sm.q, S::DP, sm.k,
                                           S::DP, DIM);
        mmaTile<S::BR, S::BC, true, false>(sm.dp, S::SP, sm.dout, S::DP,
                                           sm.v, S::DP, DIM);
        const bool masked = attnTileMasked(r0, S::BR, c0, S::BC, sh, mask);
        __syncthreads();
        for (int idx = int(threadIdx.x); idx < S::BR * S::BC;
             idx += kAttnThreads) {
          int r = idx / S::BC, c = idx % S::BC;
          bool visible = !masked || attnVisible(r0 + r, c0 + c, sh.seq,
                                                sh.kvSeq, mask);
          A sc = softcapValue(sm.s[r * S::SP + c] * scale, cap);
          A p = visible ? attnFastExp(sc - sm.lse[r]) : A(0);
          sm.s[r * S::SP + c] =
              attnScoreGrad(p, sm.dp[r * S::SP + c], sm.rowDot[r]) *
              softcapSlope(sc, cap);
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
      for (int64_t c0 = keyBegin; c0 < keyEnd; c0 += S::BC) {
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
                                       sh.kvSeq, mask);
            A x = softcapValue(sc[i][j] * scale, cap);
            A p = attnProb(visible, x, sm.lse[r]);
            sm.s[r * S::SP + MS::col(j)] =
                attnScoreGrad(p, dp[i][j], sm.rowDot[r]) * softcapSlope(x, cap);
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
                           AttnShape sh, A scale, AttnMask mask, int64_t work) {
  constexpr bool TC = attnTensorCores<T, A>();
  using S = KeyTileSmem<A, DIM, TC>;
  using MS = TileMap<S::BC, S::BR>;
  using MO = TileMap<S::BC, DIM>;
  S sm(reinterpret_cast<A *>(attnSmem));
  const A cap = A(mask.softcap); // 0: scores uncapped
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
    const int64_t firstTile = attnFirstRow(c0, mask) / S::BR;
    const int64_t rowEnd =
        attnRowEnd(c0 + S::BC < sh.kvSeq ? c0 + S::BC : sh.kvSeq, sh.seq, mask);
    for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
      for (int64_t r0 = firstTile * S::BR; r0 < rowEnd; r0 += S::BR) {
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
              attnTileMasked(r0, S::BR, c0, S::BC, sh, mask);
          __syncthreads();
          for (int idx = int(threadIdx.x); idx < S::BC * S::BR;
               idx += kAttnThreads) {
            int key = idx / S::BR, r = idx % S::BR;
            bool visible = !masked || attnVisible(r0 + r, c0 + key, sh.seq,
                                                  sh.kvSeq, mask);
            A sc = softcapValue(sm.p[key * S::SP + r] * scale, cap);
            A p = visible ? attnFastExp(sc - sm.lse[r]) : A(0);
            sm.ds[key * S::SP + r] =
                attnScoreGrad(p, sm.ds[key * S::SP + r], sm.rowDot[r]) *
                softcapSlope(sc, cap);
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
                  attnVisible(r0 + r, c0 + key, sh.seq, sh.kvSeq, mask);
              A x = softcapValue(sc[i][j] * scale, cap);
              A p = attnProb(visible, x, sm.lse[r]);
              sm.p[key * S::SP + r] = p;
              sm.ds[key * S::SP + r] =
                  attnScoreGrad(p, dp[i][j], sm.rowDot[r]) *
                  softcapSlope(x, cap);
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

/// The backward from the forward's out and lse or, both null (ABI 10 and
/// older), from a forward run first into temporaries.
template <int DIM, class T, class A>
void launchGrad(CudaBackend &be, tessel_ctx *ctx, int32_t dtype, const void *q,
                const void *k, const void *v, const void *out,
                const void *lse, const void *dout, void *dq, void *dk,
                void *dv, const AttnShape &sh, double scale, AttnMask mask) {
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
    launched = launchForward(be, ctx, dtype, DIM, q, k, v, forwardOut,
                             forwardLse, sh, scale, mask, what);
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
        static_cast<T *>(dq), rowDot, sh, A(scale), mask, queryWork);
    launched = CudaBackend::checkLaunch(ctx, what);
  }
  if (launched) {
    int64_t keyWork =
        sh.batch * sh.kvHeads * ((sh.kvSeq + SK::BC - 1) / SK::BC);
    keyKernel<<<gridOf(keyWork), kAttnThreads, SK::bytes(), be.stream()>>>(
        static_cast<const T *>(q), static_cast<const T *>(k),
        static_cast<const T *>(v), static_cast<const T *>(dout),
        static_cast<const A *>(lse), rowDot, static_cast<T *>(dk),
        static_cast<T *>(dv), sh, A(scale), mask, keyWork);
    CudaBackend::checkLaunch(ctx, what);
  }
  CudaBackend::check(ctx, cudaFreeAsync(temp, be.stream()),
                     "tessel_attention_grad: cudaFreeAsync");
}

} // namespace

void CudaBackend::attentionGrad(tessel_ctx *ctx, int32_t dtype, const void *q,
                                const void *k, const void *v, const void *out,
                                const void *lse, const void *dout, void *dq,
                                void *dk, void *dv, int64_t batch, int64_t seq,
                                int64_t kvSeq, int64_t heads, int64_t kvHeads,
                                int64_t headDim, int64_t valueDim,
                                double scale, AttnMask mask) {
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
      launchGrad<64, T, A>(*this, ctx, dtype, q, k, v, out, lse, dout, dq, dk, dv, sh,
                           scale, mask);
    else if (bucket == 128)
      launchGrad<128, T, A>(*this, ctx, dtype, q, k, v, out, lse, dout, dq, dk, dv,
                            sh, scale, mask);
    else
      launchGrad<256, T, A>(*this, ctx, dtype, q, k, v, out, lse, dout, dq, dk, dv,
                            sh, scale, mask);
  });
}

