// RUN: tessel-opt %s | tessel-opt | FileCheck %s
// RUN: tessel-opt %s --mlir-print-op-generic | tessel-opt | FileCheck %s

// Tests that a layer with one carried value and one stacked parameter repeats over the leading axis.
// CHECK-LABEL: func.func private @linear_layer
// CHECK-SAME: (%{{.*}}: tensor<8x16xf32>, %{{.*}}: tensor<16x16xf32>) -> tensor<8x16xf32>
// CHECK-LABEL: func.func @repeat_single
// CHECK: nn.repeat @linear_layer(%{{.*}}) params(%{{.*}}) : (tensor<8x16xf32>, tensor<12x16x16xf32>) -> tensor<8x16xf32>
func.func private @linear_layer(%h: tensor<8x16xf32>, %w: tensor<16x16xf32>) -> tensor<8x16xf32> {
  %0 = nn.matmul %h, %w : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}
func.func @repeat_single(%h: tensor<8x16xf32>, %w: tensor<12x16x16xf32>) -> tensor<8x16xf32> {
  %0 = nn.repeat @linear_layer(%h) params(%w) : (tensor<8x16xf32>, tensor<12x16x16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// Tests that several carried values and several stacked parameters thread through the layer in order.
// CHECK-LABEL: func.func private @block
// CHECK-SAME: (%{{.*}}: tensor<8x16xf32>, %{{.*}}: tensor<8xf32>, %{{.*}}: tensor<16x16xf32>, %{{.*}}: tensor<16xf32>) -> (tensor<8x16xf32>, tensor<8xf32>)
// CHECK-LABEL: func.func @repeat_several
// CHECK: %[[R:.*]]:2 = nn.repeat @block(%{{.*}}, %{{.*}}) params(%{{.*}}, %{{.*}}) : (tensor<8x16xf32>, tensor<8xf32>, tensor<4x16x16xf32>, tensor<4x16xf32>) -> (tensor<8x16xf32>, tensor<8xf32>)
// CHECK: return %[[R]]#0, %[[R]]#1
func.func private @block(%h: tensor<8x16xf32>, %acc: tensor<8xf32>, %w: tensor<16x16xf32>, %b: tensor<16xf32>) -> (tensor<8x16xf32>, tensor<8xf32>) {
  %y = nn.matmul %h, %w : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %bb = nn.broadcast %b dims = [1] : tensor<16xf32> -> tensor<8x16xf32>
  %z = nn.add %y, %bb : tensor<8x16xf32>
  %s = nn.reduce_sum %z dims = [1] : tensor<8x16xf32> -> tensor<8xf32>
  %acc2 = nn.add %acc, %s : tensor<8xf32>
  return %z, %acc2 : tensor<8x16xf32>, tensor<8xf32>
}
func.func @repeat_several(%h: tensor<8x16xf32>, %acc: tensor<8xf32>, %w: tensor<4x16x16xf32>, %b: tensor<4x16xf32>) -> (tensor<8x16xf32>, tensor<8xf32>) {
  %0:2 = nn.repeat @block(%h, %acc) params(%w, %b) : (tensor<8x16xf32>, tensor<8xf32>, tensor<4x16x16xf32>, tensor<4x16xf32>) -> (tensor<8x16xf32>, tensor<8xf32>)
  return %0#0, %0#1 : tensor<8x16xf32>, tensor<8xf32>
}

// Tests that a stacked model parameter whose nn.axes starts with "layers" is accepted.
// CHECK-LABEL: func.func private @mlp_layer
// CHECK-LABEL: func.func @repeat_model
// CHECK-SAME: {nn.axes = ["layers", "embed", "mlp"], nn.init = #nn.init<normal, 0.02>, nn.param = "blocks.fc.weight"}
// CHECK-SAME: {nn.axes = ["layers", "mlp", "embed"], nn.init = #nn.init<normal, 0.02>, nn.param = "blocks.proj.weight"}
// CHECK: nn.repeat @mlp_layer(%{{.*}}) params(%{{.*}}, %{{.*}}) : (tensor<4x16xf32>, tensor<6x16x64xf32>, tensor<6x64x16xf32>) -> tensor<4x16xf32>
func.func private @mlp_layer(%h: tensor<4x16xf32>, %w1: tensor<16x64xf32>, %w2: tensor<64x16xf32>) -> tensor<4x16xf32> {
  %0 = nn.matmul %h, %w1 : (tensor<4x16xf32>, tensor<16x64xf32>) -> tensor<4x64xf32>
  %1 = nn.gelu %0 : tensor<4x64xf32>
  %2 = nn.matmul %1, %w2 : (tensor<4x64xf32>, tensor<64x16xf32>) -> tensor<4x16xf32>
  %3 = nn.add %h, %2 : tensor<4x16xf32>
  return %3 : tensor<4x16xf32>
}
func.func @repeat_model(
    %x: tensor<4x16xf32> {nn.input, nn.axes = ["batch", "embed"]},
    %y: tensor<4xi32> {nn.label, nn.axes = ["batch"]},
    %w1: tensor<6x16x64xf32> {nn.param = "blocks.fc.weight", nn.init = #nn.init<normal, 0.02>, nn.axes = ["layers", "embed", "mlp"]},
    %w2: tensor<6x64x16xf32> {nn.param = "blocks.proj.weight", nn.init = #nn.init<normal, 0.02>, nn.axes = ["layers", "mlp", "embed"]}) -> tensor<f32> {
  %h = nn.repeat @mlp_layer(%x) params(%w1, %w2) : (tensor<4x16xf32>, tensor<6x16x64xf32>, tensor<6x64x16xf32>) -> tensor<4x16xf32>
  %l = nn.cross_entropy %h, %y : (tensor<4x16xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// Tests that a layer may itself repeat another (non-recursive) layer, and that a rank-1 stacked parameter slices to a rank-0 tensor.
// CHECK-LABEL: func.func private @scale_layer
// CHECK-SAME: (%{{.*}}: tensor<8xf32>, %{{.*}}: tensor<f32>) -> tensor<8xf32>
// CHECK-LABEL: func.func private @outer_layer
// CHECK: nn.repeat @scale_layer(%{{.*}}) params(%{{.*}}) : (tensor<8xf32>, tensor<3xf32>) -> tensor<8xf32>
// CHECK-LABEL: func.func @repeat_nested
// CHECK: nn.repeat @outer_layer(%{{.*}}) params(%{{.*}}) : (tensor<8xf32>, tensor<2x3xf32>) -> tensor<8xf32>
func.func private @scale_layer(%h: tensor<8xf32>, %s: tensor<f32>) -> tensor<8xf32> {
  %0 = nn.broadcast %s dims = [] : tensor<f32> -> tensor<8xf32>
  %1 = nn.mul %h, %0 : tensor<8xf32>
  return %1 : tensor<8xf32>
}
func.func private @outer_layer(%h: tensor<8xf32>, %s: tensor<3xf32>) -> tensor<8xf32> {
  %0 = nn.repeat @scale_layer(%h) params(%s) : (tensor<8xf32>, tensor<3xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
func.func @repeat_nested(%h: tensor<8xf32>, %s: tensor<2x3xf32>) -> tensor<8xf32> {
  %0 = nn.repeat @outer_layer(%h) params(%s) : (tensor<8xf32>, tensor<2x3xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// Tests that a repeat updates its outs in place: the layer takes a slice
// of each after its parameter slices and returns it updated after the
// carried values, and the repeat's updated outs come before its stacked
// results.
// CHECK-LABEL: func.func private @grad_layer
// CHECK-SAME: (%{{.*}}: tensor<8x16xf32>, %{{.*}}: tensor<16x16xf32>, %{{.*}}: tensor<16x16xf32>) -> (tensor<8x16xf32>, tensor<16x16xf32>, tensor<16xf32>)
// CHECK-LABEL: func.func @repeat_outs
// CHECK: %[[R:.*]]:3 = nn.repeat @grad_layer(%{{.*}}) params(%{{.*}}) outs(%{{.*}}) reverse : (tensor<8x16xf32>, tensor<4x16x16xf32>, tensor<4x16x16xf32>) -> (tensor<8x16xf32>, tensor<4x16x16xf32>, tensor<4x16xf32>)
func.func private @grad_layer(%dy: tensor<8x16xf32>, %x: tensor<16x16xf32>, %g: tensor<16x16xf32>) -> (tensor<8x16xf32>, tensor<16x16xf32>, tensor<16xf32>) {
  %g2 = nn.matmul_accumulate %x, %x transpose_lhs outs(%g) : (tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  %s = nn.reduce_sum %dy dims = [0] : tensor<8x16xf32> -> tensor<16xf32>
  return %dy, %g2, %s : tensor<8x16xf32>, tensor<16x16xf32>, tensor<16xf32>
}
func.func @repeat_outs(%dy: tensor<8x16xf32>, %x: tensor<4x16x16xf32>, %g: tensor<4x16x16xf32>) -> (tensor<4x16x16xf32>, tensor<4x16xf32>) {
  %0:3 = nn.repeat @grad_layer(%dy) params(%x) outs(%g) reverse : (tensor<8x16xf32>, tensor<4x16x16xf32>, tensor<4x16x16xf32>) -> (tensor<8x16xf32>, tensor<4x16x16xf32>, tensor<4x16xf32>)
  return %0#1, %0#2 : tensor<4x16x16xf32>, tensor<4x16xf32>
}
