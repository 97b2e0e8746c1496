// The forward of examples/mlp.mlir (x[32,784] @ W1[784,1024] + b1, exact
// GELU, @ W2[1024,10] + b2, mean cross-entropy against labels y[32]) in
// upstream linalg/arith/math, for upstream `sharding-propagation` +
// `shard-partition` (docs/upstream-comparison.md). Only the arguments are
// annotated, as Tessel's nn.axes are: the batch of x and y over dp, W1's
// columns and b1 over tp (column-parallel), W2's rows over tp
// (row-parallel), b2 whole; the scalar loss is returned whole.
// compare-upstream.sh rewrites the grid's shape for each mesh (1x2 = tp=2,
// 2x1 = dp=2); grid axis 0 is dp, axis 1 is tp.
#id2 = affine_map<(b, c) -> (b, c)>
#row2 = affine_map<(b, c) -> (b)>
#col2 = affine_map<(b, c) -> (c)>
#id1 = affine_map<(b) -> (b)>
#scalar1 = affine_map<(b) -> ()>
module {
  shard.grid @mesh(shape = 2x2)

  func.func @loss(%x_arg: tensor<32x784xf32>, %y_arg: tensor<32xi32>,
                  %w1_arg: tensor<784x1024xf32>, %b1_arg: tensor<1024xf32>,
                  %w2_arg: tensor<1024x10xf32>, %b2_arg: tensor<10xf32>)
      -> tensor<f32> {
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
    %scalar = shard.sharding @mesh split_axes = [[]] : !shard.sharding
    %loss = shard.shard %sum to %scalar annotate_for_users : tensor<f32>
    return %loss : tensor<f32>
  }
}
