// RUN: tessel-opt %s | tessel-opt | FileCheck %s
// RUN: tessel-opt %s --mlir-print-op-generic | tessel-opt | FileCheck %s

// Tests that sum_squares takes float tensors of any shapes and types and gives an f32 scalar.
// CHECK-LABEL: func.func @sum_squares
// CHECK: nn.sum_squares %{{.*}}, %{{.*}}, %{{.*}} : (tensor<8x16xf32>, tensor<16xbf16>, tensor<f64>) -> tensor<f32>
// CHECK: nn.sum_squares %{{.*}} : (tensor<3xf16>) -> tensor<f32>
func.func @sum_squares(%a: tensor<8x16xf32>, %b: tensor<16xbf16>, %c: tensor<f64>, %d: tensor<3xf16>) -> (tensor<f32>, tensor<f32>) {
  %0 = nn.sum_squares %a, %b, %c : (tensor<8x16xf32>, tensor<16xbf16>, tensor<f64>) -> tensor<f32>
  %1 = nn.sum_squares %d : (tensor<3xf16>) -> tensor<f32>
  return %0, %1 : tensor<f32>, tensor<f32>
}

// Tests that clip_scale defaults to max_norm 1.0 (elided) and keeps another, including 0 (no clipping).
// CHECK-LABEL: func.func @clip_scale
// CHECK: nn.clip_scale %{{.*}}, %{{.*}} : tensor<f32>
// CHECK-NOT: max_norm = 1.0
// CHECK: nn.clip_scale %{{.*}}, %{{.*}} {max_norm = 5.000000e-01 : f64} : tensor<f32>
// CHECK: nn.clip_scale %{{.*}}, %{{.*}} {max_norm = 0.000000e+00 : f64} : tensor<f32>
func.func @clip_scale(%ss: tensor<f32>, %gs: tensor<f32>) -> (tensor<f32>, tensor<f32>, tensor<f32>) {
  %0 = nn.clip_scale %ss, %gs {max_norm = 1.0 : f64} : tensor<f32>
  %1 = nn.clip_scale %ss, %gs {max_norm = 0.5 : f64} : tensor<f32>
  %2 = nn.clip_scale %ss, %gs {max_norm = 0.0 : f64} : tensor<f32>
  return %0, %1, %2 : tensor<f32>, tensor<f32>, tensor<f32>
}

// Tests that adamw updates the parameter and its m, v states in place, with its attributes and a warmup-cosine schedule.
// CHECK-LABEL: func.func @adamw
// CHECK: %{{.*}}:3 = nn.optimizer_step adamw %{{.*}}, %{{.*}} outs(%{{.*}}, %{{.*}}, %{{.*}} : tensor<8x16xbf16>, tensor<8x16xf32>, tensor<8x16xf32>) {lr = 3.000000e-04 : f64, schedule = #nn.lr_schedule<warmup_cosine>, total_steps = 1000 : i64, warmup = 100 : i64, weight_decay = 1.000000e-01 : f64} : tensor<8x16xbf16>
func.func @adamw(%p: tensor<8x16xbf16>, %g: tensor<8x16xbf16>, %s: tensor<f32>, %m: tensor<8x16xf32>, %v: tensor<8x16xf32>) -> (tensor<8x16xbf16>, tensor<8x16xf32>, tensor<8x16xf32>) {
  %p2, %m2, %v2 = nn.optimizer_step adamw %g, %s outs(%p, %m, %v : tensor<8x16xbf16>, tensor<8x16xf32>, tensor<8x16xf32>) {lr = 3.0e-4 : f64, weight_decay = 0.1 : f64, schedule = #nn.lr_schedule<warmup_cosine>, warmup = 100 : i64, total_steps = 1000 : i64} : tensor<8x16xbf16>
  return %p2, %m2, %v2 : tensor<8x16xbf16>, tensor<8x16xf32>, tensor<8x16xf32>
}

// Tests that the default attributes (PyTorch's) are elided: adam with lr 1e-3, betas (0.9, 0.999), eps 1e-8, a constant schedule.
// CHECK-LABEL: func.func @adam_defaults
// CHECK: nn.optimizer_step adam %{{.*}}, %{{.*}} outs(%{{.*}}, %{{.*}}, %{{.*}} : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) : tensor<16xf32>
func.func @adam_defaults(%p: tensor<16xf32>, %g: tensor<16xf32>, %s: tensor<f32>, %m: tensor<16xf32>, %v: tensor<16xf32>) -> tensor<16xf32> {
  %p2, %m2, %v2 = nn.optimizer_step adam %g, %s outs(%p, %m, %v : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) {lr = 1.0e-3 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, schedule = #nn.lr_schedule<constant>} : tensor<16xf32>
  return %p2 : tensor<16xf32>
}

// Tests that sgd keeps no state without momentum and one (the momentum buffer) with it, Nesterov's form included.
// CHECK-LABEL: func.func @sgd
// CHECK: nn.optimizer_step sgd %{{.*}}, %{{.*}} outs(%{{.*}} : tensor<4x4xf32>) {lr = 1.000000e-01 : f64} : tensor<4x4xf32>
// CHECK: %{{.*}}:2 = nn.optimizer_step sgd %{{.*}}, %{{.*}} outs(%{{.*}}, %{{.*}} : tensor<4x4xf32>, tensor<4x4xf32>) {momentum = 9.000000e-01 : f64, nesterov} : tensor<4x4xf32>
func.func @sgd(%p: tensor<4x4xf32>, %q: tensor<4x4xf32>, %g: tensor<4x4xf32>, %s: tensor<f32>, %buf: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %0 = nn.optimizer_step sgd %g, %s outs(%p : tensor<4x4xf32>) {lr = 0.1 : f64} : tensor<4x4xf32>
  %1, %2 = nn.optimizer_step sgd %g, %s outs(%q, %buf : tensor<4x4xf32>, tensor<4x4xf32>) {momentum = 0.9 : f64, nesterov} : tensor<4x4xf32>
  return %1, %2, %0 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// Tests that accumulate adds into its init in place, for float and integer tensors.
// CHECK-LABEL: func.func @accumulate
// CHECK: nn.accumulate %{{.*}} outs(%{{.*}}) : tensor<8x16xf32>
// CHECK: nn.accumulate %{{.*}} outs(%{{.*}}) : tensor<3xi64>
func.func @accumulate(%g: tensor<8x16xf32>, %acc: tensor<8x16xf32>, %i: tensor<3xi64>, %j: tensor<3xi64>) -> (tensor<8x16xf32>, tensor<3xi64>) {
  %0 = nn.accumulate %g outs(%acc) : tensor<8x16xf32>
  %1 = nn.accumulate %i outs(%j) : tensor<3xi64>
  return %0, %1 : tensor<8x16xf32>, tensor<3xi64>
}
