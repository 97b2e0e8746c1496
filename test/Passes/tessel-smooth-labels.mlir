// RUN: tessel-opt %s -tessel-mask-ignored-labels -tessel-smooth-labels --split-input-file | FileCheck %s
// RUN: tessel-opt %s -tessel-mask-ignored-labels -tessel-smooth-labels -tessel-autodiff="optimizer=sgd" --split-input-file | FileCheck %s --check-prefix=GRAD
// RUN: tessel-opt %s -tessel-mask-ignored-labels -tessel-smooth-labels -tessel-propagate-sharding="mesh=tp=2" -tessel-partition --split-input-file 2>/dev/null | FileCheck %s --check-prefix=TP

// Tests that a smoothed mean becomes the loss of each position plus
// ε·(the label's logit - the mean logit), averaged over the positions.
// CHECK-LABEL: func.func @mean
// CHECK: %[[Z:.*]] = nn.matmul
// CHECK: %[[EACH:.*]] = nn.cross_entropy %[[Z]], %[[Y:[^ ]*]] {reduction = #nn.reduction<none>} : (tensor<2x3x6xf32>, tensor<2x3xi32>) -> tensor<2x3xf32>
// CHECK: %[[ZY:.*]] = nn.label_logit %[[Z]], %[[Y]] : (tensor<2x3x6xf32>, tensor<2x3xi32>) -> tensor<2x3xf32>
// CHECK: %[[ZM:.*]] = nn.reduce_mean %[[Z]] dims = [2] : tensor<2x3x6xf32> -> tensor<2x3xf32>
// CHECK: %[[GAP:.*]] = nn.sub %[[ZY]], %[[ZM]] : tensor<2x3xf32>
// CHECK: %[[EPS:.*]] = nn.constant dense<1.000000e-01> : tensor<f32>
// CHECK: %[[EB:.*]] = nn.broadcast %[[EPS]] dims = [] : tensor<f32> -> tensor<2x3xf32>
// CHECK: %[[T:.*]] = nn.mul %[[GAP]], %[[EB]] : tensor<2x3xf32>
// CHECK: %[[S:.*]] = nn.add %[[EACH]], %[[T]] : tensor<2x3xf32>
// CHECK: %[[L:.*]] = nn.reduce_mean %[[S]] dims = [0, 1] : tensor<2x3xf32> -> tensor<f32>
// CHECK: return %[[L]]
// CHECK-NOT: label_smoothing
//
// The backward differentiates the label's logit (the cotangent at each
// label of zeros) and the mean over the classes beside the loss.
// GRAD-LABEL: func.func @mean_backward
// GRAD-DAG: nn.cross_entropy_grad %{{.*}} {reduction = #nn.reduction<none>}
// GRAD-DAG: nn.sub_label %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x3x6xf32>, tensor<2x3xi32>, tensor<2x3xf32>) -> tensor<2x3x6xf32>
// GRAD-DAG: nn.broadcast %{{.*}} dims = [0, 1] : tensor<2x3xf32> -> tensor<2x3x6xf32>
//
// On a split vocabulary (tp=2) the label's logit is the rank's block
// (block_axes) and the mean over the classes a rank's partial mean, each
// completed by an all-reduce.
// TP-LABEL: func.func @mean
// TP-DAG: nn.label_logit %{{.*}}, %{{.*}} {block_axes = array<i16: 0>} : (tensor<2x3x3xf32>, tensor<2x3xi32>) -> tensor<2x3xf32>
// TP-DAG: nn.reduce_mean %{{.*}} dims = [2] : tensor<2x3x3xf32> -> tensor<2x3xf32>
// TP: shard.all_reduce
func.func @mean(%w: tensor<4x6xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.02>, nn.axes = ["embed", "vocab"]},
                %x: tensor<2x3x4xf32> {nn.input, nn.axes = ["batch", "seq", "embed"]},
                %y: tensor<2x3xi32> {nn.label, nn.axes = ["batch", "seq"]}) -> tensor<f32> {
  %z = nn.matmul %x, %w : (tensor<2x3x4xf32>, tensor<4x6xf32>) -> tensor<2x3x6xf32>
  %l = nn.cross_entropy %z, %y {label_smoothing = 0.1 : f64} : (tensor<2x3x6xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a loss that ignores positions and smooths labels is masked
// first: the smoothed loss of each position (of the safe labels) is weighed
// as the plain one, and the mean is the launcher's (nn.loss_count).
// CHECK-LABEL: func.func @masked
// CHECK-SAME: -> (tensor<f32>, tensor<f32> {nn.loss_count})
// CHECK: %[[SAFE:.*]], %[[W:.*]] = nn.mask_labels
// CHECK: %[[EACH:.*]] = nn.cross_entropy %{{.*}}, %[[SAFE]] {reduction = #nn.reduction<none>}
// CHECK: nn.label_logit %{{.*}}, %[[SAFE]]
// CHECK: %[[S:.*]] = nn.add %[[EACH]], %{{.*}} : tensor<2x3xf32>
// CHECK: %[[LW:.*]] = nn.mul %[[S]], %[[W]] : tensor<2x3xf32>
// CHECK: nn.reduce_sum %[[LW]] dims = [0, 1]
// CHECK-NOT: label_smoothing
func.func @masked(%z: tensor<2x3x5xf32>, %y: tensor<2x3xi32> {nn.label}) -> tensor<f32> {
  %l = nn.cross_entropy %z, %y {ignore_index = -100 : i64, label_smoothing = 0.2 : f64} : (tensor<2x3x5xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests the sum and per-position reductions, a 16-bit loss (the label's
// and the mean logit cast to the loss's f32), and ε = 0 (the attribute
// dropped, the loss unchanged).
// CHECK-LABEL: func.func @reductions
// CHECK: nn.label_logit %{{.*}} : (tensor<4x7xbf16>, tensor<4xi32>) -> tensor<4xbf16>
// CHECK: nn.reduce_mean %{{.*}} dims = [1] : tensor<4x7xbf16> -> tensor<4xbf16>
// CHECK: nn.cast %{{.*}} : tensor<4xbf16> to tensor<4xf32>
// CHECK: nn.cast %{{.*}} : tensor<4xbf16> to tensor<4xf32>
// CHECK: %[[SUM:.*]] = nn.reduce_sum %{{.*}} dims = [0] : tensor<4xf32> -> tensor<f32>
// CHECK: %[[NONE:.*]] = nn.add %{{.*}} : tensor<4xf32>
// CHECK-NOT: nn.reduce
// CHECK: %[[PLAIN:.*]] = nn.cross_entropy %{{.*}} : (tensor<4x7xf32>, tensor<4xi32>) -> tensor<f32>
// CHECK: return %[[SUM]], %[[NONE]], %[[PLAIN]]
// CHECK-NOT: label_smoothing
func.func @reductions(%h: tensor<4x7xbf16>, %z: tensor<4x7xf32>, %y: tensor<4xi32> {nn.label}) -> (tensor<f32>, tensor<4xf32>, tensor<f32>) {
  %s = nn.cross_entropy %h, %y {reduction = #nn.reduction<sum>, label_smoothing = 0.3 : f64} : (tensor<4x7xbf16>, tensor<4xi32>) -> tensor<f32>
  %n = nn.cross_entropy %z, %y {reduction = #nn.reduction<none>, label_smoothing = 1.0 : f64} : (tensor<4x7xf32>, tensor<4xi32>) -> tensor<4xf32>
  %p = nn.cross_entropy %z, %y {label_smoothing = 0.0 : f64} : (tensor<4x7xf32>, tensor<4xi32>) -> tensor<f32>
  return %s, %n, %p : tensor<f32>, tensor<4xf32>, tensor<f32>
}
