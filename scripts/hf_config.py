"""Hugging Face config.json as scripts/llama-model.py's flags.

from_config(path, error) reads a config.json (model_type llama, mistral,
qwen2, qwen3, phi3, gemma, gemma2, gemma3, gemma3_text, granite or olmo2)
and returns the flags' values it gives, calling error(message) (argparse's
p.error: one line, exit 2) where it asks for a model the script cannot
write, naming the file and the field. Apart from llama-model.py so that
each stays one subject: this file knows transformers' configs and their
defaults, that one writes the model.
"""
import json
import math

# config.json's size fields and the flags they set.
CONFIG_SIZES = [("num_hidden_layers", "layers"), ("hidden_size", "dim"),
                ("num_attention_heads", "heads"), ("intermediate_size", "ffn"),
                ("vocab_size", "vocab")]
# What transformers' LlamaConfig, MistralConfig, Qwen2Config and Qwen3Config
# take for a field that config.json leaves out (num_key_value_heads None: one
# per query head; head_dim None: hidden_size / num_attention_heads, Qwen3's
# 128). Qwen2's and Qwen3's sliding_window counts only under
# use_sliding_window (from layer max_window_layers on), which from_config
# reads apart; tie_word_embeddings is false in all four.
HF_DEFAULTS = {"llama": {"num_key_value_heads": None, "sliding_window": None,
                         "rms_norm_eps": 1e-6},
               "mistral": {"num_key_value_heads": 8, "sliding_window": 4096,
                           "rms_norm_eps": 1e-6},
               "qwen2": {"num_key_value_heads": 32, "rms_norm_eps": 1e-6},
               "qwen3": {"num_key_value_heads": 32, "rms_norm_eps": 1e-6,
                         "head_dim": 128},
               # GemmaConfig's, its sizes included (Gemma 7B's).
               "gemma": {"num_key_value_heads": 16, "rms_norm_eps": 1e-6,
                         "head_dim": 256, "vocab_size": 256000,
                         "hidden_size": 3072, "intermediate_size": 24576,
                         "num_hidden_layers": 28, "num_attention_heads": 16},
               # Gemma2Config's, its sizes included (Gemma 2 2B's).
               "gemma2": {"num_key_value_heads": 4, "rms_norm_eps": 1e-6,
                          "head_dim": 256, "vocab_size": 256000,
                          "hidden_size": 2304, "intermediate_size": 9216,
                          "num_hidden_layers": 26, "num_attention_heads": 8,
                          "sliding_window": 4096},
               # Gemma3TextConfig's, its sizes included (Gemma 3 4B's).
               "gemma3_text": {"num_key_value_heads": 4, "rms_norm_eps": 1e-6,
                               "head_dim": 256, "vocab_size": 262208,
                               "hidden_size": 2304, "intermediate_size": 9216,
                               "num_hidden_layers": 26,
                               "num_attention_heads": 8,
                               "sliding_window": 4096},
               # Olmo2Config's.
               "olmo2": {"num_key_value_heads": None, "rms_norm_eps": 1e-5},
               # GraniteConfig's (its multipliers 1: a Llama).
               "granite": {"num_key_value_heads": None, "rms_norm_eps": 1e-6},
               # Phi3Config's, its sizes included (Phi-3-mini's).
               "phi3": {"num_key_value_heads": None, "sliding_window": None,
                        "rms_norm_eps": 1e-5, "vocab_size": 32064,
                        "hidden_size": 3072, "intermediate_size": 8192,
                        "num_hidden_layers": 32, "num_attention_heads": 32}}
# The biases each model_type has: Qwen2's q, k and v projections always;
# Llama's where config.json's attention_bias (q, k, v and o) and mlp_bias
# (gate, up and down) say; Qwen3's where its attention_bias (q, k, v and o)
# says; Mistral's and Phi-3's none (Phi-3's attention_bias must be false).
CONFIG_BIASES = {"llama": [("attention_bias", "attention_bias"),
                           ("mlp_bias", "mlp_bias")],
                 "mistral": [], "qwen2": [], "phi3": [], "gemma": [],
                 "gemma2": [], "gemma3_text": [],
                 "olmo2": [("attention_bias", "attention_bias")],
                 "granite": [("attention_bias", "attention_bias"),
                             ("mlp_bias", "mlp_bias")],
                 "qwen3": [("attention_bias", "attention_bias")]}
LLAMA3 = ["factor", "low_freq_factor", "high_freq_factor",
          "original_max_position_embeddings"]
# Gemma's hidden_activation values and the --mlp-act each is.
GEMMA_ACTS = {"gelu_pytorch_tanh": "gelu-tanh", "gelu": "gelu"}


