// RUN: tessel-opt %s -tessel-autodiff="optimizer=sgd momentum=0.9 clip=1.0" -tessel-propagate-sharding="mesh=dp=4" -tessel-partition="bucket-mb=0" -tessel-zero="stage=1" | FileCheck %s --check-prefix=S1
// RUN: tessel-opt %s -tessel-autodiff="optimizer=sgd momentum=0.9 clip=1.0" -tessel-propagate-sharding="mesh=dp=4" -tessel-partition="bucket-mb=0" -tessel-zero="stage=2" | FileCheck %s --check-prefix=S2
// RUN: tessel-opt %s -tessel-autodiff="optimizer=sgd momentum=0.9 clip=1.0" -tessel-propagate-sharding="mesh=dp=4" -tessel-partition="bucket-mb=0" -tessel-zero="stage=3" | FileCheck %s --check-prefix=S3
// RUN: tessel-opt %s -tessel-autodiff="optimizer=sgd momentum=0.9 clip=1.0" -tessel-propagate-sharding="mesh=dp=4" -tessel-partition="bucket-mb=0" -tessel-zero="stage=3 reshard-after-forward=false" | FileCheck %s --check-prefix=S3N
//
// No -cse after -tessel-zero here: it would merge stage 3's two gathers of
// one parameter in the backward entry, which is what these checks count.

// Tests that ZeRO-1/2/3 shard the training state of a data-parallel step
// over dp=4 (batch 8, 2 rows a rank) as the stage says: a repeat over a
// stacked [2, 6, 6] parameter (sharded per layer: 36 elements, 9 a rank,
// dims = 1), a bias of 6 elements (padded 6 -> 8, 2 a rank) and a [6, 5]
// weight (30 -> 32, 8 a rank). SGD with momentum keeps one state per
// parameter; clipping needs the gradients' global norm.

