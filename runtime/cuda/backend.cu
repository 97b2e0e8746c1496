//===- backend.cu - The CUDA backend's factory, memory and streams --------===//

#include "cuda/backend.h"
#include "cuda/plugin.h"

#include "core/collective.h"
#include "core/context.h"

#include <chrono>
#include <new>
#include <thread>

using namespace tessel;
using namespace tessel::cuda;

bool CudaBackend::check(tessel_ctx *ctx, cudaError_t status, const char *what) {
  if (status == cudaSuccess)
    return true;
  setError(ctx, "cuda: %s failed: %s", what, cudaGetErrorString(status));
  return false;
}

bool CudaBackend::checkLaunch(tessel_ctx *ctx, const char *what) {
  return check(ctx, cudaGetLastError(), what);
}

bool CudaBackend::init(int32_t device, std::string &error) {
  auto fail = [&](const char *what, cudaError_t status) {
    error = std::string("tessel_ctx_create: cuda ") + what + " on device " +
            std::to_string(device) + ": " + cudaGetErrorString(status);
    return false;
  };
  int count = 0;
  if (cudaError_t status = cudaGetDeviceCount(&count); status != cudaSuccess)
    return fail("cudaGetDeviceCount", status);
  if (device < 0 || device >= count) {
    error = "tessel_ctx_create: cuda device " + std::to_string(device) +
            " does not exist (" + std::to_string(count) + " visible)";
    return false;
  }
  deviceOrdinal = device;
  if (cudaError_t status = cudaSetDevice(device); status != cudaSuccess)
    return fail("cudaSetDevice", status);
  if (cudaError_t status =
          cudaStreamCreateWithFlags(&computeStream, cudaStreamNonBlocking);
      status != cudaSuccess)
    return fail("cudaStreamCreate", status);
  if (cudaError_t status = cudaStreamCreateWithFlags(&communicationStream,
                                                     cudaStreamNonBlocking);
      status != cudaSuccess)
    return fail("cudaStreamCreate", status);
  if (cublasStatus_t status = cublasLtCreate(&ltHandle);
      status != CUBLAS_STATUS_SUCCESS) {
    error = "tessel_ctx_create: cublasLtCreate failed (status " +
            std::to_string(int(status)) + ")";
    return false;
  }
  if (cudaError_t status = cudaMalloc(&workspace, kLtWorkspaceBytes);
      status != cudaSuccess)
    return fail("cudaMalloc of the cuBLASLt workspace", status);
  if (cudaError_t status = cudaHostAlloc(reinterpret_cast<void **>(&hostErrorSlot),
                                         sizeof(DeviceError), cudaHostAllocMapped);
      status != cudaSuccess)
    return fail("cudaHostAlloc of the error slot", status);
  *hostErrorSlot = DeviceError{};
  if (cudaError_t status = cudaHostGetDevicePointer(
          reinterpret_cast<void **>(&deviceErrorSlot), hostErrorSlot, 0);
      status != cudaSuccess)
    return fail("cudaHostGetDevicePointer of the error slot", status);
  if (cudaError_t status = cudaMalloc(reinterpret_cast<void **>(&stepSlot),
                                      sizeof(uint64_t));
      status != cudaSuccess)
    return fail("cudaMalloc of the step", status);
  if (cudaError_t status = cudaMemset(stepSlot, 0, sizeof(uint64_t));
      status != cudaSuccess)
    return fail("cudaMemset of the step", status);
  return true;
}

CudaBackend::~CudaBackend() {
  if (deviceOrdinal >= 0)
    cudaSetDevice(deviceOrdinal);
  if (computeStream)
    cudaStreamSynchronize(computeStream);
  if (workspace)
    cudaFree(workspace);
  if (hostErrorSlot)
    cudaFreeHost(hostErrorSlot);
  if (stepSlot)
    cudaFree(stepSlot);
  if (ltHandle)
    cublasLtDestroy(ltHandle);
  if (communicationStream)
    cudaStreamDestroy(communicationStream);
  if (computeStream)
    cudaStreamDestroy(computeStream);
}

void *CudaBackend::alloc(int64_t bytes) {
  // A zero-byte request still gets a distinct, freeable pointer; memory is
  // zero-filled as the interface promises (cudaMalloc is 256-byte aligned).
  size_t rounded = bytes == 0 ? 64 : size_t(bytes);
  void *p = nullptr;
  cudaSetDevice(deviceOrdinal);
  if (cudaMalloc(&p, rounded) != cudaSuccess)
    return nullptr;
  if (cudaMemsetAsync(p, 0, rounded, computeStream) != cudaSuccess) {
    cudaFree(p);
    return nullptr;
  }
  return p;
}

void CudaBackend::free(void *ptr) {
  // cudaFree synchronises the device: no kernel still reads the buffer.
  cudaFree(ptr);
}

