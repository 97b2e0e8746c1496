"""llama-model.py's flags: the parser, the defaults of the built-in model,
and their checks, a Hugging Face config.json filling what no flag gives.

parse_args(description) returns the parsed flags (each list flag as its
numbers, the layer types as names, the config's values and the defaults
filled in, every combination checked) and the parser, whose error() the
model's own checks use: one line, exit status 2.
"""
import argparse
import math

from hf_config import from_config, global_every


# The built-in model (examples/llama.mlir); a flag, else --config, sets each.
DEFAULTS = {"batch": 8, "seq": 64, "dim": 128, "heads": 4, "kv_heads": 2,
            "ffn": 384, "vocab": 256, "layers": 4, "theta": 10000.0,
            "rope_scaling": None, "rope_linear": None, "rope_dynamic": None,
            "rope_yarn": None, "yarn_attention_factor": None,
            "rope_longrope": None, "longrope_attention_factor": None,
            "partial_rotary": None,
            "eps": 1e-5, "sliding_window": None, "layer_types": None,
            "local_theta": None, "global_rope_linear": None,
            "qkv_bias": False, "attention_bias": False, "mlp_bias": False,
            "tie_embeddings": False, "head_dim": None, "qk_norm": False,
            "mlp_act": "silu", "norm_offset": False, "embed_scale": False,
            "post_norms": False, "sandwich_norms": False,
            "qk_norm_full": False,
            "embedding_multiplier": None, "residual_multiplier": None,
            "attention_multiplier": None, "logits_scaling": None,
            "attn_softcap": None, "final_softcap": None}


def numbers(text):
    """A flag's comma-separated numbers, or [] where one is not a number."""
    try:
        return [float(v) for v in text.split(",")]
    except ValueError:
        return []


p = argparse.ArgumentParser()
for name in ["batch", "seq", "dim", "heads", "kv-heads", "ffn", "vocab",
             "layers"]:
    p.add_argument("--" + name, type=int)
p.add_argument("--head-dim", type=int, metavar="N",
               help="each attention head's width (config.json's head_dim; "
                    "default dim / heads)")
p.add_argument("--qk-norm", action=argparse.BooleanOptionalAction,
               help="an RMSNorm over each query and key head before rope "
                    "(Qwen3's q_norm and k_norm)")
p.add_argument("--theta", type=float)
p.add_argument("--rope-scaling", metavar="FACTOR,LOW,HIGH,ORIGINAL",
               help="Llama 3.1's rope frequency scaling (config.json's "
                    "rope_scaling: factor, low_freq_factor, high_freq_factor, "
                    "original_max_position_embeddings), e.g. 32,1,4,8192")
p.add_argument("--rope-linear", type=float, metavar="FACTOR",
               help="rope frequencies divided by FACTOR (config.json's "
                    "rope_scaling of type linear: positions interpolated)")
p.add_argument("--rope-dynamic", metavar="FACTOR,ORIGINAL",
               help="dynamic NTK rope (rope_scaling of type dynamic, "
                    "max_position_embeddings ORIGINAL): the base transformers "
                    "computes for --seq positions, theta unchanged up to "
                    "ORIGINAL")
p.add_argument("--rope-yarn", metavar="FACTOR,ORIGINAL[,FAST,SLOW[,TRUNCATE]]",
               help="YaRN rope (rope_scaling of type yarn): frequencies "
                    "divided by FACTOR past the pairs that turn SLOW times "
                    "(default 1) over ORIGINAL positions, kept before those "
                    "that turn FAST times (default 32), the correction range "
                    "rounded out unless TRUNCATE is 0; the scores times the "
                    "attention factor squared")
p.add_argument("--yarn-attention-factor", type=float, metavar="A",
               help="YaRN's factor on cos and sin (default 0.1 ln FACTOR + 1; "
                    "config.json's attention_factor, or mscale and "
                    "mscale_all_dim)")
p.add_argument("--rope-longrope", metavar="F0,F1,...",
               help="LongRoPE (rope_type longrope: Phi-3's 128k): pair i's "
                    "frequency divided by Fi, one factor a rotated pair")
