// The block of gpt_block.nn.mlir (one GPT-2 block: b=8, s=64, h=128, 4
// heads of 32, MLP 512; pre-norm, causal attention, tanh GELU; the loss is
// the sum of the output) in upstream linalg/arith/math, for upstream
// `sharding-propagation` + `shard-partition`
// (docs/upstream-comparison.md). Every op is a linalg.generic (or fill)
// over static shapes, since those are the ops with an upstream
// ShardingInterface:
// - layer norm: a mean and a variance reduction over the hidden dimension
//   and an elementwise normalisation (upstream has no layer-norm op);
// - no reshapes: tensor.expand_shape/collapse_shape have no upstream
//   ShardingInterface, so q, k, v and the attention output keep a
//   [batch, seq, heads, head_dim] shape by contracting with weights laid
//   out as [128, 4, 32] (q, k, v) and [4, 32, 128] (the output
//   projection): the same numbers as Tessel's [128, 128] weights, whose
//   column blocks are the heads;
// - attention: two contractions and a softmax of five generics (causal
//   mask from linalg.index, row max, exp, row sum, divide), since
//   linalg.softmax has no upstream ShardingInterface.
// Only the arguments are annotated, Megatron's way, as Tessel's nn.axes
// are: the batch of h over dp; q, k, v and fc column-parallel (their head
// or MLP dimension and bias over tp); the attention and MLP output
// projections row-parallel (their head or MLP dimension over tp); norms
// and the other biases whole. compare-upstream.sh rewrites the grid's
// shape for each mesh (1x2 = tp=2, 2x1 = dp=2); grid axis 0 is dp, axis 1
// is tp.
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
module {
  shard.grid @mesh(shape = 2x2)

  func.func @block(
      %h_arg: tensor<8x64x128xf32>,
      %ln1_g_arg: tensor<128xf32>, %ln1_b_arg: tensor<128xf32>,
      %w_q_arg: tensor<128x4x32xf32>, %b_q_arg: tensor<4x32xf32>,
      %w_k_arg: tensor<128x4x32xf32>, %b_k_arg: tensor<4x32xf32>,
      %w_v_arg: tensor<128x4x32xf32>, %b_v_arg: tensor<4x32xf32>,
      %w_o_arg: tensor<4x32x128xf32>, %b_o_arg: tensor<128xf32>,
      %ln2_g_arg: tensor<128xf32>, %ln2_b_arg: tensor<128xf32>,
      %w_fc_arg: tensor<128x512xf32>, %b_fc_arg: tensor<512xf32>,
      %w_proj_arg: tensor<512x128xf32>, %b_proj_arg: tensor<128xf32>)
      -> tensor<f32> {
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
    %scalar = shard.sharding @mesh split_axes = [[]] : !shard.sharding
    %loss = shard.shard %l to %scalar annotate_for_users : tensor<f32>
    return %loss : tensor<f32>
  }
}
