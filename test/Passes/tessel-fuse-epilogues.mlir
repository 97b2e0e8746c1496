// RUN: tessel-opt %s --split-input-file --tessel-fuse-epilogues | FileCheck %s

// Tests that a weight gradient's matmul used only by the accumulate into
// its buffer becomes one accumulating GEMM where the matmul stood.
// CHECK-LABEL: func.func @accumulate
// CHECK-NEXT: %[[G:.*]] = nn.matmul_accumulate %arg0, %arg1 transpose_lhs outs(%arg2) : (tensor<32x784xf32>, tensor<32x1024xf32>, tensor<784x1024xf32>) -> tensor<784x1024xf32>
// CHECK-NEXT: %[[Y:.*]] = nn.gelu %arg1
// CHECK-NEXT: return %[[G]], %[[Y]]
func.func @accumulate(%x: tensor<32x784xf32>, %dy: tensor<32x1024xf32>, %g: tensor<784x1024xf32>) -> (tensor<784x1024xf32>, tensor<32x1024xf32>) {
  %p = nn.matmul %x, %dy transpose_lhs : (tensor<32x784xf32>, tensor<32x1024xf32>) -> tensor<784x1024xf32>
  %y = nn.gelu %dy : tensor<32x1024xf32>
  %g2 = nn.accumulate %p outs(%g) : tensor<784x1024xf32>
  return %g2, %y : tensor<784x1024xf32>, tensor<32x1024xf32>
}

// -----

// Tests that the accumulating GEMM stands where the accumulate stood when
// an op between the two reads the accumulator's old value.
// CHECK-LABEL: func.func @accumulator_read_between
// CHECK-NEXT: %[[S:.*]] = nn.reduce_sum %arg2
// CHECK-NEXT: %[[G:.*]] = nn.matmul_accumulate %arg0, %arg1 outs(%arg2)
// CHECK-NEXT: return %[[G]], %[[S]]
func.func @accumulator_read_between(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %g: tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<16xf32>) {
  %p = nn.matmul %a, %b : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %s = nn.reduce_sum %g dims = [0] : tensor<4x16xf32> -> tensor<16xf32>
  %g2 = nn.accumulate %p outs(%g) : tensor<4x16xf32>
  return %g2, %s : tensor<4x16xf32>, tensor<16xf32>
}

// -----

