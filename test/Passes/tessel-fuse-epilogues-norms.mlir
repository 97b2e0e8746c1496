// RUN: tessel-opt %s --split-input-file --tessel-fuse-epilogues | FileCheck %s
// RUN: tessel-opt %s --split-input-file --tessel-fuse-epilogues=residual-norms=false | FileCheck %s --check-prefix=OFF

// Tests that a residual add and the layer norm of its sum become one
// nn.add_norm where the add stood: the stream goes on with its first
// result, the norm's users read its second.
// CHECK-LABEL: func.func @add_layer_norm
// CHECK-NEXT: %[[S:.*]], %[[Y:.*]] = nn.add_norm %arg0, %arg1, %arg2, %arg3 {epsilon = 1.000000e-05 : f64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>)
// CHECK-NEXT: %[[M:.*]] = nn.mul %[[Y]], %[[S]]
// CHECK-NEXT: %[[R:.*]] = nn.add %[[S]], %[[M]]
// CHECK-NEXT: return %[[R]]
// OFF-LABEL: func.func @add_layer_norm
// OFF-NOT: nn.add_norm
// OFF: nn.layer_norm
func.func @add_layer_norm(%h: tensor<2x4x8xf32>, %o: tensor<2x4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %s = nn.add %h, %o : tensor<2x4x8xf32>
  %y = nn.layer_norm %s, %g, %b : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %m = nn.mul %y, %s : tensor<2x4x8xf32>
  %r = nn.add %s, %m : tensor<2x4x8xf32>
  return %r : tensor<2x4x8xf32>
}

// -----

