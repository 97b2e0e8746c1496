// RUN: tessel-opt %s -split-input-file -tessel-autodiff="freeze=fc.bias,ln?weight optimizer=sgd momentum=0.9" -verify-diagnostics | FileCheck %s
// RUN: tessel-opt %s -split-input-file -tessel-autodiff | FileCheck %s --check-prefix=TRAIN
// RUN: tessel-opt %s -split-input-file -tessel-autodiff="freeze=layers.weight optimizer=sgd" 2>/dev/null | FileCheck %s --check-prefix=REPEAT

// Frozen parameters (PyTorch's requires_grad=False): a parameter whose
// nn.param name a freeze pattern matches is read as a constant. The
// backward takes no accumulator for it and returns no gradient, the
// update neither steps it nor keeps its state; nn.train records the
// patterns (the model description's "train", read by tessel-run).

// Tests that the frozen fc.bias and ln.weight get no gradient, no momentum
// and no optimizer step; fc.weight trains as before.
// CHECK: module attributes {nn.train = {{{.*}}freeze = "fc.bias,ln?weight"
// CHECK-LABEL: func.func @frozen_backward(
// CHECK-SAME:    {nn.grad = "fc.weight"})
// CHECK-NOT:     nn.grad = "fc.bias"
// CHECK-NOT:     nn.grad = "ln.weight"
// CHECK-SAME:    attributes {nn.entry = "backward"}
// CHECK-LABEL: func.func @frozen_update(
// CHECK-NOT:     nn.state = "fc.bias.momentum"
// CHECK-NOT:     nn.state = "ln.weight.momentum"
// CHECK:         nn.optimizer_step sgd
// CHECK-NOT:     nn.optimizer_step
// CHECK:         return
// TRAIN: module attributes {nn.train = {{{.*}}freeze = ""
// TRAIN-LABEL: func.func @frozen_update(
// TRAIN-COUNT-3: nn.optimizer_step adamw
func.func @frozen(%x: tensor<2x4xf32> {nn.input},
                  %w: tensor<4x3xf32> {nn.param = "fc.weight", nn.init = #nn.init<normal, 0.02>},
                  %b: tensor<3xf32> {nn.param = "fc.bias", nn.init = #nn.init<zeros>},
                  %g: tensor<3xf32> {nn.param = "ln.weight", nn.init = #nn.init<ones>}) -> tensor<f32> {
  %h = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %bb = nn.broadcast %b dims = [1] : tensor<3xf32> -> tensor<2x3xf32>
  %gb = nn.broadcast %g dims = [1] : tensor<3xf32> -> tensor<2x3xf32>
  %y = nn.add %h, %bb : tensor<2x3xf32>
  %z = nn.mul %y, %gb : tensor<2x3xf32>
  %l = nn.reduce_mean %z dims = [0, 1] : tensor<2x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a pattern naming no parameter is warned about (the parameter
// it meant would silently train), here ln?weight.
// CHECK-LABEL: func.func @unmatched_update(
// expected-warning @+1 {{freeze pattern 'ln?weight' matches no parameter of the model}}
func.func @unmatched(%x: tensor<2x4xf32> {nn.input},
                     %w: tensor<4x3xf32> {nn.param = "fc.weight", nn.init = #nn.init<normal, 0.02>},
                     %b: tensor<3xf32> {nn.param = "fc.bias", nn.init = #nn.init<zeros>}) -> tensor<f32> {
  %h = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %bb = nn.broadcast %b dims = [1] : tensor<3xf32> -> tensor<2x3xf32>
  %y = nn.add %h, %bb : tensor<2x3xf32>
  %l = nn.reduce_mean %y dims = [0, 1] : tensor<2x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a repeat's frozen stacked parameter costs nothing in the
// layer's derivative: it returns the carried cotangent and the trained
// gain's gradient only, with one GEMM (the input's cotangent) and none for
// the frozen weight's.
// REPEAT-LABEL: func.func private @layer_derivative(
// REPEAT-SAME:    -> (tensor<2x4xf32>, tensor<4xf32>)
// REPEAT-COUNT-1: nn.matmul
// REPEAT-NOT:     nn.matmul
// REPEAT:         return
// REPEAT-LABEL: func.func @frozen_layers_backward(
// REPEAT-SAME:    {nn.grad = "layers.gain"}
// REPEAT-NOT:     nn.grad = "layers.weight"
// REPEAT-SAME:    attributes {nn.entry = "backward"}
func.func private @layer(%h: tensor<2x4xf32>, %w: tensor<4x4xf32>, %g: tensor<4xf32>) -> tensor<2x4xf32> {
  %y = nn.matmul %h, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gb = nn.broadcast %g dims = [1] : tensor<4xf32> -> tensor<2x4xf32>
  %z = nn.mul %y, %gb : tensor<2x4xf32>
  %t = nn.tanh %z : tensor<2x4xf32>
  return %t : tensor<2x4xf32>
}

// expected-warning @+2 {{freeze pattern 'fc.bias' matches no parameter of the model}}
// expected-warning @+1 {{freeze pattern 'ln?weight' matches no parameter of the model}}
func.func @frozen_layers(%x: tensor<2x4xf32> {nn.input},
                         %w: tensor<3x4x4xf32> {nn.param = "layers.weight", nn.init = #nn.init<normal, 0.02>},
                         %g: tensor<3x4xf32> {nn.param = "layers.gain", nn.init = #nn.init<ones>}) -> tensor<f32> {
  %h = nn.repeat @layer(%x) params(%w, %g) : (tensor<2x4xf32>, tensor<3x4x4xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  %l = nn.reduce_mean %h dims = [0, 1] : tensor<2x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
