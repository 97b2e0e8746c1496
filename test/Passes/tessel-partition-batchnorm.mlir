// Tests batch norm over a batch split across ranks. SyncBatchNorm (the
// default): the forward all-reduces [Σx, Σx²] per feature once and
// normalises with the whole batch's statistics; the backward all-reduces
// [Σdy, Σdy·x̂] once, which are dbeta and dgamma, whole on every rank (no
// further gradient all-reduce). With local-batchnorm the local ops stay and
// only dgamma and dbeta are all-reduced, as gradients.
// RUN: tessel-opt %s -tessel-partition --split-input-file | FileCheck %s --check-prefix=SYNC
// RUN: tessel-opt %s -tessel-partition="local-batchnorm=true" --split-input-file | FileCheck %s --check-prefix=LOCAL

shard.grid @mesh(shape = 2x2) {nn.axis_names = ["dp", "tp"]}

// The features split over tp as well: each rank's statistics are its
// features', all-reduced over dp only; 1/M is 1/(8·3) for the whole batch.
// SYNC-LABEL: func.func @forward
// SYNC-SAME: (%[[X:.*]]: tensor<4x2x3xf32> {{.*}}, %[[G:.*]]: tensor<2xf32> {{.*}}, %[[B:.*]]: tensor<2xf32> {{.*}})
// SYNC-NOT: nn.batch_norm
// SYNC: %[[S1:.*]] = nn.reduce_sum %[[X]] dims = [0, 2] : tensor<4x2x3xf32> -> tensor<2xf32>
// SYNC: %[[SQ:.*]] = nn.mul %[[X]], %[[X]]
// SYNC: %[[S2:.*]] = nn.reduce_sum %[[SQ]] dims = [0, 2]
// SYNC: %[[C:.*]] = nn.concat %[[S1]], %[[S2]] dim = 0 : (tensor<2xf32>, tensor<2xf32>) -> tensor<4xf32>
// SYNC: %[[R:.*]] = shard.all_reduce %[[C]] on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
// SYNC: nn.slice %[[R]] start = [0] limit = [2]
// SYNC: nn.slice %[[R]] start = [2] limit = [4]
// SYNC: nn.constant dense<0.0416666{{.*}}> : tensor<2xf32>
// SYNC: nn.rsqrt
// SYNC-NOT: shard.
// SYNC: return
// LOCAL-LABEL: func.func @forward
// LOCAL-NOT: shard.
// LOCAL: nn.batch_norm %{{.*}} : (tensor<4x2x3xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<4x2x3xf32>
// LOCAL-NOT: shard.
// LOCAL: return
func.func @forward(%x: tensor<8x4x3xf32> {nn.sharding = [["dp"], ["tp"], []]},
                   %g: tensor<4xf32> {nn.sharding = [["tp"]]},
                   %b: tensor<4xf32> {nn.sharding = [["tp"]]})
    -> (tensor<8x4x3xf32> {nn.sharding = [["dp"], ["tp"], []]}) {
  %y = nn.batch_norm %x, %g, %b {nn.loop_sharding = [["dp"], ["tp"], []]} : (tensor<8x4x3xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<8x4x3xf32>
  return %y : tensor<8x4x3xf32>
}

// -----

shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}

// SYNC-LABEL: func.func @backward
// SYNC-NOT: nn.batch_norm_grad
// SYNC: shard.all_reduce %{{.*}} on @mesh grid_axes = [0] : tensor<8xf32> -> tensor<8xf32>
// SYNC: %[[DY:.*]] = nn.reduce_sum %{{.*}} dims = [0] : tensor<4x4xf32> -> tensor<4xf32>
// SYNC: %[[DYX:.*]] = nn.reduce_sum %{{.*}} dims = [0] : tensor<4x4xf32> -> tensor<4xf32>
// SYNC: %[[C:.*]] = nn.concat %[[DY]], %[[DYX]]
// SYNC: %[[R:.*]] = shard.all_reduce %[[C]] on @mesh grid_axes = [0] : tensor<8xf32> -> tensor<8xf32>
// SYNC: %[[DB:.*]] = nn.slice %[[R]] start = [0] limit = [4]
// SYNC: %[[DG:.*]] = nn.slice %[[R]] start = [4] limit = [8]
// SYNC-NOT: shard.
// SYNC: return %{{.*}}, %[[DG]], %[[DB]] : tensor<4x4xf32>, tensor<4xf32>, tensor<4xf32>
// LOCAL-LABEL: func.func @backward
// LOCAL: %[[DX:.*]], %[[DG:.*]], %[[DB:.*]] = nn.batch_norm_grad %{{.*}} : (tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>)
// LOCAL-DAG: %[[RG:.*]] = shard.all_reduce %[[DG]] on @mesh grid_axes = [0]
// LOCAL-DAG: %[[RB:.*]] = shard.all_reduce %[[DB]] on @mesh grid_axes = [0]
// LOCAL: return %[[DX]], %[[RG]], %[[RB]]
func.func @backward(%x: tensor<8x4xf32> {nn.sharding = [["dp"], []]},
                    %g: tensor<4xf32>,
                    %dy: tensor<8x4xf32> {nn.sharding = [["dp"], []]})
    -> (tensor<8x4xf32> {nn.sharding = [["dp"], []]}, tensor<4xf32>, tensor<4xf32>) {
  %dx, %dg, %db = nn.batch_norm_grad %x, %g, %dy {nn.loop_sharding = [["dp"], []]} : (tensor<8x4xf32>, tensor<4xf32>, tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<4xf32>, tensor<4xf32>)
  return %dx, %dg, %db : tensor<8x4xf32>, tensor<4xf32>, tensor<4xf32>
}
