// A Llama-style language model: token embedding, L pre-norm decoder blocks
// (RMSNorm; grouped-query causal self-attention with rotary position
// embeddings on queries and keys; a SwiGLU MLP; no biases), a final
// RMSNorm and an LM head of its own (not tied), trained with next-token
// cross-entropy. Positions enter through nn.rope alone: no position table.
//
// The block is written once (@block) and applied L = 4 times by nn.repeat
// over parameters stacked on a leading "layers" axis. Sizes: vocabulary
// 256 (bytes), context 64, width 128, 4 query heads of 32 sharing 2
// key/value heads (GQA), SwiGLU hidden 384, batch 8, rope theta 10000.
// Output projections start at 0.02 / sqrt(2 L), as the residual branches
// of GPT-2 and Llama's reference initialisation scale them.

func.func private @block(
    %h: tensor<8x64x128xf32>,
    %attn_norm: tensor<128xf32>,
    %w_q: tensor<128x128xf32>, %w_k: tensor<128x64xf32>,
    %w_v: tensor<128x64xf32>, %w_o: tensor<128x128xf32>,
    %mlp_norm: tensor<128xf32>,
    %w_gate: tensor<128x384xf32>, %w_up: tensor<128x384xf32>,
    %w_down: tensor<384x128xf32>)
    -> tensor<8x64x128xf32> {
  // Attention branch: h + W_o · attention(rope(q), rope(k), v), 4 query
  // heads of 32 over 2 key/value heads.
  %x = nn.rms_norm %h, %attn_norm {epsilon = 1.0e-05 : f64} : (tensor<8x64x128xf32>, tensor<128xf32>) -> tensor<8x64x128xf32>
  %q0 = nn.matmul %x, %w_q : (tensor<8x64x128xf32>, tensor<128x128xf32>) -> tensor<8x64x128xf32>
  %q1 = nn.reshape %q0 : tensor<8x64x128xf32> -> tensor<8x64x4x32xf32>
  %q = nn.rope %q1 : tensor<8x64x4x32xf32>
  %k0 = nn.matmul %x, %w_k : (tensor<8x64x128xf32>, tensor<128x64xf32>) -> tensor<8x64x64xf32>
  %k1 = nn.reshape %k0 : tensor<8x64x64xf32> -> tensor<8x64x2x32xf32>
  %k = nn.rope %k1 : tensor<8x64x2x32xf32>
  %v0 = nn.matmul %x, %w_v : (tensor<8x64x128xf32>, tensor<128x64xf32>) -> tensor<8x64x64xf32>
  %v = nn.reshape %v0 : tensor<8x64x64xf32> -> tensor<8x64x2x32xf32>
  %att = nn.attention %q, %k, %v causal : (tensor<8x64x4x32xf32>, tensor<8x64x2x32xf32>, tensor<8x64x2x32xf32>) -> tensor<8x64x4x32xf32>
  %att2 = nn.reshape %att : tensor<8x64x4x32xf32> -> tensor<8x64x128xf32>
  %o = nn.matmul %att2, %w_o : (tensor<8x64x128xf32>, tensor<128x128xf32>) -> tensor<8x64x128xf32>
  %h1 = nn.add %h, %o : tensor<8x64x128xf32>

  // SwiGLU branch: h1 + W_down · (silu(W_gate · y) ⊙ W_up · y).
  %y = nn.rms_norm %h1, %mlp_norm {epsilon = 1.0e-05 : f64} : (tensor<8x64x128xf32>, tensor<128xf32>) -> tensor<8x64x128xf32>
  %g0 = nn.matmul %y, %w_gate : (tensor<8x64x128xf32>, tensor<128x384xf32>) -> tensor<8x64x384xf32>
  %g = nn.silu %g0 : tensor<8x64x384xf32>
  %u = nn.matmul %y, %w_up : (tensor<8x64x128xf32>, tensor<128x384xf32>) -> tensor<8x64x384xf32>
  %gu = nn.mul %g, %u : tensor<8x64x384xf32>
  %d = nn.matmul %gu, %w_down : (tensor<8x64x384xf32>, tensor<384x128xf32>) -> tensor<8x64x128xf32>
  %h2 = nn.add %h1, %d : tensor<8x64x128xf32>
  return %h2 : tensor<8x64x128xf32>
}

