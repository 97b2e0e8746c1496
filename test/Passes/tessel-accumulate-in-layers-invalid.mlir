// RUN: tessel-opt %s --tessel-accumulate-in-layers --split-input-file --verify-diagnostics

// tessel-accumulate-in-layers leaves every repeat it cannot change as it
// is; what it reads is checked by the verifier before it runs.

func.func private @acc_layer(%h: tensor<4xf32>, %w: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  return %h, %w : tensor<4xf32>, tensor<4xf32>
}
// Tests that a repeat whose layer does not take its outs' slices is
// refused before the pass adds more.
func.func @outs_without_slices(%h: tensor<4xf32>, %w: tensor<3x4xf32>, %g: tensor<3x4xf32>, %k: tensor<3x4xf32>) -> tensor<3x4xf32> {
  // expected-error @+1 {{'nn.repeat' op layer @acc_layer has type '(tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)' but this repeat needs '(tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)'}}
  %0:2 = nn.repeat @acc_layer(%h) params(%w) outs(%g) : (tensor<4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) -> (tensor<4xf32>, tensor<3x4xf32>)
  %1 = nn.accumulate %0#1 outs(%k) : tensor<3x4xf32>
  return %1 : tensor<3x4xf32>
}
