// RUN: tessel-opt %s -tessel-propagate-sharding="mesh=tp=2" | FileCheck %s --check-prefix=TP2
// RUN: tessel-opt %s -tessel-propagate-sharding="mesh=tp=2" -tessel-partition | FileCheck %s --check-prefix=LOCAL
// RUN: tessel-opt %s -tessel-propagate-sharding="mesh=tp=4" | FileCheck %s --check-prefix=TP4
// RUN: tessel-opt %s -tessel-repeat-kv-heads="mesh=tp=4" -tessel-propagate-sharding="mesh=tp=4" -tessel-partition | FileCheck %s --check-prefix=REPEAT4

// Tests that grouped-query attention (4 query heads over 2 key/value heads)
// splits its query heads over tp=2 and its key/value heads alike (loop h
// reads key/value head h floordiv 2: blocks of 2 query heads hold whole
// groups), Megatron's split of the query groups; rope on the queries and
// the keys follows their heads. On tp=4 a block of 1 query head would cut
// a group: the heads stay whole (the projections gather instead).
// TP2: nn.rope %{{.*}} {nn.loop_sharding = {{\[}}[], [], ["tp"], []]} : tensor<2x8x4x4xf32>
// TP2: nn.rope %{{.*}} {nn.loop_sharding = {{\[}}[], [], ["tp"], []]} : tensor<2x8x2x4xf32>
// TP2: nn.attention {{.*}} {nn.loop_sharding = {{\[}}[], [], ["tp"], [], [], []]}
// LOCAL: nn.rope %{{.*}} : tensor<2x8x2x4xf32>
// LOCAL: nn.rope %{{.*}} : tensor<2x8x1x4xf32>
// LOCAL: nn.attention %{{.*}} causal : (tensor<2x8x2x4xf32>, tensor<2x8x1x4xf32>, tensor<2x8x1x4xf32>) -> tensor<2x8x2x4xf32>
// TP4: nn.attention {{.*}} {nn.loop_sharding = {{\[}}[], [], [], [], [], []]}
// With tessel-repeat-kv-heads (tessel-compile's pipeline) each kv head
// is repeated to one per rank first: every rank runs its own query head
// against its repeat of the kv head, and gathers nothing for the queries.
// REPEAT4-NOT: shard.all_gather %{{.*}} : tensor<2x8x4xf32>
// REPEAT4: nn.attention %{{.*}} causal : (tensor<2x8x1x4xf32>, tensor<2x8x1x4xf32>, tensor<2x8x1x4xf32>) -> tensor<2x8x1x4xf32>
// REPEAT4-NOT: shard.all_slice
// REPEAT4: return
func.func @gqa(%x: tensor<2x8x16xf32> {nn.input, nn.axes = ["batch", "seq", "embed"]},
               %wq: tensor<16x16xf32> {nn.param = "wq", nn.init = #nn.init<zeros>, nn.axes = ["embed", "heads"]},
               %wk: tensor<16x8xf32> {nn.param = "wk", nn.init = #nn.init<zeros>, nn.axes = ["embed", "heads"]},
               %wv: tensor<16x8xf32> {nn.param = "wv", nn.init = #nn.init<zeros>, nn.axes = ["embed", "heads"]})
    -> tensor<f32> {
  %q0 = nn.matmul %x, %wq : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
  %q1 = nn.reshape %q0 : tensor<2x8x16xf32> -> tensor<2x8x4x4xf32>
  %q = nn.rope %q1 : tensor<2x8x4x4xf32>
  %k0 = nn.matmul %x, %wk : (tensor<2x8x16xf32>, tensor<16x8xf32>) -> tensor<2x8x8xf32>
  %k1 = nn.reshape %k0 : tensor<2x8x8xf32> -> tensor<2x8x2x4xf32>
  %k = nn.rope %k1 : tensor<2x8x2x4xf32>
  %v0 = nn.matmul %x, %wv : (tensor<2x8x16xf32>, tensor<16x8xf32>) -> tensor<2x8x8xf32>
  %v = nn.reshape %v0 : tensor<2x8x8xf32> -> tensor<2x8x2x4xf32>
  %a = nn.attention %q, %k, %v causal : (tensor<2x8x4x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>) -> tensor<2x8x4x4xf32>
  %l = nn.reduce_sum %a dims = [0, 1, 2, 3] : tensor<2x8x4x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
