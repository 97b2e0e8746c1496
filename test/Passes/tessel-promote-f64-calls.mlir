// RUN: tessel-opt %s -split-input-file -tessel-promote-f64 | FileCheck %s

// Functions a model calls (func.call, which autodiff does not
// differentiate, and a repeat's layer), promoted before their callers.

// Tests that functions are promoted wherever they stand: a layer function
// and a called helper after the model that uses them.
// CHECK-LABEL: func.func @uses_later(
// CHECK:         nn.repeat @later_layer(%{{.*}}) params(%{{.*}}) : (tensor<2x8xf64>, tensor<3x8x8xf64>) -> tensor<2x8xf64>
// CHECK:         call @later_helper(%{{.*}}) : (tensor<2x8xf64>) -> tensor<2x8xf64>
// CHECK-LABEL: func.func private @later_layer(
// CHECK-SAME:    tensor<2x8xf64>, %{{[^:]*}}: tensor<8x8xf64>) -> tensor<2x8xf64>
// CHECK-LABEL: func.func private @later_helper(
// CHECK-SAME:    tensor<2x8xf64>) -> tensor<2x8xf64>
func.func @uses_later(%ws: tensor<3x8x8xf32> {nn.param = "ws", nn.init = #nn.init<normal, 0.1>, nn.axes = ["layers", "embed", "mlp"]},
                      %x: tensor<2x8xf32> {nn.input}) -> tensor<f32> {
  %y = nn.repeat @later_layer(%x) params(%ws) : (tensor<2x8xf32>, tensor<3x8x8xf32>) -> tensor<2x8xf32>
  %z = func.call @later_helper(%y) : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %l = nn.reduce_sum %z dims = [0, 1] : tensor<2x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}
func.func private @later_layer(%h: tensor<2x8xf32>, %w: tensor<8x8xf32>) -> tensor<2x8xf32> {
  %m = nn.matmul %h, %w : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  return %m : tensor<2x8xf32>
}
func.func private @later_helper(%h: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %g = nn.gelu %h : tensor<2x8xf32>
  return %g : tensor<2x8xf32>
}

// -----

// Tests that a function returns what its body computes: the f32
// log-sum-exp of bf16 queries stays f32 in its signature, its f32 output
// becomes f64.
// CHECK-LABEL: func.func private @bf16_attention(
// CHECK-SAME:    -> (tensor<1x4x2x8xf64>, tensor<1x2x4xf32>)
// CHECK-LABEL: func.func @returns_lse(
// CHECK:         call @bf16_attention(%{{.*}}) : (tensor<1x4x2x8xf64>) -> (tensor<1x4x2x8xf64>, tensor<1x2x4xf32>)
func.func private @bf16_attention(%x: tensor<1x4x2x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x2x4xf32>) {
  %b = nn.cast %x : tensor<1x4x2x8xf32> to tensor<1x4x2x8xbf16>
  %o, %lse = nn.attention %b, %b, %b causal lse : (tensor<1x4x2x8xbf16>, tensor<1x4x2x8xbf16>, tensor<1x4x2x8xbf16>) -> (tensor<1x4x2x8xbf16>, tensor<1x2x4xf32>)
  %of = nn.cast %o : tensor<1x4x2x8xbf16> to tensor<1x4x2x8xf32>
  return %of, %lse : tensor<1x4x2x8xf32>, tensor<1x2x4xf32>
}
func.func @returns_lse(%w: tensor<1x4x2x8xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.1>}) -> tensor<f32> {
  %o, %lse = func.call @bf16_attention(%w) : (tensor<1x4x2x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x2x4xf32>)
  %l = nn.reduce_sum %o dims = [0, 1, 2, 3] : tensor<1x4x2x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}
