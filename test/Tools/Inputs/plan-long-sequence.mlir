// examples/gpt.mlir at batch 1 and a sequence of 1024 (bench/gpt-model.py --batch 1
// --seq 1024 --width 64 --heads 2 --layers 2 --vocab 64): too few samples for
// dp, a sequence long enough that context parallelism pays.

func.func private @block(
    %h: tensor<1x1024x64xf32>,
    %ln1_g: tensor<64xf32>, %ln1_b: tensor<64xf32>,
    %w_q: tensor<64x64xf32>, %b_q: tensor<64xf32>,
    %w_k: tensor<64x64xf32>, %b_k: tensor<64xf32>,
    %w_v: tensor<64x64xf32>, %b_v: tensor<64xf32>,
    %w_o: tensor<64x64xf32>, %b_o: tensor<64xf32>,
    %ln2_g: tensor<64xf32>, %ln2_b: tensor<64xf32>,
    %w_fc: tensor<64x256xf32>, %b_fc: tensor<256xf32>,
    %w_proj: tensor<256x64xf32>, %b_proj: tensor<64xf32>)
    -> tensor<1x1024x64xf32> {
  // Attention branch: x + W_o · attention(q, k, v) over 4 heads of 32.
  %x = nn.layer_norm %h, %ln1_g, %ln1_b : (tensor<1x1024x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<1x1024x64xf32>
  %q0 = nn.matmul %x, %w_q : (tensor<1x1024x64xf32>, tensor<64x64xf32>) -> tensor<1x1024x64xf32>
  %bq = nn.broadcast %b_q dims = [2] : tensor<64xf32> -> tensor<1x1024x64xf32>
  %q1 = nn.add %q0, %bq : tensor<1x1024x64xf32>
  %q = nn.reshape %q1 : tensor<1x1024x64xf32> -> tensor<1x1024x2x32xf32>
  %k0 = nn.matmul %x, %w_k : (tensor<1x1024x64xf32>, tensor<64x64xf32>) -> tensor<1x1024x64xf32>
  %bk = nn.broadcast %b_k dims = [2] : tensor<64xf32> -> tensor<1x1024x64xf32>
  %k1 = nn.add %k0, %bk : tensor<1x1024x64xf32>
  %k = nn.reshape %k1 : tensor<1x1024x64xf32> -> tensor<1x1024x2x32xf32>
  %v0 = nn.matmul %x, %w_v : (tensor<1x1024x64xf32>, tensor<64x64xf32>) -> tensor<1x1024x64xf32>
  %bv = nn.broadcast %b_v dims = [2] : tensor<64xf32> -> tensor<1x1024x64xf32>
  %v1 = nn.add %v0, %bv : tensor<1x1024x64xf32>
  %v = nn.reshape %v1 : tensor<1x1024x64xf32> -> tensor<1x1024x2x32xf32>
  %att = nn.attention %q, %k, %v causal : (tensor<1x1024x2x32xf32>, tensor<1x1024x2x32xf32>, tensor<1x1024x2x32xf32>) -> tensor<1x1024x2x32xf32>
  %att2 = nn.reshape %att : tensor<1x1024x2x32xf32> -> tensor<1x1024x64xf32>
  %o0 = nn.matmul %att2, %w_o : (tensor<1x1024x64xf32>, tensor<64x64xf32>) -> tensor<1x1024x64xf32>
  %bo = nn.broadcast %b_o dims = [2] : tensor<64xf32> -> tensor<1x1024x64xf32>
  %o = nn.add %o0, %bo : tensor<1x1024x64xf32>
  %h1 = nn.add %h, %o : tensor<1x1024x64xf32>

  // MLP branch: h1 + W_proj · gelu(W_fc · x + b_fc).
  %y = nn.layer_norm %h1, %ln2_g, %ln2_b : (tensor<1x1024x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<1x1024x64xf32>
  %f0 = nn.matmul %y, %w_fc : (tensor<1x1024x64xf32>, tensor<64x256xf32>) -> tensor<1x1024x256xf32>
  %bf = nn.broadcast %b_fc dims = [2] : tensor<256xf32> -> tensor<1x1024x256xf32>
  %f1 = nn.add %f0, %bf : tensor<1x1024x256xf32>
  %f = nn.gelu %f1 approximate : tensor<1x1024x256xf32>
  %p0 = nn.matmul %f, %w_proj : (tensor<1x1024x256xf32>, tensor<256x64xf32>) -> tensor<1x1024x64xf32>
  %bp = nn.broadcast %b_proj dims = [2] : tensor<64xf32> -> tensor<1x1024x64xf32>
  %p = nn.add %p0, %bp : tensor<1x1024x64xf32>
  %h2 = nn.add %h1, %p : tensor<1x1024x64xf32>
  return %h2 : tensor<1x1024x64xf32>
}

func.func @loss(
    %tokens:  tensor<1x1024xi32> {nn.input, nn.axes = ["batch", "seq"]},
    %targets: tensor<1x1024xi32> {nn.label, nn.axes = ["batch", "seq"]},
    %wte: tensor<64x64xf32> {nn.param = "wte", nn.init = #nn.init<normal, 0.02>,
                               nn.axes = ["vocab", "embed"]},
    %wpe: tensor<1024x64xf32>  {nn.param = "wpe", nn.init = #nn.init<normal, 0.01>,
                               nn.axes = ["seq", "embed"]},
    %ln1_g: tensor<2x64xf32> {nn.param = "h.ln_1.weight", nn.init = #nn.init<ones>,
                               nn.axes = ["layers", "embed"]},
    %ln1_b: tensor<2x64xf32> {nn.param = "h.ln_1.bias", nn.init = #nn.init<zeros>,
                               nn.axes = ["layers", "embed"]},
    %w_q: tensor<2x64x64xf32> {nn.param = "h.attn.q.weight", nn.init = #nn.init<normal, 0.02>,
                                 nn.axes = ["layers", "embed", "heads"]},
    %b_q: tensor<2x64xf32>     {nn.param = "h.attn.q.bias", nn.init = #nn.init<zeros>,
                                 nn.axes = ["layers", "heads"]},
    %w_k: tensor<2x64x64xf32> {nn.param = "h.attn.k.weight", nn.init = #nn.init<normal, 0.02>,
                                 nn.axes = ["layers", "embed", "heads"]},
    %b_k: tensor<2x64xf32>     {nn.param = "h.attn.k.bias", nn.init = #nn.init<zeros>,
                                 nn.axes = ["layers", "heads"]},
    %w_v: tensor<2x64x64xf32> {nn.param = "h.attn.v.weight", nn.init = #nn.init<normal, 0.02>,
                                 nn.axes = ["layers", "embed", "heads"]},
    %b_v: tensor<2x64xf32>     {nn.param = "h.attn.v.bias", nn.init = #nn.init<zeros>,
                                 nn.axes = ["layers", "heads"]},
    %w_o: tensor<2x64x64xf32> {nn.param = "h.attn.c_proj.weight",
                                 nn.init = #nn.init<normal, 0.01>,
                                 nn.axes = ["layers", "heads", "embed"]},
    %b_o: tensor<2x64xf32>     {nn.param = "h.attn.c_proj.bias", nn.init = #nn.init<zeros>,
                                 nn.axes = ["layers", "embed"]},
    %ln2_g: tensor<2x64xf32> {nn.param = "h.ln_2.weight", nn.init = #nn.init<ones>,
                               nn.axes = ["layers", "embed"]},
    %ln2_b: tensor<2x64xf32> {nn.param = "h.ln_2.bias", nn.init = #nn.init<zeros>,
                               nn.axes = ["layers", "embed"]},
    %w_fc: tensor<2x64x256xf32> {nn.param = "h.mlp.c_fc.weight", nn.init = #nn.init<normal, 0.02>,
                                  nn.axes = ["layers", "embed", "mlp"]},
    %b_fc: tensor<2x256xf32>     {nn.param = "h.mlp.c_fc.bias", nn.init = #nn.init<zeros>,
                                  nn.axes = ["layers", "mlp"]},
    %w_proj: tensor<2x256x64xf32> {nn.param = "h.mlp.c_proj.weight",
                                    nn.init = #nn.init<normal, 0.01>,
                                    nn.axes = ["layers", "mlp", "embed"]},
    %b_proj: tensor<2x64xf32>     {nn.param = "h.mlp.c_proj.bias", nn.init = #nn.init<zeros>,
                                    nn.axes = ["layers", "embed"]},
    %lnf_g: tensor<64xf32> {nn.param = "ln_f.weight", nn.init = #nn.init<ones>,
                             nn.axes = ["embed"]},
    %lnf_b: tensor<64xf32> {nn.param = "ln_f.bias", nn.init = #nn.init<zeros>,
                             nn.axes = ["embed"]})
    -> tensor<f32> {
  %tok = nn.embedding %wte, %tokens : (tensor<64x64xf32>, tensor<1x1024xi32>) -> tensor<1x1024x64xf32>
  %pos = nn.broadcast %wpe dims = [1, 2] : tensor<1024x64xf32> -> tensor<1x1024x64xf32>
  %x = nn.add %tok, %pos : tensor<1x1024x64xf32>
  %h = nn.repeat @block(%x)
      params(%ln1_g, %ln1_b, %w_q, %b_q, %w_k, %b_k, %w_v, %b_v, %w_o, %b_o,
             %ln2_g, %ln2_b, %w_fc, %b_fc, %w_proj, %b_proj)
      : (tensor<1x1024x64xf32>,
         tensor<2x64xf32>, tensor<2x64xf32>,
         tensor<2x64x64xf32>, tensor<2x64xf32>,
         tensor<2x64x64xf32>, tensor<2x64xf32>,
         tensor<2x64x64xf32>, tensor<2x64xf32>,
         tensor<2x64x64xf32>, tensor<2x64xf32>,
         tensor<2x64xf32>, tensor<2x64xf32>,
         tensor<2x64x256xf32>, tensor<2x256xf32>,
         tensor<2x256x64xf32>, tensor<2x64xf32>) -> tensor<1x1024x64xf32>
  %hf = nn.layer_norm %h, %lnf_g, %lnf_b : (tensor<1x1024x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<1x1024x64xf32>
  // The LM head reuses the token embedding (weight tying, as GPT-2).
  %logits = nn.matmul %hf, %wte transpose_rhs : (tensor<1x1024x64xf32>, tensor<64x64xf32>) -> tensor<1x1024x64xf32>
  %l = nn.cross_entropy %logits, %targets : (tensor<1x1024x64xf32>, tensor<1x1024xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