//===--- Stage 1: optimizer states --------------------------------------===//
// The layer's derivative keeps its dp partial sum: no all-reduce.
// S1: module attributes {{{.*}}nn.zero_stage = 1 : i64}
// S1-LABEL: func.func private @layer_derivative(
// S1-SAME: -> (tensor<2x6xf32> {nn.sharding = {{\[\["dp"\], \[\]\]}}}, tensor<6x6xf32>)
// S1-NOT: shard.
// S1: return
// The backward entry all-reduces the loss only; each rank accumulates its
// own partial gradients, whole.
// S1-LABEL: func.func @loss_backward(
// S1-SAME: %arg5: tensor<2x6x6xf32> {nn.grad = "ws"}, %arg6: tensor<6xf32> {nn.grad = "b"}, %arg7: tensor<6x5xf32> {nn.grad = "w"}
// S1-NOT: shard.all_reduce {{.*}}: tensor<{{[0-9x]+}}xf32>
// S1: shard.all_reduce {{.*}} reduction = average : tensor<f32> -> tensor<f32>
// S1-NOT: shard.all_reduce {{.*}}: tensor<{{[0-9x]+}}xf32>
// S1: nn.accumulate %{{.*}} outs(%arg5) : tensor<2x6x6xf32>
// S1: nn.accumulate %{{.*}} outs(%arg6) : tensor<6xf32>
// S1: nn.accumulate %{{.*}} outs(%arg7) : tensor<6x5xf32>
// The update: the states are chunks (nn.zero: the block before the split
// and the dimensions kept whole); each gradient is padded and
// reduce-scattered, the clip norm summed over the chunks and all-reduced
// over dp, each parameter's chunk sliced out (all_slice: no traffic),
// stepped and all-gathered back, its padding dropped.
// S1-LABEL: func.func @loss_update(
// S1-SAME: %arg6: tensor<2x9xf32> {{{.*}}nn.state = "ws.momentum", nn.zero = {block = array<i64: 2, 6, 6>, dims = 1 : i64}}
// S1-SAME: %arg7: tensor<2xf32> {{{.*}}nn.state = "b.momentum", nn.zero = {block = array<i64: 6>, dims = 0 : i64}}
// S1-SAME: %arg8: tensor<8xf32> {{{.*}}nn.state = "w.momentum", nn.zero = {block = array<i64: 6, 5>, dims = 0 : i64}}
// S1: %[[GWS:.*]] = nn.reshape %arg3 : tensor<2x6x6xf32> -> tensor<2x36xf32>
// S1-NEXT: %[[RWS:.*]] = shard.reduce_scatter %[[GWS]] on @mesh grid_axes = [0] scatter_axis = 1 : tensor<2x36xf32> -> tensor<2x9xf32>
// S1: %[[GB:.*]] = nn.concat %arg4, %{{.*}} dim = 0 : (tensor<6xf32>, tensor<2xf32>) -> tensor<8xf32>
// S1-NEXT: %[[RB:.*]] = shard.reduce_scatter %[[GB]] on @mesh grid_axes = [0] scatter_axis = 0 : tensor<8xf32> -> tensor<2xf32>
// S1: nn.reshape %arg5 : tensor<6x5xf32> -> tensor<30xf32>
// S1: %[[GW:.*]] = nn.concat %{{.*}} dim = 0 : (tensor<30xf32>, tensor<2xf32>) -> tensor<32xf32>
// S1-NEXT: %[[RW:.*]] = shard.reduce_scatter %[[GW]] on @mesh grid_axes = [0] scatter_axis = 0 : tensor<32xf32> -> tensor<8xf32>
// S1-NEXT: %[[SQ:.*]] = nn.sum_squares %[[RWS]], %[[RB]], %[[RW]] : (tensor<2x9xf32>, tensor<2xf32>, tensor<8xf32>) -> tensor<f32>
// S1-NEXT: %[[NORM:.*]] = shard.all_reduce %[[SQ]] on @mesh grid_axes = [0] : tensor<f32> -> tensor<f32>
// S1-NEXT: %[[CLIP:.*]] = nn.clip_scale %[[NORM]]
// S1: %[[PWS:.*]] = shard.all_slice %{{.*}} on @mesh grid_axes = [0] slice_axis = 1 : tensor<2x36xf32> -> tensor<2x9xf32>
// S1-NEXT: %[[SWS:.*]]:2 = nn.optimizer_step sgd %[[RWS]], %[[CLIP]] outs(%[[PWS]], %arg6 : tensor<2x9xf32>, tensor<2x9xf32>)
// S1: %[[PB:.*]] = shard.all_slice %{{.*}} slice_axis = 0 : tensor<8xf32> -> tensor<2xf32>
// S1-NEXT: %[[SB:.*]]:2 = nn.optimizer_step sgd %[[RB]], %[[CLIP]] outs(%[[PB]], %arg7 : tensor<2xf32>, tensor<2xf32>)
// S1: %[[PW:.*]] = shard.all_slice %{{.*}} slice_axis = 0 : tensor<32xf32> -> tensor<8xf32>
// S1-NEXT: %[[SW:.*]]:2 = nn.optimizer_step sgd %[[RW]], %[[CLIP]] outs(%[[PW]], %arg8 : tensor<8xf32>, tensor<8xf32>)
// S1-NEXT: %[[AWS:.*]] = shard.all_gather %[[SWS]]#0 on @mesh grid_axes = [0] gather_axis = 1 : tensor<2x9xf32> -> tensor<2x36xf32>
// S1-NEXT: %[[NWS:.*]] = nn.reshape %[[AWS]] : tensor<2x36xf32> -> tensor<2x6x6xf32>
// S1-NEXT: %[[AB:.*]] = shard.all_gather %[[SB]]#0 on @mesh grid_axes = [0] gather_axis = 0 : tensor<2xf32> -> tensor<8xf32>
// S1-NEXT: %[[NB:.*]] = nn.slice %[[AB]] start = [0] limit = [6] : tensor<8xf32> -> tensor<6xf32>
// S1-NEXT: %[[AW:.*]] = shard.all_gather %[[SW]]#0 on @mesh grid_axes = [0] gather_axis = 0 : tensor<8xf32> -> tensor<32xf32>
// S1-NEXT: %[[SLW:.*]] = nn.slice %[[AW]] start = [0] limit = [30] : tensor<32xf32> -> tensor<30xf32>
// S1-NEXT: %[[NW:.*]] = nn.reshape %[[SLW]] : tensor<30xf32> -> tensor<6x5xf32>
// S1-NEXT: return %[[NWS]], %[[NB]], %[[NW]], %[[SWS]]#1, %[[SB]]#1, %[[SW]]#1 : tensor<2x6x6xf32>, tensor<6xf32>, tensor<6x5xf32>, tensor<2x9xf32>, tensor<2xf32>, tensor<8xf32>

