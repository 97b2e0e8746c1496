// RUN: tessel-opt %s --tessel-defer-gradient-reduction --split-input-file --verify-diagnostics
// RUN: not tessel-opt %s --tessel-defer-gradient-reduction=bucket-mb=-1 2>&1 | FileCheck %s --check-prefix=BUCKET

// BUCKET: bucket-mb must be 0 or more, not -1

// Tests that the pass refuses a module it has already run on.
module {
  shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
  // expected-error @+1 {{is already a 'reduce_grads' entry; tessel-defer-gradient-reduction runs once}}
  func.func @loss_reduce_grads(%g: tensor<4xf32> {nn.grad = "w"}) -> (tensor<4xf32> {nn.grad = "w"}) attributes {nn.entry = "reduce_grads"} {
    %r = shard.all_reduce %g on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    return %r : tensor<4xf32>
  }
}

// -----

module {
  // expected-error @+1 {{is already a 'backward_no_sync' entry; tessel-defer-gradient-reduction runs once}}
  func.func @loss_backward_no_sync(%x: tensor<4xf32> {nn.input}) -> tensor<f32> attributes {nn.entry = "backward_no_sync"} {
    %l = nn.reduce_sum %x dims = [0] : tensor<4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
