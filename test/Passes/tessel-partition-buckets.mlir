// RUN: tessel-opt %s -tessel-partition="bucket-mb=0.0001" | FileCheck %s --check-prefix=SMALL
// RUN: tessel-opt %s -tessel-partition | FileCheck %s --check-prefix=FUSED
// RUN: tessel-opt %s -tessel-partition="bucket-mb=0" | FileCheck %s --check-prefix=EACH

shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}

// Tests DDP's gradient buckets. Three weight gradients contract the split
// batch; their all-reduces are issued in the order the gradients complete,
// right where each bucket's last gradient is ready.
// The default 25 MiB bucket fuses all three into one flat all-reduce.
// FUSED-LABEL: func.func @grads
// FUSED: %[[A:.*]] = nn.matmul {{.*}} -> tensor<4x4xf32>
// FUSED: %[[B:.*]] = nn.reduce_sum
// FUSED: %[[C:.*]] = nn.matmul {{.*}} -> tensor<4x8xf32>
// FUSED: %[[FA:.*]] = nn.reshape %[[A]] : tensor<4x4xf32> -> tensor<16xf32>
// FUSED: %[[FC:.*]] = nn.reshape %[[C]] : tensor<4x8xf32> -> tensor<32xf32>
// FUSED: %[[CAT:.*]] = nn.concat %[[FA]], %[[B]], %[[FC]] dim = 0 : (tensor<16xf32>, tensor<4xf32>, tensor<32xf32>) -> tensor<52xf32>
// FUSED: %[[R:.*]] = shard.all_reduce %[[CAT]] on @mesh grid_axes = [0] : tensor<52xf32> -> tensor<52xf32>
// FUSED: nn.slice %[[R]] start = [0] limit = [16]
// FUSED: nn.slice %[[R]] start = [16] limit = [20]
// FUSED: nn.slice %[[R]] start = [20] limit = [52]
// FUSED-COUNT-3: nn.accumulate
// A 100-byte bucket holds the first two (64 + 16 bytes); the third is alone.
// SMALL-LABEL: func.func @grads
// SMALL: nn.concat {{.*}} -> tensor<20xf32>
// SMALL-NEXT: shard.all_reduce {{.*}} : tensor<20xf32> -> tensor<20xf32>
// SMALL: %[[C:.*]] = nn.matmul {{.*}} -> tensor<4x8xf32>
// SMALL-NEXT: shard.all_reduce %[[C]] {{.*}} : tensor<4x8xf32> -> tensor<4x8xf32>
// Buckets of 0 MiB: one all-reduce per gradient, each as soon as it is ready.
// EACH-LABEL: func.func @grads
// EACH: %[[A:.*]] = nn.matmul
// EACH-NEXT: shard.all_reduce %[[A]]
// EACH: %[[B:.*]] = nn.reduce_sum
// EACH-NEXT: shard.all_reduce %[[B]]
// EACH: %[[C:.*]] = nn.matmul
// EACH-NEXT: shard.all_reduce %[[C]]
func.func @grads(%x: tensor<8x4xf32> {nn.sharding = [["dp"], []]},
                 %dy: tensor<8x4xf32> {nn.sharding = [["dp"], []]},
                 %dz: tensor<8x8xf32> {nn.sharding = [["dp"], []]},
                 %g1: tensor<4x4xf32>, %g2: tensor<4xf32>, %g3: tensor<4x8xf32>)
    -> (tensor<4x4xf32>, tensor<4xf32>, tensor<4x8xf32>) {
  %a = nn.matmul %x, %dy transpose_lhs {nn.loop_sharding = [[], [], ["dp"]]} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %b = nn.reduce_sum %dy dims = [0] {nn.loop_sharding = [["dp"], []]} : tensor<8x4xf32> -> tensor<4xf32>
  %c = nn.matmul %x, %dz transpose_lhs {nn.loop_sharding = [[], [], ["dp"]]} : (tensor<8x4xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %a1 = nn.accumulate %a outs(%g1) {nn.loop_sharding = [[], []]} : tensor<4x4xf32>
  %b1 = nn.accumulate %b outs(%g2) {nn.loop_sharding = [[]]} : tensor<4xf32>
  %c1 = nn.accumulate %c outs(%g3) {nn.loop_sharding = [[], []]} : tensor<4x8xf32>
  return %a1, %b1, %c1 : tensor<4x4xf32>, tensor<4xf32>, tensor<4x8xf32>
}

// Tests that gradients widened where the function returns them (bf16
// mixed precision's casts, here in the reverse order) are bucketed in the
// order the backward computes them, as in f32: each cast moves right after
// the value it widens, and the first two share a bucket.
// SMALL-LABEL: func.func @widened_grads
// SMALL: %[[A:.*]] = nn.matmul {{.*}} -> tensor<4x4xbf16>
// SMALL-NEXT: nn.cast %[[A]] {{.*}} to tensor<4x4xf32>
// SMALL-NEXT: %[[B:.*]] = nn.reduce_sum
// SMALL-NEXT: nn.cast %[[B]] {{.*}} to tensor<4xf32>
// SMALL: nn.concat {{.*}} -> tensor<20xf32>
// SMALL-NEXT: shard.all_reduce {{.*}} : tensor<20xf32> -> tensor<20xf32>
// SMALL: %[[C:.*]] = nn.matmul {{.*}} -> tensor<4x8xbf16>
// SMALL-NEXT: %[[CW:.*]] = nn.cast %[[C]]
// SMALL-NEXT: shard.all_reduce %[[CW]] {{.*}} : tensor<4x8xf32> -> tensor<4x8xf32>
func.func @widened_grads(%x: tensor<8x4xbf16> {nn.sharding = [["dp"], []]},
                         %dy: tensor<8x4xbf16> {nn.sharding = [["dp"], []]},
                         %dz: tensor<8x8xbf16> {nn.sharding = [["dp"], []]},
                         %g1: tensor<4x4xf32>, %g2: tensor<4xf32>, %g3: tensor<4x8xf32>)
    -> (tensor<4x4xf32>, tensor<4xf32>, tensor<4x8xf32>) {
  %a = nn.matmul %x, %dy transpose_lhs {nn.loop_sharding = [[], [], ["dp"]]} : (tensor<8x4xbf16>, tensor<8x4xbf16>) -> tensor<4x4xbf16>
  %b = nn.reduce_sum %dy dims = [0] {nn.loop_sharding = [["dp"], []]} : tensor<8x4xbf16> -> tensor<4xbf16>
  %c = nn.matmul %x, %dz transpose_lhs {nn.loop_sharding = [[], [], ["dp"]]} : (tensor<8x4xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
  %cw = nn.cast %c {nn.loop_sharding = [[], []]} : tensor<4x8xbf16> to tensor<4x8xf32>
  %bw = nn.cast %b {nn.loop_sharding = [[]]} : tensor<4xbf16> to tensor<4xf32>
  %aw = nn.cast %a {nn.loop_sharding = [[], []]} : tensor<4x4xbf16> to tensor<4x4xf32>
  %a1 = nn.accumulate %aw outs(%g1) {nn.loop_sharding = [[], []]} : tensor<4x4xf32>
  %b1 = nn.accumulate %bw outs(%g2) {nn.loop_sharding = [[]]} : tensor<4xf32>
  %c1 = nn.accumulate %cw outs(%g3) {nn.loop_sharding = [[], []]} : tensor<4x8xf32>
  return %a1, %b1, %c1 : tensor<4x4xf32>, tensor<4xf32>, tensor<4x8xf32>
}

// Tests a repeated layer's gradients (the stacked results of its layer
// function) are bucketed within the layer, each layer's bucket issued when
// its backward is done; the carried value (result #0) is not a gradient.
// FUSED-LABEL: func.func private @layer_grads
// FUSED: %[[DW:.*]] = nn.matmul {{.*}} -> tensor<4x4xf32>
// FUSED: %[[DB:.*]] = nn.reduce_sum
// FUSED: %[[CAT:.*]] = nn.concat {{.*}} -> tensor<20xf32>
// FUSED: shard.all_reduce %[[CAT]] on @mesh grid_axes = [0] : tensor<20xf32> -> tensor<20xf32>
// FUSED-NOT: shard.all_reduce
// FUSED: return
// EACH-LABEL: func.func private @layer_grads
// EACH-COUNT-2: shard.all_reduce
// EACH-NOT: shard.all_reduce
// EACH: return
func.func private @layer_grads(%x: tensor<8x4xf32> {nn.sharding = [["dp"], []]},
                               %dy: tensor<8x4xf32> {nn.sharding = [["dp"], []]})
    -> (tensor<8x4xf32> {nn.sharding = [["dp"], []]}, tensor<4x4xf32>, tensor<4xf32>) {
  %dw = nn.matmul %x, %dy transpose_lhs {nn.loop_sharding = [[], [], ["dp"]]} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %db = nn.reduce_sum %dy dims = [0] {nn.loop_sharding = [["dp"], []]} : tensor<8x4xf32> -> tensor<4xf32>
  return %dy, %dw, %db : tensor<8x4xf32>, tensor<4x4xf32>, tensor<4xf32>
}
func.func @repeated_grads(%x: tensor<8x4xf32> {nn.sharding = [["dp"], []]},
                          %dy: tensor<3x8x4xf32> {nn.sharding = [[], ["dp"], []]})
    -> (tensor<8x4xf32> {nn.sharding = [["dp"], []]}, tensor<3x4x4xf32>, tensor<3x4xf32>) {
  %c, %dw, %db = nn.repeat @layer_grads(%x) params(%dy) : (tensor<8x4xf32>, tensor<3x8x4xf32>) -> (tensor<8x4xf32>, tensor<3x4x4xf32>, tensor<3x4xf32>)
  return %c, %dw, %db : tensor<8x4xf32>, tensor<3x4x4xf32>, tensor<3x4xf32>
}
