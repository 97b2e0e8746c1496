//===- data.cu - Strided copies, reductions, embeddings -------------------===//
//
// The data-movement kernels of the CUDA backend, each the CPU backend's
// (cpu/data.cpp, cpu/backward.cpp) result on the device:
//   - stridedCopy: dimensions coalesced as the CPU does; a plain contiguous
//     copy is a cudaMemcpyAsync; a transpose-like copy (reads contiguous
//     along one dimension, writes along another) goes through 32x32
//     shared-memory tiles; anything else is one thread per element through
//     an IndexMap (data_math.h) passed by value, more than kMaxDims
//     coalesced dimensions looping on the host over the outer ones.
//   - reduce: outputs x reduced elements after coalescing the kept and the
//     reduced dimensions separately; accumulation in double (int64 for
//     integers) as the CPU backend, in a fixed order (per-thread strided
//     runs, then a fixed shared-memory tree, then the splits in order), so
//     results do not depend on timing. Large reductions split the reduced
//     range over blocks (partials in a cudaMallocAsync buffer, combined by a
//     second kernel).
//   - embedding: one block per id, the row moved in the widest words the
//     row size and pointers allow.
//   - embeddingGrad: (row, position) pairs sorted by cub's stable radix sort,
//     then each row's contributions summed in position order in double and
//     rounded once: the CPU backend's bits exactly.
//
//===----------------------------------------------------------------------===//

#include "cuda/backend.h"
#include "cuda/data_math.h"

#include "core/context.h"

#include <cub/cub.cuh>

using namespace tessel;
using namespace tessel::cuda;

namespace {

//===--- Strided copy -----------------------------------------------------===//

template <class E>
__global__ void stridedCopyKernel(const E *__restrict__ in, E *__restrict__ out,
                                  IndexMap map, int64_t total) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t src, dst;
    map.offsets(i, src, dst);
    out[dst] = in[src];
  }
}

template <class W>
__global__ void fillKernel(W *__restrict__ out, int64_t count, W value) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = value;
}

template <class W>
void launchFill(tessel_ctx *ctx, cudaStream_t stream, void *out, int64_t count,
                uint64_t bits) {
  fillKernel<W><<<gridFor(count), 256, 0, stream>>>(static_cast<W *>(out),
                                                    count, W(bits));
  CudaBackend::checkLaunch(ctx, "tessel_fill");
}

/// TransposePlan's copy: a 32x32 tile per block iteration, read along p
/// (threadIdx.x), written along q (threadIdx.x) through shared memory.
template <class E>
__global__ void __launch_bounds__(kTile * 8)
    transposeKernel(const E *__restrict__ in, E *__restrict__ out,
                    TransposePlan plan) {
  __shared__ E tile[kTile][kTile + 1]; // +1: no bank conflicts on columns
  const int x = threadIdx.x, y = threadIdx.y;
  const int64_t tilesP = (plan.sizeP + kTile - 1) / kTile;
  const int64_t tilesQ = (plan.sizeQ + kTile - 1) / kTile;
  const int64_t tiles = plan.restCount * tilesP * tilesQ;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t restIndex = t / (tilesP * tilesQ);
    const int64_t inRest = t - restIndex * tilesP * tilesQ;
    const int64_t p0 = (inRest % tilesP) * kTile;
    const int64_t q0 = (inRest / tilesP) * kTile;
    int64_t src0, dst0;
    plan.rest.offsets(restIndex, src0, dst0);
    for (int dq = y; dq < kTile; dq += 8) {
      int64_t p = p0 + x, q = q0 + dq;
      if (p < plan.sizeP && q < plan.sizeQ)
        tile[dq][x] = in[plan.src(src0, p, q)];
    }
    __syncthreads();
    for (int dp = y; dp < kTile; dp += 8) {
      int64_t p = p0 + dp, q = q0 + x;
      if (p < plan.sizeP && q < plan.sizeQ)
        out[plan.dst(dst0, p, q)] = tile[x][dp];
    }
    __syncthreads(); // the tile is read before the next one overwrites it
  }
}

