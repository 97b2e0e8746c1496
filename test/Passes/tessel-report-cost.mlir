// RUN: tessel-opt %s -tessel-report-cost --split-input-file --verify-diagnostics | FileCheck %s

// Tests that every op gets its flops and bytes and the function its totals.
// CHECK-LABEL: func.func @matmul_then_gelu
// expected-remark @+1 {{function @matmul_then_gelu: 2 ops, flops 56, bytes 168}}
func.func @matmul_then_gelu(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
  // expected-remark @+1 {{flops 48, bytes 104}}
  %c = nn.matmul %a, %b : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  // expected-remark @+1 {{flops 8, bytes 64}}
  %d = nn.exp %c : tensor<2x4xf32>
  return %d : tensor<2x4xf32>
}
