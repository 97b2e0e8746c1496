// RUN: tessel-opt %s --split-input-file --tessel-fuse-bias-grads | FileCheck %s

// Tests that a repeated layer's weight gradient (a matmul of the flattened
// output gradient) and its bias gradient (the sum over the leading
// dimensions of the same gradient) become one GEMM with the bias-gradient
// epilogue, where the sum stood (the reshapes it reads, which compute
// nothing, move before it).
// CHECK-LABEL: func.func @bias_grad
// CHECK: %[[X:.*]] = nn.reshape %arg0
// CHECK-NEXT: %[[DY:.*]] = nn.reshape %arg1
// CHECK-NEXT: %[[DW:.*]], %[[DB:.*]] = nn.matmul_bias_grad %[[X]], %[[DY]] transpose_lhs : (tensor<512x128xf32>, tensor<512x256xf32>) -> (tensor<128x256xf32>, tensor<256xf32>)
// CHECK-NEXT: return %[[DW]], %[[DB]]
func.func @bias_grad(%x: tensor<8x64x128xf32>, %dy: tensor<8x64x256xf32>) -> (tensor<128x256xf32>, tensor<256xf32>) {
  %db = nn.reduce_sum %dy dims = [0, 1] : tensor<8x64x256xf32> -> tensor<256xf32>
  %x2 = nn.reshape %x : tensor<8x64x128xf32> -> tensor<512x128xf32>
  %dy2 = nn.reshape %dy : tensor<8x64x256xf32> -> tensor<512x256xf32>
  %dw = nn.matmul %x2, %dy2 transpose_lhs : (tensor<512x128xf32>, tensor<512x256xf32>) -> tensor<128x256xf32>
  return %dw, %db : tensor<128x256xf32>, tensor<256xf32>
}

// -----

// Tests that a 2-D output gradient fuses as it is, and that a sum read
// before the matmul puts the fused GEMM where the sum stood.
// CHECK-LABEL: func.func @bias_grad_read_early
// CHECK-NEXT: %[[DW:.*]], %[[DB:.*]] = nn.matmul_bias_grad %arg0, %arg1 transpose_lhs
// CHECK-NEXT: nn.mul %[[DB]], %[[DB]]
// CHECK-NEXT: nn.gelu %arg1
func.func @bias_grad_read_early(%x: tensor<32x784xf32>, %dy: tensor<32x16xf32>) -> (tensor<784x16xf32>, tensor<16xf32>, tensor<32x16xf32>) {
  %db = nn.reduce_sum %dy dims = [0] : tensor<32x16xf32> -> tensor<16xf32>
  %sq = nn.mul %db, %db : tensor<16xf32>
  %g = nn.gelu %dy : tensor<32x16xf32>
  %dw = nn.matmul %x, %dy transpose_lhs : (tensor<32x784xf32>, tensor<32x16xf32>) -> tensor<784x16xf32>
  return %dw, %sq, %g : tensor<784x16xf32>, tensor<16xf32>, tensor<32x16xf32>
}

// -----

// Tests that a weight gradient's GEMM that adds into its accumulator (a
// repeated layer's slice) takes the bias gradient's sum too, adding into
// the accumulator as before, where the GEMM stood; a sum read before an
// accumulating GEMM stays apart (the GEMM's update in place does not move).
// CHECK-LABEL: func.func @bias_grad_accumulate
// CHECK-NEXT: %[[G:.*]], %[[DB:.*]] = nn.matmul_bias_grad %arg0, %arg1 transpose_lhs outs(%arg2) : (tensor<32x784xf32>, tensor<32x16xf32>, tensor<784x16xf32>) -> (tensor<784x16xf32>, tensor<16xf32>)
// CHECK-NEXT: %[[B:.*]] = nn.accumulate %[[DB]] outs(%arg3)
// CHECK-NEXT: %[[S:.*]] = nn.reduce_sum %arg4
// CHECK-NEXT: nn.mul %[[S]], %[[S]]
// CHECK-NEXT: nn.matmul_accumulate %arg0, %arg4 transpose_lhs outs(%arg5)
func.func @bias_grad_accumulate(%x: tensor<32x784xf32>, %dy: tensor<32x16xf32>, %g: tensor<784x16xf32>, %b: tensor<16xf32>, %dz: tensor<32x16xf32>, %h: tensor<784x16xf32>) -> (tensor<784x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<784x16xf32>) {
  %g2 = nn.matmul_accumulate %x, %dy transpose_lhs outs(%g) : (tensor<32x784xf32>, tensor<32x16xf32>, tensor<784x16xf32>) -> tensor<784x16xf32>
  %db = nn.reduce_sum %dy dims = [0] : tensor<32x16xf32> -> tensor<16xf32>
  %b2 = nn.accumulate %db outs(%b) : tensor<16xf32>
  %dz_sum = nn.reduce_sum %dz dims = [0] : tensor<32x16xf32> -> tensor<16xf32>
  %sq = nn.mul %dz_sum, %dz_sum : tensor<16xf32>
  %h2 = nn.matmul_accumulate %x, %dz transpose_lhs outs(%h) : (tensor<32x784xf32>, tensor<32x16xf32>, tensor<784x16xf32>) -> tensor<784x16xf32>
  return %g2, %b2, %sq, %h2 : tensor<784x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<784x16xf32>
}