def global_every(n, layers):
    """Layer types with layers n-1, 2n-1, ... full, the others sliding
    (Gemma 2's n 2, Gemma 3's sliding_window_pattern 6)."""
    return ["full" if (i + 1) % n == 0 else "sliding" for i in range(layers)]


def is_number(v, kind=(int, float)):
    return isinstance(v, kind) and not isinstance(v, bool)


def read_config(path, error):
    """config.json as a dict; error(message), one line, where it is not one
    (llama-model.py's reader and llama-checkpoint.py's)."""
    try:
        with open(path, encoding="utf-8") as f:
            c = json.load(f)
    except OSError as e:
        error("%s: %s" % (path, e.strerror))
    except ValueError:
        error("%s: not JSON" % path)
    if not isinstance(c, dict):
        error("%s: not a JSON object" % path)
    return c


def from_config(path, error):
    """The flags' values a config.json gives; error(message) where it asks
    for a model the script cannot write."""
    def bad(field, why):
        error("%s: %s %s" % (path, field, why))

    c = read_config(path, error)
    model = c.get("model_type")
    if model == "gemma3":
        # Gemma3ForConditionalGeneration (4B on): its text model's config,
        # nested; the vision tower is not this model's.
        text = c.get("text_config")
        if not isinstance(text, dict):
            bad("text_config", "missing or not an object")
        c = dict(text, model_type="gemma3_text")
        model = "gemma3_text"
    if model not in HF_DEFAULTS:
        bad("model_type", "%s: only llama, mistral, qwen2, qwen3, phi3, gemma, "
            "gemma2, gemma3, gemma3_text, granite and olmo2" %
            json.dumps(model))
    out = {}
    if model == "olmo2":
        # Olmo2DecoderLayer normalises the attention's and the MLP's outputs
        # (no norm before them), Olmo2Attention the whole q and k
        # projections.
        out.update(post_norms=True, qk_norm_full=True)
    if model == "granite":
        # Granite's four muP multipliers (GraniteConfig's defaults: 1).
        for field in ("embedding_multiplier", "residual_multiplier",
                      "attention_multiplier", "logits_scaling"):
            value = c.get(field, 1.0)
            if not is_number(value) or value <= 0:
                bad(field, "%s is not a positive number" % json.dumps(value))
            out[field] = float(value)
    if model in ("gemma2", "gemma3_text"):
        # Gemma 2 and 3: Gemma's norms, MLP and embeddings, four norms a
        # layer, scores scaled by query_pre_attn_scalar^-1/2, local layers
        # (sliding_window) beside global ones, and soft-capped scores and
        # logits where the config says (Gemma2Config's 50 and 30 by
        # default, Gemma3TextConfig's none).
        for field, flag, default in [
                ("attn_logit_softcapping", "attn_softcap", 50.0),
                ("final_logit_softcapping", "final_softcap", 30.0)]:
            value = c.get(field, default if model == "gemma2" else None)
            if value is None:
                continue
            if not is_number(value) or not 0 < value < math.inf:
                bad(field, "%s is not a positive number" % json.dumps(value))
            out[flag] = float(value)
        scalar = c.get("query_pre_attn_scalar", 256)
        if not is_number(scalar) or scalar <= 0:
            bad("query_pre_attn_scalar", "is not a positive number")
        out.update(sandwich_norms=True,
                   attention_multiplier=float(scalar) ** -0.5)
    if model == "gemma2":
        # Gemma 2: every other layer global, from layer 1 (Gemma2Config's
        # layer_types; the released configs leave it out); one theta.
        layers = c.get("num_hidden_layers", 26)
        if not c.get("layer_types") and is_number(layers, int):
            c["layer_types"] = [t + "_attention"
                                for t in global_every(2, layers)]
    if model == "gemma3_text":
        # Gemma 3: QK-norm, and the local layers (every
        # sliding_window_pattern-th global, or as layer_types says) at
        # rope_local_base_freq.
        local = c.get("rope_local_base_freq", 10000.0)
        pattern = c.get("sliding_window_pattern", 6)
        if not is_number(local) or local <= 0:
            bad("rope_local_base_freq", "is not a positive number")
        if not is_number(pattern, int) or pattern < 1:
            bad("sliding_window_pattern", "is not a positive integer")
        layers = c.get("num_hidden_layers", 26)
        if not c.get("layer_types") and is_number(layers, int):
            c["layer_types"] = [t + "_attention"
                                for t in global_every(pattern, layers)]
        # Gemma 3 4B on scales its global layers' rope linearly (their
        # rotary embedding reads rope_scaling; the local ones' does not).
        scaling = c.pop("rope_scaling", None)
        if scaling is not None:
            factor = (scaling.get("factor") if isinstance(scaling, dict)
                      else None)
            if (not isinstance(scaling, dict) or
                    scaling.get("rope_type", scaling.get("type")) != "linear"
                    or not is_number(factor) or factor < 1):
                bad("rope_scaling", "%s: Gemma 3's global layers scale "
                    "linearly (a factor >= 1)" % json.dumps(scaling))
            out["global_rope_linear"] = float(factor)
        c.setdefault("rope_theta", 1000000.0)
        out["qk_norm"] = True
        if "sliding_attention" in (c.get("layer_types") or []):
            out["local_theta"] = float(local)
    if model in ("gemma", "gemma2", "gemma3_text"):
        # GemmaMLP's activation is hidden_activation (GemmaConfig's default
        # the tanh GELU), never hidden_act; its RMSNorm scales by 1 + w; the
        # embeddings are scaled by sqrt(hidden_size); the head is tied
        # unless the config says otherwise.
        act = c.get("hidden_activation") or "gelu_pytorch_tanh"
        if act not in GEMMA_ACTS:
            bad("hidden_activation", "%s: only %s" % (
                json.dumps(act), " or ".join(GEMMA_ACTS)))
        out.update(mlp_act=GEMMA_ACTS[act], norm_offset=True,
                   embed_scale=True)
        if c.get("attention_bias", False) is not False:
            bad("attention_bias", "%s: Gemma has no biases" %
                json.dumps(c["attention_bias"]))
    elif c.get("hidden_act", "silu") != "silu":
        bad("hidden_act", "%s: the MLP is SwiGLU (silu)" %
            json.dumps(c["hidden_act"]))
    for field, flag in CONFIG_BIASES[model] + [("tie_word_embeddings",
                                                "tie_embeddings")]:
        # GemmaConfig ties the head by default, the others do not.
        value = c.get(field, model in ("gemma", "gemma2", "gemma3_text") and
                      field == "tie_word_embeddings")
        if not isinstance(value, bool):
            bad(field, "is not true or false")
        out[flag] = value
    if model == "qwen3":
        out["qk_norm"] = True
    if model == "qwen2":
        out["qkv_bias"] = True
    if model == "phi3":
        # Phi3Attention's qkv_proj and o_proj, Phi3MLP's gate_up_proj and
        # down_proj have no biases.
        for field in ("attention_bias", "mlp_bias"):
            if c.get(field, False) is not False:
                bad(field, "%s: Phi-3 has no biases" % json.dumps(c[field]))
    types = c.get("layer_types")
    if model in ("qwen2", "qwen3") and not types:
        # Qwen2's and Qwen3's window covers layers max_window_layers on
        # (Qwen2Config's layer_types); off (the released configs),
        # sliding_window is unused.
        if c.get("use_sliding_window", False) is not False:
            # Qwen2Config's defaults: a window of 4096 from layer 28 on.
            window = c.get("sliding_window", 4096)
            first = c.get("max_window_layers", 28)
            layers = c.get("num_hidden_layers")
            if not is_number(window, int) or window < 1:
                bad("sliding_window", "is not a positive integer")
            if not is_number(layers, int):
                bad("num_hidden_layers", "missing or not an integer")
            if not is_number(first, int):
                bad("max_window_layers", "is not an integer")
            out["sliding_window"] = window
            types = ["sliding_attention" if i >= first else "full_attention"
                     for i in range(layers)]
    if types:
        kinds = {"sliding_attention": "sliding", "full_attention": "full"}
        if not isinstance(types, list) or any(t not in kinds for t in types):
            bad("layer_types", "holds other than sliding_attention and "
                "full_attention")
        out["layer_types"] = [kinds[t] for t in types]
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
    # Phi-4-mini turns 3/4 of each head (Phi3Config's partial_rotary_factor).
    partial = rope.get("partial_rotary_factor", c.get("partial_rotary_factor"))
    if partial is not None:
        if not is_number(partial) or not 0 < partial <= 1:
            bad("partial_rotary_factor", "%s is not in (0, 1]" %
                json.dumps(partial))
        if partial != 1:
            out["partial_rotary"] = float(partial)
    if rope_type in ("longrope", "su"):
        # transformers' _compute_longrope_parameters ("su": Phi-3's first
        # configs): short_factor within original_max_position_embeddings,
        # long_factor past it (the choice waits for --seq); the attention
        # factor, else sqrt(1 + ln factor / ln original) with factor, else
        # max_position_embeddings / original.
        original = (rope.get("original_max_position_embeddings") or
                    c.get("original_max_position_embeddings"))
        if not is_number(original) or original <= 1:
            bad(field, "of type longrope needs original_max_position_"
                "embeddings > 1")
        factors = {}
        for key in ("short_factor", "long_factor"):
            value = rope.get(key)
            if (not isinstance(value, list) or not value or
                    not all(is_number(v) and 0 < v < math.inf
                            for v in value)):
                bad(field, "of type longrope needs %s, a list of positive "
                    "numbers" % key)
            factors[key] = [float(v) for v in value]
        factor = rope.get("factor")
        if factor is None:
            top = c.get("max_position_embeddings")
            if not is_number(top) or top <= 0:
                bad("max_position_embeddings", "missing or not positive "
                    "(LongRoPE's factor is it over the original)")
            factor = top / original
        attention = rope.get("attention_factor")
        if attention is None:
            attention = (1.0 if factor <= 1 else
                         math.sqrt(1 + math.log(factor) / math.log(original)))
        if not is_number(attention) or attention <= 0:
            bad(field, "of type longrope needs a positive attention_factor")
        out["longrope_choice"] = (factors["short_factor"],
                                  factors["long_factor"], float(original))
        out["longrope_attention_factor"] = float(attention)
    elif rope_type == "llama3":
        if not all(is_number(rope.get(k)) for k in LLAMA3):
            bad(field, "of type llama3 needs numbers " + ", ".join(LLAMA3))
        out["rope_scaling"] = [float(rope[k]) for k in LLAMA3]
    elif rope_type in ("linear", "dynamic"):
        factor = rope.get("factor")
        if not is_number(factor) or factor < 1:
            bad(field, "of type %s needs a factor >= 1" % rope_type)
        if rope_type == "linear":
            out["rope_linear"] = float(factor)
        else:
            original = c.get("max_position_embeddings")
            if not is_number(original, int) or original < 1:
                bad("max_position_embeddings", "missing or not a positive "
                    "integer (dynamic rope scales past it)")
            out["rope_dynamic"] = [float(factor), float(original)]
    elif rope_type == "yarn":
        # transformers' _compute_yarn_parameters: the factor, the original
        # context (or max_position_embeddings), betas 32 and 1, truncate,
        # and the attention factor on cos and sin.
        factor = rope.get("factor")
        original = (rope.get("original_max_position_embeddings") or
                    c.get("max_position_embeddings"))
        fast = rope.get("beta_fast") or 32
        slow = rope.get("beta_slow") or 1
        truncate = rope.get("truncate", True)
        if not is_number(factor) or factor < 1:
            bad(field, "of type yarn needs a factor >= 1")
        if not is_number(original) or original <= 0:
            bad(field, "of type yarn needs original_max_position_embeddings "
                "(or max_position_embeddings) > 0")
        if (not is_number(fast) or not is_number(slow) or fast <= 0 or
                slow <= 0 or not isinstance(truncate, bool)):
            bad(field, "of type yarn needs positive beta_fast and beta_slow "
                "and truncate true or false")

        def mscale_of(scale, m=1.0):
            return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0
        attention = rope.get("attention_factor")
        mscale, mscale_all = rope.get("mscale"), rope.get("mscale_all_dim")
        if attention is None:
            attention = (mscale_of(factor, mscale) / mscale_of(factor, mscale_all)
                         if mscale and mscale_all else mscale_of(factor))
        if not is_number(attention) or attention <= 0:
            bad(field, "of type yarn needs a positive attention_factor")
        out["rope_yarn"] = [float(factor), float(original), float(fast),
                            float(slow), 1.0 if truncate else 0.0]
        out["yarn_attention_factor"] = float(attention)
    elif rope_type != "default":
        bad(field, "of type %s: only llama3's, linear, dynamic, yarn or "
            "longrope scaling" % json.dumps(rope_type))
    for field, flag in CONFIG_SIZES:
        value = c.get(field, HF_DEFAULTS[model].get(field))
        if not is_number(value, int):
            bad(field, "missing or not an integer")
        out[flag] = value
    # head_dim: its own width where config.json says (Qwen3, Gemma-style
    # Llamas); null, or absent outside Qwen3, hidden_size / heads.
    head_dim = c.get("head_dim", HF_DEFAULTS[model].get("head_dim"))
    if head_dim is not None:
        if not is_number(head_dim, int) or head_dim < 1:
            bad("head_dim", "%s is not a positive integer" %
                json.dumps(head_dim))
        if head_dim * out["heads"] != out["dim"]:
            out["head_dim"] = head_dim
    # A field left out takes transformers' default; null num_key_value_heads
    # is one per query head, null sliding_window no window.
    for field, flag, kind in [("num_key_value_heads", "kv_heads", int),
                              ("sliding_window", "sliding_window", int),
                              ("rms_norm_eps", "eps", (int, float))]:
        if field not in HF_DEFAULTS[model]:
            continue
        value = c.get(field, HF_DEFAULTS[model][field])
        if value is not None and not is_number(value, kind):
            bad(field, "is not a number")
        if value is not None:
            out[flag] = value
    out.setdefault("kv_heads", out["heads"])
    return out
