// RUN: tessel-opt %s --tessel-split-update-norm --split-input-file --verify-diagnostics

// Tests that a stage with a grad_norm entry already is refused (the pass
// runs once).
module attributes {nn.stage = 0 : i64} {
  // expected-error @+1 {{'func.func' op is already a 'grad_norm' entry; tessel-split-update-norm runs once}}
  func.func @loss_grad_norm(%gw: tensor<8xf32> {nn.grad = "w"}) -> (tensor<f32> {nn.grad_sum_squares}) attributes {nn.entry = "grad_norm"} {
    %ss = nn.sum_squares %gw : (tensor<8xf32>) -> tensor<f32>
    return %ss : tensor<f32>
  }
}

// -----

// Tests that an update clipping by two norms is refused.
module attributes {nn.stage = 0 : i64} {
  func.func @loss_update(%w: tensor<8xf32> {nn.init = #nn.init<zeros>, nn.param = "w"}, %gw: tensor<8xf32> {nn.grad = "w"},
                         %scale: tensor<f32> {nn.grad_scale}) attributes {nn.entry = "update"} {
    %ss = nn.sum_squares %gw : (tensor<8xf32>) -> tensor<f32>
    %c = nn.clip_scale %ss, %scale : tensor<f32>
    // expected-error @+1 {{'nn.clip_scale' op is a second clip scale of the stage's update; a pipeline stage clips by one norm (first at}}
    %c2 = nn.clip_scale %ss, %c : tensor<f32>
    %w2 = nn.optimizer_step sgd %gw, %c2 outs(%w : tensor<8xf32>) {lr = 0.1 : f64} : tensor<8xf32>
    return
  }
}

// -----

// Tests that a norm of what an optimizer step wrote (so not computable
// before the update) is refused.
module attributes {nn.stage = 0 : i64} {
  func.func @loss_update(%w: tensor<8xf32> {nn.init = #nn.init<zeros>, nn.param = "w"}, %gw: tensor<8xf32> {nn.grad = "w"},
                         %scale: tensor<f32> {nn.grad_scale}) attributes {nn.entry = "update"} {
    %w2 = nn.optimizer_step sgd %gw, %scale outs(%w : tensor<8xf32>) {lr = 0.1 : f64} : tensor<8xf32>
    %ss = nn.sum_squares %w2 : (tensor<8xf32>) -> tensor<f32>
    // expected-error @+1 {{'nn.clip_scale' op reads a gradient sum of squares that 'nn.optimizer_step' computes, which a pipeline stage's grad_norm entry cannot run apart from the update (it updates state, writes memory or holds regions)}}
    %c = nn.clip_scale %ss, %scale : tensor<f32>
    return
  }
}
