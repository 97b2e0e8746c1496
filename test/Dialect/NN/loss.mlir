// RUN: tessel-opt %s | tessel-opt | FileCheck %s
// RUN: tessel-opt %s --mlir-print-op-generic | tessel-opt | FileCheck %s

// Tests that cross_entropy defaults to the mean, a scalar, and elides the default reduction.
// CHECK-LABEL: func.func @cross_entropy_mean_default
// CHECK: nn.cross_entropy %{{.*}}, %{{.*}} : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
// CHECK-NOT: reduction
func.func @cross_entropy_mean_default(%logits: tensor<8x10xf32>, %labels: tensor<8xi32>) -> tensor<f32> {
  %0 = nn.cross_entropy %logits, %labels : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// Tests that an explicit mean reduction is the default and is elided when printed.
// CHECK-LABEL: func.func @cross_entropy_mean_explicit
// CHECK: nn.cross_entropy %{{.*}}, %{{.*}} : (tensor<8x10xf32>, tensor<8xi64>) -> tensor<f32>
// CHECK-NOT: reduction
func.func @cross_entropy_mean_explicit(%logits: tensor<8x10xf32>, %labels: tensor<8xi64>) -> tensor<f32> {
  %0 = nn.cross_entropy %logits, %labels {reduction = #nn.reduction<mean>} : (tensor<8x10xf32>, tensor<8xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}

// Tests that the sum reduction gives a scalar.
// CHECK-LABEL: func.func @cross_entropy_sum
// CHECK: nn.cross_entropy %{{.*}}, %{{.*}} {reduction = #nn.reduction<sum>} : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
func.func @cross_entropy_sum(%logits: tensor<8x10xf32>, %labels: tensor<8xi32>) -> tensor<f32> {
  %0 = nn.cross_entropy %logits, %labels {reduction = #nn.reduction<sum>} : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// Tests that no reduction keeps one loss per 1-D label position.
// CHECK-LABEL: func.func @cross_entropy_none_1d
// CHECK: nn.cross_entropy %{{.*}}, %{{.*}} {reduction = #nn.reduction<none>} : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<8xf32>
func.func @cross_entropy_none_1d(%logits: tensor<8x10xf32>, %labels: tensor<8xi32>) -> tensor<8xf32> {
  %0 = nn.cross_entropy %logits, %labels {reduction = #nn.reduction<none>} : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// Tests that 2-D labels [batch, seq] against [batch, seq, vocab] logits reduce to a scalar mean.
// CHECK-LABEL: func.func @cross_entropy_mean_2d
// CHECK: nn.cross_entropy %{{.*}}, %{{.*}} : (tensor<2x8x50xf32>, tensor<2x8xi64>) -> tensor<f32>
func.func @cross_entropy_mean_2d(%logits: tensor<2x8x50xf32>, %labels: tensor<2x8xi64>) -> tensor<f32> {
  %0 = nn.cross_entropy %logits, %labels : (tensor<2x8x50xf32>, tensor<2x8xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}

// Tests that 2-D labels with the sum reduction give a scalar.
// CHECK-LABEL: func.func @cross_entropy_sum_2d
// CHECK: nn.cross_entropy %{{.*}}, %{{.*}} {reduction = #nn.reduction<sum>} : (tensor<2x8x50xf32>, tensor<2x8xi32>) -> tensor<f32>
func.func @cross_entropy_sum_2d(%logits: tensor<2x8x50xf32>, %labels: tensor<2x8xi32>) -> tensor<f32> {
  %0 = nn.cross_entropy %logits, %labels {reduction = #nn.reduction<sum>} : (tensor<2x8x50xf32>, tensor<2x8xi32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// Tests that 2-D labels without reduction keep [batch, seq] losses.
// CHECK-LABEL: func.func @cross_entropy_none_2d
// CHECK: nn.cross_entropy %{{.*}}, %{{.*}} {reduction = #nn.reduction<none>} : (tensor<2x8x50xf32>, tensor<2x8xi64>) -> tensor<2x8xf32>
func.func @cross_entropy_none_2d(%logits: tensor<2x8x50xf32>, %labels: tensor<2x8xi64>) -> tensor<2x8xf32> {
  %0 = nn.cross_entropy %logits, %labels {reduction = #nn.reduction<none>} : (tensor<2x8x50xf32>, tensor<2x8xi64>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// Tests that bf16 logits give a bf16 loss.
// CHECK-LABEL: func.func @cross_entropy_bf16
// CHECK: nn.cross_entropy %{{.*}}, %{{.*}} : (tensor<8x10xbf16>, tensor<8xi32>) -> tensor<bf16>
func.func @cross_entropy_bf16(%logits: tensor<8x10xbf16>, %labels: tensor<8xi32>) -> tensor<bf16> {
  %0 = nn.cross_entropy %logits, %labels : (tensor<8x10xbf16>, tensor<8xi32>) -> tensor<bf16>
  return %0 : tensor<bf16>
}

// Tests that a single example (1-D logits, rank-0 label) is accepted; none keeps the rank-0 shape.
// CHECK-LABEL: func.func @cross_entropy_single_example
// CHECK: nn.cross_entropy %{{.*}}, %{{.*}} {reduction = #nn.reduction<none>} : (tensor<10xf32>, tensor<i32>) -> tensor<f32>
func.func @cross_entropy_single_example(%logits: tensor<10xf32>, %label: tensor<i32>) -> tensor<f32> {
  %0 = nn.cross_entropy %logits, %label {reduction = #nn.reduction<none>} : (tensor<10xf32>, tensor<i32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// Tests that 16-bit logits give a loss of their own type or, computed in
// f32, an f32 loss (the mixed-precision loss, ABI 13).
// CHECK-LABEL: func.func @cross_entropy_f32_loss_of_bf16
// CHECK: nn.cross_entropy %{{.*}}, %{{.*}} : (tensor<8x10xbf16>, tensor<8xi32>) -> tensor<bf16>
// CHECK: nn.cross_entropy %{{.*}}, %{{.*}} : (tensor<8x10xbf16>, tensor<8xi32>) -> tensor<f32>
// CHECK: nn.cross_entropy %{{.*}}, %{{.*}} {reduction = #nn.reduction<none>} : (tensor<8x10xf16>, tensor<8xi32>) -> tensor<8xf32>
func.func @cross_entropy_f32_loss_of_bf16(%logits: tensor<8x10xbf16>, %half: tensor<8x10xf16>, %labels: tensor<8xi32>) -> (tensor<bf16>, tensor<f32>, tensor<8xf32>) {
  %0 = nn.cross_entropy %logits, %labels : (tensor<8x10xbf16>, tensor<8xi32>) -> tensor<bf16>
  %1 = nn.cross_entropy %logits, %labels : (tensor<8x10xbf16>, tensor<8xi32>) -> tensor<f32>
  %2 = nn.cross_entropy %half, %labels {reduction = #nn.reduction<none>} : (tensor<8x10xf16>, tensor<8xi32>) -> tensor<8xf32>
  return %0, %1, %2 : tensor<bf16>, tensor<f32>, tensor<8xf32>
}

// Tests the loss and its gradient in one op: the loss in the logits' type
// or (16-bit logits) f32, dloss of the loss's type, dlogits of the logits';
// in_place printed when set.
// CHECK-LABEL: func.func @cross_entropy_with_grad
// CHECK: nn.cross_entropy_with_grad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<8x10xf32>, tensor<8xi32>, tensor<f32>) -> (tensor<f32>, tensor<8x10xf32>)
// CHECK: nn.cross_entropy_with_grad %{{.*}}, %{{.*}}, %{{.*}} in_place {reduction = #nn.reduction<none>} : (tensor<8x10xbf16>, tensor<8xi64>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8x10xbf16>)
func.func @cross_entropy_with_grad(%z: tensor<8x10xf32>, %h: tensor<8x10xbf16>, %y: tensor<8xi32>, %y64: tensor<8xi64>, %dl: tensor<f32>, %dls: tensor<8xf32>) -> (tensor<f32>, tensor<8x10xf32>, tensor<8xf32>, tensor<8x10xbf16>) {
  %l, %dz = nn.cross_entropy_with_grad %z, %y, %dl : (tensor<8x10xf32>, tensor<8xi32>, tensor<f32>) -> (tensor<f32>, tensor<8x10xf32>)
  %m, %dh = nn.cross_entropy_with_grad %h, %y64, %dls in_place {reduction = #nn.reduction<none>} : (tensor<8x10xbf16>, tensor<8xi64>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8x10xbf16>)
  return %l, %dz, %m, %dh : tensor<f32>, tensor<8x10xf32>, tensor<8xf32>, tensor<8x10xbf16>
}

// Tests that ignore_index round-trips beside the reduction.
// CHECK-LABEL: func.func @cross_entropy_ignore_index
// CHECK: nn.cross_entropy %{{.*}}, %{{.*}} {ignore_index = -100 : i64} : (tensor<2x8x50xf32>, tensor<2x8xi32>) -> tensor<f32>
// CHECK: nn.cross_entropy %{{.*}}, %{{.*}} {ignore_index = 0 : i64, reduction = #nn.reduction<none>} : (tensor<2x8x50xf32>, tensor<2x8xi32>) -> tensor<2x8xf32>
func.func @cross_entropy_ignore_index(%logits: tensor<2x8x50xf32>, %labels: tensor<2x8xi32>) -> (tensor<f32>, tensor<2x8xf32>) {
  %0 = nn.cross_entropy %logits, %labels {ignore_index = -100 : i64} : (tensor<2x8x50xf32>, tensor<2x8xi32>) -> tensor<f32>
  %1 = nn.cross_entropy %logits, %labels {reduction = #nn.reduction<none>, ignore_index = 0 : i64} : (tensor<2x8x50xf32>, tensor<2x8xi32>) -> tensor<2x8xf32>
  return %0, %1 : tensor<f32>, tensor<2x8xf32>
}

// Tests that mask_labels gives labels of the labels' type and weights of
// any float type.
// CHECK-LABEL: func.func @mask_labels
// CHECK: nn.mask_labels %{{.*}} ignore_index -100 : (tensor<2x8xi64>) -> (tensor<2x8xi64>, tensor<2x8xbf16>)
func.func @mask_labels(%labels: tensor<2x8xi64>) -> (tensor<2x8xi64>, tensor<2x8xbf16>) {
  %safe, %w = nn.mask_labels %labels ignore_index -100 : (tensor<2x8xi64>) -> (tensor<2x8xi64>, tensor<2x8xbf16>)
  return %safe, %w : tensor<2x8xi64>, tensor<2x8xbf16>
}

// Tests the fused vocabulary-parallel loss's two ops: the block's four
// statistics per position and its gradient, with their options.
// CHECK-LABEL: func.func @vocab_loss
// CHECK: nn.vocab_loss_stats %{{.*}}, %{{.*}} {block_axes = array<i16: 0>, logit_softcap = 3.000000e+01 : f64} : (tensor<2x8x25xf32>, tensor<2x8xi32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>)
// CHECK: nn.vocab_loss_grad %{{.*}} {block_axes = array<i16: 0>, label_smoothing = 1.000000e-01 : f64} : (tensor<2x8x25xf32>, tensor<2x8xi32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8x25xf32>
func.func @vocab_loss(%z: tensor<2x8x25xf32>, %y: tensor<2x8xi32>, %g: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8x25xf32>) {
  %m, %s, %zy, %zs = nn.vocab_loss_stats %z, %y {block_axes = array<i16: 0>, logit_softcap = 30.0 : f64} : (tensor<2x8x25xf32>, tensor<2x8xi32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>)
  %dz = nn.vocab_loss_grad %z, %y, %m, %s, %g {block_axes = array<i16: 0>, label_smoothing = 0.1 : f64} : (tensor<2x8x25xf32>, tensor<2x8xi32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8x25xf32>
  return %zy, %dz : tensor<2x8xf32>, tensor<2x8x25xf32>
}

// Tests the two ops of bf16 logits with f32 statistics (an f32 loss of
// bf16 logits split over the vocabulary): the gradient is bf16.
// CHECK-LABEL: func.func @vocab_loss_f32_stats
// CHECK: nn.vocab_loss_stats %{{.*}}, %{{.*}} : (tensor<2x8x25xbf16>, tensor<2x8xi32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>)
// CHECK: nn.vocab_loss_grad %{{.*}} in_place : (tensor<2x8x25xbf16>, tensor<2x8xi32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8x25xbf16>
func.func @vocab_loss_f32_stats(%z: tensor<2x8x25xbf16>, %y: tensor<2x8xi32>, %g: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8x25xbf16>) {
  %m, %s, %zy, %zs = nn.vocab_loss_stats %z, %y : (tensor<2x8x25xbf16>, tensor<2x8xi32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>)
  %dz = nn.vocab_loss_grad %z, %y, %m, %s, %g in_place : (tensor<2x8x25xbf16>, tensor<2x8xi32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8x25xbf16>
  return %zy, %dz : tensor<2x8xf32>, tensor<2x8x25xbf16>
}
