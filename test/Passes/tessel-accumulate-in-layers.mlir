// RUN: tessel-opt %s --split-input-file --tessel-accumulate-in-layers | FileCheck %s
// RUN: tessel-opt %s --split-input-file --tessel-accumulate-in-layers --tessel-fuse-epilogues --tessel-fuse-bias-grads | FileCheck %s --check-prefix=FUSED

// Tests that a repeat derivative's stacked weight gradient, accumulated
// into its buffer after the repeat, is summed in the layer instead: the
// layer takes a slice of the accumulator after its parameter slices and
// returns it updated after the carried values; the repeat takes the
// accumulator as outs and its updated outs replace the accumulate. The
// bias gradient (a sum, not a GEMM) stays stacked and accumulated after
// the repeat, and so does a stacked result read by something else than
// one accumulate (%x's).
// CHECK-LABEL: func.func private @layer_derivative
// CHECK-SAME: (%[[DY:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<8x8xf32>, %[[X:.*]]: tensor<4x8xf32>, %[[GW:.*]]: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>, tensor<8xf32>)
// CHECK: %[[DW:.*]] = nn.matmul %[[X]], %[[DY]] transpose_lhs
// CHECK: %[[DB:.*]] = nn.reduce_sum %[[DY]] dims = [0]
// CHECK: %[[DX:.*]] = nn.matmul %[[DY]], %[[W]] transpose_rhs
// CHECK: %[[UW:.*]] = nn.accumulate %[[DW]] outs(%[[GW]])
// CHECK-NEXT: return %[[DX]], %[[UW]], %[[X]], %[[DB]]
// CHECK-LABEL: func.func @backward
// CHECK: %[[R:.*]]:4 = nn.repeat @layer_derivative(%arg0) params(%arg1, %arg2) outs(%arg3) reverse : (tensor<4x8xf32>, tensor<3x8x8xf32>, tensor<3x4x8xf32>, tensor<3x8x8xf32>) -> (tensor<4x8xf32>, tensor<3x8x8xf32>, tensor<3x4x8xf32>, tensor<3x8xf32>)
// CHECK-NEXT: %[[B:.*]] = nn.accumulate %[[R]]#3 outs(%arg4)
// CHECK-NEXT: return %[[R]]#0, %[[R]]#1, %[[B]], %[[R]]#2
// The weight gradient's GEMM then adds into the slice, its bias gradient
// from the same GEMM.
// FUSED-LABEL: func.func private @layer_derivative
// FUSED: %[[UW:.*]], %[[DB:.*]] = nn.matmul_bias_grad %arg2, %arg0 transpose_lhs outs(%arg3)
// FUSED: return %{{.*}}, %[[UW]], %arg2, %[[DB]]
func.func private @layer_derivative(%dy: tensor<4x8xf32>, %w: tensor<8x8xf32>, %x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>, tensor<8xf32>) {
  %dw = nn.matmul %x, %dy transpose_lhs : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %db = nn.reduce_sum %dy dims = [0] : tensor<4x8xf32> -> tensor<8xf32>
  %dx = nn.matmul %dy, %w transpose_rhs : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %dx, %dw, %x, %db : tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>, tensor<8xf32>
}
func.func @backward(%dy: tensor<4x8xf32>, %w: tensor<3x8x8xf32>, %x: tensor<3x4x8xf32>, %gw: tensor<3x8x8xf32>, %gb: tensor<3x8xf32>) -> (tensor<4x8xf32>, tensor<3x8x8xf32>, tensor<3x8xf32>, tensor<3x4x8xf32>) {
  %0:4 = nn.repeat @layer_derivative(%dy) params(%w, %x) reverse : (tensor<4x8xf32>, tensor<3x8x8xf32>, tensor<3x4x8xf32>) -> (tensor<4x8xf32>, tensor<3x8x8xf32>, tensor<3x4x8xf32>, tensor<3x8xf32>)
  %1 = nn.accumulate %0#1 outs(%gw) : tensor<3x8x8xf32>
  %2 = nn.accumulate %0#3 outs(%gb) : tensor<3x8xf32>
  return %0#0, %1, %2, %0#2 : tensor<4x8xf32>, tensor<3x8x8xf32>, tensor<3x8xf32>, tensor<3x4x8xf32>
}

// -----

