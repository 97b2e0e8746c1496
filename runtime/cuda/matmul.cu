//===- matmul.cu - GEMMs through cuBLASLt ---------------------------------===//
//
// tessel_matmul and the fused-epilogue GEMM of matmul.h on cuBLASLt, with
// the row-major to column-major swap of ltGemmLayout. f32 computes in f32
// (TF32 tensor cores only when TESSEL_ALLOW_TF32=1, read once), f16 and
// bf16 are stored in 16 bits and accumulate in f32, f64 in f64.
//
// A GEMM's descriptors and the algorithm cuBLASLt's heuristic picks cost
// microseconds to build, so they are cached per (backend, device, dtype,
// shape, transposes, batch, epilogue, pointer alignments). The backend has
// no member for it (backend.h is shared): the cache is thread_local, keyed
// also by the backend. Ranks are threads, one backend each, so a cache is
// only ever touched by its own thread (no locks); a backend destroyed and
// another created at the same address on the same device finds entries
// that are still valid (nothing in them refers to the backend's handle or
// memory; the epilogue pointers are set on every call).
//
//===----------------------------------------------------------------------===//

#include "cuda/matmul.h"
#include "core/storage.h"

#include "cuda/backend.h"

#include "core/context.h"

#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>

using namespace tessel;
using namespace tessel::cuda;

namespace {

/// cuBLASLt batch counts are int32; a larger batch runs in chunks (a
/// conservative bound, far above any real batch of matrices).
constexpr int64_t kMaxLtBatch = 65535;

bool allowTf32() {
  static const bool allowed = [] {
    const char *v = std::getenv("TESSEL_ALLOW_TF32");
    return v && std::strcmp(v, "1") == 0;
  }();
  return allowed;
}

/// The largest power of two (<= 256, cuBLASLt's default requirement) that
/// divides the pointer and, for strided batches, every batch's start.
uint32_t alignmentOf(const void *p, int64_t batchStrideBytes) {
  uintptr_t v = uintptr_t(p) | uintptr_t(batchStrideBytes);
  uint32_t align = 256;
  while (align > 1 && (v % align) != 0)
    align /= 2;
  return align;
}

/// One cached GEMM: its cuBLASLt objects and chosen algorithm.
struct LtPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t x = nullptr, y = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  /// cuBLASLt has no kernel for this epilogue here (BGRADA with a
  /// transposed dY, say): the GEMM and its epilogue run apart. Remembered
  /// so the heuristic is asked once.
  bool epilogueUnsupported = false;

  ~LtPlan() {
    if (d)
      cublasLtMatrixLayoutDestroy(d);
    if (y)
      cublasLtMatrixLayoutDestroy(y);
    if (x)
      cublasLtMatrixLayoutDestroy(x);
    if (desc)
      cublasLtMatmulDescDestroy(desc);
  }
};

using PlanKey = std::array<int64_t, 21>;

/// This thread's plans; emptied when it grows past kMaxPlans (a model has
/// a few dozen distinct GEMMs, so that only happens with varying shapes).
struct PlanCache {
  static constexpr size_t kMaxPlans = 512;
  std::map<PlanKey, std::unique_ptr<LtPlan>> plans;
};
thread_local PlanCache planCache;

struct LtTypes {
  cudaDataType_t data, scale;
  cublasComputeType_t compute;
};

LtTypes ltTypes(int32_t dtype) {
  switch (dtype) {
  case TESSEL_F64:
    return {CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F};
  case TESSEL_F16:
    return {CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F};
  case TESSEL_BF16:
    return {CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F};
  default:
    return {CUDA_R_32F, CUDA_R_32F,
            allowTf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F};
  }
}

