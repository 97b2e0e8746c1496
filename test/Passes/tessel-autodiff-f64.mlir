// RUN: tessel-opt %s -split-input-file -tessel-autodiff="optimizer=adamw clip=1.0" | FileCheck %s
// RUN: tessel-opt %s -split-input-file -tessel-autodiff="optimizer=sgd momentum=0.9" | FileCheck %s --check-prefix=SGD

// Tests that an f64 model's update is f64 throughout: its states, the
// gradient scale, the sum of squares and the clipping factor (nothing
// rounded to f32, ABI 18).
// CHECK-LABEL: func.func @f64_update(
// CHECK-SAME: %[[P:.*]]: tensor<4xf64> {nn.init = #nn.init<zeros>, nn.param = "w"}, %[[G:.*]]: tensor<4xf64> {nn.grad = "w"}, %[[M:.*]]: tensor<4xf64> {nn.state = "w.m"}, %[[V:.*]]: tensor<4xf64> {nn.state = "w.v"}, %[[S:.*]]: tensor<f64> {nn.grad_scale})
// CHECK:       %[[SQ:.*]] = nn.sum_squares %[[G]] : (tensor<4xf64>) -> tensor<f64>
// CHECK:       %[[SCALE:.*]] = nn.clip_scale %[[SQ]], %[[S]] : tensor<f64>
// CHECK:       nn.optimizer_step adamw %[[G]], %[[SCALE]] outs(%[[P]], %[[M]], %[[V]] : tensor<4xf64>, tensor<4xf64>, tensor<4xf64>)
// SGD-LABEL: func.func @f64_update(
// SGD-SAME: %[[MOM:[^:]*]]: tensor<4xf64> {nn.state = "w.momentum"}, %[[S:[^:]*]]: tensor<f64> {nn.grad_scale})
// SGD:       nn.optimizer_step sgd %{{.*}}, %[[S]] outs(%{{.*}}, %[[MOM]] : tensor<4xf64>, tensor<4xf64>)
func.func @f64(%w: tensor<4xf64> {nn.init = #nn.init<zeros>, nn.param = "w"},
               %x: tensor<4xf64> {nn.input}) -> tensor<f64> {
  %y = nn.mul %w, %x : tensor<4xf64>
  %l = nn.reduce_sum %y dims = [0] : tensor<4xf64> -> tensor<f64>
  return %l : tensor<f64>
}

// -----

// Tests a model with an f32 and an f64 parameter: the f64 one's states and
// the update's scalars are f64; the f32 one keeps f32 states and reads the
// scale rounded once (one nn.cast for every f32 step).
// CHECK-LABEL: func.func @mixed_update(
// CHECK-SAME: %[[A:.*]]: tensor<4xf32> {nn.init = #nn.init<zeros>, nn.param = "a"}, %[[B:.*]]: tensor<4xf64> {nn.init = #nn.init<zeros>, nn.param = "b"}, %[[GA:.*]]: tensor<4xf32> {nn.grad = "a"}, %[[GB:.*]]: tensor<4xf64> {nn.grad = "b"}, %[[MA:.*]]: tensor<4xf32> {nn.state = "a.m"}, %[[VA:.*]]: tensor<4xf32> {nn.state = "a.v"}, %[[MB:.*]]: tensor<4xf64> {nn.state = "b.m"}, %[[VB:.*]]: tensor<4xf64> {nn.state = "b.v"}, %[[S:.*]]: tensor<f64> {nn.grad_scale})
// CHECK:       %[[SQ:.*]] = nn.sum_squares %[[GA]], %[[GB]] : (tensor<4xf32>, tensor<4xf64>) -> tensor<f64>
// CHECK:       %[[SCALE:.*]] = nn.clip_scale %[[SQ]], %[[S]]
// CHECK:       %[[ROUNDED:.*]] = nn.cast %[[SCALE]] : tensor<f64> to tensor<f32>
// CHECK:       nn.optimizer_step adamw %[[GA]], %[[ROUNDED]] outs(%[[A]], %[[MA]], %[[VA]] : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
// CHECK:       nn.optimizer_step adamw %[[GB]], %[[SCALE]] outs(%[[B]], %[[MB]], %[[VB]] : tensor<4xf64>, tensor<4xf64>, tensor<4xf64>)
// CHECK-NOT:   nn.cast
// CHECK:       return
func.func @mixed(%a: tensor<4xf32> {nn.init = #nn.init<zeros>, nn.param = "a"},
                 %b: tensor<4xf64> {nn.init = #nn.init<zeros>, nn.param = "b"},
                 %x: tensor<4xf32> {nn.input}) -> tensor<f64> {
  %y = nn.mul %a, %x : tensor<4xf32>
  %yw = nn.cast %y : tensor<4xf32> to tensor<4xf64>
  %z = nn.mul %yw, %b : tensor<4xf64>
  %l = nn.reduce_sum %z dims = [0] : tensor<4xf64> -> tensor<f64>
  return %l : tensor<f64>
}
