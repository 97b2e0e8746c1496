// RUN: tessel-opt %s --split-input-file --verify-diagnostics

// Tests that softmax rejects a rank-0 tensor.
func.func @softmax_rank_0(%x: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{'nn.softmax' op needs a tensor of rank >= 1}}
  %0 = nn.softmax %x : tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that softmax rejects a dim at or past the rank.
func.func @softmax_dim_too_large(%x: tensor<8x10xf32>) -> tensor<8x10xf32> {
  // expected-error @+1 {{'nn.softmax' op dim 2 is out of range for rank 2}}
  %0 = nn.softmax %x {dim = 2 : i64} : tensor<8x10xf32>
  return %0 : tensor<8x10xf32>
}

// -----

// Tests that softmax rejects a negative dim below -rank.
func.func @softmax_dim_too_negative(%x: tensor<8x10xf32>) -> tensor<8x10xf32> {
  // expected-error @+1 {{'nn.softmax' op dim -3 is out of range for rank 2}}
  %0 = nn.softmax %x {dim = -3 : i64} : tensor<8x10xf32>
  return %0 : tensor<8x10xf32>
}

// -----

// Tests that softmax rejects an integer tensor.
func.func @softmax_integer(%x: tensor<8x10xi32>) -> tensor<8x10xi32> {
  // expected-error @+1 {{'nn.softmax' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values without encoding, but got 'tensor<8x10xi32>'}}
  %0 = nn.softmax %x : tensor<8x10xi32>
  return %0 : tensor<8x10xi32>
}

// -----

// Tests that softmax rejects a result type other than its operand's (generic form).
func.func @softmax_result_type(%x: tensor<8x10xf32>) -> tensor<8x5xf32> {
  // expected-error @+1 {{'nn.softmax' op requires the same type for all operands and results}}
  %0 = "nn.softmax"(%x) : (tensor<8x10xf32>) -> tensor<8x5xf32>
  return %0 : tensor<8x5xf32>
}

// -----