//===--- Stage 2: and gradients -----------------------------------------===//
// The stacked weight's gradient is reduce-scattered inside the layer's
// derivative, layer by layer: the reversed repeat stacks the 9-element
// chunks.
// S2: module attributes {{{.*}}nn.zero_stage = 2 : i64}
// S2-LABEL: func.func private @layer_derivative(
// S2-SAME: -> (tensor<2x6xf32> {nn.sharding = {{\[\["dp"\], \[\]\]}}}, tensor<9xf32>)
// S2: %[[DW:.*]] = nn.matmul %arg1, %{{.*}} transpose_lhs : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<6x6xf32>
// S2: %[[FLAT:.*]] = nn.reshape %[[DW]] : tensor<6x6xf32> -> tensor<36xf32>
// S2-NEXT: %[[RS:.*]] = shard.reduce_scatter %[[FLAT]] on @mesh grid_axes = [0] scatter_axis = 0 : tensor<36xf32> -> tensor<9xf32>
// S2-NEXT: return %{{.*}}, %[[RS]] : tensor<2x6xf32>, tensor<9xf32>
// The backward's accumulators are the chunks: the bias's and the weight's
// gradients are padded and reduce-scattered where stage 0 all-reduces them.
// S2-LABEL: func.func @loss_backward(
// S2-SAME: %arg5: tensor<2x9xf32> {nn.grad = "ws", nn.zero = {block = array<i64: 2, 6, 6>, dims = 1 : i64}}, %arg6: tensor<2xf32> {nn.grad = "b", nn.zero = {block = array<i64: 6>, dims = 0 : i64}}, %arg7: tensor<8xf32> {nn.grad = "w", nn.zero = {block = array<i64: 6, 5>, dims = 0 : i64}}
// S2-SAME: -> (tensor<f32>, tensor<2x9xf32> {nn.grad = "ws"}, tensor<2xf32> {nn.grad = "b"}, tensor<8xf32> {nn.grad = "w"})
// S2-NOT: shard.all_reduce {{.*}}: tensor<{{[0-9x]+}}xf32>
// S2: %[[STACK:.*]]:2 = nn.repeat @layer_derivative({{.*}}) reverse : ({{.*}}) -> (tensor<2x6xf32>, tensor<2x9xf32>)
// S2: %[[PB:.*]] = nn.concat %{{.*}}, %{{.*}} dim = 0 : (tensor<6xf32>, tensor<2xf32>) -> tensor<8xf32>
// S2-NEXT: %[[RB:.*]] = shard.reduce_scatter %[[PB]] {{.*}} : tensor<8xf32> -> tensor<2xf32>
// S2: %[[PW:.*]] = nn.concat %{{.*}}, %{{.*}} dim = 0 : (tensor<30xf32>, tensor<2xf32>) -> tensor<32xf32>
// S2-NEXT: %[[RW:.*]] = shard.reduce_scatter %[[PW]] {{.*}} : tensor<32xf32> -> tensor<8xf32>
// S2-NOT: shard.all_reduce {{.*}}: tensor<{{[0-9x]+}}xf32>
// S2: nn.accumulate %[[STACK]]#1 outs(%arg5) : tensor<2x9xf32>
// S2-NEXT: nn.accumulate %[[RB]] outs(%arg6) : tensor<2xf32>
// S2-NEXT: nn.accumulate %[[RW]] outs(%arg7) : tensor<8xf32>
// The update reads the gradient chunks as they are: the norm first, then
// the steps; no reduce-scatter left.
// S2-LABEL: func.func @loss_update(
// S2-NOT: shard.reduce_scatter
// S2: %[[SQ:.*]] = nn.sum_squares %arg3, %arg4, %arg5 : (tensor<2x9xf32>, tensor<2xf32>, tensor<8xf32>) -> tensor<f32>
// S2-NEXT: %[[NORM:.*]] = shard.all_reduce %[[SQ]] on @mesh grid_axes = [0] : tensor<f32> -> tensor<f32>
// S2-NEXT: nn.clip_scale %[[NORM]]
// S2: nn.optimizer_step sgd %arg3, %{{.*}} outs(%{{.*}}, %arg6 : tensor<2x9xf32>, tensor<2x9xf32>)
// S2-NOT: shard.reduce_scatter
// S2: shard.all_gather {{.*}} : tensor<2x9xf32> -> tensor<2x36xf32>
// S2: return