// -----

// Tests sums that are no bias gradient of a weight gradient: over another
// dimension, with keep_dims, and beside a matmul that reads the rows as
// its lhs or transposed.
// CHECK-LABEL: func.func @not_a_bias_grad
// CHECK-NOT: matmul_bias_grad
// CHECK: return
func.func @not_a_bias_grad(%v: tensor<32x16xf32>, %dy: tensor<32x16xf32>, %w: tensor<16x16xf32>) -> (tensor<32xf32>, tensor<1x16xf32>, tensor<16xf32>, tensor<16x32xf32>, tensor<16x16xf32>) {
  %a = nn.reduce_sum %dy dims = [1] : tensor<32x16xf32> -> tensor<32xf32>
  %b = nn.reduce_sum %dy dims = [0] keep_dims : tensor<32x16xf32> -> tensor<1x16xf32>
  %e = nn.reduce_sum %dy dims = [0] : tensor<32x16xf32> -> tensor<16xf32>
  %c = nn.matmul %w, %dy transpose_rhs : (tensor<16x16xf32>, tensor<32x16xf32>) -> tensor<16x32xf32>
  %d = nn.matmul %dy, %v transpose_lhs : (tensor<32x16xf32>, tensor<32x16xf32>) -> tensor<16x16xf32>
  return %a, %b, %e, %c, %d : tensor<32xf32>, tensor<1x16xf32>, tensor<16xf32>, tensor<16x32xf32>, tensor<16x16xf32>
}

// -----

// Tests that rows reaching the sum and the matmul through different
// reshapes of one tensor (attention's per-head gradient, summed as
// [B, S, H·D] and multiplied as [B·S, H·D]) are the same rows: the GEMM
// reads the 2-D view and takes the sum; the view only the sum read goes.
// CHECK-LABEL: func.func @bias_grad_through_reshapes
// CHECK-NEXT: %[[V2:.*]] = nn.reshape %arg1 : tensor<8x64x4x32xf32> -> tensor<512x128xf32>
// CHECK-NEXT: %[[DW:.*]], %[[DB:.*]] = nn.matmul_bias_grad %arg0, %[[V2]] transpose_lhs
// CHECK-NOT: nn.reduce_sum
// CHECK: return %[[DW]], %[[DB]]
func.func @bias_grad_through_reshapes(%x: tensor<512x128xf32>, %dv: tensor<8x64x4x32xf32>) -> (tensor<128x128xf32>, tensor<128xf32>) {
  %v3 = nn.reshape %dv : tensor<8x64x4x32xf32> -> tensor<8x64x128xf32>
  %db = nn.reduce_sum %v3 dims = [0, 1] : tensor<8x64x128xf32> -> tensor<128xf32>
  %v2 = nn.reshape %dv : tensor<8x64x4x32xf32> -> tensor<512x128xf32>
  %dw = nn.matmul %x, %v2 transpose_lhs : (tensor<512x128xf32>, tensor<512x128xf32>) -> tensor<128x128xf32>
  return %dw, %db : tensor<128x128xf32>, tensor<128xf32>
}

// -----

