// RUN: tessel-opt %s --split-input-file --pass-pipeline="builtin.module(builtin.module(tessel-keep-stage-activations))" --verify-diagnostics

// Tests that a stage whose activations were already kept (the pass run
// twice: its forward_keep is there) is refused.
module {
  module attributes {nn.keep_activations} {
    // expected-error @+1 {{is a 'forward_keep' entry: tessel-keep-stage-activations runs once, before the passes that derive entries from the backward}}
    func.func @f_forward_keep(%x: tensor<4xf32> {nn.stage_input}) -> (tensor<4xf32> {nn.stage_output}) attributes {nn.entry = "forward_keep"} {
      return %x : tensor<4xf32>
    }
    func.func @f_backward(%x: tensor<4xf32> {nn.stage_input}, %gw: tensor<4xf32> {nn.grad = "w"}) -> (tensor<4xf32> {nn.grad = "w"}) attributes {nn.entry = "backward"} {
      return %gw : tensor<4xf32>
    }
  }
}

// -----

// Tests that a zero-bubble stage already split (its backward_input) is
// refused: the split reads the backward this pass makes.
module {
  module attributes {nn.keep_activations} {
    // expected-error @+1 {{is a 'backward_input' entry: tessel-keep-stage-activations runs once, before the passes that derive entries from the backward}}
    func.func @f_backward_input(%x: tensor<4xf32> {nn.input}) -> tensor<f32> attributes {nn.entry = "backward_input"} {
      %l = nn.reduce_sum %x dims = [0] : tensor<4xf32> -> tensor<f32>
      return %l : tensor<f32>
    }
  }
}

// -----

// Tests that a backward returning no loss and no output activations (only
// gradients) is refused: nothing tells its forward part.
module {
  module attributes {nn.keep_activations} {
    // expected-error @+1 {{returns neither a loss nor output activations: tessel-keep-stage-activations cannot tell its forward part}}
    func.func @f_backward(%x: tensor<4xf32> {nn.stage_input}, %gw: tensor<4xf32> {nn.grad = "w"}) -> (tensor<4xf32> {nn.grad = "w"}) attributes {nn.entry = "backward"} {
      %a = nn.accumulate %x outs(%gw) : tensor<4xf32>
      return %a : tensor<4xf32>
    }
  }
}

// -----

// Tests that a backward not named as tessel-autodiff names it is refused
// (its forward_keep is named after it).
module {
  module attributes {nn.keep_activations} {
    // expected-error @+1 {{is a backward entry whose name does not end in '_backward' (tessel-autodiff names it so)}}
    func.func @grads(%x: tensor<4xf32> {nn.input}, %gw: tensor<4xf32> {nn.grad = "w"}) -> (tensor<f32>, tensor<4xf32> {nn.grad = "w"}) attributes {nn.entry = "backward"} {
      %l = nn.reduce_sum %x dims = [0] : tensor<4xf32> -> tensor<f32>
      %a = nn.accumulate %x outs(%gw) : tensor<4xf32>
      return %l, %a : tensor<f32>, tensor<4xf32>
    }
  }
}
