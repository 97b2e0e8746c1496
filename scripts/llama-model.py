#!/usr/bin/env python3
"""A Llama-style model in the nn dialect, at any size.

  scripts/llama-model.py > examples/llama.mlir          (the example itself)
  scripts/llama-model.py --layers 22 --dim 2048 --heads 32 --kv-heads 4 \\
      --ffn 5632 --vocab 32000 --seq 2048 --batch 1 > tinyllama.mlir
                                                          (TinyLlama 1.1B's shapes)
  scripts/llama-model.py --layers 32 --dim 4096 --heads 32 --kv-heads 8 \\
      --ffn 14336 --vocab 32000 --sliding-window 4096 --seq 8192 --batch 1 \\
      > mistral.mlir                                      (Mistral 7B v0.1's)
  scripts/llama-model.py --layers 28 --dim 1024 --heads 16 --kv-heads 8 \\
      --head-dim 128 --qk-norm --ffn 3072 --vocab 151936 --theta 1000000 \\
      --eps 1e-6 --tie-embeddings --seq 4096 --batch 1 > qwen3.mlir
                                                          (Qwen3 0.6B's)
  scripts/llama-model.py --config config.json --seq 4096 --batch 1 > model.mlir
  (a Hugging Face Llama, Mistral, Qwen2, Qwen3, Phi-3, Gemma, Granite or
   OLMo 2's config)

RMSNorm before attention and MLP, grouped-query causal attention with rotary
position embeddings on queries and keys (--sliding-window N: over the last N
keys only, Mistral's sliding_window), a SwiGLU MLP, a final RMSNorm and an
LM head; the block is written once and repeated over parameters stacked on
a leading "layers" axis. Parameters take Meta's names
(scripts/llama-checkpoint.py converts Hugging Face checkpoints to them).
Output projections start at 0.02 / sqrt(2 L), biases at 0.

By default there are no biases and the head is a matrix of its own
(output.weight). --tie-embeddings multiplies by the token embedding
transposed instead (tie_word_embeddings: Llama 3.2 1B and 3B, Qwen2.5 up to
3B), with no output.weight. Biases add to a projection's output, broadcast
over batch and positions, each [layers, out] with its weight's output axis
(split with a column-parallel weight, whole beside a row-parallel one):
--qkv-bias on the query, key and value projections (Qwen2's:
layers.attention.wq.bias, wk, wv), --attention-bias on those and the output
projection (Llama's attention_bias: wo.bias as well), --mlp-bias on the
SwiGLU's three (Llama's mlp_bias: layers.feed_forward.w1.bias, w3, w2).
Each has a --no- form, to override a config.

--head-dim N sets the query, key and value heads' width apart from the
model's (Qwen3 0.6B: width 1024, 16 heads of 128; default width / heads):
wq is [dim, heads * N], wk and wv [dim, kv_heads * N], wo [heads * N, dim];
rope and attention (scale 1 / sqrt(N)) run over N. --qk-norm (Qwen3's)
applies an RMSNorm over each query head and each key head, after the
projections are split into heads and before rope, with weights
layers.attention.q_norm.weight and k_norm.weight, [layers, N] on the
"head_dim" axis (whole under tensor parallelism), starting at 1.

--mlp-act gelu-tanh (or gelu) makes the gated MLP a GeGLU, --norm-offset
every RMSNorm scale by 1 + w with w starting at 0, --embed-scale the token
embeddings times sqrt(dim): Gemma's three departures from Llama (with
--tie-embeddings and its --head-dim, a Gemma 2B or 7B). --post-norms puts
each block's two RMSNorms over the attention's and the MLP's outputs,
before their residual adds, instead of over their inputs
(layers.attention_post_norm.weight, layers.ffn_post_norm.weight), and
--qk-norm-full an RMSNorm over the whole query and key projections before
they are split into heads (q_norm [heads * head_dim], k_norm [kv_heads *
head_dim]; under tp the projections are gathered for it): OLMo 2's
departures from Llama. --sandwich-norms keeps the norms over the inputs and
adds those over the outputs (Gemma 2's and 3's four norms a layer;
layers.attention_norm, attention_post_norm, ffn_norm, ffn_post_norm).
--ignore-index N makes the loss skip the label N
(fine-tuning's -100: PyTorch's ignore_index); --label-smoothing E trains
on the target (1 - E) on the label and E / vocab everywhere (PyTorch's
label_smoothing, Trainer's label_smoothing_factor). --embedding-multiplier,
--residual-multiplier, --attention-multiplier and --logits-scaling are
Granite's muP factors: the embeddings times the first, each block's
attention and MLP outputs times the second before their residual adds, the
attention scores times the third (in place of 1 / sqrt(head_dim)), the
logits divided by the fourth (each a [dim] constant broadcast, the last
applied to the final norm's output before the head: no tensor of the
logits' size).

--attn-softcap C caps each attention score s (after its scale) to
C tanh(s / C) before the mask and the softmax (nn.attention's softcap:
Gemma 2's attn_logit_softcapping); --final-softcap C caps each logit
likewise before the loss (final_logit_softcapping; the scalar C broadcast,
no tensor of the logits' size). Gemma 2's config gives both (50 and 30 by
default), every other layer global from layer 1.

--rope-linear F divides every rope frequency by F (rope_scaling of type
linear); --rope-dynamic F,N is dynamic NTK over N original positions (type
dynamic, max_position_embeddings N): the base transformers computes for a
batch of --seq positions, theta itself when --seq <= N. --rope-yarn
F,N[,FAST,SLOW[,TRUNCATE]] is YaRN (type yarn: Qwen's long contexts):
frequencies ramp from kept to divided by F over the pairs that turn
between FAST (32) and SLOW (1) times over N original positions, and the
scores are scaled by its attention factor (0.1 ln F + 1, or
--yarn-attention-factor) squared. --rope-longrope F0,F1,... is LongRoPE
(type longrope: Phi-3's and Phi-3.5's 128k): pair i's frequency divided by
Fi, cos and sin times --longrope-attention-factor (default 1).
--partial-rotary F turns the first int(F head_dim) elements of each head
only (partial_rotary_factor: Phi-4-mini's 0.75), at the frequencies of a
head that wide.

--config reads the sizes, rope, window, biases and tying from a Hugging Face
config.json (model_type llama, mistral, qwen2, qwen3, phi3, gemma, gemma2,
gemma3, gemma3_text, granite or olmo2; flags given as well win);
batch and seq are not in it (seq is the training context, not
max_position_embeddings). layer_types (sliding_attention, full_attention),
or Qwen2's and Qwen3's use_sliding_window from max_window_layers on, gives
each layer its window; model_type gemma3 (Gemma 3 4B on, multimodal) its
text_config's model. A config this model cannot be (another model_type,
activation or rope scaling) is refused, naming the field. A head_dim other
than hidden_size / num_attention_heads is read as --head-dim; Qwen3 always
has QK-norm. Phi-3
(Phi3ForCausalLM) is a Llama without biases whose sliding_window (2047 in
Phi-3-mini-4k; null none) is Mistral's; its 128k variants' rope_scaling
(longrope, su) takes the long factors where --seq passes
original_max_position_embeddings, else the short ones, and the attention
factor given or sqrt(1 + ln(max / original) / ln original); any
config's partial_rotary_factor is read. Its
checkpoint fuses q, k, v into qkv_proj and gate, up into gate_up_proj:
scripts/llama-checkpoint.py --config splits them.
"""
import math
import os
import sys
import textwrap