cublasLtEpilogue_t ltEpilogue(GemmEpilogue e, bool hasAux) {
  switch (e) {
  case GemmEpilogue::Bias:
    return CUBLASLT_EPILOGUE_BIAS;
  case GemmEpilogue::GeluBias:
    return hasAux ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                  : CUBLASLT_EPILOGUE_GELU_BIAS;
  case GemmEpilogue::DGelu:
    return CUBLASLT_EPILOGUE_DGELU;
  case GemmEpilogue::BGradB:
    // Our B is cuBLASLt's A: its bias gradient has D's rows (our N).
    return CUBLASLT_EPILOGUE_BGRADA;
  case GemmEpilogue::None:
    break;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

/// Records "tessel_matmul: cuBLASLt <what> failed (status N)" unless ok.
bool ltOk(tessel_ctx *ctx, cublasStatus_t status, const char *what) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return true;
  setError(ctx, "tessel_matmul: cuBLASLt %s failed (status %d)", what,
           int(status));
  return false;
}

template <class V>
cublasStatus_t setDesc(cublasLtMatmulDesc_t desc,
                       cublasLtMatmulDescAttributes_t attr, const V &value) {
  return cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(V));
}

bool makeLayout(tessel_ctx *ctx, cublasLtMatrixLayout_t &layout,
                cudaDataType_t type, const LtMatrix &m, int64_t batch) {
  if (!ltOk(ctx,
            cublasLtMatrixLayoutCreate(&layout, type, uint64_t(m.rows),
                                       uint64_t(m.cols), m.ld),
            "cublasLtMatrixLayoutCreate"))
    return false;
  if (batch == 1)
    return true;
  int32_t count = int32_t(batch);
  return ltOk(ctx,
              cublasLtMatrixLayoutSetAttribute(
                  layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                  sizeof(count)),
              "cublasLtMatrixLayoutSetAttribute") &&
         ltOk(ctx,
              cublasLtMatrixLayoutSetAttribute(
                  layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                  &m.batchStride, sizeof(m.batchStride)),
              "cublasLtMatrixLayoutSetAttribute");
}

