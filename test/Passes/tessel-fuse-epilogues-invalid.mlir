// RUN: tessel-opt %s --split-input-file --tessel-fuse-epilogues --tessel-plan-memory --verify-diagnostics

// Tests that the fused GEMM keeps the accumulate's contract: an
// accumulator read after its update in place is refused, at the fused op,
// as the accumulate it replaces would have been.
func.func @accumulator_read_after(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %g: tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<16xf32>) {
  %p = nn.matmul %a, %b : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  // expected-error @+1 {{'nn.matmul_accumulate' op updates operand #2 in place, but a later op still reads it}}
  %g2 = nn.accumulate %p outs(%g) : tensor<4x16xf32>
  %s = nn.reduce_sum %g dims = [0] : tensor<4x16xf32> -> tensor<16xf32>
  return %g2, %s : tensor<4x16xf32>, tensor<16xf32>
}

// -----

// Tests that a fused op the pass made is verified like any other: a bias
// fused into a product of mismatched element types cannot arise, since
// the matmul itself is refused first.
func.func @mismatched_product(%a: tensor<4x8xf32>, %b: tensor<8x16xbf16>, %c: tensor<16xf32>) -> tensor<4x16xf32> {
  // expected-error @+2 {{operand element types differ: 'f32' and 'bf16'}}
  // expected-error @+1 {{'nn.matmul' op failed to infer returned types}}
  %h = nn.matmul %a, %b : (tensor<4x8xf32>, tensor<8x16xbf16>) -> tensor<4x16xf32>
  %cc = nn.broadcast %c dims = [1] : tensor<16xf32> -> tensor<4x16xf32>
  %r = nn.add %h, %cc : tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}