# The flags' parser and checks, beside this script.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_args import parse_args  # noqa: E402

a, p = parse_args(__doc__.splitlines()[0])

B, S, D, H, K, F, V, L = (a.batch, a.seq, a.dim, a.heads, a.kv_heads, a.ffn,
                          a.vocab, a.layers)
hd = a.head_dim or D // H
qd = H * hd  # the queries' width: D unless --head-dim says otherwise
# The elements of each head rope turns (transformers' int(head_dim ·
# partial_rotary_factor)).
rot = int(hd * a.partial_rotary) if a.partial_rotary is not None else hd
if rot < 2 or rot % 2:
    p.error("--partial-rotary %g of heads of %d turns %d elements: it must "
            "be even and at least 2" % (a.partial_rotary, hd, rot))
if a.rope_longrope is not None and (
        len(a.rope_longrope) != rot // 2 or
        not all(0 < f < math.inf for f in a.rope_longrope)):
    p.error("LongRoPE needs %d positive factors (one a pair of the %d "
            "elements turned), got %s" % (rot // 2, rot,
                                          ",".join(map(str, a.rope_longrope))))
kvd = K * hd
qk_norm = bool(a.qk_norm)
qk_norm_full = bool(a.qk_norm_full)
post_norms = bool(a.post_norms)
sandwich = bool(a.sandwich_norms)
if post_norms and sandwich:
    p.error("--sandwich-norms has the post-norms and the pre-norms: not with "
            "--post-norms")
norm_offset = bool(a.norm_offset)
multipliers = [a.embedding_multiplier, a.residual_multiplier,
               a.attention_multiplier, a.logits_scaling]
plain_mlp = (a.mlp_act == "silu" and not norm_offset and not a.embed_scale
             and all(m is None for m in multipliers))
