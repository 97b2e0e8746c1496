// RUN: tessel-opt %s -split-input-file -tessel-mixed-precision | FileCheck %s
// RUN: tessel-opt %s -split-input-file -tessel-mixed-precision="precision=f32" | FileCheck %s --check-prefix=F32
// RUN: tessel-opt %s -split-input-file -tessel-mixed-precision -tessel-autodiff="optimizer=adamw" -canonicalize -cse | FileCheck %s --check-prefix=GRAD
// RUN: tessel-opt %s -split-input-file -tessel-mixed-precision="grad-precision=bf16" -tessel-autodiff="optimizer=sgd momentum=0.9" -canonicalize -cse | FileCheck %s --check-prefix=BF16GRAD

// Tests that parameters become bf16 arguments (stored in bf16), inputs are
// cast to bf16 at their use, the forward computes in bf16 and the loss runs
// on f32 logits and is returned in f32. The module records both precisions.
// CHECK:       module attributes {nn.grad_precision = "f32", nn.precision = "bf16"}
// CHECK-LABEL: func.func @mlp(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<4x8xf32> {nn.input}, %[[Y:[^:]*]]: tensor<4xi32> {nn.label}, %[[W:[^:]*]]: tensor<8x3xbf16> {{.*}}) -> tensor<f32>
// CHECK:       %[[XB:.*]] = nn.cast %[[X]] : tensor<4x8xf32> to tensor<4x8xbf16>
// CHECK:       %[[Z:.*]] = nn.matmul %[[XB]], %[[W]] : (tensor<4x8xbf16>, tensor<8x3xbf16>) -> tensor<4x3xbf16>
// CHECK:       %[[ZF:.*]] = nn.cast %[[Z]] : tensor<4x3xbf16> to tensor<4x3xf32>
// CHECK:       %[[L:.*]] = nn.cross_entropy %[[ZF]], %[[Y]] : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<f32>
// CHECK:       return %[[L]] : tensor<f32>
// F32-NOT:     nn.precision
// F32-NOT:     bf16

// The backward widens the bf16 gradient into its f32 accumulator; the
// update keeps an f32 master copy as the parameter's first state and steps
// it (`master`), writing the bf16 parameter back.
// GRAD-LABEL: func.func @mlp_backward(
// GRAD:         nn.matmul {{.*}} -> tensor<8x3xbf16>
// GRAD:         %[[G:.*]] = nn.cast %{{.*}} : tensor<8x3xbf16> to tensor<8x3xf32>
// GRAD:         nn.accumulate %[[G]] outs(%{{.*}}) : tensor<8x3xf32>
// GRAD-LABEL: func.func @mlp_update(
// GRAD-SAME:    %[[P:[^:]*]]: tensor<8x3xbf16> {{{[^}]*}}nn.param = "w"}
// GRAD-SAME:    %[[GW:[^:]*]]: tensor<8x3xf32> {{{[^}]*}}nn.grad = "w"}
// GRAD-SAME:    %[[MW:[^:]*]]: tensor<8x3xf32> {{{[^}]*}}nn.state = "w.master"}
// GRAD-SAME:    %[[M:[^:]*]]: tensor<8x3xf32> {{{[^}]*}}nn.state = "w.m"}
// GRAD-SAME:    %[[V:[^:]*]]: tensor<8x3xf32> {{{[^}]*}}nn.state = "w.v"}
// GRAD:         nn.optimizer_step adamw %[[GW]], %{{.*}} outs(%[[P]], %[[MW]], %[[M]], %[[V]] : tensor<8x3xbf16>, tensor<8x3xf32>, tensor<8x3xf32>, tensor<8x3xf32>) {{{.*}}master{{.*}}} : tensor<8x3xf32>

