// RUN: tessel-opt %s -split-input-file -tessel-mixed-precision | FileCheck %s
// RUN: tessel-opt %s -split-input-file -tessel-mixed-precision="precision=f32" | FileCheck %s --check-prefix=F32
// RUN: tessel-opt %s -split-input-file -tessel-mixed-precision -tessel-autodiff="optimizer=sgd" -canonicalize -cse | FileCheck %s --check-prefix=GRAD

// Tests that parameters and inputs are cast to bf16 once at the top, the
// forward computes in bf16, and the loss runs on f32 logits; the signature
// (f32 master weights, the f32 loss) is unchanged. The backward's gradients
// come out of the casts' VJPs in f32, so the update is the f32 one.
// CHECK:       module attributes {nn.precision = "bf16"}
// CHECK-LABEL: func.func @mlp(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<4x8xf32> {nn.input}, %[[Y:[^:]*]]: tensor<4xi32> {nn.label}, %[[W:[^:]*]]: tensor<8x3xf32> {{.*}}) -> tensor<f32>
// CHECK-DAG:   %[[XB:.*]] = nn.cast %[[X]] : tensor<4x8xf32> to tensor<4x8xbf16>
// CHECK-DAG:   %[[WB:.*]] = nn.cast %[[W]] : tensor<8x3xf32> to tensor<8x3xbf16>
// CHECK:       %[[Z:.*]] = nn.matmul %[[XB]], %[[WB]] : (tensor<4x8xbf16>, tensor<8x3xbf16>) -> tensor<4x3xbf16>
// CHECK:       %[[ZF:.*]] = nn.cast %[[Z]] : tensor<4x3xbf16> to tensor<4x3xf32>
// CHECK:       %[[L:.*]] = nn.cross_entropy %[[ZF]], %[[Y]] : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<f32>
// CHECK:       return %[[L]] : tensor<f32>
// F32-NOT:     nn.precision
// F32-NOT:     bf16
// GRAD-LABEL: func.func @mlp_backward(
// GRAD:         nn.matmul {{.*}} -> tensor<8x3xbf16>
// GRAD:         %[[G:.*]] = nn.cast %{{.*}} : tensor<8x3xbf16> to tensor<8x3xf32>
// GRAD:         nn.accumulate %[[G]] outs(%{{.*}}) : tensor<8x3xf32>
// GRAD-LABEL: func.func @mlp_update(
// GRAD-SAME:    %{{.*}}: tensor<8x3xf32> {nn.grad = "w"}
func.func @mlp(%x: tensor<4x8xf32> {nn.input}, %y: tensor<4xi32> {nn.label},
               %w: tensor<8x3xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.1>}) -> tensor<f32> {
  %z = nn.matmul %x, %w : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  %l = nn.cross_entropy %z, %y : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a repeat's layer function is converted with it: its carried
// value becomes bf16, its parameter slice stays f32 and is cast in the
// layer (the stacked parameter stays the model's f32 argument, which a
// pipeline splits by rows); a loss that is not a cross-entropy is returned
// in f32 by a cast. A constant keeps its type and is cast where a bf16 op
// reads it.
// CHECK-LABEL: func.func private @layer(
// CHECK-SAME:    %{{[^:]*}}: tensor<2x8xbf16>, %[[W:[^:]*]]: tensor<8x8xf32>) -> tensor<2x8xbf16>
// CHECK:         %[[WB:.*]] = nn.cast %[[W]] : tensor<8x8xf32> to tensor<8x8xbf16>
// CHECK:         nn.matmul %{{.*}}, %[[WB]] {{.*}} -> tensor<2x8xbf16>
// CHECK:         nn.gelu %{{.*}} : tensor<2x8xbf16>
// CHECK-LABEL: func.func @stack(
// CHECK-SAME:    %[[WS:[^:]*]]: tensor<3x8x8xf32>
// CHECK:         %[[C:.*]] = nn.constant dense<2.000000e+00> : tensor<2x8xf32>
// CHECK:         %[[CB:.*]] = nn.cast %[[C]] : tensor<2x8xf32> to tensor<2x8xbf16>
// CHECK:         nn.repeat @layer(%{{.*}}) params(%[[WS]]) : (tensor<2x8xbf16>, tensor<3x8x8xf32>) -> tensor<2x8xbf16>
// CHECK:         %[[S:.*]] = nn.reduce_sum %{{.*}} dims = [0, 1] : tensor<2x8xbf16> -> tensor<bf16>
// CHECK:         %[[SF:.*]] = nn.cast %[[S]] : tensor<bf16> to tensor<f32>
// CHECK:         return %[[SF]] : tensor<f32>
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
