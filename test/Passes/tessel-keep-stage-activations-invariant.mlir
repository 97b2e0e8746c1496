// Tests tessel-keep-stage-activations on a stage's backward that reads a
// value of the parameters only, and on a module without the mark.
//
// RUN: tessel-opt %s --pass-pipeline="builtin.module(builtin.module(tessel-keep-stage-activations))" | FileCheck %s

module {

  // Tests that a value of the parameters only (a doubled weight) is
  // recomputed by the backward, where it is read, not kept per microbatch,
  // while the activation it multiplies is kept; and that a module without
  // the mark is left alone.
  // CHECK-LABEL: module @stage attributes {nn.keep_activations
  // CHECK: func.func @f_forward_keep(%[[X:.*]]: tensor<4xf32> {nn.stage_input}, %[[W:.*]]: tensor<4xf32> {nn.init = #nn.init<zeros>, nn.param = "w"}, %{{.*}}: tensor<4xf32> {nn.grad = "w"}) -> (tensor<f32>, tensor<4xf32> {nn.kept = 0 : i64}) attributes {nn.entry = "forward_keep"}
  // CHECK-NEXT: %[[W2:.*]] = nn.add %[[W]], %[[W]]
  // CHECK-NEXT: %[[T:.*]] = nn.tanh %[[X]]
  // CHECK-NEXT: %[[P:.*]] = nn.mul %[[T]], %[[W2]]
  // CHECK-NEXT: %[[L:.*]] = nn.reduce_sum %[[P]]
  // CHECK-NEXT: return %[[L]], %[[T]]
  // CHECK: func.func @f_backward(%{{.*}}: tensor<4xf32> {nn.stage_input}, %[[W:.*]]: tensor<4xf32> {nn.init = #nn.init<zeros>, nn.param = "w"}, %[[G:.*]]: tensor<4xf32> {nn.grad = "w"}, %[[T:.*]]: tensor<4xf32> {nn.kept = 0 : i64}) -> (tensor<4xf32> {nn.input_grad}, tensor<4xf32> {nn.grad = "w"}) attributes {nn.entry = "backward"}
  // CHECK-NEXT: %[[W2:.*]] = nn.add %[[W]], %[[W]]
  // CHECK-NEXT: %[[DX:.*]] = nn.mul %[[T]], %[[W2]]
  // CHECK-NEXT: %[[A:.*]] = nn.accumulate %[[T]] outs(%[[G]])
  // CHECK-NEXT: return %[[DX]], %[[A]]
  module @stage attributes {nn.keep_activations, nn.stage = 1 : i64} {
    func.func @f_backward(%x: tensor<4xf32> {nn.stage_input}, %w: tensor<4xf32> {nn.init = #nn.init<zeros>, nn.param = "w"}, %gw: tensor<4xf32> {nn.grad = "w"})
        -> (tensor<f32>, tensor<4xf32> {nn.input_grad}, tensor<4xf32> {nn.grad = "w"}) attributes {nn.entry = "backward"} {
      %w2 = nn.add %w, %w : tensor<4xf32>
      %t = nn.tanh %x : tensor<4xf32>
      %p = nn.mul %t, %w2 : tensor<4xf32>
      %l = nn.reduce_sum %p dims = [0] : tensor<4xf32> -> tensor<f32>
      %dx = nn.mul %t, %w2 : tensor<4xf32>
      %a = nn.accumulate %t outs(%gw) : tensor<4xf32>
      return %l, %dx, %a : tensor<f32>, tensor<4xf32>, tensor<4xf32>
    }
  }
  // CHECK-LABEL: module @unmarked
  // CHECK-NOT: forward_keep
  module @unmarked attributes {nn.stage = 1 : i64} {
    func.func @f_backward(%x: tensor<4xf32> {nn.input}, %gw: tensor<4xf32> {nn.grad = "w"})
        -> (tensor<f32>, tensor<4xf32> {nn.grad = "w"}) attributes {nn.entry = "backward"} {
      %l = nn.reduce_sum %x dims = [0] : tensor<4xf32> -> tensor<f32>
      %a = nn.accumulate %x outs(%gw) : tensor<4xf32>
      return %l, %a : tensor<f32>, tensor<4xf32>
    }
  }
}
