//===- BackendTest.cpp - Choosing a context's backend by name -------------===//

#include "TestUtil.h"

#include <string>

namespace {

// Tests that a zero-initialised options struct still makes a CPU context.
TEST(BackendSelection, DefaultIsCpu) {
  tessel_ctx_options options = {};
  options.world_size = 1;
  tessel_ctx *ctx = tessel_ctx_create(&options);
  ASSERT_NE(ctx, nullptr) << tessel_error(nullptr);
  EXPECT_STREQ(tessel_ctx_backend(ctx), "cpu");
  tessel_ctx_destroy(ctx);
}

// Tests that "cpu" by name selects the CPU backend, with or without the
// matching backend code.
TEST(BackendSelection, CpuByName) {
  tessel_ctx_options options = {};
  options.world_size = 1;
  options.backend_name = "cpu";
  tessel_ctx *ctx = tessel_ctx_create(&options);
  ASSERT_NE(ctx, nullptr) << tessel_error(nullptr);
  EXPECT_STREQ(tessel_ctx_backend(ctx), "cpu");
  // Kernels run on it.
  float *x = static_cast<float *>(tessel_alloc(ctx, 4 * sizeof(float)));
  const float host[4] = {1, 2, 3, 4};
  tessel_copy_to_device(ctx, x, host, sizeof(host));
  tessel_binary(ctx, TESSEL_ADD, TESSEL_F32, x, x, x, 4);
  float back[4] = {};
  tessel_copy_to_host(ctx, back, x, sizeof(back));
  EXPECT_EQ(back[3], 8.0f);
  EXPECT_EQ(tessel_error(ctx), nullptr);
  tessel_free(ctx, x);
  tessel_ctx_destroy(ctx);
}

// Tests that an unknown name fails with a message naming it and the
// backends there are.
TEST(BackendSelection, UnknownNameFails) {
  tessel_ctx_options options = {};
  options.world_size = 1;
  options.backend_name = "x";
  EXPECT_EQ(tessel_ctx_create(&options), nullptr);
  ASSERT_NE(tessel_error(nullptr), nullptr);
  EXPECT_NE(std::string(tessel_error(nullptr))
                .find("unknown backend 'x' (available: cpu, cuda)"),
            std::string::npos)
      << tessel_error(nullptr);
  tessel_clear_error(nullptr);
}

// Tests that a backend code and a name that disagree fail.
TEST(BackendSelection, CodeAndNameMustAgree) {
  tessel_ctx_options options = {};
  options.world_size = 1;
  options.backend = TESSEL_BACKEND_CUDA;
  options.backend_name = "cpu";
  EXPECT_EQ(tessel_ctx_create(&options), nullptr);
  ASSERT_NE(tessel_error(nullptr), nullptr);
  EXPECT_NE(std::string(tessel_error(nullptr)).find("contradicts"),
            std::string::npos)
      << tessel_error(nullptr);
  tessel_clear_error(nullptr);
}

// Tests the launcher's check before it starts ranks, and the null context.
TEST(BackendSelection, Availability) {
  EXPECT_EQ(tessel_backend_available("cpu"), 1);
  EXPECT_EQ(tessel_backend_available(nullptr), 1);
  EXPECT_EQ(tessel_backend_available("x"), 0);
  EXPECT_EQ(tessel_backend_available(""), 0);
  EXPECT_EQ(tessel_ctx_backend(nullptr), nullptr);
}

} // namespace
