#!/usr/bin/env python3
"""Hugging Face's LlamaForCausalLM forward, written out in plain Python.

  llama_reference.py make DIR --layers L --dim D --heads H --kv-heads K \\
      --ffn F --vocab V --seq S --batch B --theta T --eps E \\
      [--rope-scaling FACTOR,LOW,HIGH,ORIGINAL] [--sliding-window N] \\
      [--qkv-bias | --attention-bias] [--mlp-bias] [--tie-embeddings] \\
      [--head-dim N] [--qk-norm] [--phi3] [--gemma]
      [--gemma2 SCALAR | --gemma3 SCALAR [--multimodal]]
      [--attn-softcap C] [--final-softcap C]
      [--rope-longrope ORIGINAL,MAX] [--partial-rotary F]
      [--granite EMB,RES,ATT,LOGITS] [--olmo2] [--ignore-prompts]
      writes DIR/hf.safetensors (random weights in Hugging Face's layout,
      f64), DIR/tokens.bin (B·S + 1 i32 tokens: tessel-run's windows),
      DIR/reference.json (the mean next-token cross-entropy of that batch)
      and DIR/config.json (the model, as Hugging Face describes it: a
      MistralForCausalLM where there is a window, a Qwen2ForCausalLM with
      --qkv-bias, a Qwen3ForCausalLM with --qk-norm, a Phi3ForCausalLM
      with --phi3, a GemmaForCausalLM with --gemma, a GraniteForCausalLM
      with --granite, an Olmo2ForCausalLM with --olmo2, a LlamaForCausalLM's
      attention_bias and mlp_bias,
      tie_word_embeddings, head_dim); with --ignore-prompts also
      DIR/labels.bin (a label per token, -100 over a random prompt at the
      start of each window: fine-tuning's), the loss then PyTorch's
      ignore_index=-100 mean over the other positions
  llama_reference.py compare DIR METRICS.jsonl
      checks tessel-run's first loss against it (relative 1e-12)
  llama_reference.py same A.safetensors B.safetensors
      checks that two files hold the same tensors, byte for byte

The forward follows transformers' modeling_llama.py, independently of
Tessel's code: RMSNorm x · rsqrt(mean(x²) + eps) · w; q, k, v = x Wᵀ per
head; rotate_half rope with cos/sin of cat(freqs, freqs); key/value head
h // (H / K) (repeat_kv); causal softmax(q kᵀ / sqrt(head_dim)) v, where
with a sliding window N query i sees keys j > i - N only (modeling_mistral's
sliding_window); o_proj; SwiGLU down(silu(gate(x)) · up(x)); final norm;
lm_head. Biases (random, so that they count) add after their projection:
Qwen2's on q, k and v (--qkv-bias), Llama's attention_bias on q, k, v and o,
its mlp_bias on gate, up and down. Tied (--tie-embeddings), the file holds
no lm_head.weight and the head is embed_tokens, as save_pretrained leaves a
tied model. --head-dim N gives heads of N apart from dim / heads (q_proj
[H·N, dim], k and v [K·N, dim], o_proj [dim, H·N]); --qk-norm is Qwen3's
(modeling_qwen3's Qwen3Attention): q_norm and k_norm, RMSNorms of [N] with
rms_norm_eps, over each query and key head after the projection and before
rope. --phi3 is Phi-3 (modeling_phi3): the same forward (its window
Mistral's), the file holding each layer's q, k, v fused as
self_attn.qkv_proj.weight [(H + 2 K)·hd, dim] (q's rows, then k's, then
v's) and gate, up as mlp.gate_up_proj.weight [2 F, dim] (gate's, then up's).
--gemma is Gemma (modeling_gemma): every RMSNorm scales by 1 + w (its weight
near 0), the MLP is GeGLU with hidden_activation's tanh GELU
(gelu_pytorch_tanh), the embeddings are multiplied by sqrt(hidden_size),
and the head is tied. --granite EMB,RES,ATT,LOGITS is Granite
(modeling_granite): the embeddings times EMB, each block's attention and MLP
outputs times RES before their residual adds, the scores times ATT in place
of 1 / sqrt(head_dim), the logits divided by LOGITS. --olmo2 is OLMo 2
(modeling_olmo2): no norm before the attention and the MLP, an RMSNorm over
each one's output before its residual add (post_attention_layernorm,
post_feedforward_layernorm), and q_norm / k_norm over the whole q and k
projections ([H hd], [Hkv hd]) before the heads are split. --gemma2
SCALAR is Gemma 2 (modeling_gemma2): Gemma's, with four norms a layer
(input_layernorm, post_attention_layernorm over the attention's output,
pre_feedforward_layernorm, post_feedforward_layernorm over the MLP's) and
the scores times SCALAR^-1/2; --gemma3 SCALAR Gemma 3 (modeling_gemma3):
Gemma 2's with QK-norm. --attn-softcap C caps each score s (after its
scale) to C tanh(s / C) before the mask and softmax, --final-softcap C each
logit likewise (Gemma2Attention's softcap, Gemma2ForCausalLM's
final_logit_softcapping). --rope-longrope ORIGINAL,MAX is LongRoPE
(_compute_longrope_parameters; Phi-3's 128k): original_max_position_embeddings
ORIGINAL and max_position_embeddings MAX, short and long factors of their
own (the long ones where the context passes ORIGINAL) dividing each pair's
frequency, cos and sin times sqrt(1 + ln(MAX / ORIGINAL) / ln ORIGINAL).
--partial-rotary F turns the first int(F · head_dim) elements of each head
only (partial_rotary_factor: Phi-4-mini's), the frequencies those of a head
that wide.
"""
import argparse
import json
import math
import os
import random
import struct
import sys


