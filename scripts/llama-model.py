#!/usr/bin/env python3
"""A Llama-style model in the nn dialect, at any size.

  scripts/llama-model.py > examples/llama.mlir          (the example itself)
  scripts/llama-model.py --layers 22 --dim 2048 --heads 32 --kv-heads 4 \\
      --ffn 5632 --vocab 32000 --seq 2048 --batch 1 > tinyllama.mlir
                                                          (TinyLlama 1.1B's shapes)
  scripts/llama-model.py --layers 32 --dim 4096 --heads 32 --kv-heads 8 \\
      --ffn 14336 --vocab 32000 --sliding-window 4096 --seq 8192 --batch 1 \\
      > mistral.mlir                                      (Mistral 7B v0.1's)
  scripts/llama-model.py --config config.json --seq 4096 --batch 1 > model.mlir
                                    (a Hugging Face Llama or Mistral's config)

RMSNorm before attention and MLP, grouped-query causal attention with rotary
position embeddings on queries and keys (--sliding-window N: over the last N
keys only, Mistral's sliding_window), a SwiGLU MLP, no biases, a final
RMSNorm and an untied LM head; the block is written once and repeated over
parameters stacked on a leading "layers" axis. Parameters take Meta's names
(scripts/llama-checkpoint.py converts Hugging Face checkpoints to them).
Output projections start at 0.02 / sqrt(2 L).

--config reads the sizes, rope and window from a Hugging Face config.json
(flags given as well win); batch and seq are not in it (seq is the training
context, not max_position_embeddings). A config this model cannot be (another
model_type, activation or rope scaling, biases, a head_dim of its own) is
refused, naming the field.
"""
import argparse
import json
import math
import sys

# The built-in model (examples/llama.mlir); a flag, else --config, sets each.
DEFAULTS = {"batch": 8, "seq": 64, "dim": 128, "heads": 4, "kv_heads": 2,
            "ffn": 384, "vocab": 256, "layers": 4, "theta": 10000.0,
            "rope_scaling": None, "eps": 1e-5, "sliding_window": None}
# config.json's size fields and the flags they set.
CONFIG_SIZES = [("num_hidden_layers", "layers"), ("hidden_size", "dim"),
                ("num_attention_heads", "heads"), ("intermediate_size", "ffn"),
                ("vocab_size", "vocab")]
# What transformers' LlamaConfig and MistralConfig take for a field that
# config.json leaves out (num_key_value_heads None: one per query head).
HF_DEFAULTS = {"llama": {"num_key_value_heads": None, "sliding_window": None,
                         "rms_norm_eps": 1e-6},
               "mistral": {"num_key_value_heads": 8, "sliding_window": 4096,
                           "rms_norm_eps": 1e-6}}
LLAMA3 = ["factor", "low_freq_factor", "high_freq_factor",
          "original_max_position_embeddings"]

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
for name in ["batch", "seq", "dim", "heads", "kv-heads", "ffn", "vocab",
             "layers"]:
    p.add_argument("--" + name, type=int)
p.add_argument("--theta", type=float)
p.add_argument("--rope-scaling", metavar="FACTOR,LOW,HIGH,ORIGINAL",
               help="Llama 3.1's rope frequency scaling (config.json's "
                    "rope_scaling: factor, low_freq_factor, high_freq_factor, "
                    "original_max_position_embeddings), e.g. 32,1,4,8192")
p.add_argument("--eps", type=float)
p.add_argument("--sliding-window", type=int, metavar="N",
               help="causal attention over the last N keys, the query's own "
                    "included (config.json's sliding_window)")
p.add_argument("--config", metavar="CONFIG.JSON",
               help="a Hugging Face LlamaForCausalLM or MistralForCausalLM "
                    "config.json to take the model from (flags override it)")
p.add_argument("--dtype", choices=["f32", "f64"], default="f32")


def is_number(v, kind=(int, float)):
    return isinstance(v, kind) and not isinstance(v, bool)