/// The plan of one GEMM (`batch` of the layout's strided batches), built
/// and its algorithm chosen on first use; null with the error recorded.
LtPlan *planFor(CudaBackend &backend, tessel_ctx *ctx, const GemmArgs &args,
                const LtGemmLayout &l, int64_t batch, const void *x,
                const void *y, void *d) {
  int64_t es = tessel_dtype_size(args.dtype);
  int32_t outDtype = args.outDtype < 0 ? args.dtype : args.outDtype;
  uint32_t ax = alignmentOf(x, batch > 1 ? l.x.batchStride * es : 0);
  uint32_t ay = alignmentOf(y, batch > 1 ? l.y.batchStride * es : 0);
  uint32_t ad = alignmentOf(
      d, batch > 1 ? l.d.batchStride * tessel_dtype_size(outDtype) : 0);
  uint32_t aBias = alignmentOf(args.bias ? args.bias : args.biasGrad, 0);
  uint32_t aAux = alignmentOf(args.aux, 0);
  LtTypes types = ltTypes(args.dtype);
  PlanKey key = {int64_t(reinterpret_cast<uintptr_t>(&backend)),
                 backend.device(),
                 args.dtype,
                 outDtype,
                 int64_t(types.compute),
                 l.m,
                 l.n,
                 l.k,
                 batch,
                 int64_t(l.transX) | int64_t(l.transY) << 1,
                 l.x.batchStride,
                 l.y.batchStride,
                 int64_t(args.epilogue),
                 args.aux != nullptr,
                 ax,
                 ay,
                 ad,
                 aBias,
                 aAux,
                 l.x.ld,
                 l.y.ld};
  auto &plans = planCache.plans;
  auto found = plans.find(key);
  if (found != plans.end())
    return found->second.get();
  if (plans.size() >= PlanCache::kMaxPlans)
    plans.clear();

  auto plan = std::make_unique<LtPlan>();
  cublasOperation_t opX = l.transX ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opY = l.transY ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = ltEpilogue(args.epilogue, args.aux != nullptr);
  if (!ltOk(ctx,
            cublasLtMatmulDescCreate(&plan->desc, types.compute, types.scale),
            "cublasLtMatmulDescCreate") ||
      !ltOk(ctx, setDesc(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, opX),
            "cublasLtMatmulDescSetAttribute") ||
      !ltOk(ctx, setDesc(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, opY),
            "cublasLtMatmulDescSetAttribute") ||
      !ltOk(ctx, setDesc(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue),
            "cublasLtMatmulDescSetAttribute"))
    return nullptr;
  if (args.aux) {
    // D's leading dimension and batch stride (our N and M·N).
    if (!ltOk(ctx,
              setDesc(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, l.d.ld),
              "cublasLtMatmulDescSetAttribute") ||
        !ltOk(ctx,
              setDesc(plan->desc,
                      CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE,
                      l.d.batchStride),
              "cublasLtMatmulDescSetAttribute"))
      return nullptr;
  }
  if (!makeLayout(ctx, plan->x, types.data, l.x, batch) ||
      !makeLayout(ctx, plan->y, types.data, l.y, batch) ||
      !makeLayout(ctx, plan->d, ltTypes(outDtype).data, l.d, batch))
    return nullptr;

  // The heuristic reads the epilogue pointers' alignment from the
  // descriptor: set them before asking.
  const void *biasPointer = args.bias ? args.bias : args.biasGrad;
  if ((biasPointer &&
       !ltOk(
           ctx,
           setDesc(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, biasPointer),
           "cublasLtMatmulDescSetAttribute")) ||
      (args.aux &&
       !ltOk(ctx,
             setDesc(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                     args.aux),
             "cublasLtMatmulDescSetAttribute")))
    return nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  if (!ltOk(ctx, cublasLtMatmulPreferenceCreate(&pref),
            "cublasLtMatmulPreferenceCreate"))
    return nullptr;
  size_t workspace = CudaBackend::kLtWorkspaceBytes;
  auto setPref = [&](cublasLtMatmulPreferenceAttributes_t attr, const auto &v) {
    return cublasLtMatmulPreferenceSetAttribute(pref, attr, &v, sizeof(v));
  };
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  cublasStatus_t heuristic = CUBLAS_STATUS_SUCCESS;
  bool ok =
      ltOk(ctx, setPref(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, workspace),
           "cublasLtMatmulPreferenceSetAttribute") &&
      ltOk(ctx, setPref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, ax),
           "cublasLtMatmulPreferenceSetAttribute") &&
      ltOk(ctx, setPref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, ay),
           "cublasLtMatmulPreferenceSetAttribute") &&
      ltOk(ctx, setPref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, ad),
           "cublasLtMatmulPreferenceSetAttribute") &&
      ltOk(ctx, setPref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, ad),
           "cublasLtMatmulPreferenceSetAttribute") &&
      ((heuristic = cublasLtMatmulAlgoGetHeuristic(
            backend.blasLt(), plan->desc, plan->x, plan->y, plan->d, plan->d,
            pref, 1, &result, &returned)) == CUBLAS_STATUS_NOT_SUPPORTED ||
       ltOk(ctx, heuristic, "cublasLtMatmulAlgoGetHeuristic"));
  cublasLtMatmulPreferenceDestroy(pref);
  if (!ok)
    return nullptr;
  bool none = heuristic == CUBLAS_STATUS_NOT_SUPPORTED || returned == 0;
  if (none && args.epilogue != GemmEpilogue::None) {
    plan->epilogueUnsupported = true;
    return plans.emplace(key, std::move(plan)).first->second.get();
  }
  if (none) {
    setError(ctx,
             "tessel_matmul: cuBLASLt has no algorithm for this GEMM "
             "(status %d)",
             int(CUBLAS_STATUS_NOT_SUPPORTED));
    return nullptr;
  }
  plan->algo = result.algo;
  return plans.emplace(key, std::move(plan)).first->second.get();
}

} // namespace

