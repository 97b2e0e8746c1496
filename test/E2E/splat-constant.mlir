// Tests that a splat constant costs one element of data in the .so (it is
// broadcast on the device), however large: 2^21 elements of 0.5 sum to
// 1048576, and the shared object stays small.
// RUN: tessel-compile %s -o %t.so
// RUN: test $(stat -c %%s %t.so) -lt 100000
// RUN: tessel-run %t.so --steps 1 --quiet --metrics %t.jsonl
// RUN: FileCheck %s --input-file %t.jsonl
// CHECK: "loss":1048576{{(\.0)?}},

func.func @loss(%x: tensor<1xf32> {nn.input, nn.axes = ["batch"]}) -> tensor<f32> {
  %c = nn.constant dense<0.5> : tensor<512x512x8xf32>
  %r = nn.reduce_sum %c dims = [0, 1, 2] : tensor<512x512x8xf32> -> tensor<f32>
  return %r : tensor<f32>
}
