// RUN: tessel-opt %s -tessel-plan-memory -tessel-lower-to-runtime -cse --split-input-file | FileCheck %s

// (-cse folds the equal constants each call makes, so that one name stands
// for each value below.)

// Tests that an all-reduce becomes tessel_all_reduce(ctx, mask, dtype, in,
// out, count, kind): over both axes (mask 3) a sum (0) in place, its input
// dead afterwards; a max (2) over tp (mask 2) into a buffer of its own, its
// input still read; an average (TESSEL_REDUCE_MEAN, 1) of an argument over
// dp (mask 1) straight into the result it returns. The grid is gone.
// CHECK-NOT: shard.grid
// CHECK-LABEL: llvm.func @tessel_fn_all_reduce
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[SCRATCH:[^:]*]]: !llvm.ptr, %[[A:[^:]*]]: !llvm.ptr, %[[OUT0:[^:]*]]: !llvm.ptr, %[[OUT1:[^:]*]]: !llvm.ptr)
// CHECK: %[[ONE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK: %[[F32:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK: %[[COUNT:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK: llvm.call @tessel_unary(%[[CTX]], %{{.*}}, %[[F32]], %[[A]], %[[SCRATCH]], %[[COUNT]])
// CHECK: %[[BOTH:.*]] = llvm.mlir.constant(3 : i32) : i32
// CHECK: llvm.call @tessel_all_reduce(%[[CTX]], %[[BOTH]], %[[F32]], %[[SCRATCH]], %[[SCRATCH]], %[[COUNT]], %[[F32]])
// CHECK: %[[T:.*]] = llvm.getelementptr %[[SCRATCH]][%{{.*}}]
// CHECK: llvm.call @tessel_unary(%[[CTX]], %{{.*}}, %[[F32]], %[[SCRATCH]], %[[T]], %[[COUNT]])
// CHECK: %[[TWO:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK: llvm.call @tessel_all_reduce(%[[CTX]], %[[TWO]], %[[F32]], %[[T]], %[[SCRATCH]], %[[COUNT]], %[[TWO]])
// CHECK: llvm.call @tessel_binary(%[[CTX]], %{{.*}}, %[[F32]], %[[T]], %[[SCRATCH]], %[[OUT0]], %[[COUNT]])
// CHECK: llvm.call @tessel_all_reduce(%[[CTX]], %[[ONE]], %[[F32]], %[[A]], %[[OUT1]], %[[COUNT]], %[[ONE]])
// CHECK: llvm.func @tessel_all_reduce(!llvm.ptr, i32, i32, !llvm.ptr, !llvm.ptr, i64, i32)
shard.grid @mesh(shape = 2x2) {nn.axis_names = ["dp", "tp"]}
func.func @all_reduce(%a: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %0 = nn.exp %a : tensor<4x8xf32>
  %1 = shard.all_reduce %0 on @mesh grid_axes = [0, 1] : tensor<4x8xf32> -> tensor<4x8xf32>
  %2 = nn.tanh %1 : tensor<4x8xf32>
  %3 = shard.all_reduce %2 on @mesh grid_axes = [1] reduction = max : tensor<4x8xf32> -> tensor<4x8xf32>
  %4 = nn.add %2, %3 : tensor<4x8xf32>
  %5 = shard.all_reduce %a on @mesh grid_axes = [0] reduction = average : tensor<4x8xf32> -> tensor<4x8xf32>
  return %4, %5 : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests that the collectives with a tensor dimension pass the local input's
// rank and shape and the dimension: all_gather (f16, code 1) along 1;
// reduce_scatter (bf16, code 2) along 0 with max; all_to_all (f64, code 3)
// splitting 0 and concatenating 1; all_slice (no communication) along 1.
// Every one runs over tp, mask 2.
// CHECK-DAG: llvm.mlir.global private constant @[[SHAPE_A:__tessel_i64s_[0-9]+]](dense<[4, 8]> : tensor<2xi64>)
// CHECK-DAG: llvm.mlir.global private constant @[[SHAPE_B:__tessel_i64s_[0-9]+]](dense<[8, 6]> : tensor<2xi64>)
// CHECK-DAG: llvm.mlir.global private constant @[[SHAPE_C:__tessel_i64s_[0-9]+]](dense<[8, 4, 6]> : tensor<3xi64>)
// CHECK-LABEL: llvm.func @tessel_fn_dims
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[A:[^:]*]]: !llvm.ptr, %[[B:[^:]*]]: !llvm.ptr, %[[C:[^:]*]]: !llvm.ptr, %[[OUT0:[^:]*]]: !llvm.ptr, %[[OUT1:[^:]*]]: !llvm.ptr, %[[OUT2:[^:]*]]: !llvm.ptr, %[[OUT3:[^:]*]]: !llvm.ptr)
// CHECK: %[[TWO:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK: %[[ONE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK: %[[PA:.*]] = llvm.mlir.addressof @[[SHAPE_A]]
// CHECK: llvm.call @tessel_all_gather(%[[CTX]], %[[TWO]], %[[ONE]], %[[A]], %[[OUT0]], %[[TWO]], %[[PA]], %[[ONE]])
// CHECK: %[[ZERO:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK: %[[PB:.*]] = llvm.mlir.addressof @[[SHAPE_B]]
// CHECK: llvm.call @tessel_reduce_scatter(%[[CTX]], %[[TWO]], %[[TWO]], %[[B]], %[[OUT1]], %[[TWO]], %[[PB]], %[[ZERO]], %[[TWO]])
// CHECK: %[[THREE:.*]] = llvm.mlir.constant(3 : i32) : i32
// CHECK: %[[PC:.*]] = llvm.mlir.addressof @[[SHAPE_C]]
// CHECK: llvm.call @tessel_all_to_all(%[[CTX]], %[[TWO]], %[[THREE]], %[[C]], %[[OUT2]], %[[THREE]], %[[PC]], %[[ZERO]], %[[ONE]])
// CHECK: llvm.call @tessel_all_slice(%[[CTX]], %[[TWO]], %[[ONE]], %[[A]], %[[OUT3]], %[[TWO]], %[[PA]], %[[ONE]])
// CHECK-DAG: llvm.func @tessel_all_gather(!llvm.ptr, i32, i32, !llvm.ptr, !llvm.ptr, i32, !llvm.ptr, i32)
// CHECK-DAG: llvm.func @tessel_reduce_scatter(!llvm.ptr, i32, i32, !llvm.ptr, !llvm.ptr, i32, !llvm.ptr, i32, i32)
// CHECK-DAG: llvm.func @tessel_all_to_all(!llvm.ptr, i32, i32, !llvm.ptr, !llvm.ptr, i32, !llvm.ptr, i32, i32)
// CHECK-DAG: llvm.func @tessel_all_slice(!llvm.ptr, i32, i32, !llvm.ptr, !llvm.ptr, i32, !llvm.ptr, i32)
shard.grid @mesh(shape = 2x4) {nn.axis_names = ["dp", "tp"]}
func.func @dims(%a: tensor<4x8xf16>, %b: tensor<8x6xbf16>, %c: tensor<8x4x6xf64>) -> (tensor<4x32xf16>, tensor<2x6xbf16>, tensor<2x16x6xf64>, tensor<4x2xf16>) {
  %0 = shard.all_gather %a on @mesh grid_axes = [1] gather_axis = 1 : tensor<4x8xf16> -> tensor<4x32xf16>
  %1 = shard.reduce_scatter %b on @mesh grid_axes = [1] reduction = max scatter_axis = 0 : tensor<8x6xbf16> -> tensor<2x6xbf16>
  %2 = shard.all_to_all %c on @mesh grid_axes = [1] split_axis = 0 concat_axis = 1 : tensor<8x4x6xf64> -> tensor<2x16x6xf64>
  %3 = shard.all_slice %a on @mesh grid_axes = [1] slice_axis = 1 : tensor<4x8xf16> -> tensor<4x2xf16>
  return %0, %1, %2, %3 : tensor<4x32xf16>, tensor<2x6xbf16>, tensor<2x16x6xf64>, tensor<4x2xf16>
}