// Tests that layer_norm rejects a rank-0 input.
func.func @layer_norm_rank_0(%x: tensor<f32>, %g: tensor<1xf32>) -> tensor<f32> {
  // expected-error @+2 {{input must have rank >= 1}}
  // expected-error @+1 {{'nn.layer_norm' op failed to infer returned types}}
  %0 = nn.layer_norm %x, %g, %g : (tensor<f32>, tensor<1xf32>, tensor<1xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that layer_norm rejects a gamma not the size of the last dimension.
func.func @layer_norm_gamma_size(%x: tensor<8x16xf32>, %g: tensor<8xf32>, %b: tensor<16xf32>) -> tensor<8x16xf32> {
  // expected-error @+2 {{gamma must be 'tensor<16xf32>' (the size of the last dimension), got 'tensor<8xf32>'}}
  // expected-error @+1 {{'nn.layer_norm' op failed to infer returned types}}
  %0 = nn.layer_norm %x, %g, %b : (tensor<8x16xf32>, tensor<8xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// Tests that layer_norm rejects a beta of another element type than the input.
func.func @layer_norm_beta_type(%x: tensor<8x16xf32>, %g: tensor<16xf32>, %b: tensor<16xbf16>) -> tensor<8x16xf32> {
  // expected-error @+2 {{beta must be 'tensor<16xf32>' (the size of the last dimension), got 'tensor<16xbf16>'}}
  // expected-error @+1 {{'nn.layer_norm' op failed to infer returned types}}
  %0 = nn.layer_norm %x, %g, %b : (tensor<8x16xf32>, tensor<16xf32>, tensor<16xbf16>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// Tests that layer_norm rejects a declared result type other than the input's.
func.func @layer_norm_result_type(%x: tensor<8x16xf32>, %g: tensor<16xf32>) -> tensor<8x16xbf16> {
  // expected-error @+2 {{'nn.layer_norm' op inferred type(s) 'tensor<8x16xf32>' are incompatible with return type(s) of operation 'tensor<8x16xbf16>'}}
  // expected-error @+1 {{'nn.layer_norm' op failed to infer returned types}}
  %0 = nn.layer_norm %x, %g, %g : (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<8x16xbf16>
  return %0 : tensor<8x16xbf16>
}

// -----

// Tests that layer_norm rejects a zero epsilon.
func.func @layer_norm_epsilon(%x: tensor<8x16xf32>, %g: tensor<16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'nn.layer_norm' op epsilon must be positive, got 0.000000e+00}}
  %0 = nn.layer_norm %x, %g, %g {epsilon = 0.0 : f64} : (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// Tests that rms_norm rejects a rank-0 input.
func.func @rms_norm_rank_0(%x: tensor<f32>, %g: tensor<1xf32>) -> tensor<f32> {
  // expected-error @+2 {{input must have rank >= 1}}
  // expected-error @+1 {{'nn.rms_norm' op failed to infer returned types}}
  %0 = nn.rms_norm %x, %g : (tensor<f32>, tensor<1xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that rms_norm rejects a gamma that is not a vector.
func.func @rms_norm_gamma_rank(%x: tensor<8x16xf32>, %g: tensor<1x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+2 {{gamma must be 'tensor<16xf32>' (the size of the last dimension), got 'tensor<1x16xf32>'}}
  // expected-error @+1 {{'nn.rms_norm' op failed to infer returned types}}
  %0 = nn.rms_norm %x, %g : (tensor<8x16xf32>, tensor<1x16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// Tests that rms_norm rejects a negative epsilon.
func.func @rms_norm_epsilon(%x: tensor<8x16xf32>, %g: tensor<16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'nn.rms_norm' op epsilon must be positive, got -1.000000e+00}}
  %0 = nn.rms_norm %x, %g {epsilon = -1.0 : f64} : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// Tests that batch_norm rejects an input of rank below 2.
func.func @batch_norm_rank_1(%x: tensor<16xf32>, %g: tensor<16xf32>) -> tensor<16xf32> {
  // expected-error @+2 {{input must be [batch, features, ...], got 'tensor<16xf32>'}}
  // expected-error @+1 {{'nn.batch_norm' op failed to infer returned types}}
  %0 = nn.batch_norm %x, %g, %g : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  return %0 : tensor<16xf32>
}

// -----

// Tests that batch_norm rejects a feature_dim at or past the rank.
func.func @batch_norm_feature_dim_too_large(%x: tensor<8x16xf32>, %g: tensor<16xf32>) -> tensor<8x16xf32> {
  // expected-error @+2 {{feature_dim 2 is out of range for rank 2}}
  // expected-error @+1 {{'nn.batch_norm' op failed to infer returned types}}
  %0 = nn.batch_norm %x, %g, %g {feature_dim = 2 : i64} : (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// Tests that batch_norm rejects a negative feature_dim.
func.func @batch_norm_feature_dim_negative(%x: tensor<8x16xf32>, %g: tensor<16xf32>) -> tensor<8x16xf32> {
  // expected-error @+2 {{feature_dim -1 is out of range for rank 2}}
  // expected-error @+1 {{'nn.batch_norm' op failed to infer returned types}}
  %0 = nn.batch_norm %x, %g, %g {feature_dim = -1 : i64} : (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// Tests that batch_norm on NCHW wants gamma of the channel count, not of the last dimension.
func.func @batch_norm_gamma_size(%x: tensor<2x3x4x5xf32>, %g: tensor<5xf32>) -> tensor<2x3x4x5xf32> {
  // expected-error @+2 {{gamma must be 'tensor<3xf32>' (the size of the feature dimension), got 'tensor<5xf32>'}}
  // expected-error @+1 {{'nn.batch_norm' op failed to infer returned types}}
  %0 = nn.batch_norm %x, %g, %g : (tensor<2x3x4x5xf32>, tensor<5xf32>, tensor<5xf32>) -> tensor<2x3x4x5xf32>
  return %0 : tensor<2x3x4x5xf32>
}

// -----

// Tests that batch_norm rejects a beta of the wrong size.
func.func @batch_norm_beta_size(%x: tensor<2x3x4x5xf32>, %g: tensor<3xf32>, %b: tensor<4xf32>) -> tensor<2x3x4x5xf32> {
  // expected-error @+2 {{beta must be 'tensor<3xf32>' (the size of the feature dimension), got 'tensor<4xf32>'}}
  // expected-error @+1 {{'nn.batch_norm' op failed to infer returned types}}
  %0 = nn.batch_norm %x, %g, %b : (tensor<2x3x4x5xf32>, tensor<3xf32>, tensor<4xf32>) -> tensor<2x3x4x5xf32>
  return %0 : tensor<2x3x4x5xf32>
}

// -----

// Tests that batch_norm rejects a negative epsilon.
func.func @batch_norm_epsilon(%x: tensor<8x16xf32>, %g: tensor<16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'nn.batch_norm' op epsilon must be positive, got -1.000000e-05}}
  %0 = nn.batch_norm %x, %g, %g {epsilon = -1.0e-5 : f64} : (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// Tests that add_norm needs its two addends of one type.
func.func @add_norm_addends(%h: tensor<4x8xf32>, %o: tensor<4x8xbf16>, %g: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  // expected-error @+2 {{rhs must have type 'tensor<4x8xf32>', got 'tensor<4x8xbf16>'}}
  // expected-error @+1 {{'nn.add_norm' op failed to infer returned types}}
  %s, %y = nn.add_norm %h, %o, %g {epsilon = 1.0e-5 : f64} : (tensor<4x8xf32>, tensor<4x8xbf16>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  return %s, %y : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests that add_norm checks beta against the last dimension.
func.func @add_norm_beta(%h: tensor<4x8xf32>, %g: tensor<8xf32>, %b: tensor<4xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  // expected-error @+2 {{beta}}
  // expected-error @+1 {{'nn.add_norm' op failed to infer returned types}}
  %s, %y = nn.add_norm %h, %h, %g, %b {epsilon = 1.0e-5 : f64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<4xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  return %s, %y : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests that add_norm rejects a rank-0 sum and a non-positive epsilon.
func.func @add_norm_scalar(%h: tensor<f32>, %g: tensor<1xf32>) -> (tensor<f32>, tensor<f32>) {
  // expected-error @+2 {{operands must have rank >= 1}}
  // expected-error @+1 {{'nn.add_norm' op failed to infer returned types}}
  %s, %y = nn.add_norm %h, %h, %g {epsilon = 1.0e-5 : f64} : (tensor<f32>, tensor<f32>, tensor<1xf32>) -> (tensor<f32>, tensor<f32>)
  return %s, %y : tensor<f32>, tensor<f32>
}

// -----

func.func @add_norm_epsilon(%h: tensor<4x8xf32>, %g: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  // expected-error @+1 {{'nn.add_norm' op epsilon must be positive, got 0.000000e+00}}
  %s, %y = nn.add_norm %h, %h, %g {epsilon = 0.0 : f64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  return %s, %y : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests that norm_grad_add needs the residual gradient of the input's type.
func.func @norm_grad_add_residual(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %r: tensor<8x4xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  // expected-error @+2 {{residual must have type 'tensor<4x8xf32>', got 'tensor<8x4xf32>'}}
  // expected-error @+1 {{'nn.norm_grad_add' op failed to infer returned types}}
  %dx, %dg = nn.norm_grad_add %x, %g, %x, %r {epsilon = 1.0e-5 : f64, rms} : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>, tensor<8x4xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
  return %dx, %dg : tensor<4x8xf32>, tensor<8xf32>
}

// -----

// Tests that a layer norm's gradient (no rms) must return dbeta.
func.func @norm_grad_add_dbeta(%x: tensor<4x8xf32>, %g: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  // expected-error @+2 {{'nn.norm_grad_add' op inferred type(s) 'tensor<4x8xf32>', 'tensor<8xf32>', 'tensor<8xf32>' are incompatible with return type(s) of operation 'tensor<4x8xf32>', 'tensor<8xf32>'}}
  // expected-error @+1 {{'nn.norm_grad_add' op failed to infer returned types}}
  %dx, %dg = nn.norm_grad_add %x, %g, %x, %x {epsilon = 1.0e-5 : f64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
  return %dx, %dg : tensor<4x8xf32>, tensor<8xf32>
}