template <class E>
bool launchStridedCopy(tessel_ctx *ctx, cudaStream_t stream, const void *in,
                       void *out, const std::vector<Dim> &dims) {
  TransposePlan transpose;
  if (planTranspose(dims, transpose)) {
    int64_t tiles = transpose.restCount *
                    ((transpose.sizeP + kTile - 1) / kTile) *
                    ((transpose.sizeQ + kTile - 1) / kTile);
    transposeKernel<E><<<unsigned(std::min<int64_t>(tiles, int64_t(1) << 20)),
                         dim3(kTile, 8), 0, stream>>>(
        static_cast<const E *>(in), static_cast<E *>(out), transpose);
    return CudaBackend::checkLaunch(ctx, "tessel_strided_copy");
  }
  // The innermost kMaxDims dimensions go to the kernel; an odometer here
  // walks the rest (only ranks beyond kMaxDims after coalescing).
  size_t outerCount =
      dims.size() > size_t(kMaxDims) ? dims.size() - kMaxDims : 0;
  IndexMap map = makeIndexMap(dims, outerCount, dims.size() - outerCount);
  int64_t total = 1;
  for (int32_t d = 0; d < map.rank; ++d)
    total *= map.size[d];
  std::vector<int64_t> idx(outerCount, 0);
  int64_t inOff = 0, outOff = 0;
  while (true) {
    stridedCopyKernel<E><<<gridFor(total), 256, 0, stream>>>(
        static_cast<const E *>(in) + inOff, static_cast<E *>(out) + outOff, map,
        total);
    if (!CudaBackend::checkLaunch(ctx, "tessel_strided_copy"))
      return false;
    int d = int(outerCount) - 1;
    for (; d >= 0; --d) {
      inOff += dims[size_t(d)].a;
      outOff += dims[size_t(d)].b;
      if (++idx[size_t(d)] < dims[size_t(d)].size)
        break;
      inOff -= dims[size_t(d)].a * dims[size_t(d)].size;
      outOff -= dims[size_t(d)].b * dims[size_t(d)].size;
      idx[size_t(d)] = 0;
    }
    if (d < 0)
      return true;
  }
}

//===--- Reduce -----------------------------------------------------------===//

constexpr int64_t kMaxGridX = int64_t(1) << 20; // blocks loop beyond

/// Where a reduction block leaves its result: the output itself (one split)
/// or its partial, combined later by reduceFinishKernel. The output's type
/// P is the input's T, or f32 for a 16-bit T (tessel_reduce_f32; the
/// accumulator is the same f64).
template <class T, class P> struct ReduceSink {
  P *out;
  typename ReduceOps<T>::Acc *partials; // [outputs, splits] when splits > 1
  int64_t splits, chunk;
  bool isMax, isMean;
  int64_t reduced;

  __device__ void store(int64_t o, typename ReduceOps<T>::Acc acc) const {
    out[o] = ReduceOps<P>::store(acc, isMean, reduced);
  }
  __device__ void put(int64_t o, int64_t s,
                      typename ReduceOps<T>::Acc acc) const {
    if (splits == 1)
      store(o, acc);
    else
      partials[o * splits + s] = acc;
  }
};

/// The reduced elements are a contiguous run: a block of kRowThreads per
/// output (and split), thread t taking r = t, t + kRowThreads, ...
template <class T, class P>
__global__ void __launch_bounds__(kRowThreads)
    reduceRowKernel(const T *__restrict__ in, ReducePlan plan,
                    ReduceSink<T, P> sink) {
  using Ops = ReduceOps<T>;
  using Acc = typename Ops::Acc;
  __shared__ Acc tree[kRowThreads];
  const int t = threadIdx.x;
  const int64_t s = blockIdx.y;
  const int64_t begin = s * sink.chunk;
  const int64_t end = min(plan.reduced, begin + sink.chunk);
  for (int64_t o = blockIdx.x; o < plan.outputs; o += gridDim.x) {
    const T *row = in + plan.kept.offset(o);
    Acc acc = Ops::init(sink.isMax);
    for (int64_t r = begin + t; r < end; r += kRowThreads)
      acc = Ops::combine(sink.isMax, acc, Ops::load(row[r]));
    tree[t] = acc;
    __syncthreads();
    for (int half = kRowThreads / 2; half > 0; half /= 2) {
      if (t < half)
        tree[t] = Ops::combine(sink.isMax, tree[t], tree[t + half]);
      __syncthreads();
    }
    if (t == 0)
      sink.put(o, s, tree[0]);
    __syncthreads(); // tree[0] is read before the next output overwrites it
  }
}

