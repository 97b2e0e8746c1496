// RUN: tessel-opt %s -tessel-overlap-communication --split-input-file | FileCheck %s
// RUN: tessel-opt %s -tessel-overlap-communication=in-flight=1 --split-input-file | FileCheck %s --check-prefix=ONE
// RUN: not tessel-opt %s -tessel-overlap-communication=in-flight=0 --split-input-file 2>&1 | FileCheck %s --check-prefix=WINDOW

// The window holds at least one collective.
// WINDOW: tessel-overlap-communication: in-flight must be at least 1, not 0

// Tests that a gradient bucket's all-reduce starts as soon as its input is
// ready (it moves above the unrelated matmul), that the slices unpacking it
// move down to their first use, and that its wait stands before them, so
// the matmul and the gelu run while the bucket is reduced.
// CHECK-LABEL: func.func @bucket
// CHECK: %[[FLAT:.*]] = nn.concat
// CHECK-NEXT: %[[AR:.*]] = shard.all_reduce %[[FLAT]] on @mesh grid_axes = [0] {nn.async}
// CHECK-NEXT: nn.matmul
// CHECK-NEXT: nn.gelu
// CHECK-NEXT: %[[DONE:.*]] = nn.wait %[[AR]] : tensor<24xf32>
// CHECK-NEXT: nn.slice %[[DONE]]
// CHECK-NEXT: nn.slice %[[DONE]]
// CHECK-NEXT: return
shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
func.func @bucket(%ga: tensor<8xf32>, %gb: tensor<16xf32>, %x: tensor<4x8xf32>, %w: tensor<8x8xf32>)
    -> (tensor<8xf32>, tensor<16xf32>, tensor<4x8xf32>) {
  %flat = nn.concat %ga, %gb dim = 0 : (tensor<8xf32>, tensor<16xf32>) -> tensor<24xf32>
  %y = nn.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %sum = shard.all_reduce %flat on @mesh grid_axes = [0] : tensor<24xf32> -> tensor<24xf32>
  %a = nn.slice %sum start = [0] limit = [8] strides = [1] : tensor<24xf32> -> tensor<8xf32>
  %b = nn.slice %sum start = [8] limit = [24] strides = [1] : tensor<24xf32> -> tensor<16xf32>
  %z = nn.gelu %y : tensor<4x8xf32>
  return %a, %b, %z : tensor<8xf32>, tensor<16xf32>, tensor<4x8xf32>
}

// -----

