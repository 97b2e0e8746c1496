//===- attention.cu - Flash-style attention, the forward ------------------===//
//
// tessel_attention(_lse) in the flash-attention-2 form, on CUDA cores (f32
// arithmetic for f32, f16 and bf16 storage; f64 in f64): a block per
// (batch, head, tile of query rows) keeps its Q tile in shared memory and
// walks the key tiles its rows see (those above the causal diagonal and
// before a sliding window are skipped whole), with an online softmax
// (running max and sum per row) and the output rows accumulated in
// registers, written once,
// normalised; with lse, also each row's log-sum-exp ([B, H, S], in the
// arithmetic type). The backward is attention_grad.cu's.
// For f32 and f64, products of tiles run from shared memory into per-thread
// register tiles (attnTileColumns) on CUDA cores; rows are padded by one
// element against bank conflicts. For f16 and bf16 they run on tensor cores
// (TF32 WMMA with f32 accumulation: the 16-bit inputs are exact in TF32;
// P and dS round to TF32, finer than the 16-bit output) from and into
// shared memory, rows padded by four elements (WMMA's alignment), and the
// register tiles add the products in. Kernels are built per head-dim
// bucket (64, 128, 256); attention_tiles.cuh holds the pieces both
// directions share. A soft cap (AttnMask::softcap) shapes each scaled score
// where it is scaled, before the online softmax.
//
//===----------------------------------------------------------------------===//

#include "cuda/attention_tiles.cuh"

#include <cmath>
#include <cstring>

using namespace tessel;
using namespace tessel::cuda;
using namespace tessel::cuda::attn;

namespace {

/// The forward over the key tiles of query tile [r0, r0 + BR) of head h:
/// leaves the unnormalised output rows in `acc`, 1 / l per row in
/// sm.rowInv and lse per row in sm.lse (both after a barrier).
template <int DIM, class T, class A, bool TC>
__device__ void
forwardTile(const ForwardSmem<A, DIM, TC> &sm,
            A (&acc)[TileMap<ForwardSmem<A, DIM, TC>::BR, DIM>::RM]
                    [TileMap<ForwardSmem<A, DIM, TC>::BR, DIM>::CN],
            const T *q, const T *k, const T *v, const AttnShape &sh,
            int64_t b, int64_t h, int64_t r0, A scale, AttnMask mask) {
  using S = ForwardSmem<A, DIM, TC>;
  using MS = TileMap<S::BR, S::BC>;
  using MO = TileMap<S::BR, DIM>;
  constexpr int G = kAttnThreads / S::BR; // threads per score row
  static_assert(G >= 1 && G <= 32 && (G & (G - 1)) == 0, "row group");
  const int64_t hk = sh.kvHeadOf(h);
  const int64_t rowEnd = r0 + S::BR < sh.seq ? r0 + S::BR : sh.seq;
  const int64_t keyEnd = attnKeyEnd(rowEnd, sh.kvSeq, mask);
  const int myRow = int(threadIdx.x) / G, myLane = int(threadIdx.x) % G;
  const A cap = A(mask.softcap); // 0: scores uncapped
  OnlineRow<A> row = OnlineRow<A>::start();

  __syncthreads(); // the previous tile's readers of shared memory are done
  loadRows<DIM, S::DP, S::BR>(sm.q, q + sh.qRow(b, r0, h),
                              sh.heads * sh.headDim, int(rowEnd - r0),
                              int(sh.headDim));
  clearTile<MO>(acc);
  for (int64_t c0 = attnKeyTileBegin(r0, S::BC, mask); c0 < keyEnd;
       c0 += S::BC) {
    __syncthreads();
    loadKeyTile<DIM>(sm, k, v, sh, b, c0, hk);
    __syncthreads();
    if constexpr (TC) {
      // Raw scores, -inf where masked; the softmax below scales them.
      mmaTile<S::BR, S::BC, true, false>(sm.s, S::SP, sm.q, S::DP, sm.k,
                                         S::DP, DIM);
      if (attnTileMasked(r0, S::BR, c0, S::BC, sh, mask)) {
        __syncthreads();
        for (int idx = int(threadIdx.x); idx < S::BR * S::BC;
             idx += kAttnThreads) {
          int r = idx / S::BC, c = idx % S::BC;
          if (!attnVisible(r0 + r, c0 + c, sh.seq, sh.kvSeq, mask))
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
                          sh.kvSeq, mask)
                  ? softcapValue(sc[i][j] * scale, cap)
                  : attnNegInf<A>();
    }
    __syncthreads();
    // Online softmax of the tile, G lanes per row (on tensor cores the
    // scores are scaled here and weighed with the fast exp).
    A *srow = sm.s + myRow * S::SP;
    auto score = [&](int c) {
      A x = srow[c];
      if constexpr (TC)
        return x == attnNegInf<A>() ? x : softcapValue(x * scale, cap);
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
                           AttnShape sh, A scale, AttnMask mask, int64_t work) {
  using S = ForwardSmem<A, DIM, attnTensorCores<T, A>()>;
  using MO = TileMap<S::BR, DIM>;
  S sm(reinterpret_cast<A *>(attnSmem));
  for (int64_t w = blockIdx.x; w < work; w += gridDim.x) {
    int64_t b, h, r0;
    queryTileOf(w, sh, S::BR, b, h, r0);
    A acc[MO::RM][MO::CN];
    forwardTile<DIM>(sm, acc, q, k, v, sh, b, h, r0, scale, mask);
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

/// The forward into out and, when not null, lse; false with the error
/// recorded when it could not be launched.
template <int DIM, class T, class A>
bool launchForwardOf(CudaBackend &be, tessel_ctx *ctx, const void *q,
                   const void *k, const void *v, void *out, A *lse,
                   const AttnShape &sh, double scale, AttnMask mask,
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
      mask, work);
  return CudaBackend::checkLaunch(ctx, what);
}

} // namespace

bool tessel::cuda::attn::launchForward(CudaBackend &be, tessel_ctx *ctx,
                                       int32_t dtype, int bucket,
                                       const void *q, const void *k,
                                       const void *v, void *out, void *lse,
                                       const AttnShape &sh, double scale,
                                       AttnMask mask, const char *what) {
  bool launched = false;
  visitAttnDtype(dtype, [&](auto t, auto a) {
    using T = decltype(t);
    using A = decltype(a);
    A *rowLse = static_cast<A *>(lse);
    if (bucket == 64)
      launched = launchForwardOf<64, T, A>(be, ctx, q, k, v, out, rowLse, sh,
                                           scale, mask, what);
    else if (bucket == 128)
      launched = launchForwardOf<128, T, A>(be, ctx, q, k, v, out, rowLse, sh,
                                            scale, mask, what);
    else
      launched = launchForwardOf<256, T, A>(be, ctx, q, k, v, out, rowLse, sh,
                                            scale, mask, what);
  });
  return launched;
}

void CudaBackend::attention(tessel_ctx *ctx, int32_t dtype, const void *q,
                            const void *k, const void *v, void *out, void *lse,
                            int64_t batch, int64_t seq, int64_t kvSeq,
                            int64_t heads, int64_t kvHeads, int64_t headDim,
                            int64_t valueDim, double scale, AttnMask mask) {
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
  launchForward(*this, ctx, dtype, bucket, q, k, v, out, lse, sh, scale,
                mask, what);
}