/// Consecutive outputs are the contiguous direction: threadIdx.x over 32
/// outputs, threadIdx.y over kColY interleaved runs of the reduced range.
template <class T, class P>
__global__ void __launch_bounds__(kColX *kColY)
    reduceColKernel(const T *__restrict__ in, ReducePlan plan,
                    ReduceSink<T, P> sink) {
  using Ops = ReduceOps<T>;
  using Acc = typename Ops::Acc;
  __shared__ Acc tree[kColY][kColX];
  const int x = threadIdx.x, y = threadIdx.y;
  const int64_t s = blockIdx.y;
  const int64_t begin = s * sink.chunk;
  const int64_t end = min(plan.reduced, begin + sink.chunk);
  const int64_t tiles = (plan.outputs + kColX - 1) / kColX;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t o = tile * kColX + x;
    Acc acc = Ops::init(sink.isMax);
    if (o < plan.outputs) {
      const T *base = in + plan.kept.offset(o);
      for (int64_t r = begin + y; r < end; r += kColY)
        acc =
            Ops::combine(sink.isMax, acc, Ops::load(base[plan.red.offset(r)]));
    }
    tree[y][x] = acc;
    __syncthreads();
    for (int half = kColY / 2; half > 0; half /= 2) {
      if (y < half)
        tree[y][x] = Ops::combine(sink.isMax, tree[y][x], tree[y + half][x]);
      __syncthreads();
    }
    if (y == 0 && o < plan.outputs)
      sink.put(o, s, tree[0][x]);
    __syncthreads();
  }
}

/// Combines each output's splits in order and stores it.
template <class T, class P>
__global__ void reduceFinishKernel(ReduceSink<T, P> sink, int64_t outputs) {
  using Ops = ReduceOps<T>;
  for (int64_t o = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; o < outputs;
       o += int64_t(gridDim.x) * blockDim.x) {
    typename Ops::Acc acc = sink.partials[o * sink.splits];
    for (int64_t s = 1; s < sink.splits; ++s)
      acc = Ops::combine(sink.isMax, acc, sink.partials[o * sink.splits + s]);
    sink.store(o, acc);
  }
}

template <class T, class P = T>
void launchReduce(tessel_ctx *ctx, cudaStream_t stream, int32_t kind,
                  const void *in, void *out, const ReducePlan &plan) {
  using Acc = typename ReduceOps<T>::Acc;
  const char *what = "tessel_reduce";
  ReduceSink<T, P> sink{static_cast<P *>(out),
                     nullptr,
                     1,
                     plan.reduced,
                     kind == TESSEL_REDUCE_MAX,
                     kind == TESSEL_REDUCE_MEAN,
                     plan.reduced};
  ReduceSplit split = reduceSplit(plan);
  sink.splits = split.splits;
  sink.chunk = split.chunk;
  if (sink.splits > 1 &&
      !CudaBackend::check(
          ctx,
          cudaMallocAsync(reinterpret_cast<void **>(&sink.partials),
                          size_t(plan.outputs * sink.splits) * sizeof(Acc),
                          stream),
          "cudaMallocAsync of tessel_reduce's partials"))
    return;
  int64_t outBlocks =
      plan.rowMajor ? plan.outputs : (plan.outputs + kColX - 1) / kColX;
  dim3 grid(unsigned(std::min(outBlocks, kMaxGridX)), unsigned(sink.splits));
  if (plan.rowMajor)
    reduceRowKernel<T, P><<<grid, kRowThreads, 0, stream>>>(
        static_cast<const T *>(in), plan, sink);
  else
    reduceColKernel<T, P><<<grid, dim3(kColX, kColY), 0, stream>>>(
        static_cast<const T *>(in), plan, sink);
  if (CudaBackend::checkLaunch(ctx, what) && sink.splits > 1) {
    reduceFinishKernel<T, P>
        <<<gridFor(plan.outputs), 256, 0, stream>>>(sink, plan.outputs);
    CudaBackend::checkLaunch(ctx, what);
  }
  if (sink.partials)
    cudaFreeAsync(sink.partials, stream);
}

