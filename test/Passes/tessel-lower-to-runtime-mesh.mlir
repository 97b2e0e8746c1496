// RUN: tessel-opt %s -tessel-plan-memory -tessel-lower-to-runtime --split-input-file | FileCheck %s

// Tests the description of a partitioned training step (dp=2, tp=2; the
// weight's classes split over tp, the batch over dp): "mesh"; per tensor
// the local "shape" (what the arena holds), "global_shape" and "sharding"
// (the gradient and the state have the parameter's); per entry the
// "collectives" of one call, per (kind, axes) in that order with bytes as
// the runtime counts them: all_reduce its input (backward: the 4-byte loss
// and the 96-byte gradient, 2 calls), all_gather its output (2 x 6 f32 =
// 48); the all_slice moves nothing and is not listed.
// CHECK: llvm.mlir.global private constant @__tessel_model_json
// CHECK-SAME: \22collectives\22:{
// CHECK-SAME: \22backward\22:[{\22axes\22:[\22dp\22],\22bytes\22:100,\22calls\22:2,\22kind\22:\22all_reduce\22},{\22axes\22:[\22tp\22],\22bytes\22:48,\22calls\22:1,\22kind\22:\22all_gather\22}],
// CHECK-SAME: \22forward\22:[{\22axes\22:[\22dp\22],\22bytes\22:4,\22calls\22:1,\22kind\22:\22all_reduce\22},{\22axes\22:[\22tp\22],\22bytes\22:48,\22calls\22:1,\22kind\22:\22all_gather\22}],
// CHECK-SAME: \22update\22:[{\22axes\22:[\22tp\22],\22bytes\22:4,\22calls\22:1,\22kind\22:\22all_reduce\22}]}
// CHECK-SAME: \22mesh\22:{\22axes\22:[\22dp\22,\22tp\22],\22shape\22:[2,2]}
// CHECK-SAME: \22global_shape\22:[8,6],\22init\22:{\22args\22:[0.5,0],\22kind\22:\22normal\22},\22name\22:\22w\22,\22offset\22:0,\22role\22:\22param\22,\22shape\22:[8,3],\22sharding\22:{{\[\[}}],[\22tp\22]]
// CHECK-SAME: \22global_shape\22:[8,6],\22name\22:\22w\22,\22offset\22:128,\22role\22:\22grad\22,\22shape\22:[8,3],\22sharding\22:{{\[\[}}],[\22tp\22]]}
// CHECK-SAME: \22global_shape\22:[8,6],\22name\22:\22w.momentum\22,\22offset\22:256,\22role\22:\22state\22,\22shape\22:[8,3],\22sharding\22:{{\[\[}}],[\22tp\22]]}
// CHECK-SAME: \22global_shape\22:[4,8],\22name\22:\22input0\22,\22offset\22:384,\22role\22:\22input\22,\22shape\22:[2,8],\22sharding\22:{{\[\[}}\22dp\22],[]]}
// CHECK-SAME: \22global_shape\22:[4],\22limit\22:6,\22name\22:\22label0\22,\22offset\22:448,\22role\22:\22label\22,\22shape\22:[2],\22sharding\22:{{\[\[}}\22dp\22]]}
// CHECK-SAME: \22global_shape\22:[],\22name\22:\22grad_scale\22,\22offset\22:512,\22role\22:\22grad_scale\22,\22shape\22:[]}
// CHECK-SAME: \22global_shape\22:[],\22name\22:\22loss\22,\22offset\22:576,\22role\22:\22loss\22,\22shape\22:[]}]}
// CHECK-NOT: shard.grid
// CHECK-LABEL: llvm.func @tessel_fn_loss_backward
// CHECK: llvm.call @tessel_all_gather(
// CHECK: llvm.call @tessel_all_reduce(
// CHECK: llvm.call @tessel_all_slice(
// CHECK: llvm.call @tessel_all_reduce(
shard.grid @mesh(shape = 2x2) {nn.axis_names = ["dp", "tp"]}
func.func @loss(%x: tensor<2x8xf32> {nn.input, nn.axes = ["batch", "embed"], nn.sharding = [["dp"], []]},
                %y: tensor<2xi32> {nn.label, nn.axes = ["batch"], nn.sharding = [["dp"]]},
                %w: tensor<8x3xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.5>, nn.axes = ["embed", "classes"], nn.sharding = [[], ["tp"]]})
    -> tensor<f32> {
  %h = nn.matmul %x, %w : (tensor<2x8xf32>, tensor<8x3xf32>) -> tensor<2x3xf32>
  %z = shard.all_gather %h on @mesh grid_axes = [1] gather_axis = 1 : tensor<2x3xf32> -> tensor<2x6xf32>
  %l = nn.cross_entropy %z, %y : (tensor<2x6xf32>, tensor<2xi32>) -> tensor<f32>
  %m = shard.all_reduce %l on @mesh grid_axes = [0] reduction = average : tensor<f32> -> tensor<f32>
  return %m : tensor<f32>
}
func.func @loss_backward(%x: tensor<2x8xf32> {nn.input, nn.axes = ["batch", "embed"], nn.sharding = [["dp"], []]},
                         %y: tensor<2xi32> {nn.label, nn.axes = ["batch"], nn.sharding = [["dp"]]},
                         %w: tensor<8x3xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.5>, nn.axes = ["embed", "classes"], nn.sharding = [[], ["tp"]]},
                         %gw: tensor<8x3xf32> {nn.grad = "w", nn.sharding = [[], ["tp"]]})
    -> (tensor<f32>, tensor<8x3xf32> {nn.grad = "w", nn.sharding = [[], ["tp"]]}) attributes {nn.entry = "backward"} {
  %h = nn.matmul %x, %w : (tensor<2x8xf32>, tensor<8x3xf32>) -> tensor<2x3xf32>
  %z = shard.all_gather %h on @mesh grid_axes = [1] gather_axis = 1 : tensor<2x3xf32> -> tensor<2x6xf32>
  %l = nn.cross_entropy %z, %y : (tensor<2x6xf32>, tensor<2xi32>) -> tensor<f32>
  %m = shard.all_reduce %l on @mesh grid_axes = [0] reduction = average : tensor<f32> -> tensor<f32>
  %one = nn.constant dense<1.0> : tensor<f32>
  %dz = nn.cross_entropy_grad %z, %y, %one : (tensor<2x6xf32>, tensor<2xi32>, tensor<f32>) -> tensor<2x6xf32>
  %dh = shard.all_slice %dz on @mesh grid_axes = [1] slice_axis = 1 : tensor<2x6xf32> -> tensor<2x3xf32>
  %dw = nn.matmul %x, %dh transpose_lhs : (tensor<2x8xf32>, tensor<2x3xf32>) -> tensor<8x3xf32>
  %dwm = shard.all_reduce %dw on @mesh grid_axes = [0] reduction = average : tensor<8x3xf32> -> tensor<8x3xf32>
  %acc = nn.accumulate %dwm outs(%gw) : tensor<8x3xf32>
  return %m, %acc : tensor<f32>, tensor<8x3xf32>
}
func.func @loss_update(%w: tensor<8x3xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.5>, nn.sharding = [[], ["tp"]]},
                       %g: tensor<8x3xf32> {nn.grad = "w", nn.sharding = [[], ["tp"]]},
                       %s: tensor<8x3xf32> {nn.state = "w.momentum", nn.sharding = [[], ["tp"]]},
                       %gs: tensor<f32> {nn.grad_scale})
    -> (tensor<8x3xf32> {nn.param = "w", nn.sharding = [[], ["tp"]]}, tensor<8x3xf32> {nn.state = "w.momentum", nn.sharding = [[], ["tp"]]}) attributes {nn.entry = "update"} {
  %sq = nn.sum_squares %g : (tensor<8x3xf32>) -> tensor<f32>
  %norm = shard.all_reduce %sq on @mesh grid_axes = [1] : tensor<f32> -> tensor<f32>
  %scale = nn.clip_scale %norm, %gs {max_norm = 1.0 : f64} : tensor<f32>
  %w2, %s2 = nn.optimizer_step sgd %g, %scale outs(%w, %s : tensor<8x3xf32>, tensor<8x3xf32>) {momentum = 0.9 : f64} : tensor<8x3xf32>
  return %w2, %s2 : tensor<8x3xf32>, tensor<8x3xf32>
}

