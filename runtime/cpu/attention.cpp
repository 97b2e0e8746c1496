//===- attention.cpp - Multi-head attention with grouped KV heads ---------===//
//
// Per (batch, head): S = scale · Q·Kᵀ and O = softmax(S)·V as two GEMMs. The
// head slices are strided views of the [B, S, H, D] layout, which BLAS reads
// through its leading dimensions without any copy.
//
//===----------------------------------------------------------------------===//

#include "internal.h"

#include <algorithm>
#include <climits>
#include <vector>

using namespace tessel::cpu;

namespace {

template <class R>
void attentionReal(const R *q, const R *k, const R *v, R *o, int64_t batch,
                   int64_t seq, int64_t kvSeq, int64_t heads, int64_t kvHeads,
                   int64_t dim, int64_t vdim, double scale, bool causal) {
  int64_t group = heads / kvHeads;
  int ldq = int(heads * dim), ldk = int(kvHeads * dim);
  int ldv = int(kvHeads * vdim), ldo = int(heads * vdim);
  std::vector<R> p(static_cast<size_t>(seq * kvSeq));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      int64_t hk = h / group;
      const R *qb = q + (b * seq * heads + h) * dim;
      const R *kb = k + (b * kvSeq * kvHeads + hk) * dim;
      const R *vb = v + (b * kvSeq * kvHeads + hk) * vdim;
      R *ob = o + (b * seq * heads + h) * vdim;
      if (dim > 0)
        gemm(false, true, int(seq), int(kvSeq), int(dim), R(scale), qb,
             std::max(ldq, 1), kb, std::max(ldk, 1), p.data(), int(kvSeq));
      else
        std::fill(p.begin(), p.end(), R(0)); // Empty dot products.
      for (int64_t i = 0; i < seq; ++i) {
        R *row = p.data() + i * kvSeq;
        int64_t limit = causal ? std::min(i + 1, kvSeq) : kvSeq;
        R mx = -std::numeric_limits<R>::infinity();
        for (int64_t j = 0; j < limit; ++j)
          mx = std::max(mx, row[j]);
        double sum = 0.0;
        for (int64_t j = 0; j < limit; ++j) {
          row[j] = std::exp(row[j] - mx);
          sum += double(row[j]);
        }
        R inv = R(1.0 / sum);
        for (int64_t j = 0; j < limit; ++j)
          row[j] *= inv;
        // Masked keys get exactly zero weight.
        std::fill(row + limit, row + kvSeq, R(0));
      }
      gemm(false, false, int(seq), int(vdim), int(kvSeq), R(1), p.data(),
           int(kvSeq), vb, std::max(ldv, 1), ob, std::max(ldo, 1));
    }
  }
}

} // namespace

extern "C" void tessel_attention(tessel_ctx *ctx, int32_t dtype, const void *q,
                                 const void *k, const void *v, void *out,
                                 int64_t batch, int64_t seq, int64_t kv_seq,
                                 int64_t heads, int64_t kv_heads,
                                 int64_t head_dim, int64_t value_dim,
                                 double scale, int32_t causal) {
  KernelScope scope(ctx);
  if (!visitFloat(dtype, [](auto) {})) {
    setError(ctx, "tessel_attention: unsupported dtype %d", dtype);
    return;
  }
  if (batch < 0 || seq < 0 || kv_seq < 0 || heads < 0 || head_dim < 0 ||
      value_dim < 0 || kv_heads <= 0 || heads % kv_heads != 0) {
    setError(ctx, "tessel_attention: bad shape (heads %lld, kv_heads %lld)",
             (long long)heads, (long long)kv_heads);
    return;
  }
  if (seq * kv_seq > INT_MAX || heads * head_dim > INT_MAX ||
      heads * value_dim > INT_MAX) {
    setError(ctx, "tessel_attention: dimension beyond BLAS int range");
    return;
  }
  int64_t outCount = batch * seq * heads * value_dim;
  if (outCount == 0)
    return;
  if (kv_seq == 0) {
    // No keys: every weighted sum is empty.
    std::memset(out, 0, size_t(outCount * tessel_dtype_size(dtype)));
    return;
  }
  bool c = causal != 0;
  switch (dtype) {
  case TESSEL_F32:
    attentionReal(static_cast<const float *>(q), static_cast<const float *>(k),
                  static_cast<const float *>(v), static_cast<float *>(out),
                  batch, seq, kv_seq, heads, kv_heads, head_dim, value_dim,
                  scale, c);
    return;
  case TESSEL_F64:
    attentionReal(static_cast<const double *>(q),
                  static_cast<const double *>(k),
                  static_cast<const double *>(v), static_cast<double *>(out),
                  batch, seq, kv_seq, heads, kv_heads, head_dim, value_dim,
                  scale, c);
    return;
  default:
    break;
  }
  visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    std::vector<float> fq = widen<T>(q, batch * seq * heads * head_dim);
    std::vector<float> fk = widen<T>(k, batch * kv_seq * kv_heads * head_dim);
    std::vector<float> fv = widen<T>(v, batch * kv_seq * kv_heads * value_dim);
    std::vector<float> fo(static_cast<size_t>(outCount));
    attentionReal(fq.data(), fk.data(), fv.data(), fo.data(), batch, seq,
                  kv_seq, heads, kv_heads, head_dim, value_dim, scale, c);
    T *o = static_cast<T *>(out);
    for (int64_t i = 0; i < outCount; ++i)
      o[i] = Elem<T>::store(fo[size_t(i)]);
  });
}