void CudaBackend::copyToDevice(void *dst, const void *hostSrc, int64_t bytes) {
  if (captureActive) {
    // The bytes as they are now, in device memory the graph keeps; the
    // captured copy reads them at every launch. (No context here: a failed
    // allocation shows as a failed capture or launch.)
    if (void *constant = stageHostArray(nullptr, hostSrc, size_t(bytes),
                                        "tessel_copy_to_device"))
      cudaMemcpyAsync(dst, constant, size_t(bytes), cudaMemcpyDeviceToDevice,
                      computeStream);
    return;
  }
  // Synchronous from the host's view: the caller may reuse hostSrc at once.
  cudaMemcpyAsync(dst, hostSrc, size_t(bytes), cudaMemcpyHostToDevice,
                  computeStream);
  cudaStreamSynchronize(computeStream);
}

void *CudaBackend::stageHostArray(tessel_ctx *ctx, const void *host,
                                  size_t bytes, const char *what) {
  void *device = nullptr;
  if (captureActive) {
    // Relaxed capture mode allows the allocation and the synchronous copy,
    // which run now and are not part of the graph.
    if (!check(ctx, cudaMalloc(&device, bytes), what))
      return nullptr;
    captureConstants.push_back(device);
    if (!check(ctx, cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice),
               what))
      return nullptr;
    return device;
  }
  if (!check(ctx, cudaMallocAsync(&device, bytes, computeStream), what))
    return nullptr;
  // From pageable memory: the call returns once `host` is staged.
  if (!check(ctx,
             cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice,
                             computeStream),
             what)) {
    cudaFreeAsync(device, computeStream);
    return nullptr;
  }
  return device;
}

void CudaBackend::releaseHostArray(tessel_ctx *ctx, void *device,
                                   const char *what) {
  if (!captureActive)
    check(ctx, cudaFreeAsync(device, computeStream), what);
}

void CudaBackend::copyToHost(void *hostDst, const void *src, int64_t bytes) {
  cudaMemcpyAsync(hostDst, src, size_t(bytes), cudaMemcpyDeviceToHost,
                  computeStream);
  cudaStreamSynchronize(computeStream);
}

void CudaBackend::copy(void *dst, const void *src, int64_t bytes) {
  // Overlapping ranges are allowed (memmove): cudaMemcpy is not, so an
  // overlapping shift goes through a temporary.
  const char *s = static_cast<const char *>(src);
  char *d = static_cast<char *>(dst);
  if (d + bytes <= s || s + bytes <= d) {
    cudaMemcpyAsync(dst, src, size_t(bytes), cudaMemcpyDeviceToDevice,
                    computeStream);
    return;
  }
  void *tmp = nullptr;
  if (cudaMallocAsync(&tmp, size_t(bytes), computeStream) != cudaSuccess)
    return;
  cudaMemcpyAsync(tmp, src, size_t(bytes), cudaMemcpyDeviceToDevice,
                  computeStream);
  cudaMemcpyAsync(dst, tmp, size_t(bytes), cudaMemcpyDeviceToDevice,
                  computeStream);
  cudaFreeAsync(tmp, computeStream);
}

void CudaBackend::copy2d(void *dst, int64_t dstPitch, const void *src,
                         int64_t srcPitch, int64_t rows, int64_t rowBytes) {
  cudaMemcpy2DAsync(dst, size_t(dstPitch), src, size_t(srcPitch),
                    size_t(rowBytes), size_t(rows), cudaMemcpyDeviceToDevice,
                    computeStream);
}

void CudaBackend::zero(void *dst, int64_t bytes) {
  cudaMemsetAsync(dst, 0, size_t(bytes), computeStream);
}

/// One thread stores the step: ordered on the stream like any kernel, and
/// the value travels as an argument (no host buffer to keep alive).
__global__ void storeStepKernel(uint64_t *slot, uint64_t step) { *slot = step; }

void CudaBackend::setStep(tessel_ctx *ctx, uint64_t step) {
  storeStepKernel<<<1, 1, 0, computeStream>>>(stepSlot, step);
  checkLaunch(ctx, "tessel_set_step");
}