GemmResult tessel::cuda::gemm(CudaBackend &backend, tessel_ctx *ctx,
                              const GemmArgs &given) {
  if (given.batch == 0 || given.m == 0 || given.n == 0)
    return GemmResult::Done;
  // Only the epilogue's own pointers reach the descriptor.
  GemmArgs args = given;
  GemmEpilogue e = args.epilogue;
  if (e != GemmEpilogue::Bias && e != GemmEpilogue::GeluBias)
    args.bias = nullptr;
  if (e != GemmEpilogue::GeluBias && e != GemmEpilogue::DGelu)
    args.aux = nullptr;
  if (e != GemmEpilogue::BGradB)
    args.biasGrad = nullptr;
  int64_t es = tessel_dtype_size(args.dtype);
  int64_t outEs =
      tessel_dtype_size(args.outDtype < 0 ? args.dtype : args.outDtype);
  if (args.k == 0) {
    // The empty sum: C = beta·C (the front's matmul: beta 0, C = 0).
    if (args.epilogue != GemmEpilogue::None ||
        (args.beta != 0.0 && args.beta != 1.0)) {
      setError(ctx, "tessel_matmul: k = 0 with an epilogue or beta %g",
               args.beta);
      return GemmResult::Failed;
    }
    if (args.beta == 0.0)
      return CudaBackend::check(ctx,
                                cudaMemsetAsync(args.c, 0,
                                                size_t(args.batch * args.m *
                                                       args.n * outEs),
                                                backend.stream()),
                                "tessel_matmul")
                 ? GemmResult::Done
                 : GemmResult::Failed;
    return GemmResult::Done;
  }
  bool needsBias = args.epilogue == GemmEpilogue::Bias ||
                   args.epilogue == GemmEpilogue::GeluBias;
  if ((needsBias && !args.bias) ||
      (args.epilogue == GemmEpilogue::DGelu && !args.aux) ||
      (args.epilogue == GemmEpilogue::BGradB && !args.biasGrad)) {
    setError(ctx, "tessel_matmul: epilogue %d without its vector or aux",
             int(args.epilogue));
    return GemmResult::Failed;
  }
  LtGemmLayout l = ltGemmLayout(args.batch, args.m, args.n, args.k, args.transA,
                                args.transB, args.bShared);
  if (args.aux && l.d.ld % 8 != 0) {
    setError(ctx,
             "tessel_matmul: a GELU epilogue's N (%lld) must be a "
             "multiple of 8",
             (long long)args.n);
    return GemmResult::Failed;
  }
  if (args.epilogue == GemmEpilogue::BGradB && l.batch != 1) {
    setError(ctx, "tessel_matmul: a bias-gradient epilogue on a batch of %lld",
             (long long)l.batch);
    return GemmResult::Failed;
  }
  // alpha and beta in the scale type (host memory, cuBLASLt's default).
  float alpha32 = 1.0f, beta32 = float(args.beta);
  double alpha64 = 1.0, beta64 = args.beta;
  bool wide = args.dtype == TESSEL_F64;
  const void *alpha = wide ? static_cast<const void *>(&alpha64) : &alpha32;
  const void *beta = wide ? static_cast<const void *>(&beta64) : &beta32;
  const char *x = static_cast<const char *>(args.b);
  const char *y = static_cast<const char *>(args.a);
  char *d = static_cast<char *>(args.c);
  char *aux = static_cast<char *>(args.aux);
  for (int64_t first = 0; first < l.batch; first += kMaxLtBatch) {
    int64_t count = std::min(kMaxLtBatch, l.batch - first);
    const char *xi = x + first * l.x.batchStride * es;
    const char *yi = y + first * l.y.batchStride * es;
    char *di = d + first * l.d.batchStride * outEs;
    char *auxi = aux ? aux + first * l.d.batchStride * es : nullptr;
    GemmArgs chunk = args;
    chunk.aux = auxi;
    LtPlan *plan = planFor(backend, ctx, chunk, l, count, xi, yi, di);
    if (!plan)
      return GemmResult::Failed;
    if (plan->epilogueUnsupported) {
      if (first == 0)
        return GemmResult::EpilogueUnsupported;
      setError(ctx, "tessel_matmul: cuBLASLt has no kernel for epilogue %d "
               "on the last chunk of a batch", int(args.epilogue));
      return GemmResult::Failed;
    }
    const void *biasPointer = args.bias ? args.bias : args.biasGrad;
    if ((biasPointer &&
         !ltOk(ctx,
               setDesc(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                       biasPointer),
               "cublasLtMatmulDescSetAttribute")) ||
        (auxi &&
         !ltOk(ctx,
               setDesc(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                       static_cast<void *>(auxi)),
               "cublasLtMatmulDescSetAttribute")))
      return GemmResult::Failed;
    if (!ltOk(ctx,
              cublasLtMatmul(backend.blasLt(), plan->desc, alpha, xi, plan->x,
                             yi, plan->y, beta, di, plan->d, di, plan->d,
                             &plan->algo, backend.ltWorkspace(),
                             CudaBackend::kLtWorkspaceBytes, backend.stream()),
              "cublasLtMatmul"))
      return GemmResult::Failed;
  }
  return GemmResult::Done;
}