// grad-precision=bf16: the gradient stays bf16 (2 bytes, as in the ZeRO
// paper) and the step widens it.
// BF16GRAD:       module attributes {nn.grad_precision = "bf16", nn.precision = "bf16"
// BF16GRAD-LABEL: func.func @mlp_backward(
// BF16GRAD-NOT:     nn.cast {{.*}} to tensor<8x3xf32>
// BF16GRAD:         nn.accumulate %{{.*}} outs(%{{.*}}) : tensor<8x3xbf16>
// BF16GRAD-LABEL: func.func @mlp_update(
// BF16GRAD:         nn.optimizer_step sgd %{{.*}}, %{{.*}} outs(%{{.*}}, %{{.*}} : tensor<8x3xbf16>, tensor<8x3xf32>, tensor<8x3xf32>) {{{.*}}master{{.*}}} : tensor<8x3xbf16>
func.func @mlp(%x: tensor<4x8xf32> {nn.input}, %y: tensor<4xi32> {nn.label},
               %w: tensor<8x3xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.1>}) -> tensor<f32> {
  %z = nn.matmul %x, %w : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  %l = nn.cross_entropy %z, %y : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a repeat's layer function is converted with it: its carried
// value and its parameter slice become bf16 (the stacked parameter is the
// model's bf16 argument, which a pipeline splits by rows); a loss that is
// not a cross-entropy is returned in f32 by a cast. A constant keeps its
// type and is cast where a bf16 op reads it. The layer's derivative widens
// its parameter gradient before it leaves the layer (f32 gradients), so a
// partitioned step reduces it in f32.
// CHECK-LABEL: func.func private @layer(
// CHECK-SAME:    %{{[^:]*}}: tensor<2x8xbf16>, %[[W:[^:]*]]: tensor<8x8xbf16>) -> tensor<2x8xbf16>
// CHECK:         nn.matmul %{{.*}}, %[[W]] {{.*}} -> tensor<2x8xbf16>
// CHECK:         nn.gelu %{{.*}} : tensor<2x8xbf16>
// CHECK-LABEL: func.func @stack(
// CHECK-SAME:    %[[WS:[^:]*]]: tensor<3x8x8xbf16>
// CHECK:         %[[C:.*]] = nn.constant dense<2.000000e+00> : tensor<2x8xf32>
// CHECK:         %[[CB:.*]] = nn.cast %[[C]] : tensor<2x8xf32> to tensor<2x8xbf16>
// CHECK:         nn.repeat @layer(%{{.*}}) params(%[[WS]]) : (tensor<2x8xbf16>, tensor<3x8x8xbf16>) -> tensor<2x8xbf16>
// CHECK:         %[[S:.*]] = nn.reduce_sum %{{.*}} dims = [0, 1] : tensor<2x8xbf16> -> tensor<bf16>
// CHECK:         %[[SF:.*]] = nn.cast %[[S]] : tensor<bf16> to tensor<f32>
// CHECK:         return %[[SF]] : tensor<f32>
// GRAD-LABEL: func.func private @layer_derivative(
// GRAD:         %[[DW:.*]] = nn.matmul {{.*}} -> tensor<8x8xbf16>
// GRAD:         %[[DWF:.*]] = nn.cast %[[DW]] : tensor<8x8xbf16> to tensor<8x8xf32>
// GRAD:         return %{{.*}}, %[[DWF]] : tensor<2x8xbf16>, tensor<8x8xf32>
// GRAD-LABEL: func.func @stack_backward(
// GRAD:         %[[DS:.*]]:2 = nn.repeat @layer_derivative({{.*}}) -> (tensor<2x8xbf16>, tensor<3x8x8xf32>)
// GRAD:         nn.accumulate %[[DS]]#1 outs(%{{.*}}) : tensor<3x8x8xf32>
// BF16GRAD-LABEL: func.func private @layer_derivative(
// BF16GRAD:         return %{{.*}}, %{{.*}} : tensor<2x8xbf16>, tensor<8x8xbf16>
func.func private @layer(%h: tensor<2x8xf32>, %w: tensor<8x8xf32>) -> tensor<2x8xf32> {
  %m = nn.matmul %h, %w : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %g = nn.gelu %m : tensor<2x8xf32>
  return %g : tensor<2x8xf32>
}
func.func @stack(%ws: tensor<3x8x8xf32> {nn.param = "ws", nn.init = #nn.init<normal, 0.1>, nn.axes = ["layers", "embed", "mlp"]},
                 %x: tensor<2x8xf32> {nn.input}) -> tensor<f32> {
  %c = nn.constant dense<2.0> : tensor<2x8xf32>
  %xc = nn.mul %x, %c : tensor<2x8xf32>
  %y = nn.repeat @layer(%xc) params(%ws) : (tensor<2x8xf32>, tensor<3x8x8xf32>) -> tensor<2x8xf32>
  %l = nn.reduce_sum %y dims = [0, 1] : tensor<2x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that an attention's log-sum-exp stays f32 in bf16 (it is the
// kernels' arithmetic type, not the storage's; the attention verifier
// would refuse a bf16 one).
// CHECK-LABEL: func.func @attention_lse(
// CHECK:         nn.attention %{{.*}} causal lse : ({{.*}}) -> (tensor<1x4x2x8xbf16>, tensor<1x2x4xf32>)
func.func @attention_lse(%w: tensor<1x4x2x8xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.1>}) -> tensor<f32> {
  %o, %lse = nn.attention %w, %w, %w causal lse : (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x2x4xf32>)
  %l = nn.reduce_sum %o dims = [0, 1, 2, 3] : tensor<1x4x2x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a parameter read twice (a tied embedding and LM head) sums
// its two bf16 gradient contributions and widens the sum once into its f32
// accumulator (tessel-fuse-epilogues then has the head's GEMM sum into the
// accumulator in f32 where it can); with bf16 gradients nothing is widened.
// GRAD-LABEL: func.func @tied_backward(
// GRAD:         %[[SUM:.*]] = nn.add %{{.*}}, %{{.*}} : tensor<5x4xbf16>
// GRAD:         %[[WIDE:.*]] = nn.cast %[[SUM]] : tensor<5x4xbf16> to tensor<5x4xf32>
// GRAD:         nn.accumulate %[[WIDE]] outs(%{{.*}}) : tensor<5x4xf32>
// BF16GRAD-LABEL: func.func @tied_backward(
// BF16GRAD:         nn.add %{{.*}}, %{{.*}} : tensor<5x4xbf16>
// BF16GRAD-NOT:     nn.cast {{.*}} to tensor<5x4xf32>
// BF16GRAD:         return
func.func @tied(%ids: tensor<2x3xi32> {nn.input}, %y: tensor<2x3xi32> {nn.label},
                %wte: tensor<5x4xf32> {nn.param = "wte", nn.init = #nn.init<normal, 0.1>}) -> tensor<f32> {
  %h = nn.embedding %wte, %ids : (tensor<5x4xf32>, tensor<2x3xi32>) -> tensor<2x3x4xf32>
  %hf = nn.reshape %h : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %z = nn.matmul %hf, %wte transpose_rhs : (tensor<6x4xf32>, tensor<5x4xf32>) -> tensor<6x5xf32>
  %z3 = nn.reshape %z : tensor<6x5xf32> -> tensor<2x3x5xf32>
  %l = nn.cross_entropy %z3, %y : (tensor<2x3x5xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