//===--- Embedding --------------------------------------------------------===//

/// out[i, :] = table[ids[i] - rowOffset, :] for ids in the block, zeros
/// otherwise; a row is `words` words of W.
template <class W, class Id>
__global__ void embeddingKernel(const W *__restrict__ table,
                                const Id *__restrict__ ids, W *__restrict__ out,
                                int64_t numIds, int64_t words, int64_t rows,
                                int64_t rowOffset, int64_t vocab,
                                DeviceError *errors) {
  for (int64_t i = blockIdx.x; i < numIds; i += gridDim.x) {
    int64_t id = int64_t(ids[i]);
    bool bad = id < 0 || id >= vocab;
    if (bad && threadIdx.x == 0)
      recordDeviceError(errors, DeviceErrorKind::EmbeddingId, id, i, vocab);
    int64_t local = id - rowOffset;
    bool here = !bad && local >= 0 && local < rows;
    W *dst = out + i * words;
    if (here) {
      const W *src = table + local * words;
      for (int64_t j = threadIdx.x; j < words; j += blockDim.x)
        dst[j] = src[j];
    } else {
      // Every dtype stores +0 as all-zero bits.
      for (int64_t j = threadIdx.x; j < words; j += blockDim.x)
        dst[j] = W{};
    }
  }
}

template <class W, class Id>
void launchEmbedding(tessel_ctx *ctx, cudaStream_t stream, const void *table,
                     const void *ids, void *out, int64_t numIds,
                     int64_t rowBytes, int64_t rows, int64_t rowOffset,
                     int64_t vocab, DeviceError *errors) {
  int64_t words = rowBytes / int64_t(sizeof(W));
  unsigned threads = unsigned(
      std::min<int64_t>(256, std::max<int64_t>(32, (words + 31) / 32 * 32)));
  unsigned blocks = unsigned(std::min<int64_t>(numIds, kMaxGridX));
  embeddingKernel<W, Id><<<blocks, threads, 0, stream>>>(
      static_cast<const W *>(table), static_cast<const Id *>(ids),
      static_cast<W *>(out), numIds, words, rows, rowOffset, vocab, errors);
  CudaBackend::checkLaunch(ctx, "tessel_embedding");
}

template <class Id>
void embeddingWords(tessel_ctx *ctx, cudaStream_t stream, const void *table,
                    const void *ids, void *out, int64_t numIds,
                    int64_t rowBytes, int64_t rows, int64_t rowOffset,
                    int64_t vocab, DeviceError *errors) {
  // The widest word dividing the row and both pointers (16-byte vector
  // loads on the aligned common case).
  uintptr_t align = uintptr_t(table) | uintptr_t(out) | uintptr_t(rowBytes);
  auto go = [&](auto word) {
    launchEmbedding<decltype(word), Id>(ctx, stream, table, ids, out, numIds,
                                        rowBytes, rows, rowOffset, vocab,
                                        errors);
  };
  if (align % 16 == 0)
    go(uint4{});
  else if (align % 8 == 0)
    go(uint2{});
  else if (align % 4 == 0)
    go(uint32_t{});
  else
    go(uint16_t{});
}

//===--- Embedding gradient -----------------------------------------------===//

