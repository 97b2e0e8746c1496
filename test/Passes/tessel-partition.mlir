// RUN: tessel-opt %s -tessel-partition --split-input-file | FileCheck %s

shard.grid @mesh(shape = 2x2) {nn.axis_names = ["dp", "tp"]}

// Tests Megatron's MLP: column- then row-parallel; the row-parallel product is
// a partial sum over tp, all-reduced where the bias add needs it whole.
// CHECK-LABEL: func.func @row_parallel
// CHECK-SAME: (%[[X:.*]]: tensor<4x16xf32> {{.*}}, %[[W1:.*]]: tensor<16x16xf32> {{.*}}, %[[W2:.*]]: tensor<16x16xf32> {{.*}}, %[[B:.*]]: tensor<16xf32>)
// CHECK: %[[H:.*]] = nn.matmul %[[X]], %[[W1]] : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
// CHECK: %[[Z:.*]] = nn.matmul %[[H]], %[[W2]] : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
// CHECK: %[[BB:.*]] = nn.broadcast %[[B]]
// CHECK: %[[R:.*]] = shard.all_reduce %[[Z]] on @mesh grid_axes = [1] : tensor<4x16xf32> -> tensor<4x16xf32>
// CHECK: nn.add %[[R]], %[[BB]] : tensor<4x16xf32>
func.func @row_parallel(%x: tensor<8x16xf32> {nn.sharding = [["dp"], []]},
                        %w1: tensor<16x32xf32> {nn.sharding = [[], ["tp"]]},
                        %w2: tensor<32x16xf32> {nn.sharding = [["tp"], []]},
                        %b: tensor<16xf32>) -> (tensor<8x16xf32> {nn.sharding = [["dp"], []]}) {
  %h = nn.matmul %x, %w1 {nn.loop_sharding = [["dp"], ["tp"], []]} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %z = nn.matmul %h, %w2 {nn.loop_sharding = [["dp"], [], ["tp"]]} : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %bb = nn.broadcast %b dims = [1] {nn.loop_sharding = [["dp"], []]} : tensor<16xf32> -> tensor<8x16xf32>
  %y = nn.add %z, %bb {nn.loop_sharding = [["dp"], []]} : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

shard.grid @mesh(shape = 2) {nn.axis_names = ["tp"]}

// Tests that partial sums pass through a linear op: two row-parallel
// products are added first and all-reduced once.
// CHECK-LABEL: func.func @partial_sums_add
// CHECK: %[[A:.*]] = nn.matmul
// CHECK: %[[B:.*]] = nn.matmul
// CHECK: %[[S:.*]] = nn.add %[[A]], %[[B]] : tensor<8x16xf32>
// CHECK: %[[R:.*]] = shard.all_reduce %[[S]] on @mesh grid_axes = [0]
// CHECK-NOT: shard.all_reduce
// CHECK: nn.tanh %[[R]]
func.func @partial_sums_add(%x: tensor<8x32xf32> {nn.sharding = [[], ["tp"]]},
                            %w1: tensor<32x16xf32> {nn.sharding = [["tp"], []]},
                            %w2: tensor<32x16xf32> {nn.sharding = [["tp"], []]}) -> tensor<8x16xf32> {
  %a = nn.matmul %x, %w1 {nn.loop_sharding = [[], [], ["tp"]]} : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %b = nn.matmul %x, %w2 {nn.loop_sharding = [[], [], ["tp"]]} : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %s = nn.add %a, %b {nn.loop_sharding = [[], []]} : tensor<8x16xf32>
  %t = nn.tanh %s {nn.loop_sharding = [[], []]} : tensor<8x16xf32>
  return %t : tensor<8x16xf32>
}

// -----

shard.grid @mesh(shape = 2) {nn.axis_names = ["tp"]}

// Tests that a partial sum consumed split along a dimension over its partial
// axis becomes a reduce-scatter (sequence parallelism after a row-parallel
// linear).
// CHECK-LABEL: func.func @reduce_scatter
// CHECK: %[[P:.*]] = nn.matmul {{.*}} -> tensor<2x8x16xf32>
// CHECK: %[[RS:.*]] = shard.reduce_scatter %[[P]] on @mesh grid_axes = [0] scatter_axis = 1 : tensor<2x8x16xf32> -> tensor<2x4x16xf32>
// CHECK: nn.gelu %[[RS]] : tensor<2x4x16xf32>
func.func @reduce_scatter(%x: tensor<2x8x32xf32> {nn.sharding = [[], [], ["tp"]]},
                          %w: tensor<32x16xf32> {nn.sharding = [["tp"], []]})
    -> (tensor<2x8x16xf32> {nn.sharding = [[], ["tp"], []]}) {
  %p = nn.matmul %x, %w {nn.loop_sharding = [[], [], [], ["tp"]]} : (tensor<2x8x32xf32>, tensor<32x16xf32>) -> tensor<2x8x16xf32>
  %g = nn.gelu %p {nn.loop_sharding = [[], ["tp"], []]} : tensor<2x8x16xf32>
  return %g : tensor<2x8x16xf32>
}

// -----

shard.grid @mesh(shape = 2x2) {nn.axis_names = ["dp", "tp"]}

// Tests resharding between any two shardings: an axis moves between
// dimensions by all-to-all, an axis is dropped by all-gather and added by
// a local slice.
// CHECK-LABEL: func.func @reshard
// CHECK: %[[T:.*]] = shard.all_to_all %arg0 on @mesh grid_axes = [1] split_axis = 1 concat_axis = 0 : tensor<4x16xf32> -> tensor<8x8xf32>
// CHECK: nn.exp %[[T]] : tensor<8x8xf32>
// CHECK: %[[G:.*]] = shard.all_gather %arg0 on @mesh grid_axes = [1] gather_axis = 0 : tensor<4x16xf32> -> tensor<8x16xf32>
// CHECK: %[[S:.*]] = shard.all_slice %[[G]] on @mesh grid_axes = [0] slice_axis = 1 : tensor<8x16xf32> -> tensor<8x8xf32>
// CHECK: nn.tanh %[[S]] : tensor<8x8xf32>
func.func @reshard(%x: tensor<8x16xf32> {nn.sharding = [["tp"], []]})
    -> (tensor<8x16xf32> {nn.sharding = [[], ["tp"]]}, tensor<8x16xf32> {nn.sharding = [[], ["dp"]]}) {
  %e = nn.exp %x {nn.loop_sharding = [[], ["tp"]]} : tensor<8x16xf32>
  %t = nn.tanh %x {nn.loop_sharding = [[], ["dp"]]} : tensor<8x16xf32>
  return %e, %t : tensor<8x16xf32>, tensor<8x16xf32>
}

// -----

shard.grid @mesh(shape = 4) {nn.axis_names = ["dp"]}

// Tests data parallelism's loss and its gradient: the local mean loss is
// averaged across ranks, and the gradient of a mean is scaled by the local
// share of positions (so every row still gets dloss / 8).
// CHECK-LABEL: func.func @mean_loss
// CHECK: %[[L:.*]] = nn.cross_entropy {{.*}} : (tensor<2x10xf32>, tensor<2xi32>) -> tensor<f32>
// CHECK: %[[SHARE:.*]] = nn.constant dense<2.500000e-01> : tensor<f32>
// CHECK: %[[SCALED:.*]] = nn.mul %arg2, %[[SHARE]]
// CHECK: nn.cross_entropy_grad %arg0, %arg1, %[[SCALED]] : (tensor<2x10xf32>, tensor<2xi32>, tensor<f32>) -> tensor<2x10xf32>
// CHECK: shard.all_reduce %[[L]] on @mesh grid_axes = [0] reduction = average : tensor<f32> -> tensor<f32>
func.func @mean_loss(%z: tensor<8x10xf32> {nn.sharding = [["dp"], []]},
                     %y: tensor<8xi32> {nn.sharding = [["dp"]]},
                     %dl: tensor<f32>) -> (tensor<f32>, tensor<8x10xf32> {nn.sharding = [["dp"], []]}) {
  %l = nn.cross_entropy %z, %y {nn.loop_sharding = [["dp"], []]} : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
  %g = nn.cross_entropy_grad %z, %y, %dl {nn.loop_sharding = [["dp"], []]} : (tensor<8x10xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x10xf32>
  return %l, %g : tensor<f32>, tensor<8x10xf32>
}

// -----

shard.grid @mesh(shape = 2) {nn.axis_names = ["tp"]}

// Tests the global gradient norm over a split and a replicated gradient: the
// split one's squares are summed across ranks, the replicated one's counted
// once.
// CHECK-LABEL: func.func @sum_squares_groups
// CHECK: %[[A:.*]] = nn.sum_squares %arg0 : (tensor<4x8xf32>) -> tensor<f32>
// CHECK: %[[AR:.*]] = shard.all_reduce %[[A]] on @mesh grid_axes = [0]
// CHECK: %[[B:.*]] = nn.sum_squares %arg1 : (tensor<8xf32>) -> tensor<f32>
// CHECK: nn.add %[[AR]], %[[B]] : tensor<f32>
func.func @sum_squares_groups(%a: tensor<8x8xf32> {nn.sharding = [["tp"], []]},
                              %b: tensor<8xf32>) -> tensor<f32> {
  %s = nn.sum_squares %a, %b {nn.loop_sharding = [["tp"], [], []]} : (tensor<8x8xf32>, tensor<8xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}

// Tests that a repeated layer is partitioned once, on its own shardings, and
// the repeat takes local operands.
// CHECK-LABEL: func.func private @layer
// CHECK-SAME: (%arg0: tensor<4x16xf32> {nn.sharding = {{\[}}["dp"], []]}, %arg1: tensor<16x16xf32>) -> (tensor<4x16xf32> {nn.sharding = {{\[}}["dp"], []]})
// CHECK: nn.matmul %arg0, %arg1 : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
// CHECK-LABEL: func.func @repeated
// CHECK: nn.repeat @layer(%arg0) params(%arg1) : (tensor<4x16xf32>, tensor<3x16x16xf32>) -> tensor<4x16xf32>
func.func private @layer(%h: tensor<8x16xf32> {nn.sharding = [["dp"], []]}, %w: tensor<16x16xf32>)
    -> (tensor<8x16xf32> {nn.sharding = [["dp"], []]}) {
  %y = nn.matmul %h, %w {nn.loop_sharding = [["dp"], [], []]} : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
func.func @repeated(%x: tensor<8x16xf32> {nn.sharding = [["dp"], []]}, %w: tensor<3x16x16xf32>)
    -> (tensor<8x16xf32> {nn.sharding = [["dp"], []]}) {
  %h = nn.repeat @layer(%x) params(%w) : (tensor<8x16xf32>, tensor<3x16x16xf32>) -> tensor<8x16xf32>
  return %h : tensor<8x16xf32>
}

// -----

shard.grid @mesh(shape = 2) {nn.axis_names = ["tp"]}

// Tests that a partial sum is never sliced over its own axis (each rank
// would keep a different block of the sum), and that an add of partial
// sums split along the rows over tp adds them whole first: one
// reduce-scatter completes the sum (the q, k, v input gradients under
// sequence parallelism), not one per operand.
// CHECK-LABEL: func.func @no_slice_of_partial
// CHECK: %[[A:.*]] = nn.matmul
// CHECK: %[[B:.*]] = nn.matmul
// CHECK: %[[S:.*]] = nn.add %[[A]], %[[B]] : tensor<8x16xf32>
// CHECK: %[[R:.*]] = shard.reduce_scatter %[[S]] on @mesh grid_axes = [0] scatter_axis = 0 : tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NOT: shard.
// CHECK: return %[[R]]
func.func @no_slice_of_partial(%x: tensor<8x32xf32> {nn.sharding = [[], ["tp"]]},
                               %w1: tensor<32x16xf32> {nn.sharding = [["tp"], []]},
                               %w2: tensor<32x16xf32> {nn.sharding = [["tp"], []]})
    -> (tensor<8x16xf32> {nn.sharding = [["tp"], []]}) {
  %a = nn.matmul %x, %w1 {nn.loop_sharding = [[], [], ["tp"]]} : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %b = nn.matmul %x, %w2 {nn.loop_sharding = [[], [], ["tp"]]} : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %s = nn.add %a, %b {nn.loop_sharding = [["tp"], []]} : tensor<8x16xf32>
  return %s : tensor<8x16xf32>
}

// -----

shard.grid @mesh(shape = 2) {nn.axis_names = ["tp"]}

// Tests that a partial sum does not pass through a product whose other
// factor is split over its partial axis: rank r would multiply its addend
// by block r of the factor, no addend of the product. The sum is completed
// first; the product is then whole, split over tp only along its columns.
// CHECK-LABEL: func.func @partial_times_split_factor
// CHECK: %[[P:.*]] = nn.matmul
// CHECK: %[[R:.*]] = shard.all_reduce %[[P]] on @mesh grid_axes = [0] : tensor<8x16xf32> -> tensor<8x16xf32>
// CHECK: %[[Z:.*]] = nn.matmul %[[R]], %{{.*}} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
// CHECK-NOT: shard.
// CHECK: return %[[Z]]
func.func @partial_times_split_factor(%x: tensor<8x32xf32> {nn.sharding = [[], ["tp"]]},
                                      %w1: tensor<32x16xf32> {nn.sharding = [["tp"], []]},
                                      %w2: tensor<16x64xf32> {nn.sharding = [[], ["tp"]]})
    -> (tensor<8x64xf32> {nn.sharding = [[], ["tp"]]}) {
  %p = nn.matmul %x, %w1 {nn.loop_sharding = [[], [], ["tp"]]} : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %z = nn.matmul %p, %w2 {nn.loop_sharding = [[], ["tp"], []]} : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  return %z : tensor<8x64xf32>
}

// -----

shard.grid @mesh(shape = 2) {nn.axis_names = ["tp"]}

// Tests the same with the partial sum on the right: the left factor's rows
// split over the partial axis.
// CHECK-LABEL: func.func @split_factor_times_partial
// CHECK-SAME: %[[A:[^:]*]]: tensor<2x8xf32>
// CHECK: %[[P:.*]] = nn.matmul
// CHECK: %[[R:.*]] = shard.all_reduce %[[P]] on @mesh grid_axes = [0] : tensor<8x16xf32> -> tensor<8x16xf32>
// CHECK: %[[Z:.*]] = nn.matmul %[[A]], %[[R]] : (tensor<2x8xf32>, tensor<8x16xf32>) -> tensor<2x16xf32>
// CHECK-NOT: shard.
// CHECK: return %[[Z]]
func.func @split_factor_times_partial(%x: tensor<8x32xf32> {nn.sharding = [[], ["tp"]]},
                                      %w1: tensor<32x16xf32> {nn.sharding = [["tp"], []]},
                                      %a: tensor<4x8xf32> {nn.sharding = [["tp"], []]})
    -> (tensor<4x16xf32> {nn.sharding = [["tp"], []]}) {
  %p = nn.matmul %x, %w1 {nn.loop_sharding = [[], [], ["tp"]]} : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %z = nn.matmul %a, %p {nn.loop_sharding = [["tp"], [], []]} : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  return %z : tensor<4x16xf32>
}

// -----

shard.grid @mesh(shape = 2) {nn.axis_names = ["tp"]}

// Tests that a partial sum is completed before a broadcast whose new
// dimension is split over its partial axis: a value is never split over
// the axes it is partial over (and the smaller tensor is all-reduced).
// CHECK-LABEL: func.func @partial_broadcast_split
// CHECK: %[[P:.*]] = nn.matmul
// CHECK-NEXT: %[[R:.*]] = shard.all_reduce %[[P]] on @mesh grid_axes = [0] : tensor<8x16xf32> -> tensor<8x16xf32>
// CHECK-NEXT: %[[B:.*]] = nn.broadcast %[[R]] dims = [1, 2] : tensor<8x16xf32> -> tensor<2x8x16xf32>
// CHECK-NEXT: return %[[B]]
func.func @partial_broadcast_split(%x: tensor<8x32xf32> {nn.sharding = [[], ["tp"]]},
                                   %w: tensor<32x16xf32> {nn.sharding = [["tp"], []]})
    -> (tensor<4x8x16xf32> {nn.sharding = [["tp"], [], []]}) {
  %p = nn.matmul %x, %w {nn.loop_sharding = [[], [], ["tp"]]} : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %b = nn.broadcast %p dims = [1, 2] {nn.loop_sharding = [["tp"], [], []]} : tensor<8x16xf32> -> tensor<4x8x16xf32>
  return %b : tensor<4x8x16xf32>
}

// -----

shard.grid @mesh(shape = 2x2) {nn.axis_names = ["dp", "tp"]}

// Tests that a partial sum over tp still passes through a product whose
// other factor is split over another axis (dp): the ranks of a tp group
// hold the same block of it, and one all-reduce over tp completes the
// smaller product.
// CHECK-LABEL: func.func @partial_times_factor_split_elsewhere
// CHECK: %[[P:.*]] = nn.matmul
// CHECK-NEXT: %[[Z:.*]] = nn.matmul %[[P]], %{{.*}} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
// CHECK-NEXT: %[[R:.*]] = shard.all_reduce %[[Z]] on @mesh grid_axes = [1] : tensor<8x32xf32> -> tensor<8x32xf32>
// CHECK-NEXT: return %[[R]]
func.func @partial_times_factor_split_elsewhere(
    %x: tensor<8x32xf32> {nn.sharding = [[], ["tp"]]},
    %w1: tensor<32x16xf32> {nn.sharding = [["tp"], []]},
    %w2: tensor<16x64xf32> {nn.sharding = [[], ["dp"]]})
    -> (tensor<8x64xf32> {nn.sharding = [[], ["dp"]]}) {
  %p = nn.matmul %x, %w1 {nn.loop_sharding = [[], [], ["tp"]]} : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %z = nn.matmul %p, %w2 {nn.loop_sharding = [[], ["dp"], []]} : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  return %z : tensor<8x64xf32>
}

// -----

shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}

// Tests split constants (autodiff makes them: the gradient of a mean over a
// split batch): a splat takes the local shape, any other value is the whole
// constant sliced locally.
// CHECK-LABEL: func.func @split_constants
// CHECK: %[[C:.*]] = nn.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]> : tensor<4xf32>
// CHECK: %[[LC:.*]] = shard.all_slice %[[C]] on @mesh grid_axes = [0] slice_axis = 0 : tensor<4xf32> -> tensor<2xf32>
// CHECK: %[[S:.*]] = nn.constant dense<5.000000e-01> : tensor<2xf32>
// CHECK: %[[A:.*]] = nn.add %{{.*}}, %[[LC]] : tensor<2xf32>
// CHECK: nn.mul %[[A]], %[[S]] : tensor<2xf32>
func.func @split_constants(%x: tensor<4xf32> {nn.sharding = [["dp"]]}) -> (tensor<4xf32> {nn.sharding = [["dp"]]}) {
  %c = nn.constant {nn.loop_sharding = [["dp"]]} dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %s = nn.constant {nn.loop_sharding = [["dp"]]} dense<0.5> : tensor<4xf32>
  %a = nn.add %x, %c {nn.loop_sharding = [["dp"]]} : tensor<4xf32>
  %b = nn.mul %a, %s {nn.loop_sharding = [["dp"]]} : tensor<4xf32>
  return %b : tensor<4xf32>
}

// -----

shard.grid @mesh(shape = 2x2) {nn.axis_names = ["dp", "tp"]}

// Tests that a split dropout records the whole shape and the axes of each
// dimension, so that every element draws the bit one device draws there.
// CHECK-LABEL: func.func @split_dropout
// CHECK: nn.dropout %{{.*}} rate = 1.000000e-01 seed = 7 {global_shape = array<i64: 8, 6, 4>, split_axes = [array<i16: 0>, array<i16: 1>, array<i16>]} : tensor<4x3x4xf32>
func.func @split_dropout(%x: tensor<8x6x4xf32> {nn.sharding = [["dp"], ["tp"], []]})
    -> (tensor<8x6x4xf32> {nn.sharding = [["dp"], ["tp"], []]}) {
  %y = nn.dropout %x rate = 0.1 seed = 7 {nn.loop_sharding = [["dp"], ["tp"], []]} : tensor<8x6x4xf32>
  return %y : tensor<8x6x4xf32>
}