func.func @loss(
    %tokens:  tensor<8x64xi32> {nn.input, nn.axes = ["batch", "seq"]},
    %targets: tensor<8x64xi32> {nn.label, nn.axes = ["batch", "seq"]},
    %embed: tensor<256x128xf32> {nn.param = "tok_embeddings.weight",
                                 nn.init = #nn.init<normal, 0.02>,
                                 nn.axes = ["vocab", "embed"]},
    %attn_norm: tensor<4x128xf32> {nn.param = "layers.attention_norm.weight",
                                   nn.init = #nn.init<ones>,
                                   nn.axes = ["layers", "embed"]},
    %w_q: tensor<4x128x128xf32> {nn.param = "layers.attention.wq.weight",
                                 nn.init = #nn.init<normal, 0.02>,
                                 nn.axes = ["layers", "embed", "heads"]},
    %w_k: tensor<4x128x64xf32> {nn.param = "layers.attention.wk.weight",
                                nn.init = #nn.init<normal, 0.02>,
                                nn.axes = ["layers", "embed", "heads"]},
    %w_v: tensor<4x128x64xf32> {nn.param = "layers.attention.wv.weight",
                                nn.init = #nn.init<normal, 0.02>,
                                nn.axes = ["layers", "embed", "heads"]},
    %w_o: tensor<4x128x128xf32> {nn.param = "layers.attention.wo.weight",
                                 nn.init = #nn.init<normal, 0.0070710678118654752>,
                                 nn.axes = ["layers", "heads", "embed"]},
    %mlp_norm: tensor<4x128xf32> {nn.param = "layers.ffn_norm.weight",
                                  nn.init = #nn.init<ones>,
                                  nn.axes = ["layers", "embed"]},
    %w_gate: tensor<4x128x384xf32> {nn.param = "layers.feed_forward.w1.weight",
                                    nn.init = #nn.init<normal, 0.02>,
                                    nn.axes = ["layers", "embed", "mlp"]},
    %w_up: tensor<4x128x384xf32> {nn.param = "layers.feed_forward.w3.weight",
                                  nn.init = #nn.init<normal, 0.02>,
                                  nn.axes = ["layers", "embed", "mlp"]},
    %w_down: tensor<4x384x128xf32> {nn.param = "layers.feed_forward.w2.weight",
                                    nn.init = #nn.init<normal, 0.0070710678118654752>,
                                    nn.axes = ["layers", "mlp", "embed"]},
    %norm: tensor<128xf32> {nn.param = "norm.weight", nn.init = #nn.init<ones>,
                            nn.axes = ["embed"]},
    %w_out: tensor<128x256xf32> {nn.param = "output.weight",
                                 nn.init = #nn.init<normal, 0.02>,
                                 nn.axes = ["embed", "vocab"]})
    -> tensor<f32> {
  %x = nn.embedding %embed, %tokens : (tensor<256x128xf32>, tensor<8x64xi32>) -> tensor<8x64x128xf32>
  %h = nn.repeat @block(%x)
      params(%attn_norm, %w_q, %w_k, %w_v, %w_o, %mlp_norm, %w_gate, %w_up,
             %w_down)
      : (tensor<8x64x128xf32>,
         tensor<4x128xf32>,
         tensor<4x128x128xf32>, tensor<4x128x64xf32>,
         tensor<4x128x64xf32>, tensor<4x128x128xf32>,
         tensor<4x128xf32>,
         tensor<4x128x384xf32>, tensor<4x128x384xf32>,
         tensor<4x384x128xf32>) -> tensor<8x64x128xf32>
  %hf = nn.rms_norm %h, %norm {epsilon = 1.0e-05 : f64} : (tensor<8x64x128xf32>, tensor<128xf32>) -> tensor<8x64x128xf32>
  %logits = nn.matmul %hf, %w_out : (tensor<8x64x128xf32>, tensor<128x256xf32>) -> tensor<8x64x256xf32>
  %l = nn.cross_entropy %logits, %targets : (tensor<8x64x256xf32>, tensor<8x64xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