// Tests that the fused GEMM takes a place only where every started
// collective keeps a kernel between its start and its wait: here the sum
// is the only kernel inside the all-reduce's window, so the GEMM stands
// where the sum stood (the matmul's place had other work, outside it).
// CHECK-LABEL: func.func @keeps_the_window
// CHECK: %[[AR:.*]] = shard.all_reduce %arg2 on @mesh grid_axes = [0] {nn.async}
// CHECK-NEXT: %[[DW:.*]], %[[DB:.*]] = nn.matmul_bias_grad %arg0, %arg1 transpose_lhs
// CHECK-NEXT: %[[W:.*]] = nn.wait %[[AR]]
// CHECK-NEXT: %[[E:.*]] = nn.exp %[[W]]
shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
func.func @keeps_the_window(%x: tensor<32x8xf32>, %dy: tensor<32x16xf32>, %g: tensor<64xf32>) -> (tensor<8x16xf32>, tensor<16xf32>, tensor<64xf32>) {
  %dw = nn.matmul %x, %dy transpose_lhs : (tensor<32x8xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %ar = shard.all_reduce %g on @mesh grid_axes = [0] {nn.async} : tensor<64xf32> -> tensor<64xf32>
  %db = nn.reduce_sum %dy dims = [0] : tensor<32x16xf32> -> tensor<16xf32>
  %w = nn.wait %ar : tensor<64xf32>
  %e = nn.exp %w : tensor<64xf32>
  return %dw, %db, %e : tensor<8x16xf32>, tensor<16xf32>, tensor<64xf32>
}

// -----

// Tests that the two stay apart when each is the only kernel of a window:
// a gather started before the function (a prefetch, waited for after the
// matmul) and an all-reduce around the sum.
// CHECK-LABEL: func.func @every_place_empties_a_window
// CHECK-NOT: nn.matmul_bias_grad
// CHECK: return
shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
func.func @every_place_empties_a_window(%x: tensor<32x8xf32>, %dy: tensor<32x16xf32>, %g: tensor<64xf32>, %prefetched: tensor<64xf32> {nn.prefetched}) -> (tensor<8x16xf32>, tensor<16xf32>, tensor<64xf32>, tensor<64xf32>) {
  %dw = nn.matmul %x, %dy transpose_lhs : (tensor<32x8xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %p = nn.wait %prefetched : tensor<64xf32>
  %ar = shard.all_reduce %g on @mesh grid_axes = [0] {nn.async} : tensor<64xf32> -> tensor<64xf32>
  %db = nn.reduce_sum %dy dims = [0] : tensor<32x16xf32> -> tensor<16xf32>
  %w = nn.wait %ar : tensor<64xf32>
  return %dw, %db, %w, %p : tensor<8x16xf32>, tensor<16xf32>, tensor<64xf32>, tensor<64xf32>
}

// -----

// Tests that a bf16 weight gradient's GEMM accumulating into f32 takes the
// bias gradient's sum, whose f32 widening it then replaces (the sum in f32,
// never rounded to bf16); a sum read in bf16 too stays apart.
// CHECK-LABEL: func.func @bias_grad_accumulate_f32
// CHECK-NEXT: %[[G:.*]], %[[DB:.*]] = nn.matmul_bias_grad %arg0, %arg1 transpose_lhs outs(%arg2) : (tensor<32x64xbf16>, tensor<32x16xbf16>, tensor<64x16xf32>) -> (tensor<64x16xf32>, tensor<16xf32>)
// CHECK-NEXT: nn.matmul_accumulate %arg0, %arg3 transpose_lhs outs(%arg4)
// CHECK-NEXT: %[[S:.*]] = nn.reduce_sum %arg3
// CHECK-NEXT: nn.cast %[[S]]
// CHECK: return %[[G]], %[[DB]]
func.func @bias_grad_accumulate_f32(%x: tensor<32x64xbf16>, %dy: tensor<32x16xbf16>, %g: tensor<64x16xf32>, %dz: tensor<32x16xbf16>, %h: tensor<64x16xf32>) -> (tensor<64x16xf32>, tensor<16xf32>, tensor<64x16xf32>, tensor<16xf32>, tensor<16xbf16>) {
  %g2 = nn.matmul_accumulate %x, %dy transpose_lhs outs(%g) : (tensor<32x64xbf16>, tensor<32x16xbf16>, tensor<64x16xf32>) -> tensor<64x16xf32>
  %db = nn.reduce_sum %dy dims = [0] : tensor<32x16xbf16> -> tensor<16xbf16>
  %dbw = nn.cast %db : tensor<16xbf16> to tensor<16xf32>
  %h2 = nn.matmul_accumulate %x, %dz transpose_lhs outs(%h) : (tensor<32x64xbf16>, tensor<32x16xbf16>, tensor<64x16xf32>) -> tensor<64x16xf32>
  %dc = nn.reduce_sum %dz dims = [0] : tensor<32x16xbf16> -> tensor<16xbf16>
  %dcw = nn.cast %dc : tensor<16xbf16> to tensor<16xf32>
  return %g2, %dbw, %h2, %dcw, %dc : tensor<64x16xf32>, tensor<16xf32>, tensor<64x16xf32>, tensor<16xf32>, tensor<16xbf16>
}

// -----

// Tests that a bf16 weight gradient's GEMM written in f32 (matmul_f32, a
// data-parallel bucket's) takes the bias gradient's sum, whose widening it
// replaces, into one GEMM with both results in f32 (at the matmul, the
// first); a sum read in bf16 too stays apart.
// CHECK-LABEL: func.func @bias_grad_matmul_f32
// CHECK-NEXT: %[[G:.*]], %[[DB:.*]] = nn.matmul_bias_grad %arg0, %arg1 transpose_lhs : (tensor<32x64xbf16>, tensor<32x16xbf16>) -> (tensor<64x16xf32>, tensor<16xf32>)
// CHECK-NEXT: nn.matmul_f32 %arg0, %arg2 transpose_lhs
// CHECK-NEXT: %[[S:.*]] = nn.reduce_sum %arg2
// CHECK-NEXT: nn.cast %[[S]]
// CHECK: return %[[G]], %[[DB]]
func.func @bias_grad_matmul_f32(%x: tensor<32x64xbf16>, %dy: tensor<32x16xbf16>, %dz: tensor<32x16xbf16>) -> (tensor<64x16xf32>, tensor<16xf32>, tensor<64x16xf32>, tensor<16xf32>, tensor<16xbf16>) {
  %g = nn.matmul_f32 %x, %dy transpose_lhs : (tensor<32x64xbf16>, tensor<32x16xbf16>) -> tensor<64x16xf32>
  %db = nn.reduce_sum %dy dims = [0] : tensor<32x16xbf16> -> tensor<16xbf16>
  %dbw = nn.cast %db : tensor<16xbf16> to tensor<16xf32>
  %h = nn.matmul_f32 %x, %dz transpose_lhs : (tensor<32x64xbf16>, tensor<32x16xbf16>) -> tensor<64x16xf32>
  %dc = nn.reduce_sum %dz dims = [0] : tensor<32x16xbf16> -> tensor<16xbf16>
  %dcw = nn.cast %dc : tensor<16xbf16> to tensor<16xf32>
  return %g, %dbw, %h, %dcw, %dc : tensor<64x16xf32>, tensor<16xf32>, tensor<64x16xf32>, tensor<16xf32>, tensor<16xbf16>
}

// -----

// Tests that a bias gradient's sum already written in f32
// (tessel-fuse-epilogues folds its widening into it) joins its weight
// gradient's GEMM written in f32, and that it does not join a GEMM that
// writes bf16 (one GEMM writes one type).
// CHECK-LABEL: func.func @widened_sum
// CHECK-NEXT: %[[G:.*]], %[[DB:.*]] = nn.matmul_bias_grad %arg0, %arg1 transpose_lhs : (tensor<32x64xbf16>, tensor<32x16xbf16>) -> (tensor<64x16xf32>, tensor<16xf32>)
// CHECK-NEXT: %[[H:.*]] = nn.matmul %arg0, %arg2 transpose_lhs
// CHECK-NEXT: %[[DC:.*]] = nn.reduce_sum %arg2 dims = [0] : tensor<32x16xbf16> -> tensor<16xf32>
// CHECK-NEXT: return %[[G]], %[[DB]], %[[H]], %[[DC]]
func.func @widened_sum(%x: tensor<32x64xbf16>, %dy: tensor<32x16xbf16>, %dz: tensor<32x16xbf16>) -> (tensor<64x16xf32>, tensor<16xf32>, tensor<64x16xbf16>, tensor<16xf32>) {
  %g = nn.matmul_f32 %x, %dy transpose_lhs : (tensor<32x64xbf16>, tensor<32x16xbf16>) -> tensor<64x16xf32>
  %db = nn.reduce_sum %dy dims = [0] : tensor<32x16xbf16> -> tensor<16xf32>
  %h = nn.matmul %x, %dz transpose_lhs : (tensor<32x64xbf16>, tensor<32x16xbf16>) -> tensor<64x16xbf16>
  %dc = nn.reduce_sum %dz dims = [0] : tensor<32x16xbf16> -> tensor<16xf32>
  return %g, %db, %h, %dc : tensor<64x16xf32>, tensor<16xf32>, tensor<64x16xbf16>, tensor<16xf32>
}