p.add_argument("--longrope-attention-factor", type=float, metavar="A",
               help="LongRoPE's factor on cos and sin (default 1; from "
                    "config.json: attention_factor, or sqrt(1 + ln(max / "
                    "original) / ln original))")
p.add_argument("--partial-rotary", type=float, metavar="F",
               help="rope turns the first int(F * head_dim) elements of each "
                    "head, the rest pass (partial_rotary_factor: "
                    "Phi-4-mini's 0.75)")
p.add_argument("--eps", type=float)
p.add_argument("--sliding-window", type=int, metavar="N",
               help="causal attention over the last N keys, the query's own "
                    "included (config.json's sliding_window)")
p.add_argument("--layer-types", metavar="TYPE,...",
               help="each layer's attention, sliding (the --sliding-window) "
                    "or full (config.json's layer_types: sliding_attention, "
                    "full_attention)")
p.add_argument("--global-every", type=int, metavar="N",
               help="layers N-1, 2N-1, ... full, the others sliding "
                    "(Gemma 2's 2, Gemma 3's sliding_window_pattern 6)")
p.add_argument("--local-theta", type=float, metavar="THETA",
               help="the sliding layers' rope theta (Gemma 3's "
                    "rope_local_base_freq); the full ones' is --theta")
p.add_argument("--global-rope-linear", type=float, metavar="FACTOR",
               help="the full layers' rope frequencies divided by FACTOR, "
                    "the sliding ones' not (Gemma 3 4B on: rope_scaling of "
                    "type linear)")
p.add_argument("--tie-embeddings", action=argparse.BooleanOptionalAction,
               help="the LM head is the token embedding transposed, no "
                    "output.weight (config.json's tie_word_embeddings)")
p.add_argument("--qkv-bias", action=argparse.BooleanOptionalAction,
               help="biases on the query, key and value projections "
                    "(Qwen2's)")
p.add_argument("--attention-bias", action=argparse.BooleanOptionalAction,
               help="biases on the query, key, value and output projections "
                    "(config.json's attention_bias)")
p.add_argument("--mlp-bias", action=argparse.BooleanOptionalAction,
               help="biases on the MLP's gate, up and down projections "
                    "(config.json's mlp_bias)")
p.add_argument("--config", metavar="CONFIG.JSON",
               help="a Hugging Face LlamaForCausalLM, MistralForCausalLM, "
                    "Qwen2ForCausalLM, Qwen3ForCausalLM, Phi3ForCausalLM, "
                    "GemmaForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM, "
                    "GraniteForCausalLM or "
                    "Olmo2ForCausalLM config.json to take the model from "
                    "(flags override it)")
p.add_argument("--mlp-act", choices=["silu", "gelu", "gelu-tanh"],
               help="the gated MLP's activation: silu (SwiGLU, default), "
                    "gelu or its tanh approximation (GeGLU: Gemma's "
                    "gelu_pytorch_tanh)")
p.add_argument("--norm-offset", action=argparse.BooleanOptionalAction,
               help="RMSNorms scale by 1 + w, w starting at 0 (Gemma's)")
p.add_argument("--embed-scale", action=argparse.BooleanOptionalAction,
               help="the token embeddings times sqrt(dim) (Gemma's)")
for name, what in [("embedding-multiplier", "the token embeddings times X"),
                   ("residual-multiplier", "each block's attention and MLP "
                    "output times X before its residual add"),
                   ("attention-multiplier", "attention scores times X in "
                    "place of 1 / sqrt(head_dim)"),
                   ("logits-scaling", "the logits divided by X")]:
    p.add_argument("--" + name, type=float, metavar="X",
                   help=what + " (Granite's %s)" % name.replace("-", "_"))
p.add_argument("--post-norms", action=argparse.BooleanOptionalAction,
               help="RMSNorms over the attention's and the MLP's outputs "
                    "before their residual adds, none before (OLMo 2's)")
p.add_argument("--sandwich-norms", action=argparse.BooleanOptionalAction,
               help="RMSNorms over the attention's and the MLP's inputs and "
                    "over their outputs (Gemma 2's and 3's)")
p.add_argument("--qk-norm-full", action=argparse.BooleanOptionalAction,
               help="an RMSNorm over the whole query and key projections, "
                    "before they are split into heads (OLMo 2's)")
