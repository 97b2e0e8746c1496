// Tests tessel-keep-stage-activations on the stages of a small model's four
// layers over pp=2 (tessel-pipeline-split marks each stage, then
// tessel-autodiff derives its backward), and with --stage-recompute
// (tessel-keep-stage-activations-invariant.mlir: values of the parameters
// only).
//
// RUN: tessel-opt %s --pass-pipeline="builtin.module(tessel-pipeline-split{mesh=pp=2},builtin.module(tessel-autodiff,canonicalize,cse,tessel-keep-stage-activations))" | FileCheck %s
// RUN: tessel-opt %s --pass-pipeline="builtin.module(tessel-pipeline-split{mesh=pp=2 stage-recompute=true},builtin.module(tessel-autodiff,canonicalize,cse,tessel-keep-stage-activations))" | FileCheck %s --check-prefix=RECOMPUTE

// Tests that stage 0's forward_keep takes the backward's arguments (each
// feed keeps its place in the arena), runs the embedding and the layers'
// keep repeat, and returns the output activation, then the two stacks the
// layers' derivative reads (nn.kept = 0, 1); that its backward takes them
// as arguments and starts from the output gradient, with nothing of the
// forward left (no keep repeat), and returns only the accumulators.
// CHECK-LABEL: module @stage0 attributes {nn.first_layer = 0 : i64, nn.keep_activations, nn.stage = 0 : i64
// CHECK: func.func @loss_forward_keep(%[[X:.*]]: tensor<4x8xf32> {{{.*}}nn.input}, %{{.*}}: tensor<4xi32> {{{.*}}nn.label}, %[[E:.*]]: tensor<8x8xf32> {{{.*}}nn.param = "e"}, %[[W:.*]]: tensor<2x8x8xf32> {{{.*}}nn.param = "w"}, %[[B:.*]]: tensor<2x8xf32> {{{.*}}nn.param = "b"}, %{{.*}}: tensor<4x8xf32> {nn.output_grad}, %{{.*}}: tensor<8x8xf32> {nn.grad = "e"}, %{{.*}}: tensor<2x8x8xf32> {nn.grad = "w", {{.*}}}, %{{.*}}: tensor<2x8xf32> {nn.grad = "b", {{.*}}}) -> (tensor<4x8xf32> {nn.stage_output}, tensor<2x4x8xf32> {nn.kept = 0 : i64}, tensor<2x4x8xf32> {nn.kept = 1 : i64}) attributes {nn.entry = "forward_keep", nn.stage = 0 : i64}
// CHECK-NEXT: %[[H:.*]] = nn.matmul %[[X]], %[[E]]
// CHECK-NEXT: %[[R:.*]]:3 = nn.repeat @layer_keep(%[[H]]) params(%[[W]], %[[B]])
// CHECK-NEXT: return %[[R]]#0, %[[R]]#1, %[[R]]#2
// CHECK: func.func @loss_backward(%{{.*}}, %[[DY:.*]]: tensor<4x8xf32> {nn.output_grad}, %{{.*}}: tensor<8x8xf32> {nn.grad = "e"}, %{{.*}}, %{{.*}}, %[[K0:.*]]: tensor<2x4x8xf32> {nn.kept = 0 : i64}, %[[K1:.*]]: tensor<2x4x8xf32> {nn.kept = 1 : i64}) -> (tensor<8x8xf32> {nn.grad = "e"}, tensor<2x8x8xf32> {nn.grad = "w"}, tensor<2x8xf32> {nn.grad = "b"}) attributes {nn.entry = "backward", nn.stage = 0 : i64}
// CHECK-NOT: @layer_keep
// CHECK-NEXT: nn.repeat @layer_derivative(%[[DY]]) params(%[[K0]], %[[W]], %[[B]], %[[K1]]) reverse
// CHECK-NOT: @layer_keep
// CHECK: return