namespace {

/// The GEMM of a tessel_matmul_* call, without an epilogue.
GemmArgs callGemm(int32_t dtype, const void *a, const void *b, void *c,
                  int64_t batch, int64_t m, int64_t n, int64_t k, bool transA,
                  bool transB, bool bShared, double beta) {
  GemmArgs args;
  args.dtype = dtype;
  args.a = a;
  args.b = b;
  args.c = c;
  args.batch = batch;
  args.m = m;
  args.n = n;
  args.k = k;
  args.transA = transA;
  args.transB = transB;
  args.bShared = bShared;
  args.beta = beta;
  return args;
}

} // namespace

void CudaBackend::matmul(tessel_ctx *ctx, int32_t dtype, const void *a,
                         const void *b, void *c, int64_t batch, int64_t m,
                         int64_t n, int64_t k, bool transA, bool transB,
                         bool bShared) {
  matmulEpilogue(ctx, dtype, a, b, c, batch, m, n, k, transA, transB, bShared,
                 /*beta=*/0.0, TESSEL_EPILOGUE_NONE, /*bias=*/nullptr,
                 /*aux=*/nullptr);
}

void CudaBackend::matmulEpilogue(tessel_ctx *ctx, int32_t dtype, const void *a,
                                 const void *b, void *c, int64_t batch,
                                 int64_t m, int64_t n, int64_t k, bool transA,
                                 bool transB, bool bShared, double beta,
                                 int32_t epilogue, const void *bias,
                                 void *aux) {
  const bool gelu = epilogue == TESSEL_EPILOGUE_GELU_BIAS ||
                    epilogue == TESSEL_EPILOGUE_DGELU;
  const bool biasGrad = epilogue == TESSEL_EPILOGUE_BGRADB;
  // cuBLASLt's aux epilogues take 16-bit and f32 GEMMs; the GELU's aux
  // needs a leading dimension N that is a multiple of 8, 16-byte aligned.
  // Elsewhere (and for an empty product's bias gradient) the GEMM and the
  // other kernel run apart.
  const bool misaligned =
      aux && (reinterpret_cast<uintptr_t>(aux) % 16 != 0 ||
              (gelu && n % 8 != 0));
  if ((gelu || biasGrad) &&
      (dtype == TESSEL_F64 || misaligned || (biasGrad && m == 0))) {
    matmulEpilogueByParts(ctx, dtype, a, b, c, batch, m, n, k, transA, transB,
                          bShared, beta, epilogue, bias, aux);
    return;
  }
  GemmArgs args = callGemm(dtype, a, b, c, batch, m, n, k, transA, transB,
                           bShared, beta);
  // The ABI's kinds are gemm()'s (checked by the front); gemm() passes on
  // only the pointers its epilogue reads or writes.
  static_assert(int(GemmEpilogue::Bias) == TESSEL_EPILOGUE_BIAS &&
                int(GemmEpilogue::GeluBias) == TESSEL_EPILOGUE_GELU_BIAS &&
                int(GemmEpilogue::DGelu) == TESSEL_EPILOGUE_DGELU &&
                int(GemmEpilogue::BGradB) == TESSEL_EPILOGUE_BGRADB);
  args.epilogue = GemmEpilogue(epilogue);
  args.bias = bias;
  args.aux = aux;
  args.biasGrad = aux;
  if (gemm(*this, ctx, args) == GemmResult::EpilogueUnsupported)
    matmulEpilogueByParts(ctx, dtype, a, b, c, batch, m, n, k, transA, transB,
                          bShared, beta, epilogue, bias, aux);
}

