#!/usr/bin/env python3
"""Converts Llama checkpoints between Hugging Face's layout and Tessel's.

  scripts/llama-checkpoint.py to-tessel model.safetensors [more shards...] \\
      -o llama.safetensors [--tie | --untie] [--config config.json]
  scripts/llama-checkpoint.py to-hf llama.safetensors -o model.safetensors \\
      [--fuse | --config config.json]

Hugging Face's LlamaForCausalLM (and Mistral's, Qwen2's, Qwen3's) keeps one tensor
per layer, each linear weight [out, in] (y = x W^T + b):
model.layers.N.self_attn.q_proj.weight, ... The model scripts/llama-model.py
writes (examples/llama.mlir) stacks the layers on a leading axis and
multiplies by [in, out] weights, under Meta's names:
layers.attention.wq.weight [L, dim, dim], ... to-tessel stacks and
transposes; to-hf undoes it. Biases, where the file has them (Qwen2's q, k
and v; Llama's attention_bias adds o, its mlp_bias gate, up and down), are
stacked as they are: model.layers.N.self_attn.q_proj.bias [out] <->
layers.attention.wq.bias [L, out] (llama-model.py's --qkv-bias,
--attention-bias, --mlp-bias). So are Qwen3's QK-norm weights, where the
file has them: model.layers.N.self_attn.q_norm.weight [head_dim] <->
layers.attention.q_norm.weight [L, head_dim] (k_norm likewise;
llama-model.py's --qk-norm).

A tied model (tie_word_embeddings: Llama 3.2 1B and 3B, Qwen2.5 up to 3B)
stores no lm_head.weight, and llama-model.py --tie-embeddings has no
output.weight: lm_head.weight <-> output.weight where there is one, and
nothing where there is not, so either round trip is the file it came from.
tessel-run --load refuses a checkpoint with a parameter more or less than
the model, so a head that does not match the model's tying is told at load.
--tie leaves out an lm_head.weight that is the embedding byte for byte (a
tied model saved with both), --untie writes the embedding as output.weight
where the file has no head (to train an untied head from a tied model).

Phi-3 (Phi3ForCausalLM) fuses each layer's projections:
model.layers.N.self_attn.qkv_proj.weight [(H + 2 Hkv) hd, dim] is q_proj's
H hd rows, then k_proj's Hkv hd, then v_proj's Hkv hd (Phi3Attention), and
model.layers.N.mlp.gate_up_proj.weight [2 F, dim] gate_proj's F rows, then
up_proj's (Phi3MLP's chunk(2)). to-tessel splits them into wq, wk, wv and
w1, w3; splitting qkv_proj needs H, Hkv and hd, which --config config.json
gives (num_attention_heads, num_key_value_heads, head_dim or hidden_size /
num_attention_heads), refused without it. to-hf --fuse (or a --config whose
model_type is phi3) writes the fused tensors back, so that a Phi-3 file
round-trips; without it, Llama's separate ones.

OLMo 2 (Olmo2ForCausalLM) normalises each layer's attention and MLP
outputs instead of their inputs: its file has post_attention_layernorm and
post_feedforward_layernorm and no input_layernorm, which become
layers.attention_post_norm.weight and layers.ffn_post_norm.weight
(llama-model.py's --post-norms) and back; its q_norm and k_norm are over
the whole projections, [H hd] and [Hkv hd] (--qk-norm-full). Gemma 2 and 3
have four norms a layer (--sandwich-norms): their input_layernorm,
post_attention_layernorm, pre_feedforward_layernorm and
post_feedforward_layernorm become layers.attention_norm,
attention_post_norm, ffn_norm and ffn_post_norm. A multimodal Gemma 3's
file (Gemma3ForConditionalGeneration, 4B on) converts its text model: the
tensors under language_model. (or model.language_model.) take the text
model's names, the vision tower and projector are left out; to-hf writes
the text model (Gemma3ForCausalLM's names).

The rotary embedding needs no permutation: nn.rope's default pairs are
Hugging Face's rotate_half halves. A config.json's rope_theta and
rope_scaling (Llama 3.1 on: rope_type "llama3") go to
scripts/llama-model.py's --theta and --rope-scaling. Element bytes are
moved, never converted: the dtype stays (tessel-run --load converts on
load). Only the standard library: no torch, no numpy.
"""
import argparse
import json
import os
import struct
import sys

