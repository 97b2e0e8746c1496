// RUN: tessel-opt %s -tessel-fuse-logit-softcap --split-input-file | FileCheck %s
// RUN: tessel-opt %s -tessel-fuse-logit-softcap -tessel-autodiff="optimizer=sgd" --split-input-file | FileCheck %s --check-prefix=GRAD
// RUN: tessel-opt %s -tessel-fuse-logit-softcap -tessel-autodiff="optimizer=sgd" -tessel-propagate-sharding="mesh=tp=2" -tessel-partition --split-input-file 2>/dev/null | FileCheck %s --check-prefix=TP

// Tests that Gemma 2's capped logits, c·tanh(z / c) with c a broadcast
// splat, read by the loss alone, become the loss's logit_softcap: the
// chain goes, the loss reads z.
// CHECK-LABEL: func.func @capped
// CHECK: %[[Z:.*]] = nn.matmul
// CHECK-NOT: nn.tanh
// CHECK: nn.cross_entropy %[[Z]], %{{.*}} {logit_softcap = 3.000000e+01 : f64} : (tensor<2x3x6xf32>, tensor<2x3xi32>) -> tensor<f32>
//
// The backward's gradient caps inside too: no tanh, no slope of its own.
// GRAD-LABEL: func.func @capped_backward
// GRAD-NOT: nn.tanh
// GRAD: nn.cross_entropy_grad %{{.*}} {logit_softcap = 3.000000e+01 : f64}
//
// On a split vocabulary (tp=2) the fused vocabulary-parallel kernels cap
// each rank's block inside too: its statistics, and its gradient with the
// slope 1 - (y / c)².
// TP-LABEL: func.func @capped(
// TP-NOT: nn.tanh
// TP: nn.vocab_loss_stats %{{.*}} {block_axes = array<i16: 0>, logit_softcap = 3.000000e+01 : f64} : (tensor<2x3x3xf32>, tensor<2x3xi32>)
// TP: shard.all_reduce
// TP-LABEL: func.func @capped_backward
// TP-NOT: nn.tanh
// TP: nn.vocab_loss_grad %{{.*}} {block_axes = array<i16: 0>, logit_softcap = 3.000000e+01 : f64} : (tensor<2x3x3xf32>,
func.func @capped(%w: tensor<4x6xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.02>, nn.axes = ["embed", "vocab"]},
                  %x: tensor<2x3x4xf32> {nn.input, nn.axes = ["batch", "seq", "embed"]},
                  %y: tensor<2x3xi32> {nn.label, nn.axes = ["batch", "seq"]}) -> tensor<f32> {
  %z = nn.matmul %x, %w : (tensor<2x3x4xf32>, tensor<4x6xf32>) -> tensor<2x3x6xf32>
  %c = nn.constant dense<30.0> : tensor<f32>
  %cb = nn.broadcast %c dims = [] : tensor<f32> -> tensor<2x3x6xf32>
  %q = nn.div %z, %cb : tensor<2x3x6xf32>
  %t = nn.tanh %q : tensor<2x3x6xf32>
  %zc = nn.mul %t, %cb : tensor<2x3x6xf32>
  %l = nn.cross_entropy %zc, %y : (tensor<2x3x6xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests the cap on the product's left and a full-size splat, under a
// per-position loss.
// CHECK-LABEL: func.func @left
// CHECK-NOT: nn.tanh
// CHECK: nn.cross_entropy %arg0, %arg1 {logit_softcap = 5.000000e-01 : f64, reduction = #nn.reduction<none>}
func.func @left(%z: tensor<4x6xf32>, %y: tensor<4xi32>) -> tensor<4xf32> {
  %c = nn.constant dense<0.5> : tensor<4x6xf32>
  %q = nn.div %z, %c : tensor<4x6xf32>
  %t = nn.tanh %q : tensor<4x6xf32>
  %zc = nn.mul %c, %t : tensor<4x6xf32>
  %l = nn.cross_entropy %zc, %y {reduction = #nn.reduction<none>} : (tensor<4x6xf32>, tensor<4xi32>) -> tensor<4xf32>
  return %l : tensor<4xf32>
}

// -----

// Tests mixed precision's form, capped bf16 logits widened before the
// loss and the cap a bf16 copy of an f32 constant: the widening moves onto
// z (the kernel caps in f32).
// CHECK-LABEL: func.func @widened
// CHECK-NOT: nn.tanh
// CHECK: %[[W:.*]] = nn.cast %arg0 : tensor<4x6xbf16> to tensor<4x6xf32>
// CHECK: nn.cross_entropy %[[W]], %arg1 {logit_softcap = 3.000000e+01 : f64}
func.func @widened(%z: tensor<4x6xbf16>, %y: tensor<4xi32>) -> tensor<f32> {
  %c32 = nn.constant dense<30.0> : tensor<f32>
  %c = nn.cast %c32 : tensor<f32> to tensor<bf16>
  %cb = nn.broadcast %c dims = [] : tensor<bf16> -> tensor<4x6xbf16>
  %q = nn.div %z, %cb : tensor<4x6xbf16>
  %t = nn.tanh %q : tensor<4x6xbf16>
  %zc = nn.mul %t, %cb : tensor<4x6xbf16>
  %w = nn.cast %zc : tensor<4x6xbf16> to tensor<4x6xf32>
  %l = nn.cross_entropy %w, %y : (tensor<4x6xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests what stays: capped logits another op reads and two different
// constants.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-2: nn.tanh
// CHECK-NOT: logit_softcap
func.func @kept(%z: tensor<4x6xf32>, %y: tensor<4xi32>) -> (tensor<f32>, tensor<4x6xf32>, tensor<f32>) {
  %c = nn.constant dense<2.0> : tensor<4x6xf32>
  %d = nn.constant dense<3.0> : tensor<4x6xf32>
  %q = nn.div %z, %c : tensor<4x6xf32>
  %t = nn.tanh %q : tensor<4x6xf32>
  %zc = nn.mul %t, %c : tensor<4x6xf32>
  %l = nn.cross_entropy %zc, %y : (tensor<4x6xf32>, tensor<4xi32>) -> tensor<f32>
  %q2 = nn.div %z, %c : tensor<4x6xf32>
  %t2 = nn.tanh %q2 : tensor<4x6xf32>
  %zd = nn.mul %t2, %d : tensor<4x6xf32>
  %l2 = nn.cross_entropy %zd, %y : (tensor<4x6xf32>, tensor<4xi32>) -> tensor<f32>
  return %l, %zc, %l2 : tensor<f32>, tensor<4x6xf32>, tensor<f32>
}

// -----

// Tests that a loss that smooths its labels takes the cap as well: both
// are inside the kernels (the smoothed target of the capped logits).
// CHECK-LABEL: func.func @smoothed
// CHECK-NOT: nn.tanh
// CHECK: nn.cross_entropy %arg0, %arg1 {label_smoothing = 1.000000e-01 : f64, logit_softcap = 2.000000e+00 : f64}
func.func @smoothed(%z: tensor<4x6xf32>, %y: tensor<4xi32>) -> tensor<f32> {
  %c = nn.constant dense<2.0> : tensor<4x6xf32>
  %q = nn.div %z, %c : tensor<4x6xf32>
  %t = nn.tanh %q : tensor<4x6xf32>
  %ze = nn.mul %t, %c : tensor<4x6xf32>
  %l = nn.cross_entropy %ze, %y {label_smoothing = 0.1 : f64} : (tensor<4x6xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
