// RUN: tessel-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(func.func(shard-partition))' | FileCheck %s

// Tests that a mean cross_entropy_grad split over its positions rescales
// dloss by the local share (4 of 8 rows), so every row still gets
// dloss / 8 from the local kernel's division by 4.
// CHECK-LABEL: func.func @cross_entropy_grad_mean_split
// CHECK-SAME: (%[[Z:.*]]: tensor<4x10xf32>, %[[Y:.*]]: tensor<4xi32>, %[[D:.*]]: tensor<f32>)
// CHECK: %[[SHARE:.*]] = nn.constant dense<5.000000e-01> : tensor<f32>
// CHECK: %[[SCALED:.*]] = nn.mul %[[D]], %[[SHARE]] : tensor<f32>
// CHECK: nn.cross_entropy_grad %[[Z]], %[[Y]], %[[SCALED]] : (tensor<4x10xf32>, tensor<4xi32>, tensor<f32>) -> tensor<4x10xf32>
shard.grid @mesh(shape = 2)
func.func @cross_entropy_grad_mean_split(%z: tensor<8x10xf32>, %y: tensor<8xi32>, %dl: tensor<f32>) -> tensor<8x10xf32> {
  %rows = shard.sharding @mesh split_axes = [[0]] : !shard.sharding
  %none = shard.sharding @mesh split_axes = [[]] : !shard.sharding
  %z1 = shard.shard %z to %rows : tensor<8x10xf32>
  %z2 = shard.shard %z1 to %rows annotate_for_users : tensor<8x10xf32>
  %y1 = shard.shard %y to %rows : tensor<8xi32>
  %y2 = shard.shard %y1 to %rows annotate_for_users : tensor<8xi32>
  %d1 = shard.shard %dl to %none : tensor<f32>
  %d2 = shard.shard %d1 to %none annotate_for_users : tensor<f32>
  %g = nn.cross_entropy_grad %z2, %y2, %d2 : (tensor<8x10xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x10xf32>
  %g1 = shard.shard %g to %rows : tensor<8x10xf32>
  %g2 = shard.shard %g1 to %rows annotate_for_users : tensor<8x10xf32>
  return %g2 : tensor<8x10xf32>
}

// -----

// Tests that a sum cross_entropy_grad split over its positions runs as it
// is: every row gets dloss.
// CHECK-LABEL: func.func @cross_entropy_grad_sum_split
// CHECK-NOT: nn.mul
// CHECK: nn.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} {reduction = #nn.reduction<sum>} : (tensor<4x10xf32>, tensor<4xi32>, tensor<f32>) -> tensor<4x10xf32>
shard.grid @mesh(shape = 2)
func.func @cross_entropy_grad_sum_split(%z: tensor<8x10xf32>, %y: tensor<8xi32>, %dl: tensor<f32>) -> tensor<8x10xf32> {
  %rows = shard.sharding @mesh split_axes = [[0]] : !shard.sharding
  %none = shard.sharding @mesh split_axes = [[]] : !shard.sharding
  %z1 = shard.shard %z to %rows : tensor<8x10xf32>
  %z2 = shard.shard %z1 to %rows annotate_for_users : tensor<8x10xf32>
  %y1 = shard.shard %y to %rows : tensor<8xi32>
  %y2 = shard.shard %y1 to %rows annotate_for_users : tensor<8xi32>
  %d1 = shard.shard %dl to %none : tensor<f32>
  %d2 = shard.shard %d1 to %none annotate_for_users : tensor<f32>
  %g = nn.cross_entropy_grad %z2, %y2, %d2 {reduction = #nn.reduction<sum>} : (tensor<8x10xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x10xf32>
  %g1 = shard.shard %g to %rows : tensor<8x10xf32>
  %g2 = shard.shard %g1 to %rows annotate_for_users : tensor<8x10xf32>
  return %g2 : tensor<8x10xf32>
}

// -----

// Tests that upstream shard-partition of cross_entropy_grad over split
// classes takes the vocabulary-parallel strategy too: the row statistics are
// all-reduced (maximum, Σexp over the class blocks) and the rank's block of
// the gradient is one op.
// CHECK-LABEL: func.func @cross_entropy_grad_class_split
// CHECK: nn.vocab_loss_stats %{{.*}} {block_axes = array<i16: 0>} : (tensor<8x5xf32>, tensor<8xi32>)
// CHECK: shard.all_reduce %{{.*}} on @mesh grid_axes = [0] reduction = max : tensor<8xf32>
// CHECK: shard.all_reduce %{{.*}} on @mesh grid_axes = [0] : tensor<8xf32>
// CHECK: nn.vocab_loss_grad %{{.*}} {block_axes = array<i16: 0>} : (tensor<8x5xf32>, tensor<8xi32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8x5xf32>
shard.grid @mesh(shape = 2)
func.func @cross_entropy_grad_class_split(%z: tensor<8x10xf32>, %y: tensor<8xi32>, %dl: tensor<f32>) -> tensor<8x10xf32> {
  %classes = shard.sharding @mesh split_axes = [[], [0]] : !shard.sharding
  %none = shard.sharding @mesh split_axes = [[]] : !shard.sharding
  %z1 = shard.shard %z to %classes : tensor<8x10xf32>
  %z2 = shard.shard %z1 to %classes annotate_for_users : tensor<8x10xf32>
  %y1 = shard.shard %y to %none : tensor<8xi32>
  %y2 = shard.shard %y1 to %none annotate_for_users : tensor<8xi32>
  %d1 = shard.shard %dl to %none : tensor<f32>
  %d2 = shard.shard %d1 to %none annotate_for_users : tensor<f32>
  %g = nn.cross_entropy_grad %z2, %y2, %d2 : (tensor<8x10xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x10xf32>
  %g1 = shard.shard %g to %classes : tensor<8x10xf32>
  %g2 = shard.shard %g1 to %classes annotate_for_users : tensor<8x10xf32>
  return %g2 : tensor<8x10xf32>
}

// -----

// Tests that a norm gradient split over its rows is refused (dgamma and
// dbeta would be partial sums), never partitioned into a wrong result.
shard.grid @mesh(shape = 2)
func.func @layer_norm_grad_row_split(%x: tensor<8x16xf32>, %g: tensor<16xf32>, %dy: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>) {
  %rows = shard.sharding @mesh split_axes = [[0]] : !shard.sharding
  %none = shard.sharding @mesh split_axes = [[]] : !shard.sharding
  %x1 = shard.shard %x to %rows : tensor<8x16xf32>
  %x2 = shard.shard %x1 to %rows annotate_for_users : tensor<8x16xf32>
  %g1 = shard.shard %g to %none : tensor<16xf32>
  %g2 = shard.shard %g1 to %none annotate_for_users : tensor<16xf32>
  %dy1 = shard.shard %dy to %rows : tensor<8x16xf32>
  %dy2 = shard.shard %dy1 to %rows annotate_for_users : tensor<8x16xf32>
  // expected-error @+1 {{'nn.layer_norm_grad' op value #0 splits reduction loop 0; upstream shard-partition of nn ops splits parallel loops only}}
  %dx, %dg, %db = nn.layer_norm_grad %x2, %g2, %dy2 : (tensor<8x16xf32>, tensor<16xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>)
  %dx1 = shard.shard %dx to %rows : tensor<8x16xf32>
  %dx2 = shard.shard %dx1 to %rows annotate_for_users : tensor<8x16xf32>
  %dg1 = shard.shard %dg to %none : tensor<16xf32>
  %dg2 = shard.shard %dg1 to %none annotate_for_users : tensor<16xf32>
  %db1 = shard.shard %db to %none : tensor<16xf32>
  %db2 = shard.shard %db1 to %none annotate_for_users : tensor<16xf32>
  return %dx2, %dg2, %db2 : tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>
}

// -----

// Tests that the gradient of an f32 loss of bf16 logits over split classes
// reads the bf16 block with f32 statistics and writes its bf16 gradient
// (tessel-partition-vocab.mlir: the loss itself).
// CHECK-LABEL: func.func @cross_entropy_grad_widened_class_split
// CHECK: nn.vocab_loss_stats %{{.*}} {block_axes = array<i16: 0>} : (tensor<8x5xbf16>, tensor<8xi32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK: nn.vocab_loss_grad %{{.*}} {block_axes = array<i16: 0>} : (tensor<8x5xbf16>, tensor<8xi32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8x5xbf16>
shard.grid @mesh(shape = 2)
func.func @cross_entropy_grad_widened_class_split(%z: tensor<8x10xbf16>, %y: tensor<8xi32>, %dl: tensor<f32>) -> tensor<8x10xbf16> {
  %classes = shard.sharding @mesh split_axes = [[], [0]] : !shard.sharding
  %none = shard.sharding @mesh split_axes = [[]] : !shard.sharding
  %z1 = shard.shard %z to %classes : tensor<8x10xbf16>
  %z2 = shard.shard %z1 to %classes annotate_for_users : tensor<8x10xbf16>
  %y1 = shard.shard %y to %none : tensor<8xi32>
  %y2 = shard.shard %y1 to %none annotate_for_users : tensor<8xi32>
  %d1 = shard.shard %dl to %none : tensor<f32>
  %d2 = shard.shard %d1 to %none annotate_for_users : tensor<f32>
  %g = nn.cross_entropy_grad %z2, %y2, %d2 : (tensor<8x10xbf16>, tensor<8xi32>, tensor<f32>) -> tensor<8x10xbf16>
  %g1 = shard.shard %g to %classes : tensor<8x10xbf16>
  %g2 = shard.shard %g1 to %classes annotate_for_users : tensor<8x10xbf16>
  return %g2 : tensor<8x10xbf16>
}