/// keys[i] = ids[i]'s row in the block, or `rows` (sorts last, ignored) for
/// an id outside it; vals[i] = i. A bad id is recorded.
template <class Id, class Key, class Val>
__global__ void embeddingGradKeysKernel(const Id *__restrict__ ids, Key *keys,
                                        Val *vals, int64_t numIds, int64_t rows,
                                        int64_t rowOffset, int64_t vocab,
                                        DeviceError *errors) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < numIds;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t id = int64_t(ids[i]);
    if (id < 0 || id >= vocab)
      recordDeviceError(errors, DeviceErrorKind::EmbeddingGradId, id, i, vocab);
    int64_t local = id - rowOffset;
    bool here = id >= 0 && id < vocab && local >= 0 && local < rows;
    keys[i] = Key(here ? local : rows);
    vals[i] = Val(i);
  }
}

/// Block (x) per run start of the sorted keys, threads (and blockIdx.y) over
/// the columns: dtable[row, c] = Σ over the run, in position order, in
/// double, rounded once to P (T, or f32: tessel_embedding_grad_f32).
template <class T, class P, class Key, class Val>
__global__ void embeddingGradSumKernel(const Key *__restrict__ keys,
                                       const Val *__restrict__ positions,
                                       const T *__restrict__ dout,
                                       P *__restrict__ dtable, int64_t numIds,
                                       int64_t rows, int64_t hidden) {
  for (int64_t s = blockIdx.x; s < numIds; s += gridDim.x) {
    Key key = keys[s];
    if (int64_t(key) >= rows || (s > 0 && keys[s - 1] == key))
      continue;
    for (int64_t c = int64_t(blockIdx.y) * blockDim.x + threadIdx.x; c < hidden;
         c += int64_t(gridDim.y) * blockDim.x) {
      double acc = 0.0;
      for (int64_t j = s; j < numIds && keys[j] == key; ++j)
        acc += FloatElem<T>::load(dout[int64_t(positions[j]) * hidden + c]);
      dtable[int64_t(key) * hidden + c] = FloatElem<P>::store(acc);
    }
  }
}

size_t roundUp256(size_t bytes) { return (bytes + 255) / 256 * 256; }

template <class T, class P, class Id, class Key, class Val>
void launchEmbeddingGrad(tessel_ctx *ctx, cudaStream_t stream, const void *ids,
                         const void *dout, void *dtable, int64_t numIds,
                         int64_t rows, int64_t hidden, int64_t rowOffset,
                         int64_t vocab, DeviceError *errors) {
  const char *what = "tessel_embedding_grad";
  int endBit = 1; // bits of the largest key, `rows`
  while (endBit < int(8 * sizeof(Key)) && (uint64_t(rows) >> endBit) != 0)
    ++endBit;
  size_t sortBytes = 0;
  if (!CudaBackend::check(
          ctx,
          cub::DeviceRadixSort::SortPairs(
              nullptr, sortBytes, static_cast<const Key *>(nullptr),
              static_cast<Key *>(nullptr), static_cast<const Val *>(nullptr),
              static_cast<Val *>(nullptr), numIds, 0, endBit, stream),
          "cub::DeviceRadixSort (tessel_embedding_grad)"))
    return;
  size_t keyBytes = roundUp256(size_t(numIds) * sizeof(Key));
  size_t valBytes = roundUp256(size_t(numIds) * sizeof(Val));
  char *scratch = nullptr;
  if (!CudaBackend::check(ctx,
                          cudaMallocAsync(reinterpret_cast<void **>(&scratch),
                                          2 * (keyBytes + valBytes) + sortBytes,
                                          stream),
                          "cudaMallocAsync of tessel_embedding_grad's scratch"))
    return;
  Key *keysIn = reinterpret_cast<Key *>(scratch);
  Key *keysOut = reinterpret_cast<Key *>(scratch + keyBytes);
  Val *valsIn = reinterpret_cast<Val *>(scratch + 2 * keyBytes);
  Val *valsOut = reinterpret_cast<Val *>(scratch + 2 * keyBytes + valBytes);
  void *sortTemp = scratch + 2 * (keyBytes + valBytes);
  embeddingGradKeysKernel<Id, Key, Val><<<gridFor(numIds), 256, 0, stream>>>(
      static_cast<const Id *>(ids), keysIn, valsIn, numIds, rows, rowOffset,
      vocab, errors);
  // The radix sort is stable: equal rows keep their positions ascending.
  if (CudaBackend::checkLaunch(ctx, what) && rows > 0 && hidden > 0 &&
      CudaBackend::check(ctx,
                         cub::DeviceRadixSort::SortPairs(
                             sortTemp, sortBytes, keysIn, keysOut, valsIn,
                             valsOut, numIds, 0, endBit, stream),
                         "cub::DeviceRadixSort (tessel_embedding_grad)")) {
    int64_t columnBlocks = std::min<int64_t>((hidden + 255) / 256, 65535);
    dim3 grid(unsigned(std::min(numIds, kMaxGridX)), unsigned(columnBlocks));
    unsigned threads =
        unsigned(std::min<int64_t>(256, (hidden + 31) / 32 * 32));
    embeddingGradSumKernel<T, P, Key, Val><<<grid, threads, 0, stream>>>(
        keysOut, valsOut, static_cast<const T *>(dout),
        static_cast<P *>(dtable), numIds, rows, hidden);
    CudaBackend::checkLaunch(ctx, what);
  }
  cudaFreeAsync(scratch, stream);
}

} // namespace

