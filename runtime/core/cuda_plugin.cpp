//===- cuda_plugin.cpp - Loading the CUDA backend on demand ---------------===//
//
// The CUDA backend is its own library, libtessel_cuda.so, beside this one
// (runtime/cuda). It is dlopen'ed the first time a context asks for "cuda"
// or tessel_backend_available("cuda") is called, so a CPU run never maps
// cuBLASLt and NCCL, and a runtime built without CUDA or copied without the
// plugin says why "cuda" is unavailable instead of failing to load.
//
//===----------------------------------------------------------------------===//

#include "core/backend.h"
#include "cuda/plugin.h"

#include <dlfcn.h>
#include <mutex>
#include <new>

using namespace tessel;

namespace {

struct Plugin {
  bool loaded = false;
  std::string reason; // why it is unavailable
  int devices = 0;
  decltype(&tessel_cuda_create_backend) create = nullptr;
};

/// The directory of this library (where the plugin is installed), with a
/// trailing slash; "" when it cannot be told (then the loader's search path).
std::string runtimeDirectory() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void *>(&runtimeDirectory), &info) ||
      !info.dli_fname)
    return "";
  std::string path = info.dli_fname;
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

const Plugin &plugin() {
  static Plugin loaded;
  static std::once_flag once;
  std::call_once(once, [] {
    Plugin &p = loaded;
    std::string path = runtimeDirectory() + "libtessel_cuda.so";
    void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char *why = dlerror();
      p.reason = "the CUDA backend (" + path + ") is not loadable: " +
                 (why ? why : "unknown error") +
                 " (built without CUDA, or its libraries are missing)";
      return;
    }
    auto version = reinterpret_cast<decltype(&tessel_cuda_plugin_version)>(
        dlsym(handle, "tessel_cuda_plugin_version"));
    auto count = reinterpret_cast<decltype(&tessel_cuda_device_count)>(
        dlsym(handle, "tessel_cuda_device_count"));
    p.create = reinterpret_cast<decltype(&tessel_cuda_create_backend)>(
        dlsym(handle, "tessel_cuda_create_backend"));
    if (!version || !count || !p.create ||
        version() != TESSEL_CUDA_PLUGIN_VERSION) {
      p.reason = path + " is from another build of the runtime";
      p.create = nullptr;
      return;
    }
    p.loaded = true;
    p.devices = count(&p.reason);
  });
  return loaded;
}

} // namespace

bool tessel::cuda::available() { return plugin().devices > 0; }

std::string tessel::cuda::unavailableReason() {
  const Plugin &p = plugin();
  return p.devices > 0 ? "" : p.reason;
}

int32_t tessel::cuda::deviceCount() { return plugin().devices; }

std::unique_ptr<Backend>
tessel::cuda::createBackend(const tessel_ctx_options &options,
                            std::string &error) {
  const Plugin &p = plugin();
  if (p.devices == 0) {
    error = "tessel_ctx_create: no CUDA backend: " + p.reason;
    return nullptr;
  }
  return std::unique_ptr<Backend>(p.create(&options, &error));
}