def from_config(path):
    """The flags' values a config.json gives; p.error where it asks for a
    model this script cannot write."""
    def bad(field, why):
        p.error("%s: %s %s" % (path, field, why))

    try:
        with open(path, encoding="utf-8") as f:
            c = json.load(f)
    except OSError as e:
        p.error("%s: %s" % (path, e.strerror))
    except ValueError:
        p.error("%s: not JSON" % path)
    if not isinstance(c, dict):
        p.error("%s: not a JSON object" % path)
    model = c.get("model_type")
    if model not in HF_DEFAULTS:
        bad("model_type", "%s: only llama and mistral" % json.dumps(model))
    if c.get("hidden_act", "silu") != "silu":
        bad("hidden_act", "%s: the MLP is SwiGLU (silu)" %
            json.dumps(c["hidden_act"]))
    for field in ["attention_bias", "mlp_bias"]:
        if c.get(field):
            bad(field, "true: the model has no biases")
    out = {}
    # transformers 5 writes rope_theta and rope_scaling as one
    # rope_parameters; reading only rope_theta would miss its theta.
    field = "rope_parameters" if "rope_parameters" in c else "rope_scaling"
    rope = c.get(field) or {}
    if not isinstance(rope, dict):
        bad(field, "is not an object")
    theta = rope.get("rope_theta", c.get("rope_theta"))
    if theta is not None:
        if not is_number(theta):
            bad("rope_theta", "is not a number")
        out["theta"] = float(theta)
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    if rope_type == "llama3":
        if not all(is_number(rope.get(k)) for k in LLAMA3):
            bad(field, "of type llama3 needs numbers " + ", ".join(LLAMA3))
        out["rope_scaling"] = [float(rope[k]) for k in LLAMA3]
    elif rope_type != "default":
        bad(field, "of type %s: only llama3's scaling" % json.dumps(rope_type))
    for field, flag in CONFIG_SIZES:
        if not is_number(c.get(field), int):
            bad(field, "missing or not an integer")
        out[flag] = c[field]
    head_dim = c.get("head_dim")
    if head_dim is not None and head_dim * out["heads"] != out["dim"]:
        bad("head_dim", "%s is not hidden_size / num_attention_heads" %
            json.dumps(head_dim))
    # A field left out takes transformers' default; null num_key_value_heads
    # is one per query head, null sliding_window no window.
    for field, flag, kind in [("num_key_value_heads", "kv_heads", int),
                              ("sliding_window", "sliding_window", int),
                              ("rms_norm_eps", "eps", (int, float))]:
        value = c.get(field, HF_DEFAULTS[model][field])
        if value is not None and not is_number(value, kind):
            bad(field, "is not a number")
        if value is not None:
            out[flag] = value
    out.setdefault("kv_heads", out["heads"])
    return out


a = p.parse_args()
if a.rope_scaling is not None:
    try:
        a.rope_scaling = [float(v) for v in a.rope_scaling.split(",")]
    except ValueError:
        a.rope_scaling = []
    if len(a.rope_scaling) != 4:
        p.error("--rope-scaling takes four numbers: factor,low,high,original")
config = from_config(a.config) if a.config else {}
for name, default in DEFAULTS.items():
    if getattr(a, name) is None:
        setattr(a, name, config.get(name, default))
for name in ["batch", "seq", "dim", "heads", "kv_heads", "ffn", "vocab",
             "layers"]:
    if getattr(a, name) < 1:
        p.error("--%s must be positive" % name.replace("_", "-"))