// Tests that a product used elsewhere too keeps its matmul and accumulate.
// CHECK-LABEL: func.func @product_used_twice
// CHECK: nn.matmul %arg0, %arg1
// CHECK: nn.accumulate
// CHECK-NOT: matmul_accumulate
func.func @product_used_twice(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %g: tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %p = nn.matmul %a, %b : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %g2 = nn.accumulate %p outs(%g) : tensor<4x16xf32>
  return %g2, %p : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Tests that a bf16 product widened to its f32 accumulator (a mixed-
// precision weight gradient) becomes one GEMM summing into the f32
// accumulator (Megatron's gradient-accumulation fusion); a widened product
// something else also reads stays apart from the accumulate (written in
// f32 by its GEMM, matmul_f32), and a cast that is not a widening to f32
// stays.
// CHECK-LABEL: func.func @accumulate_widened
// CHECK-NEXT: %[[G:.*]] = nn.matmul_accumulate %arg0, %arg1 transpose_lhs outs(%arg2) : (tensor<8x4xbf16>, tensor<8x16xbf16>, tensor<4x16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT: %[[P:.*]] = nn.matmul_f32 %arg0, %arg1 transpose_lhs
// CHECK-NEXT: %[[H:.*]] = nn.accumulate %[[P]] outs(%arg3)
// CHECK-NEXT: %[[Q:.*]] = nn.matmul %arg4, %arg5 transpose_lhs
// CHECK-NEXT: %[[D:.*]] = nn.cast %[[Q]] : tensor<4x16xf16> to tensor<4x16xbf16>
// CHECK-NEXT: nn.accumulate %[[D]] outs(%arg6)
func.func @accumulate_widened(%x: tensor<8x4xbf16>, %dy: tensor<8x16xbf16>, %g: tensor<4x16xf32>, %h: tensor<4x16xf32>, %xh: tensor<8x4xf16>, %dz: tensor<8x16xf16>, %k: tensor<4x16xbf16>) -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xbf16>) {
  %p = nn.matmul %x, %dy transpose_lhs : (tensor<8x4xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>
  %w = nn.cast %p : tensor<4x16xbf16> to tensor<4x16xf32>
  %g2 = nn.accumulate %w outs(%g) : tensor<4x16xf32>
  %q = nn.matmul %x, %dy transpose_lhs : (tensor<8x4xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>
  %v = nn.cast %q : tensor<4x16xbf16> to tensor<4x16xf32>
  %h2 = nn.accumulate %v outs(%h) : tensor<4x16xf32>
  %r = nn.matmul %xh, %dz transpose_lhs : (tensor<8x4xf16>, tensor<8x16xf16>) -> tensor<4x16xf16>
  %n = nn.cast %r : tensor<4x16xf16> to tensor<4x16xbf16>
  %k2 = nn.accumulate %n outs(%k) : tensor<4x16xbf16>
  return %g2, %h2, %v, %k2 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xbf16>
}

// -----

// Tests that an accumulate of something other than a product stays.
// CHECK-LABEL: func.func @accumulate_not_a_product
// CHECK: nn.accumulate %{{.*}} outs(%arg1)
func.func @accumulate_not_a_product(%x: tensor<4x16xf32>, %g: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %y = nn.gelu %x : tensor<4x16xf32>
  %g2 = nn.accumulate %y outs(%g) : tensor<4x16xf32>
  return %g2 : tensor<4x16xf32>
}

// -----

// Tests that a linear layer's matmul, bias broadcast and add become one
// GEMM with a bias epilogue, in either order of the add's operands, and
// that a broadcast nothing else reads goes.
// CHECK-LABEL: func.func @bias
// CHECK-NEXT: %[[H:.*]] = nn.matmul_bias %arg0, %arg1, %arg2 : (tensor<8x64x128xf32>, tensor<128x512xf32>, tensor<512xf32>) -> tensor<8x64x512xf32>
// CHECK-NEXT: %[[WT:.*]] = nn.transpose %arg1
// CHECK-NEXT: %[[Z:.*]] = nn.matmul_bias %arg0, %[[WT]], %arg2 transpose_rhs : (tensor<8x64x128xf32>, tensor<512x128xf32>, tensor<512xf32>) -> tensor<8x64x512xf32>
// CHECK-NEXT: return %[[H]], %[[Z]]
func.func @bias(%x: tensor<8x64x128xf32>, %w: tensor<128x512xf32>, %b: tensor<512xf32>) -> (tensor<8x64x512xf32>, tensor<8x64x512xf32>) {
  %h = nn.matmul %x, %w : (tensor<8x64x128xf32>, tensor<128x512xf32>) -> tensor<8x64x512xf32>
  %bb = nn.broadcast %b dims = [2] : tensor<512xf32> -> tensor<8x64x512xf32>
  %hb = nn.add %h, %bb : tensor<8x64x512xf32>
  %wt = nn.transpose %w perm = [1, 0] : tensor<128x512xf32> -> tensor<512x128xf32>
  %z = nn.matmul %x, %wt transpose_rhs : (tensor<8x64x128xf32>, tensor<512x128xf32>) -> tensor<8x64x512xf32>
  %bb2 = nn.broadcast %b dims = [2] : tensor<512xf32> -> tensor<8x64x512xf32>
  %zb = nn.add %bb2, %z : tensor<8x64x512xf32>
  return %hb, %zb : tensor<8x64x512xf32>, tensor<8x64x512xf32>
}

// -----

// Tests that a broadcast read elsewhere stays beside the fused GEMM.
// CHECK-LABEL: func.func @bias_broadcast_kept
// CHECK: %[[BB:.*]] = nn.broadcast %arg2
// CHECK: nn.matmul_bias %arg0, %arg1, %arg2
// CHECK: nn.mul %{{.*}}, %[[BB]]
func.func @bias_broadcast_kept(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %h = nn.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %bb = nn.broadcast %b dims = [1] : tensor<16xf32> -> tensor<4x16xf32>
  %hb = nn.add %h, %bb : tensor<4x16xf32>
  %m = nn.mul %hb, %bb : tensor<4x16xf32>
  return %hb, %m : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Tests that adds which are not a bias on every row stay: a vector
// broadcast along the rows, a size-1 vector repeated, and two products.
// CHECK-LABEL: func.func @not_a_bias
// CHECK-NOT: matmul_bias
// CHECK: return
func.func @not_a_bias(%x: tensor<16x8xf32>, %w: tensor<8x16xf32>, %c: tensor<16xf32>, %one: tensor<1xf32>) -> (tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>) {
  %h = nn.matmul %x, %w : (tensor<16x8xf32>, tensor<8x16xf32>) -> tensor<16x16xf32>
  %cc = nn.broadcast %c dims = [0] : tensor<16xf32> -> tensor<16x16xf32>
  %a = nn.add %h, %cc : tensor<16x16xf32>
  %h2 = nn.matmul %x, %w : (tensor<16x8xf32>, tensor<8x16xf32>) -> tensor<16x16xf32>
  %oo = nn.broadcast %one dims = [1] : tensor<1xf32> -> tensor<16x16xf32>
  %b = nn.add %h2, %oo : tensor<16x16xf32>
  %h3 = nn.matmul %x, %w : (tensor<16x8xf32>, tensor<8x16xf32>) -> tensor<16x16xf32>
  %h4 = nn.matmul %x, %w : (tensor<16x8xf32>, tensor<8x16xf32>) -> tensor<16x16xf32>
  %d = nn.add %h3, %h4 : tensor<16x16xf32>
  return %a, %b, %d : tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>
}

// -----

// Tests that a linear layer followed by a tanh GELU becomes one GEMM with
// the GELU epilogue whose pre-activation the GELU's gradient reads, and
// that the backward's matmul into that gradient takes the DGELU epilogue.
// CHECK-LABEL: func.func @linear_gelu
// CHECK-NEXT: %[[Y:.*]], %[[PRE:.*]] = nn.matmul_bias_gelu %arg0, %arg1, %arg2 : (tensor<8x64x128xf32>, tensor<128x512xf32>, tensor<512xf32>) -> (tensor<8x64x512xf32>, tensor<8x64x512xf32>)
// CHECK-NEXT: %[[D:.*]] = nn.matmul_gelu_grad %arg3, %arg4, %[[PRE]] transpose_rhs : (tensor<8x64x128xf32>, tensor<512x128xf32>, tensor<8x64x512xf32>) -> tensor<8x64x512xf32>
// CHECK-NEXT: return %[[Y]], %[[D]]
func.func @linear_gelu(%x: tensor<8x64x128xf32>, %w: tensor<128x512xf32>, %b: tensor<512xf32>, %dy: tensor<8x64x128xf32>, %wp: tensor<512x128xf32>) -> (tensor<8x64x512xf32>, tensor<8x64x512xf32>) {
  %h = nn.matmul %x, %w : (tensor<8x64x128xf32>, tensor<128x512xf32>) -> tensor<8x64x512xf32>
  %bb = nn.broadcast %b dims = [2] : tensor<512xf32> -> tensor<8x64x512xf32>
  %pre = nn.add %h, %bb : tensor<8x64x512xf32>
  %y = nn.gelu %pre approximate : tensor<8x64x512xf32>
  %dh = nn.matmul %dy, %wp transpose_rhs : (tensor<8x64x128xf32>, tensor<512x128xf32>) -> tensor<8x64x512xf32>
  %dpre = nn.gelu_grad %pre, %dh approximate : tensor<8x64x512xf32>
  return %y, %dpre : tensor<8x64x512xf32>, tensor<8x64x512xf32>
}

// -----

// Tests that an exact (erf) GELU, which no GEMM library fuses, keeps its
// own kernels forward and backward; the bias still fuses.
// CHECK-LABEL: func.func @exact_gelu
// CHECK: nn.matmul_bias
// CHECK-NEXT: nn.gelu
// CHECK-NEXT: nn.matmul %arg3, %arg4
// CHECK-NEXT: nn.gelu_grad
// CHECK-NOT: gelu_grad
func.func @exact_gelu(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>, %dy: tensor<4x8xf32>, %wp: tensor<8x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %h = nn.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %bb = nn.broadcast %b dims = [1] : tensor<16xf32> -> tensor<4x16xf32>
  %pre = nn.add %h, %bb : tensor<4x16xf32>
  %y = nn.gelu %pre : tensor<4x16xf32>
  %dh = nn.matmul %dy, %wp : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %dpre = nn.gelu_grad %pre, %dh : tensor<4x16xf32>
  return %y, %dpre : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Tests what must not fuse: a GELU of a product without a bias, and a
// GELU's gradient whose product is read elsewhere too (it must exist).
// CHECK-LABEL: func.func @gelu_not_fused
// CHECK-NOT: matmul_bias_gelu
// CHECK-NOT: matmul_gelu_grad
// CHECK: return
func.func @gelu_not_fused(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) {
  %h = nn.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %y = nn.gelu %h approximate : tensor<4x16xf32>
  %h2 = nn.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %d = nn.gelu_grad %y, %h2 approximate : tensor<4x16xf32>
  return %y, %d, %h2 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Tests that a bias gradient's sum stays apart from its weight gradient's
// GEMM here: that is tessel-fuse-bias-grads' (tessel-fuse-bias-grads.mlir),
// after the overlap of communication.
// CHECK-LABEL: func.func @bias_grad_left_alone
// CHECK: nn.reduce_sum
// CHECK: nn.matmul %arg0, %arg1 transpose_lhs
// CHECK-NOT: matmul_bias_grad
func.func @bias_grad_left_alone(%x: tensor<32x784xf32>, %dy: tensor<32x16xf32>) -> (tensor<784x16xf32>, tensor<16xf32>) {
  %db = nn.reduce_sum %dy dims = [0] : tensor<32x16xf32> -> tensor<16xf32>
  %dw = nn.matmul %x, %dy transpose_lhs : (tensor<32x784xf32>, tensor<32x16xf32>) -> tensor<784x16xf32>
  return %dw, %db : tensor<784x16xf32>, tensor<16xf32>
}

// -----

// Tests that under mixed precision the loss reads the bf16 logits itself
// (its loss still f32): the widened logits go.
// CHECK-LABEL: func.func @loss_cast
// CHECK-NEXT: %[[L:.*]] = nn.cross_entropy %arg0, %arg1 : (tensor<8x16xbf16>, tensor<8xi32>) -> tensor<f32>
// CHECK-NEXT: return %[[L]]
func.func @loss_cast(%z: tensor<8x16xbf16>, %y: tensor<8xi32>) -> tensor<f32> {
  %w = nn.cast %z : tensor<8x16xbf16> to tensor<8x16xf32>
  %l = nn.cross_entropy %w, %y : (tensor<8x16xf32>, tensor<8xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that the gradient's rounding back to bf16 folds into the gradient
// of the bf16 logits (dloss still f32): neither the widened logits nor the
// f32 gradient remain.
// CHECK-LABEL: func.func @loss_grad_rounding
// CHECK-NEXT: %[[G:.*]] = nn.cross_entropy_grad %arg0, %arg1, %arg2 : (tensor<8x16xbf16>, tensor<8xi32>, tensor<f32>) -> tensor<8x16xbf16>
// CHECK-NEXT: return %[[G]]
func.func @loss_grad_rounding(%z: tensor<8x16xbf16>, %y: tensor<8xi32>, %dl: tensor<f32>) -> tensor<8x16xbf16> {
  %w = nn.cast %z : tensor<8x16xbf16> to tensor<8x16xf32>
  %g = nn.cross_entropy_grad %w, %y, %dl : (tensor<8x16xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x16xf32>
  %r = nn.cast %g : tensor<8x16xf32> to tensor<8x16xbf16>
  return %r : tensor<8x16xbf16>
}

// -----

// Tests that a step's loss and its gradient of the same logits, labels and
// reduction become one op where the loss stood (the seed exists there);
// after the casts fold, bf16 logits with an f32 loss. The logits are an
// argument, the caller's memory: not in place.
// CHECK-LABEL: func.func @loss_with_grad
// CHECK-NEXT: %[[L:.*]], %[[G:.*]] = nn.cross_entropy_with_grad %arg0, %arg1, %arg2 : (tensor<8x16xbf16>, tensor<8xi32>, tensor<f32>) -> (tensor<f32>, tensor<8x16xbf16>)
// CHECK-NEXT: return %[[L]], %[[G]]
func.func @loss_with_grad(%z: tensor<8x16xbf16>, %y: tensor<8xi32>, %dl: tensor<f32>) -> (tensor<f32>, tensor<8x16xbf16>) {
  %w = nn.cast %z : tensor<8x16xbf16> to tensor<8x16xf32>
  %l = nn.cross_entropy %w, %y : (tensor<8x16xf32>, tensor<8xi32>) -> tensor<f32>
  %g = nn.cross_entropy_grad %w, %y, %dl : (tensor<8x16xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x16xf32>
  %r = nn.cast %g : tensor<8x16xf32> to tensor<8x16xbf16>
  return %l, %r : tensor<f32>, tensor<8x16xbf16>
}

// -----

// Tests that a loss read before its gradient, whose seed is computed after
// it from values before it (tessel-mask-ignored-labels' weights over the
// count), fuses with its gradient: the seed's pure ops move above the loss,
// in their order, and the fused op stands where the loss stood.
// CHECK-LABEL: func.func @masked_loss_with_grad
// CHECK: %[[SAFE:.*]], %[[W:.*]] = nn.mask_labels
// CHECK: %[[D:.*]] = nn.add
// CHECK: %[[SEED:.*]] = nn.constant dense<1.000000e+00>
// CHECK-NEXT: %[[DS:.*]] = nn.div %[[SEED]], %[[D]]
// CHECK-NEXT: %[[B:.*]] = nn.broadcast %[[DS]]
// CHECK-NEXT: %[[DL:.*]] = nn.mul %[[B]], %[[W]]
// CHECK-NEXT: %[[L:.*]], %[[G:.*]] = nn.cross_entropy_with_grad %arg0, %[[SAFE]], %[[DL]] {reduction = #nn.reduction<none>}
// CHECK-NEXT: %[[LW:.*]] = nn.mul %[[L]], %[[W]]
// CHECK-NOT: nn.cross_entropy_grad
func.func @masked_loss_with_grad(%z: tensor<4x5xf32>, %y: tensor<4xi32>) -> (tensor<f32>, tensor<4x5xf32>) {
  %safe, %w = nn.mask_labels %y ignore_index -100 : (tensor<4xi32>) -> (tensor<4xi32>, tensor<4xf32>)
  %n = nn.reduce_sum %w dims = [0] : tensor<4xf32> -> tensor<f32>
  %one = nn.constant dense<1.0> : tensor<f32>
  %m = nn.sub %n, %one : tensor<f32>
  %r = nn.relu %m : tensor<f32>
  %d = nn.add %r, %one : tensor<f32>
  %each = nn.cross_entropy %z, %safe {reduction = #nn.reduction<none>} : (tensor<4x5xf32>, tensor<4xi32>) -> tensor<4xf32>
  %lw = nn.mul %each, %w : tensor<4xf32>
  %s = nn.reduce_sum %lw dims = [0] : tensor<4xf32> -> tensor<f32>
  %l = nn.div %s, %d : tensor<f32>
  %seed = nn.constant dense<1.0> : tensor<f32>
  %ds = nn.div %seed, %d : tensor<f32>
  %b = nn.broadcast %ds dims = [] : tensor<f32> -> tensor<4xf32>
  %dl = nn.mul %b, %w : tensor<4xf32>
  %g = nn.cross_entropy_grad %z, %safe, %dl {reduction = #nn.reduction<none>} : (tensor<4x5xf32>, tensor<4xi32>, tensor<4xf32>) -> tensor<4x5xf32>
  return %l, %g : tensor<f32>, tensor<4x5xf32>
}

// -----

// Tests that a seed computed from the loss itself cannot move above it:
// loss and gradient stay apart.
// CHECK-LABEL: func.func @seed_of_the_loss
// CHECK: nn.cross_entropy %arg0, %arg1 {reduction = #nn.reduction<none>}
// CHECK: nn.cross_entropy_grad
// CHECK-NOT: cross_entropy_with_grad
func.func @seed_of_the_loss(%z: tensor<4x5xf32>, %y: tensor<4xi32>) -> (tensor<4xf32>, tensor<4x5xf32>) {
  %each = nn.cross_entropy %z, %y {reduction = #nn.reduction<none>} : (tensor<4x5xf32>, tensor<4xi32>) -> tensor<4xf32>
  %twice = nn.add %each, %each : tensor<4xf32>
  %dl = nn.mul %each, %each : tensor<4xf32>
  %g = nn.cross_entropy_grad %z, %y, %dl {reduction = #nn.reduction<none>} : (tensor<4x5xf32>, tensor<4xi32>, tensor<4xf32>) -> tensor<4x5xf32>
  return %twice, %g : tensor<4xf32>, tensor<4x5xf32>
}

// -----

// Tests that the gradient is written over logits a kernel of the function
// made and only the two read (in_place), and that the fused op stands
// where the gradient stood when the seed is made after the loss (nothing
// reads the loss before).
// CHECK-LABEL: func.func @loss_with_grad_in_place
// CHECK-NEXT: %[[Z:.*]] = nn.matmul %arg0, %arg1
// CHECK-NEXT: %[[S:.*]] = nn.constant
// CHECK-NEXT: %[[L:.*]], %[[G:.*]] = nn.cross_entropy_with_grad %[[Z]], %arg2, %[[S]] in_place : (tensor<8x16xf32>, tensor<8xi32>, tensor<f32>) -> (tensor<f32>, tensor<8x16xf32>)
// CHECK-NEXT: return %[[L]], %[[G]]
func.func @loss_with_grad_in_place(%x: tensor<8x4xf32>, %w: tensor<4x16xf32>, %y: tensor<8xi32>) -> (tensor<f32>, tensor<8x16xf32>) {
  %z = nn.matmul %x, %w : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %l = nn.cross_entropy %z, %y : (tensor<8x16xf32>, tensor<8xi32>) -> tensor<f32>
  %s = nn.constant dense<1.0> : tensor<f32>
  %g = nn.cross_entropy_grad %z, %y, %s : (tensor<8x16xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x16xf32>
  return %l, %g : tensor<f32>, tensor<8x16xf32>
}

// -----

// Tests the fused loss's limits: logits read by a third op keep their
// memory (not in place); another reduction or other labels stay two ops.
// A loss read before a seed made after it from nothing the loss computes
// (a constant) fuses where the loss stood, the seed moved above it.
// CHECK-LABEL: func.func @loss_with_grad_kept
// CHECK: nn.cross_entropy_with_grad %[[Z:.*]], %arg2, %arg3 : (tensor<8x16xf32>, tensor<8xi32>, tensor<f32>) -> (tensor<f32>, tensor<8x16xf32>)
// CHECK: nn.cross_entropy %arg4, %arg2 {reduction = #nn.reduction<sum>}
// CHECK: nn.cross_entropy_grad %arg4, %arg2, %arg3 :
// CHECK: nn.cross_entropy %arg5, %arg2 :
// CHECK: nn.cross_entropy_grad %arg5, %arg6, %arg3 :
// CHECK: %[[S:.*]] = nn.constant
// CHECK-NEXT: %[[M:.*]], %{{.*}} = nn.cross_entropy_with_grad %arg7, %arg2, %[[S]] :
// CHECK-NEXT: nn.exp %[[M]]
// CHECK-NOT: nn.cross_entropy_grad
func.func @loss_with_grad_kept(%x: tensor<8x4xf32>, %w: tensor<4x16xf32>, %y: tensor<8xi32>, %dl: tensor<f32>, %a: tensor<8x16xf32>, %b: tensor<8x16xf32>, %y2: tensor<8xi32>, %c: tensor<8x16xf32>) -> (tensor<f32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<f32>, tensor<8x16xf32>, tensor<f32>, tensor<8x16xf32>, tensor<f32>, tensor<8x16xf32>) {
  %z = nn.matmul %x, %w : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %l = nn.cross_entropy %z, %y : (tensor<8x16xf32>, tensor<8xi32>) -> tensor<f32>
  %g = nn.cross_entropy_grad %z, %y, %dl : (tensor<8x16xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x16xf32>
  %la = nn.cross_entropy %a, %y {reduction = #nn.reduction<sum>} : (tensor<8x16xf32>, tensor<8xi32>) -> tensor<f32>
  %ga = nn.cross_entropy_grad %a, %y, %dl : (tensor<8x16xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x16xf32>
  %lb = nn.cross_entropy %b, %y : (tensor<8x16xf32>, tensor<8xi32>) -> tensor<f32>
  %gb = nn.cross_entropy_grad %b, %y2, %dl : (tensor<8x16xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x16xf32>
  %lc = nn.cross_entropy %c, %y : (tensor<8x16xf32>, tensor<8xi32>) -> tensor<f32>
  %e = nn.exp %lc : tensor<f32>
  %s = nn.constant dense<1.0> : tensor<f32>
  %gc = nn.cross_entropy_grad %c, %y, %s : (tensor<8x16xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x16xf32>
  return %l, %g, %z, %la, %ga, %lb, %gb, %e, %gc : tensor<f32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<f32>, tensor<8x16xf32>, tensor<f32>, tensor<8x16xf32>, tensor<f32>, tensor<8x16xf32>
}

// -----

// Tests the folds' limits: a gradient read in f32 keeps the widening
// (the loss, reduction none, reads the f16 logits all the same); a
// gradient rounded to another type than its logits' (bf16 logits, f16
// gradient) and the loss of f32 logits stay as they are.
// CHECK-LABEL: func.func @loss_casts_kept
// CHECK-NEXT: %[[W:.*]] = nn.cast %arg0 : tensor<8x16xf16> to tensor<8x16xf32>
// CHECK-NEXT: %[[L:.*]] = nn.cross_entropy %arg0, %arg1 {reduction = #nn.reduction<none>} : (tensor<8x16xf16>, tensor<8xi32>) -> tensor<8xf32>
// CHECK-NEXT: %[[G:.*]] = nn.cross_entropy_grad %[[W]], %arg1, %arg2 {reduction = #nn.reduction<none>} : (tensor<8x16xf32>, tensor<8xi32>, tensor<8xf32>) -> tensor<8x16xf32>
// CHECK-NEXT: %[[B:.*]] = nn.cast %arg3 : tensor<8x16xbf16> to tensor<8x16xf32>
// CHECK-NEXT: %[[H:.*]] = nn.cross_entropy_grad %[[B]], %arg1, %arg4 : (tensor<8x16xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x16xf32>
// CHECK-NEXT: %[[R:.*]] = nn.cast %[[H]] : tensor<8x16xf32> to tensor<8x16xf16>
// CHECK-NEXT: %[[M:.*]] = nn.cross_entropy %arg5, %arg1 : (tensor<8x16xf32>, tensor<8xi32>) -> tensor<f32>
// CHECK-NEXT: return %[[L]], %[[G]], %[[R]], %[[M]]
func.func @loss_casts_kept(%z: tensor<8x16xf16>, %y: tensor<8xi32>, %dl: tensor<8xf32>, %b: tensor<8x16xbf16>, %db: tensor<f32>, %f: tensor<8x16xf32>) -> (tensor<8xf32>, tensor<8x16xf32>, tensor<8x16xf16>, tensor<f32>) {
  %w = nn.cast %z : tensor<8x16xf16> to tensor<8x16xf32>
  %l = nn.cross_entropy %w, %y {reduction = #nn.reduction<none>} : (tensor<8x16xf32>, tensor<8xi32>) -> tensor<8xf32>
  %g = nn.cross_entropy_grad %w, %y, %dl {reduction = #nn.reduction<none>} : (tensor<8x16xf32>, tensor<8xi32>, tensor<8xf32>) -> tensor<8x16xf32>
  %bw = nn.cast %b : tensor<8x16xbf16> to tensor<8x16xf32>
  %h = nn.cross_entropy_grad %bw, %y, %db : (tensor<8x16xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x16xf32>
  %r = nn.cast %h : tensor<8x16xf32> to tensor<8x16xf16>
  %m = nn.cross_entropy %f, %y : (tensor<8x16xf32>, tensor<8xi32>) -> tensor<f32>
  return %l, %g, %r, %m : tensor<8xf32>, tensor<8x16xf32>, tensor<8x16xf16>, tensor<f32>
}

// -----

// Tests a bf16 step's tied embedding: the LM head's bf16 GEMM and the
// embedding's table gradient, summed in bf16 and widened into the f32
// gradient buffer, become a matmul_accumulate into the buffer where the
// GEMM stood (the product summed in f32, ABI 12; no bf16 product kept, no
// add) and the embedding's gradient written in f32 (ABI 14) and
// accumulated after.
// CHECK-LABEL: func.func @tied_embedding_grad
// CHECK-NEXT: %[[G:.*]] = nn.matmul_accumulate %arg2, %arg3 transpose_lhs outs(%arg4) : (tensor<6x5xbf16>, tensor<6x4xbf16>, tensor<5x4xf32>) -> tensor<5x4xf32>
// CHECK-NEXT: %[[X:.*]] = nn.exp %arg1
// CHECK-NEXT: %[[E:.*]] = nn.embedding_grad %arg0, %[[X]] : (tensor<6xi32>, tensor<6x4xbf16>) -> tensor<5x4xf32>
// CHECK-NEXT: %[[A:.*]] = nn.accumulate %[[E]] outs(%[[G]]) : tensor<5x4xf32>
// CHECK-NEXT: return %[[A]]
func.func @tied_embedding_grad(%ids: tensor<6xi32>, %dh: tensor<6x4xbf16>, %dz: tensor<6x5xbf16>, %h: tensor<6x4xbf16>, %buf: tensor<5x4xf32>) -> tensor<5x4xf32> {
  %head = nn.matmul %dz, %h transpose_lhs : (tensor<6x5xbf16>, tensor<6x4xbf16>) -> tensor<5x4xbf16>
  %dx = nn.exp %dh : tensor<6x4xbf16>
  %emb = nn.embedding_grad %ids, %dx : (tensor<6xi32>, tensor<6x4xbf16>) -> tensor<5x4xbf16>
  %g = nn.add %head, %emb : tensor<5x4xbf16>
  %gf = nn.cast %g : tensor<5x4xbf16> to tensor<5x4xf32>
  %a = nn.accumulate %gf outs(%buf) : tensor<5x4xf32>
  return %a : tensor<5x4xf32>
}

// -----

// Tests an f32 step's tied embedding: the LM head's GEMM and the
// embedding's table gradient, summed and accumulated into the gradient
// buffer, become a matmul_accumulate into the buffer where the GEMM stood
// (no [V, C] product kept through the backward, no add) and the
// embedding's gradient accumulated after; the sum with the GEMM second
// too.
// CHECK-LABEL: func.func @tied_embedding_grad_f32
// CHECK-NEXT: %[[G:.*]] = nn.matmul_accumulate %arg2, %arg3 transpose_lhs outs(%arg4) : (tensor<6x5xf32>, tensor<6x4xf32>, tensor<5x4xf32>) -> tensor<5x4xf32>
// CHECK-NEXT: %[[X:.*]] = nn.exp %arg1
// CHECK-NEXT: %[[E:.*]] = nn.embedding_grad %arg0, %[[X]] : (tensor<6xi32>, tensor<6x4xf32>) -> tensor<5x4xf32>
// CHECK-NEXT: %[[A:.*]] = nn.accumulate %[[E]] outs(%[[G]]) : tensor<5x4xf32>
// CHECK-NEXT: return %[[A]]
func.func @tied_embedding_grad_f32(%ids: tensor<6xi32>, %dh: tensor<6x4xf32>, %dz: tensor<6x5xf32>, %h: tensor<6x4xf32>, %buf: tensor<5x4xf32>) -> tensor<5x4xf32> {
  %head = nn.matmul %dz, %h transpose_lhs : (tensor<6x5xf32>, tensor<6x4xf32>) -> tensor<5x4xf32>
  %dx = nn.exp %dh : tensor<6x4xf32>
  %emb = nn.embedding_grad %ids, %dx : (tensor<6xi32>, tensor<6x4xf32>) -> tensor<5x4xf32>
  %g = nn.add %emb, %head : tensor<5x4xf32>
  %a = nn.accumulate %g outs(%buf) : tensor<5x4xf32>
  return %a : tensor<5x4xf32>
}

// -----

// Tests what stays apart: a sum read again, a widened sum read again, an
// accumulator read between the GEMM and the accumulate; an embedding
// gradient read in bf16 too keeps its cast.
// CHECK-LABEL: func.func @widened_sum_not_fused
// CHECK-NOT: nn.matmul_accumulate
// CHECK: nn.embedding_grad {{.*}} -> tensor<5x4xbf16>
// CHECK-NOT: nn.matmul_accumulate
// CHECK: return
func.func @widened_sum_not_fused(%ids: tensor<6xi32>, %dh: tensor<6x4xbf16>, %dz: tensor<6x5xbf16>, %h: tensor<6x4xbf16>, %buf: tensor<5x4xf32>, %buf2: tensor<5x4xf32>, %buf3: tensor<5x4xf32>, %y: tensor<5x4xbf16>) -> (tensor<5x4xf32>, tensor<5x4xbf16>, tensor<5x4xf32>, tensor<5x4xf32>, tensor<5x4xf32>, tensor<5x4xf32>, tensor<5x4xbf16>, tensor<5x4xf32>) {
  %p = nn.matmul %dz, %h transpose_lhs : (tensor<6x5xbf16>, tensor<6x4xbf16>) -> tensor<5x4xbf16>
  %s = nn.add %p, %y : tensor<5x4xbf16>
  %sf = nn.cast %s : tensor<5x4xbf16> to tensor<5x4xf32>
  %a = nn.accumulate %sf outs(%buf) : tensor<5x4xf32>
  %q = nn.matmul %dz, %h transpose_lhs : (tensor<6x5xbf16>, tensor<6x4xbf16>) -> tensor<5x4xbf16>
  %t = nn.add %q, %y : tensor<5x4xbf16>
  %tf = nn.cast %t : tensor<5x4xbf16> to tensor<5x4xf32>
  %b = nn.accumulate %tf outs(%buf2) : tensor<5x4xf32>
  %r = nn.matmul %dz, %h transpose_lhs : (tensor<6x5xbf16>, tensor<6x4xbf16>) -> tensor<5x4xbf16>
  %e = nn.exp %buf3 : tensor<5x4xf32>
  %u = nn.add %r, %y : tensor<5x4xbf16>
  %uf = nn.cast %u : tensor<5x4xbf16> to tensor<5x4xf32>
  %c = nn.accumulate %uf outs(%buf3) : tensor<5x4xf32>
  %emb = nn.embedding_grad %ids, %dh : (tensor<6xi32>, tensor<6x4xbf16>) -> tensor<5x4xbf16>
  %embf = nn.cast %emb : tensor<5x4xbf16> to tensor<5x4xf32>
  return %a, %s, %b, %tf, %c, %e, %emb, %embf : tensor<5x4xf32>, tensor<5x4xbf16>, tensor<5x4xf32>, tensor<5x4xf32>, tensor<5x4xf32>, tensor<5x4xf32>, tensor<5x4xbf16>, tensor<5x4xf32>
}

// -----

// Tests that a 16-bit product only widened to f32 (a bf16 step's weight
// gradient on its way to a data-parallel bucket) becomes one GEMM writing
// f32, where the matmul stood (ABI 15); f16 too. A product read in 16 bits
// as well keeps its cast, and so do logits whose widening the loss reads
// (the loss reads the bf16 logits itself: no f32 logits).
// CHECK-LABEL: func.func @matmul_widening
// CHECK-NEXT: %[[W:.*]] = nn.matmul_f32 %arg0, %arg1 transpose_lhs : (tensor<6x5xbf16>, tensor<6x4xbf16>) -> tensor<5x4xf32>
// CHECK-NEXT: %[[E:.*]] = nn.exp %arg1
// CHECK-NEXT: %[[H:.*]] = nn.matmul_f32 %arg2, %arg2 transpose_rhs : (tensor<3x8xf16>, tensor<3x8xf16>) -> tensor<3x3xf32>
// CHECK-NEXT: %[[P:.*]] = nn.matmul %arg0, %arg1 transpose_lhs : (tensor<6x5xbf16>, tensor<6x4xbf16>) -> tensor<5x4xbf16>
// CHECK-NEXT: %[[PW:.*]] = nn.cast %[[P]]
// CHECK-NEXT: %[[Z:.*]] = nn.matmul %arg1, %arg4 : (tensor<6x4xbf16>, tensor<4x7xbf16>) -> tensor<6x7xbf16>
// CHECK-NEXT: %[[L:.*]] = nn.cross_entropy %[[Z]], %arg3 : (tensor<6x7xbf16>, tensor<6xi32>) -> tensor<f32>
// CHECK-NEXT: return %[[W]], %[[E]], %[[H]], %[[P]], %[[PW]], %[[L]]
func.func @matmul_widening(%dz: tensor<6x5xbf16>, %h: tensor<6x4xbf16>, %x: tensor<3x8xf16>, %y: tensor<6xi32>, %w: tensor<4x7xbf16>) -> (tensor<5x4xf32>, tensor<6x4xbf16>, tensor<3x3xf32>, tensor<5x4xbf16>, tensor<5x4xf32>, tensor<f32>) {
  %g = nn.matmul %dz, %h transpose_lhs : (tensor<6x5xbf16>, tensor<6x4xbf16>) -> tensor<5x4xbf16>
  %e = nn.exp %h : tensor<6x4xbf16>
  %gw = nn.cast %g : tensor<5x4xbf16> to tensor<5x4xf32>
  %q = nn.matmul %x, %x transpose_rhs : (tensor<3x8xf16>, tensor<3x8xf16>) -> tensor<3x3xf16>
  %qw = nn.cast %q : tensor<3x3xf16> to tensor<3x3xf32>
  %p = nn.matmul %dz, %h transpose_lhs : (tensor<6x5xbf16>, tensor<6x4xbf16>) -> tensor<5x4xbf16>
  %pw = nn.cast %p : tensor<5x4xbf16> to tensor<5x4xf32>
  %z = nn.matmul %h, %w : (tensor<6x4xbf16>, tensor<4x7xbf16>) -> tensor<6x7xbf16>
  %zw = nn.cast %z : tensor<6x7xbf16> to tensor<6x7xf32>
  %l = nn.cross_entropy %zw, %y : (tensor<6x7xf32>, tensor<6xi32>) -> tensor<f32>
  return %gw, %e, %qw, %p, %pw, %l : tensor<5x4xf32>, tensor<6x4xbf16>, tensor<3x3xf32>, tensor<5x4xbf16>, tensor<5x4xf32>, tensor<f32>
}

// -----

// Tests that a 16-bit sum only widened to f32 (a bf16 step's bias or
// position-embedding gradient on its way to its f32 bucket or buffer) is
// written in f32 where it stood (ABI 16): one kernel. A sum read in 16 bits
// as well keeps its cast, and so does the widening of a mean.
// CHECK-LABEL: func.func @reduce_widening
// CHECK-NEXT: %[[S:.*]] = nn.reduce_sum %arg0 dims = [0] : tensor<6x4xbf16> -> tensor<4xf32>
// CHECK-NEXT: %[[E:.*]] = nn.exp %arg0
// CHECK-NEXT: %[[T:.*]] = nn.reduce_sum %arg0 dims = [1] : tensor<6x4xbf16> -> tensor<6xbf16>
// CHECK-NEXT: %[[TW:.*]] = nn.cast %[[T]]
// CHECK-NEXT: %[[M:.*]] = nn.reduce_mean %arg0
// CHECK-NEXT: %[[MW:.*]] = nn.cast %[[M]]
// CHECK-NEXT: return %[[S]], %[[E]], %[[T]], %[[TW]], %[[MW]]
func.func @reduce_widening(%dy: tensor<6x4xbf16>) -> (tensor<4xf32>, tensor<6x4xbf16>, tensor<6xbf16>, tensor<6xf32>, tensor<4xf32>) {
  %s = nn.reduce_sum %dy dims = [0] : tensor<6x4xbf16> -> tensor<4xbf16>
  %e = nn.exp %dy : tensor<6x4xbf16>
  %sw = nn.cast %s : tensor<4xbf16> to tensor<4xf32>
  %t = nn.reduce_sum %dy dims = [1] : tensor<6x4xbf16> -> tensor<6xbf16>
  %tw = nn.cast %t : tensor<6xbf16> to tensor<6xf32>
  %m = nn.reduce_mean %dy dims = [0] : tensor<6x4xbf16> -> tensor<4xbf16>
  %mw = nn.cast %m : tensor<4xbf16> to tensor<4xf32>
  return %sw, %e, %t, %tw, %mw : tensor<4xf32>, tensor<6x4xbf16>, tensor<6xbf16>, tensor<6xf32>, tensor<4xf32>
}

// -----

// Tests that a sum of products into a temporary is the GEMMs' own: a
// layer's input gradient through q, k and v, three matmuls and two adds,
// becomes a matmul and two matmul_accumulates into its buffer (beta = 1),
// each where its matmul stood.
// CHECK-LABEL: func.func @input_gradient_sum
// CHECK: %[[V:.*]] = nn.matmul %arg0, %arg3
// CHECK-NEXT: %[[K:.*]] = nn.matmul_accumulate %arg1, %arg4 outs(%[[V]])
// CHECK-NEXT: %[[Q:.*]] = nn.matmul_accumulate %arg2, %arg5 outs(%[[K]])
// CHECK-NEXT: return %[[Q]]
func.func @input_gradient_sum(%dv: tensor<4x8xf32>, %dk: tensor<4x8xf32>, %dq: tensor<4x8xf32>, %wv: tensor<8x8xf32>, %wk: tensor<8x8xf32>, %wq: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %0 = nn.matmul %dv, %wv : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %1 = nn.matmul %dk, %wk : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %2 = nn.add %0, %1 : tensor<4x8xf32>
  %3 = nn.matmul %dq, %wq : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %4 = nn.add %2, %3 : tensor<4x8xf32>
  return %4 : tensor<4x8xf32>
}

// -----

// Tests the sums kept: into an argument (the caller's memory), into a
// temporary another op reads too, into a view of a temporary, and into a
// value made after the matmul.
// CHECK-LABEL: func.func @sums_kept
// CHECK-NOT: nn.matmul_accumulate
// CHECK-COUNT-4: nn.add
// CHECK-NOT: nn.matmul_accumulate
func.func @sums_kept(%x: tensor<4x8xf32>, %a: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %m0 = nn.matmul %a, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %0 = nn.add %x, %m0 : tensor<4x8xf32>
  %t = nn.exp %x : tensor<4x8xf32>
  %m1 = nn.matmul %a, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %1 = nn.add %t, %m1 : tensor<4x8xf32>
  %e = nn.exp %a : tensor<4x8xf32>
  %r = nn.reshape %e : tensor<4x8xf32> -> tensor<4x8xf32>
  %m2 = nn.matmul %a, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %2 = nn.add %r, %m2 : tensor<4x8xf32>
  %m3 = nn.matmul %a, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %late = nn.tanh %x : tensor<4x8xf32>
  %3 = nn.add %m3, %late : tensor<4x8xf32>
  return %0, %1, %2, %3, %t : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests that a vocabulary-parallel block's gradient is written over the
// block's logits when only the block's statistics read them before it,
// and kept apart when another op reads them, or they are an argument.
// CHECK-LABEL: func.func @vocab_grad_in_place
// CHECK: nn.vocab_loss_grad %{{.*}} in_place {block_axes = array<i16: 0>}
// CHECK-LABEL: func.func @vocab_grad_kept
// CHECK-NOT: in_place
// CHECK-LABEL: func.func @vocab_grad_argument
// CHECK-NOT: in_place
// CHECK: return
shard.grid @mesh(shape = 2)
func.func @vocab_grad_in_place(%x: tensor<8x4xf32>, %w: tensor<4x16xf32>, %y: tensor<8xi32>, %g: tensor<8xf32>) -> (tensor<8xf32>, tensor<8x16xf32>) {
  %z = nn.matmul %x, %w : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %m, %s, %zy, %zs = nn.vocab_loss_stats %z, %y {block_axes = array<i16: 0>} : (tensor<8x16xf32>, tensor<8xi32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  %dz = nn.vocab_loss_grad %z, %y, %m, %s, %g {block_axes = array<i16: 0>} : (tensor<8x16xf32>, tensor<8xi32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8x16xf32>
  return %zy, %dz : tensor<8xf32>, tensor<8x16xf32>
}
func.func @vocab_grad_kept(%x: tensor<8x4xf32>, %w: tensor<4x16xf32>, %y: tensor<8xi32>, %g: tensor<8xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %z = nn.matmul %x, %w : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %m, %s, %zy, %zs = nn.vocab_loss_stats %z, %y {block_axes = array<i16: 0>} : (tensor<8x16xf32>, tensor<8xi32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  %dz = nn.vocab_loss_grad %z, %y, %m, %s, %g {block_axes = array<i16: 0>} : (tensor<8x16xf32>, tensor<8xi32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8x16xf32>
  %n = nn.neg %z : tensor<8x16xf32>
  return %n, %dz : tensor<8x16xf32>, tensor<8x16xf32>
}
func.func @vocab_grad_argument(%z: tensor<8x16xf32>, %y: tensor<8xi32>, %g: tensor<8xf32>) -> tensor<8x16xf32> {
  %m, %s, %zy, %zs = nn.vocab_loss_stats %z, %y {block_axes = array<i16: 0>} : (tensor<8x16xf32>, tensor<8xi32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  %dz = nn.vocab_loss_grad %z, %y, %m, %s, %g {block_axes = array<i16: 0>} : (tensor<8x16xf32>, tensor<8xi32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8x16xf32>
  return %dz : tensor<8x16xf32>
}

// -----

// Tests that under bf16 mixed precision a vocabulary-parallel block's
// statistics read the bf16 logits themselves (f32 statistics) and its
// gradient writes them rounded: no f32 block, no matmul_f32, no casts; the
// gradient then goes over the bf16 logits. A widening another op also
// reads stays for it; the loss still reads the bf16 logits (half the
// bytes), and its gradient, of an argument, stays apart.
// CHECK-LABEL: func.func @vocab_mixed_precision
// CHECK: %[[Z:.*]] = nn.matmul %{{.*}}, %{{.*}} : (tensor<8x4xbf16>, tensor<4x16xbf16>) -> tensor<8x16xbf16>
// CHECK: nn.vocab_loss_stats %[[Z]], %{{.*}} {block_axes = array<i16: 0>} : (tensor<8x16xbf16>, tensor<8xi32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK-NOT: nn.cast
// CHECK: %[[DZ:.*]] = nn.vocab_loss_grad %[[Z]], {{.*}} in_place {block_axes = array<i16: 0>} : (tensor<8x16xbf16>, tensor<8xi32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8x16xbf16>
// CHECK-NEXT: return %{{.*}}, %[[DZ]]
// CHECK-LABEL: func.func @vocab_widening_shared
// CHECK-SAME: (%[[Z:.*]]: tensor<8x16xbf16>,
// CHECK: %[[W:.*]] = nn.cast %[[Z]]
// CHECK: nn.vocab_loss_stats %[[Z]], {{.*}} -> (tensor<8xf32>,
// CHECK: %[[DZ:.*]] = nn.vocab_loss_grad %[[Z]], {{.*}} {block_axes = array<i16: 0>} : {{.*}} -> tensor<8x16xbf16>
// CHECK: %[[N:.*]] = nn.neg %[[W]]
// CHECK: return %[[N]], %[[DZ]]
shard.grid @mesh(shape = 2)
func.func @vocab_mixed_precision(%x: tensor<8x4xbf16>, %w: tensor<4x16xbf16>, %y: tensor<8xi32>, %g: tensor<8xf32>) -> (tensor<8xf32>, tensor<8x16xbf16>) {
  %z = nn.matmul %x, %w : (tensor<8x4xbf16>, tensor<4x16xbf16>) -> tensor<8x16xbf16>
  %wide = nn.cast %z : tensor<8x16xbf16> to tensor<8x16xf32>
  %m, %s, %zy, %zs = nn.vocab_loss_stats %wide, %y {block_axes = array<i16: 0>} : (tensor<8x16xf32>, tensor<8xi32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  %dz = nn.vocab_loss_grad %wide, %y, %m, %s, %g {block_axes = array<i16: 0>} : (tensor<8x16xf32>, tensor<8xi32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8x16xf32>
  %r = nn.cast %dz : tensor<8x16xf32> to tensor<8x16xbf16>
  return %zy, %r : tensor<8xf32>, tensor<8x16xbf16>
}
func.func @vocab_widening_shared(%z: tensor<8x16xbf16>, %y: tensor<8xi32>, %g: tensor<8xf32>) -> (tensor<8x16xf32>, tensor<8x16xbf16>) {
  %wide = nn.cast %z : tensor<8x16xbf16> to tensor<8x16xf32>
  %m, %s, %zy, %zs = nn.vocab_loss_stats %wide, %y {block_axes = array<i16: 0>} : (tensor<8x16xf32>, tensor<8xi32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  %dz = nn.vocab_loss_grad %wide, %y, %m, %s, %g {block_axes = array<i16: 0>} : (tensor<8x16xf32>, tensor<8xi32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8x16xf32>
  %r = nn.cast %dz : tensor<8x16xf32> to tensor<8x16xbf16>
  %n = nn.neg %wide : tensor<8x16xf32>
  return %n, %r : tensor<8x16xf32>, tensor<8x16xbf16>
}