// Tests the accumulates that stay after the repeat: into an accumulator
// read between the repeat and the accumulate, into one the repeat
// itself reads, into one defined after the repeat, and of a stacked
// result read twice; and of a GEMM's product the layer also reads.
// CHECK-LABEL: func.func @stays
// CHECK: nn.repeat @layer(%arg0) params(%arg1) : (tensor<4x4xf32>, tensor<3x4x4xf32>) -> (tensor<4x4xf32>, tensor<3x4x4xf32>, tensor<3x4x4xf32>, tensor<3x4x4xf32>, tensor<3x4x4xf32>, tensor<3x4x4xf32>)
// CHECK-COUNT-5: nn.accumulate
func.func private @layer(%h: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %0 = nn.matmul %h, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %1 = nn.matmul %w, %h : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %2 = nn.matmul %h, %h : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %3 = nn.matmul %w, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %4 = nn.matmul %h, %w transpose_lhs : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %5 = nn.exp %4 : tensor<4x4xf32>
  return %5, %0, %1, %2, %3, %4 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}
func.func @stays(%h: tensor<4x4xf32>, %w: tensor<3x4x4xf32>, %a: tensor<3x4x4xf32>, %b: tensor<3x4x4xf32>) -> (tensor<3x4x4xf32>, tensor<3x4x4xf32>, tensor<3x4x4xf32>, tensor<3x4x4xf32>, tensor<3x4x4xf32>, tensor<3x4x4xf32>) {
  %0:6 = nn.repeat @layer(%h) params(%w) : (tensor<4x4xf32>, tensor<3x4x4xf32>) -> (tensor<4x4xf32>, tensor<3x4x4xf32>, tensor<3x4x4xf32>, tensor<3x4x4xf32>, tensor<3x4x4xf32>, tensor<3x4x4xf32>)
  %read = nn.exp %a : tensor<3x4x4xf32>
  %1 = nn.accumulate %0#1 outs(%a) : tensor<3x4x4xf32>
  %2 = nn.accumulate %0#2 outs(%w) : tensor<3x4x4xf32>
  %late = nn.exp %read : tensor<3x4x4xf32>
  %3 = nn.accumulate %0#3 outs(%late) : tensor<3x4x4xf32>
  %4 = nn.accumulate %0#4 outs(%read) : tensor<3x4x4xf32>
  %twice = nn.add %0#4, %4 : tensor<3x4x4xf32>
  %5 = nn.accumulate %0#5 outs(%b) : tensor<3x4x4xf32>
  return %1, %2, %3, %4, %twice, %5 : tensor<3x4x4xf32>, tensor<3x4x4xf32>, tensor<3x4x4xf32>, tensor<3x4x4xf32>, tensor<3x4x4xf32>, tensor<3x4x4xf32>
}

// -----

// Tests that a gradient the layer returns whole from its all-reduce (one
// all-reduce per gradient, as a ZeRO reduce-scatter's) is accumulated after
// the repeat as before: the stack holds it with no copy.
// CHECK-LABEL: func.func @bucketed
// CHECK: %[[R:.*]]:2 = nn.repeat @reduced_layer(%arg0) params(%arg1) :
// CHECK-NEXT: nn.accumulate %[[R]]#1 outs(%arg2)
shard.grid @mesh(shape = 2)
func.func private @reduced_layer(%h: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %0 = nn.matmul %h, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %1 = shard.all_reduce %0 on @mesh grid_axes = [0] : tensor<4x4xf32> -> tensor<4x4xf32>
  return %h, %1 : tensor<4x4xf32>, tensor<4x4xf32>
}
func.func @bucketed(%h: tensor<4x4xf32>, %w: tensor<3x4x4xf32>, %g: tensor<3x4x4xf32>) -> tensor<3x4x4xf32> {
  %0:2 = nn.repeat @reduced_layer(%h) params(%w) : (tensor<4x4xf32>, tensor<3x4x4xf32>) -> (tensor<4x4xf32>, tensor<3x4x4xf32>)
  %1 = nn.accumulate %0#1 outs(%g) : tensor<3x4x4xf32>
  return %1 : tensor<3x4x4xf32>
}

// -----