namespace {

constexpr unsigned kSumThreads = 256;

/// sums[j] = Σ_r op(B)[r, j] in f32, in row order, op(B) [k, n] (B stored
/// [n, k] when transposed); one thread a column: adjacent threads read
/// adjacent columns of a row.
template <class T>
__global__ void columnSumsF32Kernel(const T *b, float *sums, int64_t k,
                                    int64_t n, bool transposed) {
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < n;
       j += int64_t(gridDim.x) * blockDim.x) {
    float sum = 0.0f;
    for (int64_t r = 0; r < k; ++r)
      sum = stored::addRn(sum, stored::Elem<T>::load(
                                   transposed ? b[j * k + r] : b[r * n + j]));
    sums[j] = sum;
  }
}

} // namespace

// cuBLASLt with f32 C and D under 16-bit A and B, beta 1 (accumulate) or
// 0 (overwrite); its BGRADB epilogue writes the bias gradient in D's type.
// Where it has no kernel for that (or M = 0, where it runs none) the GEMM
// runs alone and a kernel of ours sums the columns.
void CudaBackend::matmulF32(tessel_ctx *ctx, int32_t dtype, const void *a,
                            const void *b, void *c, int64_t batch, int64_t m,
                            int64_t n, int64_t k, bool transA, bool transB,
                            bool bShared, double beta, int32_t epilogue,
                            void *aux) {
  const bool biasGrad = epilogue == TESSEL_EPILOGUE_BGRADB;
  GemmArgs args = callGemm(dtype, a, b, c, batch, m, n, k, transA, transB,
                           bShared, beta);
  args.outDtype = TESSEL_F32;
  bool fused = biasGrad && m > 0 && reinterpret_cast<uintptr_t>(aux) % 16 == 0;
  if (fused) {
    args.epilogue = GemmEpilogue::BGradB;
    args.biasGrad = aux;
  }
  GemmResult result = gemm(*this, ctx, args);
  if (result == GemmResult::EpilogueUnsupported) {
    fused = false;
    args.epilogue = GemmEpilogue::None;
    args.biasGrad = nullptr;
    result = gemm(*this, ctx, args);
  }
  if (result != GemmResult::Done || !biasGrad || fused || n == 0)
    return;
  const char *what =
      beta == 0.0 ? "tessel_matmul_f32" : "tessel_matmul_accumulate_f32";
  if (dtype == TESSEL_BF16)
    columnSumsF32Kernel<<<gridFor(n, kSumThreads), kSumThreads, 0,
                          stream()>>>(
        static_cast<const stored::BFloat *>(b), static_cast<float *>(aux), k,
        n, transB);
  else
    columnSumsF32Kernel<<<gridFor(n, kSumThreads), kSumThreads, 0,
                          stream()>>>(
        static_cast<const stored::Half *>(b), static_cast<float *>(aux), k, n,
        transB);
  checkLaunch(ctx, what);
}
