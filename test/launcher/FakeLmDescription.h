//===- FakeLmDescription.h - The description of FakeLmModel.so -*- C++ -*-===//
//
// Shared by the hand-written model (FakeLmModel.cpp) and the readers' fuzz
// target (test/fuzz/ReaderFuzzer.cpp), which needs a small language model
// with parameters to load checkpoints and token feeds to fill.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_TEST_LAUNCHER_FAKELMDESCRIPTION_H
#define TESSEL_TEST_LAUNCHER_FAKELMDESCRIPTION_H

inline constexpr const char *kFakeLmDescription = R"({
  "abi_version": 1, "source": "fake/lm.mlir", "function": "loss",
  "entry": "tessel_forward", "arena_bytes": 1984, "peak_bytes": 768,
  "tensors": [
    {"name": "embed", "role": "param", "dtype": "f32", "shape": [16, 8],
     "offset": 0, "bytes": 512, "init": {"kind": "normal", "args": [1.0, 0.0]}},
    {"name": "head", "role": "param", "dtype": "f32", "shape": [8, 16],
     "offset": 512, "bytes": 512, "init": {"kind": "normal", "args": [0.5, 0.0]}},
    {"name": "input0", "role": "input", "dtype": "i32", "shape": [2, 4],
     "offset": 1024, "bytes": 32, "axes": ["batch", "seq"], "limit": 16},
    {"name": "label0", "role": "label", "dtype": "i32", "shape": [2, 4],
     "offset": 1088, "bytes": 32, "axes": ["batch", "seq"], "limit": 16},
    {"name": "loss", "role": "loss", "dtype": "f32", "shape": [],
     "offset": 1152, "bytes": 4}
  ]
})";

#endif // TESSEL_TEST_LAUNCHER_FAKELMDESCRIPTION_H
