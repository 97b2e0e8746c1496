// RUN: tessel-opt %s -tessel-mask-ignored-labels -tessel-autodiff="optimizer=sgd" --split-input-file | FileCheck %s
// RUN: tessel-opt %s -tessel-mask-ignored-labels -tessel-autodiff="optimizer=sgd" -tessel-propagate-sharding="mesh=tp=2" -tessel-partition --split-input-file 2>/dev/null | FileCheck %s --check-prefix=TP
// RUN: tessel-opt %s -tessel-mask-ignored-labels -tessel-autodiff="optimizer=sgd" -tessel-fuse-epilogues --split-input-file | FileCheck %s --check-prefix=FUSED

// Tests that a smoothed loss stays one op, and its gradient takes the
// smoothing: the kernels compute the smoothed target, with no label logit,
// mean over the classes or logits-sized broadcast beside them.
// CHECK-LABEL: func.func @mean(
// CHECK: nn.cross_entropy %{{.*}} {label_smoothing = 1.000000e-01 : f64} : (tensor<2x3x6xf32>, tensor<2x3xi32>) -> tensor<f32>
// CHECK-LABEL: func.func @mean_backward
// CHECK-NOT: nn.label_logit
// CHECK-NOT: nn.broadcast %{{.*}} -> tensor<2x3x6xf32>
// CHECK: nn.cross_entropy_grad %{{.*}} {label_smoothing = 1.000000e-01 : f64} : (tensor<2x3x6xf32>, tensor<2x3xi32>, tensor<f32>) -> tensor<2x3x6xf32>
// CHECK-NOT: nn.sub_label
// CHECK: return
//
// On a split vocabulary (tp=2) each rank's block: the loss adds
// ε·(label logit − Σz / V), Σz the block's sum (nn.vocab_loss_stats)
// completed by an all-reduce; the gradient's kernel takes the smoothing.
// TP-LABEL: func.func @mean(
// TP: %[[M:.*]], %[[S:.*]], %[[ZY:.*]], %[[ZS:.*]] = nn.vocab_loss_stats %{{.*}} {block_axes = array<i16: 0>} : (tensor<2x3x3xf32>, tensor<2x3xi32>)
// TP: shard.all_reduce %[[ZS]]
// TP-NOT: label_smoothing
// TP-LABEL: func.func @mean_backward
// TP: nn.vocab_loss_grad %{{.*}} {block_axes = array<i16: 0>, label_smoothing = 1.000000e-01 : f64} : (tensor<2x3x3xf32>,
//
// Where the loss and its gradient meet, one kernel computes both.
// FUSED-LABEL: func.func @mean_backward
// FUSED: nn.cross_entropy_with_grad %{{.*}} {label_smoothing = 1.000000e-01 : f64}
func.func @mean(%w: tensor<4x6xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.02>, nn.axes = ["embed", "vocab"]},
                %x: tensor<2x3x4xf32> {nn.input, nn.axes = ["batch", "seq", "embed"]},
                %y: tensor<2x3xi32> {nn.label, nn.axes = ["batch", "seq"]}) -> tensor<f32> {
  %z = nn.matmul %x, %w : (tensor<2x3x4xf32>, tensor<4x6xf32>) -> tensor<2x3x6xf32>
  %l = nn.cross_entropy %z, %y {label_smoothing = 0.1 : f64} : (tensor<2x3x6xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a loss that ignores positions and smooths labels is masked
// with the smoothing kept on the loss of each position, weighed as the
// plain one, and on its gradient.
// CHECK-LABEL: func.func @masked(
// CHECK-SAME: -> (tensor<f32>, tensor<f32> {nn.loss_count})
// CHECK: %[[SAFE:.*]], %[[W:.*]] = nn.mask_labels
// CHECK: %[[EACH:.*]] = nn.cross_entropy %{{.*}}, %[[SAFE]] {label_smoothing = 2.000000e-01 : f64, reduction = #nn.reduction<none>}
// CHECK: %[[LW:.*]] = nn.mul %[[EACH]], %[[W]] : tensor<2x3xf32>
// CHECK: nn.reduce_sum %[[LW]] dims = [0, 1]
// CHECK-LABEL: func.func @masked_backward
// CHECK: nn.cross_entropy_grad %{{.*}} {label_smoothing = 2.000000e-01 : f64, reduction = #nn.reduction<none>}
func.func @masked(%w: tensor<4x5xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.02>},
                  %x: tensor<2x3x4xf32> {nn.input}, %y: tensor<2x3xi32> {nn.label}) -> tensor<f32> {
  %z = nn.matmul %x, %w : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  %l = nn.cross_entropy %z, %y {ignore_index = -100 : i64, label_smoothing = 0.2 : f64} : (tensor<2x3x5xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests a 16-bit loss (f32, of bf16 logits) and the sum: the smoothing
// stays on the loss and its gradient whatever the types.
// CHECK-LABEL: func.func @bf16_backward
// CHECK: nn.cross_entropy_grad %{{.*}} {label_smoothing = 3.000000e-01 : f64, reduction = #nn.reduction<sum>} : (tensor<4x7xbf16>, tensor<4xi32>, tensor<f32>) -> tensor<4x7xbf16>
func.func @bf16(%w: tensor<3x7xbf16> {nn.param = "w", nn.init = #nn.init<normal, 0.02>},
                %x: tensor<4x3xbf16> {nn.input}, %y: tensor<4xi32> {nn.label}) -> tensor<f32> {
  %h = nn.matmul %x, %w : (tensor<4x3xbf16>, tensor<3x7xbf16>) -> tensor<4x7xbf16>
  %s = nn.cross_entropy %h, %y {reduction = #nn.reduction<sum>, label_smoothing = 0.3 : f64} : (tensor<4x7xbf16>, tensor<4xi32>) -> tensor<f32>
  return %s : tensor<f32>
}