if a.dim % a.heads or a.heads % a.kv_heads or (a.dim // a.heads) % 2:
    p.error("--dim must split into --heads even head dimensions, and "
            "--kv-heads divide --heads")
if a.sliding_window is not None and a.sliding_window < 1:
    p.error("--sliding-window must be positive")

B, S, D, H, K, F, V, L = (a.batch, a.seq, a.dim, a.heads, a.kv_heads, a.ffn,
                          a.vocab, a.layers)
hd = D // H
kvd = K * hd
t = a.dtype


def ty(*shape):
    return "tensor<" + "x".join(str(s) for s in shape) + "x" + t + ">"


def num(x):
    """An MLIR float literal (which needs its point: 1.0e-05)."""
    s = repr(float(x))
    mantissa = s.split("e")[0]
    return s.replace("e", ".0e", 1) if "e" in s and "." not in mantissa else s


act, act_kv, act_f = ty(B, S, D), ty(B, S, kvd), ty(B, S, F)
q4, kv4 = ty(B, S, H, hd), ty(B, S, K, hd)
eps = "{epsilon = %s : f64}" % num(a.eps)
rope_attrs = [] if a.theta == 10000.0 else ["theta = %s : f64" % num(a.theta)]
if a.rope_scaling:
    rope_attrs.append("scaling = array<f64: %s>" %
                      ", ".join(num(v) for v in a.rope_scaling))
rope_attr = " {%s}" % ", ".join(rope_attrs) if rope_attrs else ""
out_std = repr(0.02 / math.sqrt(2 * L))
layers_word = "layer" if L == 1 else "layers"
mask, window_note = "causal", ""
if a.sliding_window is not None:
    mask += " window %d" % a.sliding_window
    window_note = ("// Attention is causal within a sliding window of %d keys "
                   "(Mistral's\n// sliding_window): query i sees keys "
                   "i - %d < j <= i.\n" % (a.sliding_window, a.sliding_window))

print(f"""// A Llama-style language model: token embedding, L pre-norm decoder blocks
// (RMSNorm; grouped-query causal self-attention with rotary position
// embeddings on queries and keys; a SwiGLU MLP; no biases), a final
// RMSNorm and an LM head of its own (not tied), trained with next-token
// cross-entropy. Positions enter through nn.rope alone: no position table.
// Generated by scripts/llama-model.py (the sizes are its flags).
//
// The block is written once (@block) and applied L = {L} times by nn.repeat
// over parameters stacked on a leading "layers" axis. Sizes: vocabulary
// {V}, context {S}, width {D}, {H} query heads of {hd} sharing {K}
// key/value heads (GQA), SwiGLU hidden {F}, batch {B}, rope theta {a.theta:g}.
{window_note}// Output projections start at 0.02 / sqrt(2 L), as the residual branches
// of GPT-2 and Llama's reference initialisation scale them.

func.func private @block(
    %h: {act},
    %attn_norm: {ty(D)},
    %w_q: {ty(D, D)}, %w_k: {ty(D, kvd)},
    %w_v: {ty(D, kvd)}, %w_o: {ty(D, D)},
    %mlp_norm: {ty(D)},
    %w_gate: {ty(D, F)}, %w_up: {ty(D, F)},
    %w_down: {ty(F, D)})
    -> {act} {{
  // Attention branch: h + W_o · attention(rope(q), rope(k), v), {H} query
  // heads of {hd} over {K} key/value heads.
  %x = nn.rms_norm %h, %attn_norm {eps} : ({act}, {ty(D)}) -> {act}
  %q0 = nn.matmul %x, %w_q : ({act}, {ty(D, D)}) -> {act}
  %q1 = nn.reshape %q0 : {act} -> {q4}
  %q = nn.rope %q1{rope_attr} : {q4}
  %k0 = nn.matmul %x, %w_k : ({act}, {ty(D, kvd)}) -> {act_kv}
  %k1 = nn.reshape %k0 : {act_kv} -> {kv4}
  %k = nn.rope %k1{rope_attr} : {kv4}
  %v0 = nn.matmul %x, %w_v : ({act}, {ty(D, kvd)}) -> {act_kv}
  %v = nn.reshape %v0 : {act_kv} -> {kv4}
  %att = nn.attention %q, %k, %v {mask} : ({q4}, {kv4}, {kv4}) -> {q4}
  %att2 = nn.reshape %att : {q4} -> {act}
  %o = nn.matmul %att2, %w_o : ({act}, {ty(D, D)}) -> {act}
  %h1 = nn.add %h, %o : {act}

  // SwiGLU branch: h1 + W_down · (silu(W_gate · y) ⊙ W_up · y).
  %y = nn.rms_norm %h1, %mlp_norm {eps} : ({act}, {ty(D)}) -> {act}
  %g0 = nn.matmul %y, %w_gate : ({act}, {ty(D, F)}) -> {act_f}
  %g = nn.silu %g0 : {act_f}
  %u = nn.matmul %y, %w_up : ({act}, {ty(D, F)}) -> {act_f}
  %gu = nn.mul %g, %u : {act_f}
  %d = nn.matmul %gu, %w_down : ({act_f}, {ty(F, D)}) -> {act}
  %h2 = nn.add %h1, %d : {act}
  return %h2 : {act}
}}
""")


def param(var, shape, name, init, axes):
    return (f"    %{var}: {ty(*shape)} {{nn.param = \"{name}\",\n"
            f"        nn.init = {init},\n"
            f"        nn.axes = [{', '.join(chr(34) + x + chr(34) for x in axes)}]}}")


normal = "#nn.init<normal, 0.02>"
out_init = "#nn.init<normal, %s>" % out_std
ones = "#nn.init<ones>"
params = [
    param("embed", (V, D), "tok_embeddings.weight", normal, ["vocab", "embed"]),
    param("attn_norm", (L, D), "layers.attention_norm.weight", ones,
          ["layers", "embed"]),
    param("w_q", (L, D, D), "layers.attention.wq.weight", normal,
          ["layers", "embed", "heads"]),
    param("w_k", (L, D, kvd), "layers.attention.wk.weight", normal,
          ["layers", "embed", "heads"]),
    param("w_v", (L, D, kvd), "layers.attention.wv.weight", normal,
          ["layers", "embed", "heads"]),
    param("w_o", (L, D, D), "layers.attention.wo.weight", out_init,
          ["layers", "heads", "embed"]),
    param("mlp_norm", (L, D), "layers.ffn_norm.weight", ones,
          ["layers", "embed"]),
    param("w_gate", (L, D, F), "layers.feed_forward.w1.weight", normal,
          ["layers", "embed", "mlp"]),
    param("w_up", (L, D, F), "layers.feed_forward.w3.weight", normal,
          ["layers", "embed", "mlp"]),
    param("w_down", (L, F, D), "layers.feed_forward.w2.weight", out_init,
          ["layers", "mlp", "embed"]),
    param("norm", (D,), "norm.weight", ones, ["embed"]),
    param("w_out", (D, V), "output.weight", normal, ["embed", "vocab"]),
]
stacked = ", ".join(ty(*s) for s in [(L, D), (L, D, D), (L, D, kvd),
                                     (L, D, kvd), (L, D, D), (L, D),
                                     (L, D, F), (L, D, F), (L, F, D)])
tokens = f"tensor<{B}x{S}xi32>"
print(f"""func.func @loss(
    %tokens: {tokens} {{nn.input, nn.axes = ["batch", "seq"]}},
    %targets: {tokens} {{nn.label, nn.axes = ["batch", "seq"]}},
{("," + chr(10)).join(params)})
    -> tensor<{t}> {{
  %x = nn.embedding %embed, %tokens : ({ty(V, D)}, {tokens}) -> {act}
  %h = nn.repeat @block(%x)
      params(%attn_norm, %w_q, %w_k, %w_v, %w_o, %mlp_norm, %w_gate, %w_up,
             %w_down)
      : ({act}, {stacked}) -> {act}
  %hf = nn.rms_norm %h, %norm {eps} : ({act}, {ty(D)}) -> {act}
  %logits = nn.matmul %hf, %w_out : ({act}, {ty(D, V)}) -> {ty(B, S, V)}
  %l = nn.cross_entropy %logits, %targets : ({ty(B, S, V)}, {tokens}) -> tensor<{t}>
  return %l : tensor<{t}>
}}""")
