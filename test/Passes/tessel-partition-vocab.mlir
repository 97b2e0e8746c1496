// Tests the vocabulary-parallel embedding and cross-entropy (Megatron):
// the rank's block of a table split over tp looks up its own rows (the
// local op records the block's grid axes) and the output is a partial sum
// completed by one all-reduce of b·s·h; the cross-entropy over split
// classes reads its block once for each position's statistics
// (nn.vocab_loss_stats, Megatron's fused vocab-parallel loss) and
// all-reduces three values per position (row maximum, Σexp rescaled to it,
// the label's logit), never the logits; its gradient recomputes the two
// statistics and writes the block's in one op (nn.vocab_loss_grad).
// RUN: tessel-opt %s -tessel-partition --split-input-file | FileCheck %s

shard.grid @mesh(shape = 2) {nn.axis_names = ["tp"]}

// CHECK-LABEL: func.func @embedding
// CHECK-SAME: (%[[T:.*]]: tensor<8x4xf32> {{.*}}, %[[IDS:.*]]: tensor<2x3xi32>)
// CHECK: %[[E:.*]] = nn.embedding %[[T]], %[[IDS]] {block_axes = array<i16: 0>} : (tensor<8x4xf32>, tensor<2x3xi32>) -> tensor<2x3x4xf32>
// CHECK: %[[R:.*]] = shard.all_reduce %[[E]] on @mesh grid_axes = [0] : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
// CHECK: return %[[R]]
func.func @embedding(%table: tensor<16x4xf32> {nn.sharding = [["tp"], []]},
                     %ids: tensor<2x3xi32>) -> tensor<2x3x4xf32> {
  %e = nn.embedding %table, %ids {nn.loop_sharding = [[], [], [], ["tp"]]} : (tensor<16x4xf32>, tensor<2x3xi32>) -> tensor<2x3x4xf32>
  return %e : tensor<2x3x4xf32>
}

// -----

shard.grid @mesh(shape = 2) {nn.axis_names = ["tp"]}

// Tests a vocabulary-parallel embedding feeding a head split over the same
// vocabulary: the embedding's partial sum is all-reduced before the head's
// product (each rank multiplies the whole b·s·h by its block of the head),
// and the logits, split over tp, need no all-reduce of their own.
// CHECK-LABEL: func.func @embedding_head
// CHECK-SAME: (%[[T:[^:]*]]: tensor<8x4xf32> {{.*}}, %[[H:[^:]*]]: tensor<8x4xf32> {{.*}}, %[[IDS:[^:]*]]: tensor<2x3xi32>)
// CHECK: %[[E:.*]] = nn.embedding %[[T]], %[[IDS]] {block_axes = array<i16: 0>}
// CHECK-NEXT: %[[R:.*]] = shard.all_reduce %[[E]] on @mesh grid_axes = [0] : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[Z:.*]] = nn.matmul %[[R]], %[[H]] transpose_rhs : (tensor<2x3x4xf32>, tensor<8x4xf32>) -> tensor<2x3x8xf32>
// CHECK-NEXT: return %[[Z]]
func.func @embedding_head(%table: tensor<16x4xf32> {nn.sharding = [["tp"], []]},
                          %head: tensor<16x4xf32> {nn.sharding = [["tp"], []]},
                          %ids: tensor<2x3xi32>)
    -> (tensor<2x3x16xf32> {nn.sharding = [[], [], ["tp"]]}) {
  %e = nn.embedding %table, %ids {nn.loop_sharding = [[], [], [], ["tp"]]} : (tensor<16x4xf32>, tensor<2x3xi32>) -> tensor<2x3x4xf32>
  %z = nn.matmul %e, %head transpose_rhs {nn.loop_sharding = [[], [], ["tp"], []]} : (tensor<2x3x4xf32>, tensor<16x4xf32>) -> tensor<2x3x16xf32>
  return %z : tensor<2x3x16xf32>
}

// -----

shard.grid @mesh(shape = 2) {nn.axis_names = ["tp"]}