# config.json's reader, shared with llama-model.py.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_config  # noqa: E402

SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4}

# (Tessel name, Hugging Face name with {} for the layer, transposed)
LAYER = [
    ("layers.attention_norm.weight", "model.layers.{}.input_layernorm.weight", False),
    ("layers.attention.wq.weight", "model.layers.{}.self_attn.q_proj.weight", True),
    ("layers.attention.wk.weight", "model.layers.{}.self_attn.k_proj.weight", True),
    ("layers.attention.wv.weight", "model.layers.{}.self_attn.v_proj.weight", True),
    ("layers.attention.wo.weight", "model.layers.{}.self_attn.o_proj.weight", True),
    ("layers.ffn_norm.weight", "model.layers.{}.post_attention_layernorm.weight", False),
    ("layers.feed_forward.w1.weight", "model.layers.{}.mlp.gate_proj.weight", True),
    ("layers.feed_forward.w3.weight", "model.layers.{}.mlp.up_proj.weight", True),
    ("layers.feed_forward.w2.weight", "model.layers.{}.mlp.down_proj.weight", True),
]
# The biases (and QK-norm weights) a model may have, each in every layer or
# none.
BIAS = [
    ("layers.attention.wq.bias", "model.layers.{}.self_attn.q_proj.bias", False),
    ("layers.attention.wk.bias", "model.layers.{}.self_attn.k_proj.bias", False),
    ("layers.attention.wv.bias", "model.layers.{}.self_attn.v_proj.bias", False),
    ("layers.attention.wo.bias", "model.layers.{}.self_attn.o_proj.bias", False),
    ("layers.feed_forward.w1.bias", "model.layers.{}.mlp.gate_proj.bias", False),
    ("layers.feed_forward.w3.bias", "model.layers.{}.mlp.up_proj.bias", False),
    ("layers.feed_forward.w2.bias", "model.layers.{}.mlp.down_proj.bias", False),
    # Qwen3's QK-norm: an RMSNorm weight over each query and key head.
    ("layers.attention.q_norm.weight", "model.layers.{}.self_attn.q_norm.weight", False),
    ("layers.attention.k_norm.weight", "model.layers.{}.self_attn.k_norm.weight", False),
]
# OLMo 2's norms, after the attention and the MLP instead of before (its
# file has post_feedforward_layernorm and no input_layernorm; its
# post_attention_layernorm is then the attention's output norm, not
# Llama's norm before the MLP).
POST_NORMS = [
    ("layers.attention_post_norm.weight",
     "model.layers.{}.post_attention_layernorm.weight", False),
    ("layers.ffn_post_norm.weight",
     "model.layers.{}.post_feedforward_layernorm.weight", False),
]
# Gemma 2's and 3's four norms a layer (its file has
# pre_feedforward_layernorm; post_attention_layernorm is then the
# attention's output norm).
SANDWICH_NORMS = [
    ("layers.attention_norm.weight", "model.layers.{}.input_layernorm.weight", False),
    ("layers.attention_post_norm.weight",
     "model.layers.{}.post_attention_layernorm.weight", False),
    ("layers.ffn_norm.weight",
     "model.layers.{}.pre_feedforward_layernorm.weight", False),
    ("layers.ffn_post_norm.weight",
     "model.layers.{}.post_feedforward_layernorm.weight", False),
]
GLOBAL = [
    ("tok_embeddings.weight", "model.embed_tokens.weight", False),
    ("norm.weight", "model.norm.weight", False),
]
# The untied head, absent from a tied model on both sides.
HEAD = ("output.weight", "lm_head.weight", True)


class Tensor:
    def __init__(self, dtype, shape, data):
        self.dtype, self.shape, self.data = dtype, list(shape), data


def fail(message):
    sys.exit("llama-checkpoint: " + message)


