//===- CudaTestUtil.h - Contexts for the CUDA backend's tests ---*- C++ -*-===//
//
// A CPU context and, where a GPU is present, a CUDA context, so each kernel
// runs on both through the C ABI and the results are compared. GPU tests
// start with TESSEL_REQUIRE_CUDA(), which skips them with the reason when
// the plugin or a device is missing.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_TEST_CUDA_CUDATESTUTIL_H
#define TESSEL_RUNTIME_TEST_CUDA_CUDATESTUTIL_H

#include "tessel/runtime.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace tessel::cudatest {

/// A one-rank context of backend `name`, or null.
inline tessel_ctx *createContext(const char *name) {
  tessel_ctx_options options{};
  options.rank = 0;
  options.world_size = 1;
  options.backend_name = name;
  return tessel_ctx_create(&options);
}

#define TESSEL_REQUIRE_CUDA()                                                  \
  do {                                                                         \
    if (!tessel_backend_available("cuda"))                                     \
      GTEST_SKIP() << "no CUDA device (or the CUDA backend is not built)";     \
  } while (0)

/// A buffer on `ctx` holding `host`.
template <typename T>
void *uploadTo(tessel_ctx *ctx, const std::vector<T> &host) {
  void *p = tessel_alloc(ctx, int64_t(host.size() * sizeof(T)));
  if (!host.empty())
    tessel_copy_to_device(ctx, p, host.data(),
                          int64_t(host.size() * sizeof(T)));
  return p;
}

/// `count` elements of a buffer on `ctx`.
template <typename T>
std::vector<T> downloadFrom(tessel_ctx *ctx, const void *p, size_t count) {
  std::vector<T> host(count);
  tessel_synchronize(ctx);
  if (count)
    tessel_copy_to_host(ctx, host.data(), p, int64_t(count * sizeof(T)));
  return host;
}

/// A CPU and a CUDA context, for GPU-vs-CPU tests; both destroyed after.
class CpuVsCuda : public ::testing::Test {
protected:
  void SetUp() override {
    TESSEL_REQUIRE_CUDA();
    cpu = createContext("cpu");
    gpu = createContext("cuda");
    ASSERT_NE(cpu, nullptr) << tessel_error(nullptr);
    ASSERT_NE(gpu, nullptr) << tessel_error(nullptr);
  }
  void TearDown() override {
    if (gpu)
      EXPECT_EQ(tessel_error(gpu), nullptr) << tessel_error(gpu);
    tessel_ctx_destroy(cpu);
    tessel_ctx_destroy(gpu);
  }
  template <typename T>
  void *upload(tessel_ctx *ctx, const std::vector<T> &host) {
    return uploadTo(ctx, host);
  }
  template <typename T>
  std::vector<T> download(tessel_ctx *ctx, const void *p, size_t count) {
    return downloadFrom<T>(ctx, p, count);
  }

  tessel_ctx *cpu = nullptr;
  tessel_ctx *gpu = nullptr;
};

} // namespace tessel::cudatest

#endif // TESSEL_RUNTIME_TEST_CUDA_CUDATESTUTIL_H