namespace {

/// A captured step: the instantiated graph, launched on the compute
/// stream, and the device constants its copies read.
class CudaGraph final : public CapturedWork {
public:
  CudaGraph(int32_t device, cudaStream_t stream, cudaGraphExec_t exec,
            std::vector<void *> constants)
      : device(device), stream(stream), exec(exec),
        constants(std::move(constants)) {}
  ~CudaGraph() override {
    cudaSetDevice(device);
    cudaStreamSynchronize(stream);
    cudaGraphExecDestroy(exec);
    for (void *p : constants)
      cudaFree(p);
  }
  void launch(tessel_ctx *ctx) override {
    cudaSetDevice(device);
    CudaBackend::check(ctx, cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
  }

private:
  int32_t device;
  cudaStream_t stream;
  cudaGraphExec_t exec;
  std::vector<void *> constants;
};

} // namespace

bool CudaBackend::beginCapture(tessel_ctx *ctx) {
  cudaSetDevice(deviceOrdinal);
  // Relaxed: the capture may allocate (copyToDevice's constants) and a
  // started collective may create its events while it runs.
  if (!check(ctx,
             cudaStreamBeginCapture(computeStream, cudaStreamCaptureModeRelaxed),
             "tessel_graph_begin: cudaStreamBeginCapture"))
    return false;
  captureActive = true;
  return true;
}

std::unique_ptr<CapturedWork> CudaBackend::endCapture(tessel_ctx *ctx,
                                                      bool discard) {
  captureActive = false;
  std::vector<void *> constants = std::move(captureConstants);
  captureConstants.clear();
  auto freeConstants = [&] {
    for (void *p : constants)
      cudaFree(p);
  };
  cudaGraph_t graph = nullptr;
  cudaError_t status = cudaStreamEndCapture(computeStream, &graph);
  if (discard || !check(ctx, status, "tessel_graph_end: cudaStreamEndCapture")) {
    if (graph)
      cudaGraphDestroy(graph);
    freeConstants();
    return nullptr;
  }
  cudaGraphExec_t exec = nullptr;
  status = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (!check(ctx, status, "tessel_graph_end: cudaGraphInstantiate")) {
    freeConstants();
    return nullptr;
  }
  return std::make_unique<CudaGraph>(deviceOrdinal, computeStream, exec,
                                     std::move(constants));
}

void CudaBackend::synchronize(tessel_ctx *ctx) {
  if (ctx->communicator) {
    // The stream may hold collectives (a launched graph's, which the host
    // never waited for): wait no longer than the comm timeout, so that a
    // peer that hangs makes this rank fail instead of hang.
    auto deadline = commDeadline(ctx);
    cudaError_t status;
    while ((status = cudaStreamQuery(computeStream)) == cudaErrorNotReady) {
      if (std::chrono::steady_clock::now() > deadline) {
        setError(ctx,
                 "tessel_synchronize: rank %d's stream did not finish within "
                 "%g s (a kernel or a collective hung)",
                 ctx->rank, ctx->commTimeoutSeconds);
        return;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    check(ctx, status, "a kernel");
  } else {
    check(ctx, cudaStreamSynchronize(computeStream), "a kernel");
  }
  DeviceError found = *hostErrorSlot;
  if (found.kind > 0) {
    setError(ctx, "%s", describeDeviceError(found).c_str());
    *hostErrorSlot = DeviceError{};
  }
}

std::string tessel::cuda::describeDeviceError(const DeviceError &error) {
  auto row = [&](const char *entry, const char *what, const char *where) {
    return std::string(entry) + ": " + what + " " + std::to_string(error.value) +
           " " + where + " " + std::to_string(error.position) + " outside [0, " +
           std::to_string(error.bound) + ")";
  };
  switch (DeviceErrorKind(error.kind)) {
  case DeviceErrorKind::CrossEntropyLabel:
    return row("tessel_cross_entropy", "label", "of row");
  case DeviceErrorKind::CrossEntropyGradLabel:
    return row("tessel_cross_entropy_grad", "label", "of row");
  case DeviceErrorKind::EmbeddingId:
    return row("tessel_embedding", "id", "at position");
  case DeviceErrorKind::EmbeddingGradId:
    return row("tessel_embedding_grad", "id", "at position");
  case DeviceErrorKind::LabelLogitLabel:
    return row("tessel_label_logit", "label", "of row");
  case DeviceErrorKind::SubLabelLabel:
    return row("tessel_sub_label", "label", "of row");
  case DeviceErrorKind::IntegerDivisionByZero:
    return "tessel_binary: integer division by zero";
  case DeviceErrorKind::BroadcastIntegerDivisionByZero:
    return "tessel_binary_broadcast: integer division by zero";
  case DeviceErrorKind::None:
    break;
  }
  return "";
}

//===----------------------------------------------------------------------===//
// Plugin entry points
//===----------------------------------------------------------------------===//

extern "C" int tessel_cuda_plugin_version() {
  return TESSEL_CUDA_PLUGIN_VERSION;
}

extern "C" int tessel_cuda_device_count(std::string *reason) {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    if (reason)
      *reason = cudaGetErrorString(status);
    return 0;
  }
  if (count == 0 && reason)
    *reason = "no CUDA device visible";
  return count;
}

extern "C" Backend *
tessel_cuda_create_backend(const tessel_ctx_options *options,
                           std::string *error) {
  auto *backend = new (std::nothrow) CudaBackend;
  if (!backend) {
    *error = "tessel_ctx_create: out of memory";
    return nullptr;
  }
  if (!backend->init(options->device, *error)) {
    delete backend;
    return nullptr;
  }
  return backend;
}
