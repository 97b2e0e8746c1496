// RUN: tessel-opt %s -tessel-mask-ignored-labels --split-input-file | FileCheck %s
// RUN: tessel-opt %s -tessel-mask-ignored-labels -tessel-autodiff="optimizer=sgd" --split-input-file | FileCheck %s --check-prefix=GRAD
// RUN: tessel-opt %s -tessel-mask-ignored-labels -tessel-propagate-sharding="mesh=dp=2" -tessel-partition --split-input-file 2>/dev/null | FileCheck %s --check-prefix=DP

// Tests that a mean that ignores -100 and is the model's loss becomes the
// masked labels, the loss of each position times its weight, and their
// sum, returned as the loss with the count of weights after it
// (nn.loss_count): the launcher divides a step's sum by its count.
// CHECK-LABEL: func.func @mean
// CHECK-SAME: -> (tensor<f32>, tensor<f32> {nn.loss_count})
// CHECK: %[[SAFE:.*]], %[[W:.*]] = nn.mask_labels %{{.*}} ignore_index -100 : (tensor<2x3xi32>) -> (tensor<2x3xi32>, tensor<2x3xf32>)
// CHECK: %[[N:.*]] = nn.reduce_sum %[[W]] dims = [0, 1] : tensor<2x3xf32> -> tensor<f32>
// CHECK: %[[EACH:.*]] = nn.cross_entropy %{{.*}}, %[[SAFE]] {reduction = #nn.reduction<none>} : (tensor<2x3x5xf32>, tensor<2x3xi32>) -> tensor<2x3xf32>
// CHECK: %[[LW:.*]] = nn.mul %[[EACH]], %[[W]] : tensor<2x3xf32>
// CHECK: %[[S:.*]] = nn.reduce_sum %[[LW]] dims = [0, 1] : tensor<2x3xf32> -> tensor<f32>
// CHECK-NEXT: return %[[S]], %[[N]]
// CHECK-NOT: ignore_index =
//
// The backward seeds the sum with 1 and differentiates the cross-entropy
// of each position with the weights (zero where ignored); the count has no
// derivative and is returned beside the loss.
// GRAD-LABEL: func.func @mean_backward
// GRAD-SAME: -> (tensor<f32>, tensor<f32> {nn.loss_count}, tensor<4x5xf32> {nn.grad = "w"})
// GRAD: %[[SAFE:.*]], %[[W:.*]] = nn.mask_labels
// GRAD: %[[N:.*]] = nn.reduce_sum %[[W]]
// GRAD: %[[S:.*]] = nn.reduce_sum
// GRAD: %[[SEED:.*]] = nn.constant dense<1.000000e+00> : tensor<f32>
// GRAD: %[[DLW:.*]] = nn.broadcast %[[SEED]]
// GRAD: %[[DEACH:.*]] = nn.mul %[[DLW]], %[[W]] : tensor<2x3xf32>
// GRAD: nn.cross_entropy_grad %{{.*}}, %[[SAFE]], %[[DEACH]] {reduction = #nn.reduction<none>}
// GRAD-NOT: nn.div
// GRAD: return %[[S]], %[[N]]
//
// On dp=2 the rank's count and its sum of losses, both partial sums, are
// completed by all-reduces: the whole batch's sum and count.
// DP-LABEL: func.func @mean
// DP: nn.mask_labels %{{.*}} ignore_index -100 : (tensor<1x3xi32>) -> (tensor<1x3xi32>, tensor<1x3xf32>)
// DP-DAG: %[[N:.*]] = nn.reduce_sum %{{.*}} dims = [0, 1] : tensor<1x3xf32> -> tensor<f32>
// DP-DAG: %[[NR:.*]] = shard.all_reduce %[[N]] on @mesh grid_axes = [0] : tensor<f32> -> tensor<f32>
// DP-DAG: %[[S:.*]] = nn.reduce_sum %{{.*}} dims = [0, 1] : tensor<1x3xf32> -> tensor<f32>
// DP-DAG: %[[SR:.*]] = shard.all_reduce %[[S]] on @mesh grid_axes = [0] : tensor<f32> -> tensor<f32>
// DP: return %[[SR]], %[[NR]]
// DP-NOT: reduction = #nn.reduction<mean>
func.func @mean(%w: tensor<4x5xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.02>},
                %x: tensor<2x3x4xf32> {nn.input, nn.axes = ["batch", "seq", "embed"]},
                %y: tensor<2x3xi32> {nn.label, nn.axes = ["batch", "seq"]}) -> tensor<f32> {
  %z = nn.matmul %x, %w : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  %l = nn.cross_entropy %z, %y {ignore_index = -100 : i64} : (tensor<2x3x5xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a mean the loss goes on to use (here scaled by a half) divides
// in the model: the count of weights, at least 1 (relu(n - 1) + 1), then
// the sum over it. A step's loss is then the mean of its microbatches'.
// CHECK-LABEL: func.func @mean_in_loss
// CHECK-SAME: -> tensor<f32> {
// CHECK: %[[SAFE:.*]], %[[W:.*]] = nn.mask_labels %{{.*}} ignore_index -100 : (tensor<2x3xi32>) -> (tensor<2x3xi32>, tensor<2x3xf32>)
// CHECK: %[[N:.*]] = nn.reduce_sum %[[W]] dims = [0, 1] : tensor<2x3xf32> -> tensor<f32>
// CHECK: %[[ONE:.*]] = nn.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[M:.*]] = nn.sub %[[N]], %[[ONE]]
// CHECK: %[[R:.*]] = nn.relu %[[M]]
// CHECK: %[[D:.*]] = nn.add %[[R]], %[[ONE]]
// CHECK: %[[EACH:.*]] = nn.cross_entropy %{{.*}}, %[[SAFE]] {reduction = #nn.reduction<none>} : (tensor<2x3x5xf32>, tensor<2x3xi32>) -> tensor<2x3xf32>
// CHECK: %[[LW:.*]] = nn.mul %[[EACH]], %[[W]] : tensor<2x3xf32>
// CHECK: %[[S:.*]] = nn.reduce_sum %[[LW]] dims = [0, 1] : tensor<2x3xf32> -> tensor<f32>
// CHECK: %[[L:.*]] = nn.div %[[S]], %[[D]]
// CHECK: %[[H:.*]] = nn.mul %[[L]]
// CHECK: return %[[H]] : tensor<f32>
//
// The backward scales the sum's seed by the count; the count itself has no
// derivative.
// GRAD-LABEL: func.func @mean_in_loss_backward
// GRAD: %[[SAFE:.*]], %[[W:.*]] = nn.mask_labels
// GRAD: %[[D:.*]] = nn.add
// GRAD: %[[L:.*]] = nn.div %{{.*}}, %[[D]] : tensor<f32>
// GRAD: %[[DS:.*]] = nn.div %{{.*}}, %[[D]] : tensor<f32>
// GRAD: %[[DLW:.*]] = nn.broadcast %[[DS]]
// GRAD: %[[DEACH:.*]] = nn.mul %[[DLW]], %[[W]] : tensor<2x3xf32>
// GRAD: nn.cross_entropy_grad %{{.*}}, %[[SAFE]], %[[DEACH]] {reduction = #nn.reduction<none>}
// GRAD-NOT: nn.relu
// GRAD: return
//
// On dp=2 the rank's count is completed by an all-reduce before the
// division, and the rank's sum of losses, a partial sum, passes through the
// division by that whole count and is all-reduced after it: the mean is the
// whole batch's.
// DP-LABEL: func.func @mean_in_loss
// DP: nn.mask_labels %{{.*}} ignore_index -100 : (tensor<1x3xi32>) -> (tensor<1x3xi32>, tensor<1x3xf32>)
// DP: %[[N:.*]] = nn.reduce_sum %{{.*}} dims = [0, 1] : tensor<1x3xf32> -> tensor<f32>
// DP: %[[NR:.*]] = shard.all_reduce %[[N]] on @mesh grid_axes = [0] : tensor<f32> -> tensor<f32>
// DP: nn.sub %[[NR]]
// DP: %[[S:.*]] = nn.reduce_sum %{{.*}} dims = [0, 1] : tensor<1x3xf32> -> tensor<f32>
// DP: %[[Q:.*]] = nn.div %[[S]], %{{.*}} : tensor<f32>
// DP: shard.all_reduce
// DP: return
func.func @mean_in_loss(%w: tensor<4x5xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.02>},
                        %x: tensor<2x3x4xf32> {nn.input, nn.axes = ["batch", "seq", "embed"]},
                        %y: tensor<2x3xi32> {nn.label, nn.axes = ["batch", "seq"]}) -> tensor<f32> {
  %z = nn.matmul %x, %w : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  %l = nn.cross_entropy %z, %y {ignore_index = -100 : i64} : (tensor<2x3x5xf32>, tensor<2x3xi32>) -> tensor<f32>
  %half = nn.constant dense<5.000000e-01> : tensor<f32>
  %h = nn.mul %l, %half : tensor<f32>
  return %h : tensor<f32>
}

// -----

// Tests that a sum adds the weighted losses and divides by nothing.
// CHECK-LABEL: func.func @sum
// CHECK: nn.mask_labels %{{.*}} ignore_index 0 : (tensor<4xi64>) -> (tensor<4xi64>, tensor<4xf32>)
// CHECK: nn.mul
// CHECK-NEXT: %[[S:.*]] = nn.reduce_sum %{{.*}} dims = [0] : tensor<4xf32> -> tensor<f32>
// CHECK-NEXT: return %[[S]]
func.func @sum(%z: tensor<4x5xf32> {nn.input}, %y: tensor<4xi64> {nn.label}) -> tensor<f32> {
  %l = nn.cross_entropy %z, %y {reduction = #nn.reduction<sum>, ignore_index = 0 : i64} : (tensor<4x5xf32>, tensor<4xi64>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that `none` keeps each position's weighted loss (0 where ignored),
// and that 16-bit logits keep their f32 loss: the weights are f32.
// CHECK-LABEL: func.func @none_bf16
// CHECK: %[[SAFE:.*]], %[[W:.*]] = nn.mask_labels %{{.*}} ignore_index -1 : (tensor<4xi32>) -> (tensor<4xi32>, tensor<4xf32>)
// CHECK: %[[EACH:.*]] = nn.cross_entropy %{{.*}}, %[[SAFE]] {reduction = #nn.reduction<none>} : (tensor<4x5xbf16>, tensor<4xi32>) -> tensor<4xf32>
// CHECK: %[[LW:.*]] = nn.mul %[[EACH]], %[[W]] : tensor<4xf32>
// CHECK-NEXT: return %[[LW]]
func.func @none_bf16(%z: tensor<4x5xbf16>, %y: tensor<4xi32>) -> tensor<4xf32> {
  %l = nn.cross_entropy %z, %y {reduction = #nn.reduction<none>, ignore_index = -1 : i64} : (tensor<4x5xbf16>, tensor<4xi32>) -> tensor<4xf32>
  return %l : tensor<4xf32>
}

// -----

// Tests that a loss without ignore_index is left as it is.
// CHECK-LABEL: func.func @plain
// CHECK-NEXT: nn.cross_entropy %{{.*}}, %{{.*}} : (tensor<4x5xf32>, tensor<4xi32>) -> tensor<f32>
// CHECK-NOT: nn.mask_labels
func.func @plain(%z: tensor<4x5xf32>, %y: tensor<4xi32>) -> tensor<f32> {
  %l = nn.cross_entropy %z, %y : (tensor<4x5xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
