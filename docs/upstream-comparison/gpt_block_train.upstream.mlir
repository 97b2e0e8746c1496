// The training step's forward and backward of gpt_block.nn.mlir in upstream
// linalg/arith/math: the forward of gpt_block.upstream.mlir, then the
// gradients of every parameter, written out by hand (upstream has no
// autodiff) in the same upstream-partitionable forms, for upstream
// `sharding-propagation` + `shard-partition`
// (docs/upstream-comparison.md). It returns the loss (whole) and the 16
// gradients, each annotated with its parameter's sharding, as Tessel's
// backward entry returns them; h is an input, so its gradient is not
// computed (as in Tessel). The input gradients of q, k and v are three
// contractions added afterwards, as an autodiff writes them.
// compare-upstream.sh rewrites the grid's shape for each mesh (1x2 = tp=2,
// 2x1 = dp=2); grid axis 0 is dp, axis 1 is tp.
#x3 = affine_map<(b, s, d) -> (b, s, d)>
#bs3 = affine_map<(b, s, d) -> (b, s)>
#d3 = affine_map<(b, s, d) -> (d)>
#all3 = affine_map<(b, s, d) -> ()>
// Projections to heads: loops (b, s, n, e, d), d contracted.
#pin = affine_map<(b, s, n, e, d) -> (b, s, d)>
#pw = affine_map<(b, s, n, e, d) -> (d, n, e)>
#pout = affine_map<(b, s, n, e, d) -> (b, s, n, e)>
#h4 = affine_map<(b, s, n, e) -> (b, s, n, e)>
#hb4 = affine_map<(b, s, n, e) -> (n, e)>
// Scores: loops (b, n, i, j, e), e contracted.
#sq = affine_map<(b, n, i, j, e) -> (b, i, n, e)>
#sk = affine_map<(b, n, i, j, e) -> (b, j, n, e)>
#sout = affine_map<(b, n, i, j, e) -> (b, n, i, j)>
#s4 = affine_map<(b, n, i, j) -> (b, n, i, j)>
#r4 = affine_map<(b, n, i, j) -> (b, n, i)>
// Weighted values: loops (b, i, n, e, j), j contracted.
#vp = affine_map<(b, i, n, e, j) -> (b, n, i, j)>
#vv = affine_map<(b, i, n, e, j) -> (b, j, n, e)>
#vout = affine_map<(b, i, n, e, j) -> (b, i, n, e)>
// Output projection: loops (b, s, d, n, e), n and e contracted.
#oin = affine_map<(b, s, d, n, e) -> (b, s, n, e)>
#ow = affine_map<(b, s, d, n, e) -> (n, e, d)>
#oout = affine_map<(b, s, d, n, e) -> (b, s, d)>
// MLP matmuls: loops (b, s, f, d), d contracted.
#min = affine_map<(b, s, f, d) -> (b, s, d)>
#mw = affine_map<(b, s, f, d) -> (d, f)>
#mout = affine_map<(b, s, f, d) -> (b, s, f)>
// Backward: weight gradients of the MLP, loops (i, j, b, s), b and s
// contracted.
#wg_i = affine_map<(i, j, b, s) -> (b, s, i)>
#wg_j = affine_map<(i, j, b, s) -> (b, s, j)>
#wg_o = affine_map<(i, j, b, s) -> (i, j)>
// Input gradients of the MLP (dy · Wᵀ), loops (b, s, i, j), j contracted.
#bt_g = affine_map<(b, s, i, j) -> (b, s, j)>
#bt_w = affine_map<(b, s, i, j) -> (i, j)>
#bt_o = affine_map<(b, s, i, j) -> (b, s, i)>
// dW_o, loops (n, e, d, b, s); datt = dh1 · W_oᵀ, loops (b, s, n, e, d).
#gwo_a = affine_map<(n, e, d, b, s) -> (b, s, n, e)>
#gwo_g = affine_map<(n, e, d, b, s) -> (b, s, d)>
#gwo_o = affine_map<(n, e, d, b, s) -> (n, e, d)>
#pwo = affine_map<(b, s, n, e, d) -> (n, e, d)>
// dv = pᵀ · datt and dk = dsᵀ · q, loops (b, j, n, e, i), i contracted.
#kt_s = affine_map<(b, j, n, e, i) -> (b, n, i, j)>
#kt_a = affine_map<(b, j, n, e, i) -> (b, i, n, e)>
#kt_o = affine_map<(b, j, n, e, i) -> (b, j, n, e)>
// dW_q, loops (d, n, e, b, s); dx = dq · W_qᵀ, loops (b, s, d, n, e).
#gwq_x = affine_map<(d, n, e, b, s) -> (b, s, d)>
#gwq_g = affine_map<(d, n, e, b, s) -> (b, s, n, e)>
#gwq_o = affine_map<(d, n, e, b, s) -> (d, n, e)>
#oinw = affine_map<(b, s, d, n, e) -> (d, n, e)>
module {
  shard.grid @mesh(shape = 2x2)

  func.func @block_backward(
      %h_arg: tensor<8x64x128xf32>,
      %ln1_g_arg: tensor<128xf32>, %ln1_b_arg: tensor<128xf32>,
      %w_q_arg: tensor<128x4x32xf32>, %b_q_arg: tensor<4x32xf32>,
      %w_k_arg: tensor<128x4x32xf32>, %b_k_arg: tensor<4x32xf32>,
      %w_v_arg: tensor<128x4x32xf32>, %b_v_arg: tensor<4x32xf32>,
      %w_o_arg: tensor<4x32x128xf32>, %b_o_arg: tensor<128xf32>,
      %ln2_g_arg: tensor<128xf32>, %ln2_b_arg: tensor<128xf32>,
      %w_fc_arg: tensor<128x512xf32>, %b_fc_arg: tensor<512xf32>,
      %w_proj_arg: tensor<512x128xf32>, %b_proj_arg: tensor<128xf32>)
      -> (tensor<f32>,
          tensor<128xf32>, tensor<128xf32>,
          tensor<128x4x32xf32>, tensor<4x32xf32>,
          tensor<128x4x32xf32>, tensor<4x32xf32>,
          tensor<128x4x32xf32>, tensor<4x32xf32>,
          tensor<4x32x128xf32>, tensor<128xf32>,
          tensor<128xf32>, tensor<128xf32>,
          tensor<128x512xf32>, tensor<512xf32>,
          tensor<512x128xf32>, tensor<128xf32>) {
    %batch = shard.sharding @mesh split_axes = [[0]] : !shard.sharding
    %whole = shard.sharding @mesh split_axes = [[]] : !shard.sharding
    %col = shard.sharding @mesh split_axes = [[], [1]] : !shard.sharding
    %row = shard.sharding @mesh split_axes = [[1]] : !shard.sharding
    %h = shard.shard %h_arg to %batch : tensor<8x64x128xf32>
    %ln1_g = shard.shard %ln1_g_arg to %whole : tensor<128xf32>
    %ln1_b = shard.shard %ln1_b_arg to %whole : tensor<128xf32>
    %w_q = shard.shard %w_q_arg to %col : tensor<128x4x32xf32>
    %b_q = shard.shard %b_q_arg to %row : tensor<4x32xf32>
    %w_k = shard.shard %w_k_arg to %col : tensor<128x4x32xf32>
    %b_k = shard.shard %b_k_arg to %row : tensor<4x32xf32>
    %w_v = shard.shard %w_v_arg to %col : tensor<128x4x32xf32>
    %b_v = shard.shard %b_v_arg to %row : tensor<4x32xf32>
    %w_o = shard.shard %w_o_arg to %row : tensor<4x32x128xf32>
    %b_o = shard.shard %b_o_arg to %whole : tensor<128xf32>
    %ln2_g = shard.shard %ln2_g_arg to %whole : tensor<128xf32>
    %ln2_b = shard.shard %ln2_b_arg to %whole : tensor<128xf32>
    %w_fc = shard.shard %w_fc_arg to %col : tensor<128x512xf32>
    %b_fc = shard.shard %b_fc_arg to %row : tensor<512xf32>
    %w_proj = shard.shard %w_proj_arg to %row : tensor<512x128xf32>
    %b_proj = shard.shard %b_proj_arg to %whole : tensor<128xf32>

    %zero = arith.constant 0.0 : f32
    %ninf = arith.constant 0xFF800000 : f32
    %unit = arith.constant 1.0 : f32

    // ln_1: mean, variance, normalise.
    %e_m1 = tensor.empty() : tensor<8x64xf32>
    %z_m1 = linalg.fill ins(%zero : f32) outs(%e_m1 : tensor<8x64xf32>) -> tensor<8x64xf32>
    %mean1 = linalg.generic {indexing_maps = [#x3, #bs3], iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%h : tensor<8x64x128xf32>) outs(%z_m1 : tensor<8x64xf32>) {
    ^bb0(%a: f32, %acc: f32):
      %inv = arith.constant 0.0078125 : f32
      %t = arith.mulf %a, %inv : f32
      %r = arith.addf %t, %acc : f32
      linalg.yield %r : f32
    } -> tensor<8x64xf32>
    %e_v1 = tensor.empty() : tensor<8x64xf32>
    %z_v1 = linalg.fill ins(%zero : f32) outs(%e_v1 : tensor<8x64xf32>) -> tensor<8x64xf32>
    %var1 = linalg.generic {indexing_maps = [#x3, #bs3, #bs3], iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%h, %mean1 : tensor<8x64x128xf32>, tensor<8x64xf32>) outs(%z_v1 : tensor<8x64xf32>) {
    ^bb0(%a: f32, %m: f32, %acc: f32):
      %inv = arith.constant 0.0078125 : f32
      %c = arith.subf %a, %m : f32
      %sq = arith.mulf %c, %c : f32
      %t = arith.mulf %sq, %inv : f32
      %r = arith.addf %t, %acc : f32
      linalg.yield %r : f32
    } -> tensor<8x64xf32>
    %e_x = tensor.empty() : tensor<8x64x128xf32>
    %x = linalg.generic {indexing_maps = [#x3, #bs3, #bs3, #d3, #d3, #x3], iterator_types = ["parallel", "parallel", "parallel"]}
        ins(%h, %mean1, %var1, %ln1_g, %ln1_b : tensor<8x64x128xf32>, tensor<8x64xf32>, tensor<8x64xf32>, tensor<128xf32>, tensor<128xf32>)
        outs(%e_x : tensor<8x64x128xf32>) {
    ^bb0(%a: f32, %m: f32, %v: f32, %g: f32, %be: f32, %o: f32):
      %eps = arith.constant 1.0e-05 : f32
      %c = arith.subf %a, %m : f32
      %ve = arith.addf %v, %eps : f32
      %rs = math.rsqrt %ve : f32
      %n = arith.mulf %c, %rs : f32
      %ng = arith.mulf %n, %g : f32
      %r = arith.addf %ng, %be : f32
      linalg.yield %r : f32
    } -> tensor<8x64x128xf32>

    // q, k, v = x · W + b, as [b, s, heads, head_dim].
    %e_q0 = tensor.empty() : tensor<8x64x4x32xf32>
    %z_q0 = linalg.fill ins(%zero : f32) outs(%e_q0 : tensor<8x64x4x32xf32>) -> tensor<8x64x4x32xf32>
    %q0 = linalg.generic {indexing_maps = [#pin, #pw, #pout], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
        ins(%x, %w_q : tensor<8x64x128xf32>, tensor<128x4x32xf32>) outs(%z_q0 : tensor<8x64x4x32xf32>) {
    ^bb0(%a: f32, %w: f32, %acc: f32):
      %p = arith.mulf %a, %w : f32
      %r = arith.addf %p, %acc : f32
      linalg.yield %r : f32
    } -> tensor<8x64x4x32xf32>
    %e_q = tensor.empty() : tensor<8x64x4x32xf32>
    %q = linalg.generic {indexing_maps = [#h4, #hb4, #h4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
        ins(%q0, %b_q : tensor<8x64x4x32xf32>, tensor<4x32xf32>) outs(%e_q : tensor<8x64x4x32xf32>) {
    ^bb0(%a: f32, %bb: f32, %o: f32):
      %r = arith.addf %a, %bb : f32
      linalg.yield %r : f32
    } -> tensor<8x64x4x32xf32>
    %e_k0 = tensor.empty() : tensor<8x64x4x32xf32>
    %z_k0 = linalg.fill ins(%zero : f32) outs(%e_k0 : tensor<8x64x4x32xf32>) -> tensor<8x64x4x32xf32>
    %k0 = linalg.generic {indexing_maps = [#pin, #pw, #pout], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
        ins(%x, %w_k : tensor<8x64x128xf32>, tensor<128x4x32xf32>) outs(%z_k0 : tensor<8x64x4x32xf32>) {
    ^bb0(%a: f32, %w: f32, %acc: f32):
      %p = arith.mulf %a, %w : f32
      %r = arith.addf %p, %acc : f32
      linalg.yield %r : f32
    } -> tensor<8x64x4x32xf32>
    %e_k = tensor.empty() : tensor<8x64x4x32xf32>
    %k = linalg.generic {indexing_maps = [#h4, #hb4, #h4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
        ins(%k0, %b_k : tensor<8x64x4x32xf32>, tensor<4x32xf32>) outs(%e_k : tensor<8x64x4x32xf32>) {
    ^bb0(%a: f32, %bb: f32, %o: f32):
      %r = arith.addf %a, %bb : f32
      linalg.yield %r : f32
    } -> tensor<8x64x4x32xf32>
    %e_v0 = tensor.empty() : tensor<8x64x4x32xf32>
    %z_v0 = linalg.fill ins(%zero : f32) outs(%e_v0 : tensor<8x64x4x32xf32>) -> tensor<8x64x4x32xf32>
    %v0 = linalg.generic {indexing_maps = [#pin, #pw, #pout], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
        ins(%x, %w_v : tensor<8x64x128xf32>, tensor<128x4x32xf32>) outs(%z_v0 : tensor<8x64x4x32xf32>) {
    ^bb0(%a: f32, %w: f32, %acc: f32):
      %p = arith.mulf %a, %w : f32
      %r = arith.addf %p, %acc : f32
      linalg.yield %r : f32
    } -> tensor<8x64x4x32xf32>
    %e_v = tensor.empty() : tensor<8x64x4x32xf32>
    %v = linalg.generic {indexing_maps = [#h4, #hb4, #h4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
        ins(%v0, %b_v : tensor<8x64x4x32xf32>, tensor<4x32xf32>) outs(%e_v : tensor<8x64x4x32xf32>) {
    ^bb0(%a: f32, %bb: f32, %o: f32):
      %r = arith.addf %a, %bb : f32
      linalg.yield %r : f32
    } -> tensor<8x64x4x32xf32>

    // Scores q·k / √32, causal mask, softmax over the keys.
    %e_s = tensor.empty() : tensor<8x4x64x64xf32>
    %z_s = linalg.fill ins(%zero : f32) outs(%e_s : tensor<8x4x64x64xf32>) -> tensor<8x4x64x64xf32>
    %s = linalg.generic {indexing_maps = [#sq, #sk, #sout], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
        ins(%q, %k : tensor<8x64x4x32xf32>, tensor<8x64x4x32xf32>) outs(%z_s : tensor<8x4x64x64xf32>) {
    ^bb0(%a: f32, %bb: f32, %acc: f32):
      %scale = arith.constant 0.17677669529663687 : f32
      %p = arith.mulf %a, %bb : f32
      %ps = arith.mulf %p, %scale : f32
      %r = arith.addf %ps, %acc : f32
      linalg.yield %r : f32
    } -> tensor<8x4x64x64xf32>
    %e_sm = tensor.empty() : tensor<8x4x64x64xf32>
    %sm = linalg.generic {indexing_maps = [#s4, #s4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
        ins(%s : tensor<8x4x64x64xf32>) outs(%e_sm : tensor<8x4x64x64xf32>) {
    ^bb0(%a: f32, %o: f32):
      %i = linalg.index 2 : index
      %j = linalg.index 3 : index
      %future = arith.cmpi ugt, %j, %i : index
      %r = arith.select %future, %ninf, %a : f32
      linalg.yield %r : f32
    } -> tensor<8x4x64x64xf32>
    %e_mx = tensor.empty() : tensor<8x4x64xf32>
    %z_mx = linalg.fill ins(%ninf : f32) outs(%e_mx : tensor<8x4x64xf32>) -> tensor<8x4x64xf32>
    %mx = linalg.generic {indexing_maps = [#s4, #r4], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
        ins(%sm : tensor<8x4x64x64xf32>) outs(%z_mx : tensor<8x4x64xf32>) {
    ^bb0(%a: f32, %acc: f32):
      %r = arith.maximumf %a, %acc : f32
      linalg.yield %r : f32
    } -> tensor<8x4x64xf32>
    %e_ex = tensor.empty() : tensor<8x4x64x64xf32>
    %ex = linalg.generic {indexing_maps = [#s4, #r4, #s4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
        ins(%sm, %mx : tensor<8x4x64x64xf32>, tensor<8x4x64xf32>) outs(%e_ex : tensor<8x4x64x64xf32>) {
    ^bb0(%a: f32, %m: f32, %o: f32):
      %d = arith.subf %a, %m : f32
      %r = math.exp %d : f32
      linalg.yield %r : f32
    } -> tensor<8x4x64x64xf32>
    %e_sum = tensor.empty() : tensor<8x4x64xf32>
    %z_sum = linalg.fill ins(%zero : f32) outs(%e_sum : tensor<8x4x64xf32>) -> tensor<8x4x64xf32>
    %sum = linalg.generic {indexing_maps = [#s4, #r4], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
        ins(%ex : tensor<8x4x64x64xf32>) outs(%z_sum : tensor<8x4x64xf32>) {
    ^bb0(%a: f32, %acc: f32):
      %r = arith.addf %a, %acc : f32
      linalg.yield %r : f32
    } -> tensor<8x4x64xf32>
    %e_p = tensor.empty() : tensor<8x4x64x64xf32>
    %p = linalg.generic {indexing_maps = [#s4, #r4, #s4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
        ins(%ex, %sum : tensor<8x4x64x64xf32>, tensor<8x4x64xf32>) outs(%e_p : tensor<8x4x64x64xf32>) {
    ^bb0(%a: f32, %t: f32, %o: f32):
      %r = arith.divf %a, %t : f32
      linalg.yield %r : f32
    } -> tensor<8x4x64x64xf32>

    // att = p · v, then the output projection (contracting heads and
    // head_dim), its bias and the residual.
    %e_att = tensor.empty() : tensor<8x64x4x32xf32>
    %z_att = linalg.fill ins(%zero : f32) outs(%e_att : tensor<8x64x4x32xf32>) -> tensor<8x64x4x32xf32>
    %att = linalg.generic {indexing_maps = [#vp, #vv, #vout], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
        ins(%p, %v : tensor<8x4x64x64xf32>, tensor<8x64x4x32xf32>) outs(%z_att : tensor<8x64x4x32xf32>) {
    ^bb0(%a: f32, %bb: f32, %acc: f32):
      %m = arith.mulf %a, %bb : f32
      %r = arith.addf %m, %acc : f32
      linalg.yield %r : f32
    } -> tensor<8x64x4x32xf32>
    %e_o0 = tensor.empty() : tensor<8x64x128xf32>
    %z_o0 = linalg.fill ins(%zero : f32) outs(%e_o0 : tensor<8x64x128xf32>) -> tensor<8x64x128xf32>
    %o0 = linalg.generic {indexing_maps = [#oin, #ow, #oout], iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction"]}
        ins(%att, %w_o : tensor<8x64x4x32xf32>, tensor<4x32x128xf32>) outs(%z_o0 : tensor<8x64x128xf32>) {
    ^bb0(%a: f32, %w: f32, %acc: f32):
      %m = arith.mulf %a, %w : f32
      %r = arith.addf %m, %acc : f32
      linalg.yield %r : f32
    } -> tensor<8x64x128xf32>
    %e_h1 = tensor.empty() : tensor<8x64x128xf32>
    %h1 = linalg.generic {indexing_maps = [#x3, #x3, #d3, #x3], iterator_types = ["parallel", "parallel", "parallel"]}
        ins(%h, %o0, %b_o : tensor<8x64x128xf32>, tensor<8x64x128xf32>, tensor<128xf32>) outs(%e_h1 : tensor<8x64x128xf32>) {
    ^bb0(%a: f32, %oo: f32, %bb: f32, %o: f32):
      %t = arith.addf %oo, %bb : f32
      %r = arith.addf %a, %t : f32
      linalg.yield %r : f32
    } -> tensor<8x64x128xf32>

    // ln_2.
    %e_m2 = tensor.empty() : tensor<8x64xf32>
    %z_m2 = linalg.fill ins(%zero : f32) outs(%e_m2 : tensor<8x64xf32>) -> tensor<8x64xf32>
    %mean2 = linalg.generic {indexing_maps = [#x3, #bs3], iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%h1 : tensor<8x64x128xf32>) outs(%z_m2 : tensor<8x64xf32>) {
    ^bb0(%a: f32, %acc: f32):
      %inv = arith.constant 0.0078125 : f32
      %t = arith.mulf %a, %inv : f32
      %r = arith.addf %t, %acc : f32
      linalg.yield %r : f32
    } -> tensor<8x64xf32>
    %e_v2 = tensor.empty() : tensor<8x64xf32>
    %z_v2 = linalg.fill ins(%zero : f32) outs(%e_v2 : tensor<8x64xf32>) -> tensor<8x64xf32>
    %var2 = linalg.generic {indexing_maps = [#x3, #bs3, #bs3], iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%h1, %mean2 : tensor<8x64x128xf32>, tensor<8x64xf32>) outs(%z_v2 : tensor<8x64xf32>) {
    ^bb0(%a: f32, %m: f32, %acc: f32):
      %inv = arith.constant 0.0078125 : f32
      %c = arith.subf %a, %m : f32
      %sq = arith.mulf %c, %c : f32
      %t = arith.mulf %sq, %inv : f32
      %r = arith.addf %t, %acc : f32
      linalg.yield %r : f32
    } -> tensor<8x64xf32>
    %e_y = tensor.empty() : tensor<8x64x128xf32>
    %y = linalg.generic {indexing_maps = [#x3, #bs3, #bs3, #d3, #d3, #x3], iterator_types = ["parallel", "parallel", "parallel"]}
        ins(%h1, %mean2, %var2, %ln2_g, %ln2_b : tensor<8x64x128xf32>, tensor<8x64xf32>, tensor<8x64xf32>, tensor<128xf32>, tensor<128xf32>)
        outs(%e_y : tensor<8x64x128xf32>) {
    ^bb0(%a: f32, %m: f32, %vv: f32, %g: f32, %be: f32, %o: f32):
      %eps = arith.constant 1.0e-05 : f32
      %c = arith.subf %a, %m : f32
      %ve = arith.addf %vv, %eps : f32
      %rs = math.rsqrt %ve : f32
      %n = arith.mulf %c, %rs : f32
      %ng = arith.mulf %n, %g : f32
      %r = arith.addf %ng, %be : f32
      linalg.yield %r : f32
    } -> tensor<8x64x128xf32>

    // MLP: gelu(y · W_fc + b_fc) · W_proj + b_proj, and the residual.
    %e_f0 = tensor.empty() : tensor<8x64x512xf32>
    %z_f0 = linalg.fill ins(%zero : f32) outs(%e_f0 : tensor<8x64x512xf32>) -> tensor<8x64x512xf32>
    %f0 = linalg.generic {indexing_maps = [#min, #mw, #mout], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
        ins(%y, %w_fc : tensor<8x64x128xf32>, tensor<128x512xf32>) outs(%z_f0 : tensor<8x64x512xf32>) {
    ^bb0(%a: f32, %w: f32, %acc: f32):
      %m = arith.mulf %a, %w : f32
      %r = arith.addf %m, %acc : f32
      linalg.yield %r : f32
    } -> tensor<8x64x512xf32>
    %e_f = tensor.empty() : tensor<8x64x512xf32>
    %f = linalg.generic {indexing_maps = [#x3, #d3, #x3], iterator_types = ["parallel", "parallel", "parallel"]}
        ins(%f0, %b_fc : tensor<8x64x512xf32>, tensor<512xf32>) outs(%e_f : tensor<8x64x512xf32>) {
    ^bb0(%a: f32, %bb: f32, %o: f32):
      // tanh GELU: x/2 · (1 + tanh(√(2/π) · (x + 0.044715 x³))).
      %half = arith.constant 0.5 : f32
      %one = arith.constant 1.0 : f32
      %c0 = arith.constant 0.7978845608028654 : f32
      %c1 = arith.constant 0.044715 : f32
      %t = arith.addf %a, %bb : f32
      %t2 = arith.mulf %t, %t : f32
      %t3 = arith.mulf %t2, %t : f32
      %u = arith.mulf %t3, %c1 : f32
      %w = arith.addf %t, %u : f32
      %z = arith.mulf %w, %c0 : f32
      %th = math.tanh %z : f32
      %pl = arith.addf %th, %one : f32
      %ht = arith.mulf %t, %half : f32
      %r = arith.mulf %ht, %pl : f32
      linalg.yield %r : f32
    } -> tensor<8x64x512xf32>
    %e_p0 = tensor.empty() : tensor<8x64x128xf32>
    %z_p0 = linalg.fill ins(%zero : f32) outs(%e_p0 : tensor<8x64x128xf32>) -> tensor<8x64x128xf32>
    %p0 = linalg.generic {indexing_maps = [#min, #mw, #mout], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
        ins(%f, %w_proj : tensor<8x64x512xf32>, tensor<512x128xf32>) outs(%z_p0 : tensor<8x64x128xf32>) {
    ^bb0(%a: f32, %w: f32, %acc: f32):
      %m = arith.mulf %a, %w : f32
      %r = arith.addf %m, %acc : f32
      linalg.yield %r : f32
    } -> tensor<8x64x128xf32>
    %e_h2 = tensor.empty() : tensor<8x64x128xf32>
    %h2 = linalg.generic {indexing_maps = [#x3, #x3, #d3, #x3], iterator_types = ["parallel", "parallel", "parallel"]}
        ins(%h1, %p0, %b_proj : tensor<8x64x128xf32>, tensor<8x64x128xf32>, tensor<128xf32>) outs(%e_h2 : tensor<8x64x128xf32>) {
    ^bb0(%a: f32, %pp: f32, %bb: f32, %o: f32):
      %t = arith.addf %pp, %bb : f32
      %r = arith.addf %a, %t : f32
      linalg.yield %r : f32
    } -> tensor<8x64x128xf32>

    // The loss: the sum of h2.
    %e_l = tensor.empty() : tensor<f32>
    %z_l = linalg.fill ins(%zero : f32) outs(%e_l : tensor<f32>) -> tensor<f32>
    %l = linalg.generic {indexing_maps = [#x3, #all3], iterator_types = ["reduction", "reduction", "reduction"]}
        ins(%h2 : tensor<8x64x128xf32>) outs(%z_l : tensor<f32>) {
    ^bb0(%a: f32, %acc: f32):
      %r = arith.addf %a, %acc : f32
      linalg.yield %r : f32
    } -> tensor<f32>
    // Backward, from dloss = 1: the gradient of h2 is all ones.
    %e_gh2 = tensor.empty() : tensor<8x64x128xf32>
    %g_h2 = linalg.fill ins(%unit : f32) outs(%e_gh2 : tensor<8x64x128xf32>) -> tensor<8x64x128xf32>

    // h2 = h1 + p0 + b_proj; p0 = f · W_proj.
    %e_gbp = tensor.empty() : tensor<128xf32>
    %z_gbp = linalg.fill ins(%zero : f32) outs(%e_gbp : tensor<128xf32>) -> tensor<128xf32>
    %g_b_proj = linalg.generic {indexing_maps = [#x3, #d3], iterator_types = ["reduction", "reduction", "parallel"]}
        ins(%g_h2 : tensor<8x64x128xf32>) outs(%z_gbp : tensor<128xf32>) {
    ^bb0(%_g: f32, %_acc: f32):
      %_r = arith.addf %_g, %_acc : f32
      linalg.yield %_r : f32
    } -> tensor<128xf32>
    %e_gwp = tensor.empty() : tensor<512x128xf32>
    %z_gwp = linalg.fill ins(%zero : f32) outs(%e_gwp : tensor<512x128xf32>) -> tensor<512x128xf32>
    %g_w_proj = linalg.generic {indexing_maps = [#wg_i, #wg_j, #wg_o], iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
        ins(%f, %g_h2 : tensor<8x64x512xf32>, tensor<8x64x128xf32>) outs(%z_gwp : tensor<512x128xf32>) {
    ^bb0(%_a: f32, %_g: f32, %_acc: f32):
      %_m = arith.mulf %_a, %_g : f32
      %_r = arith.addf %_m, %_acc : f32
      linalg.yield %_r : f32
    } -> tensor<512x128xf32>
    %e_gf = tensor.empty() : tensor<8x64x512xf32>
    %z_gf = linalg.fill ins(%zero : f32) outs(%e_gf : tensor<8x64x512xf32>) -> tensor<8x64x512xf32>
    %g_f = linalg.generic {indexing_maps = [#bt_g, #bt_w, #bt_o], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
        ins(%g_h2, %w_proj : tensor<8x64x128xf32>, tensor<512x128xf32>) outs(%z_gf : tensor<8x64x512xf32>) {
    ^bb0(%_g: f32, %_w: f32, %_acc: f32):
      %_m = arith.mulf %_g, %_w : f32
      %_r = arith.addf %_m, %_acc : f32
      linalg.yield %_r : f32
    } -> tensor<8x64x512xf32>

    // f = gelu(f0 + b_fc); f0 = y · W_fc.
    %e_gf1 = tensor.empty() : tensor<8x64x512xf32>
    %g_f1 = linalg.generic {indexing_maps = [#x3, #x3, #d3, #x3], iterator_types = ["parallel", "parallel", "parallel"]}
        ins(%g_f, %f0, %b_fc : tensor<8x64x512xf32>, tensor<8x64x512xf32>, tensor<512xf32>) outs(%e_gf1 : tensor<8x64x512xf32>) {
    ^bb0(%_g: f32, %_a: f32, %_b: f32, %_o: f32):
      // d/dt gelu(t) = (1 + th)/2 + t/2 · (1 - th²) · √(2/π) · (1 + 3 · 0.044715 t²)
      %_half = arith.constant 0.5 : f32
      %_one = arith.constant 1.0 : f32
      %_c0 = arith.constant 0.7978845608028654 : f32
      %_c1 = arith.constant 0.044715 : f32
      %_c3 = arith.constant 0.134145 : f32
      %_t = arith.addf %_a, %_b : f32
      %_t2 = arith.mulf %_t, %_t : f32
      %_t3 = arith.mulf %_t2, %_t : f32
      %_u = arith.mulf %_t3, %_c1 : f32
      %_w = arith.addf %_t, %_u : f32
      %_z = arith.mulf %_w, %_c0 : f32
      %_th = math.tanh %_z : f32
      %_pl = arith.addf %_th, %_one : f32
      %_left = arith.mulf %_pl, %_half : f32
      %_th2 = arith.mulf %_th, %_th : f32
      %_sech2 = arith.subf %_one, %_th2 : f32
      %_q = arith.mulf %_t2, %_c3 : f32
      %_q1 = arith.addf %_q, %_one : f32
      %_dz = arith.mulf %_q1, %_c0 : f32
      %_ht = arith.mulf %_t, %_half : f32
      %_right0 = arith.mulf %_ht, %_sech2 : f32
      %_right = arith.mulf %_right0, %_dz : f32
      %_d = arith.addf %_left, %_right : f32
      %_r = arith.mulf %_g, %_d : f32
      linalg.yield %_r : f32
    } -> tensor<8x64x512xf32>
    %e_gbf = tensor.empty() : tensor<512xf32>
    %z_gbf = linalg.fill ins(%zero : f32) outs(%e_gbf : tensor<512xf32>) -> tensor<512xf32>
    %g_b_fc = linalg.generic {indexing_maps = [#x3, #d3], iterator_types = ["reduction", "reduction", "parallel"]}
        ins(%g_f1 : tensor<8x64x512xf32>) outs(%z_gbf : tensor<512xf32>) {
    ^bb0(%_g: f32, %_acc: f32):
      %_r = arith.addf %_g, %_acc : f32
      linalg.yield %_r : f32
    } -> tensor<512xf32>
    %e_gwf = tensor.empty() : tensor<128x512xf32>
    %z_gwf = linalg.fill ins(%zero : f32) outs(%e_gwf : tensor<128x512xf32>) -> tensor<128x512xf32>
    %g_w_fc = linalg.generic {indexing_maps = [#wg_i, #wg_j, #wg_o], iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
        ins(%y, %g_f1 : tensor<8x64x128xf32>, tensor<8x64x512xf32>) outs(%z_gwf : tensor<128x512xf32>) {
    ^bb0(%_a: f32, %_g: f32, %_acc: f32):
      %_m = arith.mulf %_a, %_g : f32
      %_r = arith.addf %_m, %_acc : f32
      linalg.yield %_r : f32
    } -> tensor<128x512xf32>
    %e_gy = tensor.empty() : tensor<8x64x128xf32>
    %z_gy = linalg.fill ins(%zero : f32) outs(%e_gy : tensor<8x64x128xf32>) -> tensor<8x64x128xf32>
    %g_y = linalg.generic {indexing_maps = [#bt_g, #bt_w, #bt_o], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
        ins(%g_f1, %w_fc : tensor<8x64x512xf32>, tensor<128x512xf32>) outs(%z_gy : tensor<8x64x128xf32>) {
    ^bb0(%_g: f32, %_w: f32, %_acc: f32):
      %_m = arith.mulf %_g, %_w : f32
      %_r = arith.addf %_m, %_acc : f32
      linalg.yield %_r : f32
    } -> tensor<8x64x128xf32>

    // y = ln_2(h1): dγ = Σ dy·x̂, dβ = Σ dy, dh1 = rstd·(dx̂ - mean(dx̂) - x̂·mean(dx̂·x̂)), dx̂ = dy·γ.
    %e_gg2 = tensor.empty() : tensor<128xf32>
    %z_gg2 = linalg.fill ins(%zero : f32) outs(%e_gg2 : tensor<128xf32>) -> tensor<128xf32>
    %g_ln2_g = linalg.generic {indexing_maps = [#x3, #x3, #bs3, #bs3, #d3], iterator_types = ["reduction", "reduction", "parallel"]}
        ins(%g_y, %h1, %mean2, %var2 : tensor<8x64x128xf32>, tensor<8x64x128xf32>, tensor<8x64xf32>, tensor<8x64xf32>) outs(%z_gg2 : tensor<128xf32>) {
    ^bb0(%_g: f32, %_a: f32, %_m: f32, %_v: f32, %_acc: f32):
      %_eps = arith.constant 1.0e-05 : f32
      %_c = arith.subf %_a, %_m : f32
      %_ve = arith.addf %_v, %_eps : f32
      %_rs = math.rsqrt %_ve : f32
      %_xh = arith.mulf %_c, %_rs : f32
      %_p = arith.mulf %_g, %_xh : f32
      %_r = arith.addf %_p, %_acc : f32
      linalg.yield %_r : f32
    } -> tensor<128xf32>
    %e_gb2 = tensor.empty() : tensor<128xf32>
    %z_gb2 = linalg.fill ins(%zero : f32) outs(%e_gb2 : tensor<128xf32>) -> tensor<128xf32>
    %g_ln2_b = linalg.generic {indexing_maps = [#x3, #d3], iterator_types = ["reduction", "reduction", "parallel"]}
        ins(%g_y : tensor<8x64x128xf32>) outs(%z_gb2 : tensor<128xf32>) {
    ^bb0(%_g: f32, %_acc: f32):
      %_r = arith.addf %_g, %_acc : f32
      linalg.yield %_r : f32
    } -> tensor<128xf32>
    %e_ma2 = tensor.empty() : tensor<8x64xf32>
    %z_ma2 = linalg.fill ins(%zero : f32) outs(%e_ma2 : tensor<8x64xf32>) -> tensor<8x64xf32>
    %ma2 = linalg.generic {indexing_maps = [#x3, #d3, #bs3], iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%g_y, %ln2_g : tensor<8x64x128xf32>, tensor<128xf32>) outs(%z_ma2 : tensor<8x64xf32>) {
    ^bb0(%_g: f32, %_w: f32, %_acc: f32):
      %_inv = arith.constant 0.0078125 : f32
      %_p = arith.mulf %_g, %_w : f32
      %_t = arith.mulf %_p, %_inv : f32
      %_r = arith.addf %_t, %_acc : f32
      linalg.yield %_r : f32
    } -> tensor<8x64xf32>
    %e_mb2 = tensor.empty() : tensor<8x64xf32>
    %z_mb2 = linalg.fill ins(%zero : f32) outs(%e_mb2 : tensor<8x64xf32>) -> tensor<8x64xf32>
    %mb2 = linalg.generic {indexing_maps = [#x3, #d3, #x3, #bs3, #bs3, #bs3], iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%g_y, %ln2_g, %h1, %mean2, %var2 : tensor<8x64x128xf32>, tensor<128xf32>, tensor<8x64x128xf32>, tensor<8x64xf32>, tensor<8x64xf32>) outs(%z_mb2 : tensor<8x64xf32>) {
    ^bb0(%_g: f32, %_w: f32, %_a: f32, %_m: f32, %_v: f32, %_acc: f32):
      %_inv = arith.constant 0.0078125 : f32
      %_eps = arith.constant 1.0e-05 : f32
      %_c = arith.subf %_a, %_m : f32
      %_ve = arith.addf %_v, %_eps : f32
      %_rs = math.rsqrt %_ve : f32
      %_xh = arith.mulf %_c, %_rs : f32
      %_p = arith.mulf %_g, %_w : f32
      %_px = arith.mulf %_p, %_xh : f32
      %_t = arith.mulf %_px, %_inv : f32
      %_r = arith.addf %_t, %_acc : f32
      linalg.yield %_r : f32
    } -> tensor<8x64xf32>
    // dh1 in all: through ln_2 plus the residual's dh2.
    %e_gh1 = tensor.empty() : tensor<8x64x128xf32>
    %g_h1 = linalg.generic {indexing_maps = [#x3, #d3, #x3, #bs3, #bs3, #bs3, #bs3, #x3, #x3], iterator_types = ["parallel", "parallel", "parallel"]}
        ins(%g_y, %ln2_g, %h1, %mean2, %var2, %ma2, %mb2, %g_h2 : tensor<8x64x128xf32>, tensor<128xf32>, tensor<8x64x128xf32>, tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64x128xf32>)
        outs(%e_gh1 : tensor<8x64x128xf32>) {
    ^bb0(%_g: f32, %_w: f32, %_a: f32, %_m: f32, %_v: f32, %_ma: f32, %_mb: f32, %_res: f32, %_o: f32):
      %_eps = arith.constant 1.0e-05 : f32
      %_c = arith.subf %_a, %_m : f32
      %_ve = arith.addf %_v, %_eps : f32
      %_rs = math.rsqrt %_ve : f32
      %_xh = arith.mulf %_c, %_rs : f32
      %_dxh = arith.mulf %_g, %_w : f32
      %_t0 = arith.subf %_dxh, %_ma : f32
      %_t1 = arith.mulf %_xh, %_mb : f32
      %_t2 = arith.subf %_t0, %_t1 : f32
      %_dx = arith.mulf %_t2, %_rs : f32
      %_r = arith.addf %_dx, %_res : f32
      linalg.yield %_r : f32
    } -> tensor<8x64x128xf32>

    // h1 = h + o0 + b_o; o0 = att · W_o (contracting heads and head_dim).
    %e_gbo = tensor.empty() : tensor<128xf32>
    %z_gbo = linalg.fill ins(%zero : f32) outs(%e_gbo : tensor<128xf32>) -> tensor<128xf32>
    %g_b_o = linalg.generic {indexing_maps = [#x3, #d3], iterator_types = ["reduction", "reduction", "parallel"]}
        ins(%g_h1 : tensor<8x64x128xf32>) outs(%z_gbo : tensor<128xf32>) {
    ^bb0(%_g: f32, %_acc: f32):
      %_r = arith.addf %_g, %_acc : f32
      linalg.yield %_r : f32
    } -> tensor<128xf32>
    %e_gwo = tensor.empty() : tensor<4x32x128xf32>
    %z_gwo = linalg.fill ins(%zero : f32) outs(%e_gwo : tensor<4x32x128xf32>) -> tensor<4x32x128xf32>
    %g_w_o = linalg.generic {indexing_maps = [#gwo_a, #gwo_g, #gwo_o], iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction"]}
        ins(%att, %g_h1 : tensor<8x64x4x32xf32>, tensor<8x64x128xf32>) outs(%z_gwo : tensor<4x32x128xf32>) {
    ^bb0(%_a: f32, %_g: f32, %_acc: f32):
      %_m = arith.mulf %_a, %_g : f32
      %_r = arith.addf %_m, %_acc : f32
      linalg.yield %_r : f32
    } -> tensor<4x32x128xf32>
    %e_gatt = tensor.empty() : tensor<8x64x4x32xf32>
    %z_gatt = linalg.fill ins(%zero : f32) outs(%e_gatt : tensor<8x64x4x32xf32>) -> tensor<8x64x4x32xf32>
    %g_att = linalg.generic {indexing_maps = [#pin, #pwo, #pout], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
        ins(%g_h1, %w_o : tensor<8x64x128xf32>, tensor<4x32x128xf32>) outs(%z_gatt : tensor<8x64x4x32xf32>) {
    ^bb0(%_g: f32, %_w: f32, %_acc: f32):
      %_m = arith.mulf %_g, %_w : f32
      %_r = arith.addf %_m, %_acc : f32
      linalg.yield %_r : f32
    } -> tensor<8x64x4x32xf32>

    // att = p · v: dp = datt · vᵀ, dv = pᵀ · datt.
    %e_gp = tensor.empty() : tensor<8x4x64x64xf32>
    %z_gp = linalg.fill ins(%zero : f32) outs(%e_gp : tensor<8x4x64x64xf32>) -> tensor<8x4x64x64xf32>
    %g_p = linalg.generic {indexing_maps = [#sq, #sk, #sout], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
        ins(%g_att, %v : tensor<8x64x4x32xf32>, tensor<8x64x4x32xf32>) outs(%z_gp : tensor<8x4x64x64xf32>) {
    ^bb0(%_g: f32, %_b: f32, %_acc: f32):
      %_m = arith.mulf %_g, %_b : f32
      %_r = arith.addf %_m, %_acc : f32
      linalg.yield %_r : f32
    } -> tensor<8x4x64x64xf32>
    %e_gv = tensor.empty() : tensor<8x64x4x32xf32>
    %z_gv = linalg.fill ins(%zero : f32) outs(%e_gv : tensor<8x64x4x32xf32>) -> tensor<8x64x4x32xf32>
    %g_v = linalg.generic {indexing_maps = [#kt_s, #kt_a, #kt_o], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
        ins(%p, %g_att : tensor<8x4x64x64xf32>, tensor<8x64x4x32xf32>) outs(%z_gv : tensor<8x64x4x32xf32>) {
    ^bb0(%_a: f32, %_g: f32, %_acc: f32):
      %_m = arith.mulf %_a, %_g : f32
      %_r = arith.addf %_m, %_acc : f32
      linalg.yield %_r : f32
    } -> tensor<8x64x4x32xf32>

    // Softmax and the 1/√32 scale: ds = p · (dp - Σ_j dp·p) / √32 (masked
    // positions have p = 0).
    %e_rd = tensor.empty() : tensor<8x4x64xf32>
    %z_rd = linalg.fill ins(%zero : f32) outs(%e_rd : tensor<8x4x64xf32>) -> tensor<8x4x64xf32>
    %rowdot = linalg.generic {indexing_maps = [#s4, #s4, #r4], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
        ins(%g_p, %p : tensor<8x4x64x64xf32>, tensor<8x4x64x64xf32>) outs(%z_rd : tensor<8x4x64xf32>) {
    ^bb0(%_g: f32, %_a: f32, %_acc: f32):
      %_m = arith.mulf %_g, %_a : f32
      %_r = arith.addf %_m, %_acc : f32
      linalg.yield %_r : f32
    } -> tensor<8x4x64xf32>
    %e_gs = tensor.empty() : tensor<8x4x64x64xf32>
    %g_s = linalg.generic {indexing_maps = [#s4, #s4, #r4, #s4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
        ins(%g_p, %p, %rowdot : tensor<8x4x64x64xf32>, tensor<8x4x64x64xf32>, tensor<8x4x64xf32>) outs(%e_gs : tensor<8x4x64x64xf32>) {
    ^bb0(%_g: f32, %_a: f32, %_d: f32, %_o: f32):
      %_scale = arith.constant 0.17677669529663687 : f32
      %_t = arith.subf %_g, %_d : f32
      %_u = arith.mulf %_a, %_t : f32
      %_r = arith.mulf %_u, %_scale : f32
      linalg.yield %_r : f32
    } -> tensor<8x4x64x64xf32>

    // s = q · kᵀ: dq = ds · k, dk = dsᵀ · q.
    %e_gq = tensor.empty() : tensor<8x64x4x32xf32>
    %z_gq = linalg.fill ins(%zero : f32) outs(%e_gq : tensor<8x64x4x32xf32>) -> tensor<8x64x4x32xf32>
    %g_q = linalg.generic {indexing_maps = [#vp, #vv, #vout], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
        ins(%g_s, %k : tensor<8x4x64x64xf32>, tensor<8x64x4x32xf32>) outs(%z_gq : tensor<8x64x4x32xf32>) {
    ^bb0(%_a: f32, %_b: f32, %_acc: f32):
      %_m = arith.mulf %_a, %_b : f32
      %_r = arith.addf %_m, %_acc : f32
      linalg.yield %_r : f32
    } -> tensor<8x64x4x32xf32>
    %e_gk = tensor.empty() : tensor<8x64x4x32xf32>
    %z_gk = linalg.fill ins(%zero : f32) outs(%e_gk : tensor<8x64x4x32xf32>) -> tensor<8x64x4x32xf32>
    %g_k = linalg.generic {indexing_maps = [#kt_s, #kt_a, #kt_o], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
        ins(%g_s, %q : tensor<8x4x64x64xf32>, tensor<8x64x4x32xf32>) outs(%z_gk : tensor<8x64x4x32xf32>) {
    ^bb0(%_a: f32, %_b: f32, %_acc: f32):
      %_m = arith.mulf %_a, %_b : f32
      %_r = arith.addf %_m, %_acc : f32
      linalg.yield %_r : f32
    } -> tensor<8x64x4x32xf32>

    // q = x · W_q + b_q.
    %e_gbq = tensor.empty() : tensor<4x32xf32>
    %z_gbq = linalg.fill ins(%zero : f32) outs(%e_gbq : tensor<4x32xf32>) -> tensor<4x32xf32>
    %g_b_q = linalg.generic {indexing_maps = [#h4, #hb4], iterator_types = ["reduction", "reduction", "parallel", "parallel"]}
        ins(%g_q : tensor<8x64x4x32xf32>) outs(%z_gbq : tensor<4x32xf32>) {
    ^bb0(%_g: f32, %_acc: f32):
      %_r = arith.addf %_g, %_acc : f32
      linalg.yield %_r : f32
    } -> tensor<4x32xf32>
    %e_gwq = tensor.empty() : tensor<128x4x32xf32>
    %z_gwq = linalg.fill ins(%zero : f32) outs(%e_gwq : tensor<128x4x32xf32>) -> tensor<128x4x32xf32>
    %g_w_q = linalg.generic {indexing_maps = [#gwq_x, #gwq_g, #gwq_o], iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction"]}
        ins(%x, %g_q : tensor<8x64x128xf32>, tensor<8x64x4x32xf32>) outs(%z_gwq : tensor<128x4x32xf32>) {
    ^bb0(%_a: f32, %_g: f32, %_acc: f32):
      %_m = arith.mulf %_a, %_g : f32
      %_r = arith.addf %_m, %_acc : f32
      linalg.yield %_r : f32
    } -> tensor<128x4x32xf32>
    %e_gxq = tensor.empty() : tensor<8x64x128xf32>
    %z_gxq = linalg.fill ins(%zero : f32) outs(%e_gxq : tensor<8x64x128xf32>) -> tensor<8x64x128xf32>
    %g_x_q = linalg.generic {indexing_maps = [#oin, #oinw, #oout], iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction"]}
        ins(%g_q, %w_q : tensor<8x64x4x32xf32>, tensor<128x4x32xf32>) outs(%z_gxq : tensor<8x64x128xf32>) {
    ^bb0(%_g: f32, %_w: f32, %_acc: f32):
      %_m = arith.mulf %_g, %_w : f32
      %_r = arith.addf %_m, %_acc : f32
      linalg.yield %_r : f32
    } -> tensor<8x64x128xf32>
    // k = x · W_k + b_k.
    %e_gbk = tensor.empty() : tensor<4x32xf32>
    %z_gbk = linalg.fill ins(%zero : f32) outs(%e_gbk : tensor<4x32xf32>) -> tensor<4x32xf32>
    %g_b_k = linalg.generic {indexing_maps = [#h4, #hb4], iterator_types = ["reduction", "reduction", "parallel", "parallel"]}
        ins(%g_k : tensor<8x64x4x32xf32>) outs(%z_gbk : tensor<4x32xf32>) {
    ^bb0(%_g: f32, %_acc: f32):
      %_r = arith.addf %_g, %_acc : f32
      linalg.yield %_r : f32
    } -> tensor<4x32xf32>
    %e_gwk = tensor.empty() : tensor<128x4x32xf32>
    %z_gwk = linalg.fill ins(%zero : f32) outs(%e_gwk : tensor<128x4x32xf32>) -> tensor<128x4x32xf32>
    %g_w_k = linalg.generic {indexing_maps = [#gwq_x, #gwq_g, #gwq_o], iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction"]}
        ins(%x, %g_k : tensor<8x64x128xf32>, tensor<8x64x4x32xf32>) outs(%z_gwk : tensor<128x4x32xf32>) {
    ^bb0(%_a: f32, %_g: f32, %_acc: f32):
      %_m = arith.mulf %_a, %_g : f32
      %_r = arith.addf %_m, %_acc : f32
      linalg.yield %_r : f32
    } -> tensor<128x4x32xf32>
    %e_gxk = tensor.empty() : tensor<8x64x128xf32>
    %z_gxk = linalg.fill ins(%zero : f32) outs(%e_gxk : tensor<8x64x128xf32>) -> tensor<8x64x128xf32>
    %g_x_k = linalg.generic {indexing_maps = [#oin, #oinw, #oout], iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction"]}
        ins(%g_k, %w_k : tensor<8x64x4x32xf32>, tensor<128x4x32xf32>) outs(%z_gxk : tensor<8x64x128xf32>) {
    ^bb0(%_g: f32, %_w: f32, %_acc: f32):
      %_m = arith.mulf %_g, %_w : f32
      %_r = arith.addf %_m, %_acc : f32
      linalg.yield %_r : f32
    } -> tensor<8x64x128xf32>
    // v = x · W_v + b_v.
    %e_gbv = tensor.empty() : tensor<4x32xf32>
    %z_gbv = linalg.fill ins(%zero : f32) outs(%e_gbv : tensor<4x32xf32>) -> tensor<4x32xf32>
    %g_b_v = linalg.generic {indexing_maps = [#h4, #hb4], iterator_types = ["reduction", "reduction", "parallel", "parallel"]}
        ins(%g_v : tensor<8x64x4x32xf32>) outs(%z_gbv : tensor<4x32xf32>) {
    ^bb0(%_g: f32, %_acc: f32):
      %_r = arith.addf %_g, %_acc : f32
      linalg.yield %_r : f32
    } -> tensor<4x32xf32>
    %e_gwv = tensor.empty() : tensor<128x4x32xf32>
    %z_gwv = linalg.fill ins(%zero : f32) outs(%e_gwv : tensor<128x4x32xf32>) -> tensor<128x4x32xf32>
    %g_w_v = linalg.generic {indexing_maps = [#gwq_x, #gwq_g, #gwq_o], iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction"]}
        ins(%x, %g_v : tensor<8x64x128xf32>, tensor<8x64x4x32xf32>) outs(%z_gwv : tensor<128x4x32xf32>) {
    ^bb0(%_a: f32, %_g: f32, %_acc: f32):
      %_m = arith.mulf %_a, %_g : f32
      %_r = arith.addf %_m, %_acc : f32
      linalg.yield %_r : f32
    } -> tensor<128x4x32xf32>
    %e_gxv = tensor.empty() : tensor<8x64x128xf32>
    %z_gxv = linalg.fill ins(%zero : f32) outs(%e_gxv : tensor<8x64x128xf32>) -> tensor<8x64x128xf32>
    %g_x_v = linalg.generic {indexing_maps = [#oin, #oinw, #oout], iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction"]}
        ins(%g_v, %w_v : tensor<8x64x4x32xf32>, tensor<128x4x32xf32>) outs(%z_gxv : tensor<8x64x128xf32>) {
    ^bb0(%_g: f32, %_w: f32, %_acc: f32):
      %_m = arith.mulf %_g, %_w : f32
      %_r = arith.addf %_m, %_acc : f32
      linalg.yield %_r : f32
    } -> tensor<8x64x128xf32>
    // dx = dx_q + dx_k + dx_v; x = ln_1(h): dγ = Σ dx·x̂, dβ = Σ dx (h is an
    // input: its gradient is not needed).
    %e_gx = tensor.empty() : tensor<8x64x128xf32>
    %g_x = linalg.generic {indexing_maps = [#x3, #x3, #x3, #x3], iterator_types = ["parallel", "parallel", "parallel"]}
        ins(%g_x_q, %g_x_k, %g_x_v : tensor<8x64x128xf32>, tensor<8x64x128xf32>, tensor<8x64x128xf32>) outs(%e_gx : tensor<8x64x128xf32>) {
    ^bb0(%_a: f32, %_b: f32, %_c: f32, %_o: f32):
      %_t = arith.addf %_a, %_b : f32
      %_r = arith.addf %_t, %_c : f32
      linalg.yield %_r : f32
    } -> tensor<8x64x128xf32>
    %e_gg1 = tensor.empty() : tensor<128xf32>
    %z_gg1 = linalg.fill ins(%zero : f32) outs(%e_gg1 : tensor<128xf32>) -> tensor<128xf32>
    %g_ln1_g = linalg.generic {indexing_maps = [#x3, #x3, #bs3, #bs3, #d3], iterator_types = ["reduction", "reduction", "parallel"]}
        ins(%g_x, %h, %mean1, %var1 : tensor<8x64x128xf32>, tensor<8x64x128xf32>, tensor<8x64xf32>, tensor<8x64xf32>) outs(%z_gg1 : tensor<128xf32>) {
    ^bb0(%_g: f32, %_a: f32, %_m: f32, %_v: f32, %_acc: f32):
      %_eps = arith.constant 1.0e-05 : f32
      %_c = arith.subf %_a, %_m : f32
      %_ve = arith.addf %_v, %_eps : f32
      %_rs = math.rsqrt %_ve : f32
      %_xh = arith.mulf %_c, %_rs : f32
      %_p = arith.mulf %_g, %_xh : f32
      %_r = arith.addf %_p, %_acc : f32
      linalg.yield %_r : f32
    } -> tensor<128xf32>
    %e_gb1 = tensor.empty() : tensor<128xf32>
    %z_gb1 = linalg.fill ins(%zero : f32) outs(%e_gb1 : tensor<128xf32>) -> tensor<128xf32>
    %g_ln1_b = linalg.generic {indexing_maps = [#x3, #d3], iterator_types = ["reduction", "reduction", "parallel"]}
        ins(%g_x : tensor<8x64x128xf32>) outs(%z_gb1 : tensor<128xf32>) {
    ^bb0(%_g: f32, %_acc: f32):
      %_r = arith.addf %_g, %_acc : f32
      linalg.yield %_r : f32
    } -> tensor<128xf32>

    // The loss and the gradients, in their parameters' shardings.
    %scalar = shard.sharding @mesh split_axes = [[]] : !shard.sharding
    %loss = shard.shard %l to %scalar annotate_for_users : tensor<f32>
    %r_ln1_g = shard.shard %g_ln1_g to %whole annotate_for_users : tensor<128xf32>
    %r_ln1_b = shard.shard %g_ln1_b to %whole annotate_for_users : tensor<128xf32>
    %r_w_q = shard.shard %g_w_q to %col annotate_for_users : tensor<128x4x32xf32>
    %r_b_q = shard.shard %g_b_q to %row annotate_for_users : tensor<4x32xf32>
    %r_w_k = shard.shard %g_w_k to %col annotate_for_users : tensor<128x4x32xf32>
    %r_b_k = shard.shard %g_b_k to %row annotate_for_users : tensor<4x32xf32>
    %r_w_v = shard.shard %g_w_v to %col annotate_for_users : tensor<128x4x32xf32>
    %r_b_v = shard.shard %g_b_v to %row annotate_for_users : tensor<4x32xf32>
    %r_w_o = shard.shard %g_w_o to %row annotate_for_users : tensor<4x32x128xf32>
    %r_b_o = shard.shard %g_b_o to %whole annotate_for_users : tensor<128xf32>
    %r_ln2_g = shard.shard %g_ln2_g to %whole annotate_for_users : tensor<128xf32>
    %r_ln2_b = shard.shard %g_ln2_b to %whole annotate_for_users : tensor<128xf32>
    %r_w_fc = shard.shard %g_w_fc to %col annotate_for_users : tensor<128x512xf32>
    %r_b_fc = shard.shard %g_b_fc to %row annotate_for_users : tensor<512xf32>
    %r_w_proj = shard.shard %g_w_proj to %row annotate_for_users : tensor<512x128xf32>
    %r_b_proj = shard.shard %g_b_proj to %whole annotate_for_users : tensor<128xf32>
    return %loss, %r_ln1_g, %r_ln1_b, %r_w_q, %r_b_q, %r_w_k, %r_b_k, %r_w_v, %r_b_v, %r_w_o, %r_b_o, %r_ln2_g, %r_ln2_b, %r_w_fc, %r_b_fc, %r_w_proj, %r_b_proj
        : tensor<f32>, tensor<128xf32>, tensor<128xf32>, tensor<128x4x32xf32>, tensor<4x32xf32>, tensor<128x4x32xf32>, tensor<4x32xf32>, tensor<128x4x32xf32>, tensor<4x32xf32>, tensor<4x32x128xf32>, tensor<128xf32>, tensor<128xf32>, tensor<128xf32>, tensor<128x512xf32>, tensor<512xf32>, tensor<512x128xf32>, tensor<128xf32>
  }
}
