// RUN: tessel-opt %s --tessel-defer-gradient-reduction --split-input-file | FileCheck %s
// RUN: tessel-opt %s --tessel-defer-gradient-reduction=bucket-mb=0 --split-input-file | FileCheck %s --check-prefix=UNBUCKETED

// Tests that a DDP backward (one bucket: concat, all-reduce, slices, each
// gradient accumulated) gains @loss_backward_no_sync, the same backward
// whose gradients accumulate unreduced (the loss's average stays), and
// @loss_reduce_grads, which all-reduces the two accumulators in one
// bucket; the backward itself is unchanged.
// CHECK-LABEL: module @ddp
// CHECK: func.func @loss_backward(
// CHECK: shard.all_reduce %{{.*}} on @mesh grid_axes = [0] : tensor<12xf32>
// CHECK: func.func @loss_backward_no_sync(%{{.*}}: tensor<4x2xf32> {nn.input}, %{{.*}}: tensor<2x4xf32> {nn.init = #nn.init<zeros>, nn.param = "w"}, %{{.*}}: tensor<4xf32> {nn.init = #nn.init<zeros>, nn.param = "b"}, %[[GW:.*]]: tensor<2x4xf32> {nn.grad = "w"}, %[[GB:.*]]: tensor<4xf32> {nn.grad = "b"}) -> {{.*}} attributes {nn.entry = "backward_no_sync"}
// CHECK: %[[DW:.*]] = nn.matmul %{{.*}}, %{{.*}} transpose_lhs
// CHECK-NEXT: %[[DB:.*]] = nn.reduce_sum %{{.*}} dims = [0] :
// CHECK-NOT: reduction = sum
// CHECK: nn.accumulate %[[DW]] outs(%[[GW]])
// CHECK-NEXT: nn.accumulate %[[DB]] outs(%[[GB]])
// CHECK-NEXT: shard.all_reduce %{{.*}} reduction = average
// CHECK: func.func @loss_reduce_grads(%[[AW:.*]]: tensor<2x4xf32> {nn.grad = "w"}, %[[AB:.*]]: tensor<4xf32> {nn.grad = "b"}) -> (tensor<2x4xf32> {nn.grad = "w"}, tensor<4xf32> {nn.grad = "b"}) attributes {nn.entry = "reduce_grads"}
// CHECK-NEXT: %[[FW:.*]] = nn.reshape %[[AW]] : tensor<2x4xf32> -> tensor<8xf32>
// CHECK-NEXT: %[[C:.*]] = nn.concat %[[FW]], %[[AB]] dim = 0
// CHECK-NEXT: %[[R:.*]] = shard.all_reduce %[[C]] on @mesh grid_axes = [0] : tensor<12xf32> -> tensor<12xf32>
// CHECK-NEXT: %[[SW:.*]] = nn.slice %[[R]] start = [0] limit = [8]
// CHECK-NEXT: %[[W:.*]] = nn.reshape %[[SW]] : tensor<8xf32> -> tensor<2x4xf32>
// CHECK-NEXT: %[[B:.*]] = nn.slice %[[R]] start = [8] limit = [12]
// CHECK-NEXT: return %[[W]], %[[B]]
// UNBUCKETED-LABEL: module @ddp
// UNBUCKETED: func.func @loss_reduce_grads(%[[AW:.*]]: tensor<2x4xf32> {nn.grad = "w"}, %[[AB:.*]]: tensor<4xf32> {nn.grad = "b"})
// UNBUCKETED-DAG: %[[W:.*]] = shard.all_reduce %[[AW]] on @mesh grid_axes = [0] : tensor<2x4xf32>
// UNBUCKETED-DAG: %[[B:.*]] = shard.all_reduce %[[AB]] on @mesh grid_axes = [0] : tensor<4xf32>
// UNBUCKETED: return %[[W]], %[[B]]
module @ddp {
  shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
  func.func @loss_backward(%x: tensor<4x2xf32> {nn.input}, %w: tensor<2x4xf32> {nn.init = #nn.init<zeros>, nn.param = "w"}, %b: tensor<4xf32> {nn.init = #nn.init<zeros>, nn.param = "b"},
                           %gw: tensor<2x4xf32> {nn.grad = "w"}, %gb: tensor<4xf32> {nn.grad = "b"})
      -> (tensor<f32>, tensor<2x4xf32> {nn.grad = "w"}, tensor<4xf32> {nn.grad = "b"}) attributes {nn.entry = "backward"} {
    %y = nn.matmul %x, %w : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    %l = nn.reduce_sum %y dims = [0, 1] : tensor<4x4xf32> -> tensor<f32>
    %dw = nn.matmul %x, %y transpose_lhs : (tensor<4x2xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %db = nn.reduce_sum %y dims = [0] : tensor<4x4xf32> -> tensor<4xf32>
    %fw = nn.reshape %dw : tensor<2x4xf32> -> tensor<8xf32>
    %c = nn.concat %fw, %db dim = 0 : (tensor<8xf32>, tensor<4xf32>) -> tensor<12xf32>
    %r = shard.all_reduce %c on @mesh grid_axes = [0] : tensor<12xf32> -> tensor<12xf32>
    %sw = nn.slice %r start = [0] limit = [8] : tensor<12xf32> -> tensor<8xf32>
    %rw = nn.reshape %sw : tensor<8xf32> -> tensor<2x4xf32>
    %rb = nn.slice %r start = [8] limit = [12] : tensor<12xf32> -> tensor<4xf32>
    %aw = nn.accumulate %rw outs(%gw) : tensor<2x4xf32>
    %ab = nn.accumulate %rb outs(%gb) : tensor<4xf32>
    %la = shard.all_reduce %l on @mesh grid_axes = [0] reduction = average : tensor<f32> -> tensor<f32>
    return %la, %aw, %ab : tensor<f32>, tensor<2x4xf32>, tensor<4xf32>
  }
}

// -----

// Tests that a repeated layer's gradient all-reduce (inside its function,
// returned per layer) goes from a clone of the function that the no-sync
// backward's repeat calls, and that reduce_grads reduces the stacked
// accumulator whole; a gradient reduced over dp and tp keeps its axes, in
// a bucket of its own.
// CHECK-LABEL: module @repeated
// CHECK: func.func private @layer(
// CHECK: shard.all_reduce
// CHECK: func.func private @layer_no_sync(%{{.*}}: tensor<4x2xf32>, %[[W:.*]]: tensor<2x2xf32>) -> (tensor<4x2xf32>, tensor<2x2xf32>)
// CHECK-NEXT: %[[Y:.*]] = nn.matmul
// CHECK-NEXT: return %[[Y]], %[[W]]
// CHECK: func.func @loss_backward_no_sync(
// CHECK: nn.repeat @layer_no_sync
// CHECK-NOT: grid_axes = [0, 1] :
// CHECK: func.func @loss_reduce_grads(%[[S:.*]]: tensor<3x2x2xf32> {nn.grad = "s"}, %[[N:.*]]: tensor<2xf32> {nn.grad = "n"})
// CHECK-DAG: shard.all_reduce %[[S]] on @mesh grid_axes = [0] : tensor<3x2x2xf32>
// CHECK-DAG: shard.all_reduce %[[N]] on @mesh grid_axes = [0, 1] : tensor<2xf32>
module @repeated {
  shard.grid @mesh(shape = 2x2) {nn.axis_names = ["dp", "tp"]}
  func.func private @layer(%h: tensor<4x2xf32>, %w: tensor<2x2xf32>) -> (tensor<4x2xf32>, tensor<2x2xf32>) {
    %y = nn.matmul %h, %w : (tensor<4x2xf32>, tensor<2x2xf32>) -> tensor<4x2xf32>
    %g = shard.all_reduce %w on @mesh grid_axes = [0] : tensor<2x2xf32> -> tensor<2x2xf32>
    return %y, %g : tensor<4x2xf32>, tensor<2x2xf32>
  }
  func.func @loss_backward(%x: tensor<4x2xf32> {nn.input}, %s: tensor<3x2x2xf32> {nn.init = #nn.init<zeros>, nn.param = "s"}, %n: tensor<2xf32> {nn.init = #nn.init<zeros>, nn.param = "n"},
                           %gs: tensor<3x2x2xf32> {nn.grad = "s"}, %gn: tensor<2xf32> {nn.grad = "n"})
      -> (tensor<f32>, tensor<3x2x2xf32> {nn.grad = "s"}, tensor<2xf32> {nn.grad = "n"}) attributes {nn.entry = "backward"} {
    %h, %ds = nn.repeat @layer(%x) params(%s) : (tensor<4x2xf32>, tensor<3x2x2xf32>) -> (tensor<4x2xf32>, tensor<3x2x2xf32>)
    %l = nn.reduce_sum %h dims = [0, 1] : tensor<4x2xf32> -> tensor<f32>
    %rn = shard.all_reduce %n on @mesh grid_axes = [0, 1] : tensor<2xf32> -> tensor<2xf32>
    %as = nn.accumulate %ds outs(%gs) : tensor<3x2x2xf32>
    %an = nn.accumulate %rn outs(%gn) : tensor<2xf32>
    return %l, %as, %an : tensor<f32>, tensor<3x2x2xf32>, tensor<2xf32>
  }
}

// -----

// Tests that a backward whose gradient is reduced in part (one of its two
// contributions) is left as it is: reducing the accumulator would reduce
// the other twice.
// CHECK-LABEL: module @partial
// CHECK-NOT: no_sync
// CHECK-NOT: reduce_grads
module @partial {
  shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
  func.func @loss_backward(%x: tensor<4xf32> {nn.input}, %gw: tensor<4xf32> {nn.grad = "w"})
      -> (tensor<f32>, tensor<4xf32> {nn.grad = "w"}) attributes {nn.entry = "backward"} {
    %l = nn.reduce_sum %x dims = [0] : tensor<4xf32> -> tensor<f32>
    %r = shard.all_reduce %x on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    %a1 = nn.accumulate %r outs(%gw) : tensor<4xf32>
    %a2 = nn.accumulate %x outs(%a1) : tensor<4xf32>
    return %l, %a2 : tensor<f32>, tensor<4xf32>
  }
}

// -----

// Tests that ZeRO's reduce-scatter (sharded gradients) keeps its
// reduction in every microbatch.
// CHECK-LABEL: module @zero
// CHECK-NOT: no_sync
module @zero {
  shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
  func.func @loss_backward(%x: tensor<4xf32> {nn.input}, %gw: tensor<2xf32> {nn.grad = "w"})
      -> (tensor<f32>, tensor<2xf32> {nn.grad = "w"}) attributes {nn.entry = "backward"} {
    %l = nn.reduce_sum %x dims = [0] : tensor<4xf32> -> tensor<f32>
    %r = shard.reduce_scatter %x on @mesh grid_axes = [0] scatter_axis = 0 : tensor<4xf32> -> tensor<2xf32>
    %a = nn.accumulate %r outs(%gw) : tensor<2xf32>
    return %l, %a : tensor<f32>, tensor<2xf32>
  }
}

// -----

// Tests that a pipeline stage defers its dp reduction as a whole model
// does (its launcher runs backward_no_sync per backward action, then
// reduce_grads), and that a zero-bubble stage's weight part
// (backward_weight) gets its no-sync twin too.
// CHECK-LABEL: module @stage
// CHECK: func.func @loss_backward_no_sync
// CHECK: func.func @loss_reduce_grads
module @stage attributes {nn.stage = 1 : i64} {
  shard.grid @mesh(shape = 2x2) {nn.axis_names = ["dp", "pp"]}
  func.func @loss_backward(%x: tensor<4xf32> {nn.input}, %gw: tensor<4xf32> {nn.grad = "w"})
      -> (tensor<f32>, tensor<4xf32> {nn.grad = "w"}) attributes {nn.entry = "backward"} {
    %l = nn.reduce_sum %x dims = [0] : tensor<4xf32> -> tensor<f32>
    %r = shard.all_reduce %x on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    %a = nn.accumulate %r outs(%gw) : tensor<4xf32>
    return %l, %a : tensor<f32>, tensor<4xf32>
  }
}

// -----

// CHECK-LABEL: module @zero_bubble_stage
// CHECK: func.func @loss_backward_no_sync
// CHECK: func.func @loss_backward_weight_no_sync(%{{.*}}: tensor<4xf32> {nn.input}, %[[G:.*]]: tensor<4xf32> {nn.grad = "w"}) -> (tensor<4xf32> {nn.grad = "w"}) attributes {nn.entry = "backward_weight_no_sync"}
// CHECK-NEXT: %[[A:.*]] = nn.accumulate %{{.*}} outs(%[[G]])
// CHECK-NEXT: return %[[A]]
// CHECK: func.func @loss_reduce_grads
module @zero_bubble_stage attributes {nn.stage = 1 : i64} {
  shard.grid @mesh(shape = 2x2) {nn.axis_names = ["dp", "pp"]}
  func.func @loss_backward(%x: tensor<4xf32> {nn.input}, %gw: tensor<4xf32> {nn.grad = "w"})
      -> (tensor<f32>, tensor<4xf32> {nn.grad = "w"}) attributes {nn.entry = "backward"} {
    %l = nn.reduce_sum %x dims = [0] : tensor<4xf32> -> tensor<f32>
    %r = shard.all_reduce %x on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    %a = nn.accumulate %r outs(%gw) : tensor<4xf32>
    return %l, %a : tensor<f32>, tensor<4xf32>
  }
  func.func @loss_backward_weight(%x: tensor<4xf32> {nn.input}, %gw: tensor<4xf32> {nn.grad = "w"})
      -> (tensor<4xf32> {nn.grad = "w"}) attributes {nn.entry = "backward_weight"} {
    %r = shard.all_reduce %x on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    %a = nn.accumulate %r outs(%gw) : tensor<4xf32>
    return %a : tensor<4xf32>
  }
}

// -----

// Tests that a zero-bubble stage whose weight part defers other gradients
// than the whole backward, or whose input part reduces a gradient, is left
// as it is: its actions would reduce some gradient twice or not at all.
// CHECK-LABEL: module @weight_part_differs
// CHECK-NOT: no_sync
module @weight_part_differs attributes {nn.stage = 1 : i64} {
  shard.grid @mesh(shape = 2x2) {nn.axis_names = ["dp", "pp"]}
  func.func @loss_backward(%x: tensor<4xf32> {nn.input}, %gw: tensor<4xf32> {nn.grad = "w"})
      -> (tensor<f32>, tensor<4xf32> {nn.grad = "w"}) attributes {nn.entry = "backward"} {
    %l = nn.reduce_sum %x dims = [0] : tensor<4xf32> -> tensor<f32>
    %r = shard.all_reduce %x on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    %a = nn.accumulate %r outs(%gw) : tensor<4xf32>
    return %l, %a : tensor<f32>, tensor<4xf32>
  }
  func.func @loss_backward_weight(%x: tensor<4xf32> {nn.input}, %gw: tensor<4xf32> {nn.grad = "w"})
      -> (tensor<4xf32> {nn.grad = "w"}) attributes {nn.entry = "backward_weight"} {
    %r = shard.all_reduce %x on @mesh grid_axes = [0, 1] : tensor<4xf32> -> tensor<4xf32>
    %a = nn.accumulate %r outs(%gw) : tensor<4xf32>
    return %a : tensor<4xf32>
  }
}

// -----

// CHECK-LABEL: module @input_part_reduces
// CHECK-NOT: no_sync
module @input_part_reduces attributes {nn.stage = 1 : i64} {
  shard.grid @mesh(shape = 2x2) {nn.axis_names = ["dp", "pp"]}
  func.func @loss_backward(%x: tensor<4xf32> {nn.input}, %gw: tensor<4xf32> {nn.grad = "w"})
      -> (tensor<f32>, tensor<4xf32> {nn.grad = "w"}) attributes {nn.entry = "backward"} {
    %l = nn.reduce_sum %x dims = [0] : tensor<4xf32> -> tensor<f32>
    %r = shard.all_reduce %x on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    %a = nn.accumulate %r outs(%gw) : tensor<4xf32>
    return %l, %a : tensor<f32>, tensor<4xf32>
  }
  func.func @loss_backward_input(%x: tensor<4xf32> {nn.input}, %gw: tensor<4xf32> {nn.grad = "w"})
      -> (tensor<f32>, tensor<4xf32> {nn.grad = "w"}) attributes {nn.entry = "backward_input"} {
    %l = nn.reduce_sum %x dims = [0] : tensor<4xf32> -> tensor<f32>
    %r = shard.all_reduce %x on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    %a = nn.accumulate %r outs(%gw) : tensor<4xf32>
    return %l, %a : tensor<f32>, tensor<4xf32>
  }
  func.func @loss_backward_weight(%x: tensor<4xf32> {nn.input}, %gw: tensor<4xf32> {nn.grad = "w"})
      -> (tensor<4xf32> {nn.grad = "w"}) attributes {nn.entry = "backward_weight"} {
    %r = shard.all_reduce %x on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    %a = nn.accumulate %r outs(%gw) : tensor<4xf32>
    return %a : tensor<4xf32>
  }
}
