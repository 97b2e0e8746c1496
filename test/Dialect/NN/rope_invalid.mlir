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

// -----

// Tests that Llama 3.1's scaling has its four values.
func.func @rope_scaling_size(%x: tensor<2x16x4x8xf32>) -> tensor<2x16x4x8xf32> {
  // expected-error @+1 {{'nn.rope' op scaling holds factor, low, high and original (4 values), got 3}}
  %0 = nn.rope %x {scaling = array<f64: 8.0, 1.0, 4.0>} : tensor<2x16x4x8xf32>
  return %0 : tensor<2x16x4x8xf32>
}

// -----

// Tests that the scaling's high frequency factor exceeds its low one.
func.func @rope_scaling_order(%x: tensor<2x16x4x8xf32>) -> tensor<2x16x4x8xf32> {
  // expected-error @+1 {{'nn.rope' op scaling needs factor >= 1, 0 < low < high and original > 0 (all finite), got [8.000000e+00, 4.000000e+00, 1.000000e+00, 8.192000e+03]}}
  %0 = nn.rope %x {scaling = array<f64: 8.0, 4.0, 1.0, 8192.0>} : tensor<2x16x4x8xf32>
  return %0 : tensor<2x16x4x8xf32>
}

// -----

// Tests that every layer's theta is finite and positive.
func.func @rope_layer_theta_zero(%x: tensor<1x4x2x8xf32>) -> tensor<1x4x2x8xf32> {
  // expected-error @+1 {{'nn.rope' op layer_thetas[1] 0.000000e+00 must be finite and positive}}
  %0 = nn.rope %x {layer_thetas = array<f64: 10000.0, 0.0>} : tensor<1x4x2x8xf32>
  return %0 : tensor<1x4x2x8xf32>
}

// -----

// Tests that per-layer scalings hold four values a layer.
func.func @rope_layer_scalings_size(%x: tensor<1x4x2x8xf32>) -> tensor<1x4x2x8xf32> {
  // expected-error @+1 {{'nn.rope' op layer_scalings holds four values a layer (factor, low, high, original), got 6}}
  %0 = nn.rope %x {layer_scalings = array<f64: 0.0, 0.0, 0.0, 0.0, 8.0, 1.0>} : tensor<1x4x2x8xf32>
  return %0 : tensor<1x4x2x8xf32>
}

// -----

// Tests that a layer's scaling is none (four zeros) or a valid one.
func.func @rope_layer_scaling_invalid(%x: tensor<1x4x2x8xf32>) -> tensor<1x4x2x8xf32> {
  // expected-error @+1 {{'nn.rope' op layer_scalings[1] needs factor >= 1, 0 < low < high and original > 0 (all finite), got [8.000000e+00, 2.000000e+00, 1.000000e+00, 1.000000e+00]}}
  %0 = nn.rope %x {layer_scalings = array<f64: 0.0, 0.0, 0.0, 0.0, 8.0, 2.0, 1.0, 1.0>} : tensor<1x4x2x8xf32>
  return %0 : tensor<1x4x2x8xf32>
}

// -----

// Tests that a rope has one scaling or per-layer ones.
func.func @rope_scaling_and_layer_scalings(%x: tensor<1x4x2x8xf32>) -> tensor<1x4x2x8xf32> {
  // expected-error @+1 {{'nn.rope' op has a scaling and layer_scalings: give one}}
  %0 = nn.rope %x {scaling = array<f64: 8.0, 1.0, 2.0, 1.0>, layer_scalings = array<f64: 8.0, 1.0, 2.0, 1.0>} : tensor<1x4x2x8xf32>
  return %0 : tensor<1x4x2x8xf32>
}

// -----

// Tests that YaRN's scaling has its five values.
func.func @rope_yarn_size(%x: tensor<1x4x2x8xf32>) -> tensor<1x4x2x8xf32> {
  // expected-error @+1 {{'nn.rope' op yarn holds factor, beta_fast, beta_slow, original and truncate (5 values), got 4}}
  %0 = nn.rope %x {yarn = array<f64: 4.0, 32.0, 1.0, 4096.0>} : tensor<1x4x2x8xf32>
  return %0 : tensor<1x4x2x8xf32>
}

// -----

// Tests that YaRN's truncate is 0 or 1 and its factor at least 1.
func.func @rope_yarn_values(%x: tensor<1x4x2x8xf32>) -> tensor<1x4x2x8xf32> {
  // expected-error @+1 {{'nn.rope' op yarn needs factor >= 1, positive betas and original (all finite) and truncate 0 or 1, got [5.000000e-01, 3.200000e+01, 1.000000e+00, 4.096000e+03, 2.000000e+00]}}
  %0 = nn.rope %x {yarn = array<f64: 0.5, 32.0, 1.0, 4096.0, 2.0>} : tensor<1x4x2x8xf32>
  return %0 : tensor<1x4x2x8xf32>
}

// -----

// Tests that YaRN is not given beside Llama 3.1's scaling.
func.func @rope_yarn_and_scaling(%x: tensor<1x4x2x8xf32>) -> tensor<1x4x2x8xf32> {
  // expected-error @+1 {{'nn.rope' op has yarn and a scaling: give one}}
  %0 = nn.rope %x {scaling = array<f64: 8.0, 1.0, 2.0, 1.0>, yarn = array<f64: 4.0, 32.0, 1.0, 4096.0, 1.0>} : tensor<1x4x2x8xf32>
  return %0 : tensor<1x4x2x8xf32>
}

