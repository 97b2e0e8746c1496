// RUN: tessel-opt %s --split-input-file --verify-diagnostics

// Tests that rope needs positions, heads and a head dimension.
func.func @rope_rank_2(%x: tensor<16x8xf32>) -> tensor<16x8xf32> {
  // expected-error @+1 {{'nn.rope' op needs [..., S, H, D] (rank >= 3), got rank 2}}
  %0 = nn.rope %x : tensor<16x8xf32>
  return %0 : tensor<16x8xf32>
}

// -----

// Tests that rope rotates pairs, so the head dimension is even.
func.func @rope_odd_head_dim(%x: tensor<2x16x4x7xf32>) -> tensor<2x16x4x7xf32> {
  // expected-error @+1 {{'nn.rope' op rotates pairs: the head dimension 7 must be even}}
  %0 = nn.rope %x : tensor<2x16x4x7xf32>
  return %0 : tensor<2x16x4x7xf32>
}

// -----

// Tests that theta must be positive.
func.func @rope_theta_zero(%x: tensor<2x16x4x8xf32>) -> tensor<2x16x4x8xf32> {
  // expected-error @+1 {{'nn.rope' op theta 0.000000e+00 must be finite and positive}}
  %0 = nn.rope %x {theta = 0.0 : f64} : tensor<2x16x4x8xf32>
  return %0 : tensor<2x16x4x8xf32>
}

// -----

// Tests that theta must be finite.
func.func @rope_theta_inf(%x: tensor<2x16x4x8xf32>) -> tensor<2x16x4x8xf32> {
  // expected-error @+1 {{'nn.rope' op theta INF must be finite and positive}}
  %0 = nn.rope %x {theta = 0x7FF0000000000000 : f64} : tensor<2x16x4x8xf32>
  return %0 : tensor<2x16x4x8xf32>
}

// -----

// Tests that rope rotates floats only.
func.func @rope_integers(%x: tensor<2x16x4x8xi32>) -> tensor<2x16x4x8xi32> {
  // expected-error @+1 {{'nn.rope' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values without encoding}}
  %0 = nn.rope %x : tensor<2x16x4x8xi32>
  return %0 : tensor<2x16x4x8xi32>
}
