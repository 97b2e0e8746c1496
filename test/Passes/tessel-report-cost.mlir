// RUN: tessel-opt %s -tessel-report-cost --split-input-file --verify-diagnostics | FileCheck %s
// RUN: tessel-opt %s -tessel-report-cost=per-op=false --split-input-file 2>&1 >/dev/null | FileCheck %s --check-prefix=TOTALS --implicit-check-not="remark: flops"

// Tests that every op gets its flops and bytes and the function its totals.
// CHECK-LABEL: func.func @matmul_then_gelu
// TOTALS: remark: function @matmul_then_gelu: 2 ops, flops 56, bytes 168
// expected-remark @+1 {{function @matmul_then_gelu: 2 ops, flops 56, bytes 168}}
func.func @matmul_then_gelu(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
  // expected-remark @+1 {{flops 48, bytes 104}}
  %c = nn.matmul %a, %b : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  // expected-remark @+1 {{flops 8, bytes 64}}
  %d = nn.exp %c : tensor<2x4xf32>
  return %d : tensor<2x4xf32>
}

// -----

// Tests that nn.repeat costs L times the summed cost of its layer's body (5 x 42 flops, 5 x 132 bytes), and that the layer function is reported on its own.
// CHECK-LABEL: func.func private @layer
// CHECK-LABEL: func.func @stack
// CHECK: nn.repeat @layer
// TOTALS: remark: function @layer: 2 ops, flops 42, bytes 132
// TOTALS: remark: function @stack: 2 ops, flops 216, bytes 732
// expected-remark @+1 {{function @layer: 2 ops, flops 42, bytes 132}}
func.func private @layer(%h: tensor<2x3xf32>, %w: tensor<3x3xf32>) -> tensor<2x3xf32> {
  // expected-remark @+1 {{flops 36, bytes 84}}
  %0 = nn.matmul %h, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
  // expected-remark @+1 {{flops 6, bytes 48}}
  %1 = nn.exp %0 : tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}
// expected-remark @+1 {{function @stack: 2 ops, flops 216, bytes 732}}
func.func @stack(%h: tensor<2x3xf32>, %w: tensor<5x3x3xf32>) -> tensor<2x3xf32> {
  // expected-remark @+1 {{flops 210, bytes 660}}
  %0 = nn.repeat @layer(%h) params(%w) : (tensor<2x3xf32>, tensor<5x3x3xf32>) -> tensor<2x3xf32>
  // expected-remark @+1 {{flops 6, bytes 72}}
  %1 = nn.add %0, %0 : tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}

// -----

// Tests that a repeat of a layer with several carried values and parameters scales every body op by L = 3 (3 x 16 flops, 3 x 192 bytes).
// CHECK-LABEL: func.func @stack_two_carried
// TOTALS: remark: function @two_carried_layer: 2 ops, flops 16, bytes 192
// TOTALS: remark: function @stack_two_carried: 1 ops, flops 48, bytes 576
// expected-remark @+1 {{function @two_carried_layer: 2 ops, flops 16, bytes 192}}
func.func private @two_carried_layer(%a: tensor<8xf32>, %b: tensor<8xf32>, %p: tensor<8xf32>, %q: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  // expected-remark @+1 {{flops 8, bytes 96}}
  %0 = nn.mul %a, %p : tensor<8xf32>
  // expected-remark @+1 {{flops 8, bytes 96}}
  %1 = nn.add %b, %q : tensor<8xf32>
  return %0, %1 : tensor<8xf32>, tensor<8xf32>
}
// expected-remark @+1 {{function @stack_two_carried: 1 ops, flops 48, bytes 576}}
func.func @stack_two_carried(%a: tensor<8xf32>, %b: tensor<8xf32>, %p: tensor<3x8xf32>, %q: tensor<3x8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  // expected-remark @+1 {{flops 48, bytes 576}}
  %0:2 = nn.repeat @two_carried_layer(%a, %b) params(%p, %q) : (tensor<8xf32>, tensor<8xf32>, tensor<3x8xf32>, tensor<3x8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
  return %0#0, %0#1 : tensor<8xf32>, tensor<8xf32>
}

// -----

// Tests that constants and terminators are free: they are neither reported nor counted.
// CHECK-LABEL: func.func @constants_are_free
// TOTALS: remark: function @constants_are_free: 1 ops, flops 4, bytes 48
// expected-remark @+1 {{function @constants_are_free: 1 ops, flops 4, bytes 48}}
func.func @constants_are_free(%a: tensor<4xf32>) -> tensor<4xf32> {
  %c = arith.constant dense<1.0> : tensor<4xf32>
  // expected-remark @+1 {{flops 4, bytes 48}}
  %0 = nn.add %a, %c : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that an external declaration has no body to cost and gets no report.
// CHECK-LABEL: func.func private @external
// TOTALS-NOT: function @external
func.func private @external(tensor<4xf32>) -> tensor<4xf32>
