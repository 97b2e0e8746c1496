// RUN: tessel-opt %s --tessel-split-update-norm --split-input-file | FileCheck %s

// Tests that a clipping stage's sum of squares (and the all-reduce that
// completes it over dp) moves into @loss_grad_norm, which takes only the
// gradients it reads and returns the stage's part (nn.grad_sum_squares),
// and that the update's clip scale reads the pipeline's total from a new
// argument instead; the optimizer steps stay.
// CHECK-LABEL: module @stage1
// CHECK: func.func @loss_update(%[[W:.*]]: tensor<8xf32> {nn.init = #nn.init<zeros>, nn.param = "w"}, %[[E:.*]]: tensor<4xf32> {nn.init = #nn.init<zeros>, nn.param = "e", nn.tied_copy}, %[[GW:.*]]: tensor<8xf32> {nn.grad = "w"}, %[[GE:.*]]: tensor<4xf32> {nn.grad = "e"}, %[[S:.*]]: tensor<f32> {nn.grad_scale}, %[[T:.*]]: tensor<f32> {nn.grad_sum_squares}) attributes {nn.entry = "update"}
// CHECK-NEXT: %[[C:.*]] = nn.clip_scale %[[T]], %[[S]] {max_norm = 5.000000e-01 : f64} : tensor<f32>
// CHECK-NEXT: nn.optimizer_step sgd %[[GW]], %[[C]] outs(%[[W]] : tensor<8xf32>)
// CHECK-NEXT: nn.optimizer_step sgd %[[GE]], %[[C]] outs(%[[E]] : tensor<4xf32>)
// CHECK-NEXT: return
// CHECK: func.func @loss_grad_norm(%[[G:.*]]: tensor<8xf32> {nn.grad = "w"}) -> (tensor<f32> {nn.grad_sum_squares}) attributes {nn.entry = "grad_norm"}
// CHECK-NEXT: %[[P:.*]] = nn.sum_squares %[[G]] : (tensor<8xf32>) -> tensor<f32>
// CHECK-NEXT: %[[A:.*]] = shard.all_reduce %[[P]] on @mesh grid_axes = [0]
// CHECK-NEXT: return %[[A]] : tensor<f32>
module @stage1 attributes {nn.stage = 1 : i64} {
  shard.grid @mesh(shape = 2x2) {nn.axis_names = ["dp", "pp"]}
  func.func @loss_update(%w: tensor<8xf32> {nn.init = #nn.init<zeros>, nn.param = "w"}, %e: tensor<4xf32> {nn.init = #nn.init<zeros>, nn.param = "e", nn.tied_copy},
                         %gw: tensor<8xf32> {nn.grad = "w"}, %ge: tensor<4xf32> {nn.grad = "e"},
                         %scale: tensor<f32> {nn.grad_scale}) attributes {nn.entry = "update"} {
    %ss = nn.sum_squares %gw : (tensor<8xf32>) -> tensor<f32>
    %all = shard.all_reduce %ss on @mesh grid_axes = [0] : tensor<f32> -> tensor<f32>
    %c = nn.clip_scale %all, %scale {max_norm = 0.5 : f64} : tensor<f32>
    %w2 = nn.optimizer_step sgd %gw, %c outs(%w : tensor<8xf32>) {lr = 0.1 : f64} : tensor<8xf32>
    %e2 = nn.optimizer_step sgd %ge, %c outs(%e : tensor<4xf32>) {lr = 0.1 : f64} : tensor<4xf32>
    return
  }
}

// -----

// Tests that a module that is no pipeline stage keeps its update's norm.
// CHECK-LABEL: module @whole
// CHECK: nn.sum_squares
// CHECK-NEXT: nn.clip_scale
// CHECK-NOT: grad_norm
module @whole {
  func.func @loss_update(%w: tensor<8xf32> {nn.init = #nn.init<zeros>, nn.param = "w"}, %gw: tensor<8xf32> {nn.grad = "w"},
                         %scale: tensor<f32> {nn.grad_scale}) attributes {nn.entry = "update"} {
    %ss = nn.sum_squares %gw : (tensor<8xf32>) -> tensor<f32>
    %c = nn.clip_scale %ss, %scale : tensor<f32>
    %w2 = nn.optimizer_step sgd %gw, %c outs(%w : tensor<8xf32>) {lr = 0.1 : f64} : tensor<8xf32>
    return
  }
}

// -----

// Tests that a stage whose update does not clip is left alone.
// CHECK-LABEL: module @unclipped
// CHECK-NOT: grad_norm
// CHECK: nn.optimizer_step
module @unclipped attributes {nn.stage = 0 : i64} {
  func.func @loss_update(%w: tensor<8xf32> {nn.init = #nn.init<zeros>, nn.param = "w"}, %gw: tensor<8xf32> {nn.grad = "w"},
                         %scale: tensor<f32> {nn.grad_scale}) attributes {nn.entry = "update"} {
    %w2 = nn.optimizer_step sgd %gw, %scale outs(%w : tensor<8xf32>) {lr = 0.1 : f64} : tensor<8xf32>
    return
  }
}