// -----

// Tests that a repeated layer's collectives count once per layer and nested
// repeats multiply: @inner's tp all-reduce runs 2 x 3 = 6 times (6 x 128
// bytes), @outer's all-gather 3 times (3 x 256 bytes of output); the
// all-reduce over pp (a group of one) and the all_slice move nothing and
// are left out, as the runtime's counters leave them out.
// CHECK: \22collectives\22:{\22forward\22:[{\22axes\22:[\22dp\22],\22bytes\22:4,\22calls\22:1,\22kind\22:\22all_reduce\22},{\22axes\22:[\22tp\22],\22bytes\22:768,\22calls\22:6,\22kind\22:\22all_reduce\22},{\22axes\22:[\22tp\22],\22bytes\22:768,\22calls\22:3,\22kind\22:\22all_gather\22}]}
// CHECK-SAME: \22mesh\22:{\22axes\22:[\22dp\22,\22tp\22,\22pp\22],\22shape\22:[2,2,1]}
// CHECK-SAME: \22global_shape\22:[3,2,16],\22init\22:{\22args\22:[0,0],\22kind\22:\22zeros\22},\22name\22:\22w\22,\22offset\22:0,\22role\22:\22param\22,\22shape\22:[3,2,8],\22sharding\22:{{\[\[}}],[],[\22tp\22]]}
shard.grid @mesh(shape = 2x2x1) {nn.axis_names = ["dp", "tp", "pp"]}
func.func private @inner(%h: tensor<4x8xf32>, %w: tensor<8xf32>) -> tensor<4x8xf32> {
  %b = nn.broadcast %w dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %0 = nn.mul %h, %b : tensor<4x8xf32>
  %1 = shard.all_reduce %0 on @mesh grid_axes = [1] : tensor<4x8xf32> -> tensor<4x8xf32>
  %2 = shard.all_reduce %1 on @mesh grid_axes = [2] : tensor<4x8xf32> -> tensor<4x8xf32>
  return %2 : tensor<4x8xf32>
}
func.func private @outer(%h: tensor<4x8xf32>, %w: tensor<2x8xf32>) -> tensor<4x8xf32> {
  %0 = nn.repeat @inner(%h) params(%w) : (tensor<4x8xf32>, tensor<2x8xf32>) -> tensor<4x8xf32>
  %1 = shard.all_gather %0 on @mesh grid_axes = [1] gather_axis = 1 : tensor<4x8xf32> -> tensor<4x16xf32>
  %2 = shard.all_slice %1 on @mesh grid_axes = [1] slice_axis = 1 : tensor<4x16xf32> -> tensor<4x8xf32>
  return %2 : tensor<4x8xf32>
}
func.func @loss(%x: tensor<4x8xf32> {nn.input, nn.axes = ["batch", "embed"], nn.sharding = [["dp"], []]},
                %w: tensor<3x2x8xf32> {nn.param = "w", nn.init = #nn.init<zeros>, nn.sharding = [[], [], ["tp"]]})
    -> tensor<f32> {
  %h = nn.repeat @outer(%x) params(%w) : (tensor<4x8xf32>, tensor<3x2x8xf32>) -> tensor<4x8xf32>
  %s = nn.reduce_sum %h dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %l = shard.all_reduce %s on @mesh grid_axes = [0] reduction = average : tensor<f32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that the token limit of a vocabulary-parallel embedding is the
// global vocabulary (the local table's 5 rows x tp = 2), and that a tensor
// split over two axes has both, outer first, in its sharding.
// CHECK: \22global_shape\22:[10,4],\22init\22:{\22args\22:[0,0],\22kind\22:\22zeros\22},\22name\22:\22wte\22,\22offset\22:0,\22role\22:\22param\22,\22shape\22:[5,4],\22sharding\22:{{\[\[}}\22tp\22],[]]}
// CHECK-SAME: \22global_shape\22:[8,3],\22limit\22:10,\22name\22:\22input0\22,\22offset\22:128,\22role\22:\22input\22,\22shape\22:[2,3],\22sharding\22:{{\[\[}}\22dp\22,\22tp\22],[]]}
shard.grid @mesh(shape = 2x2) {nn.axis_names = ["dp", "tp"]}
func.func @tokens(%wte: tensor<5x4xf32> {nn.param = "wte", nn.init = #nn.init<zeros>, nn.sharding = [["tp"], []]},
                  %ids: tensor<2x3xi32> {nn.input, nn.sharding = [["dp", "tp"], []]}) -> tensor<f32> {
  %e = nn.embedding %wte, %ids : (tensor<5x4xf32>, tensor<2x3xi32>) -> tensor<2x3x4xf32>
  %s = nn.reduce_sum %e dims = [0, 1, 2] : tensor<2x3x4xf32> -> tensor<f32>
  %l = shard.all_reduce %s on @mesh grid_axes = [0, 1] : tensor<f32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a model without a mesh has no "mesh", "collectives",
// "global_shape" or "sharding" in its description.
// CHECK: llvm.mlir.global private constant @__tessel_model_json
// CHECK-NOT: mesh
// CHECK-NOT: collectives
// CHECK-NOT: global_shape
// CHECK-NOT: sharding
// CHECK-LABEL: llvm.func @tessel_fn_plain
func.func @plain(%x: tensor<4xf32> {nn.input}) -> tensor<f32> {
  %0 = nn.reduce_sum %x dims = [0] : tensor<4xf32> -> tensor<f32>
  return %0 : tensor<f32>
}
