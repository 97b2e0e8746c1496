//===- backend.cpp - The CPU backend's factory, memory and communicators --===//

#include "cpu/backend.h"
#include "cpu/comm.h"
#include "cpu/comm_tcp.h"

#include <cstdlib>
#include <cstring>
#include <new>

// Declared here too: not every cblas.h exposes it.
extern "C" void openblas_set_num_threads(int num_threads);

using namespace tessel;
using namespace tessel::cpu;

bool tessel::cpu::available() { return true; }

std::unique_ptr<Backend> tessel::cpu::createBackend(const tessel_ctx_options &,
                                                    std::string &error) {
  // Ranks run as threads of one process; a multi-threaded BLAS under each
  // would oversubscribe the cores.
  openblas_set_num_threads(1);
  std::unique_ptr<Backend> backend(new (std::nothrow) CpuBackend);
  if (!backend)
    error = "tessel_ctx_create: out of memory";
  return backend;
}

std::unique_ptr<Communicator> CpuBackend::createCommunicator(
    tessel_ctx *ctx, const tessel_ctx_options &options, std::string &error) {
  switch (options.comm) {
  case TESSEL_COMM_LOCAL:
    return createLocalCommunicator(ctx, options.local_world, error);
  case TESSEL_COMM_MPI:
    return createMpiCommunicator(ctx, error);
  case TESSEL_COMM_TCP:
    return createTcpCommunicator(ctx, options, error);
  default:
    return nullptr;
  }
}

void *CpuBackend::alloc(int64_t bytes) {
  // aligned_alloc wants a multiple of the alignment; a zero-byte request
  // still gets a distinct, freeable pointer.
  int64_t rounded = bytes == 0 ? 64 : (bytes + 63) / 64 * 64;
  void *p = std::aligned_alloc(64, size_t(rounded));
  if (p)
    std::memset(p, 0, size_t(rounded));
  return p;
}

void CpuBackend::free(void *ptr) { std::free(ptr); }

void CpuBackend::copyToDevice(void *dst, const void *hostSrc, int64_t bytes) {
  // memmove throughout: device memory is host memory, and a device copy
  // may be asked to shift within a buffer.
  std::memmove(dst, hostSrc, size_t(bytes));
}

void CpuBackend::copyToHost(void *hostDst, const void *src, int64_t bytes) {
  std::memmove(hostDst, src, size_t(bytes));
}

void CpuBackend::copy(void *dst, const void *src, int64_t bytes) {
  std::memmove(dst, src, size_t(bytes));
}

void CpuBackend::copy2d(void *dst, int64_t dstPitch, const void *src,
                        int64_t srcPitch, int64_t rows, int64_t rowBytes) {
  copyRows(dst, dstPitch, src, srcPitch, rows, rowBytes);
}

void CpuBackend::zero(void *dst, int64_t bytes) {
  std::memset(dst, 0, size_t(bytes));
}