//===--- Stage 3: and parameters ----------------------------------------===//
// Every layer function gathers its layer's 9-element chunk of the stack
// (the forward, the forward that keeps activations, the derivative).
// S3: module attributes {{{.*}}nn.zero_stage = 3 : i64}
// S3-LABEL: func.func private @layer(
// S3-SAME: %arg1: tensor<9xf32> {nn.zero = {block = array<i64: 6, 6>, dims = 0 : i64}}
// S3-NEXT: %[[G:.*]] = shard.all_gather %arg1 on @mesh grid_axes = [0] gather_axis = 0 : tensor<9xf32> -> tensor<36xf32>
// S3-NEXT: %[[W:.*]] = nn.reshape %[[G]] : tensor<36xf32> -> tensor<6x6xf32>
// S3-NEXT: nn.matmul %arg0, %[[W]]
// S3-LABEL: func.func private @layer_keep(
// S3-SAME: %arg1: tensor<9xf32> {nn.zero = {block = array<i64: 6, 6>, dims = 0 : i64}}
// S3-NEXT: shard.all_gather %arg1 {{.*}} : tensor<9xf32> -> tensor<36xf32>
// S3-LABEL: func.func private @layer_derivative(
// S3-SAME: %arg2: tensor<9xf32> {nn.zero = {block = array<i64: 6, 6>, dims = 0 : i64}}
// S3-SAME: -> (tensor<2x6xf32> {nn.sharding = {{\[\["dp"\], \[\]\]}}}, tensor<9xf32>)
// S3-NEXT: shard.all_gather %arg2 {{.*}} : tensor<9xf32> -> tensor<36xf32>
// S3: shard.reduce_scatter {{.*}} : tensor<36xf32> -> tensor<9xf32>
// The model function (evaluation) gathers the bias and the weight once each.
// S3-LABEL: func.func @loss(
// S3-SAME: %arg2: tensor<2x9xf32> {{{.*}}nn.param = "ws", nn.zero = {block = array<i64: 2, 6, 6>, dims = 1 : i64}}
// S3-SAME: %arg3: tensor<2xf32> {{{.*}}nn.param = "b", nn.zero = {block = array<i64: 6>, dims = 0 : i64}}
// S3-SAME: %arg4: tensor<8xf32> {{{.*}}nn.param = "w", nn.zero = {block = array<i64: 6, 5>, dims = 0 : i64}}
// S3: nn.repeat @layer(%arg0) params(%arg2) : (tensor<2x6xf32>, tensor<2x9xf32>) -> tensor<2x6xf32>
// S3-COUNT-2: shard.all_gather
// S3-NOT: shard.all_gather
// S3: return
// The backward entry: the stack's chunks go to the layers as they are; the
// weight is gathered for the forward's matmul and again for the backward's
// (nothing full lives across the loss); the bias, which the backward never
// reads, once.
// S3-LABEL: func.func @loss_backward(
// S3: %[[KEEP:.*]]:3 = nn.repeat @layer_keep(%arg0) params(%arg2) : (tensor<2x6xf32>, tensor<2x9xf32>)
// S3-NEXT: %[[GB:.*]] = shard.all_gather %arg3 on @mesh grid_axes = [0] gather_axis = 0 : tensor<2xf32> -> tensor<8xf32>
// S3-NEXT: nn.slice %[[GB]] start = [0] limit = [6] : tensor<8xf32> -> tensor<6xf32>
// S3: %[[GW1:.*]] = shard.all_gather %arg4 on @mesh grid_axes = [0] gather_axis = 0 : tensor<8xf32> -> tensor<32xf32>
// S3-NEXT: %[[SW1:.*]] = nn.slice %[[GW1]] start = [0] limit = [30] : tensor<32xf32> -> tensor<30xf32>
// S3-NEXT: %[[W1:.*]] = nn.reshape %[[SW1]] : tensor<30xf32> -> tensor<6x5xf32>
// S3-NEXT: nn.matmul %{{.*}}, %[[W1]] : (tensor<2x6xf32>, tensor<6x5xf32>) -> tensor<2x5xf32>
// S3: %[[DZ:.*]] = nn.cross_entropy_grad
// S3-NEXT: %[[GW2:.*]] = shard.all_gather %arg4 on @mesh grid_axes = [0] gather_axis = 0 : tensor<8xf32> -> tensor<32xf32>
// S3-NEXT: %[[SW2:.*]] = nn.slice %[[GW2]] start = [0] limit = [30] : tensor<32xf32> -> tensor<30xf32>
// S3-NEXT: %[[W2:.*]] = nn.reshape %[[SW2]] : tensor<30xf32> -> tensor<6x5xf32>
// S3-NEXT: nn.matmul %[[DZ]], %[[W2]] transpose_rhs
// S3-NOT: shard.all_gather
// S3: nn.repeat @layer_derivative({{.*}}) params(%[[KEEP]]#1, %arg2, %[[KEEP]]#2) reverse : ({{.*}}) -> (tensor<2x6xf32>, tensor<2x9xf32>)
// S3-NOT: shard.all_gather
// S3: return
// The update steps the chunks in place: no collective but the norm's.
// S3-LABEL: func.func @loss_update(
// S3-NEXT: %[[SQ:.*]] = nn.sum_squares %arg3, %arg4, %arg5
// S3-NEXT: %[[NORM:.*]] = shard.all_reduce %[[SQ]] on @mesh grid_axes = [0] : tensor<f32> -> tensor<f32>
// S3-NEXT: %[[CLIP:.*]] = nn.clip_scale %[[NORM]]
// S3-NEXT: nn.optimizer_step sgd %arg3, %[[CLIP]] outs(%arg0, %arg6 : tensor<2x9xf32>, tensor<2x9xf32>)
// S3-NEXT: nn.optimizer_step sgd %arg4, %[[CLIP]] outs(%arg1, %arg7 : tensor<2xf32>, tensor<2xf32>)
// S3-NEXT: nn.optimizer_step sgd %arg5, %[[CLIP]] outs(%arg2, %arg8 : tensor<8xf32>, tensor<8xf32>)
// S3-NEXT: return

