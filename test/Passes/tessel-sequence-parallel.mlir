// RUN: tessel-opt %s -tessel-propagate-sharding="mesh=dp=2,tp=2 sequence-parallel=true" -tessel-partition | FileCheck %s

// Tests Megatron's sequence parallelism on an MLP block: the norm and the
// dropout run on the rank's block of the sequence (and of the batch over
// dp); an all-gather over tp enters the column-parallel linear, and a
// reduce-scatter over tp leaves the row-parallel one in place of its
// all-reduce. The dropout records the whole shape and the axes of each
// dimension, so its block draws the whole tensor's bits.
// CHECK-LABEL: func.func @loss(
// CHECK-SAME: %[[X:[^:]*]]: tensor<1x4x16xf32> {{.*}}nn.sharding = {{\[}}["dp"], ["tp"], []]
// CHECK: %[[N:.*]] = nn.layer_norm %[[X]], {{.*}} -> tensor<1x4x16xf32>
// CHECK: %[[G:.*]] = shard.all_gather %[[N]] on @mesh grid_axes = [1] gather_axis = 1 : tensor<1x4x16xf32> -> tensor<1x8x16xf32>
// CHECK: nn.matmul %[[G]], {{.*}} -> tensor<1x8x16xf32>
// CHECK: %[[P:.*]] = nn.matmul {{.*}} -> tensor<1x8x16xf32>
// CHECK: %[[RS:.*]] = shard.reduce_scatter %[[P]] on @mesh grid_axes = [1] scatter_axis = 1 : tensor<1x8x16xf32> -> tensor<1x4x16xf32>
// CHECK: %[[D:.*]] = nn.dropout %[[RS]] rate = {{.*}} {global_shape = array<i64: 2, 8, 16>, split_axes = [array<i16: 0>, array<i16: 1>, array<i16>]} : tensor<1x4x16xf32>
// CHECK: nn.add %[[X]], %[[D]] : tensor<1x4x16xf32>
// CHECK-NOT: shard.all_reduce {{.*}} grid_axes = [1] :
func.func @loss(
    %x: tensor<2x8x16xf32> {nn.input, nn.axes = ["batch", "seq", "embed"]},
    %g: tensor<16xf32> {nn.param = "ln.weight", nn.init = #nn.init<ones>, nn.axes = ["embed"]},
    %b: tensor<16xf32> {nn.param = "ln.bias", nn.init = #nn.init<zeros>, nn.axes = ["embed"]},
    %w1: tensor<16x32xf32> {nn.param = "fc.weight", nn.init = #nn.init<normal, 0.02>, nn.axes = ["embed", "mlp"]},
    %w2: tensor<32x16xf32> {nn.param = "proj.weight", nn.init = #nn.init<normal, 0.02>, nn.axes = ["mlp", "embed"]})
    -> tensor<f32> {
  %n = nn.layer_norm %x, %g, %b : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %h = nn.matmul %n, %w1 : (tensor<2x8x16xf32>, tensor<16x32xf32>) -> tensor<2x8x32xf32>
  %a = nn.gelu %h : tensor<2x8x32xf32>
  %p = nn.matmul %a, %w2 : (tensor<2x8x32xf32>, tensor<32x16xf32>) -> tensor<2x8x16xf32>
  %d = nn.dropout %p rate = 0.1 seed = 3 : tensor<2x8x16xf32>
  %r = nn.add %x, %d : tensor<2x8x16xf32>
  %l = nn.reduce_mean %r dims = [0, 1, 2] : tensor<2x8x16xf32> -> tensor<f32>
  return %l : tensor<f32>
}