t = a.dtype


def ty(*shape):
    return "tensor<" + "x".join(str(s) for s in shape) + "x" + t + ">"


def num(x):
    """An MLIR float literal (which needs its point: 1.0e-05)."""
    s = repr(float(x))
    mantissa = s.split("e")[0]
    return s.replace("e", ".0e", 1) if "e" in s and "." not in mantissa else s


act, act_kv, act_f = ty(B, S, D), ty(B, S, kvd), ty(B, S, F)
act_q = ty(B, S, qd)
q4, kv4 = ty(B, S, H, hd), ty(B, S, K, hd)
eps = "{epsilon = %s : f64}" % num(a.eps)
theta = a.theta
rope_note = ""
if a.rope_dynamic:
    # transformers' dynamic NTK base for a batch of S positions
    # (_compute_dynamic_ntk_parameters): theta itself up to the original
    # length.
    factor, original = a.rope_dynamic
    theta = theta * ((factor * max(S, original) / original) -
                     (factor - 1)) ** (rot / (rot - 2))
    rope_note = ("// Rope is dynamic NTK (factor %g over %d positions): at the "
                 "context %d its\n// base is %s.\n" % (
                     factor, original, S, num(theta)))
if a.rope_linear:
    # Linear scaling divides every frequency by the factor: Llama 3.1's
    # rule with every wavelength (>= 2 pi) past original / low = 1.
    a.rope_scaling = [a.rope_linear, 1.0, 2.0, 1.0]
    rope_note = ("// Rope is linear (factor %g): every frequency divided by "
                 "it, written as Llama\n// 3.1's scaling with every "
                 "wavelength past original / low (1).\n" % a.rope_linear)
rope_attrs = [] if theta == 10000.0 else ["theta = %s : f64" % num(theta)]
if a.rope_yarn:
    factor, original, fast, slow, truncate = a.rope_yarn
    rope_attrs.append("yarn = array<f64: %s>" % ", ".join(
        num(v) for v in (factor, fast, slow, original, truncate)))
    rope_note = ("// Rope is YaRN (factor %g over %d positions, betas %g and "
                 "%g): pairs ramp from\n// kept to divided frequencies; the "
                 "scores times its attention factor %s\n// squared.\n" % (
                     factor, original, fast, slow,
                     num(a.yarn_attention_factor)))
if a.rope_scaling:
    rope_attrs.append("scaling = array<f64: %s>" %
                      ", ".join(num(v) for v in a.rope_scaling))
if rot < hd:
    rope_attrs.append("rotary_dim = %d : i64" % rot)
    rope_note += ("// Rope turns the first %d of each head's %d elements "
                  "(partial_rotary_factor\n// %g); the rest pass.\n" % (
                      rot, hd, a.partial_rotary))
if a.rope_longrope:
    rope_attrs.append("longrope = array<f64: %s>" % ", ".join(
        num(v) for v in a.rope_longrope))
    rope_note += ("// Rope is LongRoPE: pair i's frequency divided by its "
                  "own factor.\n")
    if a.longrope_attention_factor != 1.0:
        # On cos and sin: the turned elements, not a partial rope's others.
        rope_attrs.append("attention_factor = %s : f64" %
                          num(a.longrope_attention_factor))
        rope_note += ("// Cos and sin times its attention factor %s.\n" %
                      num(a.longrope_attention_factor))
# Alternating local and global layers: each layer's window (0: none) and,
# with --local-theta, its rope theta, read by the layer's index.
types = a.layer_types or []
mixed = "sliding" in types and "full" in types
if a.local_theta is not None:
    rope_attrs.append("layer_thetas = array<f64: %s>" % ", ".join(
        num(a.local_theta if t == "sliding" else theta) for t in types))
if a.global_rope_linear is not None:
    # The full layers' linear scaling as Llama 3.1's rule with every
    # wavelength past original / low (see --rope-linear); none elsewhere.
    rope_attrs.append("layer_scalings = array<f64: %s>" % ", ".join(
        ", ".join(num(v) for v in ([a.global_rope_linear, 1.0, 2.0, 1.0]
                                   if t == "full" else [0.0] * 4))
        for t in types))