// The gradient of the table: each rank scatters into its own rows.
// CHECK-LABEL: func.func @embedding_grad
// CHECK: %[[G:.*]] = nn.embedding_grad %{{.*}}, %{{.*}} {block_axes = array<i16: 0>} : (tensor<2x3xi32>, tensor<2x3x4xf32>) -> tensor<8x4xf32>
// CHECK-NOT: shard.
// CHECK: return %[[G]]
func.func @embedding_grad(%ids: tensor<2x3xi32>, %dout: tensor<2x3x4xf32>)
    -> (tensor<16x4xf32> {nn.sharding = [["tp"], []]}) {
  %g = nn.embedding_grad %ids, %dout {nn.loop_sharding = [[], [], [], ["tp"]]} : (tensor<2x3xi32>, tensor<2x3x4xf32>) -> tensor<16x4xf32>
  return %g : tensor<16x4xf32>
}

// -----

shard.grid @mesh(shape = 2x2) {nn.axis_names = ["dp", "tp"]}

// Positions split over dp, classes over tp: the statistics are all-reduced
// over tp only (one value per local position, 3 reductions), the local mean
// over dp (an average of one scalar).
// CHECK-LABEL: func.func @cross_entropy
// CHECK-SAME: (%[[Z:.*]]: tensor<2x3x5xf32> {{.*}}, %[[Y:.*]]: tensor<2x3xi32> {{.*}})
// CHECK-NOT: shard.all_gather
// CHECK: %[[M:.*]], %[[S:.*]], %[[P:.*]], %{{.*}} = nn.vocab_loss_stats %[[Z]], %[[Y]] {block_axes = array<i16: 1>} : (tensor<2x3x5xf32>, tensor<2x3xi32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>)
// CHECK: %[[PR:.*]] = shard.all_reduce %[[P]] on @mesh grid_axes = [1] : tensor<2x3xf32> -> tensor<2x3xf32>
// CHECK: %[[MR:.*]] = shard.all_reduce %[[M]] on @mesh grid_axes = [1] reduction = max : tensor<2x3xf32> -> tensor<2x3xf32>
// CHECK: %[[SH:.*]] = nn.sub %[[M]], %[[MR]] : tensor<2x3xf32>
// CHECK: %[[E:.*]] = nn.exp %[[SH]] : tensor<2x3xf32>
// CHECK: %[[SE:.*]] = nn.mul %[[S]], %[[E]] : tensor<2x3xf32>
// CHECK: %[[SR:.*]] = shard.all_reduce %[[SE]] on @mesh grid_axes = [1] : tensor<2x3xf32> -> tensor<2x3xf32>
// CHECK: %[[L:.*]] = nn.log %[[SR]]
// CHECK: %[[A:.*]] = nn.add %[[L]], %[[MR]]
// CHECK: %[[D:.*]] = nn.sub %[[A]], %[[PR]]
// CHECK: %[[MEAN:.*]] = nn.reduce_mean %[[D]] dims = [0, 1] : tensor<2x3xf32> -> tensor<f32>
// CHECK: %[[LOSS:.*]] = shard.all_reduce %[[MEAN]] on @mesh grid_axes = [0] reduction = average : tensor<f32> -> tensor<f32>
// CHECK: return %[[LOSS]]
func.func @cross_entropy(%z: tensor<4x3x10xf32> {nn.sharding = [["dp"], [], ["tp"]]},
                         %y: tensor<4x3xi32> {nn.sharding = [["dp"], []]}) -> tensor<f32> {
  %l = nn.cross_entropy %z, %y {nn.loop_sharding = [["dp"], [], ["tp"]]} : (tensor<4x3x10xf32>, tensor<4x3xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

shard.grid @mesh(shape = 2x2) {nn.axis_names = ["dp", "tp"]}

// The gradient: g = dloss / 12 (all positions, not the local 6), the
// recomputed statistics (2 all-reduces over tp), then the block's
// g · (softmax − onehot) in one op; no gather of the logits.
// CHECK-LABEL: func.func @cross_entropy_grad
// CHECK-SAME: (%[[Z:.*]]: tensor<2x3x5xf32> {{.*}}, %[[Y:.*]]: tensor<2x3xi32> {{.*}}, %[[DL:.*]]: tensor<f32>)
// CHECK: %[[C:.*]] = nn.constant dense<0.0833333358> : tensor<f32>
// CHECK: %[[G0:.*]] = nn.mul %[[DL]], %[[C]] : tensor<f32>
// CHECK: %[[G:.*]] = nn.broadcast %[[G0]] dims = [] : tensor<f32> -> tensor<2x3xf32>
// CHECK: %[[M:.*]], %[[S:.*]], %{{.*}}, %{{.*}} = nn.vocab_loss_stats %[[Z]], %[[Y]] {block_axes = array<i16: 1>}
// CHECK: %[[MR:.*]] = shard.all_reduce %[[M]] on @mesh grid_axes = [1] reduction = max : tensor<2x3xf32>
// CHECK: %[[SR:.*]] = shard.all_reduce %{{.*}} on @mesh grid_axes = [1] : tensor<2x3xf32>
// CHECK: %[[DZ:.*]] = nn.vocab_loss_grad %[[Z]], %[[Y]], %[[MR]], %[[SR]], %[[G]] {block_axes = array<i16: 1>} : (tensor<2x3x5xf32>, tensor<2x3xi32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3x5xf32>
// CHECK-NOT: shard.
// CHECK: return %[[DZ]]
func.func @cross_entropy_grad(%z: tensor<4x3x10xf32> {nn.sharding = [["dp"], [], ["tp"]]},
                              %y: tensor<4x3xi32> {nn.sharding = [["dp"], []]},
                              %dl: tensor<f32>)
    -> (tensor<4x3x10xf32> {nn.sharding = [["dp"], [], ["tp"]]}) {
  %dz = nn.cross_entropy_grad %z, %y, %dl {nn.loop_sharding = [["dp"], [], ["tp"]]} : (tensor<4x3x10xf32>, tensor<4x3xi32>, tensor<f32>) -> tensor<4x3x10xf32>
  return %dz : tensor<4x3x10xf32>
}

// -----

shard.grid @mesh(shape = 2) {nn.axis_names = ["tp"]}

// The f32 loss of bf16 logits (mixed precision's, Megatron's f32 loss of
// bf16 logits): the block is read in bf16, its statistics, their
// all-reduces and the per-position loss are f32.
// CHECK-LABEL: func.func @widened_loss
// CHECK-SAME: (%[[Z:.*]]: tensor<4x5xbf16> {{.*}}, %[[Y:.*]]: tensor<4xi32>)
// CHECK: %[[M:.*]], %[[S:.*]], %[[P:.*]], %{{.*}} = nn.vocab_loss_stats %[[Z]], %[[Y]] {block_axes = array<i16: 0>} : (tensor<4x5xbf16>, tensor<4xi32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
// CHECK: shard.all_reduce %[[P]] on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
// CHECK: shard.all_reduce %[[M]] on @mesh grid_axes = [0] reduction = max : tensor<4xf32> -> tensor<4xf32>
// CHECK: shard.all_reduce %{{.*}} on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
// CHECK: nn.reduce_mean %{{.*}} dims = [0] : tensor<4xf32> -> tensor<f32>
func.func @widened_loss(%z: tensor<4x10xbf16> {nn.sharding = [[], ["tp"]]}, %y: tensor<4xi32>) -> tensor<f32> {
  %l = nn.cross_entropy %z, %y {nn.loop_sharding = [[], ["tp"]]} : (tensor<4x10xbf16>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

shard.grid @mesh(shape = 2) {nn.axis_names = ["tp"]}

// Its gradient: the f32 statistics and row gradients, the block's bf16
// gradient written from them in one op.
// CHECK-LABEL: func.func @widened_loss_grad
// CHECK-SAME: (%[[Z:.*]]: tensor<4x5xbf16> {{.*}}, %[[Y:.*]]: tensor<4xi32>, %[[DL:.*]]: tensor<f32>)
// CHECK: %[[G:.*]] = nn.broadcast %{{.*}} dims = [] : tensor<f32> -> tensor<4xf32>
// CHECK: %[[M:.*]], %[[S:.*]], %{{.*}}, %{{.*}} = nn.vocab_loss_stats %[[Z]], %[[Y]] {block_axes = array<i16: 0>} : (tensor<4x5xbf16>, tensor<4xi32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
// CHECK: %[[MR:.*]] = shard.all_reduce %[[M]] on @mesh grid_axes = [0] reduction = max : tensor<4xf32>
// CHECK: %[[SR:.*]] = shard.all_reduce %{{.*}} on @mesh grid_axes = [0] : tensor<4xf32>
// CHECK: %[[DZ:.*]] = nn.vocab_loss_grad %[[Z]], %[[Y]], %[[MR]], %[[SR]], %[[G]] {block_axes = array<i16: 0>} : (tensor<4x5xbf16>, tensor<4xi32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4x5xbf16>
// CHECK: return %[[DZ]]
func.func @widened_loss_grad(%z: tensor<4x10xbf16> {nn.sharding = [[], ["tp"]]}, %y: tensor<4xi32>, %dl: tensor<f32>)
    -> (tensor<4x10xbf16> {nn.sharding = [[], ["tp"]]}) {
  %dz = nn.cross_entropy_grad %z, %y, %dl {nn.loop_sharding = [[], ["tp"]]} : (tensor<4x10xbf16>, tensor<4xi32>, tensor<f32>) -> tensor<4x10xbf16>
  return %dz : tensor<4x10xbf16>
}

// -----

shard.grid @mesh(shape = 2) {nn.axis_names = ["tp"]}

// A bf16 loss of bf16 logits: the statistics are f32 all the same, and the
// reduced f32 loss is rounded once to bf16; its gradient widens dloss.
// CHECK-LABEL: func.func @bf16_loss
// CHECK: nn.vocab_loss_stats %{{.*}} : (tensor<4x5xbf16>, tensor<4xi32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
// CHECK: %[[MEAN:.*]] = nn.reduce_mean %{{.*}} dims = [0] : tensor<4xf32> -> tensor<f32>
// CHECK: %[[LOSS:.*]] = nn.cast %[[MEAN]] : tensor<f32> to tensor<bf16>
// CHECK: return %[[LOSS]]
// CHECK-LABEL: func.func @bf16_loss_grad
// CHECK-SAME: %[[DL:[a-z0-9]*]]: tensor<bf16>)
// CHECK: %[[WIDE:.*]] = nn.cast %[[DL]] : tensor<bf16> to tensor<f32>
// CHECK: nn.mul %[[WIDE]], %{{.*}} : tensor<f32>
// CHECK: nn.vocab_loss_grad {{.*}} : (tensor<4x5xbf16>, tensor<4xi32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4x5xbf16>
func.func @bf16_loss(%z: tensor<4x10xbf16> {nn.sharding = [[], ["tp"]]}, %y: tensor<4xi32>) -> tensor<bf16> {
  %l = nn.cross_entropy %z, %y {nn.loop_sharding = [[], ["tp"]]} : (tensor<4x10xbf16>, tensor<4xi32>) -> tensor<bf16>
  return %l : tensor<bf16>
}
func.func @bf16_loss_grad(%z: tensor<4x10xbf16> {nn.sharding = [[], ["tp"]]}, %y: tensor<4xi32>, %dl: tensor<bf16>)
    -> (tensor<4x10xbf16> {nn.sharding = [[], ["tp"]]}) {
  %dz = nn.cross_entropy_grad %z, %y, %dl {nn.loop_sharding = [[], ["tp"]]} : (tensor<4x10xbf16>, tensor<4xi32>, tensor<bf16>) -> tensor<4x10xbf16>
  return %dz : tensor<4x10xbf16>
}