// -----

// Tests that a gather over both axes (mask 3, a group of 4) concatenates
// along its dimension the blocks of the ranks in axis order.
// CHECK-LABEL: llvm.func @tessel_fn_two_axes
// CHECK: %[[BOTH:.*]] = llvm.mlir.constant(3 : i32) : i32
// CHECK: llvm.call @tessel_all_gather(%{{[^,]*}}, %[[BOTH]],
shard.grid @mesh(shape = 2x2) {nn.axis_names = ["dp", "tp"]}
func.func @two_axes(%a: tensor<2x3xf32>) -> tensor<8x3xf32> {
  %0 = shard.all_gather %a on @mesh grid_axes = [0, 1] gather_axis = 0 : tensor<2x3xf32> -> tensor<8x3xf32>
  return %0 : tensor<8x3xf32>
}

// -----

// Tests that a collective in a repeated layer is lowered in the layer's
// function (the loop calls it once per layer): its input, a value of the
// layer, sums in place in the layer's scratch (over tp, the third axis:
// mask 4).
// CHECK-LABEL: llvm.func @tessel_fn_layer
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[SCRATCH:[^:]*]]: !llvm.ptr,
// CHECK: llvm.call @tessel_binary(%[[CTX]], {{.*}}, %[[SCRATCH]], %{{.*}})
// CHECK: %[[TP:.*]] = llvm.mlir.constant(4 : i32) : i32
// CHECK: llvm.call @tessel_all_reduce(%[[CTX]], %[[TP]], %{{[^,]*}}, %[[SCRATCH]], %[[SCRATCH]],
// CHECK-LABEL: llvm.func @tessel_fn_stack
// CHECK: scf.for
// CHECK: llvm.call @tessel_fn_layer(
shard.grid @mesh(shape = 2x1x2) {nn.axis_names = ["dp", "pp", "tp"]}
func.func private @layer(%h: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  %0 = nn.mul %h, %w : tensor<4xf32>
  %1 = shard.all_reduce %0 on @mesh grid_axes = [2] : tensor<4xf32> -> tensor<4xf32>
  %2 = nn.add %1, %h : tensor<4xf32>
  return %2 : tensor<4xf32>
}
func.func @stack(%h: tensor<4xf32>, %w: tensor<3x4xf32>) -> tensor<4xf32> {
  %0 = nn.repeat @layer(%h) params(%w) : (tensor<4xf32>, tensor<3x4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that a collective over no axes (a group of one: a local copy) passes
// the empty mask 0.
// CHECK-LABEL: llvm.func @tessel_fn_no_axes
// CHECK: %[[ZERO:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK: llvm.call @tessel_all_gather(%{{[^,]*}}, %[[ZERO]], %[[ZERO]],
shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
func.func @no_axes(%a: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = shard.all_gather %a on @mesh gather_axis = 0 : tensor<2x3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// Tests the vocabulary blocks: an op with block_axes asks the runtime for
// the rank's group index and group size over those axes (mask 2: tp) and
// passes the block's first row or class (index · local size) and the whole
// dimension (size · local size); without block_axes, 0 and the local size.
// CHECK-LABEL: llvm.func @tessel_fn_vocabulary_blocks
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr
// CHECK: %[[TP:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK: %[[G:.*]] = llvm.call @tessel_group_index(%[[CTX]], %[[TP]]) : (!llvm.ptr, i32) -> i64
// CHECK: %[[N:.*]] = llvm.call @tessel_group_size(%[[CTX]], %[[TP]]) : (!llvm.ptr, i32) -> i64
// CHECK: %[[ROWS:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK: %[[OFF:.*]] = llvm.mul %[[G]], %[[ROWS]] : i64
// CHECK: %[[ALL:.*]] = llvm.mul %[[N]], %[[ROWS]] : i64
// CHECK: llvm.call @tessel_embedding(%[[CTX]], {{.*}}, %[[ROWS]], %{{.*}}, %[[OFF]], %[[ALL]])
// CHECK: %[[G2:.*]] = llvm.call @tessel_group_index(%[[CTX]], %[[TP]])
// CHECK: %[[N2:.*]] = llvm.call @tessel_group_size(%[[CTX]], %[[TP]])
// CHECK: %[[OFF2:.*]] = llvm.mul %[[G2]], %[[ROWS]] : i64
// CHECK: %[[ALL2:.*]] = llvm.mul %[[N2]], %[[ROWS]] : i64
// CHECK: llvm.call @tessel_label_logit(%[[CTX]], {{.*}}, %[[ROWS]], %[[OFF2]], %[[ALL2]])
// CHECK: llvm.call @tessel_sub_label(%[[CTX]], {{.*}}, %[[ROWS]], %{{.*}}, %{{.*}})
// CHECK: %[[ZERO:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK: llvm.call @tessel_embedding(%[[CTX]], {{.*}}, %[[ROWS]], %{{.*}}, %[[ZERO]], %[[ROWS]])
shard.grid @mesh(shape = 2x2) {nn.axis_names = ["dp", "tp"]}
func.func @vocabulary_blocks(%t: tensor<8x4xf32>, %ids: tensor<6xi32>, %z: tensor<6x8xf32>)
    -> (tensor<6x4xf32>, tensor<6xf32>, tensor<6x8xf32>, tensor<6x4xf32>) {
  %e = nn.embedding %t, %ids {block_axes = array<i16: 1>} : (tensor<8x4xf32>, tensor<6xi32>) -> tensor<6x4xf32>
  %p = nn.label_logit %z, %ids {block_axes = array<i16: 1>} : (tensor<6x8xf32>, tensor<6xi32>) -> tensor<6xf32>
  %d = nn.sub_label %z, %ids, %p {block_axes = array<i16: 1>} : (tensor<6x8xf32>, tensor<6xi32>, tensor<6xf32>) -> tensor<6x8xf32>
  %w = nn.embedding %t, %ids : (tensor<8x4xf32>, tensor<6xi32>) -> tensor<6x4xf32>
  return %e, %p, %d, %w : tensor<6x4xf32>, tensor<6xf32>, tensor<6x8xf32>, tensor<6x4xf32>
}

// -----

// Tests the fused vocabulary-parallel loss's calls: the block's place
// among the classes as the label kernels', then the cap (0: none) and, for
// the gradient, the label smoothing.
// CHECK-LABEL: llvm.func @tessel_fn_vocab_loss
// CHECK: %[[G:.*]] = llvm.call @tessel_group_index
// CHECK: %[[N:.*]] = llvm.call @tessel_group_size
// CHECK: %[[C:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK: %[[OFF:.*]] = llvm.mul %[[G]], %[[C]] : i64
// CHECK: %[[ALL:.*]] = llvm.mul %[[N]], %[[C]] : i64
// CHECK: %[[CAP:.*]] = llvm.mlir.constant(3.000000e+01 : f64) : f64
// CHECK: llvm.call @tessel_vocab_loss_stats({{.*}}, %[[C]], %[[OFF]], %[[ALL]], %[[CAP]])
// CHECK: %[[E:.*]] = llvm.mlir.constant(1.000000e-01 : f64) : f64
// CHECK: llvm.call @tessel_vocab_loss_grad({{.*}}, %[[C]], %{{.*}}, %{{.*}}, %[[CAP]], %[[E]])
shard.grid @mesh(shape = 2x2) {nn.axis_names = ["dp", "tp"]}
func.func @vocab_loss(%z: tensor<6x8xf32>, %y: tensor<6xi32>, %g: tensor<6xf32>) -> (tensor<6xf32>, tensor<6x8xf32>) {
  %m, %s, %zy, %zs = nn.vocab_loss_stats %z, %y {block_axes = array<i16: 1>, logit_softcap = 30.0 : f64} : (tensor<6x8xf32>, tensor<6xi32>) -> (tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>)
  %dz = nn.vocab_loss_grad %z, %y, %m, %s, %g {block_axes = array<i16: 1>, label_smoothing = 0.1 : f64, logit_softcap = 30.0 : f64} : (tensor<6x8xf32>, tensor<6xi32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<6x8xf32>
  return %zy, %dz : tensor<6xf32>, tensor<6x8xf32>
}

// -----

// Tests that bf16 logits with f32 statistics call the _f32 kernels (ABI 30).
// CHECK-LABEL: llvm.func @tessel_fn_vocab_loss_f32_stats
// CHECK: llvm.call @tessel_vocab_loss_stats_f32(
// CHECK: llvm.call @tessel_vocab_loss_grad_f32(
shard.grid @mesh(shape = 2) {nn.axis_names = ["tp"]}
func.func @vocab_loss_f32_stats(%z: tensor<6x8xbf16>, %y: tensor<6xi32>, %g: tensor<6xf32>) -> (tensor<6xf32>, tensor<6x8xbf16>) {
  %m, %s, %zy, %zs = nn.vocab_loss_stats %z, %y {block_axes = array<i16: 0>} : (tensor<6x8xbf16>, tensor<6xi32>) -> (tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>)
  %dz = nn.vocab_loss_grad %z, %y, %m, %s, %g {block_axes = array<i16: 0>} : (tensor<6x8xbf16>, tensor<6xi32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<6x8xbf16>
  return %zy, %dz : tensor<6xf32>, tensor<6x8xbf16>
}

// -----

// Tests a rank's block of a split dropout (the context's step read as the
// kernel runs: the _current entry): its first element in the whole
// [8, 6] tensor is microbatch · 48 + (dp index) · 4 · 6 + (tp index) · 3 · 1,
// and the kernel walks the [4, 3] block with the whole tensor's strides.
// CHECK-LABEL: llvm.func @tessel_fn_dropout_block
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr
// CHECK-NOT: tessel_get_step
// CHECK: %[[MB:.*]] = llvm.call @tessel_get_microbatch(%[[CTX]])
// CHECK: %[[N:.*]] = llvm.mlir.constant(48 : i64) : i64
// CHECK: %[[F0:.*]] = llvm.mul %[[MB]], %[[N]] : i64
// CHECK: %[[DP:.*]] = llvm.call @tessel_group_index(%[[CTX]], %{{.*}}) : (!llvm.ptr, i32) -> i64
// CHECK: %[[ROWS:.*]] = llvm.mlir.constant(24 : i64) : i64
// CHECK: %[[O0:.*]] = llvm.mul %[[DP]], %[[ROWS]] : i64
// CHECK: %[[F1:.*]] = llvm.add %[[F0]], %[[O0]] : i64
// CHECK: %[[TP:.*]] = llvm.call @tessel_group_index(%[[CTX]], %{{.*}}) : (!llvm.ptr, i32) -> i64
// CHECK: %[[COLS:.*]] = llvm.mlir.constant(3 : i64) : i64
// CHECK: %[[O1:.*]] = llvm.mul %[[TP]], %[[COLS]] : i64
// CHECK: %[[F2:.*]] = llvm.add %[[F1]], %[[O1]] : i64
// CHECK: llvm.call @tessel_dropout_block_current(%[[CTX]], {{.*}}, %[[F2]])
shard.grid @mesh(shape = 2x2) {nn.axis_names = ["dp", "tp"]}
func.func @dropout_block(%x: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %y = nn.dropout %x rate = 0.5 seed = 3 {global_shape = array<i64: 8, 6>, split_axes = [array<i16: 0>, array<i16: 1>]} : tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}

// -----

// Tests that an asynchronous collective calls the start of its kind and its
// wait tessel_comm_wait(ctx, out) on the memory it is gathered into, with
// the kernel in between.
// CHECK-LABEL: llvm.func @tessel_fn_async_gather
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[SCRATCH:[^:]*]]: !llvm.ptr, %[[A:[^:]*]]: !llvm.ptr, %[[OUT0:[^:]*]]: !llvm.ptr
// CHECK: llvm.call @tessel_all_gather_start(%[[CTX]], %{{.*}}, %{{.*}}, %[[SCRATCH]], %[[OUT0]],
// CHECK: llvm.call @tessel_unary(
// CHECK: llvm.call @tessel_comm_wait(%[[CTX]], %[[OUT0]])
// CHECK: llvm.func @tessel_all_gather_start(!llvm.ptr, i32, i32, !llvm.ptr, !llvm.ptr, i32, !llvm.ptr, i32)
// CHECK: llvm.func @tessel_comm_wait(!llvm.ptr, !llvm.ptr)
shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
func.func @async_gather(%x: tensor<16xf32>) -> (tensor<32xf32>, tensor<16xf32>) {
  %a = nn.exp %x : tensor<16xf32>
  %g = shard.all_gather %a on @mesh grid_axes = [0] gather_axis = 0 {nn.async} : tensor<16xf32> -> tensor<32xf32>
  %b = nn.tanh %x : tensor<16xf32>
  %w = nn.wait %g : tensor<32xf32>
  return %w, %b : tensor<32xf32>, tensor<16xf32>
}

// -----

// Tests that a repeat with a prefetch runs it for layer 0 into slot 0
// (scratch + 384, + 640) before its loop, and in iteration i for layer
// i + 1 (while i < L - 1) into the other slot, before calling the layer on
// the slot of parity i with the prefetched values after its slices.
// CHECK-LABEL: llvm.func @tessel_fn_stack
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[SCRATCH:[^:]*]]: !llvm.ptr, %[[H:[^:]*]]: !llvm.ptr, %[[W:[^:]*]]: !llvm.ptr, %[[B:[^:]*]]: !llvm.ptr
// CHECK: llvm.mlir.constant(384 : i64)
// CHECK: llvm.call @tessel_fn_layer_prefetch(%[[CTX]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}})
// CHECK: scf.for %[[I:[^ ]*]] =
// CHECK: %[[MORE:.*]] = arith.cmpi slt, %[[I]]
// CHECK: scf.if %[[MORE]] {
// CHECK: arith.addi %[[I]]
// CHECK: llvm.call @tessel_fn_layer_prefetch(
// CHECK: }
// CHECK: llvm.call @tessel_fn_layer(%[[CTX]],
shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
func.func private @layer(%h: tensor<4x8xf32>, %w: tensor<32xf32>, %b: tensor<4xf32>,
                         %gw: tensor<64xf32> {nn.prefetched}, %gb: tensor<8xf32> {nn.prefetched}) -> tensor<4x8xf32> {
  %e = nn.exp %h : tensor<4x8xf32>
  %1 = nn.wait %gw : tensor<64xf32>
  %2 = nn.reshape %1 : tensor<64xf32> -> tensor<8x8xf32>
  %3 = nn.matmul %e, %2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %4 = nn.wait %gb : tensor<8xf32>
  %5 = nn.broadcast %4 dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %6 = nn.add %3, %5 : tensor<4x8xf32>
  return %6 : tensor<4x8xf32>
}
func.func private @layer_prefetch(%w: tensor<32xf32>, %b: tensor<4xf32>) -> (tensor<64xf32>, tensor<8xf32>) attributes {nn.prefetch} {
  %g = shard.all_gather %w on @mesh grid_axes = [0] gather_axis = 0 {nn.async} : tensor<32xf32> -> tensor<64xf32>
  %gb = shard.all_gather %b on @mesh grid_axes = [0] gather_axis = 0 {nn.async} : tensor<4xf32> -> tensor<8xf32>
  return %g, %gb : tensor<64xf32>, tensor<8xf32>
}
func.func @stack(%h: tensor<4x8xf32>, %w: tensor<3x32xf32>, %b: tensor<3x4xf32>) -> tensor<4x8xf32> {
  %0 = nn.repeat @layer(%h) params(%w, %b) prefetch @layer_prefetch : (tensor<4x8xf32>, tensor<3x32xf32>, tensor<3x4xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that a repeat with a finish gives iteration i's in-flight results
// the slot of parity i (scratch + 128 or + 448, after the carried copy: the
// layer and its finish need no scratch of their own, so slot 0 starts
// where their empty scratch does), runs the finish
// for the previous layer (layer + 1, reversed) on the other slot after the
// layer call from the second iteration on, and finishes the last layer
// (layer 0) from slot 0 (iteration 2) after the loop. The layer computes
// its bucket's gradients straight into the slot it returns in flight (the
// weight gradient's GEMM at its start, the bias gradient's sum 256 bytes
// in: no scratch, no copy) and all-reduces it there in place; the finish
// reads the gradients where the slot holds them (its slices are views) and
// copies them into its results.
// CHECK-LABEL: llvm.func @tessel_fn_grad_layer(
// CHECK-SAME: %[[CTX:[^:]*]]: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[H:[^:]*]]: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[X:[^:]*]]: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[SLOT:[^:]*]]: !llvm.ptr)
// CHECK: llvm.call @tessel_matmul(%[[CTX]], %{{.*}}, %[[X]], %[[H]], %[[SLOT]],
// CHECK: %[[AT:.*]] = llvm.mlir.constant(256 : i64)
// CHECK-NEXT: %[[BIAS:.*]] = llvm.getelementptr %[[SLOT]][%[[AT]]]
// CHECK: llvm.call @tessel_reduce(%[[CTX]], %{{.*}}, %{{.*}}, %[[H]], %[[BIAS]],
// CHECK-NOT: tessel_strided_copy
// CHECK: llvm.call @tessel_all_reduce_start(%[[CTX]], %{{.*}}, %{{.*}}, %[[SLOT]], %[[SLOT]],
// CHECK-NOT: tessel_strided_copy
// CHECK: llvm.return
// CHECK-LABEL: llvm.func @tessel_fn_grad_layer_finish(
// CHECK-SAME: %[[FCTX:[^:]*]]: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[FSLOT:[^:]*]]: !llvm.ptr, %[[GW:[^:]*]]: !llvm.ptr, %[[GB:[^:]*]]: !llvm.ptr)
// CHECK: llvm.call @tessel_comm_wait
// CHECK: %[[AT:.*]] = llvm.mlir.constant(256 : i64)
// CHECK-NEXT: %[[BIAS:.*]] = llvm.getelementptr %[[FSLOT]][%[[AT]]]
// CHECK-NOT: tessel_strided_copy
// CHECK: llvm.call @tessel_copy(%[[FCTX]], %[[GW]], %[[FSLOT]],
// CHECK: llvm.call @tessel_copy(%[[FCTX]], %[[GB]], %[[BIAS]],
// CHECK-LABEL: llvm.func @tessel_fn_backward
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[SCRATCH:[^:]*]]: !llvm.ptr,
// CHECK: llvm.mlir.constant(128 : i64)
// CHECK-NEXT: %[[LS:.*]] = llvm.getelementptr %[[SCRATCH]]
// CHECK: llvm.mlir.constant(448 : i64)
// CHECK-NEXT: %[[SLOT1:.*]] = llvm.getelementptr %[[SCRATCH]]
// CHECK: scf.for %[[I:[^ ]*]] =
// CHECK: %[[PARITY:.*]] = arith.remsi %[[I]],
// CHECK-NEXT: %[[EVEN:.*]] = arith.cmpi eq, %[[PARITY]]
// CHECK: %[[MINE:.*]] = llvm.select %[[EVEN]], %[[LS]], %[[SLOT1]]
// CHECK: llvm.call @tessel_fn_grad_layer(%[[CTX]], %[[LS]], {{.*}}, %[[MINE]])
// CHECK: %[[PREV:.*]] = arith.cmpi sgt, %[[I]]
// CHECK: scf.if %[[PREV]] {
// CHECK: arith.addi
// CHECK: %[[OTHER:.*]] = llvm.select %[[EVEN]], %[[SLOT1]], %[[LS]]
// CHECK: llvm.call @tessel_fn_grad_layer_finish(%[[CTX]], %[[LS]], %[[OTHER]],
// CHECK: }
// CHECK: scf.yield
// CHECK: llvm.call @tessel_fn_grad_layer_finish(%[[CTX]], %[[LS]], %[[LS]],
// CHECK-NEXT: llvm.return
shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
func.func private @grad_layer(%arg0: tensor<4x8xf32>, %arg1: tensor<8x8xf32>, %arg2: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<72xf32> {nn.in_flight}) {
  %0 = nn.matmul %arg2, %arg0 transpose_lhs : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %1 = nn.reduce_sum %arg0 dims = [0] : tensor<4x8xf32> -> tensor<8xf32>
  %2 = nn.reshape %0 : tensor<8x8xf32> -> tensor<64xf32>
  %3 = nn.concat %2, %1 dim = 0 : (tensor<64xf32>, tensor<8xf32>) -> tensor<72xf32>
  %all_reduce = shard.all_reduce %3 on @mesh grid_axes = [0] {nn.async} : tensor<72xf32> -> tensor<72xf32>
  %4 = nn.matmul %arg0, %arg1 transpose_rhs : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %5 = nn.exp %4 : tensor<4x8xf32>
  return %4, %5, %all_reduce : tensor<4x8xf32>, tensor<4x8xf32>, tensor<72xf32>
}
func.func private @grad_layer_finish(%arg0: tensor<72xf32>) -> (tensor<8x8xf32>, tensor<8xf32>) attributes {nn.finish} {
  %0 = nn.wait %arg0 : tensor<72xf32>
  %1 = nn.slice %0 start = [64] limit = [72] : tensor<72xf32> -> tensor<8xf32>
  %2 = nn.slice %0 start = [0] limit = [64] : tensor<72xf32> -> tensor<64xf32>
  %3 = nn.reshape %2 : tensor<64xf32> -> tensor<8x8xf32>
  return %3, %1 : tensor<8x8xf32>, tensor<8xf32>
}
func.func @backward(%arg0: tensor<4x8xf32>, %arg1: tensor<3x8x8xf32>, %arg2: tensor<3x4x8xf32>) -> (tensor<4x8xf32>, tensor<3x4x8xf32>, tensor<3x8x8xf32>, tensor<3x8xf32>) {
  %0:4 = nn.repeat @grad_layer(%arg0) params(%arg1, %arg2) reverse finish @grad_layer_finish : (tensor<4x8xf32>, tensor<3x8x8xf32>, tensor<3x4x8xf32>) -> (tensor<4x8xf32>, tensor<3x4x8xf32>, tensor<3x8x8xf32>, tensor<3x8xf32>)
  return %0#0, %0#1, %0#2, %0#3 : tensor<4x8xf32>, tensor<3x4x8xf32>, tensor<3x8x8xf32>, tensor<3x8xf32>
}