rope_attr = " {%s}" % ", ".join(rope_attrs) if rope_attrs else ""
out_std = repr(0.02 / math.sqrt(2 * L))
layers_word = "layer" if L == 1 else "layers"
mask, window_note, mask_attrs = "causal", "", []
if mixed:
    mask_attrs.append("layer_windows = array<i64: %s>" % ", ".join(
        str(a.sliding_window if t == "sliding" else 0) for t in types))
    full = [str(i) for i, t in enumerate(types) if t == "full"]
    note = ("%s attend%s to every earlier key; the others are local, "
            "within a sliding window of %d keys%s (nn.attention's "
            "layer_windows%s)." % (
                "Layer " + full[0] if len(full) == 1 else
                "Layers " + ", ".join(full), "s" if len(full) == 1 else "",
                a.sliding_window,
                " at rope theta %g" % a.local_theta
                if a.local_theta is not None else "",
                ", nn.rope's layer_thetas" if a.local_theta is not None
                else ""))
    window_note = textwrap.fill(note, 78, initial_indent="// ",
                                subsequent_indent="// ") + "\n"
elif a.sliding_window is not None and "full" not in types:
    mask += " window %d" % a.sliding_window
    window_note = ("// Attention is causal within a sliding window of %d keys "
                   "(Mistral's\n// sliding_window): query i sees keys "
                   "i - %d < j <= i.\n" % (a.sliding_window, a.sliding_window))
if a.attn_softcap is not None:  # Gemma 2's, after the scale, before the mask
    mask += " softcap %s" % num(a.attn_softcap)
if a.attention_multiplier is not None or a.rope_yarn:
    # Granite's multiplier, for 1 / sqrt(head_dim); YaRN's attention factor
    # multiplies cos and sin on q and k, so the scores by its square.
    score_scale = (a.attention_multiplier if a.attention_multiplier is not None
                   else hd ** -0.5)
    if a.rope_yarn:
        score_scale *= a.yarn_attention_factor ** 2
    mask_attrs.append("scale = %s : f64" % num(score_scale))
if mask_attrs:
    mask += " {%s}" % ", ".join(mask_attrs)

# The block's projections: (weight, its bias's name in @block, Meta's name,
# [in, out] shape, the weight's logical axes, init, biased). A bias is
# [out] in the block, [L, out] stacked, on the weight's output axis: split
# with a column-parallel weight (wq, wk, wv, w1, w3), whole beside a
# row-parallel one (wo, w2), whose partial sums it is added after.
normal = "#nn.init<normal, 0.02>"
out_init = "#nn.init<normal, %s>" % out_std
ones = "#nn.init<ones>"
qkv_bias = bool(a.qkv_bias or a.attention_bias)
PROJ = [
    ("w_q", "b_q", "layers.attention.wq", (D, qd), ["embed", "heads"], normal,
     qkv_bias),
    ("w_k", "b_k", "layers.attention.wk", (D, kvd), ["embed", "heads"], normal,
     qkv_bias),
    ("w_v", "b_v", "layers.attention.wv", (D, kvd), ["embed", "heads"], normal,
     qkv_bias),
    ("w_o", "b_o", "layers.attention.wo", (qd, D), ["heads", "embed"], out_init,
     bool(a.attention_bias)),
    ("w_gate", "b_gate", "layers.feed_forward.w1", (D, F), ["embed", "mlp"],
     normal, bool(a.mlp_bias)),
    ("w_up", "b_up", "layers.feed_forward.w3", (D, F), ["embed", "mlp"], normal,
     bool(a.mlp_bias)),
    ("w_down", "b_down", "layers.feed_forward.w2", (F, D), ["mlp", "embed"],
     out_init, bool(a.mlp_bias)),
]
proj = {w: (b, shape, has_bias) for w, b, _, shape, _, _, has_bias in PROJ}
biased = any(has_bias for _, _, has_bias in proj.values())
tied = bool(a.tie_embeddings)


def linear(out, x, w, in_ty, out_ty):
    """%out = x · w (+ w's bias, broadcast over batch and positions)."""
    b, shape, has_bias = proj[w]
    mm = f"nn.matmul %{x}, %{w} : ({in_ty}, {ty(*shape)}) -> {out_ty}"
    if not has_bias:
        return f"  %{out} = {mm}"
    bb = "b" + out.rstrip("0")  # %bq for %q0, %bo for %o, as examples/gpt.mlir
    return (f"  %{out}w = {mm}\n"
            f"  %{bb} = nn.broadcast %{b} dims = [2] : {ty(shape[1])} -> {out_ty}\n"
            f"  %{out} = nn.add %{out}w, %{bb} : {out_ty}")


# The block's parameters in order: each norm, each weight, its bias beside it.
block_args = ["attn_norm", "w_q", "w_k", "w_v", "w_o", "mlp_norm", "w_gate",
              "w_up", "w_down"]
if qk_norm or qk_norm_full:  # after the projections, as Qwen3's, OLMo 2's
    block_args[5:5] = ["q_norm", "k_norm"]
