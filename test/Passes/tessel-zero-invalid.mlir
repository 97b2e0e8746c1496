// RUN: tessel-opt %s -tessel-zero="stage=2" -split-input-file -verify-diagnostics
// RUN: not tessel-opt %s -tessel-zero="stage=5" -split-input-file 2>&1 | FileCheck %s --check-prefix=STAGE

// Tests that a stage outside 0-3 is refused before anything is read, and
// named.
// STAGE: error: tessel-zero: stage must be 0, 1, 2 or 3, not 5

// Tests that the pass needs the training step of tessel-autodiff: a model
// function alone has no gradients or optimizer states to shard.
// expected-error @+1 {{tessel-zero shards the training state, but the module has no training step (nn.entry "backward" and "update"): run tessel-autodiff first}}
module {
  shard.grid @mesh(shape = 4) {nn.axis_names = ["dp"]}
  func.func @loss(%w: tensor<8xf32> {nn.param = "w", nn.init = #nn.init<zeros>}) -> tensor<f32> {
    %l = nn.reduce_sum %w dims = [0] : tensor<8xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Tests that an update must step the update's own parameter arguments.
module {
  shard.grid @mesh(shape = 4) {nn.axis_names = ["dp"]}
  func.func @loss_backward(%w: tensor<8xf32> {nn.param = "w", nn.init = #nn.init<zeros>},
                           %g: tensor<8xf32> {nn.grad = "w"}) -> (tensor<f32>, tensor<8xf32>)
      attributes {nn.entry = "backward"} {
    %l = nn.reduce_sum %w dims = [0] : tensor<8xf32> -> tensor<f32>
    return %l, %g : tensor<f32>, tensor<8xf32>
  }
  func.func @loss_update(%w: tensor<8xf32> {nn.param = "w", nn.init = #nn.init<zeros>},
                         %g: tensor<8xf32> {nn.grad = "w"}, %m: tensor<8xf32> {nn.state = "w.momentum"},
                         %scale: tensor<f32> {nn.grad_scale}) -> (tensor<8xf32>, tensor<8xf32>)
      attributes {nn.entry = "update"} {
    %w2 = nn.add %w, %w : tensor<8xf32>
    // expected-error @+1 {{'nn.optimizer_step' op updates a value that is not a parameter of 'loss_update'; tessel-zero needs the update of tessel-autodiff}}
    %s:2 = nn.optimizer_step sgd %g, %scale outs(%w2, %m : tensor<8xf32>, tensor<8xf32>) {momentum = 9.000000e-01 : f64} : tensor<8xf32>
    return %s#0, %s#1 : tensor<8xf32>, tensor<8xf32>
  }
}

// -----

// Tests that an nn.zero chunk keeps exactly the block's leading `dims`
// dimensions, then one dimension: dims = 1 on a rank-1 argument is wrong.
// expected-error @+1 {{'func.func' op argument #0: 'nn.zero' must be {block = array<i64: ...>, dims = k}: the block before the split, whose first k dimensions the argument 'tensor<8xf32>' keeps, then one chunk of the rest}}
func.func @zero_wrong_dims(%m: tensor<8xf32> {nn.zero = {block = array<i64: 4, 8>, dims = 1 : i64}}) {
  return
}

// -----

// Tests that the kept leading dimensions must be the block's.
// expected-error @+1 {{'func.func' op argument #0: 'nn.zero' must be {block = array<i64: ...>, dims = k}}}
func.func @zero_other_leading_dims(%m: tensor<3x2xf32> {nn.zero = {block = array<i64: 4, 8>, dims = 1 : i64}}) {
  return
}

// -----

// Tests that a chunk cannot hold more elements than the block has.
// expected-error @+1 {{'func.func' op argument #0: 'nn.zero' must be {block = array<i64: ...>, dims = k}}}
func.func @zero_chunk_too_large(%m: tensor<33xf32> {nn.zero = {block = array<i64: 4, 8>, dims = 0 : i64}}) {
  return
}

// -----

// Tests that nn.zero names the block it splits.
// expected-error @+1 {{'func.func' op argument #0: 'nn.zero' must be {block = array<i64: ...>, dims = k}}}
func.func @zero_missing_block(%m: tensor<8xf32> {nn.zero = {dims = 0 : i64}}) {
  return
}

// -----

// Tests that nn.zero has no other entries than the block, dims and axes.
// expected-error @+1 {{'func.func' op argument #0: 'nn.zero' must be {block = array<i64: ...>, dims = k}}}
func.func @zero_extra_entry(%m: tensor<8xf32> {nn.zero = {block = array<i64: 32>, dims = 0 : i64, group = 4 : i64}}) {
  return
}

// -----

// Tests that nn.zero's axes are mesh axis names, at least one.
// expected-error @+1 {{'nn.zero' must be {block = array<i64: ...>, dims = k}: the block before the split, whose first k dimensions the argument 'tensor<8xf32>' keeps, then one chunk of the rest (and axes = ["dp", ...], the mesh axes it is a chunk over, where not dp alone)}}
func.func @zero_no_axes(%m: tensor<8xf32> {nn.zero = {axes = [], block = array<i64: 32>, dims = 0 : i64}}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op argument #0: 'nn.zero' must be {block = array<i64: ...>, dims = k}}}
func.func @zero_axis_not_a_name(%m: tensor<8xf32> {nn.zero = {axes = [1], block = array<i64: 32>, dims = 0 : i64}}) {
  return
}

// -----

// Tests that a module's ZeRO stage is 0 to 3.
// expected-error @+1 {{'builtin.module' op 'nn.zero_stage' must be a ZeRO stage 0-3 on a module}}
module attributes {nn.zero_stage = 7 : i64} {
}

// -----

func.func private @acc_layer(%h: tensor<4xf32>, %w: tensor<4xf32>, %g: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = nn.accumulate %w outs(%g) : tensor<4xf32>
  return %h, %0 : tensor<4xf32>, tensor<4xf32>
}
// Tests that a repeat with outs, the form a later pass makes, is refused.
func.func @repeat_outs(%h: tensor<4xf32>, %w: tensor<3x4xf32>, %g: tensor<3x4xf32>) -> tensor<3x4xf32> {
  // expected-error @+1 {{'nn.repeat' op has outs (updated in place, the form tessel-accumulate-in-layers makes after the passes that differentiate, split, shard or cast a repeat); tessel-zero takes repeats without outs}}
  %0:2 = nn.repeat @acc_layer(%h) params(%w) outs(%g) : (tensor<4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) -> (tensor<4xf32>, tensor<3x4xf32>)
  return %0#1 : tensor<3x4xf32>
}

// -----

// Tests that ZeRO needs a data axis to shard over: dp, cp or both.
// expected-error @+1 {{tessel-zero shards the training state over the mesh axes 'dp' and 'cp', and mesh tp=2 has neither (e.g. --mesh dp=4)}}
module {
  shard.grid @mesh(shape = 2) {nn.axis_names = ["tp"]}
}
