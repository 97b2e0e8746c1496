// RUN: tessel-opt %s | tessel-opt | FileCheck %s
// RUN: tessel-opt %s --mlir-print-op-generic | tessel-opt | FileCheck %s

// Tests that softmax defaults to the last dimension and elides the default dim.
// CHECK-LABEL: func.func @softmax_default
// CHECK: nn.softmax %{{.*}} : tensor<8x10xf32>
// CHECK-NOT: dim =
func.func @softmax_default(%x: tensor<8x10xf32>) -> tensor<8x10xf32> {
  %0 = nn.softmax %x : tensor<8x10xf32>
  return %0 : tensor<8x10xf32>
}

// Tests that an explicit dim = -1 is the default and is elided when printed.
// CHECK-LABEL: func.func @softmax_explicit_last
// CHECK: nn.softmax %{{.*}} : tensor<8x10xf32>
// CHECK-NOT: dim =
func.func @softmax_explicit_last(%x: tensor<8x10xf32>) -> tensor<8x10xf32> {
  %0 = nn.softmax %x {dim = -1 : i64} : tensor<8x10xf32>
  return %0 : tensor<8x10xf32>
}

// Tests that softmax accepts an explicit non-negative dim.
// CHECK-LABEL: func.func @softmax_dim_0
// CHECK: nn.softmax %{{.*}} {dim = 0 : i64} : tensor<8x10xf32>
func.func @softmax_dim_0(%x: tensor<8x10xf32>) -> tensor<8x10xf32> {
  %0 = nn.softmax %x {dim = 0 : i64} : tensor<8x10xf32>
  return %0 : tensor<8x10xf32>
}

// Tests that softmax accepts a negative dim counting from the end, down to -rank.
// CHECK-LABEL: func.func @softmax_negative_dim
// CHECK: nn.softmax %{{.*}} {dim = -2 : i64} : tensor<2x8x10xf32>
// CHECK: nn.softmax %{{.*}} {dim = -3 : i64} : tensor<2x8x10xf32>
func.func @softmax_negative_dim(%x: tensor<2x8x10xf32>) -> (tensor<2x8x10xf32>, tensor<2x8x10xf32>) {
  %0 = nn.softmax %x {dim = -2 : i64} : tensor<2x8x10xf32>
  %1 = nn.softmax %x {dim = -3 : i64} : tensor<2x8x10xf32>
  return %0, %1 : tensor<2x8x10xf32>, tensor<2x8x10xf32>
}

// Tests that softmax works on a rank-1 bf16 tensor.
// CHECK-LABEL: func.func @softmax_rank_1_bf16
// CHECK: nn.softmax %{{.*}} : tensor<10xbf16>
func.func @softmax_rank_1_bf16(%x: tensor<10xbf16>) -> tensor<10xbf16> {
  %0 = nn.softmax %x : tensor<10xbf16>
  return %0 : tensor<10xbf16>
}

// Tests that layer_norm normalises over the last dimension with [H] gamma and beta, default epsilon elided.
// CHECK-LABEL: func.func @layer_norm
// CHECK: nn.layer_norm %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
func.func @layer_norm(%x: tensor<2x8x16xf32>, %g: tensor<16xf32>, %b: tensor<16xf32>) -> tensor<2x8x16xf32> {
  %0 = nn.layer_norm %x, %g, %b : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  return %0 : tensor<2x8x16xf32>
}

// Tests that layer_norm keeps an explicit epsilon.
// CHECK-LABEL: func.func @layer_norm_epsilon
// CHECK: nn.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 1.000000e-03 : f64} : (tensor<8x16xbf16>, tensor<16xbf16>, tensor<16xbf16>) -> tensor<8x16xbf16>
func.func @layer_norm_epsilon(%x: tensor<8x16xbf16>, %g: tensor<16xbf16>, %b: tensor<16xbf16>) -> tensor<8x16xbf16> {
  %0 = nn.layer_norm %x, %g, %b {epsilon = 1.0e-3 : f64} : (tensor<8x16xbf16>, tensor<16xbf16>, tensor<16xbf16>) -> tensor<8x16xbf16>
  return %0 : tensor<8x16xbf16>
}

// Tests that rms_norm normalises over the last dimension with an [H] gamma, default epsilon elided.
// CHECK-LABEL: func.func @rms_norm
// CHECK: nn.rms_norm %{{.*}}, %{{.*}} : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
func.func @rms_norm(%x: tensor<2x8x16xf32>, %g: tensor<16xf32>) -> tensor<2x8x16xf32> {
  %0 = nn.rms_norm %x, %g : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  return %0 : tensor<2x8x16xf32>
}

// Tests that rms_norm keeps an explicit epsilon.
// CHECK-LABEL: func.func @rms_norm_epsilon
// CHECK: nn.rms_norm %{{.*}}, %{{.*}} {epsilon = 1.000000e-05 : f64} : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
func.func @rms_norm_epsilon(%x: tensor<16xf32>, %g: tensor<16xf32>) -> tensor<16xf32> {
  %0 = nn.rms_norm %x, %g {epsilon = 1.0e-5 : f64} : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  return %0 : tensor<16xf32>
}