if sandwich:  # each branch's output norm after its last weight
    block_args.insert(block_args.index("w_o") + 1, "attn_post_norm")
    block_args.insert(block_args.index("w_down") + 1, "mlp_post_norm")
if biased:
    block_args = [x for w in block_args
                  for x in ([w, proj[w][0]] if w in proj and proj[w][2] else [w])]


def arg_shape(name):
    """A block parameter's shape (one layer's)."""
    if name in ("q_norm", "k_norm"):
        if qk_norm_full:  # the whole projection
            return (qd if name == "q_norm" else kvd,)
        return (hd,)
    if name.endswith("norm"):
        return (D,)
    for w, (b, shape, _) in proj.items():
        if name == w:
            return shape
        if name == b:
            return (shape[1],)


if not (biased or qk_norm or qk_norm_full or sandwich):  # llama.mlir's
    block_sig = f"""    %attn_norm: {ty(D)},
    %w_q: {ty(D, qd)}, %w_k: {ty(D, kvd)},
    %w_v: {ty(D, kvd)}, %w_o: {ty(qd, D)},
    %mlp_norm: {ty(D)},
    %w_gate: {ty(D, F)}, %w_up: {ty(D, F)},
    %w_down: {ty(F, D)})"""
else:  # one weight a line, its bias beside it, as examples/gpt.mlir
    lines, line = [], []
    for name in block_args:
        if line and not name.startswith("b_") and name != "k_norm":
            lines.append(line)
            line = []
        line.append(f"%{name}: {ty(*arg_shape(name))}")
    lines.append(line)
    block_sig = ",\n".join("    " + ", ".join(x) for x in lines) + ")"

if (not biased and not tied and not qk_norm and not qk_norm_full and
        not post_norms and not sandwich and plain_mlp):
    intro = """// A Llama-style language model: token embedding, L pre-norm decoder blocks
// (RMSNorm; grouped-query causal self-attention with rotary position
// embeddings on queries and keys; a SwiGLU MLP; no biases), a final
// RMSNorm and an LM head of its own (not tied), trained with next-token
// cross-entropy. Positions enter through nn.rope alone: no position table.
// Generated by scripts/llama-model.py (the sizes are its flags)."""
else:
    where = []
    if qkv_bias:
        where.append("the query, key%s projections" %
                     (", value and output" if a.attention_bias else
                      " and value"))
    if a.mlp_bias:
        where.append("the MLP's gate, up and down projections")
    bias_words = "biases on " + " and on ".join(where) if where else "no biases"
    norm_words = ("an RMSNorm over each query and key head before rope "
                  "(QK-norm); " if qk_norm else
                  "an RMSNorm over the whole query and key projections "
                  "(QK-norm); " if qk_norm_full else "")
    mlp_words = ("a SwiGLU MLP" if a.mlp_act == "silu" else
                 "a GeGLU MLP (%s)" % ("tanh-approximated GELU"
                                       if a.mlp_act == "gelu-tanh"
                                       else "exact GELU"))
    head_words = ("an LM head tied to the token embedding (the table "
                  "transposed: no matrix of its own)" if tied else
                  "an LM head of its own (not tied)")
    intro = textwrap.fill(
        "A Llama-style language model: token embedding, L " +
        ("post-norm" if post_norms else "sandwich-norm" if sandwich else
         "pre-norm") + " decoder "
        "blocks (RMSNorm; grouped-query causal self-attention with rotary "
        "position embeddings on queries and keys; " + norm_words +
        mlp_words + "; "
        f"{bias_words}), a final RMSNorm and {head_words}, trained with "
        "next-token cross-entropy. Positions enter through nn.rope alone: no "
        "position table. Generated by scripts/llama-model.py (the sizes are "
        "its flags).", width=76, initial_indent="// ", subsequent_indent="// ")
    if qd != D:
        intro += ("\n// The heads are %d wide, not width / heads: q and the "
                  "output projection\n// map between width %d and %d x %d = "
                  "%d." % (hd, D, H, hd, qd))
    if biased:
        intro += ("\n// Biases add to a projection's output, broadcast over "
                  "batch and positions.")
    if norm_offset:
        intro += ("\n// Every RMSNorm scales by 1 + w, its weight w starting "
                  "at 0 (Gemma's).")
    if post_norms:
        intro += ("\n// The blocks' RMSNorms are over the attention's and "
                  "the MLP's outputs,\n// before their residual adds, none "
                  "over their inputs (OLMo 2's).")
    if sandwich:
        intro += ("\n// Each branch has an RMSNorm over its input and one "
                  "over its output, before\n// its residual add (Gemma 2's "
                  "and 3's four norms a layer).")
    if a.embed_scale:
        intro += ("\n// The token embeddings are multiplied by sqrt(width) "
                  "(Gemma's normalizer).")
    scaled_words = [w % num(m) for w, m in zip(
        ["the embeddings times %s", "each residual branch times %s",
         "attention scores times %s", "the logits over %s"], multipliers)
        if m is not None]
    if scaled_words:
        intro += "\n" + textwrap.fill(
            "Granite's multipliers: " + ", ".join(scaled_words) + ".",
            width=76, initial_indent="// ", subsequent_indent="// ")