def read(path):
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        fail("%s: not a safetensors file" % path)
    (n,) = struct.unpack("<Q", blob[:8])
    if n > len(blob) - 8:
        fail("%s: header of %d bytes past the end of the file" % (path, n))
    header = json.loads(blob[8:8 + n])
    data = memoryview(blob)[8 + n:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype, shape = info["dtype"], info["shape"]
        begin, end = info["data_offsets"]
        count = 1
        for s in shape:
            count *= s
        if dtype not in SIZES:
            fail("%s: tensor %s has dtype %s" % (path, name, dtype))
        if not 0 <= begin <= end <= len(data) or end - begin != count * SIZES[dtype]:
            fail("%s: tensor %s's bytes do not fit its shape" % (path, name))
        tensors[name] = Tensor(dtype, shape, bytes(data[begin:end]))
    return tensors


def write(path, tensors):
    header, offset = {}, 0
    for name, t in tensors.items():
        header[name] = {"dtype": t.dtype, "shape": t.shape,
                        "data_offsets": [offset, offset + len(t.data)]}
        offset += len(t.data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for t in tensors.values():
            f.write(t.data)


def transposed(t):
    """The [rows, cols] matrix t as [cols, rows], its element bytes moved."""
    if len(t.shape) != 2:
        fail("a linear weight must be a matrix, got shape %s" % t.shape)
    rows, cols = t.shape
    size = SIZES[t.dtype]
    out = bytearray(len(t.data))
    row_bytes = cols * size
    for r in range(rows):
        row = t.data[r * row_bytes:(r + 1) * row_bytes]
        for lane in range(size):
            out[r * size + lane::rows * size] = row[lane::size]
    return Tensor(t.dtype, [cols, rows], bytes(out))


def rows(t, begin, end):
    """Rows [begin, end) of the matrix t."""
    row_bytes = t.shape[1] * SIZES[t.dtype]
    return Tensor(t.dtype, [end - begin, t.shape[1]],
                  t.data[begin * row_bytes:end * row_bytes])


def stacked_rows(parts):
    """The matrices parts one above another (each [rows, cols])."""
    first = parts[0]
    for t in parts:
        if len(t.shape) != 2 or t.dtype != first.dtype or \
                t.shape[1] != first.shape[1]:
            fail("cannot fuse matrices of shapes %s"
                 % ", ".join(str(p.shape) for p in parts))
    return Tensor(first.dtype, [sum(t.shape[0] for t in parts),
                                first.shape[1]],
                  b"".join(t.data for t in parts))


def read_config(path):
    """config.json as a dict, failing in one line."""
    return hf_config.read_config(path, fail)


def head_sizes(config, path):
    """(H, Hkv, hd) from config.json, as Phi3Attention takes them."""
    def integer(field, value):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            fail("%s: %s is not a positive integer" % (path, field))
        return value
    heads = integer("num_attention_heads", config.get("num_attention_heads"))
    kv = config.get("num_key_value_heads")
    kv = heads if kv is None else integer("num_key_value_heads", kv)
    hd = config.get("head_dim")
    if hd is None:
        dim = integer("hidden_size", config.get("hidden_size"))
        if dim % heads:
            fail("%s: hidden_size %d is not num_attention_heads %d heads"
                 % (path, dim, heads))
        hd = dim // heads
    return heads, kv, integer("head_dim", hd)


def split_fused(hf, config, config_path):
    """Phi-3's qkv_proj and gate_up_proj in hf replaced by Llama's
    separate q_proj, k_proj, v_proj and gate_proj, up_proj."""
    qkv = "model.layers.{}.self_attn.qkv_proj.weight"
    gate_up = "model.layers.{}.mlp.gate_up_proj.weight"
    sizes = None
    for layer in range(count_layers(hf)):
        name = qkv.format(layer)
        if name in hf:
            if config is None:
                fail("%s is q, k and v fused (Phi-3's): --config config.json "
                     "needed to split it" % name)
            if sizes is None:
                sizes = head_sizes(config, config_path)
            heads, kv, hd = sizes
            t = hf.pop(name)
            if len(t.shape) != 2 or t.shape[0] != (heads + 2 * kv) * hd:
                fail("%s has shape %s, not [%d, dim] ((%d + 2 * %d) heads of "
                     "%d, from %s)" % (name, t.shape, (heads + 2 * kv) * hd,
                                       heads, kv, hd, config_path))
            q, k = heads * hd, heads * hd + kv * hd
            for proj, (begin, end) in [("q", (0, q)), ("k", (q, k)),
                                       ("v", (k, t.shape[0]))]:
                separate = "model.layers.%d.self_attn.%s_proj.weight" % (
                    layer, proj)
                if separate in hf:
                    fail("both %s and %s" % (name, separate))
                hf[separate] = rows(t, begin, end)
        name = gate_up.format(layer)
        if name in hf:
            t = hf.pop(name)
            if len(t.shape) != 2 or t.shape[0] % 2:
                fail("%s has shape %s, not [2 * ffn, dim]" % (name, t.shape))
            half = t.shape[0] // 2
            for proj, (begin, end) in [("gate", (0, half)),
                                       ("up", (half, 2 * half))]:
                separate = "model.layers.%d.mlp.%s_proj.weight" % (layer, proj)
                if separate in hf:
                    fail("both %s and %s" % (name, separate))
                hf[separate] = rows(t, begin, end)


def count_layers(hf):
    """The layers of a Hugging Face file: those with an output projection
    (every family has o_proj, Phi-3 a fused qkv_proj)."""
    layers = 0
    while "model.layers.%d.self_attn.o_proj.weight" % layers in hf:
        layers += 1
    return layers


def layer_names(norms):
    """The per-layer tensors: Llama's ("pre"), or with OLMo 2's norms after
    the attention and the MLP ("post") or Gemma 2's and 3's before and after
    ("sandwich") in place of its two before."""
    if norms == "pre":
        return LAYER
    return [t for t in LAYER if not t[0].endswith("_norm.weight")] + (
        POST_NORMS if norms == "post" else SANDWICH_NORMS)


# Gemma3ForConditionalGeneration's file (Gemma 3 4B on): its text model's
# tensors under these prefixes (older and newer transformers), beside a
# vision tower and a projector that a text model leaves out.
TEXT_PREFIXES = [("language_model.model.", "model."),
                 ("model.language_model.", "model."),
                 ("language_model.lm_head.", "lm_head.")]
VISION_PREFIXES = ("vision_tower.", "multi_modal_projector.",
                   "model.vision_tower.", "model.multi_modal_projector.")


def text_model(hf):
    """`hf` with a multimodal Gemma 3's text tensors under the text model's
    names and its vision tensors left out."""
    if not any(n.startswith(p) for n in hf for p, _ in TEXT_PREFIXES):
        return hf
    out = {}
    for name, tensor in hf.items():
        if name.startswith(VISION_PREFIXES):
            continue
        for prefix, ours in TEXT_PREFIXES:
            if name.startswith(prefix):
                name = ours + name[len(prefix):]
                break
        out[name] = tensor
    return out


def to_tessel(shards, tie=False, untie=False, config=None, config_path=None):
    hf = {}
    for path in shards:
        hf.update(read(path))
    hf = text_model(hf)
    layers = count_layers(hf)
    if layers == 0:
        fail("no model.layers.0.self_attn.o_proj.weight: not a Llama-family "
             "checkpoint")
    split_fused(hf, config, config_path)
    norms = ("sandwich"
             if "model.layers.0.pre_feedforward_layernorm.weight" in hf else
             "post"
             if ("model.layers.0.post_feedforward_layernorm.weight" in hf and
                 "model.layers.0.input_layernorm.weight" not in hf) else "pre")
    out, used = {}, set()
    for ours, theirs, transpose in GLOBAL:
        if theirs not in hf:
            fail("missing %s" % theirs)
        used.add(theirs)
        out[ours] = transposed(hf[theirs]) if transpose else hf[theirs]
    ours, theirs, _ = HEAD
    embed = hf["model.embed_tokens.weight"]
    head = hf.get(theirs)
    if head is not None and tie:
        if (head.dtype, head.shape, head.data) != (embed.dtype, embed.shape,
                                                   embed.data):
            fail("--tie: %s is not model.embed_tokens.weight" % theirs)
        used.add(theirs)
        head = None
    elif head is None and untie:
        head = embed
    if head is not None:
        used.add(theirs)
        out[ours] = transposed(head)
    for ours, theirs, transpose in layer_names(norms) + BIAS:
        if (ours, theirs, transpose) in BIAS and theirs.format(0) not in hf:
            continue  # the model has no such bias
        parts = []
        for layer in range(layers):
            name = theirs.format(layer)
            if name not in hf:
                fail("missing %s" % name)
            used.add(name)
            parts.append(transposed(hf[name]) if transpose else hf[name])
        first = parts[0]
        for p in parts:
            if p.shape != first.shape or p.dtype != first.dtype:
                fail("%s: layers differ in shape or dtype" % theirs)
        out[ours] = Tensor(first.dtype, [layers] + first.shape,
                           b"".join(p.data for p in parts))
    rest = [n for n in hf
            if n not in used and not n.endswith("rotary_emb.inv_freq")]
    if rest:
        fail("tensors this model has no place for: " + ", ".join(sorted(rest)[:5]))
    return out


# Phi-3's fused tensors: (the fused name, the separate ones in its order).
FUSED = [("model.layers.{}.self_attn.qkv_proj.weight",
          ["model.layers.{}.self_attn.q_proj.weight",
           "model.layers.{}.self_attn.k_proj.weight",
           "model.layers.{}.self_attn.v_proj.weight"]),
         ("model.layers.{}.mlp.gate_up_proj.weight",
          ["model.layers.{}.mlp.gate_proj.weight",
           "model.layers.{}.mlp.up_proj.weight"])]


def to_hf(path, fuse=False):
    ours = read(path)
    out = {}
    layers = None
    if fuse:
        for name in ["layers.attention.w%s.bias" % p for p in "qkv"] + [
                "layers.feed_forward.w1.bias", "layers.feed_forward.w3.bias"]:
            if name in ours:
                fail("--fuse: %s, but Phi-3's fused projections have no "
                     "biases" % name)
    norms = ("pre" if POST_NORMS[0][0] not in ours else
             "sandwich" if LAYER[0][0] in ours else "post")
    for name, theirs, transpose in layer_names(norms) + BIAS:
        if name not in ours:
            if (name, theirs, transpose) in BIAS:
                continue  # the model has no such bias
            fail("missing %s" % name)
        t = ours[name]
        layers = t.shape[0] if layers is None else layers
        if t.shape[0] != layers:
            fail("%s has %d layers, not %d" % (name, t.shape[0], layers))
        inner = t.shape[1:]
        step = len(t.data) // layers
        for layer in range(layers):
            part = Tensor(t.dtype, inner, t.data[layer * step:(layer + 1) * step])
            out[theirs.format(layer)] = transposed(part) if transpose else part
    if fuse:
        # Each layer's tensors in Llama's order, the fused ones in place of
        # their first part.
        fused = {}
        for layer in range(layers):
            for name, parts in FUSED:
                parts = [p.format(layer) for p in parts]
                fused[parts[0]] = (name.format(layer), stacked_rows(
                    [out[p] for p in parts]))
                for p in parts[1:]:
                    fused[p] = None
        out = dict(fused[n] if n in fused else (n, t)
                   for n, t in out.items() if fused.get(n, 0) is not None)
    for name, theirs, transpose in GLOBAL + [HEAD]:
        if name not in ours:
            if name == HEAD[0]:
                continue  # tied: Hugging Face stores no lm_head.weight
            fail("missing %s" % name)
        out[theirs] = transposed(ours[name]) if transpose else ours[name]
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("direction", choices=["to-tessel", "to-hf"])
    p.add_argument("inputs", nargs="+", help="safetensors file(s)")
    p.add_argument("-o", "--output", required=True)
    head = p.add_mutually_exclusive_group()
    head.add_argument("--tie", action="store_true",
                      help="to-tessel: leave out an lm_head.weight that is "
                           "the embedding (for llama-model.py "
                           "--tie-embeddings)")
    head.add_argument("--untie", action="store_true",
                      help="to-tessel: where there is no lm_head.weight, "
                           "write the embedding as output.weight (for an "
                           "untied model)")
    p.add_argument("--config", metavar="CONFIG.JSON",
                   help="the model's config.json: to-tessel takes the heads "
                        "from it to split a fused qkv_proj (Phi-3's); to-hf "
                        "fuses as --fuse where its model_type is phi3")
    p.add_argument("--fuse", action="store_true",
                   help="to-hf: write Phi-3's fused qkv_proj and gate_up_proj "
                        "in place of q, k, v and gate, up")
    a = p.parse_args()
    if a.output in a.inputs:
        fail("the output %s is an input" % a.output)
    if a.direction == "to-hf" and (a.tie or a.untie):
        fail("--tie and --untie are to-tessel's")
    if a.direction == "to-tessel" and a.fuse:
        fail("--fuse is to-hf's (to-tessel splits fused tensors itself)")
    config = read_config(a.config) if a.config else None
    if a.direction == "to-tessel":
        out = to_tessel(a.inputs, a.tie, a.untie, config, a.config)
    else:
        if len(a.inputs) != 1:
            fail("to-hf reads one Tessel checkpoint")
        out = to_hf(a.inputs[0], a.fuse or (
            config is not None and config.get("model_type") == "phi3"))
    write(a.output, out)


if __name__ == "__main__":
    main()