// Tests that batch_norm on a rank-2 [N, C] input uses feature dimension 1 by default.
// CHECK-LABEL: func.func @batch_norm_rank_2
// CHECK: nn.batch_norm %{{.*}}, %{{.*}}, %{{.*}} : (tensor<32x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<32x16xf32>
func.func @batch_norm_rank_2(%x: tensor<32x16xf32>, %g: tensor<16xf32>, %b: tensor<16xf32>) -> tensor<32x16xf32> {
  %0 = nn.batch_norm %x, %g, %b : (tensor<32x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<32x16xf32>
  return %0 : tensor<32x16xf32>
}

// Tests that batch_norm on an NCHW input normalises the channels.
// CHECK-LABEL: func.func @batch_norm_nchw
// CHECK: nn.batch_norm %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x3x4x5xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x5xf32>
func.func @batch_norm_nchw(%x: tensor<2x3x4x5xf32>, %g: tensor<3xf32>, %b: tensor<3xf32>) -> tensor<2x3x4x5xf32> {
  %0 = nn.batch_norm %x, %g, %b : (tensor<2x3x4x5xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x5xf32>
  return %0 : tensor<2x3x4x5xf32>
}

// Tests that batch_norm takes the feature dimension from feature_dim (NHWC: the last).
// CHECK-LABEL: func.func @batch_norm_feature_dim
// CHECK: nn.batch_norm %{{.*}}, %{{.*}}, %{{.*}} {feature_dim = 3 : i64} : (tensor<2x4x5x3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x4x5x3xf32>
func.func @batch_norm_feature_dim(%x: tensor<2x4x5x3xf32>, %g: tensor<3xf32>, %b: tensor<3xf32>) -> tensor<2x4x5x3xf32> {
  %0 = nn.batch_norm %x, %g, %b {feature_dim = 3 : i64} : (tensor<2x4x5x3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x4x5x3xf32>
  return %0 : tensor<2x4x5x3xf32>
}

// Tests that batch_norm keeps an explicit epsilon next to feature_dim = 0.
// CHECK-LABEL: func.func @batch_norm_epsilon
// CHECK: nn.batch_norm %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 1.000000e-03 : f64, feature_dim = 0 : i64} : (tensor<8x16xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8x16xf32>
func.func @batch_norm_epsilon(%x: tensor<8x16xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<8x16xf32> {
  %0 = nn.batch_norm %x, %g, %b {feature_dim = 0 : i64, epsilon = 1.0e-3 : f64} : (tensor<8x16xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// Tests that add_norm returns the sum and its norm: layer norm with beta,
// RMS norm without.
// CHECK-LABEL: func.func @add_norm
// CHECK: %{{.*}}, %{{.*}} = nn.add_norm %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 1.000000e-05 : f64} : (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<8xbf16>, tensor<8xbf16>) -> (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>)
// CHECK: %{{.*}}, %{{.*}} = nn.add_norm %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 9.9999999999999995E-7 : f64} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
func.func @add_norm(%h: tensor<2x4x8xbf16>, %o: tensor<2x4x8xbf16>, %g: tensor<8xbf16>, %b: tensor<8xbf16>, %v: tensor<8xf32>) -> (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<8xf32>, tensor<8xf32>) {
  %s, %y = nn.add_norm %h, %o, %g, %b {epsilon = 1.0e-5 : f64} : (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<8xbf16>, tensor<8xbf16>) -> (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>)
  %s2, %y2 = nn.add_norm %v, %v, %v {epsilon = 1.0e-6 : f64} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
  return %s, %y, %s2, %y2 : tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<8xf32>, tensor<8xf32>
}

// Tests that norm_grad_add returns dx, dgamma and, without rms, dbeta.
// CHECK-LABEL: func.func @norm_grad_add
// CHECK: %{{.*}}, %{{.*}}, %{{.*}} = nn.norm_grad_add %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 1.000000e-05 : f64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK: %{{.*}}, %{{.*}} = nn.norm_grad_add %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 9.9999999999999995E-7 : f64, rms} : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
func.func @norm_grad_add(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %dy: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<4x8xf32>, tensor<8xf32>) {
  %dx, %dg, %db = nn.norm_grad_add %x, %g, %dy, %dy {epsilon = 1.0e-5 : f64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %dx2, %dg2 = nn.norm_grad_add %x, %g, %dy, %dx {epsilon = 1.0e-6 : f64, rms} : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
  return %dx, %dg, %db, %dx2, %dg2 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<4x8xf32>, tensor<8xf32>
}

// Tests that a bf16 norm_grad_add may return f32 parameter gradients (as
// nn.layer_norm_grad: ABI 14).
// CHECK-LABEL: func.func @norm_grad_add_f32_params
// CHECK: nn.norm_grad_add {{.*}} -> (tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>)
// CHECK: nn.norm_grad_add {{.*}} -> (tensor<4x8xbf16>, tensor<8xf32>)
func.func @norm_grad_add_f32_params(%x: tensor<4x8xbf16>, %g: tensor<8xbf16>) -> (tensor<8xf32>, tensor<8xf32>) {
  %dx, %dg, %db = nn.norm_grad_add %x, %g, %x, %x {epsilon = 1.0e-5 : f64} : (tensor<4x8xbf16>, tensor<8xbf16>, tensor<4x8xbf16>, tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>)
  %dx2, %dg2 = nn.norm_grad_add %x, %g, %x, %dx {epsilon = 1.0e-6 : f64, rms} : (tensor<4x8xbf16>, tensor<8xbf16>, tensor<4x8xbf16>, tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<8xf32>)
  return %db, %dg2 : tensor<8xf32>, tensor<8xf32>
}
