//===- CudaRopeTest.cpp - The CUDA rope kernel against the CPU's ---------===//
//
// On a GPU (CpuVsCuda; skipped without one): tessel_rope on a CUDA and a
// CPU context through the C ABI on the same inputs, every dtype, both pair
// layouts, both directions, with and without Llama 3.1's and YaRN's
// frequency scalings, a partial rope (half of each head, LongRoPE's
// per-pair factors where the half is even, an attention factor), positions far
// enough out (8191) that the angles need the f64 turn, and in place. Both
// backends compute the turn with core/rope.h; the device's f64 sine and cosine
// and its fused multiply-adds may differ from the host's in the last bit, so
// f32 and f64 agree within a few ulp and 16-bit results within one.
//
//===----------------------------------------------------------------------===//

#include "Formats.h"
#include "cuda/CudaTestUtil.h"

#include <cmath>
#include <string>

using namespace tessel::cudatest;
using namespace tt;

namespace {

using CudaVsCpuRope = CpuVsCuda;

struct RopeShape {
  int64_t outer, positions, heads, dim;
  int64_t count() const { return outer * positions * heads * dim; }
};

std::vector<double> runRope(tessel_ctx *ctx, int32_t dtype,
                            const std::vector<double> &x, RopeShape s,
                            bool interleaved, bool inverse, bool inPlace,
                            int scaling) {
  auto bytes = encode(dtype, x);
  void *in = uploadTo(ctx, bytes);
  void *out = inPlace ? in : tessel_alloc(ctx, int64_t(bytes.size()));
  std::vector<double> factors;
  for (int64_t i = 0; i < s.dim / 4; ++i)
    factors.push_back(1.0 + 0.25 * double(i));
  if (scaling == 3) // LongRoPE's factors over half of each head
    tessel_rope_factors(ctx, dtype, in, out, s.outer, s.positions, s.heads,
                        s.dim, s.dim / 2 + s.dim / 2 % 2, 10000.0, interleaved,
                        inverse, s.dim / 2 % 2 ? nullptr : factors.data(),
                        1.19);
  else if (scaling == 2) // YaRN (Qwen's long context: factor 4 over 32768)
    tessel_rope_yarn(ctx, dtype, in, out, s.outer, s.positions, s.heads, s.dim,
                     1e6, interleaved, inverse, 4.0, 32.0, 1.0, 32768.0, 1);
  else // Llama 3.1's scaling (Llama 3.2's constants) where asked
    tessel_rope(ctx, dtype, in, out, s.outer, s.positions, s.heads, s.dim,
                scaling ? 500000.0 : 10000.0, interleaved, inverse,
                scaling ? 32.0 : 0.0, 1.0, 4.0, 8192.0);
  auto result = downloadFrom<uint8_t>(ctx, out, bytes.size());
  tessel_free(ctx, in);
  if (!inPlace)
    tessel_free(ctx, out);
  return decode(dtype, result);
}

TEST_F(CudaVsCpuRope, MatchesCpu) {
  const RopeShape shapes[] = {{1, 1, 1, 2},
                              {2, 7, 3, 8},
                              {3, 33, 4, 64},
                              {1, 8192, 2, 128},
                              {2, 5, 1, 6}};
  for (int32_t dtype : kFloatTypes)
    for (RopeShape s : shapes)
      for (int variant = 0; variant < 16; ++variant) {
        bool interleaved = variant & 1, inverse = variant & 2;
        // None, Llama 3.1's, YaRN's, a partial rope (LongRoPE's factors).
        int scaled = variant / 4;
        bool inPlace = s.dim == 64;
        std::string what =
            std::string(dtypeName(dtype)) + " positions " +
            std::to_string(s.positions) + " dim " + std::to_string(s.dim) +
            (interleaved ? " interleaved" : "") + (inverse ? " inverse" : "") +
            (scaled == 1   ? " llama3-scaled"
             : scaled == 2 ? " yarn"
             : scaled == 3 ? " partial"
                           : "");
        auto x = randomValues(dtype, size_t(s.count()), -2, 2, 81);
        auto want =
            runRope(cpu, dtype, x, s, interleaved, inverse, false, scaled);
        auto got =
            runRope(gpu, dtype, x, s, interleaved, inverse, inPlace, scaled);
        ASSERT_EQ(tessel_error(gpu), nullptr) << tessel_error(gpu);
        ASSERT_EQ(got.size(), want.size());
        // |y| <= 4: a few ulp of the arithmetic's type, or one of the
        // stored type's.
        double tol = dtype == TESSEL_F64   ? 4 * 4 * 0x1p-52
                     : dtype == TESSEL_F32 ? 4 * 4 * 0x1p-23
                                           : 4 * eps(dtype);
        int bad = 0;
        for (size_t i = 0; i < want.size(); ++i)
          if (!(std::fabs(got[i] - want[i]) <= tol) && bad++ < 5)
            ADD_FAILURE() << what << " element " << i << ": " << got[i]
                          << " vs the CPU's " << want[i];
        EXPECT_EQ(bad, 0) << what;
      }
}

TEST_F(CudaVsCpuRope, BadShapeReportedNotLaunched) {
  void *x = tessel_alloc(gpu, 64);
  tessel_rope(gpu, TESSEL_F32, x, x, 1, 2, 2, 3, 10000.0, 0, 0, 0, 0, 0, 0);
  const char *err = tessel_error(gpu);
  ASSERT_NE(err, nullptr);
  EXPECT_NE(std::string(err).find("head_dim even"), std::string::npos) << err;
  tessel_clear_error(gpu);
  tessel_free(gpu, x);
}

} // namespace
