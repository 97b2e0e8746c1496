// RUN: tessel-opt %s -tessel-autodiff="optimizer=sgd momentum=0.9 clip=1.0" -tessel-propagate-sharding="mesh=dp=2,cp=2" -tessel-partition="bucket-mb=0" -tessel-zero="stage=2" | FileCheck %s
// RUN: tessel-opt %s -tessel-autodiff="optimizer=sgd momentum=0.9 clip=1.0" -tessel-propagate-sharding="mesh=cp=2" -tessel-partition="bucket-mb=0" -tessel-zero="stage=1" | FileCheck %s --check-prefix=CP

// Tests ZeRO under context parallelism: the data axes are dp and cp, as
// in Megatron's distributed optimizer, whose data-parallel group holds the
// context-parallel ranks. A weight, whole on every rank of both, shards
// over the 4 ranks of dp·cp (w: 16·8 = 128 elements, 32 a rank), its
// gradient reduce-scattered over both; the position table (pos, split over
// cp by its `seq`) shards its block over dp alone (8·8 / 2 = 32 a rank).
// The clipping norm sums each group's chunks over the group's axes, and
// pos's over cp too (its blocks).

// CHECK-LABEL: func.func @loss_backward(
// CHECK-DAG: shard.reduce_scatter %{{.*}} on @mesh grid_axes = [0, 1] scatter_axis = 0 : tensor<128xf32> -> tensor<32xf32>
// CHECK-DAG: shard.reduce_scatter %{{.*}} on @mesh grid_axes = [0] scatter_axis = 0 : tensor<64xf32> -> tensor<32xf32>
// CHECK-LABEL: func.func @loss_update(
// CHECK-SAME: tensor<32xf32> {{{.*}}nn.state = "pos.momentum", nn.zero = {block = array<i64: 8, 8>, dims = 0 : i64}}
// CHECK-SAME: tensor<32xf32> {{{.*}}nn.state = "w.momentum", nn.zero = {axes = ["dp", "cp"], block = array<i64: 16, 8>, dims = 0 : i64}}
// CHECK-DAG: shard.all_reduce %{{.*}} on @mesh grid_axes = [0, 1] : tensor<f32> -> tensor<f32>
// CHECK-DAG: shard.all_gather %{{.*}} on @mesh grid_axes = [0, 1] gather_axis = 0 : tensor<32xf32> -> tensor<128xf32>
// CHECK-DAG: shard.all_gather %{{.*}} on @mesh grid_axes = [0] gather_axis = 0 : tensor<32xf32> -> tensor<64xf32>

// On cp alone the weight shards over cp; the position table, split over
// cp already, is not sharded again.
// CP-LABEL: func.func @loss_update(
// CP-SAME: tensor<8x8xf32> {nn.axes = ["seq", "mlp"], nn.sharding = {{\[\["cp"\], \[\]\]}}, nn.state = "pos.momentum"}
// CP-SAME: tensor<64xf32> {{{.*}}nn.state = "w.momentum", nn.zero = {axes = ["cp"], block = array<i64: 16, 8>, dims = 0 : i64}}
// CP: shard.reduce_scatter %{{.*}} on @mesh grid_axes = [0] scatter_axis = 0 : tensor<128xf32> -> tensor<64xf32>

func.func @loss(%x: tensor<2x16x16xf32> {nn.input, nn.axes = ["batch", "seq", "embed"]},
                %pos: tensor<16x8xf32> {nn.param = "pos", nn.init = #nn.init<normal, 0.02>, nn.axes = ["seq", "mlp"]},
                %w: tensor<16x8xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.02>, nn.axes = ["embed", "mlp"]})
    -> tensor<f32> {
  %h = nn.matmul %x, %w : (tensor<2x16x16xf32>, tensor<16x8xf32>) -> tensor<2x16x8xf32>
  %p = nn.broadcast %pos dims = [1, 2] : tensor<16x8xf32> -> tensor<2x16x8xf32>
  %s = nn.add %h, %p : tensor<2x16x8xf32>
  %t = nn.tanh %s : tensor<2x16x8xf32>
  %l = nn.reduce_sum %t dims = [0, 1, 2] : tensor<2x16x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}
