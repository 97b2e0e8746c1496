// RUN: tessel-opt %s -split-input-file -tessel-promote-f64 | FileCheck %s
// RUN: tessel-opt %s -split-input-file -tessel-promote-f64 -tessel-autodiff="optimizer=adamw" | FileCheck %s --check-prefix=GRAD

// Tests that every f32 tensor becomes f64 (parameters, inputs, the
// activations, the loss) while integer labels keep their type; the module
// records the precision. The derived step then accumulates and updates
// in f64 (its states and the gradient scale too).
// CHECK:       module attributes {nn.precision = "f64"}
// CHECK-LABEL: func.func @mlp(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<4x8xf64> {nn.input}, %[[Y:[^:]*]]: tensor<4xi32> {nn.label}, %[[W:[^:]*]]: tensor<8x3xf64> {{.*}}) -> tensor<f64>
// CHECK:         %[[Z:.*]] = nn.matmul %[[X]], %[[W]] : (tensor<4x8xf64>, tensor<8x3xf64>) -> tensor<4x3xf64>
// CHECK:         %[[L:.*]] = nn.cross_entropy %[[Z]], %[[Y]] : (tensor<4x3xf64>, tensor<4xi32>) -> tensor<f64>
// CHECK:         return %[[L]] : tensor<f64>
// CHECK-NOT:     f32
// GRAD-LABEL: func.func @mlp_backward(
// GRAD:         nn.accumulate %{{.*}} outs(%{{.*}}) : tensor<8x3xf64>
// GRAD-LABEL: func.func @mlp_update(
// GRAD-SAME:    tensor<8x3xf64> {nn.state = "w.m"}, %{{[^:]*}}: tensor<8x3xf64> {nn.state = "w.v"}, %{{[^:]*}}: tensor<f64> {nn.grad_scale})
// GRAD-NOT:     f32
// GRAD:         // -----
func.func @mlp(%x: tensor<4x8xf32> {nn.input}, %y: tensor<4xi32> {nn.label},
               %w: tensor<8x3xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.1>}) -> tensor<f32> {
  %z = nn.matmul %x, %w : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  %l = nn.cross_entropy %z, %y : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a repeat's layer function is promoted with its model, and a
// constant's value is widened exactly (0.1 in f32 is 0.100000001490116...,
// not f64's 0.1).
// CHECK-LABEL: func.func private @layer(
// CHECK-SAME:    %{{[^:]*}}: tensor<2x8xf64>, %[[W:[^:]*]]: tensor<8x8xf64>) -> tensor<2x8xf64>
// CHECK:         nn.matmul %{{.*}}, %[[W]] {{.*}} -> tensor<2x8xf64>
// CHECK:         nn.gelu %{{.*}} : tensor<2x8xf64>
// CHECK-LABEL: func.func @stack(
// CHECK-SAME:    %[[WS:[^:]*]]: tensor<3x8x8xf64>
// CHECK:         nn.constant dense<0.10000000149011612> : tensor<2x8xf64>
// CHECK:         nn.repeat @layer(%{{.*}}) params(%[[WS]]) : (tensor<2x8xf64>, tensor<3x8x8xf64>) -> tensor<2x8xf64>
// CHECK:         nn.reduce_sum %{{.*}} dims = [0, 1] : tensor<2x8xf64> -> tensor<f64>
func.func private @layer(%h: tensor<2x8xf32>, %w: tensor<8x8xf32>) -> tensor<2x8xf32> {
  %m = nn.matmul %h, %w : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %g = nn.gelu %m : tensor<2x8xf32>
  return %g : tensor<2x8xf32>
}
func.func @stack(%ws: tensor<3x8x8xf32> {nn.param = "ws", nn.init = #nn.init<normal, 0.1>, nn.axes = ["layers", "embed", "mlp"]},
                 %x: tensor<2x8xf32> {nn.input}) -> tensor<f32> {
  %c = nn.constant dense<0.1> : tensor<2x8xf32>
  %xc = nn.mul %x, %c : tensor<2x8xf32>
  %y = nn.repeat @layer(%xc) params(%ws) : (tensor<2x8xf32>, tensor<3x8x8xf32>) -> tensor<2x8xf32>
  %l = nn.reduce_sum %y dims = [0, 1] : tensor<2x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that types other than f32 keep theirs: a bf16 value the model casts
// to explicitly stays bf16 (its casts now from and to f64), an attention
// over f64 queries returns an f64 log-sum-exp (inferred again) and one over
// bf16 queries keeps its f32 one; a written widening to f32 is removed.
// CHECK-LABEL: func.func @kept_types(
// CHECK:         %[[B:.*]] = nn.cast %{{.*}} : tensor<1x4x2x8xf64> to tensor<1x4x2x8xbf16>
// CHECK:         nn.attention %[[B]], %[[B]], %[[B]] causal lse : ({{.*}}) -> (tensor<1x4x2x8xbf16>, tensor<1x2x4xf32>)
// CHECK:         nn.cast %{{.*}} : tensor<1x4x2x8xbf16> to tensor<1x4x2x8xf64>
// CHECK:         nn.attention %{{.*}} causal lse : ({{.*}}) -> (tensor<1x4x2x8xf64>, tensor<1x2x4xf64>)
// CHECK-NOT:     nn.cast
// CHECK:         nn.reduce_sum
func.func @kept_types(%w: tensor<1x4x2x8xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.1>}) -> tensor<f32> {
  %b = nn.cast %w : tensor<1x4x2x8xf32> to tensor<1x4x2x8xbf16>
  %ob, %lb = nn.attention %b, %b, %b causal lse : (tensor<1x4x2x8xbf16>, tensor<1x4x2x8xbf16>, tensor<1x4x2x8xbf16>) -> (tensor<1x4x2x8xbf16>, tensor<1x2x4xf32>)
  %of = nn.cast %ob : tensor<1x4x2x8xbf16> to tensor<1x4x2x8xf32>
  %o, %lse = nn.attention %of, %w, %w causal lse : (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x2x4xf32>)
  %same = nn.cast %o : tensor<1x4x2x8xf32> to tensor<1x4x2x8xf32>
  %l = nn.reduce_sum %same dims = [0, 1, 2, 3] : tensor<1x4x2x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a model written in f64 is left as it is, and recorded.
// CHECK:       module attributes {nn.precision = "f64"}
// CHECK-LABEL: func.func @f64_model(
// CHECK-SAME:    tensor<4xf64> {{.*}}) -> tensor<f64>
func.func @f64_model(%w: tensor<4xf64> {nn.param = "w", nn.init = #nn.init<zeros>}) -> tensor<f64> {
  %l = nn.reduce_sum %w dims = [0] : tensor<4xf64> -> tensor<f64>
  return %l : tensor<f64>
}

