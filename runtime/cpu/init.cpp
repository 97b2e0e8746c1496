//===- init.cpp - Counter-based parameter initialisation ------------------===//
//
// Element i's value depends only on (seed, name, i): every shard of a
// parameter, on any mesh, draws exactly the values one device would.
//
//===----------------------------------------------------------------------===//

#include "cpu/backend.h"
#include "cpu/internal.h"

using namespace tessel::cpu;

namespace {

/// One standard normal per (key, index, attempt) by Box-Muller; only the
/// cosine branch is used so that each element owns its draws.
double standardNormal(uint64_t seed, uint64_t nameHash, uint64_t index,
                      uint64_t attempt) {
  double u1 = uniformOpen(hash4(kInitDomain ^ seed, nameHash, index,
                                2 * attempt));
  double u2 = uniformOpen(hash4(kInitDomain ^ seed, nameHash, index,
                                2 * attempt + 1));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

} // namespace

void CpuBackend::initParam(tessel_ctx *, void *dst, int32_t dtype,
                           int64_t first, int64_t count, int32_t kind,
                           const double *args, uint64_t seed,
                           uint64_t nameHash) {
  visitAny(dtype, [&](auto tag) {
    using T = decltype(tag);
    T *out = static_cast<T *>(dst);
    for (int64_t i = 0; i < count; ++i) {
      uint64_t index = uint64_t(first + i);
      double v = 0.0;
      switch (kind) {
      case TESSEL_INIT_ZEROS:
        v = 0.0;
        break;
      case TESSEL_INIT_ONES:
        v = 1.0;
        break;
      case TESSEL_INIT_CONSTANT:
        v = args[0];
        break;
      case TESSEL_INIT_NORMAL:
        v = args[1] + args[0] * standardNormal(seed, nameHash, index, 0);
        break;
      case TESSEL_INIT_TRUNCATED_NORMAL: {
        // Resample outside ±2: the accept rate is 95.4%, so 64 attempts
        // fail with probability ~1e-86; clamp then, to stay total.
        double z = 0.0;
        for (uint64_t attempt = 0; attempt < 64; ++attempt) {
          z = standardNormal(seed, nameHash, index, attempt);
          if (std::fabs(z) <= 2.0)
            break;
        }
        z = std::fmin(2.0, std::fmax(-2.0, z));
        v = args[1] + args[0] * z;
        break;
      }
      case TESSEL_INIT_UNIFORM: {
        double u = uniformOpen(hash4(kInitDomain ^ seed, nameHash, index,
                                     ~uint64_t(0)));
        v = args[0] + (args[1] - args[0]) * u;
        break;
      }
      }
      out[i] = fromDouble<T>(v);
    }
  });
}