//===--- Stage 3, reshard-after-forward=false ---------------------------===//
// The backward entry gathers each parameter once and keeps it to the
// backward: the stack as a whole (the layers of its repeats take full
// [6, 6] slices and gather nothing), the weight once for both matmuls.
// S3N-LABEL: func.func private @layer(
// S3N-NEXT: shard.all_gather %arg1 {{.*}} : tensor<9xf32> -> tensor<36xf32>
// S3N-LABEL: func.func private @layer_keep(
// S3N-SAME: %arg1: tensor<6x6xf32>)
// S3N-NOT: shard.
// S3N: return
// S3N-LABEL: func.func private @layer_derivative(
// S3N-SAME: %arg2: tensor<6x6xf32>
// S3N-NOT: shard.all_gather
// S3N: shard.reduce_scatter {{.*}} : tensor<36xf32> -> tensor<9xf32>
// S3N-LABEL: func.func @loss_backward(
// S3N-NEXT: %[[GS:.*]] = shard.all_gather %arg2 on @mesh grid_axes = [0] gather_axis = 1 : tensor<2x9xf32> -> tensor<2x36xf32>
// S3N-NEXT: %[[S:.*]] = nn.reshape %[[GS]] : tensor<2x36xf32> -> tensor<2x6x6xf32>
// S3N-NEXT: %[[KEEP:.*]]:3 = nn.repeat @layer_keep(%arg0) params(%[[S]]) : (tensor<2x6xf32>, tensor<2x6x6xf32>)
// S3N-NEXT: shard.all_gather %arg3 {{.*}} : tensor<2xf32> -> tensor<8xf32>
// S3N: %[[GW:.*]] = shard.all_gather %arg4 {{.*}} : tensor<8xf32> -> tensor<32xf32>
// S3N: %[[W:.*]] = nn.reshape %{{.*}} : tensor<30xf32> -> tensor<6x5xf32>
// S3N-NEXT: nn.matmul %{{.*}}, %[[W]] :
// S3N-NOT: shard.all_gather
// S3N: nn.matmul %{{.*}}, %[[W]] transpose_rhs
// S3N-NOT: shard.all_gather
// S3N: nn.repeat @layer_derivative({{.*}}) params(%[[KEEP]]#1, %[[S]], %[[KEEP]]#2) reverse : ({{.*}}) -> (tensor<2x6xf32>, tensor<2x9xf32>)
// S3N-NOT: shard.all_gather
// S3N: return
// S3N-LABEL: func.func @loss_update(
// S3N-NOT: shard.all_gather
// S3N: return
func.func private @layer(%h: tensor<8x6xf32>, %w: tensor<6x6xf32>) -> tensor<8x6xf32> {
  %m = nn.matmul %h, %w : (tensor<8x6xf32>, tensor<6x6xf32>) -> tensor<8x6xf32>
  %g = nn.gelu %m : tensor<8x6xf32>
  %r = nn.add %g, %h : tensor<8x6xf32>
  return %r : tensor<8x6xf32>
}
func.func @loss(%x: tensor<8x6xf32> {nn.input, nn.axes = ["batch", "embed"]},
                %y: tensor<8xi32> {nn.label, nn.axes = ["batch"]},
                %ws: tensor<2x6x6xf32> {nn.param = "ws", nn.init = #nn.init<normal, 0.1>,
                                        nn.axes = ["layers", "embed", "mlp"]},
                %b: tensor<6xf32> {nn.param = "b", nn.init = #nn.init<zeros>, nn.axes = ["embed"]},
                %w: tensor<6x5xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.1>,
                                     nn.axes = ["embed", "classes"]}) -> tensor<f32> {
  %h = nn.repeat @layer(%x) params(%ws) : (tensor<8x6xf32>, tensor<2x6x6xf32>) -> tensor<8x6xf32>
  %bb = nn.broadcast %b dims = [1] : tensor<6xf32> -> tensor<8x6xf32>
  %hb = nn.add %h, %bb : tensor<8x6xf32>
  %z = nn.matmul %hb, %w : (tensor<8x6xf32>, tensor<6x5xf32>) -> tensor<8x5xf32>
  %l = nn.cross_entropy %z, %y : (tensor<8x5xf32>, tensor<8xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