void CudaBackend::fill(tessel_ctx *ctx, void *out, int64_t count,
                       int64_t elementBytes, uint64_t bits) {
  switch (elementBytes) {
  case 1:
    check(ctx, cudaMemsetAsync(out, int(bits & 0xff), size_t(count), stream()),
          "tessel_fill");
    break;
  case 2:
    launchFill<uint16_t>(ctx, stream(), out, count, bits);
    break;
  case 4:
    launchFill<uint32_t>(ctx, stream(), out, count, bits);
    break;
  default:
    launchFill<uint64_t>(ctx, stream(), out, count, bits);
    break;
  }
}

void CudaBackend::stridedCopy(tessel_ctx *ctx, int32_t dtype, const void *in,
                              void *out, int32_t rank, const int64_t *hostShape,
                              const int64_t *hostInStrides,
                              const int64_t *hostOutStrides) {
  std::vector<Dim> dims;
  for (int32_t d = 0; d < rank; ++d)
    dims.push_back({hostShape[d], hostInStrides[d], hostOutStrides[d]});
  dims = coalesce(dims);
  int64_t es = tessel_dtype_size(dtype);
  if (dims.size() == 1 && dims[0].a == 1 && dims[0].b == 1) {
    check(ctx,
          cudaMemcpyAsync(out, in, size_t(dims[0].size * es),
                          cudaMemcpyDeviceToDevice, stream()),
          "tessel_strided_copy");
    return;
  }
  // The kernel only moves words: one instantiation per element size.
  if (es == 2)
    launchStridedCopy<uint16_t>(ctx, stream(), in, out, dims);
  else if (es == 4)
    launchStridedCopy<uint32_t>(ctx, stream(), in, out, dims);
  else
    launchStridedCopy<uint64_t>(ctx, stream(), in, out, dims);
}

