// Tests tessel-keep-stage-activations on a last stage's loss gradient: it
// moves to forward_keep, kept in place of the logits, where keeping it
// keeps no more bytes and it reads nothing a Forward lacks; then
// tessel-fuse-epilogues fuses it with the loss there.
//
// RUN: tessel-opt %s --pass-pipeline="builtin.module(builtin.module(tessel-keep-stage-activations))" | FileCheck %s
// RUN: tessel-opt %s --pass-pipeline="builtin.module(builtin.module(tessel-keep-stage-activations,tessel-fuse-epilogues))" | FileCheck %s --check-prefix=FUSED

module {

  // Tests that the last stage's forward_keep computes the loss gradient
  // (seeded by a constant) and keeps it instead of the logits, which
  // nothing else reads; that the backward starts from it; and that the
  // fusion then reads each row once, writing the gradient over the logits.
  // CHECK-LABEL: module @last
  // CHECK: func.func @f_forward_keep({{.*}}) -> (tensor<f32>, tensor<4x8xf32> {nn.kept = 0 : i64}) attributes {nn.entry = "forward_keep"}
  // CHECK-NEXT: %[[Z:.*]] = nn.matmul
  // CHECK-NEXT: %[[L:.*]] = nn.cross_entropy %[[Z]]
  // CHECK-NEXT: %[[ONE:.*]] = nn.constant
  // CHECK-NEXT: %[[DZ:.*]] = nn.cross_entropy_grad %[[Z]], %{{.*}}, %[[ONE]]
  // CHECK-NEXT: return %[[L]], %[[DZ]]
  // CHECK: func.func @f_backward(%[[H:.*]]: tensor<4x8xf32> {nn.stage_input}, {{.*}}, %[[W:.*]]: tensor<8x8xf32> {{{.*}}nn.param = "w"}, %[[GW:.*]]: tensor<8x8xf32> {nn.grad = "w"}, %[[KDZ:.*]]: tensor<4x8xf32> {nn.kept = 0 : i64}) -> (tensor<4x8xf32> {nn.input_grad}, tensor<8x8xf32> {nn.grad = "w"}) attributes {nn.entry = "backward"}
  // CHECK-NOT: nn.cross_entropy
  // CHECK-NEXT: %[[DH:.*]] = nn.matmul %[[KDZ]], %[[W]] transpose_rhs
  // CHECK-NEXT: %[[DW:.*]] = nn.matmul %[[H]], %[[KDZ]] transpose_lhs
  // CHECK-NEXT: %[[A:.*]] = nn.accumulate %[[DW]] outs(%[[GW]])
  // CHECK-NEXT: return %[[DH]], %[[A]]
  // FUSED-LABEL: module @last
  // FUSED: func.func @f_forward_keep
  // FUSED: %[[Z:.*]] = nn.matmul
  // FUSED: %[[L:.*]], %[[DZ:.*]] = nn.cross_entropy_with_grad %[[Z]], %{{.*}}, %{{.*}} in_place
  // FUSED-NEXT: return %[[L]], %[[DZ]]
  // FUSED-NOT: nn.cross_entropy
  // FUSED: func.func @f_backward
  // FUSED-NOT: nn.cross_entropy
  // FUSED: return
  module @last attributes {nn.keep_activations, nn.stage = 1 : i64} {
    func.func @f_backward(%h: tensor<4x8xf32> {nn.stage_input}, %y: tensor<4xi32> {nn.label},
                          %w: tensor<8x8xf32> {nn.init = #nn.init<zeros>, nn.param = "w"}, %gw: tensor<8x8xf32> {nn.grad = "w"})
        -> (tensor<f32>, tensor<4x8xf32> {nn.input_grad}, tensor<8x8xf32> {nn.grad = "w"}) attributes {nn.entry = "backward"} {
      %z = nn.matmul %h, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
      %l = nn.cross_entropy %z, %y : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
      %one = nn.constant dense<1.0> : tensor<f32>
      %dz = nn.cross_entropy_grad %z, %y, %one : (tensor<4x8xf32>, tensor<4xi32>, tensor<f32>) -> tensor<4x8xf32>
      %dh = nn.matmul %dz, %w transpose_rhs : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
      %dw = nn.matmul %h, %dz transpose_lhs : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
      %a = nn.accumulate %dw outs(%gw) : tensor<8x8xf32>
      return %l, %dh, %a : tensor<f32>, tensor<4x8xf32>, tensor<8x8xf32>
    }
  }

  // Tests that under mixed precision the gradient's rounding moves with it:
  // forward_keep keeps the bf16 gradient, not the widened f32 logits (half
  // the bytes); the fusions then read the bf16 logits and write the bf16
  // gradient in one kernel.
  // CHECK-LABEL: module @bf16
  // CHECK: func.func @f_forward_keep({{.*}}) -> (tensor<f32>, tensor<4x8xbf16> {nn.kept = 0 : i64})
  // CHECK: %[[Z:.*]] = nn.cast %{{.*}} : tensor<4x8xbf16> to tensor<4x8xf32>
  // CHECK: %[[DZ:.*]] = nn.cross_entropy_grad %[[Z]]
  // CHECK-NEXT: %[[R:.*]] = nn.cast %[[DZ]] : tensor<4x8xf32> to tensor<4x8xbf16>
  // CHECK-NEXT: return %{{.*}}, %[[R]]
  // CHECK: func.func @f_backward({{.*}}%{{.*}}: tensor<4x8xbf16> {nn.kept = 0 : i64})
  // CHECK-NOT: nn.cast %{{.*}} : tensor<4x8xbf16> to tensor<4x8xf32>
  // CHECK: return
  // FUSED-LABEL: module @bf16
  // FUSED: func.func @f_forward_keep
  // FUSED: %[[Z:.*]] = nn.matmul
  // FUSED: nn.cross_entropy_with_grad %[[Z]], %{{.*}}, %{{.*}} in_place : (tensor<4x8xbf16>, tensor<4xi32>, tensor<f32>) -> (tensor<f32>, tensor<4x8xbf16>)
  // FUSED-NOT: nn.cast
  // FUSED: return
  module @bf16 attributes {nn.keep_activations, nn.stage = 1 : i64} {
    func.func @f_backward(%h: tensor<4x8xbf16> {nn.stage_input}, %y: tensor<4xi32> {nn.label},
                          %w: tensor<8x8xbf16> {nn.init = #nn.init<zeros>, nn.param = "w"}, %gw: tensor<8x8xf32> {nn.grad = "w"})
        -> (tensor<f32>, tensor<4x8xbf16> {nn.input_grad}, tensor<8x8xf32> {nn.grad = "w"}) attributes {nn.entry = "backward"} {
      %zb = nn.matmul %h, %w : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
      %z = nn.cast %zb : tensor<4x8xbf16> to tensor<4x8xf32>
      %l = nn.cross_entropy %z, %y : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
      %one = nn.constant dense<1.0> : tensor<f32>
      %dz = nn.cross_entropy_grad %z, %y, %one : (tensor<4x8xf32>, tensor<4xi32>, tensor<f32>) -> tensor<4x8xf32>
      %dzb = nn.cast %dz : tensor<4x8xf32> to tensor<4x8xbf16>
      %dh = nn.matmul %dzb, %w transpose_rhs : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
      %dw = nn.matmul %h, %dzb transpose_lhs : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<8x8xbf16>
      %dwf = nn.cast %dw : tensor<8x8xbf16> to tensor<8x8xf32>
      %a = nn.accumulate %dwf outs(%gw) : tensor<8x8xf32>
      return %l, %dh, %a : tensor<f32>, tensor<4x8xbf16>, tensor<8x8xf32>
    }
  }

  // Tests that a loss gradient stays in the backward where keeping it
  // would keep more: the logits are also read by a z-loss's derivative
  // (PaLM's log-partition penalty, here a square), so the logits are kept
  // either way.
  // CHECK-LABEL: module @zloss
  // CHECK: func.func @f_forward_keep({{.*}}) -> (tensor<f32>, tensor<4x8xf32> {nn.kept = 0 : i64}) attributes
  // CHECK-NOT: nn.cross_entropy_grad
  // CHECK: return
  // CHECK: func.func @f_backward
  // CHECK: nn.cross_entropy_grad
  module @zloss attributes {nn.keep_activations, nn.stage = 1 : i64} {
    func.func @f_backward(%z: tensor<4x8xf32> {nn.stage_input}, %y: tensor<4xi32> {nn.label})
        -> (tensor<f32>, tensor<4x8xf32> {nn.input_grad}) attributes {nn.entry = "backward"} {
      %t = nn.tanh %z : tensor<4x8xf32>
      %l = nn.cross_entropy %t, %y : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
      %one = nn.constant dense<1.0> : tensor<f32>
      %dt = nn.cross_entropy_grad %t, %y, %one : (tensor<4x8xf32>, tensor<4xi32>, tensor<f32>) -> tensor<4x8xf32>
      %sq = nn.mul %t, %t : tensor<4x8xf32>
      %dz = nn.add %dt, %sq : tensor<4x8xf32>
      return %l, %dz : tensor<f32>, tensor<4x8xf32>
    }
  }

  // Tests that a loss gradient reading the incoming gradient (a stage whose
  // loss is seeded from after it) stays in the backward: a Forward has no
  // such gradient yet.
  // CHECK-LABEL: module @seeded
  // CHECK: func.func @f_forward_keep({{.*}}) -> (tensor<f32> {nn.stage_output}, tensor<4x8xf32> {nn.kept = 0 : i64})
  // CHECK-NOT: nn.cross_entropy_grad
  // CHECK: return
  // CHECK: func.func @f_backward
  // CHECK: nn.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} :
  module @seeded attributes {nn.keep_activations, nn.stage = 0 : i64} {
    func.func @f_backward(%z: tensor<4x8xf32> {nn.stage_input}, %y: tensor<4xi32> {nn.label}, %dl: tensor<f32> {nn.output_grad})
        -> (tensor<f32> {nn.stage_output}, tensor<4x8xf32> {nn.input_grad}) attributes {nn.entry = "backward"} {
      %t = nn.tanh %z : tensor<4x8xf32>
      %l = nn.cross_entropy %t, %y : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
      %dt = nn.cross_entropy_grad %t, %y, %dl : (tensor<4x8xf32>, tensor<4xi32>, tensor<f32>) -> tensor<4x8xf32>
      %dz = nn.relu_grad %t, %dt : tensor<4x8xf32>
      return %l, %dz : tensor<f32>, tensor<4x8xf32>
    }
  }
}
