// RUN: tessel-opt %s --tessel-split-backward --split-input-file --verify-diagnostics

// Tests that a zero-bubble stage whose backward repeats a layer with outs
// (the in-place form tessel-accumulate-in-layers makes after the split)
// is refused.
module attributes {nn.split_backward} {

  func.func private @acc_layer(%h: tensor<4xf32>, %w: tensor<4xf32>, %g: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
    %0 = nn.accumulate %w outs(%g) : tensor<4xf32>
    return %h, %0 : tensor<4xf32>, tensor<4xf32>
  }
  func.func @repeat_outs(%h: tensor<4xf32>, %w: tensor<3x4xf32>, %g: tensor<3x4xf32>) -> tensor<3x4xf32> {
    // expected-error @+1 {{'nn.repeat' op has outs (updated in place, the form tessel-accumulate-in-layers makes after the passes that differentiate, split, shard or cast a repeat); tessel-split-backward takes repeats without outs}}
    %0:2 = nn.repeat @acc_layer(%h) params(%w) outs(%g) : (tensor<4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) -> (tensor<4xf32>, tensor<3x4xf32>)
    return %0#1 : tensor<3x4xf32>
  }
}
