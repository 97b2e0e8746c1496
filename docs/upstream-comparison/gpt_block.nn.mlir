// One GPT-2 block of examples/gpt.mlir (b=8, s=64, h=128, 4 heads of 32,
// MLP 512) as a model of its own whose loss is the sum of the block's
// output (a model returns a scalar loss): Tessel's side of the upstream
// comparison (docs/upstream-comparison.md), compiled with --no-train for
// the forward and as a training step for the forward and backward. The logical axes give
// the Megatron layout under the default rules: q, k, v and fc split their
// columns over tp, the attention and MLP output projections their rows,
// the batch over dp.
func.func @block(
    %h: tensor<8x64x128xf32> {nn.input, nn.axes = ["batch", "seq", "embed"]},
    %ln1_g: tensor<128xf32> {nn.param = "ln_1.weight", nn.init = #nn.init<ones>, nn.axes = ["embed"]},
    %ln1_b: tensor<128xf32> {nn.param = "ln_1.bias", nn.init = #nn.init<zeros>, nn.axes = ["embed"]},
    %w_q: tensor<128x128xf32> {nn.param = "attn.q.weight", nn.init = #nn.init<normal, 0.02>, nn.axes = ["embed", "heads"]},
    %b_q: tensor<128xf32> {nn.param = "attn.q.bias", nn.init = #nn.init<zeros>, nn.axes = ["heads"]},
    %w_k: tensor<128x128xf32> {nn.param = "attn.k.weight", nn.init = #nn.init<normal, 0.02>, nn.axes = ["embed", "heads"]},
    %b_k: tensor<128xf32> {nn.param = "attn.k.bias", nn.init = #nn.init<zeros>, nn.axes = ["heads"]},
    %w_v: tensor<128x128xf32> {nn.param = "attn.v.weight", nn.init = #nn.init<normal, 0.02>, nn.axes = ["embed", "heads"]},
    %b_v: tensor<128xf32> {nn.param = "attn.v.bias", nn.init = #nn.init<zeros>, nn.axes = ["heads"]},
    %w_o: tensor<128x128xf32> {nn.param = "attn.c_proj.weight", nn.init = #nn.init<normal, 0.02>, nn.axes = ["heads", "embed"]},
    %b_o: tensor<128xf32> {nn.param = "attn.c_proj.bias", nn.init = #nn.init<zeros>, nn.axes = ["embed"]},
    %ln2_g: tensor<128xf32> {nn.param = "ln_2.weight", nn.init = #nn.init<ones>, nn.axes = ["embed"]},
    %ln2_b: tensor<128xf32> {nn.param = "ln_2.bias", nn.init = #nn.init<zeros>, nn.axes = ["embed"]},
    %w_fc: tensor<128x512xf32> {nn.param = "mlp.c_fc.weight", nn.init = #nn.init<normal, 0.02>, nn.axes = ["embed", "mlp"]},
    %b_fc: tensor<512xf32> {nn.param = "mlp.c_fc.bias", nn.init = #nn.init<zeros>, nn.axes = ["mlp"]},
    %w_proj: tensor<512x128xf32> {nn.param = "mlp.c_proj.weight", nn.init = #nn.init<normal, 0.02>, nn.axes = ["mlp", "embed"]},
    %b_proj: tensor<128xf32> {nn.param = "mlp.c_proj.bias", nn.init = #nn.init<zeros>, nn.axes = ["embed"]})
    -> tensor<f32> {
  %x = nn.layer_norm %h, %ln1_g, %ln1_b : (tensor<8x64x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<8x64x128xf32>
  %q0 = nn.matmul %x, %w_q : (tensor<8x64x128xf32>, tensor<128x128xf32>) -> tensor<8x64x128xf32>
  %bq = nn.broadcast %b_q dims = [2] : tensor<128xf32> -> tensor<8x64x128xf32>
  %q1 = nn.add %q0, %bq : tensor<8x64x128xf32>
  %q = nn.reshape %q1 : tensor<8x64x128xf32> -> tensor<8x64x4x32xf32>
  %k0 = nn.matmul %x, %w_k : (tensor<8x64x128xf32>, tensor<128x128xf32>) -> tensor<8x64x128xf32>
  %bk = nn.broadcast %b_k dims = [2] : tensor<128xf32> -> tensor<8x64x128xf32>
  %k1 = nn.add %k0, %bk : tensor<8x64x128xf32>
  %k = nn.reshape %k1 : tensor<8x64x128xf32> -> tensor<8x64x4x32xf32>
  %v0 = nn.matmul %x, %w_v : (tensor<8x64x128xf32>, tensor<128x128xf32>) -> tensor<8x64x128xf32>
  %bv = nn.broadcast %b_v dims = [2] : tensor<128xf32> -> tensor<8x64x128xf32>
  %v1 = nn.add %v0, %bv : tensor<8x64x128xf32>
  %v = nn.reshape %v1 : tensor<8x64x128xf32> -> tensor<8x64x4x32xf32>
  %att = nn.attention %q, %k, %v causal : (tensor<8x64x4x32xf32>, tensor<8x64x4x32xf32>, tensor<8x64x4x32xf32>) -> tensor<8x64x4x32xf32>
  %att2 = nn.reshape %att : tensor<8x64x4x32xf32> -> tensor<8x64x128xf32>
  %o0 = nn.matmul %att2, %w_o : (tensor<8x64x128xf32>, tensor<128x128xf32>) -> tensor<8x64x128xf32>
  %bo = nn.broadcast %b_o dims = [2] : tensor<128xf32> -> tensor<8x64x128xf32>
  %o = nn.add %o0, %bo : tensor<8x64x128xf32>
  %h1 = nn.add %h, %o : tensor<8x64x128xf32>
  %y = nn.layer_norm %h1, %ln2_g, %ln2_b : (tensor<8x64x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<8x64x128xf32>
  %f0 = nn.matmul %y, %w_fc : (tensor<8x64x128xf32>, tensor<128x512xf32>) -> tensor<8x64x512xf32>
  %bf = nn.broadcast %b_fc dims = [2] : tensor<512xf32> -> tensor<8x64x512xf32>
  %f1 = nn.add %f0, %bf : tensor<8x64x512xf32>
  %f = nn.gelu %f1 approximate : tensor<8x64x512xf32>
  %p0 = nn.matmul %f, %w_proj : (tensor<8x64x512xf32>, tensor<512x128xf32>) -> tensor<8x64x128xf32>
  %bp = nn.broadcast %b_proj dims = [2] : tensor<128xf32> -> tensor<8x64x128xf32>
  %p = nn.add %p0, %bp : tensor<8x64x128xf32>
  %h2 = nn.add %h1, %p : tensor<8x64x128xf32>
  %l = nn.reduce_sum %h2 dims = [0, 1, 2] : tensor<8x64x128xf32> -> tensor<f32>
  return %l : tensor<f32>
}
