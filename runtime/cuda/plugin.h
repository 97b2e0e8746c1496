//===- plugin.h - The entry points libtessel_cuda.so exports ----*- C++ -*-===//
//
// The runtime (core/cuda_plugin.cpp) dlopens libtessel_cuda.so beside
// itself and looks these up; both sides are built by one compiler from one
// tree, so C++ types may cross (the names are unmangled only to be found).
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CUDA_PLUGIN_H
#define TESSEL_RUNTIME_CUDA_PLUGIN_H

#include "core/backend.h"

/// Bumped when the Backend interface or these signatures change: a stale
/// plugin is refused instead of called through a different vtable.
#define TESSEL_CUDA_PLUGIN_VERSION 9

extern "C" {
/// TESSEL_CUDA_PLUGIN_VERSION of the plugin.
int tessel_cuda_plugin_version();
/// The number of CUDA devices this process sees; 0 with the reason in
/// `reason` (no driver, no device) otherwise.
int tessel_cuda_device_count(std::string *reason);
/// A CUDA backend on options.device; null with the reason in `error`.
tessel::Backend *tessel_cuda_create_backend(const tessel_ctx_options *options,
                                            std::string *error);
}

#endif // TESSEL_RUNTIME_CUDA_PLUGIN_H