// Tests that the gradients a layer unpacks from its buckets' all-reduces
// (slices, through reshapes) are summed into their buffers in the layer:
// returned into the stack each would be a copy. The adds go before the
// return in the order of the slices (the first bucket's first), not of
// the results; the bias gradient of the first bucket moves too.
// CHECK-LABEL: func.func private @bucket_layer
// CHECK-SAME: (%{{[^:]*}}: tensor<4x4xf32>, %{{[^:]*}}: tensor<4x4xf32>, %[[G1:[^:]*]]: tensor<4x4xf32>, %[[G2:[^:]*]]: tensor<4xf32>, %[[G3:[^:]*]]: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>)
// CHECK: %[[S1:.*]] = shard.all_reduce
// CHECK: %[[S2:.*]] = shard.all_reduce
// CHECK: %[[W2:.*]] = nn.reshape
// CHECK: %[[B1:.*]] = nn.slice %[[S1]] start = [16]
// CHECK: %[[W1:.*]] = nn.reshape
// CHECK-NEXT: %[[U1:.*]] = nn.accumulate %[[W1]] outs(%[[G1]])
// CHECK-NEXT: %[[U2:.*]] = nn.accumulate %[[B1]] outs(%[[G2]])
// CHECK-NEXT: %[[U3:.*]] = nn.accumulate %[[W2]] outs(%[[G3]])
// CHECK-NEXT: return %{{.*}}, %[[U1]], %[[U2]], %[[U3]]
// CHECK-LABEL: func.func @buckets
// CHECK: %[[R:.*]]:4 = nn.repeat @bucket_layer(%arg0) params(%arg1) outs(%arg2, %arg3, %arg4) :
// CHECK-NEXT: return %[[R]]#1, %[[R]]#2, %[[R]]#3
shard.grid @mesh(shape = 2)
func.func private @bucket_layer(%h: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>) {
  %0 = nn.matmul %h, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %1 = nn.reduce_sum %h dims = [0] : tensor<4x4xf32> -> tensor<4xf32>
  %2 = nn.reshape %0 : tensor<4x4xf32> -> tensor<16xf32>
  %3 = nn.concat %2, %1 dim = 0 : (tensor<16xf32>, tensor<4xf32>) -> tensor<20xf32>
  %4 = shard.all_reduce %3 on @mesh grid_axes = [0] : tensor<20xf32> -> tensor<20xf32>
  %5 = nn.matmul %w, %h : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %6 = nn.reshape %5 : tensor<4x4xf32> -> tensor<16xf32>
  %7 = nn.concat %6, %6 dim = 0 : (tensor<16xf32>, tensor<16xf32>) -> tensor<32xf32>
  %8 = shard.all_reduce %7 on @mesh grid_axes = [0] : tensor<32xf32> -> tensor<32xf32>
  %9 = nn.slice %8 start = [16] limit = [32] : tensor<32xf32> -> tensor<16xf32>
  %10 = nn.reshape %9 : tensor<16xf32> -> tensor<4x4xf32>
  %11 = nn.slice %4 start = [16] limit = [20] : tensor<20xf32> -> tensor<4xf32>
  %12 = nn.slice %4 start = [0] limit = [16] : tensor<20xf32> -> tensor<16xf32>
  %13 = nn.reshape %12 : tensor<16xf32> -> tensor<4x4xf32>
  return %h, %13, %11, %10 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>
}
func.func @buckets(%h: tensor<4x4xf32>, %w: tensor<3x4x4xf32>, %g1: tensor<3x4x4xf32>, %g2: tensor<3x4xf32>, %g3: tensor<3x4x4xf32>) -> (tensor<3x4x4xf32>, tensor<3x4xf32>, tensor<3x4x4xf32>) {
  %0:4 = nn.repeat @bucket_layer(%h) params(%w) : (tensor<4x4xf32>, tensor<3x4x4xf32>) -> (tensor<4x4xf32>, tensor<3x4x4xf32>, tensor<3x4xf32>, tensor<3x4x4xf32>)
  %1 = nn.accumulate %0#1 outs(%g1) : tensor<3x4x4xf32>
  %2 = nn.accumulate %0#2 outs(%g2) : tensor<3x4xf32>
  %3 = nn.accumulate %0#3 outs(%g3) : tensor<3x4x4xf32>
  return %1, %2, %3 : tensor<3x4x4xf32>, tensor<3x4xf32>, tensor<3x4x4xf32>
}

// -----

// Tests that a layer function two repeats share keeps its signature.
// CHECK-LABEL: func.func @shared_layer
// CHECK-COUNT-2: nn.accumulate
func.func private @twice(%h: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %0 = nn.matmul %h, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %h, %0 : tensor<4x4xf32>, tensor<4x4xf32>
}
func.func @shared_layer(%h: tensor<4x4xf32>, %w: tensor<3x4x4xf32>, %g: tensor<3x4x4xf32>, %k: tensor<3x4x4xf32>) -> (tensor<3x4x4xf32>, tensor<3x4x4xf32>) {
  %0:2 = nn.repeat @twice(%h) params(%w) : (tensor<4x4xf32>, tensor<3x4x4xf32>) -> (tensor<4x4xf32>, tensor<3x4x4xf32>)
  %1 = nn.accumulate %0#1 outs(%g) : tensor<3x4x4xf32>
  %2:2 = nn.repeat @twice(%h) params(%w) : (tensor<4x4xf32>, tensor<3x4x4xf32>) -> (tensor<4x4xf32>, tensor<3x4x4xf32>)
  %3 = nn.accumulate %2#1 outs(%k) : tensor<3x4x4xf32>
  return %1, %3 : tensor<3x4x4xf32>, tensor<3x4x4xf32>
}

