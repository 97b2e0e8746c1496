// RUN: tessel-opt %s -split-input-file -tessel-autodiff="lr=0.5 weight-decay=0.1" -verify-diagnostics | FileCheck %s
// RUN: tessel-opt %s -split-input-file -tessel-autodiff="no-decay=fc.* lr=0.5 weight-decay=0.1" | FileCheck %s --check-prefix=OPTION

// Weight decay per parameter group: a parameter whose nn.param name a
// no_decay pattern matches steps with weight_decay 0 (the op's default, so
// its attribute dictionary prints without it); the others with the
// configured one. The no-decay option replaces nn.train's patterns. (A
// pattern that matches nothing: tessel-autodiff-invalid.mlir.)

// Tests that nn.train's no_decay patterns ('*' across dots, '?' one
// character) pick the parameters that do not decay.
// CHECK: module attributes {nn.train = {{{.*}}no_decay = "*.bias,ln?weight"{{.*}}weight_decay = 1.000000e-01 : f64}}
// CHECK-LABEL: func.func @groups_update(
// CHECK-SAME: %[[W:[^:]*]]: tensor<4x3xf32> {{.*}}nn.param = "fc.weight"}, %[[B:[^:]*]]: tensor<3xf32> {{.*}}nn.param = "fc.bias"}, %[[G:[^:]*]]: tensor<3xf32> {{.*}}nn.param = "ln.weight"}, %[[E:[^:]*]]: tensor<3xf32> {{.*}}nn.param = "h.0.ln_1.bias"}
// CHECK: nn.optimizer_step adamw %{{.*}} outs(%[[W]], {{.*}}) {lr = 5.000000e-01 : f64, weight_decay = 1.000000e-01 : f64} :
// CHECK: nn.optimizer_step adamw %{{.*}} outs(%[[B]], {{.*}}) {lr = 5.000000e-01 : f64} :
// CHECK: nn.optimizer_step adamw %{{.*}} outs(%[[G]], {{.*}}) {lr = 5.000000e-01 : f64} :
// CHECK: nn.optimizer_step adamw %{{.*}} outs(%[[E]], {{.*}}) {lr = 5.000000e-01 : f64} :
// OPTION: module attributes {nn.train = {{{.*}}no_decay = "fc.*"
// OPTION-LABEL: func.func @groups_update(
// OPTION: nn.optimizer_step adamw {{.*}} : tensor<4x3xf32>
// OPTION-NOT: weight_decay
// OPTION: nn.optimizer_step adamw {{.*}} : tensor<3xf32>
// OPTION-NOT: weight_decay
// OPTION: nn.optimizer_step adamw {{.*}} {lr = 5.000000e-01 : f64, weight_decay = 1.000000e-01 : f64} : tensor<3xf32>
// OPTION: nn.optimizer_step adamw {{.*}} {lr = 5.000000e-01 : f64, weight_decay = 1.000000e-01 : f64} : tensor<3xf32>
module attributes {nn.train = {no_decay = "*.bias,ln?weight"}} {
  func.func @groups(%x: tensor<2x4xf32> {nn.input},
                    %w: tensor<4x3xf32> {nn.param = "fc.weight", nn.init = #nn.init<normal, 0.02>},
                    %b: tensor<3xf32> {nn.param = "fc.bias", nn.init = #nn.init<zeros>},
                    %g: tensor<3xf32> {nn.param = "ln.weight", nn.init = #nn.init<ones>},
                    %e: tensor<3xf32> {nn.param = "h.0.ln_1.bias", nn.init = #nn.init<zeros>}) -> tensor<f32> {
    %h = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
    %s = nn.add %b, %e : tensor<3xf32>
    %bb = nn.broadcast %s dims = [1] : tensor<3xf32> -> tensor<2x3xf32>
    %gb = nn.broadcast %g dims = [1] : tensor<3xf32> -> tensor<2x3xf32>
    %y = nn.add %h, %bb : tensor<2x3xf32>
    %z = nn.mul %y, %gb : tensor<2x3xf32>
    %l = nn.reduce_mean %z dims = [0, 1] : tensor<2x3xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Tests that without patterns every parameter decays (one group), and that
// nn.train records an empty no_decay.
// CHECK: module attributes {nn.train = {{{.*}}no_decay = ""
// CHECK-LABEL: func.func @one_group_update(
// CHECK: nn.optimizer_step adamw {{.*}} {lr = 5.000000e-01 : f64, weight_decay = 1.000000e-01 : f64} : tensor<4x3xf32>
// CHECK: nn.optimizer_step adamw {{.*}} {lr = 5.000000e-01 : f64, weight_decay = 1.000000e-01 : f64} : tensor<3xf32>
// OPTION-LABEL: func.func @one_group_update(
// OPTION: nn.optimizer_step adamw {{.*}} : tensor<4x3xf32>
// OPTION-NOT: weight_decay
// OPTION: nn.optimizer_step adamw {{.*}} : tensor<3xf32>
// OPTION-NOT: weight_decay
// OPTION: return
func.func @one_group(%x: tensor<2x4xf32> {nn.input},
                     %w: tensor<4x3xf32> {nn.param = "fc.weight", nn.init = #nn.init<normal, 0.02>},
                     %b: tensor<3xf32> {nn.param = "fc.bias", nn.init = #nn.init<zeros>}) -> tensor<f32> {
  %h = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %bb = nn.broadcast %b dims = [1] : tensor<3xf32> -> tensor<2x3xf32>
  %y = nn.add %h, %bb : tensor<2x3xf32>
  %l = nn.reduce_mean %y dims = [0, 1] : tensor<2x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}
