// RUN: tessel-opt %s -tessel-smooth-labels --split-input-file --verify-diagnostics
// RUN: not tessel-opt %s --split-input-file -tessel-autodiff 2>&1 | FileCheck %s --check-prefix=GRAD
// RUN: not tessel-opt %s --split-input-file -tessel-plan-memory -tessel-lower-to-runtime 2>&1 | FileCheck %s --check-prefix=LOWER

// GRAD: error: 'nn.cross_entropy' op has a label_smoothing, which tessel-autodiff does not take: run tessel-smooth-labels before it
// LOWER: error: 'nn.cross_entropy' op has a label_smoothing, which tessel-lower-to-runtime does not take: run tessel-smooth-labels before it

// Tests that the passes after tessel-smooth-labels refuse a loss it has not
// rewritten, naming it, instead of training on the one-hot target.
func.func @smoothed(%w: tensor<4x6xf32> {nn.param = "w", nn.init = #nn.init<zeros>},
                    %x: tensor<2x4xf32> {nn.input}, %y: tensor<2xi32> {nn.label}) -> tensor<f32> {
  %z = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x6xf32>) -> tensor<2x6xf32>
  %l = nn.cross_entropy %z, %y {label_smoothing = 0.1 : f64} : (tensor<2x6xf32>, tensor<2xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a loss that also ignores positions must be masked first.
func.func @unmasked(%z: tensor<2x6xf32>, %y: tensor<2xi32> {nn.label}) -> tensor<f32> {
  // expected-error @+1 {{'nn.cross_entropy' op ignores positions and smooths labels: run tessel-mask-ignored-labels before tessel-smooth-labels}}
  %l = nn.cross_entropy %z, %y {ignore_index = -100 : i64, label_smoothing = 0.1 : f64} : (tensor<2x6xf32>, tensor<2xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
