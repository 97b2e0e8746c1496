//===- CudaOptimizerTestUtil.h - The optimizer tests' helpers -*- C++ -*-===//
//
// What CudaOptimizerTest.cpp (the host arithmetic) and
// CudaOptimizerGpuTest.cpp (the kernels on a GPU) share: the optimizer
// cases, the test's learning rate and gradient scale of a step, random
// tensors, a byte comparison, and one tensor's update on a context.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_TEST_CUDA_CUDAOPTIMIZERTESTUTIL_H
#define TESSEL_RUNTIME_TEST_CUDA_CUDAOPTIMIZERTESTUTIL_H

#include "TestUtil.h"

#include "core/storage.h"

#include <cstring>
#include <random>
#include <vector>

namespace tessel::cudatest::optimizer {

using stored::BFloat;
using stored::fromDouble;
using stored::Half;

template <class T> int32_t dtypeOf();
template <> inline int32_t dtypeOf<float>() { return TESSEL_F32; }
template <> inline int32_t dtypeOf<double>() { return TESSEL_F64; }
template <> inline int32_t dtypeOf<Half>() { return TESSEL_F16; }
template <> inline int32_t dtypeOf<BFloat>() { return TESSEL_BF16; }

template <class T> const char *dtypeName() {
  switch (dtypeOf<T>()) {
  case TESSEL_F32:
    return "f32";
  case TESSEL_F64:
    return "f64";
  case TESSEL_F16:
    return "f16";
  default:
    return "bf16";
  }
}

template <class T>
std::vector<T> randomValues(std::mt19937_64 &rng, size_t n, double sd) {
  std::normal_distribution<double> dist(0.0, sd);
  std::vector<T> out(n);
  for (T &x : out)
    x = fromDouble<T>(dist(rng));
  return out;
}

/// Index of the first element whose bytes differ, or -1.
template <class T>
int64_t firstDifference(const std::vector<T> &a, const std::vector<T> &b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0)
      return int64_t(i);
  return -1;
}

struct OptCase {
  const char *name;
  tessel_optimizer opt;
};

/// Adam or AdamW with these constants (the runtime tests' helper).
inline constexpr auto adam = tt::adamOptimizer;

/// SGD with these constants (the runtime tests' helper).
inline constexpr auto sgd = tt::sgdOptimizer;

/// An update over a schedule of the context's step, and whether the GPU
/// must equal the CPU bit for bit (no pow or cos of the device).
struct ScheduledCase {
  tessel_optimizer opt;
  tessel_lr_schedule schedule;
  bool exact;
};

inline std::vector<OptCase> optimizerCases() {
  return {
      {"sgd", sgd(0.0, 0, 0.0)},
      {"sgd-wd", sgd(0.0, 0, 0.01)},
      {"sgd-momentum", sgd(0.9, 0, 0.0)},
      {"sgd-nesterov", sgd(0.9, 1, 0.0)},
      {"sgd-nesterov-wd", sgd(0.85, 1, 0.05)},
      {"sgd-momentum-wd", sgd(0.9, 0, 1e-4)},
      {"adam", adam(TESSEL_OPT_ADAM, 0.9, 0.999, 1e-8, 0.0)},
      {"adam-l2", adam(TESSEL_OPT_ADAM, 0.9, 0.999, 1e-8, 0.01)},
      {"adam-betas", adam(TESSEL_OPT_ADAM, 0.8, 0.95, 1e-6, 0.0)},
      {"adamw", adam(TESSEL_OPT_ADAMW, 0.9, 0.999, 1e-8, 0.0)},
      {"adamw-wd", adam(TESSEL_OPT_ADAMW, 0.9, 0.95, 1e-8, 0.1)},
  };
}

inline bool isAdam(const tessel_optimizer &o) {
  return o.kind != TESSEL_OPT_SGD;
}

/// This test's learning rate and gradient scale of 1-based `step`.
inline double lrAt(int64_t step) { return 1e-2 * (1.0 + 0.25 * double(step)); }
inline float scaleAt(int64_t step) { return 0.37f / float(step); }

/// One parameter tensor, its gradient and state on a context.
template <class T> struct DeviceTensors {
  tessel_ctx *ctx;
  void *param, *grad, *s0, *s1, *scale;
  DeviceTensors(tessel_ctx *c, const std::vector<T> &p, size_t n) : ctx(c) {
    param = tessel_alloc(ctx, int64_t(n * sizeof(T)) + 64);
    grad = tessel_alloc(ctx, int64_t(n * sizeof(T)) + 64);
    s0 = tessel_alloc(ctx, int64_t(n * sizeof(float)) + 64);
    s1 = tessel_alloc(ctx, int64_t(n * sizeof(float)) + 64);
    scale = tessel_alloc(ctx, 4);
    if (n)
      tessel_copy_to_device(ctx, param, p.data(), int64_t(n * sizeof(T)));
  }
  ~DeviceTensors() {
    for (void *q : {param, grad, s0, s1, scale})
      tessel_free(ctx, q);
  }
  /// One update with gradient g; `offset` elements into each buffer.
  void step(const tessel_optimizer &opt, const std::vector<T> &g, int64_t step,
            bool withScale, int64_t offset = 0) {
    int64_t n = int64_t(g.size());
    char *p = static_cast<char *>(param) + offset * sizeof(T);
    char *gd = static_cast<char *>(grad) + offset * sizeof(T);
    float *m = static_cast<float *>(s0) + offset;
    float *v = static_cast<float *>(s1) + offset;
    if (n)
      tessel_copy_to_device(ctx, gd, g.data(), n * int64_t(sizeof(T)));
    float s = scaleAt(step);
    tessel_copy_to_device(ctx, scale, &s, 4);
    bool needsState0 = isAdam(opt) || opt.momentum != 0.0;
    tessel_optimizer_update(ctx, &opt, dtypeOf<T>(), p, gd,
                            withScale ? scale : nullptr,
                            needsState0 ? m : nullptr,
                            isAdam(opt) ? v : nullptr, n, step, lrAt(step));
  }
  template <class U>
  std::vector<U> read(const void *base, int64_t offset, size_t n) {
    std::vector<U> out(n);
    tessel_synchronize(ctx);
    if (n)
      tessel_copy_to_host(ctx, out.data(),
                          static_cast<const U *>(base) + offset,
                          int64_t(n * sizeof(U)));
    return out;
  }
};

} // namespace tessel::cudatest::optimizer

#endif // TESSEL_RUNTIME_TEST_CUDA_CUDAOPTIMIZERTESTUTIL_H