// -----

// Tests that a repeat with outs already takes the next accumulators after
// them, its layer their slices after the existing ones.
// CHECK-LABEL: func.func private @again
// CHECK-SAME: (%{{.*}}: tensor<4x4xf32>, %{{.*}}: tensor<4x4xf32>, %[[A:.*]]: tensor<4x4xf32>, %[[B:.*]]: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>)
// CHECK: %[[UB:.*]] = nn.accumulate %{{.*}} outs(%[[B]])
// CHECK-NEXT: return %{{.*}}, %{{.*}}, %[[UB]]
// CHECK-LABEL: func.func @more_outs
// CHECK: nn.repeat @again(%arg0) params(%arg1) outs(%arg2, %arg3) : {{.*}} -> (tensor<4x4xf32>, tensor<3x4x4xf32>, tensor<3x4x4xf32>)
func.func private @again(%h: tensor<4x4xf32>, %w: tensor<4x4xf32>, %a: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %0 = nn.matmul %h, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %1 = nn.accumulate %0 outs(%a) : tensor<4x4xf32>
  %2 = nn.matmul %w, %h : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %h, %1, %2 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}
func.func @more_outs(%h: tensor<4x4xf32>, %w: tensor<3x4x4xf32>, %a: tensor<3x4x4xf32>, %b: tensor<3x4x4xf32>) -> (tensor<3x4x4xf32>, tensor<3x4x4xf32>) {
  %0:3 = nn.repeat @again(%h) params(%w) outs(%a) : (tensor<4x4xf32>, tensor<3x4x4xf32>, tensor<3x4x4xf32>) -> (tensor<4x4xf32>, tensor<3x4x4xf32>, tensor<3x4x4xf32>)
  %1 = nn.accumulate %0#2 outs(%b) : tensor<3x4x4xf32>
  return %0#1, %1 : tensor<3x4x4xf32>, tensor<3x4x4xf32>
}

// -----

// Tests that a weight gradient the layer computes in bf16 and casts to its
// f32 accumulator (tessel-mixed-precision) is summed in the layer too: the
// cast and the add run per layer, without an f32 stack of every layer's
// gradient.
// CHECK-LABEL: func.func private @bf16_layer
// CHECK-SAME: %[[G:[^:]*]]: tensor<4x4xf32>) -> (tensor<4x4xbf16>, tensor<4x4xf32>)
// CHECK: %[[P:.*]] = nn.matmul
// CHECK-NEXT: %[[C:.*]] = nn.cast %[[P]] : tensor<4x4xbf16> to tensor<4x4xf32>
// CHECK-NEXT: %[[U:.*]] = nn.accumulate %[[C]] outs(%[[G]])
// CHECK-NEXT: return %arg0, %[[U]]
// CHECK-LABEL: func.func @bf16_gradient
// CHECK: nn.repeat @bf16_layer(%arg0) params(%arg1) outs(%arg2)
// The fusion then sums the bf16 GEMM straight into the f32 slice.
// FUSED-LABEL: func.func private @bf16_layer
// FUSED-NEXT: %[[U:.*]] = nn.matmul_accumulate %arg0, %arg1 transpose_lhs outs(%arg2) : (tensor<4x4xbf16>, tensor<4x4xbf16>, tensor<4x4xf32>) -> tensor<4x4xf32>
// FUSED-NEXT: return %arg0, %[[U]]
func.func private @bf16_layer(%h: tensor<4x4xbf16>, %w: tensor<4x4xbf16>) -> (tensor<4x4xbf16>, tensor<4x4xf32>) {
  %0 = nn.matmul %h, %w transpose_lhs : (tensor<4x4xbf16>, tensor<4x4xbf16>) -> tensor<4x4xbf16>
  %1 = nn.cast %0 : tensor<4x4xbf16> to tensor<4x4xf32>
  return %h, %1 : tensor<4x4xbf16>, tensor<4x4xf32>
}
func.func @bf16_gradient(%h: tensor<4x4xbf16>, %w: tensor<3x4x4xbf16>, %g: tensor<3x4x4xf32>) -> tensor<3x4x4xf32> {
  %0:2 = nn.repeat @bf16_layer(%h) params(%w) : (tensor<4x4xbf16>, tensor<3x4x4xbf16>) -> (tensor<4x4xbf16>, tensor<3x4x4xf32>)
  %1 = nn.accumulate %0#1 outs(%g) : tensor<3x4x4xf32>
  return %1 : tensor<3x4x4xf32>
}
