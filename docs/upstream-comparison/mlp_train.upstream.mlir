// The training step's forward and backward of examples/mlp.mlir in
// upstream linalg/arith/math: the forward of mlp.upstream.mlir, then the
// gradients of the mean cross-entropy with respect to W1, b1, W2 and b2,
// written out by hand (upstream has no autodiff), for upstream
// `sharding-propagation` + `shard-partition`
// (docs/upstream-comparison.md). It returns the loss (whole) and the four
// gradients, each annotated with its parameter's sharding, as Tessel's
// backward entry returns them (the SGD update that follows is local to
// each rank and communicates nothing in either partitioner).
//   dz  = (softmax(z) - onehot(y)) / 32     dW2 = aᵀ · dz, db2 = Σ_b dz
//   da  = dz · W2ᵀ                          dhb = da · gelu'(h + b1)
//   dW1 = xᵀ · dhb, db1 = Σ_b dhb
// compare-upstream.sh rewrites the grid's shape for each mesh (1x2 = tp=2,
// 2x1 = dp=2); grid axis 0 is dp, axis 1 is tp.
#id2 = affine_map<(b, c) -> (b, c)>
#row2 = affine_map<(b, c) -> (b)>
#col2 = affine_map<(b, c) -> (c)>
#id1 = affine_map<(b) -> (b)>
#scalar1 = affine_map<(b) -> ()>
// Weight gradients: loops (f, c, b), b (the batch) contracted.
#wg_a = affine_map<(f, c, b) -> (b, f)>
#wg_d = affine_map<(f, c, b) -> (b, c)>
#wg_o = affine_map<(f, c, b) -> (f, c)>
// da = dz · W2ᵀ: loops (b, f, c), c contracted.
#da_z = affine_map<(b, f, c) -> (b, c)>
#da_w = affine_map<(b, f, c) -> (f, c)>
#da_o = affine_map<(b, f, c) -> (b, f)>
module {
  shard.grid @mesh(shape = 2x2)

  func.func @loss_backward(%x_arg: tensor<32x784xf32>, %y_arg: tensor<32xi32>,
                  %w1_arg: tensor<784x1024xf32>, %b1_arg: tensor<1024xf32>,
                  %w2_arg: tensor<1024x10xf32>, %b2_arg: tensor<10xf32>)
      -> (tensor<f32>, tensor<784x1024xf32>, tensor<1024xf32>,
          tensor<1024x10xf32>, tensor<10xf32>) {
    %batch = shard.sharding @mesh split_axes = [[0]] : !shard.sharding
    %column = shard.sharding @mesh split_axes = [[], [1]] : !shard.sharding
    %row = shard.sharding @mesh split_axes = [[1]] : !shard.sharding
    %whole = shard.sharding @mesh split_axes = [[]] : !shard.sharding
    %x = shard.shard %x_arg to %batch : tensor<32x784xf32>
    %y = shard.shard %y_arg to %batch : tensor<32xi32>
    %w1 = shard.shard %w1_arg to %column : tensor<784x1024xf32>
    %b1 = shard.shard %b1_arg to %row : tensor<1024xf32>
    %w2 = shard.shard %w2_arg to %row : tensor<1024x10xf32>
    %b2 = shard.shard %b2_arg to %whole : tensor<10xf32>

    %zero = arith.constant 0.0 : f32
    %ninf = arith.constant 0xFF800000 : f32

    // fc1 + b1, GELU (exact: x/2 · (1 + erf(x/√2))).
    %e1 = tensor.empty() : tensor<32x1024xf32>
    %z1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<32x1024xf32>) -> tensor<32x1024xf32>
    %h = linalg.matmul ins(%x, %w1 : tensor<32x784xf32>, tensor<784x1024xf32>)
                       outs(%z1 : tensor<32x1024xf32>) -> tensor<32x1024xf32>
    %e1a = tensor.empty() : tensor<32x1024xf32>
    %a = linalg.generic {indexing_maps = [#id2, #col2, #id2],
                         iterator_types = ["parallel", "parallel"]}
        ins(%h, %b1 : tensor<32x1024xf32>, tensor<1024xf32>)
        outs(%e1a : tensor<32x1024xf32>) {
    ^bb0(%hv: f32, %bv: f32, %o: f32):
      %half = arith.constant 0.5 : f32
      %one = arith.constant 1.0 : f32
      %rsqrt2 = arith.constant 0.70710678118654752 : f32
      %s = arith.addf %hv, %bv : f32
      %t = arith.mulf %s, %rsqrt2 : f32
      %erf = math.erf %t : f32
      %p = arith.addf %erf, %one : f32
      %hs = arith.mulf %s, %half : f32
      %g = arith.mulf %hs, %p : f32
      linalg.yield %g : f32
    } -> tensor<32x1024xf32>

    // fc2 + b2.
    %e2 = tensor.empty() : tensor<32x10xf32>
    %z2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<32x10xf32>) -> tensor<32x10xf32>
    %m = linalg.matmul ins(%a, %w2 : tensor<32x1024xf32>, tensor<1024x10xf32>)
                       outs(%z2 : tensor<32x10xf32>) -> tensor<32x10xf32>
    %e2a = tensor.empty() : tensor<32x10xf32>
    %logits = linalg.generic {indexing_maps = [#id2, #col2, #id2],
                              iterator_types = ["parallel", "parallel"]}
        ins(%m, %b2 : tensor<32x10xf32>, tensor<10xf32>)
        outs(%e2a : tensor<32x10xf32>) {
    ^bb0(%mv: f32, %bv: f32, %o: f32):
      %s = arith.addf %mv, %bv : f32
      linalg.yield %s : f32
    } -> tensor<32x10xf32>

    // Mean cross-entropy: per row log Σ exp(z - max) + max - z[label].
    %er = tensor.empty() : tensor<32xf32>
    %minit = linalg.fill ins(%ninf : f32) outs(%er : tensor<32xf32>) -> tensor<32xf32>
    %rmax = linalg.generic {indexing_maps = [#id2, #row2],
                            iterator_types = ["parallel", "reduction"]}
        ins(%logits : tensor<32x10xf32>) outs(%minit : tensor<32xf32>) {
    ^bb0(%zv: f32, %acc: f32):
      %r = arith.maximumf %zv, %acc : f32
      linalg.yield %r : f32
    } -> tensor<32xf32>
    %er2 = tensor.empty() : tensor<32xf32>
    %sinit = linalg.fill ins(%zero : f32) outs(%er2 : tensor<32xf32>) -> tensor<32xf32>
    %sumexp = linalg.generic {indexing_maps = [#id2, #row2, #row2],
                              iterator_types = ["parallel", "reduction"]}
        ins(%logits, %rmax : tensor<32x10xf32>, tensor<32xf32>)
        outs(%sinit : tensor<32xf32>) {
    ^bb0(%zv: f32, %mx: f32, %acc: f32):
      %d = arith.subf %zv, %mx : f32
      %ex = math.exp %d : f32
      %r = arith.addf %ex, %acc : f32
      linalg.yield %r : f32
    } -> tensor<32xf32>
    %er3 = tensor.empty() : tensor<32xf32>
    %pinit = linalg.fill ins(%zero : f32) outs(%er3 : tensor<32xf32>) -> tensor<32xf32>
    %picked = linalg.generic {indexing_maps = [#id2, #row2, #row2],
                              iterator_types = ["parallel", "reduction"]}
        ins(%logits, %y : tensor<32x10xf32>, tensor<32xi32>)
        outs(%pinit : tensor<32xf32>) {
    ^bb0(%zv: f32, %label: i32, %acc: f32):
      %c = linalg.index 1 : index
      %ci = arith.index_cast %c : index to i32
      %hit = arith.cmpi eq, %ci, %label : i32
      %v = arith.select %hit, %zv, %zero : f32
      %r = arith.addf %v, %acc : f32
      linalg.yield %r : f32
    } -> tensor<32xf32>
    %e0 = tensor.empty() : tensor<f32>
    %l0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
    %sum = linalg.generic {indexing_maps = [#id1, #id1, #id1, #scalar1],
                           iterator_types = ["reduction"]}
        ins(%sumexp, %rmax, %picked : tensor<32xf32>, tensor<32xf32>, tensor<32xf32>)
        outs(%l0 : tensor<f32>) {
    ^bb0(%se: f32, %mx: f32, %pk: f32, %acc: f32):
      %inv = arith.constant 0.03125 : f32
      %lg = math.log %se : f32
      %lse = arith.addf %lg, %mx : f32
      %nll = arith.subf %lse, %pk : f32
      %w = arith.mulf %nll, %inv : f32
      %r = arith.addf %w, %acc : f32
      linalg.yield %r : f32
    } -> tensor<f32>
    // Backward. dz = (exp(z - max) / Σexp - onehot(y)) / 32.
    %e_dz = tensor.empty() : tensor<32x10xf32>
    %dz = linalg.generic {indexing_maps = [#id2, #row2, #row2, #row2, #id2],
                          iterator_types = ["parallel", "parallel"]}
        ins(%logits, %rmax, %sumexp, %y : tensor<32x10xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xi32>)
        outs(%e_dz : tensor<32x10xf32>) {
    ^bb0(%zv: f32, %mx: f32, %se: f32, %label: i32, %o: f32):
      %inv = arith.constant 0.03125 : f32
      %one = arith.constant 1.0 : f32
      %d = arith.subf %zv, %mx : f32
      %ex = math.exp %d : f32
      %p = arith.divf %ex, %se : f32
      %c = linalg.index 1 : index
      %ci = arith.index_cast %c : index to i32
      %hit = arith.cmpi eq, %ci, %label : i32
      %oh = arith.select %hit, %one, %zero : f32
      %g = arith.subf %p, %oh : f32
      %r = arith.mulf %g, %inv : f32
      linalg.yield %r : f32
    } -> tensor<32x10xf32>

    // db2 = Σ_b dz; dW2 = aᵀ · dz.
    %e_db2 = tensor.empty() : tensor<10xf32>
    %z_db2 = linalg.fill ins(%zero : f32) outs(%e_db2 : tensor<10xf32>) -> tensor<10xf32>
    %db2 = linalg.generic {indexing_maps = [#id2, #col2],
                           iterator_types = ["reduction", "parallel"]}
        ins(%dz : tensor<32x10xf32>) outs(%z_db2 : tensor<10xf32>) {
    ^bb0(%g: f32, %acc: f32):
      %r = arith.addf %g, %acc : f32
      linalg.yield %r : f32
    } -> tensor<10xf32>
    %e_dw2 = tensor.empty() : tensor<1024x10xf32>
    %z_dw2 = linalg.fill ins(%zero : f32) outs(%e_dw2 : tensor<1024x10xf32>) -> tensor<1024x10xf32>
    %dw2 = linalg.generic {indexing_maps = [#wg_a, #wg_d, #wg_o],
                           iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%a, %dz : tensor<32x1024xf32>, tensor<32x10xf32>) outs(%z_dw2 : tensor<1024x10xf32>) {
    ^bb0(%av: f32, %g: f32, %acc: f32):
      %prod = arith.mulf %av, %g : f32
      %r = arith.addf %prod, %acc : f32
      linalg.yield %r : f32
    } -> tensor<1024x10xf32>

    // da = dz · W2ᵀ; dhb = da · gelu'(h + b1), gelu'(t) = Φ(t) + t·φ(t).
    %e_da = tensor.empty() : tensor<32x1024xf32>
    %z_da = linalg.fill ins(%zero : f32) outs(%e_da : tensor<32x1024xf32>) -> tensor<32x1024xf32>
    %da = linalg.generic {indexing_maps = [#da_z, #da_w, #da_o],
                          iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%dz, %w2 : tensor<32x10xf32>, tensor<1024x10xf32>) outs(%z_da : tensor<32x1024xf32>) {
    ^bb0(%g: f32, %w: f32, %acc: f32):
      %prod = arith.mulf %g, %w : f32
      %r = arith.addf %prod, %acc : f32
      linalg.yield %r : f32
    } -> tensor<32x1024xf32>
    %e_dh = tensor.empty() : tensor<32x1024xf32>
    %dh = linalg.generic {indexing_maps = [#id2, #id2, #col2, #id2],
                          iterator_types = ["parallel", "parallel"]}
        ins(%da, %h, %b1 : tensor<32x1024xf32>, tensor<32x1024xf32>, tensor<1024xf32>)
        outs(%e_dh : tensor<32x1024xf32>) {
    ^bb0(%g: f32, %hv: f32, %bv: f32, %o: f32):
      %half = arith.constant 0.5 : f32
      %one = arith.constant 1.0 : f32
      %rsqrt2 = arith.constant 0.70710678118654752 : f32
      %rsqrt2pi = arith.constant 0.3989422804014327 : f32
      %t = arith.addf %hv, %bv : f32
      %ts = arith.mulf %t, %rsqrt2 : f32
      %erf = math.erf %ts : f32
      %p = arith.addf %erf, %one : f32
      %cdf = arith.mulf %p, %half : f32
      %t2 = arith.mulf %t, %t : f32
      %nh = arith.mulf %t2, %half : f32
      %nn = arith.negf %nh : f32
      %ex = math.exp %nn : f32
      %pdf = arith.mulf %ex, %rsqrt2pi : f32
      %tp = arith.mulf %t, %pdf : f32
      %d = arith.addf %cdf, %tp : f32
      %r = arith.mulf %g, %d : f32
      linalg.yield %r : f32
    } -> tensor<32x1024xf32>

    // db1 = Σ_b dhb; dW1 = xᵀ · dhb.
    %e_db1 = tensor.empty() : tensor<1024xf32>
    %z_db1 = linalg.fill ins(%zero : f32) outs(%e_db1 : tensor<1024xf32>) -> tensor<1024xf32>
    %db1 = linalg.generic {indexing_maps = [#id2, #col2],
                           iterator_types = ["reduction", "parallel"]}
        ins(%dh : tensor<32x1024xf32>) outs(%z_db1 : tensor<1024xf32>) {
    ^bb0(%g: f32, %acc: f32):
      %r = arith.addf %g, %acc : f32
      linalg.yield %r : f32
    } -> tensor<1024xf32>
    %e_dw1 = tensor.empty() : tensor<784x1024xf32>
    %z_dw1 = linalg.fill ins(%zero : f32) outs(%e_dw1 : tensor<784x1024xf32>) -> tensor<784x1024xf32>
    %dw1 = linalg.generic {indexing_maps = [#wg_a, #wg_d, #wg_o],
                           iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%x, %dh : tensor<32x784xf32>, tensor<32x1024xf32>) outs(%z_dw1 : tensor<784x1024xf32>) {
    ^bb0(%xv: f32, %g: f32, %acc: f32):
      %prod = arith.mulf %xv, %g : f32
      %r = arith.addf %prod, %acc : f32
      linalg.yield %r : f32
    } -> tensor<784x1024xf32>

    %scalar = shard.sharding @mesh split_axes = [[]] : !shard.sharding
    %loss = shard.shard %sum to %scalar annotate_for_users : tensor<f32>
    %gw1 = shard.shard %dw1 to %column annotate_for_users : tensor<784x1024xf32>
    %gb1 = shard.shard %db1 to %row annotate_for_users : tensor<1024xf32>
    %gw2 = shard.shard %dw2 to %row annotate_for_users : tensor<1024x10xf32>
    %gb2 = shard.shard %db2 to %whole annotate_for_users : tensor<10xf32>
    return %loss, %gw1, %gb1, %gw2, %gb2 : tensor<f32>, tensor<784x1024xf32>,
        tensor<1024xf32>, tensor<1024x10xf32>, tensor<10xf32>
  }
}
