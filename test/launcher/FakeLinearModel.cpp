//===- FakeLinearModel.cpp - A hand-written model .so for tessel-run tests ===//
//
// What tessel-compile would emit for loss = cross_entropy(x · W, y) with x
// [4, 8] f32, W [8, 5] and labels [4] in [0, 5): the ABI of
// docs/model-abi.md, written by hand so the launcher is tested on its own.
//
//===----------------------------------------------------------------------===//

#include "tessel/runtime.h"

namespace {
constexpr int64_t weightOffset = 0, inputOffset = 192, labelOffset = 320,
                  lossOffset = 384, logitsOffset = 448;

char *at(void *arena, int64_t offset) {
  return static_cast<char *>(arena) + offset;
}
} // namespace

extern "C" const char *tessel_model_json(void) {
  return R"({
  "abi_version": 1, "source": "fake/linear.mlir", "function": "loss",
  "entry": "tessel_forward", "arena_bytes": 576, "peak_bytes": 80,
  "regions": {"params": {"offset": 0, "bytes": 192},
              "inputs": {"offset": 192, "bytes": 192},
              "outputs": {"offset": 384, "bytes": 64},
              "scratch": {"offset": 448, "bytes": 128}},
  "tensors": [
    {"name": "fc.weight", "role": "param", "dtype": "f32", "shape": [8, 5],
     "offset": 0, "bytes": 160, "axes": ["embed", "classes"],
     "init": {"kind": "normal", "args": [0.5, 0.0]}},
    {"name": "input0", "role": "input", "dtype": "f32", "shape": [4, 8],
     "offset": 192, "bytes": 128, "axes": ["batch", "embed"]},
    {"name": "label0", "role": "label", "dtype": "i32", "shape": [4],
     "offset": 320, "bytes": 16, "axes": ["batch"], "limit": 5},
    {"name": "loss", "role": "loss", "dtype": "f32", "shape": [],
     "offset": 384, "bytes": 4}
  ]
})";
}

extern "C" void tessel_forward(tessel_ctx *ctx, void *arena) {
  tessel_matmul(ctx, TESSEL_F32, at(arena, inputOffset),
                at(arena, weightOffset), at(arena, logitsOffset), /*batch=*/1,
                /*m=*/4, /*n=*/5, /*k=*/8, 0, 0, /*b_shared=*/1);
  tessel_cross_entropy(ctx, TESSEL_F32, TESSEL_I32, at(arena, logitsOffset),
                       at(arena, labelOffset), at(arena, lossOffset),
                       /*rows=*/4, /*classes=*/5, TESSEL_LOSS_MEAN);
}