p.add_argument("--attn-softcap", type=float, metavar="C",
               help="each attention score s capped to C tanh(s / C) before "
                    "the softmax (Gemma 2's attn_logit_softcapping)")
p.add_argument("--final-softcap", type=float, metavar="C",
               help="each logit z capped to C tanh(z / C) before the loss "
                    "(Gemma 2's final_logit_softcapping)")
p.add_argument("--ignore-index", type=int, metavar="N",
               help="the label the loss ignores (fine-tuning's -100 over "
                    "prompt and padding); the mean is over the other "
                    "positions (PyTorch's ignore_index)")
p.add_argument("--label-smoothing", type=float, metavar="E",
               help="the loss's target (1 - E) on the label and E / vocab "
                    "everywhere (PyTorch's label_smoothing, Hugging Face "
                    "Trainer's label_smoothing_factor)")
p.add_argument("--dtype", choices=["f32", "f64"], default="f32")


def parse_args(description):
    """The flags of sys.argv, checked (see the module's docstring)."""
    p.description = description
    a = p.parse_args()
    if a.rope_scaling is not None:
        a.rope_scaling = numbers(a.rope_scaling)
        if len(a.rope_scaling) != 4:
            p.error("--rope-scaling takes four numbers: "
                    "factor,low,high,original")
    if a.layer_types is not None and isinstance(a.layer_types, str):
        a.layer_types = [t.strip() for t in a.layer_types.split(",")]
    if a.rope_yarn is not None:
        a.rope_yarn = numbers(a.rope_yarn)
        if len(a.rope_yarn) not in (2, 4, 5):
            p.error("--rope-yarn takes factor,original[,fast,slow[,truncate]]")
        a.rope_yarn += [32.0, 1.0, 1.0][len(a.rope_yarn) - 2:]
    if a.rope_dynamic is not None:
        a.rope_dynamic = numbers(a.rope_dynamic)
        if len(a.rope_dynamic) != 2:
            p.error("--rope-dynamic takes two numbers: factor,original")
    if a.rope_longrope is not None:
        a.rope_longrope = numbers(a.rope_longrope)
        if not a.rope_longrope:
            p.error("--rope-longrope takes numbers: F0,F1,...")
    config = from_config(a.config, p.error) if a.config else {}
    if a.qkv_bias is False and (a.attention_bias or (
            a.attention_bias is None and config.get("attention_bias"))):
        p.error("--attention-bias puts biases on q, k and v as well: not with "
                "--no-qkv-bias")
    for name, default in DEFAULTS.items():
        if getattr(a, name) is None:
            setattr(a, name, config.get(name, default))
    if a.rope_longrope is None and "longrope_choice" in config:
        # LongRoPE's long factors for a context past the original one
        # (longrope_frequency_update), its short factors within it.
        short, long_, original = config["longrope_choice"]
        a.rope_longrope = long_ if a.seq > original else short
    for name in ["batch", "seq", "dim", "heads", "kv_heads", "ffn", "vocab",
                 "layers"]:
        if getattr(a, name) < 1:
            p.error("--%s must be positive" % name.replace("_", "-"))
    if a.head_dim is None and a.dim % a.heads or a.heads % a.kv_heads or (
            (a.head_dim or a.dim // a.heads) % 2):
        p.error("--dim must split into --heads even head dimensions (or "
                "--head-dim be even), and --kv-heads divide --heads")
    if a.head_dim is not None and a.head_dim < 1:
        p.error("--head-dim must be positive")
    if a.sliding_window is not None and a.sliding_window < 1:
        p.error("--sliding-window must be positive")
    if a.global_every is not None:
        if a.layer_types is not None:
            p.error("--global-every writes the layer types: not with "
                    "--layer-types")
        if a.global_every < 1:
            p.error("--global-every must be positive")
        a.layer_types = global_every(a.global_every, a.layers)
    if a.layer_types is not None:
        names = {"sliding_attention": "sliding", "full_attention": "full",
                 "sliding": "sliding", "full": "full"}
        if any(t not in names for t in a.layer_types):
            p.error("--layer-types takes sliding or full per layer")
        a.layer_types = [names[t] for t in a.layer_types]
        if len(a.layer_types) != a.layers:
            p.error("--layer-types gives %d layers, the model has %d" %
                    (len(a.layer_types), a.layers))
        if "sliding" in a.layer_types and a.sliding_window is None:
            p.error("sliding layers need --sliding-window N")
    if a.local_theta is not None and not (
            a.layer_types and "sliding" in a.layer_types and
            a.local_theta > 0):
        p.error("--local-theta is the sliding layers' positive theta: give "
                "--layer-types or --global-every with sliding layers")
    if a.global_rope_linear is not None and not (
            a.layer_types and "full" in a.layer_types and
            a.global_rope_linear >= 1):
        p.error("--global-rope-linear scales the full layers' rope by a "
                "factor >= 1: give --layer-types or --global-every with full "
                "layers")
    if a.global_rope_linear is not None and (a.rope_scaling is not None or
                                             a.rope_linear is not None):
        p.error("--global-rope-linear is a rope scaling of its own: not with "
                "--rope-scaling or --rope-linear")
    if sum(x is not None for x in (a.rope_scaling, a.rope_linear,
                                   a.rope_dynamic, a.rope_yarn,
                                   a.rope_longrope)) > 1:
        p.error("--rope-scaling, --rope-linear, --rope-dynamic, --rope-yarn "
                "and --rope-longrope are five rope scalings: give one")
    if a.longrope_attention_factor is not None and a.rope_longrope is None:
        p.error("--longrope-attention-factor is LongRoPE's: give "
                "--rope-longrope")
    if a.rope_longrope is not None:
        if a.global_rope_linear is not None:
            p.error("--rope-longrope is a rope scaling of every layer: not "
                    "with --global-rope-linear")
        if a.longrope_attention_factor is None:
            a.longrope_attention_factor = 1.0
        if not a.longrope_attention_factor > 0:
            p.error("--longrope-attention-factor must be positive")
    if a.partial_rotary is not None:
        if not 0 < a.partial_rotary <= 1:
            p.error("--partial-rotary must be in (0, 1]")
        if (a.rope_scaling is not None or a.rope_linear is not None or
                a.rope_yarn is not None or a.global_rope_linear is not None):
            p.error("--partial-rotary turns part of each head: not with a "
                    "Llama 3.1, linear or YaRN rope scaling")
    if a.rope_yarn is not None:
        factor, original, fast, slow, truncate = a.rope_yarn
        if not (factor >= 1 and original > 0 and fast > 0 and slow > 0 and
                truncate in (0, 1)):
            p.error("--rope-yarn needs factor >= 1, original, fast and slow "
                    "> 0 and truncate 0 or 1")
        if a.global_rope_linear is not None:
            p.error("--rope-yarn is a rope scaling of every layer: not with "
                    "--global-rope-linear")
        if a.yarn_attention_factor is None:
            a.yarn_attention_factor = (1.0 if factor <= 1 else
                                       0.1 * math.log(factor) + 1.0)
        if not a.yarn_attention_factor > 0:
            p.error("--yarn-attention-factor must be positive")
    elif a.yarn_attention_factor is not None:
        p.error("--yarn-attention-factor is YaRN's: give --rope-yarn")
    if a.rope_linear is not None and not a.rope_linear >= 1:
        p.error("--rope-linear's factor must be >= 1")
    if a.rope_dynamic is not None and not (a.rope_dynamic[0] >= 1 and
                                           a.rope_dynamic[1] >= 1):
        p.error("--rope-dynamic's factor and original must be >= 1")
    for name in ["embedding_multiplier", "residual_multiplier",
                 "attention_multiplier", "logits_scaling"]:
        if getattr(a, name) is not None and not getattr(a, name) > 0:
            p.error("--%s must be positive" % name.replace("_", "-"))
    if a.label_smoothing is not None and not 0 <= a.label_smoothing <= 1:
        p.error("--label-smoothing must be in [0, 1]")
    for name in ["attn_softcap", "final_softcap"]:
        value = getattr(a, name)
        if value is not None and not 0 < value < math.inf:
            p.error("--%s must be positive and finite" %
                    name.replace("_", "-"))
    if a.embed_scale and a.embedding_multiplier is not None:
        p.error("--embed-scale is an embedding multiplier of sqrt(dim): not "
                "with --embedding-multiplier")
    return a, p
