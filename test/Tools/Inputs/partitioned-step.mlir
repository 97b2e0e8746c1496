// A training step partitioned by hand over dp=2, tp=4 (the batch over dp,
// the classes of the weight over tp), as tessel-partition would write it:
// tessel-compile-mesh.mlir compiles it with --no-train (it has its
// backward and update entries already). Trained as written (SGD with
// momentum 0.9, lr 0.1, clipping at 1), its losses are those of the same
// model on one device ([4, 8] x [8, 12] logits).
module attributes {nn.train = {beta1 = 0.9 : f64, beta2 = 0.999 : f64, clip = 1.0 : f64, eps = 1.0e-08 : f64, lr = 0.1 : f64, min_lr = 0.0 : f64, momentum = 0.9 : f64, nesterov = false, optimizer = "sgd", recompute = "none", schedule = "constant", total_steps = 0 : i64, warmup = 0 : i64, weight_decay = 0.0 : f64}} {
  shard.grid @mesh(shape = 2x4) {nn.axis_names = ["dp", "tp"]}
  func.func @loss(%x: tensor<2x8xf32> {nn.input, nn.axes = ["batch", "embed"], nn.sharding = [["dp"], []]},
                  %y: tensor<2xi32> {nn.label, nn.axes = ["batch"], nn.sharding = [["dp"]]},
                  %w: tensor<8x3xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.5>, nn.axes = ["embed", "classes"], nn.sharding = [[], ["tp"]]})
      -> tensor<f32> {
    %h = nn.matmul %x, %w : (tensor<2x8xf32>, tensor<8x3xf32>) -> tensor<2x3xf32>
    %z = shard.all_gather %h on @mesh grid_axes = [1] gather_axis = 1 : tensor<2x3xf32> -> tensor<2x12xf32>
    %l = nn.cross_entropy %z, %y : (tensor<2x12xf32>, tensor<2xi32>) -> tensor<f32>
    %m = shard.all_reduce %l on @mesh grid_axes = [0] reduction = average : tensor<f32> -> tensor<f32>
    return %m : tensor<f32>
  }
  func.func @loss_backward(%x: tensor<2x8xf32> {nn.input, nn.axes = ["batch", "embed"], nn.sharding = [["dp"], []]},
                           %y: tensor<2xi32> {nn.label, nn.axes = ["batch"], nn.sharding = [["dp"]]},
                           %w: tensor<8x3xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.5>, nn.axes = ["embed", "classes"], nn.sharding = [[], ["tp"]]},
                           %gw: tensor<8x3xf32> {nn.grad = "w", nn.sharding = [[], ["tp"]]})
      -> (tensor<f32>, tensor<8x3xf32> {nn.grad = "w", nn.sharding = [[], ["tp"]]}) attributes {nn.entry = "backward"} {
    %h = nn.matmul %x, %w : (tensor<2x8xf32>, tensor<8x3xf32>) -> tensor<2x3xf32>
    %z = shard.all_gather %h on @mesh grid_axes = [1] gather_axis = 1 : tensor<2x3xf32> -> tensor<2x12xf32>
    %l = nn.cross_entropy %z, %y : (tensor<2x12xf32>, tensor<2xi32>) -> tensor<f32>
    %m = shard.all_reduce %l on @mesh grid_axes = [0] reduction = average : tensor<f32> -> tensor<f32>
    %one = nn.constant dense<1.0> : tensor<f32>
    %dz = nn.cross_entropy_grad %z, %y, %one : (tensor<2x12xf32>, tensor<2xi32>, tensor<f32>) -> tensor<2x12xf32>
    %dh = shard.all_slice %dz on @mesh grid_axes = [1] slice_axis = 1 : tensor<2x12xf32> -> tensor<2x3xf32>
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
    %w2, %s2 = nn.optimizer_step sgd %g, %scale outs(%w, %s : tensor<8x3xf32>, tensor<8x3xf32>) {lr = 0.1 : f64, momentum = 0.9 : f64} : tensor<8x3xf32>
    return %w2, %s2 : tensor<8x3xf32>, tensor<8x3xf32>
  }

}