capped = []
if a.attn_softcap is not None:
    capped.append("each attention score s as {0} tanh(s / {0}) before the "
                  "softmax".format(num(a.attn_softcap)))
if a.final_softcap is not None:
    capped.append("each logit z as {0} tanh(z / {0}) before the "
                  "loss".format(num(a.final_softcap)))
if capped:
    intro += "\n" + textwrap.fill(
        "Soft-capped (Gemma 2's): " + ", and ".join(capped) + ".",
        width=76, initial_indent="// ", subsequent_indent="// ")


def gain(w, n):
    """The lines making an RMSNorm's scale %w_g = 1 + %w (Gemma's offset:
    %one{n} a constant of n ones), and the scale's name; without
    --norm-offset none, and the weight itself."""
    if not norm_offset:
        return "", w
    return (f"  %{w}_g = nn.add %{w}, %one{n} : {ty(n)}\n", w + "_g")


def qk_full(x, width):
    """OLMo 2's QK-norm line: %x0n = rms_norm of the whole projection %x0
    (width wide), before it is split into heads; "" without."""
    if not qk_norm_full:
        return ""
    lines, g = gain(x + "_norm", width)
    t2 = ty(B, S, width)
    return lines + (f"  %{x}0n = nn.rms_norm %{x}0, %{g} {eps} : ({t2}, "
                    f"{ty(width)}) -> {t2}\n")


def qk(x, ty4):
    """QK-norm's line: %x2 = rms_norm of each head of %x1, before rope."""
    if not qk_norm:
        return ""
    lines, g = gain(x + "_norm", hd)
    return lines + (f"  %{x}2 = nn.rms_norm %{x}1, %{g} {eps} : ({ty4}, "
                    f"{ty(hd)}) -> {ty4}\n")


def ones_of(n):
    """The constant of n ones the norms' offset adds (none without it)."""
    return (f"  %one{n} = nn.constant dense<1.0> : {ty(n)}\n"
            if norm_offset else "")


attn_lines, attn_g = gain("attn_norm", D)
mlp_lines, mlp_g = gain("mlp_norm", D)
attn_post_lines, attn_post_g = gain("attn_post_norm", D)
mlp_post_lines, mlp_post_g = gain("mlp_post_norm", D)
block_ones = "".join(ones_of(n) for n in dict.fromkeys(
    [D] + ([hd] if qk_norm else []) + ([qd, kvd] if qk_norm_full else [])))
# OLMo 2 normalises the branches' outputs: %o and %d, not %h and %h1.
attn_in, mlp_in = ("h", "h1") if post_norms else ("x", "y")
q_src, k_src = ("q0n", "k0n") if qk_norm_full else ("q0", "k0")
act_op = {"silu": "nn.silu %g0", "gelu": "nn.gelu %g0",
          "gelu-tanh": "nn.gelu %g0 approximate"}[a.mlp_act]
act_name = {"silu": "silu", "gelu": "gelu",
            "gelu-tanh": "gelu_tanh"}[a.mlp_act]


def scaled(out, x, value, op="mul"):
    """%out = %x (an activation) times (or, op "div", over) value, the
    constant [dim] broadcast along batch and positions (read where it lies,
    not a full tensor of it)."""
    return (f"  %{out}_c = nn.constant dense<{num(value)}> : {ty(D)}\n"
            f"  %{out}_b = nn.broadcast %{out}_c dims = [2] : {ty(D)} -> "
            f"{act}\n"
            f"  %{out} = nn.{op} %{x}, %{out}_b : {act}\n")


# Granite's residual multiplier scales each branch before its add.
residual = a.residual_multiplier
o_name, d_name = ("o", "d") if residual is None else ("o_r", "d_r")
o_scale = "" if residual is None else scaled("o_r", "o", residual)
d_scale = "" if residual is None else scaled("d_r", "d", residual)
glu_name = "SwiGLU" if a.mlp_act == "silu" else "GeGLU"


def norm_line(out, x, g):
    return f"  %{out} = nn.rms_norm %{x}, %{g} {eps} : ({act}, {ty(D)}) -> {act}\n"