void CudaBackend::reduce(tessel_ctx *ctx, int32_t kind, int32_t dtype,
                         int32_t outDtype, const void *in, void *out,
                         int32_t rank, const int64_t *hostShape,
                         uint64_t reduceMask) {
  ReducePlan plan;
  if (!planReduce(rank, hostShape, reduceMask, plan)) {
    // Kept and reduced dimensions interleave beyond kMaxDims each: move the
    // reduced ones innermost (order kept), then reduce [kept, reduced].
    std::vector<int64_t> shape, inStrides;
    std::vector<int64_t> outStrides(static_cast<size_t>(rank));
    std::vector<int64_t> rowMajor(static_cast<size_t>(rank));
    int64_t total = 1;
    for (int32_t d = rank - 1; d >= 0; --d) {
      rowMajor[size_t(d)] = total;
      total *= hostShape[d];
    }
    for (int pass = 0; pass < 2; ++pass)
      for (int32_t d = 0; d < rank; ++d)
        if (((reduceMask >> d) & 1) == uint64_t(pass)) {
          shape.push_back(hostShape[d]);
          inStrides.push_back(rowMajor[size_t(d)]);
        }
    for (int64_t d = rank - 1, s = 1; d >= 0; --d) {
      outStrides[size_t(d)] = s;
      s *= shape[size_t(d)];
    }
    int32_t reducedCount = __builtin_popcountll(reduceMask);
    uint64_t innerMask = ((uint64_t(1) << reducedCount) - 1)
                         << (rank - reducedCount);
    void *moved = nullptr;
    if (total > 0) {
      if (!check(ctx,
                 cudaMallocAsync(&moved,
                                 size_t(total * tessel_dtype_size(dtype)),
                                 stream()),
                 "cudaMallocAsync of tessel_reduce's transpose"))
        return;
      stridedCopy(ctx, dtype, in, moved, rank, shape.data(), inStrides.data(),
                  outStrides.data());
    }
    reduce(ctx, kind, dtype, outDtype, moved, out, rank, shape.data(),
           innerMask);
    if (moved)
      cudaFreeAsync(moved, stream());
    return;
  }
  switch (dtype) {
  case TESSEL_I32:
    launchReduce<int32_t>(ctx, stream(), kind, in, out, plan);
    return;
  case TESSEL_I64:
    launchReduce<int64_t>(ctx, stream(), kind, in, out, plan);
    return;
  default:
    stored::visitFloatWidened(dtype, outDtype, [&](auto tag, auto result) {
      launchReduce<decltype(tag), decltype(result)>(ctx, stream(), kind, in,
                                                    out, plan);
    });
    return;
  }
}

void CudaBackend::embedding(tessel_ctx *ctx, int32_t dtype, int32_t idsDtype,
                            const void *table, const void *ids, void *out,
                            int64_t numIds, int64_t rows, int64_t hidden,
                            int64_t rowOffset, int64_t vocab) {
  if (numIds == 0)
    return;
  int64_t rowBytes = hidden * tessel_dtype_size(dtype);
  if (idsDtype == TESSEL_I32)
    embeddingWords<int32_t>(ctx, stream(), table, ids, out, numIds, rowBytes,
                            rows, rowOffset, vocab, deviceErrors());
  else
    embeddingWords<int64_t>(ctx, stream(), table, ids, out, numIds, rowBytes,
                            rows, rowOffset, vocab, deviceErrors());
}

void CudaBackend::embeddingGrad(tessel_ctx *ctx, int32_t dtype,
                                int32_t tableDtype, int32_t idsDtype,
                                const void *ids, const void *dout, void *dtable,
                                int64_t numIds, int64_t rows, int64_t hidden,
                                int64_t rowOffset, int64_t vocab) {
  // Overwritten, not accumulated (as the CPU backend): rows no id names
  // stay zero.
  int64_t bytes = rows * hidden * tessel_dtype_size(tableDtype);
  if (bytes > 0 &&
      !check(ctx, cudaMemsetAsync(dtable, 0, size_t(bytes), stream()),
             "tessel_embedding_grad"))
    return;
  if (numIds == 0)
    return;
  // 32-bit keys and positions whenever they fit (half the sort's passes).
  bool narrow = numIds < (int64_t(1) << 31) && rows < (int64_t(1) << 32) - 1;
  // The table in f32 for tessel_embedding_grad_f32.
  stored::visitFloatWidened(dtype, tableDtype, [&](auto tag, auto table) {
    using T = decltype(tag);
    using P = decltype(table);
    auto go = [&](auto id) {
      using Id = decltype(id);
      if (narrow)
        launchEmbeddingGrad<T, P, Id, uint32_t, int32_t>(
            ctx, stream(), ids, dout, dtable, numIds, rows, hidden, rowOffset,
            vocab, deviceErrors());
      else
        launchEmbeddingGrad<T, P, Id, uint64_t, int64_t>(
            ctx, stream(), ids, dout, dtable, numIds, rows, hidden, rowOffset,
            vocab, deviceErrors());
    };
    if (idsDtype == TESSEL_I32)
      go(int32_t());
    else
      go(int64_t());
  });
}
