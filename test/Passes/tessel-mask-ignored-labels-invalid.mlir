// RUN: tessel-opt %s -tessel-autodiff --split-input-file --verify-diagnostics
// RUN: not tessel-opt %s -tessel-propagate-sharding="mesh=tp=2" -tessel-partition 2>&1 | FileCheck %s --check-prefix=PART
// RUN: not tessel-opt %s -tessel-plan-memory -tessel-lower-to-runtime 2>&1 | FileCheck %s --check-prefix=LOWER

// PART: error: 'nn.cross_entropy' op has an ignore_index, which tessel-partition does not take: run tessel-mask-ignored-labels before it
// LOWER: error: 'nn.cross_entropy' op has an ignore_index, which tessel-lower-to-runtime does not take: run tessel-mask-ignored-labels before it

// Tests that the passes after tessel-mask-ignored-labels refuse a loss it
// has not rewritten, naming it, instead of computing a mean over every
// position.
func.func @unmasked(%w: tensor<4x6xf32> {nn.param = "w", nn.init = #nn.init<zeros>, nn.axes = ["embed", "vocab"]},
                    %x: tensor<2x4xf32> {nn.input}, %y: tensor<2xi32> {nn.label}) -> tensor<f32> {
  %z = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x6xf32>) -> tensor<2x6xf32>
  // expected-error @+1 {{'nn.cross_entropy' op has an ignore_index, which tessel-autodiff does not take: run tessel-mask-ignored-labels before it}}
  %l = nn.cross_entropy %z, %y {ignore_index = -100 : i64} : (tensor<2x6xf32>, tensor<2xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