# The attention's and the MLP's norms: before each branch (%x, %y), or
# after it (OLMo 2: %on, %dn, added to the residual stream).
pre_attn = pre_mlp = post_attn = post_mlp = ""
o_out, d_out = o_name, d_name
if post_norms:
    post_attn = attn_lines + norm_line("on", o_name, attn_g)
    post_mlp = mlp_lines + norm_line("dn", d_name, mlp_g)
    o_out, d_out = "on", "dn"
else:
    pre_attn = attn_lines + norm_line("x", "h", attn_g)
    pre_mlp = mlp_lines + norm_line("y", "h1", mlp_g)
if sandwich:
    post_attn = attn_post_lines + norm_line("on", o_name, attn_post_g)
    post_mlp = mlp_post_lines + norm_line("dn", d_name, mlp_post_g)
    o_out, d_out = "on", "dn"


print(f"""{intro}
//
// The block is written once (@block) and applied L = {L} times by nn.repeat
// over parameters stacked on a leading "layers" axis. Sizes: vocabulary
// {V}, context {S}, width {D}, {H} query heads of {hd} sharing {K}
// key/value heads (GQA), {glu_name} hidden {F}, batch {B}, rope theta {a.theta:g}.
{window_note}{rope_note}// Output projections start at 0.02 / sqrt(2 L), as the residual branches
// of GPT-2 and Llama's reference initialisation scale them.

func.func private @block(
    %h: {act},
{block_sig}
    -> {act} {{
  // Attention branch: h + W_o · attention(rope(q), rope(k), v), {H} query
  // heads of {hd} over {K} key/value heads.
{block_ones}{pre_attn}{linear("q0", attn_in, "w_q", act, act_q)}
{qk_full("q", qd)}  %q1 = nn.reshape %{q_src} : {act_q} -> {q4}
{qk("q", q4)}  %q = nn.rope %q{"2" if qk_norm else "1"}{rope_attr} : {q4}
{linear("k0", attn_in, "w_k", act, act_kv)}
{qk_full("k", kvd)}  %k1 = nn.reshape %{k_src} : {act_kv} -> {kv4}
{qk("k", kv4)}  %k = nn.rope %k{"2" if qk_norm else "1"}{rope_attr} : {kv4}
{linear("v0", attn_in, "w_v", act, act_kv)}
  %v = nn.reshape %v0 : {act_kv} -> {kv4}
  %att = nn.attention %q, %k, %v {mask} : ({q4}, {kv4}, {kv4}) -> {q4}
  %att2 = nn.reshape %att : {q4} -> {act_q}
{linear("o", "att2", "w_o", act_q, act)}
{o_scale}{post_attn}  %h1 = nn.add %h, %{o_out} : {act}

  // {glu_name} branch: h1 + W_down · ({act_name}(W_gate · y) ⊙ W_up · y).
{pre_mlp}{linear("g0", mlp_in, "w_gate", act, act_f)}
  %g = {act_op} : {act_f}
{linear("u", mlp_in, "w_up", act, act_f)}
  %gu = nn.mul %g, %u : {act_f}
{linear("d", "gu", "w_down", act_f, act)}
{d_scale}{post_mlp}  %h2 = nn.add %h1, %{d_out} : {act}
  return %h2 : {act}
}}
""")


def param(var, shape, name, init, axes):
    return (f"    %{var}: {ty(*shape)} {{nn.param = \"{name}\",\n"
            f"        nn.init = {init},\n"
            f"        nn.axes = [{', '.join(chr(34) + x + chr(34) for x in axes)}]}}")


zeros = "#nn.init<zeros>"
# A norm's weight: 1, or with the offset (its scale 1 + w) 0.
norm_init = zeros if norm_offset else ones
layer_params = {"attn_norm": param("attn_norm", (L, D),
                                   "layers.attention_post_norm.weight"
                                   if post_norms else
                                   "layers.attention_norm.weight", norm_init,
                                   ["layers", "embed"]),
                "mlp_norm": param("mlp_norm", (L, D),
                                  "layers.ffn_post_norm.weight" if post_norms
                                  else "layers.ffn_norm.weight",
                                  norm_init, ["layers", "embed"]),
                "attn_post_norm": param("attn_post_norm", (L, D),
                                        "layers.attention_post_norm.weight",
                                        norm_init, ["layers", "embed"]),
                "mlp_post_norm": param("mlp_post_norm", (L, D),
                                       "layers.ffn_post_norm.weight",
                                       norm_init, ["layers", "embed"])}