// Tests that the last stage's forward_keep returns the loss first, then
// the loss's gradient (in place of the logits: it reads no incoming
// gradient, only the logits, the labels and the constant seed), the
// layers' output (the head's weight gradient's) and the stacks; that its
// backward starts from that gradient and returns the input gradient first.
// CHECK-LABEL: module @stage1
// CHECK: func.func @loss_forward_keep({{.*}}) -> (tensor<f32>, tensor<4x8xf32> {nn.kept = 0 : i64}, tensor<4x8xf32> {nn.kept = 1 : i64}, tensor<2x4x8xf32> {nn.kept = 2 : i64}, tensor<2x4x8xf32> {nn.kept = 3 : i64}) attributes {nn.entry = "forward_keep", nn.stage = 1 : i64}
// CHECK: %[[ONE:.*]] = nn.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[H:.*]]:3 = nn.repeat @layer_keep
// CHECK-NEXT: %[[LOGITS:.*]] = nn.matmul %[[H]]#0
// CHECK-NEXT: %[[LOSS:.*]] = nn.cross_entropy %[[LOGITS]]
// CHECK-NEXT: %[[DZ:.*]] = nn.cross_entropy_grad %[[LOGITS]], %{{.*}}, %[[ONE]]
// CHECK-NEXT: return %[[LOSS]], %[[DZ]], %[[H]]#0, %[[H]]#1, %[[H]]#2
// CHECK: func.func @loss_backward({{.*}}%[[E:.*]]: tensor<8x8xf32> {{{.*}}nn.param = "e"{{.*}}%[[KDZ:.*]]: tensor<4x8xf32> {nn.kept = 0 : i64}, %[[KH:.*]]: tensor<4x8xf32> {nn.kept = 1 : i64}, %{{.*}}: tensor<2x4x8xf32> {nn.kept = 2 : i64}, %{{.*}}: tensor<2x4x8xf32> {nn.kept = 3 : i64}) -> (tensor<4x8xf32> {nn.input_grad}, tensor<8x8xf32> {nn.grad = "e"}, tensor<2x8x8xf32> {nn.grad = "w"}, tensor<2x8xf32> {nn.grad = "b"}) attributes {nn.entry = "backward", nn.stage = 1 : i64}
// CHECK-NEXT: %[[DH:.*]] = nn.matmul %[[KDZ]], %[[E]] :
// CHECK-NEXT: nn.matmul %[[KDZ]], %[[KH]] transpose_lhs
// CHECK-NOT: nn.cross_entropy
// CHECK: return

// Tests that --stage-recompute leaves the stages as GPipe runs them: no
// mark, no forward_keep, the backward with its forward.
// RECOMPUTE-LABEL: module @stage0 attributes {nn.first_layer = 0 : i64, nn.stage = 0 : i64
// RECOMPUTE-NOT: forward_keep
// RECOMPUTE: func.func @loss_backward
// RECOMPUTE: nn.repeat @layer_keep
// RECOMPUTE-NOT: forward_keep

func.func private @layer(%h: tensor<4x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %m = nn.matmul %h, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %bb = nn.broadcast %b dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %a = nn.add %m, %bb : tensor<4x8xf32>
  %r = nn.relu %a : tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}
func.func @loss(%x: tensor<4x8xf32> {nn.input, nn.axes = ["batch", "embed"]},
                %y: tensor<4xi32> {nn.label, nn.axes = ["batch"]},
                %e: tensor<8x8xf32> {nn.param = "e", nn.init = #nn.init<normal, 0.1>, nn.axes = ["embed", "mlp"]},
                %w: tensor<4x8x8xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.1>, nn.axes = ["layers", "embed", "mlp"]},
                %b: tensor<4x8xf32> {nn.param = "b", nn.init = #nn.init<zeros>, nn.axes = ["layers", "mlp"]}) -> tensor<f32> {
  %x1 = nn.matmul %x, %e : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %h = nn.repeat @layer(%x1) params(%w, %b) : (tensor<4x8xf32>, tensor<4x8x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %z = nn.matmul %h, %e transpose_rhs : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l = nn.cross_entropy %z, %y : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