def linear(x, w, b=None):
    """x [n][in] times w [out][in] transposed, plus b [out] if any: [n][out]."""
    y = [[sum(a * b for a, b in zip(row, wr)) for wr in w] for row in x]
    return y if b is None else [[v + c for v, c in zip(row, b)] for row in y]


def rms_norm(x, w, eps, offset=0.0):
    """x · rsqrt(mean(x²) + eps) · (offset + w): Gemma's offset is 1."""
    out = []
    for row in x:
        r = 1.0 / math.sqrt(sum(v * v for v in row) / len(row) + eps)
        out.append([v * r * (offset + g) for v, g in zip(row, w)])
    return out


def inv_freq(d, theta, scaling):
    """transformers' default inv_freq, or _compute_llama3_parameters'."""
    freqs = [1.0 / theta ** (2.0 * i / d) for i in range(d // 2)]
    if not scaling:
        return freqs
    factor, low, high, original = scaling
    low_wavelen, high_wavelen = original / low, original / high
    out = []
    for f in freqs:
        wavelen = 2 * math.pi / f
        if wavelen < high_wavelen:
            out.append(f)
        elif wavelen > low_wavelen:
            out.append(f / factor)
        else:
            smooth = (original / wavelen - low) / (high - low)
            out.append((1 - smooth) * f / factor + smooth * f)
    return out


def sliding(a, layer):
    """Whether `layer` attends within the window: every layer with one,
    unless --layer-types says which (Qwen2's layer_types)."""
    if a.window is None:
        return False
    return not a.layer_types or a.layer_types[layer] == "sliding"


def rope_freqs(d, a, layer=0):
    """inv_freq of a's rope: default or llama3 (inv_freq), linear (each
    frequency over the factor), or dynamic NTK at a.seq positions
    (_compute_dynamic_ntk_parameters' base); a sliding layer's theta is
    --local-theta where given (Gemma 3's rope_local_base_freq)."""
    theta = a.theta
    if a.local_theta and sliding(a, layer):
        theta = a.local_theta
    if a.rope_dynamic:
        factor, original = a.rope_dynamic
        seq_len = max(a.seq, original)
        theta = theta * ((factor * seq_len / original) -
                         (factor - 1)) ** (d / (d - 2))
    freqs = inv_freq(d, theta, a.scaling)
    # Gemma 3 scales its global layers' rope only.
    if a.rope_linear and not (a.sandwich and sliding(a, layer)):
        freqs = [f / a.rope_linear for f in freqs]
    if a.rope_longrope:
        # _compute_longrope_parameters: the long factors past the original
        # context, else the short.
        short, long_ = longrope_factors(d)
        ext = long_ if a.seq > a.rope_longrope[0] else short
        freqs = [f / e for f, e in zip(freqs, ext)]
    if a.rope_yarn:
        # _compute_yarn_parameters: betas 32 and 1, the correction range
        # floored and ceiled, a linear ramp over the pairs between.
        factor, original = a.rope_yarn

        def correction_dim(rotations):
            return (d * math.log(original / (rotations * 2 * math.pi)) /
                    (2 * math.log(theta)))
        low = max(math.floor(correction_dim(32)), 0)
        high = min(math.ceil(correction_dim(1)), d - 1)
        if low == high:
            high += 0.001
        out = []
        for i, f in enumerate(freqs):
            ramp = min(max((i - low) / (high - low), 0.0), 1.0)
            extrapolation = 1 - ramp
            out.append(f / factor * (1 - extrapolation) + f * extrapolation)
        freqs = out
    return freqs


def longrope_factors(d):
    """The test's LongRoPE short and long factors for d / 2 pairs: near 1,
    and growing to tens, as Phi-3's do."""
    short = [1.0 + 0.05 * i for i in range(d // 2)]
    long_ = [1.0 + 0.9 * i ** 1.5 for i in range(d // 2)]
    return short, long_


def rotary_dim(a, hd):
    """transformers' int(head_dim · partial_rotary_factor)."""
    return int(hd * a.partial_rotary)


def rope_attention_factor(a):
    """The factor on cos and sin: YaRN's (get_mscale: 0.1 ln factor + 1),
    LongRoPE's (sqrt(1 + ln factor / ln original), factor = MAX /
    ORIGINAL), else 1."""
    if a.rope_yarn and a.rope_yarn[0] > 1:
        return 0.1 * math.log(a.rope_yarn[0]) + 1.0
    if a.rope_longrope:
        original, top = a.rope_longrope
        factor = top / original
        if factor > 1:
            return math.sqrt(1 + math.log(factor) / math.log(original))
    return 1.0


def rope(vec, pos, freqs):
    """q·cos + rotate_half(q)·sin over the first 2 len(freqs) elements; the
    rest pass (a partial rope's q_pass)."""
    half = len(freqs)
    out = list(vec)
    for i in range(half):
        angle = pos * freqs[i]
        c, s = math.cos(angle), math.sin(angle)
        # q·cos + rotate_half(q)·sin, rotate_half(q) = cat(-q2, q1)
        out[i] = vec[i] * c - vec[i + half] * s
        out[i + half] = vec[i + half] * c + vec[i] * s
    return out


def silu(v):
    return v / (1.0 + math.exp(-v))


def gelu_tanh(v):
    """PyTorch's gelu(approximate="tanh"), Gemma's gelu_pytorch_tanh."""
    return 0.5 * v * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) *
                                      (v + 0.044715 * v ** 3)))


IGNORED = -100  # PyTorch's and Hugging Face's ignore_index


def forward_loss(w, tokens, targets, a):
    hd = a.head_dim or a.dim // a.heads
    group = a.heads // a.kv_heads
    rot = rotary_dim(a, hd)
    total, count = 0.0, 0
    # Gemma: norms scale by 1 + w, GeGLU, embeddings times sqrt(width).
    offset = 1.0 if a.gemma else 0.0
    act = gelu_tanh if a.gemma else silu
    scale = math.sqrt(a.dim) if a.gemma else a.granite[0] if a.granite else 1.0
    # Granite: the residual branches, the scores and the logits scaled.
    residual = a.granite[1] if a.granite else 1.0
    score_scale = (a.granite[2] if a.granite else
                   (a.gemma3 or a.gemma2) ** -0.5 if a.sandwich else
                   1.0 / math.sqrt(hd))
    # Gemma 2: scores and logits soft-capped, c · tanh(x / c).
    def capped(x, c):
        return x if c is None else c * math.tanh(x / c)
    logits_scaling = a.granite[3] if a.granite else 1.0
    for seq_tokens, seq_targets in zip(tokens, targets):
        x = [[v * scale for v in w["model.embed_tokens.weight"][t]]
             for t in seq_tokens]
        for layer in range(a.layers):
            p = "model.layers.%d." % layer
            freqs = rope_freqs(rot, a, layer)
            window = a.window if sliding(a, layer) else None
            # OLMo 2 normalises no branch's input (its outputs instead).
            h = x if a.olmo2 else rms_norm(
                x, w[p + "input_layernorm.weight"], a.eps, offset)
            q = linear(h, w[p + "self_attn.q_proj.weight"], w.get(p + "self_attn.q_proj.bias"))
            k = linear(h, w[p + "self_attn.k_proj.weight"], w.get(p + "self_attn.k_proj.bias"))
            v = linear(h, w[p + "self_attn.v_proj.weight"], w.get(p + "self_attn.v_proj.bias"))
            att = [[0.0] * (a.heads * hd) for _ in seq_tokens]
            # Qwen3: q_norm / k_norm over each head, before rope; OLMo 2:
            # over the whole projections, before the heads are split.
            qn = w.get(p + "self_attn.q_norm.weight")
            kn = w.get(p + "self_attn.k_norm.weight")
            if a.olmo2:
                q = rms_norm(q, qn, a.eps)
                k = rms_norm(k, kn, a.eps)
                qn = kn = None

            def head_of(x, h, norm):
                part = x[h * hd:(h + 1) * hd]
                return part if norm is None else rms_norm([part], norm, a.eps,
                                                          offset)[0]
            for head in range(a.heads):
                kv = head // group
                # The attention factor scales cos and sin: the turned
                # elements only.
                af = rope_attention_factor(a)

                def turned(vec, pos):
                    out = rope(vec, pos, freqs)
                    return [v * af if i < rot else v
                            for i, v in enumerate(out)]
                qs = [turned(head_of(q[i], head, qn), i)
                      for i in range(len(seq_tokens))]
                ks = [turned(head_of(k[j], kv, kn), j)
                      for j in range(len(seq_tokens))]
                vs = [v[j][kv * hd:(kv + 1) * hd] for j in range(len(seq_tokens))]
                for i in range(len(seq_tokens)):
                    # Keys j <= i, and i - j < N under a window of N.
                    seen = range(0 if window is None else
                                 max(0, i - window + 1), i + 1)
                    scores = [capped(sum(a_ * b_ for a_, b_ in
                                         zip(qs[i], ks[j])) * score_scale,
                                     a.attn_softcap) for j in seen]
                    m = max(scores)
                    e = [math.exp(s - m) for s in scores]
                    z = sum(e)
                    for d in range(hd):
                        att[i][head * hd + d] = sum(
                            e_ / z * vs[j][d] for e_, j in zip(e, seen))
            o = linear(att, w[p + "self_attn.o_proj.weight"], w.get(p + "self_attn.o_proj.bias"))
            if a.olmo2 or a.sandwich:
                o = rms_norm(o, w[p + "post_attention_layernorm.weight"],
                             a.eps, offset)
            x = [[a_ + b_ * residual for a_, b_ in zip(r1, r2)]
                 for r1, r2 in zip(x, o)]
            # Gemma 3: the MLP's own norm before it.
            h = x if a.olmo2 else rms_norm(
                x, w[p + ("pre_feedforward_layernorm.weight" if a.sandwich
                          else "post_attention_layernorm.weight")],
                a.eps, offset)
            g = linear(h, w[p + "mlp.gate_proj.weight"], w.get(p + "mlp.gate_proj.bias"))
            u = linear(h, w[p + "mlp.up_proj.weight"], w.get(p + "mlp.up_proj.bias"))
            gu = [[act(a_) * b_ for a_, b_ in zip(r1, r2)] for r1, r2 in zip(g, u)]
            d = linear(gu, w[p + "mlp.down_proj.weight"], w.get(p + "mlp.down_proj.bias"))
            if a.olmo2 or a.sandwich:
                d = rms_norm(d, w[p + "post_feedforward_layernorm.weight"],
                             a.eps, offset)
            x = [[a_ + b_ * residual for a_, b_ in zip(r1, r2)]
                 for r1, r2 in zip(x, d)]
        x = rms_norm(x, w["model.norm.weight"], a.eps, offset)
        # Tied: lm_head is embed_tokens (tie_word_embeddings).
        logits = linear(x, w["model.embed_tokens.weight" if a.tie else "lm_head.weight"])
        logits = [[capped(v / logits_scaling, a.final_softcap) for v in row]
                  for row in logits]
        for row, target in zip(logits, seq_targets):
            if target == IGNORED:
                continue
            m = max(row)
            lse = m + math.log(sum(math.exp(v - m) for v in row))
            # PyTorch's label_smoothing: the target (1 - e) onehot + e / V.
            e = a.label_smoothing
            total += ((1 - e) * (lse - row[target]) +
                      e * (lse - sum(row) / len(row)))
            count += 1
    return total / count


def make(a):
    rng = random.Random(7)
    hd = a.head_dim or a.dim // a.heads
    kvd = a.kv_heads * hd
    qd = a.heads * hd

    def matrix(rows, cols, std):
        return [[rng.gauss(0.0, std) for _ in range(cols)] for _ in range(rows)]

    def vector(n, std):
        return [rng.gauss(0.0, std) for _ in range(n)]

    def norm(n):
        """A norm's weight: near 1, or near 0 where it scales by 1 + w."""
        return [(0.0 if a.gemma else 1.0) + rng.gauss(0.0, 0.1)
                for _ in range(n)]

    w = {"model.embed_tokens.weight": matrix(a.vocab, a.dim, 1.0),
         "model.norm.weight": norm(a.dim)}
    if not a.tie:
        w["lm_head.weight"] = matrix(a.vocab, a.dim, 0.3)
    for layer in range(a.layers):
        p = "model.layers.%d." % layer
        if a.olmo2:  # after the attention and the MLP
            w[p + "post_attention_layernorm.weight"] = norm(a.dim)
            w[p + "post_feedforward_layernorm.weight"] = norm(a.dim)
        else:
            w[p + "input_layernorm.weight"] = norm(a.dim)
            w[p + "post_attention_layernorm.weight"] = norm(a.dim)
        if a.sandwich:  # Gemma 3's norms around the MLP
            w[p + "pre_feedforward_layernorm.weight"] = norm(a.dim)
            w[p + "post_feedforward_layernorm.weight"] = norm(a.dim)
        w[p + "self_attn.q_proj.weight"] = matrix(qd, a.dim, 0.3)
        w[p + "self_attn.k_proj.weight"] = matrix(kvd, a.dim, 0.3)
        w[p + "self_attn.v_proj.weight"] = matrix(kvd, a.dim, 0.3)
        w[p + "self_attn.o_proj.weight"] = matrix(a.dim, qd, 0.3)
        w[p + "mlp.gate_proj.weight"] = matrix(a.ffn, a.dim, 0.3)
        w[p + "mlp.up_proj.weight"] = matrix(a.ffn, a.dim, 0.3)
        w[p + "mlp.down_proj.weight"] = matrix(a.dim, a.ffn, 0.3)
        if a.qkv_bias or a.attention_bias:
            w[p + "self_attn.q_proj.bias"] = vector(qd, 0.3)
            w[p + "self_attn.k_proj.bias"] = vector(kvd, 0.3)
            w[p + "self_attn.v_proj.bias"] = vector(kvd, 0.3)
        if a.attention_bias:
            w[p + "self_attn.o_proj.bias"] = vector(a.dim, 0.3)
        if a.mlp_bias:
            w[p + "mlp.gate_proj.bias"] = vector(a.ffn, 0.3)
            w[p + "mlp.up_proj.bias"] = vector(a.ffn, 0.3)
            w[p + "mlp.down_proj.bias"] = vector(a.dim, 0.3)
        if a.qk_norm:
            w[p + "self_attn.q_norm.weight"] = norm(hd)
            w[p + "self_attn.k_norm.weight"] = norm(hd)
        if a.olmo2:  # over the whole projections
            w[p + "self_attn.q_norm.weight"] = norm(qd)
            w[p + "self_attn.k_norm.weight"] = norm(kvd)
    # Phi-3's file: q, k, v and gate, up fused, each in the first's place.
    stored = w
    if a.phi3:
        stored = {}
        for name, value in w.items():
            for first, rest, fused in [
                    ("self_attn.q_proj.weight",
                     ["self_attn.k_proj.weight", "self_attn.v_proj.weight"],
                     "self_attn.qkv_proj.weight"),
                    ("mlp.gate_proj.weight", ["mlp.up_proj.weight"],
                     "mlp.gate_up_proj.weight")]:
                if name.endswith("." + first):
                    p = name[:-len(first)]
                    stored[p + fused] = value + [row for r in rest
                                                 for row in w[p + r]]
                    break
                if any(name.endswith("." + r) for r in rest):
                    break
            else:
                stored[name] = value
    if a.multimodal:
        # Gemma3ForConditionalGeneration's file: the text model under
        # language_model., beside a vision tower and its projector.
        stored = {("language_model." + n if n.startswith("model.") else n):
                  v for n, v in stored.items()}
        stored["vision_tower.vision_model.embeddings.patch_embedding.bias"] = (
            vector(4, 0.3))
        stored["multi_modal_projector.mm_input_projection_weight"] = matrix(
            4, a.dim, 0.3)
    # Hugging Face's safetensors, f64.
    header, blobs, offset = {}, [], 0
    for name, value in stored.items():
        flat = [v for row in value for v in row] if isinstance(value[0], list) else value
        shape = [len(value), len(value[0])] if isinstance(value[0], list) else [len(value)]
        data = struct.pack("<%dd" % len(flat), *flat)
        header[name] = {"dtype": "F64", "shape": shape,
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(os.path.join(a.dir, "hf.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    stream = [rng.randrange(a.vocab) for _ in range(a.batch * a.seq + 1)]
    with open(os.path.join(a.dir, "tokens.bin"), "wb") as f:
        f.write(struct.pack("<%di" % len(stream), *stream))
    tokens = [stream[r * a.seq:(r + 1) * a.seq] for r in range(a.batch)]
    labels = list(stream)
    if a.ignore_prompts:
        # Labels aligned with the tokens (Hugging Face's): window r's
        # targets are labels[r·S + 1 .. (r + 1)·S], the first k of them a
        # prompt the loss ignores, k in [0, S) (a position left to learn).
        for r in range(a.batch):
            for j in range(rng.randrange(a.seq)):
                labels[r * a.seq + 1 + j] = IGNORED
        with open(os.path.join(a.dir, "labels.bin"), "wb") as f:
            f.write(struct.pack("<%di" % len(labels), *labels))
    targets = [labels[r * a.seq + 1:(r + 1) * a.seq + 1] for r in range(a.batch)]
    write_config(a)
    loss = forward_loss(w, tokens, targets, a)
    with open(os.path.join(a.dir, "reference.json"), "w") as f:
        json.dump({"loss": loss}, f)
    print("reference loss %.17g" % loss)


def write_config(a):
    """DIR/config.json: the model in transformers' words."""
    kind = ("gemma2" if a.gemma2 else "gemma3_text" if a.sandwich else
            "olmo2" if a.olmo2 else "granite" if a.granite else
            "gemma" if a.gemma else
            "phi3" if a.phi3 else
            "qwen3" if a.qk_norm else "qwen2" if a.qkv_bias else
            "llama" if a.window is None else "mistral")
    scaling = None
    if a.scaling:
        factor, low, high, original = a.scaling
        scaling = {"rope_type": "llama3", "factor": factor,
                   "low_freq_factor": low, "high_freq_factor": high,
                   "original_max_position_embeddings": int(original)}
    if a.rope_linear:
        scaling = {"rope_type": "linear", "factor": a.rope_linear}
    if a.rope_dynamic:
        scaling = {"rope_type": "dynamic", "factor": a.rope_dynamic[0]}
    if a.rope_yarn:
        scaling = {"rope_type": "yarn", "factor": a.rope_yarn[0],
                   "original_max_position_embeddings": int(a.rope_yarn[1])}
    hd = a.head_dim or a.dim // a.heads
    if a.rope_longrope:
        # As Phi-3.5-mini's own files: the factors in rope_scaling, both
        # lengths at the top.
        short, long_ = longrope_factors(rotary_dim(a, hd))
        scaling = {"type": "longrope", "short_factor": short,
                   "long_factor": long_}
    config = {"architectures": [{"qwen2": "Qwen2", "qwen3": "Qwen3",
                                 "phi3": "Phi3", "gemma": "Gemma",
                                 "granite": "Granite", "gemma3_text": "Gemma3",
                                 "gemma2": "Gemma2",
                                 "olmo2": "Olmo2"}.get(
                                    kind, kind.capitalize()) +
                                "ForCausalLM"],
              "model_type": kind,
              "hidden_size": a.dim,
              "num_hidden_layers": a.layers,
              "num_attention_heads": a.heads,
              "num_key_value_heads": a.kv_heads,
              "head_dim": a.head_dim or a.dim // a.heads,
              "intermediate_size": a.ffn,
              "vocab_size": a.vocab,
              "rope_theta": a.theta,
              "rms_norm_eps": a.eps,
              "rope_scaling": scaling,
              "sliding_window": a.window,
              "hidden_act": "silu",
              "tie_word_embeddings": a.tie,
              "max_position_embeddings": (int(a.rope_dynamic[1])
                                          if a.rope_dynamic else a.seq),
              "torch_dtype": "float64"}
    if kind == "llama":
        config["attention_bias"] = a.attention_bias
        config["mlp_bias"] = a.mlp_bias
    if kind == "qwen3":
        # As Qwen3's own files: head_dim, attention_bias, no window.
        config.update(attention_bias=a.attention_bias, sliding_window=None,
                      use_sliding_window=False, max_window_layers=a.layers)
    if kind == "olmo2":
        # As OLMo 2's own files: no window, attention_bias false.
        del config["sliding_window"]
        config.update(attention_bias=False)
    if kind == "granite":
        # As Granite 3's own files: the four multipliers, no window.
        del config["sliding_window"]
        em, rm, am, ls = a.granite
        config.update(embedding_multiplier=em, residual_multiplier=rm,
                      attention_multiplier=am, logits_scaling=ls,
                      attention_bias=a.attention_bias, mlp_bias=a.mlp_bias)
    if kind == "gemma":
        # As Gemma's own files: hidden_act "gelu" beside hidden_activation,
        # which GemmaMLP reads; no window, no biases, the head tied.
        del config["sliding_window"]
        del config["rope_scaling"]
        config.update(hidden_act="gelu",
                      hidden_activation="gelu_pytorch_tanh",
                      attention_bias=False, tie_word_embeddings=True)
    if kind == "gemma3_text":
        # As Gemma 3's own files: layer_types, the local layers' theta,
        # query_pre_attn_scalar, no soft-capping (unless asked), no biases,
        # the head tied; rope_scaling the global layers'.
        types = a.layer_types or ["full"] * a.layers
        config.update(hidden_act="gelu_pytorch_tanh",
                      hidden_activation="gelu_pytorch_tanh",
                      attention_bias=False, tie_word_embeddings=True,
                      query_pre_attn_scalar=a.gemma3,
                      rope_local_base_freq=a.local_theta or a.theta,
                      final_logit_softcapping=a.final_softcap,
                      attn_logit_softcapping=a.attn_softcap,
                      sliding_window=a.window or a.seq,
                      layer_types=[t + "_attention" for t in types])
    if kind == "gemma2":
        # As Gemma 2's own files: no layer_types (every other layer global,
        # from layer 1) unless the layers differ from that, one theta,
        # query_pre_attn_scalar, both soft caps, no biases, the head tied.
        del config["rope_scaling"]
        config.update(hidden_act="gelu_pytorch_tanh",
                      hidden_activation="gelu_pytorch_tanh",
                      attention_bias=False, tie_word_embeddings=True,
                      query_pre_attn_scalar=a.gemma2,
                      final_logit_softcapping=a.final_softcap,
                      attn_logit_softcapping=a.attn_softcap,
                      sliding_window=a.window or a.seq)
        alternating = ["sliding" if (i + 1) % 2 else "full"
                       for i in range(a.layers)]
        if a.layer_types and a.layer_types != alternating:
            config["layer_types"] = [t + "_attention" for t in a.layer_types]
    if kind == "phi3":
        # As Phi-3-mini's own files: no head_dim (unless --head-dim),
        # attention_bias false, the window as given (null none).
        if a.head_dim is None:
            del config["head_dim"]
        config.update(attention_bias=False,
                      original_max_position_embeddings=a.seq)
    if a.rope_longrope:
        config.update(original_max_position_embeddings=int(a.rope_longrope[0]),
                      max_position_embeddings=int(a.rope_longrope[1]))
    if a.partial_rotary != 1.0:
        config["partial_rotary_factor"] = a.partial_rotary
    if kind == "qwen2":
        # As Qwen2.5's own files: no head_dim (unless --head-dim), a
        # sliding_window that use_sliding_window false leaves unused (here
        # shorter than the context, so that a model taking it would lose
        # the match).
        if a.head_dim is None:
            del config["head_dim"]
        config.update(sliding_window=max(1, a.seq // 2),
                      use_sliding_window=False, max_window_layers=a.layers)
        if a.window is not None and a.layer_types:
            # Qwen2's window from layer max_window_layers on.
            first = a.layer_types.index("sliding")
            assert a.layer_types == (["full"] * first +
                                     ["sliding"] * (a.layers - first))
            config.update(sliding_window=a.window, use_sliding_window=True,
                          max_window_layers=first)
    if a.multimodal:
        # Gemma3Config: the text model's config nested, a vision config.
        config = {"architectures": ["Gemma3ForConditionalGeneration"],
                  "model_type": "gemma3", "text_config": config,
                  "vision_config": {"model_type": "siglip_vision_model"}}
    with open(os.path.join(a.dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")


def compare(a):
    with open(os.path.join(a.dir, "reference.json")) as f:
        want = json.load(f)["loss"]
    with open(a.metrics) as f:
        got = json.loads(f.readline())["loss"]
    error = abs(got - want) / abs(want)
    print("loss %.17g, reference %.17g, relative error %.3g" % (got, want, error))
    if error > 1e-12:
        sys.exit("llama_reference: the losses differ")
    print("match")


def tensors_of(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    return {name: (info["dtype"], info["shape"],
                   blob[8 + n + info["data_offsets"][0]:8 + n + info["data_offsets"][1]])
            for name, info in header.items()}


def same(a):
    x, y = tensors_of(a.a), tensors_of(a.b)
    if x != y:
        differ = sorted(n for n in set(x) | set(y) if x.get(n) != y.get(n))
        sys.exit("llama_reference: tensors differ: " + ", ".join(differ[:5]))
    print("same %d tensors" % len(x))


p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
sub = p.add_subparsers(dest="command", required=True)
m = sub.add_parser("make")
m.add_argument("dir")
for name in ["layers", "dim", "heads", "kv-heads", "ffn", "vocab", "seq", "batch"]:
    m.add_argument("--" + name, type=int, required=True)
m.add_argument("--theta", type=float, required=True)
m.add_argument("--eps", type=float, required=True)
m.add_argument("--rope-scaling", dest="scaling", default=None,
               type=lambda text: [float(v) for v in text.split(",")])
m.add_argument("--rope-linear", type=float, default=None,
               help="rope_scaling of type linear with this factor")
m.add_argument("--rope-yarn", default=None,
               type=lambda text: [float(v) for v in text.split(",")],
               help="FACTOR,ORIGINAL: rope_scaling of type yarn")
m.add_argument("--rope-longrope", default=None,
               type=lambda text: [float(v) for v in text.split(",")],
               help="ORIGINAL,MAX: rope_scaling of type longrope with the "
                    "test's short and long factors")
m.add_argument("--partial-rotary", type=float, default=1.0,
               help="rope over the first int(F head_dim) elements of each "
                    "head (partial_rotary_factor)")
m.add_argument("--rope-dynamic", default=None,
               type=lambda text: [float(v) for v in text.split(",")],
               help="FACTOR,ORIGINAL: rope_scaling of type dynamic, "
                    "max_position_embeddings ORIGINAL")
m.add_argument("--sliding-window", dest="window", type=int, default=None)
m.add_argument("--layer-types", default=None,
               type=lambda text: text.split(","),
               help="sliding or full per layer (the window on the sliding "
                    "ones only); a Qwen2 config's use_sliding_window from "
                    "max_window_layers, where the list is full then sliding")
m.add_argument("--local-theta", type=float, default=None,
               help="the sliding layers' rope theta")
m.add_argument("--qkv-bias", action="store_true",
               help="biases on q, k and v: a Qwen2ForCausalLM")
m.add_argument("--attention-bias", action="store_true",
               help="biases on q, k, v and o (Llama's attention_bias)")
m.add_argument("--mlp-bias", action="store_true",
               help="biases on gate, up and down (Llama's mlp_bias)")
m.add_argument("--tie-embeddings", dest="tie", action="store_true",
               help="the head is embed_tokens (tie_word_embeddings)")
m.add_argument("--head-dim", type=int, default=None,
               help="each head's width, apart from dim / heads (head_dim)")
m.add_argument("--qk-norm", action="store_true",
               help="RMSNorms over each query and key head before rope: a "
                    "Qwen3ForCausalLM")
m.add_argument("--phi3", action="store_true",
               help="q, k, v and gate, up fused in the file: a "
                    "Phi3ForCausalLM")
m.add_argument("--gemma", action="store_true",
               help="(1 + w) norms, GeGLU, embeddings times sqrt(width), "
                    "the head tied: a GemmaForCausalLM")
m.add_argument("--gemma3", type=float, metavar="SCALAR", default=None,
               help="Gemma's, and four norms a layer (over each branch's "
                    "input and output), QK-norm, scores times SCALAR^-1/2 "
                    "(query_pre_attn_scalar): a Gemma3ForCausalLM "
                    "(gemma3_text); with --tie-embeddings")
m.add_argument("--gemma2", type=float, metavar="SCALAR", default=None,
               help="Gemma's, and four norms a layer, scores times "
                    "SCALAR^-1/2 (query_pre_attn_scalar), no QK-norm: a "
                    "Gemma2ForCausalLM; with --tie-embeddings")
m.add_argument("--attn-softcap", type=float, default=None,
               help="scores capped to C tanh(s / C) before the softmax "
                    "(attn_logit_softcapping)")
m.add_argument("--final-softcap", type=float, default=None,
               help="logits capped to C tanh(z / C) "
                    "(final_logit_softcapping)")
m.add_argument("--multimodal", action="store_true",
               help="with --gemma3: the file and config of "
                    "Gemma3ForConditionalGeneration (Gemma 3 4B on)")
m.add_argument("--granite", metavar="EMB,RES,ATT,LOGITS",
               type=lambda text: [float(v) for v in text.split(",")],
               help="Granite's embedding, residual and attention "
                    "multipliers and logits scaling: a GraniteForCausalLM")
m.add_argument("--olmo2", action="store_true",
               help="RMSNorms over the attention's and the MLP's outputs "
                    "(none before), QK-norm over the whole projections: an "
                    "Olmo2ForCausalLM")
m.add_argument("--label-smoothing", type=float, default=0.0,
               help="the loss's target (1 - E) onehot + E / V (PyTorch's "
                    "label_smoothing)")
m.add_argument("--ignore-prompts", action="store_true",
               help="labels.bin beside tokens.bin, -100 over a prompt at "
                    "the start of each window")
c = sub.add_parser("compare")
c.add_argument("dir")
c.add_argument("metrics")
s = sub.add_parser("same")
s.add_argument("a")
s.add_argument("b")
args = p.parse_args()
if args.command == "make":
    if args.gemma3 is not None and (
            args.gemma or args.qk_norm or args.qkv_bias or
            args.attention_bias or args.mlp_bias or args.scaling or
            not args.tie):
        p.error("--gemma3 is Gemma's with its own norms and QK-norm: no "
                "--gemma, --qk-norm, biases or rope scaling, and "
                "--tie-embeddings")
    if args.gemma2 is not None and (
            args.gemma3 is not None or args.gemma or args.qk_norm or
            args.qkv_bias or args.attention_bias or args.mlp_bias or
            args.scaling or args.rope_linear or args.local_theta or
            not args.tie):
        p.error("--gemma2 is Gemma's with its own norms: no --gemma3, "
                "--gemma, --qk-norm, biases, rope scaling or local theta, "
                "and --tie-embeddings")
    if (args.attn_softcap or args.final_softcap) and (
            args.gemma2 is None and args.gemma3 is None):
        p.error("soft caps are Gemma 2's (or a Gemma 3 config's): with "
                "--gemma2 or --gemma3")
    # Gemma 2's and 3's forward is Gemma's, Gemma 3's with QK-norm
    # (checked apart).
    args.sandwich = args.gemma3 is not None or args.gemma2 is not None
if args.command == "make" and args.qkv_bias and (
        args.attention_bias or args.mlp_bias or
        (args.window is not None and not args.layer_types)):
    p.error("--qkv-bias is Qwen2's: no --attention-bias, --mlp-bias or "
            "--sliding-window (without --layer-types) beside it")
if args.command == "make" and args.qk_norm and (
        args.qkv_bias or args.mlp_bias or args.window is not None):
    p.error("--qk-norm is Qwen3's: no --qkv-bias, --mlp-bias or "
            "--sliding-window beside it (--attention-bias is its "
            "attention_bias)")
if args.command == "make" and args.phi3 and (
        args.qkv_bias or args.attention_bias or args.mlp_bias or
        args.qk_norm or args.scaling):
    p.error("--phi3 has no biases, QK-norm or rope scaling")
if args.command == "make" and args.gemma and (
        args.qkv_bias or args.attention_bias or args.mlp_bias or
        args.qk_norm or args.scaling or args.phi3 or
        args.window is not None or not args.tie):
    p.error("--gemma has no biases, QK-norm, rope scaling or window, and "
            "needs --tie-embeddings")
if args.command == "make" and args.sandwich:
    args.gemma = True
    args.qk_norm = args.gemma3 is not None
if args.command == "make" and args.olmo2 and (
        args.gemma or args.phi3 or args.qk_norm or args.qkv_bias or
        args.mlp_bias or args.granite is not None or args.tie or
        args.window is not None):
    p.error("--olmo2 is a Llama with its own norms: no --gemma, --phi3, "
            "--qk-norm, --qkv-bias, --mlp-bias, --granite, "
            "--tie-embeddings or --sliding-window beside it")
if args.command == "make" and args.granite is not None and (
        len(args.granite) != 4 or args.gemma or args.phi3 or args.qk_norm or
        args.qkv_bias or args.window is not None):
    p.error("--granite takes four numbers and is a Llama: no --gemma, "
            "--phi3, --qk-norm, --qkv-bias or --sliding-window beside it")
if args.command == "make" and args.window is not None and not args.phi3 and (
        args.attention_bias or args.mlp_bias):
    p.error("a sliding window is Mistral's, which has no biases")
{"make": make, "compare": compare, "same": same}[args.command](args)
