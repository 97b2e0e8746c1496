//===- device_errors.h - Errors only the data reveals, from kernels -*- C++ -*-===//
//
// A label, an id out of range or an integer division by zero is found by a
// kernel, on the device. The kernel records the first one in a DeviceError
// in mapped pinned host memory (recordDeviceError); the backend turns it
// into the context's error, worded as the CPU backend words it, when the
// context next synchronises (CudaBackend::synchronize). A kernel that finds
// one still writes what the CPU backend writes (zeros for the bad row).
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CUDA_DEVICE_ERRORS_H
#define TESSEL_RUNTIME_CUDA_DEVICE_ERRORS_H

#include <cstdint>
#include <string>

namespace tessel {
namespace cuda {

enum class DeviceErrorKind : int32_t {
  None = 0,
  CrossEntropyLabel,     // tessel_cross_entropy: label value of row position
  CrossEntropyGradLabel, // tessel_cross_entropy_grad: the same
  EmbeddingId,           // tessel_embedding: id value at position
  EmbeddingGradId,       // tessel_embedding_grad: the same
  IntegerDivisionByZero, // tessel_binary
  LabelLogitLabel,       // tessel_label_logit: label value of row position
  SubLabelLabel,         // tessel_sub_label: the same
  BroadcastIntegerDivisionByZero, // tessel_binary_broadcast
};

struct DeviceError {
  int32_t kind; // DeviceErrorKind; 0 while none
  int32_t pad;
  long long value, position, bound;
};

#ifdef __CUDACC__
/// Records the first error of the context (later ones are dropped).
__device__ inline void recordDeviceError(DeviceError *error,
                                         DeviceErrorKind kind, long long value,
                                         long long position, long long bound) {
  if (atomicCAS(&error->kind, 0, -1) == 0) {
    error->value = value;
    error->position = position;
    error->bound = bound;
    __threadfence_system();
    atomicExch(&error->kind, int32_t(kind));
  }
}
#endif

/// The CPU backend's wording of `error` ("" for none).
std::string describeDeviceError(const DeviceError &error);

} // namespace cuda
} // namespace tessel

#endif // TESSEL_RUNTIME_CUDA_DEVICE_ERRORS_H