// Tests that an RMS norm fuses too (no beta) and keeps its epsilon.
// CHECK-LABEL: func.func @add_rms_norm
// CHECK-NEXT: %[[S:.*]], %[[Y:.*]] = nn.add_norm %arg0, %arg1, %arg2 {epsilon = 9.9999999999999995E-7 : f64} : (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<8xbf16>) -> (tensor<4x8xbf16>, tensor<4x8xbf16>)
// CHECK-NEXT: return %[[S]], %[[Y]]
func.func @add_rms_norm(%h: tensor<4x8xbf16>, %o: tensor<4x8xbf16>, %g: tensor<8xbf16>) -> (tensor<4x8xbf16>, tensor<4x8xbf16>) {
  %s = nn.add %h, %o : tensor<4x8xbf16>
  %y = nn.rms_norm %s, %g : (tensor<4x8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16>
  return %s, %y : tensor<4x8xbf16>, tensor<4x8xbf16>
}

// -----

// Tests that a gamma computed after the add (as a ZeRO-3 gather is) moves
// the fused op to where the norm stood, when nothing reads the sum before.
// CHECK-LABEL: func.func @late_gamma
// CHECK-NEXT: %[[G:.*]] = nn.mul %arg2, %arg2
// CHECK-NEXT: %[[S:.*]], %[[Y:.*]] = nn.add_norm %arg0, %arg1, %[[G]]
// CHECK-NEXT: return %[[S]], %[[Y]]
func.func @late_gamma(%h: tensor<4x8xf32>, %o: tensor<4x8xf32>, %g: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %s = nn.add %h, %o : tensor<4x8xf32>
  %g2 = nn.mul %g, %g : tensor<8xf32>
  %y = nn.rms_norm %s, %g2 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %s, %y : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests what must not fuse: a late gamma with the sum read in between (the
// fused op can stand neither at the add nor at the norm), and the norm of
// a linear layer's output, whose add is the GEMM's bias epilogue.
// CHECK-LABEL: func.func @add_norm_not_fused
// CHECK-NOT: nn.add_norm
// CHECK: nn.matmul_bias
// CHECK-NOT: nn.add_norm
// CHECK: return
func.func @add_norm_not_fused(%h: tensor<4x8xf32>, %o: tensor<4x8xf32>, %g: tensor<8xf32>, %w: tensor<8x8xf32>, %bias: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %s = nn.add %h, %o : tensor<4x8xf32>
  %e = nn.exp %s : tensor<4x8xf32>
  %g2 = nn.mul %g, %g : tensor<8xf32>
  %y = nn.rms_norm %s, %g2 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %p = nn.matmul %h, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %bb = nn.broadcast %bias dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %pb = nn.add %p, %bb : tensor<4x8xf32>
  %z = nn.rms_norm %pb, %g : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %e, %y, %z : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests that a layer norm's input gradient added to the residual stream's
// gradient becomes nn.norm_grad_add where the gradient stood; its
// parameter gradients keep their users.
// CHECK-LABEL: func.func @norm_grad_add
// CHECK-NEXT: %[[DX:.*]], %[[DG:.*]], %[[DB:.*]] = nn.norm_grad_add %arg0, %arg1, %arg2, %arg3 {epsilon = 1.000000e-05 : f64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK-NEXT: return %[[DX]], %[[DG]], %[[DB]]
// OFF-LABEL: func.func @norm_grad_add
// OFF-NEXT: nn.layer_norm_grad
// OFF-NEXT: nn.add
func.func @norm_grad_add(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %dy: tensor<4x8xf32>, %dres: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %dx, %dg, %db = nn.layer_norm_grad %x, %g, %dy : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %d = nn.add %dx, %dres : tensor<4x8xf32>
  return %d, %dg, %db : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// Tests an RMS norm's gradient (rms, no dbeta) whose other addend is
// computed after it: the fused op stands where the add stood.
// CHECK-LABEL: func.func @rms_norm_grad_add_late_residual
// CHECK-NEXT: %[[R:.*]] = nn.exp %arg3
// CHECK-NEXT: %[[DX:.*]], %[[DG:.*]] = nn.norm_grad_add %arg0, %arg1, %arg2, %[[R]] {epsilon = 9.9999999999999995E-7 : f64, rms} : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
// CHECK-NEXT: %[[E:.*]] = nn.exp %[[DG]]
// CHECK-NEXT: return %[[DX]], %[[E]]
func.func @rms_norm_grad_add_late_residual(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %dy: tensor<4x8xf32>, %t: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %dx, %dg = nn.rms_norm_grad %x, %g, %dy : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
  %dres = nn.exp %t : tensor<4x8xf32>
  %d = nn.add %dres, %dx : tensor<4x8xf32>
  %e = nn.exp %dg : tensor<8xf32>
  return %d, %e : tensor<4x8xf32>, tensor<8xf32>
}

// -----

// Tests what must not fuse: the input gradient read twice; a late addend
// with a parameter gradient read before the add; the input gradient added
// to itself.
// CHECK-LABEL: func.func @norm_grad_add_not_fused
// CHECK-NOT: nn.norm_grad_add
// CHECK: return
func.func @norm_grad_add_not_fused(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %dy: tensor<4x8xf32>, %dres: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) {
  %dx, %dg, %db = nn.layer_norm_grad %x, %g, %dy : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %d = nn.add %dx, %dres : tensor<4x8xf32>
  %e = nn.exp %dx : tensor<4x8xf32>
  %dx2, %dg2 = nn.rms_norm_grad %x, %g, %dy : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
  %eg = nn.exp %dg2 : tensor<8xf32>
  %late = nn.exp %dres : tensor<4x8xf32>
  %d2 = nn.add %late, %dx2 : tensor<4x8xf32>
  %dx3:2 = nn.rms_norm_grad %x, %g, %dres : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
  %d3 = nn.add %dx3#0, %dx3#0 : tensor<4x8xf32>
  return %d, %e, %d2, %eg, %d3 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>
}

// -----

// Tests that the add stays apart when it is the last work of its block and
// a collective reduces the norm's parameter gradients: the add is what
// tessel-overlap-communication overlaps it with. With work after the add,
// it fuses.
// CHECK-LABEL: func.func @add_covers_collective
// CHECK-NOT: nn.norm_grad_add
// CHECK: return
// CHECK-LABEL: func.func @work_after_add
// CHECK: nn.norm_grad_add
shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
func.func @add_covers_collective(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %dy: tensor<4x8xf32>, %dres: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %dx, %dg = nn.rms_norm_grad %x, %g, %dy : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
  %d = nn.add %dres, %dx : tensor<4x8xf32>
  %r = shard.all_reduce %dg on @mesh grid_axes = [0] : tensor<8xf32> -> tensor<8xf32>
  return %d, %r : tensor<4x8xf32>, tensor<8xf32>
}
func.func @work_after_add(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %dy: tensor<4x8xf32>, %dres: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %dx, %dg = nn.rms_norm_grad %x, %g, %dy : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
  %d = nn.add %dres, %dx : tensor<4x8xf32>
  %r = shard.all_reduce %dg on @mesh grid_axes = [0] : tensor<8xf32> -> tensor<8xf32>
  %e = nn.exp %d : tensor<4x8xf32>
  return %e, %r : tensor<4x8xf32>, tensor<8xf32>
}

// -----

// Tests that the f32 widenings of a bf16 norm gradient's parameter
// gradients (a bf16 step's f32 gradients) fold into it: the gradient
// returns them in f32 and the casts go. With the residual add too, the
// fused op keeps the f32 types. Not a residual fusion: on with it off.
// CHECK-LABEL: func.func @param_grads_widened
// CHECK-NEXT: %[[DX:.*]], %[[DG:.*]], %[[DB:.*]] = nn.norm_grad_add %arg0, %arg1, %arg2, %arg3 {epsilon = 1.000000e-05 : f64} : (tensor<4x8xbf16>, tensor<8xbf16>, tensor<4x8xbf16>, tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>)
// CHECK-NEXT: %[[DX2:.*]], %[[DG2:.*]] = nn.rms_norm_grad %arg0, %arg1, %arg2 {{.*}} -> (tensor<4x8xbf16>, tensor<8xf32>)
// CHECK-NEXT: %[[E:.*]] = nn.exp %[[DG2]] : tensor<8xf32>
// CHECK-NEXT: return %[[DX]], %[[DG]], %[[DB]], %[[DX2]], %[[E]]
// OFF-LABEL: func.func @param_grads_widened
// OFF-NEXT: nn.layer_norm_grad {{.*}} -> (tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>)
// OFF-NEXT: nn.add
// OFF-NEXT: nn.rms_norm_grad {{.*}} -> (tensor<4x8xbf16>, tensor<8xf32>)
// OFF-NOT: nn.cast
// OFF: return
func.func @param_grads_widened(%x: tensor<4x8xbf16>, %g: tensor<8xbf16>, %dy: tensor<4x8xbf16>, %dres: tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>, tensor<4x8xbf16>, tensor<8xf32>) {
  %dx, %dg, %db = nn.layer_norm_grad %x, %g, %dy : (tensor<4x8xbf16>, tensor<8xbf16>, tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<8xbf16>, tensor<8xbf16>)
  %d = nn.add %dx, %dres : tensor<4x8xbf16>
  %dg32 = nn.cast %dg : tensor<8xbf16> to tensor<8xf32>
  %db32 = nn.cast %db : tensor<8xbf16> to tensor<8xf32>
  %dx2, %dg2 = nn.rms_norm_grad %x, %g, %dy {epsilon = 1.0e-6 : f64} : (tensor<4x8xbf16>, tensor<8xbf16>, tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<8xbf16>)
  %w = nn.cast %dg2 : tensor<8xbf16> to tensor<8xf32>
  %e = nn.exp %w : tensor<8xf32>
  return %d, %dg32, %db32, %dx2, %e : tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>, tensor<4x8xbf16>, tensor<8xf32>
}

// -----

// Tests what keeps its casts: a parameter gradient read in bf16 too (the
// two stay one type), one of the two not widened, an f32 gradient's cast
// to f64 (not a 16-bit one's widening).
// CHECK-LABEL: func.func @param_grads_not_widened
// CHECK-NEXT: nn.layer_norm_grad {{.*}} -> (tensor<4x8xbf16>, tensor<8xbf16>, tensor<8xbf16>)
// CHECK-NEXT: nn.cast {{.*}} to tensor<8xf32>
// CHECK-NEXT: nn.cast {{.*}} to tensor<8xf32>
// CHECK-NEXT: nn.layer_norm_grad {{.*}} -> (tensor<4x8xbf16>, tensor<8xbf16>, tensor<8xbf16>)
// CHECK-NEXT: nn.cast {{.*}} to tensor<8xf32>
// CHECK-NEXT: nn.rms_norm_grad {{.*}} -> (tensor<4x8xf32>, tensor<8xf32>)
// CHECK-NEXT: nn.cast {{.*}} to tensor<8xf64>
// CHECK-NEXT: return
func.func @param_grads_not_widened(%x: tensor<4x8xbf16>, %g: tensor<8xbf16>, %dy: tensor<4x8xbf16>, %x32: tensor<4x8xf32>, %g32: tensor<8xf32>) -> (tensor<4x8xbf16>, tensor<8xf32>, tensor<8xbf16>, tensor<8xf32>, tensor<4x8xbf16>, tensor<8xf32>, tensor<8xbf16>, tensor<4x8xf32>, tensor<8xf64>) {
  %dx, %dg, %db = nn.layer_norm_grad %x, %g, %dy : (tensor<4x8xbf16>, tensor<8xbf16>, tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<8xbf16>, tensor<8xbf16>)
  %dg32 = nn.cast %dg : tensor<8xbf16> to tensor<8xf32>
  %db32 = nn.cast %db : tensor<8xbf16> to tensor<8xf32>
  %dx2, %dg2, %db2 = nn.layer_norm_grad %x, %g, %dy : (tensor<4x8xbf16>, tensor<8xbf16>, tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<8xbf16>, tensor<8xbf16>)
  %dg2w = nn.cast %dg2 : tensor<8xbf16> to tensor<8xf32>
  %dx3, %dg3 = nn.rms_norm_grad %x32, %g32, %x32 : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
  %dg3w = nn.cast %dg3 : tensor<8xf32> to tensor<8xf64>
  return %dx, %dg32, %db, %db32, %dx2, %dg2w, %db2, %dx3, %dg3w : tensor<4x8xbf16>, tensor<8xf32>, tensor<8xbf16>, tensor<8xf32>, tensor<4x8xbf16>, tensor<8xf32>, tensor<8xbf16>, tensor<4x8xf32>, tensor<8xf64>
}
