// RUN: tessel-opt %s -tessel-propagate-sharding="mesh=dp=2,tp=4" --split-input-file --verify-diagnostics

// Tests that an explicit sharding naming an axis the mesh lacks is refused.
// expected-error @+1 {{argument #0: unknown mesh axis 'pp'}}
func.func @unknown_axis(%x: tensor<8x16xf32> {nn.input, nn.sharding = [["pp"], []]}) -> tensor<f32> {
  %l = nn.reduce_sum %x dims = [0, 1] : tensor<8x16xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that one mesh axis cannot split two dimensions of one value.
// expected-error @+1 {{argument #0: mesh axis 'tp' is used twice in one value}}
func.func @axis_used_twice(%x: tensor<8x16xf32> {nn.input, nn.sharding = [["tp"], ["tp"]]}) -> tensor<f32> {
  %l = nn.reduce_sum %x dims = [0, 1] : tensor<8x16xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a dimension that does not divide by its axes is a located error
// naming the value, the dimension, its size and the axis.
// expected-error @+1 {{argument #1 ('w'): dimension 1 of size 6 does not split evenly over mesh axes 'tp' of size 4}}
func.func @uneven_split(%x: tensor<8x16xf32> {nn.input, nn.axes = ["batch", "embed"]},
                        %w: tensor<16x6xf32> {nn.param = "w", nn.init = #nn.init<zeros>, nn.axes = ["embed", "mlp"]}) -> tensor<f32> {
  %y = nn.matmul %x, %w : (tensor<8x16xf32>, tensor<16x6xf32>) -> tensor<8x6xf32>
  %l = nn.reduce_sum %y dims = [0, 1] : tensor<8x6xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that an explicit sharding must have one entry per dimension.
// expected-error @+1 {{argument #0: 'nn.sharding' has 1 dimensions but the type 'tensor<8x16xf32>' has rank 2}}
func.func @rank_mismatch(%x: tensor<8x16xf32> {nn.input, nn.sharding = [["dp"]]}) -> tensor<f32> {
  %l = nn.reduce_sum %x dims = [0, 1] : tensor<8x16xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

func.func private @acc_layer(%h: tensor<4xf32>, %w: tensor<4xf32>, %g: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = nn.accumulate %w outs(%g) : tensor<4xf32>
  return %h, %0 : tensor<4xf32>, tensor<4xf32>
}
// Tests that a repeat with outs, the form a later pass makes, is refused.
func.func @repeat_outs(%h: tensor<4xf32>, %w: tensor<3x4xf32>, %g: tensor<3x4xf32>) -> tensor<3x4xf32> {
  // expected-error @+1 {{'nn.repeat' op has outs (updated in place, the form tessel-accumulate-in-layers makes after the passes that differentiate, split, shard or cast a repeat); tessel-propagate-sharding takes repeats without outs}}
  %0:2 = nn.repeat @acc_layer(%h) params(%w) outs(%g) : (tensor<4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) -> (tensor<4xf32>, tensor<3x4xf32>)
  return %0#1 : tensor<3x4xf32>
}