// Tests that a collective with nothing to overlap stays blocking: its
// result is needed by the very next op.
// CHECK-LABEL: func.func @nothing_to_overlap
// CHECK: shard.all_reduce
// CHECK-NOT: nn.async
// CHECK-NOT: nn.wait
shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
func.func @nothing_to_overlap(%x: tensor<8xf32>) -> tensor<8xf32> {
  %e = nn.exp %x : tensor<8xf32>
  %s = shard.all_reduce %e on @mesh grid_axes = [0] : tensor<8xf32> -> tensor<8xf32>
  %r = nn.exp %s : tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// Tests that a bias broadcast only a binary op reads is no cover (the
// memory plan reads it where it lies, tessel.view: no kernel), so a
// row-parallel all-reduce before its bias add stays blocking; a broadcast
// a matmul reads is copied, a cover.
// CHECK-LABEL: func.func @bias_is_no_cover
// CHECK: shard.all_reduce
// CHECK-NOT: nn.async
// CHECK: nn.add
// CHECK-LABEL: func.func @copied_broadcast_covers
// CHECK: shard.all_reduce {{.*}} {nn.async}
// CHECK: nn.broadcast
// CHECK: nn.wait
shard.grid @mesh(shape = 2) {nn.axis_names = ["tp"]}
func.func @bias_is_no_cover(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %p = nn.exp %x : tensor<4x8xf32>
  %s = shard.all_reduce %p on @mesh grid_axes = [0] : tensor<4x8xf32> -> tensor<4x8xf32>
  %bb = nn.broadcast %b dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %y = nn.add %s, %bb : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
func.func @copied_broadcast_covers(%x: tensor<4x8xf32>, %b: tensor<8xf32>, %w: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %p = nn.exp %x : tensor<4x8xf32>
  %s = shard.all_reduce %p on @mesh grid_axes = [0] : tensor<4x8xf32> -> tensor<4x8xf32>
  %bb = nn.broadcast %b dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %m = nn.matmul %bb, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %y = nn.exp %s : tensor<4x8xf32>
  return %y, %m : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests that ZeRO-3's gathers of arguments are prefetched in the order of
// need, two at a time: the first two start where they stand, the third
// where the first is waited for, the fourth where the second is. Each
// waits just before its first use (through the reshape that views it).
// With in-flight=1 the second starts where the first is waited for.
// CHECK-LABEL: func.func @prefetch
// CHECK-NEXT: %[[G0:.*]] = shard.all_gather %arg1 {{.*}} {nn.async}
// CHECK-NEXT: %[[G1:.*]] = shard.all_gather %arg2 {{.*}} {nn.async}
// CHECK-NEXT: %[[X:.*]] = nn.exp %arg0
// CHECK-NEXT: %[[W0:.*]] = nn.wait %[[G0]]
// CHECK-NEXT: %[[G2:.*]] = shard.all_gather %arg3 {{.*}} {nn.async}
// CHECK-NEXT: nn.reshape %[[W0]]
// CHECK-NEXT: nn.matmul
// CHECK-NEXT: %[[W1:.*]] = nn.wait %[[G1]]
// CHECK-NEXT: %[[G3:.*]] = shard.all_gather %arg4 {{.*}} {nn.async}
// CHECK-NEXT: nn.reshape %[[W1]]
// CHECK-NEXT: nn.matmul
// CHECK-NEXT: nn.wait %[[G2]]
// CHECK-NEXT: nn.reshape
// CHECK-NEXT: nn.matmul
// CHECK-NEXT: nn.wait %[[G3]]
// CHECK-NEXT: nn.reshape
// CHECK-NEXT: nn.matmul
// CHECK-NEXT: return
// ONE-LABEL: func.func @prefetch
// ONE-NEXT: %[[G0:.*]] = shard.all_gather %arg1 {{.*}} {nn.async}
// ONE-NEXT: nn.exp
// ONE-NEXT: nn.wait %[[G0]]
// ONE-NEXT: shard.all_gather %arg2 {{.*}} {nn.async}
shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
func.func @prefetch(%x: tensor<4x8xf32>, %s0: tensor<32xf32>, %s1: tensor<32xf32>,
                    %s2: tensor<32xf32>, %s3: tensor<32xf32>) -> tensor<4x8xf32> {
  %g3 = shard.all_gather %s3 on @mesh grid_axes = [0] gather_axis = 0 : tensor<32xf32> -> tensor<64xf32>
  %g2 = shard.all_gather %s2 on @mesh grid_axes = [0] gather_axis = 0 : tensor<32xf32> -> tensor<64xf32>
  %g1 = shard.all_gather %s1 on @mesh grid_axes = [0] gather_axis = 0 : tensor<32xf32> -> tensor<64xf32>
  %g0 = shard.all_gather %s0 on @mesh grid_axes = [0] gather_axis = 0 : tensor<32xf32> -> tensor<64xf32>
  %w3 = nn.reshape %g3 : tensor<64xf32> -> tensor<8x8xf32>
  %w2 = nn.reshape %g2 : tensor<64xf32> -> tensor<8x8xf32>
  %w1 = nn.reshape %g1 : tensor<64xf32> -> tensor<8x8xf32>
  %w0 = nn.reshape %g0 : tensor<64xf32> -> tensor<8x8xf32>
  %e = nn.exp %x : tensor<4x8xf32>
  %h0 = nn.matmul %e, %w0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %h1 = nn.matmul %h0, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %h2 = nn.matmul %h1, %w2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %h3 = nn.matmul %h2, %w3 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %h3 : tensor<4x8xf32>
}

// -----

// Tests that ZeRO's reduce-scatters start right after each gradient (the
// reshape flattening it moves up with them), and that with two in flight
// the first completes before the third starts; the last, with nothing
// after it, blocks. With in-flight=1 each completes before the next starts.
// CHECK-LABEL: func.func @reduce_scatters
// CHECK: %[[D0:.*]] = nn.exp %arg0
// CHECK-NEXT: %[[F0:.*]] = nn.reshape %[[D0]]
// CHECK-NEXT: %[[R0:.*]] = shard.reduce_scatter %[[F0]] {{.*}} {nn.async}
// CHECK-NEXT: %[[D1:.*]] = nn.tanh %arg0
// CHECK-NEXT: %[[F1:.*]] = nn.reshape %[[D1]]
// CHECK-NEXT: %[[R1:.*]] = shard.reduce_scatter %[[F1]] {{.*}} {nn.async}
// CHECK-NEXT: %[[D2:.*]] = nn.sigmoid %arg0
// CHECK-NEXT: %[[F2:.*]] = nn.reshape %[[D2]]
// CHECK-NEXT: nn.wait %[[R0]]
// CHECK-NEXT: %[[R2:.*]] = shard.reduce_scatter %[[F2]]
// CHECK-NOT: nn.async
// CHECK-SAME: -> tensor<16xf32>
// CHECK-NEXT: nn.wait %[[R1]]
// CHECK-NEXT: return
// ONE-LABEL: func.func @reduce_scatters
// ONE: %[[R0:.*]] = shard.reduce_scatter {{.*}} {nn.async}
// ONE-NEXT: nn.tanh
// ONE-NEXT: nn.reshape
// ONE-NEXT: nn.wait %[[R0]]
// ONE-NEXT: shard.reduce_scatter {{.*}} {nn.async}
shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
func.func @reduce_scatters(%x: tensor<4x8xf32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) {
  %d0 = nn.exp %x : tensor<4x8xf32>
  %d1 = nn.tanh %x : tensor<4x8xf32>
  %d2 = nn.sigmoid %x : tensor<4x8xf32>
  %f0 = nn.reshape %d0 : tensor<4x8xf32> -> tensor<32xf32>
  %r0 = shard.reduce_scatter %f0 on @mesh grid_axes = [0] scatter_axis = 0 : tensor<32xf32> -> tensor<16xf32>
  %f1 = nn.reshape %d1 : tensor<4x8xf32> -> tensor<32xf32>
  %r1 = shard.reduce_scatter %f1 on @mesh grid_axes = [0] scatter_axis = 0 : tensor<32xf32> -> tensor<16xf32>
  %f2 = nn.reshape %d2 : tensor<4x8xf32> -> tensor<32xf32>
  %r2 = shard.reduce_scatter %f2 on @mesh grid_axes = [0] scatter_axis = 0 : tensor<32xf32> -> tensor<16xf32>
  return %r0, %r1, %r2 : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>
}

// -----

// Tests that the wait comes before a later op touches the collective's
// input: the accumulate updates it in place.
// CHECK-LABEL: func.func @input_updated_later
// CHECK: %[[AR:.*]] = shard.all_reduce %arg0 {{.*}} {nn.async}
// CHECK-NEXT: nn.exp %arg1
// CHECK-NEXT: nn.wait %[[AR]]
// CHECK-NEXT: nn.accumulate %{{.*}} outs(%arg0)
shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
func.func @input_updated_later(%g: tensor<8xf32>, %x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %s = shard.all_reduce %g on @mesh grid_axes = [0] : tensor<8xf32> -> tensor<8xf32>
  %e = nn.exp %x : tensor<8xf32>
  %acc = nn.accumulate %e outs(%g) : tensor<8xf32>
  %t = nn.exp %s : tensor<8xf32>
  return %acc, %t : tensor<8xf32>, tensor<8xf32>
}

// -----

// Tests that an op reading the collective's input through a slice taken
// before it (the memory plan may make the slice a view of those bytes)
// counts as touching the input too: the wait comes before it.
// CHECK-LABEL: func.func @input_read_through_a_slice
// CHECK: %[[V:.*]] = nn.slice %arg0
// CHECK-NEXT: %[[AR:.*]] = shard.all_reduce %arg0 {{.*}} {nn.async}
// CHECK-NEXT: nn.exp %arg1
// CHECK-NEXT: nn.wait %[[AR]]
// CHECK-NEXT: nn.accumulate %{{.*}} outs(%[[V]])
shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
func.func @input_read_through_a_slice(%g: tensor<8xf32>, %x: tensor<4xf32>) -> (tensor<4xf32>, tensor<8xf32>) {
  %v = nn.slice %g start = [0] limit = [4] : tensor<8xf32> -> tensor<4xf32>
  %s = shard.all_reduce %g on @mesh grid_axes = [0] : tensor<8xf32> -> tensor<8xf32>
  %e = nn.exp %x : tensor<4xf32>
  %acc = nn.accumulate %e outs(%v) : tensor<4xf32>
  %t = nn.exp %s : tensor<8xf32>
  return %acc, %t : tensor<4xf32>, tensor<8xf32>
}

// -----

// Tests that a repeated layer's gathers of its parameter slices move into
// a prefetch its repeat runs one layer ahead: the layer takes the gathered
// values as arguments (nn.prefetched) and waits for each at its first use
// (the reshape viewing it moves down to the matmul); the prefetch starts
// them in that order and returns them in flight.
// CHECK-LABEL: func.func private @layer
// CHECK-SAME: %[[W:[^:]*]]: tensor<64xf32> {nn.prefetched}, %[[B:[^:]*]]: tensor<8xf32> {nn.prefetched}
// CHECK-NOT: shard.all_gather
// CHECK: nn.exp
// CHECK-NEXT: %[[WW:.*]] = nn.wait %[[W]] : tensor<64xf32>
// CHECK-NEXT: nn.reshape %[[WW]]
// CHECK-NEXT: nn.matmul
// CHECK-NEXT: %[[BW:.*]] = nn.wait %[[B]] : tensor<8xf32>
// CHECK-NEXT: nn.broadcast %[[BW]]
// CHECK-LABEL: func.func private @layer_prefetch
// CHECK-SAME: (%[[SW:[^:]*]]: tensor<32xf32>, %[[SB:[^:]*]]: tensor<4xf32>) -> (tensor<64xf32>, tensor<8xf32>) attributes {nn.prefetch}
// CHECK-NEXT: %[[GW:.*]] = shard.all_gather %[[SW]] {{.*}} {nn.async}
// CHECK-NEXT: %[[GB:.*]] = shard.all_gather %[[SB]] {{.*}} {nn.async}
// CHECK-NEXT: return %[[GW]], %[[GB]]
// CHECK-LABEL: func.func @stack
// CHECK: nn.repeat @layer(%arg0) params(%arg1, %arg2) prefetch @layer_prefetch
shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
func.func private @layer(%h: tensor<4x8xf32>, %w: tensor<32xf32>, %b: tensor<4xf32>) -> tensor<4x8xf32> {
  %gb = shard.all_gather %b on @mesh grid_axes = [0] gather_axis = 0 : tensor<4xf32> -> tensor<8xf32>
  %g = shard.all_gather %w on @mesh grid_axes = [0] gather_axis = 0 : tensor<32xf32> -> tensor<64xf32>
  %w2 = nn.reshape %g : tensor<64xf32> -> tensor<8x8xf32>
  %e = nn.exp %h : tensor<4x8xf32>
  %y = nn.matmul %e, %w2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %bb = nn.broadcast %gb dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %z = nn.add %y, %bb : tensor<4x8xf32>
  return %z : tensor<4x8xf32>
}
func.func @stack(%h: tensor<4x8xf32>, %w: tensor<3x32xf32>, %b: tensor<3x4xf32>) -> tensor<4x8xf32> {
  %0 = nn.repeat @layer(%h) params(%w, %b) : (tensor<4x8xf32>, tensor<3x32xf32>, tensor<3x4xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that a layer function called other than by repeats keeps its
// gathers (no caller would prefetch them); they are scheduled inside it.
// CHECK-LABEL: func.func private @called_layer
// CHECK-NOT: nn.prefetched
// CHECK: shard.all_gather
// CHECK-LABEL: func.func @also_called
// CHECK-NOT: prefetch @
shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
func.func private @called_layer(%h: tensor<4x8xf32>, %w: tensor<32xf32>) -> tensor<4x8xf32> {
  %g = shard.all_gather %w on @mesh grid_axes = [0] gather_axis = 0 : tensor<32xf32> -> tensor<64xf32>
  %w2 = nn.reshape %g : tensor<64xf32> -> tensor<8x8xf32>
  %e = nn.exp %h : tensor<4x8xf32>
  %y = nn.matmul %e, %w2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
func.func @also_called(%h: tensor<4x8xf32>, %w: tensor<3x32xf32>, %w0: tensor<32xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %0 = nn.repeat @called_layer(%h) params(%w) : (tensor<4x8xf32>, tensor<3x32xf32>) -> tensor<4x8xf32>
  %1 = func.call @called_layer(%h, %w0) : (tensor<4x8xf32>, tensor<32xf32>) -> tensor<4x8xf32>
  return %0, %1 : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests that a gradient bucket that completes where its layer ends is
// returned in flight (nn.in_flight) and finished one layer later: the
// layer returns the started all-reduce, the finish waits for it and
// unpacks it, and the repeat lists the finish's per-layer outputs last
// (its users follow the new order).
// CHECK-LABEL: func.func private @grad_layer
// CHECK-SAME: -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<72xf32> {nn.in_flight})
// CHECK: %[[BUCKET:.*]] = nn.concat
// CHECK-NEXT: %[[SUM:.*]] = shard.all_reduce %[[BUCKET]] {{.*}} {nn.async}
// CHECK-NEXT: %[[DX:.*]] = nn.matmul
// CHECK-NEXT: %[[E:.*]] = nn.exp %[[DX]]
// CHECK-NOT: nn.wait
// CHECK-NEXT: return %[[DX]], %[[E]], %[[SUM]]
// CHECK-LABEL: func.func private @grad_layer_finish
// CHECK-SAME: (%[[IN:[^:]*]]: tensor<72xf32>) -> (tensor<8x8xf32>, tensor<8xf32>) attributes {nn.finish}
// CHECK-NEXT: %[[DONE:.*]] = nn.wait %[[IN]] : tensor<72xf32>
// CHECK-DAG: %[[GB:.*]] = nn.slice %[[DONE]] start = [64] limit = [72]
// CHECK-DAG: %[[S:.*]] = nn.slice %[[DONE]] start = [0] limit = [64]
// CHECK: %[[GW:.*]] = nn.reshape %[[S]] : tensor<64xf32> -> tensor<8x8xf32>
// CHECK-NEXT: return %[[GW]], %[[GB]]
// CHECK-LABEL: func.func @backward
// CHECK: %[[R:.*]]:4 = nn.repeat @grad_layer(%arg0) params(%arg1, %arg2) reverse finish @grad_layer_finish : {{.*}} -> (tensor<4x8xf32>, tensor<3x4x8xf32>, tensor<3x8x8xf32>, tensor<3x8xf32>)
// CHECK-NEXT: return %[[R]]#0, %[[R]]#2, %[[R]]#3, %[[R]]#1
shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
func.func private @grad_layer(%dh: tensor<4x8xf32>, %w: tensor<8x8xf32>, %x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<4x8xf32>) {
  %gw = nn.matmul %x, %dh transpose_lhs : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %gb = nn.reduce_sum %dh dims = [0] : tensor<4x8xf32> -> tensor<8xf32>
  %f = nn.reshape %gw : tensor<8x8xf32> -> tensor<64xf32>
  %bucket = nn.concat %f, %gb dim = 0 : (tensor<64xf32>, tensor<8xf32>) -> tensor<72xf32>
  %sum = shard.all_reduce %bucket on @mesh grid_axes = [0] : tensor<72xf32> -> tensor<72xf32>
  %dx = nn.matmul %dh, %w transpose_rhs : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %e = nn.exp %dx : tensor<4x8xf32>
  %s1 = nn.slice %sum start = [0] limit = [64] : tensor<72xf32> -> tensor<64xf32>
  %gw2 = nn.reshape %s1 : tensor<64xf32> -> tensor<8x8xf32>
  %gb2 = nn.slice %sum start = [64] limit = [72] : tensor<72xf32> -> tensor<8xf32>
  return %dx, %gw2, %gb2, %e : tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<4x8xf32>
}
func.func @backward(%dh: tensor<4x8xf32>, %w: tensor<3x8x8xf32>, %x: tensor<3x4x8xf32>) -> (tensor<4x8xf32>, tensor<3x8x8xf32>, tensor<3x8xf32>, tensor<3x4x8xf32>) {
  %0:4 = nn.repeat @grad_layer(%dh) params(%w, %x) reverse : (tensor<4x8xf32>, tensor<3x8x8xf32>, tensor<3x4x8xf32>) -> (tensor<4x8xf32>, tensor<3x8x8xf32>, tensor<3x8xf32>, tensor<3x4x8xf32>)
  return %0#0, %0#1, %0#2, %0#3 : tensor<4x8xf32>, tensor<3x8x8xf32>, tensor<3x8xf32>, tensor<3x4x8xf32>
}

// -----

// Tests that a bucket left in flight takes the adds of its gradients into
// the repeat's outs with it (tessel-accumulate-in-layers put them in the
// layer): the finish takes the in-flight bucket and the outs slice, waits,
// sums the weight gradient into the slice and returns it, then the bias
// gradient; the layer returns its outs slice as it took it. Two buckets
// complete where the layer ends: the later one's adds, which move to the
// finish too, do not keep the earlier one in the layer.
// CHECK-LABEL: func.func private @acc_layer
// CHECK-SAME: (%{{[^:]*}}: tensor<4x8xf32>, %{{[^:]*}}: tensor<8x8xf32>, %{{[^:]*}}: tensor<4x8xf32>, %[[G:[^:]*]]: tensor<8x8xf32>, %[[G2:[^:]*]]: tensor<8x8xf32>)
// CHECK-SAME: -> (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<72xf32> {nn.in_flight}, tensor<8x8xf32> {nn.in_flight})
// CHECK: %[[SUM:.*]] = shard.all_reduce {{.*}} {nn.async}
// CHECK: %[[SUM2:.*]] = shard.all_reduce {{.*}} {nn.async}
// CHECK-NOT: nn.accumulate
// CHECK-NOT: nn.wait
// CHECK: return %{{.*}}, %[[G]], %[[G2]], %[[SUM]], %[[SUM2]]
// CHECK-LABEL: func.func private @acc_layer_finish
// CHECK-SAME: (%[[IN:[^:]*]]: tensor<72xf32>, %[[IN2:[^:]*]]: tensor<8x8xf32>, %[[FG:[^:]*]]: tensor<8x8xf32>, %[[FG2:[^:]*]]: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8xf32>) attributes {nn.finish}
// CHECK-NEXT: %[[DONE:.*]] = nn.wait %[[IN]] : tensor<72xf32>
// CHECK-NEXT: %[[DONE2:.*]] = nn.wait %[[IN2]] : tensor<8x8xf32>
// CHECK-DAG: %[[S:.*]] = nn.slice %[[DONE]] start = [0] limit = [64]
// CHECK-DAG: %[[GB:.*]] = nn.slice %[[DONE]] start = [64] limit = [72]
// CHECK-DAG: %[[GW:.*]] = nn.reshape %[[S]] : tensor<64xf32> -> tensor<8x8xf32>
// CHECK-DAG: %[[U:.*]] = nn.accumulate %[[GW]] outs(%[[FG]])
// CHECK-DAG: %[[U2:.*]] = nn.accumulate %[[DONE2]] outs(%[[FG2]])
// CHECK: return %[[U]], %[[U2]], %[[GB]]
// CHECK-LABEL: func.func @acc_backward
// CHECK: %[[R:.*]]:4 = nn.repeat @acc_layer(%arg0) params(%arg1, %arg2) outs(%arg3, %arg4) reverse finish @acc_layer_finish : {{.*}} -> (tensor<4x8xf32>, tensor<3x8x8xf32>, tensor<3x8x8xf32>, tensor<3x8xf32>)
shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
func.func private @acc_layer(%dh: tensor<4x8xf32>, %w: tensor<8x8xf32>, %x: tensor<4x8xf32>, %g: tensor<8x8xf32>, %g2: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8xf32>) {
  %gw = nn.matmul %x, %dh transpose_lhs : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %gb = nn.reduce_sum %dh dims = [0] : tensor<4x8xf32> -> tensor<8xf32>
  %f = nn.reshape %gw : tensor<8x8xf32> -> tensor<64xf32>
  %bucket = nn.concat %f, %gb dim = 0 : (tensor<64xf32>, tensor<8xf32>) -> tensor<72xf32>
  %sum = shard.all_reduce %bucket on @mesh grid_axes = [0] : tensor<72xf32> -> tensor<72xf32>
  %dx = nn.matmul %dh, %w transpose_rhs : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %gw3 = nn.matmul %x, %dx transpose_lhs : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %sum2 = shard.all_reduce %gw3 on @mesh grid_axes = [0] : tensor<8x8xf32> -> tensor<8x8xf32>
  %s1 = nn.slice %sum start = [0] limit = [64] : tensor<72xf32> -> tensor<64xf32>
  %gw2 = nn.reshape %s1 : tensor<64xf32> -> tensor<8x8xf32>
  %gb2 = nn.slice %sum start = [64] limit = [72] : tensor<72xf32> -> tensor<8xf32>
  %u = nn.accumulate %gw2 outs(%g) : tensor<8x8xf32>
  %u2 = nn.accumulate %sum2 outs(%g2) : tensor<8x8xf32>
  return %dx, %u, %u2, %gb2 : tensor<4x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8xf32>
}
func.func @acc_backward(%dh: tensor<4x8xf32>, %w: tensor<3x8x8xf32>, %x: tensor<3x4x8xf32>, %g: tensor<3x8x8xf32>, %g2: tensor<3x8x8xf32>) -> (tensor<4x8xf32>, tensor<3x8x8xf32>, tensor<3x8x8xf32>, tensor<3x8xf32>) {
  %0:4 = nn.repeat @acc_layer(%dh) params(%w, %x) outs(%g, %g2) reverse : (tensor<4x8xf32>, tensor<3x8x8xf32>, tensor<3x4x8xf32>, tensor<3x8x8xf32>, tensor<3x8x8xf32>) -> (tensor<4x8xf32>, tensor<3x8x8xf32>, tensor<3x8x8xf32>, tensor<3x8xf32>)
  return %0#0, %0#1, %0#2, %0#3 : tensor<4x8xf32>, tensor<3x8x8xf32>, tensor<3x8x8xf32>, tensor<3x8xf32>
}

// -----

// Tests what stays in the layer: an all-reduce of a view (it cannot sum
// in a slot of its own; the view's memory is the layer's scratch), and one
// whose result the layer carries to the next layer (needed at once).
// CHECK-LABEL: func.func private @kept_layer
// CHECK-SAME: -> (tensor<4x8xf32>, tensor<8x8xf32>) {
// CHECK-NOT: nn.in_flight
// CHECK: shard.all_reduce
// CHECK: shard.all_reduce
// CHECK-LABEL: func.func @kept
// CHECK-NOT: finish @
shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
func.func private @kept_layer(%dh: tensor<4x8xf32>, %w: tensor<8x8xf32>, %x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>) {
  %gw = nn.matmul %x, %dh transpose_lhs : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %f = nn.reshape %gw : tensor<8x8xf32> -> tensor<64xf32>
  %sum = shard.all_reduce %f on @mesh grid_axes = [0] : tensor<64xf32> -> tensor<64xf32>
  %dx = nn.matmul %dh, %w transpose_rhs : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %e = nn.exp %dx : tensor<4x8xf32>
  %partial = shard.all_reduce %e on @mesh grid_axes = [0] : tensor<4x8xf32> -> tensor<4x8xf32>
  %gw2 = nn.reshape %sum : tensor<64xf32> -> tensor<8x8xf32>
  return %partial, %gw2 : tensor<4x8xf32>, tensor<8x8xf32>
}
func.func @kept(%dh: tensor<4x8xf32>, %w: tensor<3x8x8xf32>, %x: tensor<3x4x8xf32>) -> (tensor<4x8xf32>, tensor<3x8x8xf32>) {
  %0:2 = nn.repeat @kept_layer(%dh) params(%w, %x) reverse : (tensor<4x8xf32>, tensor<3x8x8xf32>, tensor<3x4x8xf32>) -> (tensor<4x8xf32>, tensor<3x8x8xf32>)
  return %0#0, %0#1 : tensor<4x8xf32>, tensor<3x8x8xf32>
}
