// RUN: tessel-opt %s -tessel-autodiff -tessel-propagate-sharding="mesh=dp=2,cp=2" -tessel-partition | FileCheck %s
// RUN: tessel-opt %s -tessel-autodiff -tessel-propagate-sharding="mesh=dp=2,cp=2" -tessel-partition -tessel-plan-memory -tessel-lower-to-runtime -cse | FileCheck %s --check-prefix=LOWER
// RUN: tessel-opt %s -tessel-autodiff -tessel-propagate-sharding="mesh=tp=2" -tessel-partition | FileCheck %s --check-prefix=NOCP
// RUN: tessel-opt %s -tessel-autodiff -tessel-propagate-sharding="mesh=dp=2,cp=2" | FileCheck %s --check-prefix=ROWS

// Tests context parallelism (the default rule seq=cp): every activation
// keeps its block of the sequence, the rope turns its block from the
// block's first position and causal attention runs the block's queries
// against the keys and values gathered over cp (Llama 3's all-gather
// context parallelism); both know their block by block_axes (cp is grid
// axis 1). The backward's attention_grad leaves dk and dv as partial sums
// of the rank's queries.
// CHECK-LABEL: func.func @loss(
// CHECK-SAME: tensor<1x4x16xf32> {{.*}}nn.sharding = {{\[}}["dp"], ["cp"], []]
// CHECK: %[[Q:.*]] = nn.rope %{{.*}} {block_axes = array<i16: 1>} : tensor<1x4x4x4xf32>
// CHECK: %[[K:.*]] = nn.rope %{{.*}} {block_axes = array<i16: 1>} : tensor<1x4x2x4xf32>
// CHECK: %[[KG:.*]] = shard.all_gather %[[K]] on @mesh grid_axes = [1] gather_axis = 1 : tensor<1x4x2x4xf32> -> tensor<1x8x2x4xf32>
// CHECK: %[[VG:.*]] = shard.all_gather %{{.*}} on @mesh grid_axes = [1] gather_axis = 1 : tensor<1x4x2x4xf32> -> tensor<1x8x2x4xf32>
// CHECK: nn.attention %[[Q]], %[[KG]], %[[VG]] causal {block_axes = array<i16: 1>} : (tensor<1x4x4x4xf32>, tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>) -> tensor<1x4x4x4xf32>
// CHECK: shard.all_reduce %{{.*}} on @mesh grid_axes = [0, 1] : tensor<f32> -> tensor<f32>
// CHECK-LABEL: func.func @loss_backward(
// CHECK: nn.attention_grad {{.*}} causal {block_axes = array<i16: 1>} : (tensor<1x4x4x4xf32>, tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>, tensor<1x4x4x4xf32>, tensor<1x4x4xf32>, tensor<1x4x4x4xf32>) -> (tensor<1x4x4x4xf32>, tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>)
// Each weight's gradient sums the rank's own rows (RowContractions.h): dv
// and dk reduce-scattered into the sequence's blocks, then one GEMM of the
// rank's flattened rows ([B·S/n, K]ᵀ · [B·S/n, N], the summed batch
// flattened by the partitioner), and one all-reduce over dp and cp for all
// three; no activation is gathered for them.
// CHECK-NOT: shard.all_gather %arg0
// CHECK: shard.reduce_scatter %{{.*}} on @mesh grid_axes = [1] scatter_axis = 1 : tensor<1x8x2x4xf32> -> tensor<1x4x2x4xf32>
// CHECK: nn.reshape %arg0 : tensor<1x4x16xf32> -> tensor<4x16xf32>
// CHECK: nn.matmul %{{.*}}, %{{.*}} transpose_lhs : (tensor<4x16xf32>, tensor<4x8xf32>) -> tensor<16x8xf32>
// CHECK: shard.reduce_scatter %{{.*}} on @mesh grid_axes = [1] scatter_axis = 1 : tensor<1x8x2x4xf32> -> tensor<1x4x2x4xf32>
// CHECK: nn.rope %{{.*}} inverse {block_axes = array<i16: 1>} : tensor<1x4x2x4xf32>
// CHECK: nn.rope %{{.*}} inverse {block_axes = array<i16: 1>} : tensor<1x4x4x4xf32>
// CHECK: nn.matmul %{{.*}}, %{{.*}} transpose_lhs : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<16x16xf32>
// CHECK-NOT: sum_batch
// CHECK-NOT: shard.all_gather
// CHECK: shard.all_reduce %{{.*}} on @mesh grid_axes = [0, 1] : tensor<512xf32> -> tensor<512xf32>

// The local ops call the runtime's block entries (ABI 31) with the rank's
// first position, its index over cp (mask 2) times the block's length.
// Propagation rewrote each weight's gradient over the rows' own
// dimensions (a summed batch), whose sample loop splits over dp and whose
// sequence (its K) over cp: both sums.
// ROWS-LABEL: func.func @loss_backward(
// ROWS-COUNT-2: nn.matmul %arg0, %{{.*}} transpose_lhs sum_batch {nn.loop_sharding = {{\[}}["dp"], [], [], ["cp"]]} : (tensor<2x8x16xf32>, tensor<2x8x8xf32>) -> tensor<16x8xf32>
// ROWS: nn.matmul %arg0, %{{.*}} transpose_lhs sum_batch {nn.loop_sharding = {{\[}}["dp"], [], [], ["cp"]]} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<16x16xf32>

// LOWER-LABEL: llvm.func @tessel_fn_loss(
// LOWER: %[[MASK:.*]] = llvm.mlir.constant(2 : i32) : i32
// LOWER: %[[INDEX:.*]] = llvm.call @tessel_group_index(%arg0, %[[MASK]])
// LOWER: %[[FIRST:.*]] = llvm.mul %[[INDEX]], %{{.*}} : i64
// LOWER: llvm.call @tessel_rope_block({{.*}}, %[[FIRST]]) :
// LOWER: llvm.call @tessel_attention_block({{.*}}) :
// LOWER-LABEL: llvm.func @tessel_fn_loss_backward(
// LOWER: llvm.call @tessel_attention_grad_block({{.*}}) :

// Without a cp axis, nothing is a block: the mesh's tp splits the heads.
// NOCP-NOT: block_axes
// NOCP: nn.attention %{{.*}} causal : (tensor<2x8x2x4xf32>, tensor<2x8x1x4xf32>, tensor<2x8x1x4xf32>) -> tensor<2x8x2x4xf32>
// NOCP-NOT: block_axes
func.func @loss(%x: tensor<2x8x16xf32> {nn.input, nn.axes = ["batch", "seq", "embed"]},
               %wq: tensor<16x16xf32> {nn.param = "wq", nn.init = #nn.init<normal, 0.02>, nn.axes = ["embed", "heads"]},
               %wk: tensor<16x8xf32> {nn.param = "wk", nn.init = #nn.init<normal, 0.02>, nn.axes = ["embed", "heads"]},
               %wv: tensor<16x8xf32> {nn.param = "wv", nn.init = #nn.init<normal, 0.02>, nn.axes = ["embed", "heads"]})
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