for x in ("q", "k"):
    # Per head (whole under tp, as the head dimension), or OLMo 2's over
    # the whole projection (whole too: the norm reads every head).
    layer_params[x + "_norm"] = param(
        x + "_norm", (L,) + arg_shape(x + "_norm"),
        "layers.attention.%s_norm.weight" % x, norm_init,
        ["layers", "norm" if qk_norm_full else "head_dim"])
for w, b, meta, shape, axes, init, has_bias in PROJ:
    layer_params[w] = param(w, (L,) + shape, meta + ".weight", init,
                            ["layers"] + axes)
    if has_bias:
        layer_params[b] = param(b, (L, shape[1]), meta + ".bias", zeros,
                                ["layers", axes[1]])
params = ([param("embed", (V, D), "tok_embeddings.weight", normal,
                 ["vocab", "embed"])] +
          [layer_params[name] for name in block_args] +
          [param("norm", (D,), "norm.weight", norm_init, ["embed"])])
if not tied:
    params.append(param("w_out", (D, V), "output.weight", normal,
                        ["embed", "vocab"]))
stacked = ", ".join(ty(L, *arg_shape(name)) for name in block_args)
repeat_params = textwrap.fill(", ".join("%" + n for n in block_args) + ")",
                              width=78, initial_indent="      params(",
                              subsequent_indent="             ")
# Granite's logits over logits_scaling: the final norm's output divided
# before the head (the same product, without a tensor of the logits' size).
head_in = "hf"
if a.logits_scaling is not None:
    final_lines_after = scaled("hs", "hf", a.logits_scaling, "div")
    head_in = "hs"
else:
    final_lines_after = ""
if tied:
    head = (f"  // The LM head is the token embedding (tied): logits = hf · "
            f"embedᵀ.\n"
            f"  %logits = nn.matmul %{head_in}, %embed transpose_rhs : ({act}, "
            f"{ty(V, D)}) -> {ty(B, S, V)}")
else:
    head = (f"  %logits = nn.matmul %{head_in}, %w_out : ({act}, {ty(D, V)}) -> "
            f"{ty(B, S, V)}")
logits_ty = ty(B, S, V)
if a.final_softcap is not None:
    # Gemma 2's final_logit_softcapping: the head's logits z become
    # C · tanh(z / C), the scalar C broadcast (read where it lies).
    head = head.replace("%logits =", "%z =")
    head += (f"\n  // The logits soft-capped: C · tanh(z / C), C = "
             f"{a.final_softcap:g}.\n"
             f"  %cap = nn.constant dense<{num(a.final_softcap)}> : "
             f"tensor<{t}>\n"
             f"  %cap_b = nn.broadcast %cap dims = [] : tensor<{t}> -> "
             f"{logits_ty}\n"
             f"  %zc = nn.div %z, %cap_b : {logits_ty}\n"
             f"  %zt = nn.tanh %zc : {logits_ty}\n"
             f"  %logits = nn.mul %zt, %cap_b : {logits_ty}")
tokens = f"tensor<{B}x{S}xi32>"
# Gemma's normalizer sqrt(width), or Granite's embedding multiplier.
embed_multiplier = (math.sqrt(D) if a.embed_scale else
                    a.embedding_multiplier)
if embed_multiplier is not None:
    embed = (f"  %x0 = nn.embedding %embed, %tokens : ({ty(V, D)}, {tokens}) "
             f"-> {act}\n" + scaled("x", "x0", embed_multiplier))
else:
    embed = (f"  %x = nn.embedding %embed, %tokens : ({ty(V, D)}, {tokens}) "
             f"-> {act}\n")
final_lines, final_g = gain("norm", D)
loss_attrs = []
if a.ignore_index is not None:
    loss_attrs.append(f"ignore_index = {a.ignore_index} : i64")
if a.label_smoothing:
    loss_attrs.append(f"label_smoothing = {num(a.label_smoothing)} : f64")
ignore = " {%s}" % ", ".join(loss_attrs) if loss_attrs else ""
print(f"""func.func @loss(
    %tokens: {tokens} {{nn.input, nn.axes = ["batch", "seq"]}},
    %targets: {tokens} {{nn.label, nn.axes = ["batch", "seq"]}},
{("," + chr(10)).join(params)})
    -> tensor<{t}> {{
{embed}  %h = nn.repeat @block(%x)
{repeat_params}
      : ({act}, {stacked}) -> {act}
{ones_of(D)}{final_lines}  %hf = nn.rms_norm %h, %{final_g} {eps} : ({act}, {ty(D)}) -> {act}
{final_lines_after}{head}
  %l = nn.cross_entropy %logits, %targets{ignore} : ({ty(B, S, V)}, {tokens}) -> tensor<{t}>
  return %l : tensor<{t}>
}}""")