// -----

// Tests that YaRN's ramp needs theta > 1 (it divides by ln theta).
func.func @rope_yarn_theta(%x: tensor<1x4x2x8xf32>) -> tensor<1x4x2x8xf32> {
  // expected-error @+1 {{'nn.rope' op yarn needs every theta > 1}}
  %0 = nn.rope %x {theta = 1.0 : f64, yarn = array<f64: 4.0, 32.0, 1.0, 4096.0, 1.0>} : tensor<1x4x2x8xf32>
  return %0 : tensor<1x4x2x8xf32>
}

// -----

// Tests that a partial rope turns an even width within the head.
func.func @rope_rotary_odd(%x: tensor<1x4x2x8xf32>) -> tensor<1x4x2x8xf32> {
  // expected-error @+1 {{'nn.rope' op rotary_dim 3 must be even and in (0, 8]}}
  %0 = nn.rope %x {rotary_dim = 3 : i64} : tensor<1x4x2x8xf32>
  return %0 : tensor<1x4x2x8xf32>
}

// -----

func.func @rope_rotary_wide(%x: tensor<1x4x2x8xf32>) -> tensor<1x4x2x8xf32> {
  // expected-error @+1 {{'nn.rope' op rotary_dim 10 must be even and in (0, 8]}}
  %0 = nn.rope %x {rotary_dim = 10 : i64} : tensor<1x4x2x8xf32>
  return %0 : tensor<1x4x2x8xf32>
}

// -----

// Tests that a partial rope takes no Llama 3.1 or YaRN scaling.
func.func @rope_rotary_yarn(%x: tensor<1x4x2x8xf32>) -> tensor<1x4x2x8xf32> {
  // expected-error @+1 {{'nn.rope' op turns part of each head (rotary_dim): not with a Llama 3.1 or YaRN scaling}}
  %0 = nn.rope %x {rotary_dim = 4 : i64, yarn = array<f64: 4.0, 32.0, 1.0, 4096.0, 1.0>} : tensor<1x4x2x8xf32>
  return %0 : tensor<1x4x2x8xf32>
}

// -----

// Tests that LongRoPE holds a factor for each pair turned: 2 of a
// rotary_dim of 4.
func.func @rope_longrope_count(%x: tensor<1x4x2x8xf32>) -> tensor<1x4x2x8xf32> {
  // expected-error @+1 {{'nn.rope' op longrope holds a factor a pair (2), got 4}}
  %0 = nn.rope %x {rotary_dim = 4 : i64, longrope = array<f64: 1.0, 1.0, 1.0, 1.0>} : tensor<1x4x2x8xf32>
  return %0 : tensor<1x4x2x8xf32>
}

// -----

func.func @rope_longrope_value(%x: tensor<1x4x2x8xf32>) -> tensor<1x4x2x8xf32> {
  // expected-error @+1 {{'nn.rope' op longrope[1] -2.000000e+00 must be finite and positive}}
  %0 = nn.rope %x {longrope = array<f64: 1.0, -2.0, 1.0, 1.0>} : tensor<1x4x2x8xf32>
  return %0 : tensor<1x4x2x8xf32>
}

// -----

// Tests that LongRoPE is not given beside Llama 3.1's scaling.
func.func @rope_longrope_and_scaling(%x: tensor<1x4x2x8xf32>) -> tensor<1x4x2x8xf32> {
  // expected-error @+1 {{'nn.rope' op has longrope and another scaling: give one}}
  %0 = nn.rope %x {scaling = array<f64: 8.0, 1.0, 2.0, 1.0>, longrope = array<f64: 1.0, 1.0, 1.0, 1.0>} : tensor<1x4x2x8xf32>
  return %0 : tensor<1x4x2x8xf32>
}

// -----

// Tests that LongRoPE's factors fit the runtime's 128 pairs.
func.func @rope_longrope_pairs(%x: tensor<1x2x1x258xf32>) -> tensor<1x2x1x258xf32> {
  // expected-error @+1 {{'nn.rope' op longrope turns at most 128 pairs, got 129}}
  %0 = nn.rope %x {longrope = array<f64: 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0>} : tensor<1x2x1x258xf32>
  return %0 : tensor<1x2x1x258xf32>
}

// -----

// Tests that the attention factor is finite and positive, and not beside
// YaRN (whose factor scales the scores).
func.func @rope_attention_factor(%x: tensor<1x4x2x8xf32>) -> tensor<1x4x2x8xf32> {
  // expected-error @+1 {{'nn.rope' op attention_factor 0.000000e+00 must be finite and positive}}
  %0 = nn.rope %x {attention_factor = 0.0 : f64} : tensor<1x4x2x8xf32>
  return %0 : tensor<1x4x2x8xf32>
}

// -----

func.func @rope_attention_factor_yarn(%x: tensor<1x4x2x8xf32>) -> tensor<1x4x2x8xf32> {
  // expected-error @+1 {{'nn.rope' op scales cos and sin (attention_factor): not with a Llama 3.1 or YaRN scaling}}
  %0 = nn.rope %x {attention_factor = 1.2 : f64, yarn = array<f64: 4.0, 32.0, 1.0, 4096.0, 1.0>} : tensor<1x4x2x8xf32>
  return %0 : tensor<1x4x2x8xf32>
}
