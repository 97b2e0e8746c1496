// RUN: tessel-opt %s | tessel-opt | FileCheck %s
// RUN: tessel-opt %s --mlir-print-op-generic | tessel-opt | FileCheck %s

// CHECK: module attributes {nn.logical_axes = ["stage", "expert_mlp"]}
module attributes {nn.logical_axes = ["stage", "expert_mlp"]} {

// Tests that a model with input, label and parameter arguments and built-in logical axes round-trips.
// CHECK-LABEL: func.func @mlp_loss
// CHECK-SAME: %{{.*}}: tensor<32x784xf32> {nn.axes = ["batch", "embed"], nn.input}
// CHECK-SAME: %{{.*}}: tensor<32xi32> {nn.axes = ["batch"], nn.label}
// CHECK-SAME: %{{.*}}: tensor<784x10xf32> {nn.axes = ["embed", "classes"], nn.init = #nn.init<normal, 0.02>, nn.param = "fc.weight"}
// CHECK-SAME: %{{.*}}: tensor<10xf32> {nn.axes = ["classes"], nn.init = #nn.init<zeros>, nn.param = "fc.bias"}
// CHECK-SAME: -> tensor<f32>
func.func @mlp_loss(
    %x: tensor<32x784xf32> {nn.input, nn.axes = ["batch", "embed"]},
    %y: tensor<32xi32> {nn.label, nn.axes = ["batch"]},
    %w: tensor<784x10xf32> {nn.param = "fc.weight", nn.init = #nn.init<normal, 0.02>, nn.axes = ["embed", "classes"]},
    %b: tensor<10xf32> {nn.param = "fc.bias", nn.init = #nn.init<zeros>, nn.axes = ["classes"]}) -> tensor<f32> {
  %z = nn.matmul %x, %w : (tensor<32x784xf32>, tensor<784x10xf32>) -> tensor<32x10xf32>
  %bb = nn.broadcast %b dims = [1] : tensor<10xf32> -> tensor<32x10xf32>
  %s = nn.add %z, %bb : tensor<32x10xf32>
  %l = nn.cross_entropy %s, %y : (tensor<32x10xf32>, tensor<32xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// Tests that every initialiser form round-trips, numbers printed as float literals.
// CHECK-LABEL: func.func @initialisers
// CHECK-SAME: {nn.init = #nn.init<zeros>, nn.param = "p.zeros"}
// CHECK-SAME: {nn.init = #nn.init<ones>, nn.param = "p.ones"}
// CHECK-SAME: {nn.init = #nn.init<constant, 0.5>, nn.param = "p.constant"}
// CHECK-SAME: {nn.init = #nn.init<constant, -3.0>, nn.param = "p.constant_whole"}
// CHECK-SAME: {nn.init = #nn.init<normal, 0.02>, nn.param = "p.normal"}
// CHECK-SAME: {nn.init = #nn.init<normal, 0.02, 1.0>, nn.param = "p.normal_mean"}
// CHECK-SAME: {nn.init = #nn.init<truncated_normal, 0.02>, nn.param = "p.truncated_normal"}
// CHECK-SAME: {nn.init = #nn.init<uniform, -0.1, 0.1>, nn.param = "p.uniform"}
// CHECK-SAME: {nn.init = #nn.init<uniform, -1.0, 2.0>, nn.param = "p.uniform_whole"}
// CHECK-SAME: {nn.init = #nn.init<constant, 1.0e+20>, nn.param = "p.constant_large"}
func.func @initialisers(
    %x: tensor<4xf32> {nn.input},
    %p0: tensor<4xf32> {nn.param = "p.zeros", nn.init = #nn.init<zeros>},
    %p1: tensor<4xf32> {nn.param = "p.ones", nn.init = #nn.init<ones>},
    %p2: tensor<4xf32> {nn.param = "p.constant", nn.init = #nn.init<constant, 0.5>},
    %p3: tensor<4xf32> {nn.param = "p.constant_whole", nn.init = #nn.init<constant, -3.0>},
    %p4: tensor<4xf32> {nn.param = "p.normal", nn.init = #nn.init<normal, 0.02>},
    %p5: tensor<4xf32> {nn.param = "p.normal_mean", nn.init = #nn.init<normal, 0.02, 1.0>},
    %p6: tensor<4xf32> {nn.param = "p.truncated_normal", nn.init = #nn.init<truncated_normal, 2.0e-2>},
    %p7: tensor<4xf32> {nn.param = "p.uniform", nn.init = #nn.init<uniform, -0.1, 0.1>},
    %p8: tensor<4xf32> {nn.param = "p.uniform_whole", nn.init = #nn.init<uniform, -1.0, 2.0>},
    %p9: tensor<4xf32> {nn.param = "p.constant_large", nn.init = #nn.init<constant, 1.0e20>}) -> tensor<f32> {
  %l = nn.reduce_sum %x dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// Tests that axis names declared by the module's nn.logical_axes are usable, next to built-in ones, on bf16 parameters.
// CHECK-LABEL: func.func @declared_axes
// CHECK-SAME: {nn.axes = ["stage", "expert_mlp", "embed"], nn.init = #nn.init<truncated_normal, 0.02>, nn.param = "experts.w"}
func.func @declared_axes(
    %x: tensor<8x16xbf16> {nn.input, nn.axes = ["batch", "embed"]},
    %w: tensor<2x4x16xbf16> {nn.param = "experts.w", nn.init = #nn.init<truncated_normal, 0.02>, nn.axes = ["stage", "expert_mlp", "embed"]}) -> tensor<bf16> {
  %l = nn.reduce_sum %x dims = [0, 1] : tensor<8x16xbf16> -> tensor<bf16>
  return %l : tensor<bf16>
}

// Tests that a model may return more results after its scalar loss, and that an argument may carry only nn.axes.
// CHECK-LABEL: func.func @extra_results
// CHECK-SAME: %{{.*}}: tensor<4x8xf32> {nn.axes = ["batch", "features"], nn.input}
// CHECK-SAME: %{{.*}}: tensor<8xf32> {nn.axes = ["features"]}
// CHECK-SAME: -> (tensor<f32>, tensor<4x8xf32>)
func.func @extra_results(
    %x: tensor<4x8xf32> {nn.input, nn.axes = ["batch", "features"]},
    %s: tensor<8xf32> {nn.axes = ["features"]}) -> (tensor<f32>, tensor<4x8xf32>) {
  %l = nn.reduce_mean %x dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l, %x : tensor<f32>, tensor<4x8xf32>
}

// Tests that a function without nn.param/nn.input/nn.label arguments is not a model and may return anything.
// CHECK-LABEL: func.func @not_a_model
// CHECK-SAME: (%{{.*}}: tensor<4x8xf32> {nn.axes = ["batch", "embed"]}) -> tensor<4x8xf32>
func.func @not_a_model(%x: tensor<4x8xf32> {nn.axes = ["batch", "embed"]}) -> tensor<4x8xf32> {
  return %x : tensor<4x8xf32>
}

}
