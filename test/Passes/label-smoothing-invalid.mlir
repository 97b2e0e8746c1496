// RUN: tessel-opt %s -tessel-mask-ignored-labels --split-input-file --verify-diagnostics
// RUN: not tessel-opt %s --split-input-file -tessel-autodiff 2>&1 | FileCheck %s --check-prefix=GRAD
// RUN: not tessel-opt %s --split-input-file -tessel-plan-memory -tessel-lower-to-runtime 2>&1 | FileCheck %s --check-prefix=LOWER

// GRAD: error: 'nn.cross_entropy' op has an ignore_index, which tessel-autodiff does not take: run tessel-mask-ignored-labels before it
// LOWER: error: 'nn.cross_entropy' op has an ignore_index, which tessel-lower-to-runtime does not take: run tessel-mask-ignored-labels before it

// Tests that the passes after tessel-mask-ignored-labels refuse a smoothed
// loss that also ignores positions and was not masked, naming the pass,
// instead of smoothing over the ignored positions.
func.func @unmasked(%w: tensor<4x6xf32> {nn.param = "w", nn.init = #nn.init<zeros>},
                    %x: tensor<2x4xf32> {nn.input}, %y: tensor<2xi32> {nn.label}) -> tensor<f32> {
  %z = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x6xf32>) -> tensor<2x6xf32>
  %l = nn.cross_entropy %z, %y {ignore_index = -100 : i64, label_smoothing = 0.1 : f64} : (tensor<2x6xf32>, tensor<2xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that the gradient's and the fused pair's smoothing is a weight in
// [0, 1], as the loss's is.
func.func @grad(%z: tensor<2x6xf32>, %y: tensor<2xi32>, %d: tensor<f32>) -> tensor<2x6xf32> {
  // expected-error @+1 {{'nn.cross_entropy_grad' op label_smoothing must be in [0, 1], got 1.5}}
  %g = nn.cross_entropy_grad %z, %y, %d {label_smoothing = 1.5 : f64} : (tensor<2x6xf32>, tensor<2xi32>, tensor<f32>) -> tensor<2x6xf32>
  return %g : tensor<2x6xf32>
}

// -----

func.func @fused(%z: tensor<2x6xf32>, %y: tensor<2xi32>, %d: tensor<f32>) -> (tensor<f32>, tensor<2x6xf32>) {
  // expected-error @+1 {{'nn.cross_entropy_with_grad' op label_smoothing must be in [0, 1], got -5.000000e-01}}
  %l, %g = nn.cross_entropy_with_grad %z, %y, %d {label_smoothing = -0.5 : f64} : (tensor<2x6xf32>, tensor<2xi32>, tensor<f32>) -> (tensor<f32>, tensor<2x6xf32>)
  return %l, %g : tensor<f32>, tensor<2x6xf32>
}

// -----

// Tests that a smoothing and a cap are checked together.
func.func @both(%z: tensor<2x6xf32>, %y: tensor<2xi32>, %d: tensor<f32>) -> tensor<2x6xf32> {
  // expected-error @+1 {{'nn.cross_entropy_grad' op logit_softcap -1.000000e+00 must be finite and positive}}
  %g = nn.cross_entropy_grad %z, %y, %d {label_smoothing = 0.1 : f64, logit_softcap = -1.0 : f64} : (tensor<2x6xf32>, tensor<2xi32>, tensor<f32>) -> tensor<2x6xf32>
  return %g : tensor<2x6xf32>
}
