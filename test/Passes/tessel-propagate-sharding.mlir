// RUN: tessel-opt %s -tessel-propagate-sharding="mesh=dp=2,tp=2" --split-input-file | FileCheck %s

// Tests that a two-layer perceptron gets Megatron's split: the batch over dp,
// the first weight column-parallel and the second row-parallel over tp.
// CHECK: shard.grid @mesh(shape = 2x2) {nn.axis_names = ["dp", "tp"]}
// CHECK-LABEL: func.func @mlp
// CHECK-SAME: nn.sharding = {{\[}}["dp"], []]
// CHECK-SAME: nn.sharding = {{\[}}[], ["tp"]]
// CHECK-SAME: nn.sharding = {{\[}}["tp"], []]
// CHECK: nn.matmul %arg0, %arg1 {nn.loop_sharding = {{\[}}["dp"], ["tp"], []]}
// CHECK: nn.gelu %{{.*}} {nn.loop_sharding = {{\[}}["dp"], ["tp"]]}
// CHECK: nn.matmul %{{.*}}, %arg2 {nn.loop_sharding = {{\[}}["dp"], [], ["tp"]]}
func.func @mlp(%x: tensor<8x16xf32> {nn.input, nn.axes = ["batch", "embed"]},
               %w1: tensor<16x32xf32> {nn.param = "w1", nn.init = #nn.init<zeros>, nn.axes = ["embed", "mlp"]},
               %w2: tensor<32x16xf32> {nn.param = "w2", nn.init = #nn.init<zeros>, nn.axes = ["mlp", "embed"]})
    -> tensor<f32> {
  %h = nn.matmul %x, %w1 : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %a = nn.gelu %h : tensor<8x32xf32>
  %z = nn.matmul %a, %w2 : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %l = nn.reduce_mean %z dims = [0, 1] : tensor<8x16xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that the rules apply as Flax's do: a mesh axis already used by an
// earlier dimension of the same value is skipped (mlp and vocab both map to tp).
// CHECK-LABEL: func.func @rule_skips_used_axis
// CHECK-SAME: nn.sharding = {{\[}}["tp"], []]
func.func @rule_skips_used_axis(%w: tensor<32x16xf32> {nn.param = "w", nn.init = #nn.init<zeros>, nn.axes = ["mlp", "vocab"]}) -> tensor<f32> {
  %l = nn.reduce_sum %w dims = [0, 1] : tensor<32x16xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that an explicit nn.sharding (a user annotation) wins over the rules.
// CHECK-LABEL: func.func @explicit_sharding_wins
// CHECK-SAME: nn.sharding = {{\[}}[], ["dp", "tp"]]
func.func @explicit_sharding_wins(%x: tensor<8x16xf32> {nn.input, nn.axes = ["batch", "embed"], nn.sharding = [[], ["dp", "tp"]]}) -> tensor<f32> {
  %l = nn.reduce_sum %x dims = [0, 1] : tensor<8x16xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a loop that must stay whole is not split: softmax's dimension
// keeps the whole row even though the input is split along it.
// CHECK-LABEL: func.func @softmax_keeps_its_dimension
// CHECK: nn.softmax %arg0 {nn.loop_sharding = {{\[}}["dp"], []]}
func.func @softmax_keeps_its_dimension(%x: tensor<8x16xf32> {nn.input, nn.axes = ["batch", "mlp"]}) -> tensor<f32> {
  %s = nn.softmax %x : tensor<8x16xf32>
  %l = nn.reduce_sum %s dims = [0, 1] : tensor<8x16xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a gradient accumulator takes its parameter's sharding and pins
// the loops of the in-place accumulate (a weight gradient contracts the batch).
// CHECK-LABEL: func.func @grad_takes_param_sharding
// CHECK-SAME: %arg2: tensor<16x32xf32> {nn.grad = "w", nn.sharding = {{\[}}[], ["tp"]]}
// CHECK-SAME: -> (tensor<f32>, tensor<16x32xf32> {nn.grad = "w", nn.sharding = {{\[}}[], ["tp"]]})
// CHECK: nn.matmul %arg0, %arg1 transpose_lhs {nn.loop_sharding = {{\[}}[], ["tp"], ["dp"]]}
// CHECK: nn.accumulate %{{.*}} outs(%arg2) {nn.loop_sharding = {{\[}}[], ["tp"]]}
func.func @grad_takes_param_sharding(
    %x: tensor<8x16xf32> {nn.input, nn.axes = ["batch", "embed"]},
    %dy: tensor<8x32xf32> {nn.input, nn.axes = ["batch", "mlp"]},
    %g: tensor<16x32xf32> {nn.grad = "w"},
    %w: tensor<16x32xf32> {nn.param = "w", nn.init = #nn.init<zeros>, nn.axes = ["embed", "mlp"]})
    -> (tensor<f32>, tensor<16x32xf32> {nn.grad = "w"}) attributes {nn.entry = "backward"} {
  %gw = nn.matmul %x, %dy transpose_lhs : (tensor<8x16xf32>, tensor<8x32xf32>) -> tensor<16x32xf32>
  %acc = nn.accumulate %gw outs(%g) : tensor<16x32xf32>
  %l = nn.reduce_sum %w dims = [0, 1] : tensor<16x32xf32> -> tensor<f32>
  return %l, %acc : tensor<f32>, tensor<16x32xf32>
}

// -----

// Tests that propagation enters a repeated layer: each parameter slice takes
// its stack's split, and the carried activation is split as the layer
// returns it (argument and returned value are one value of the loop).
// CHECK-LABEL: func.func private @layer
// CHECK-SAME: %arg0: tensor<8x16xf32> {nn.sharding = {{\[}}["dp"], ["tp"]]}
// CHECK-SAME: %arg1: tensor<16x16xf32> {nn.sharding = {{\[}}[], ["tp"]]}
// CHECK: nn.matmul %arg0, %arg1 {nn.loop_sharding = {{\[}}["dp"], ["tp"], []]}
// CHECK-LABEL: func.func @repeated
func.func private @layer(%h: tensor<8x16xf32>, %w: tensor<16x16xf32>) -> tensor<8x16xf32> {
  %y = nn.matmul %h, %w : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
func.func @repeated(%x: tensor<8x16xf32> {nn.input, nn.axes = ["batch", "embed"]},
                    %w: tensor<3x16x16xf32> {nn.param = "w", nn.init = #nn.init<zeros>, nn.axes = ["layers", "embed", "mlp"]})
    -> tensor<f32> {
  %h = nn.repeat @layer(%x) params(%w) : (tensor<8x16xf32>, tensor<3x16x16xf32>) -> tensor<8x16xf32>
  %l = nn.reduce_sum %h dims = [0, 1] : tensor<8x16xf32> -> tensor<f32>
  return %l : tensor<f32>
}
