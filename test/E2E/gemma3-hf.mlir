// Tests Gemma 3 (Gemma3ForCausalLM, model_type gemma3_text) against Hugging
// Face's definition, as gemma-hf.mlir tests the Gemma it extends. A model
// of 3 layers (width 16, 4 query heads of 8 over 2 key/value heads, GeGLU
// 24, vocabulary 20, RMSNorm eps 1e-6, the head tied), written by
// scripts/llama-model.py from the config.json Inputs/llama_reference.py
// writes: Gemma's (1 + w) norms, tanh GELU and sqrt(width) embeddings; four
// norms a layer (input_layernorm, post_attention_layernorm over the
// attention's output, pre_feedforward_layernorm, post_feedforward_layernorm
// over the MLP's); QK-norm over each head; scores times
// query_pre_attn_scalar^-1/2 (8 here); layer_types local, global, local,
// the local layers within a sliding window of 3 keys at
// rope_local_base_freq 10000, the global one at rope_theta 1000000. In f64
// its loss equals the plain-Python forward's to 1e-12 (measured 2.2e-16),
// the checkpoint converts back to the file it came from, and its gradients
// match finite differences. With every layer local the loss is another.
// An older config's sliding_window_pattern gives the same layers. Gemma 3
// 4B's rope_scaling (linear, factor 8) scales the global layers' rope
// only (nn.rope's layer_scalings), which the reference's forward matches
// too and a scaling of every layer does not. A config that soft-caps the
// logits (null in the released ones) gets the cap, as Gemma 2's; another
// rope scaling is refused in one line. Gemma 3 4B on is
// Gemma3ForConditionalGeneration: its config nests the text model's
// (text_config) and its file holds it under language_model. beside a
// vision tower; llama-model.py --config and the converter take the text
// model, the same model and loss.
//
// The test model ParallelEquivalenceTest trains on meshes is the script's:
// RUN: python3 %scripts/llama-model.py --layers 4 --dim 64 --heads 4 --kv-heads 2 --head-dim 32 --ffn 128 --vocab 128 --seq 32 --batch 4 --mlp-act gelu-tanh --norm-offset --embed-scale --tie-embeddings --sandwich-norms --qk-norm --sliding-window 8 --global-every 2 --local-theta 10000 --theta 1000000 --attention-multiplier 0.125 | diff - %S/../launcher/Inputs/gemma3.mlir
// RUN: rm -rf %t && mkdir -p %t
// RUN: python3 %S/Inputs/llama_reference.py make %t --layers 3 --dim 16 --heads 4 --kv-heads 2 --head-dim 8 --ffn 24 --vocab 20 --seq 6 --batch 2 --theta 1000000 --eps 1e-6 --sliding-window 3 --layer-types sliding,full,sliding --local-theta 10000 --gemma3 8 --tie-embeddings
// RUN: python3 %scripts/llama-model.py --config %t/config.json --seq 6 --batch 2 --dtype f64 > %t/gemma3.mlir
// RUN: FileCheck %s --check-prefix=MODEL < %t/gemma3.mlir
// RUN: python3 %scripts/llama-checkpoint.py to-tessel %t/hf.safetensors -o %t/tessel.safetensors
// RUN: tessel-run %t/gemma3.mlir --eval --steps 1 --quiet --load %t/tessel.safetensors --data %t/tokens.bin --data-dtype i32 --metrics %t/eval.jsonl
// RUN: python3 %S/Inputs/llama_reference.py compare %t %t/eval.jsonl | FileCheck %s
// RUN: python3 %scripts/llama-checkpoint.py to-hf %t/tessel.safetensors -o %t/back.safetensors
// RUN: python3 %S/Inputs/llama_reference.py same %t/hf.safetensors %t/back.safetensors | FileCheck %s --check-prefix=SAME
// RUN: tessel-run %t/gemma3.mlir --check-grads --quiet --load %t/tessel.safetensors --data %t/tokens.bin --data-dtype i32
// Every layer local: another loss.
// RUN: python3 %scripts/llama-model.py --config %t/config.json --seq 6 --batch 2 --dtype f64 --layer-types sliding,sliding,sliding > %t/local.mlir
// RUN: tessel-run %t/local.mlir --eval --steps 1 --quiet --load %t/tessel.safetensors --data %t/tokens.bin --data-dtype i32 --metrics %t/local.jsonl
// RUN: not python3 %S/Inputs/llama_reference.py compare %t %t/local.jsonl
// sliding_window_pattern 2 (layer 1 global) in place of layer_types: the
// same model.
// RUN: python3 -c "import json, sys; c = json.load(open(sys.argv[1])); del c['layer_types']; c['sliding_window_pattern'] = 2; json.dump(c, open(sys.argv[2], 'w'))" %t/config.json %t/pattern.json
// RUN: python3 %scripts/llama-model.py --config %t/pattern.json --seq 6 --batch 2 --dtype f64 | diff - %t/gemma3.mlir
// A logits' cap, and a refusal.
// RUN: sed 's/"final_logit_softcapping": null/"final_logit_softcapping": 30.0/' %t/config.json > %t/softcap.json
// RUN: python3 %scripts/llama-model.py --config %t/softcap.json | FileCheck %s --check-prefix=SOFTCAP
// RUN: python3 -c "import json, sys; c = json.load(open(sys.argv[1])); c['rope_scaling'] = {'rope_type': 'dynamic', 'factor': 8.0}; json.dump(c, open(sys.argv[2], 'w'))" %t/config.json %t/dynamic.json
// RUN: not python3 %scripts/llama-model.py --config %t/dynamic.json 2>&1 | FileCheck %s --check-prefix=DYNAMIC
// The multimodal file and config (Gemma 3 4B on): the text model.
// RUN: mkdir -p %t/multimodal
// RUN: python3 %S/Inputs/llama_reference.py make %t/multimodal --layers 3 --dim 16 --heads 4 --kv-heads 2 --head-dim 8 --ffn 24 --vocab 20 --seq 6 --batch 2 --theta 1000000 --eps 1e-6 --sliding-window 3 --layer-types sliding,full,sliding --local-theta 10000 --gemma3 8 --tie-embeddings --rope-linear 8 --multimodal
// RUN: FileCheck %s --check-prefix=NESTED < %t/multimodal/config.json
// RUN: python3 %scripts/llama-model.py --config %t/multimodal/config.json --seq 6 --batch 2 --dtype f64 > %t/multimodal/gemma3.mlir
// RUN: python3 %scripts/llama-checkpoint.py to-tessel %t/multimodal/hf.safetensors -o %t/multimodal/tessel.safetensors
// RUN: tessel-run %t/multimodal/gemma3.mlir --eval --steps 1 --quiet --load %t/multimodal/tessel.safetensors --data %t/multimodal/tokens.bin --data-dtype i32 --metrics %t/multimodal/eval.jsonl
// RUN: python3 %S/Inputs/llama_reference.py compare %t/multimodal %t/multimodal/eval.jsonl | FileCheck %s
// The global layers' linear scaling (Gemma 3 4B on).
// RUN: mkdir -p %t/scaled
// RUN: python3 %S/Inputs/llama_reference.py make %t/scaled --layers 3 --dim 16 --heads 4 --kv-heads 2 --head-dim 8 --ffn 24 --vocab 20 --seq 6 --batch 2 --theta 1000000 --eps 1e-6 --sliding-window 3 --layer-types sliding,full,sliding --local-theta 10000 --gemma3 8 --tie-embeddings --rope-linear 8
// RUN: python3 %scripts/llama-model.py --config %t/scaled/config.json --seq 6 --batch 2 --dtype f64 > %t/scaled/gemma3.mlir
// RUN: FileCheck %s --check-prefix=SCALED < %t/scaled/gemma3.mlir
// RUN: python3 %scripts/llama-checkpoint.py to-tessel %t/scaled/hf.safetensors -o %t/scaled/tessel.safetensors
// RUN: tessel-run %t/scaled/gemma3.mlir --eval --steps 1 --quiet --load %t/scaled/tessel.safetensors --data %t/scaled/tokens.bin --data-dtype i32 --metrics %t/scaled/eval.jsonl
// RUN: python3 %S/Inputs/llama_reference.py compare %t/scaled %t/scaled/eval.jsonl | FileCheck %s
// RUN: tessel-run %t/scaled/gemma3.mlir --check-grads --quiet --load %t/scaled/tessel.safetensors --data %t/scaled/tokens.bin --data-dtype i32
// RUN: python3 %scripts/llama-model.py --layers 3 --dim 16 --heads 4 --kv-heads 2 --head-dim 8 --ffn 24 --vocab 20 --seq 6 --batch 2 --theta 1000000 --eps 1e-6 --mlp-act gelu-tanh --norm-offset --embed-scale --tie-embeddings --sandwich-norms --qk-norm --attention-multiplier 0.3535533905932738 --sliding-window 3 --layer-types sliding,full,sliding --local-theta 10000 --rope-linear 8 --dtype f64 > %t/scaled/every.mlir
// RUN: tessel-run %t/scaled/every.mlir --eval --steps 1 --quiet --load %t/scaled/tessel.safetensors --data %t/scaled/tokens.bin --data-dtype i32 --metrics %t/scaled/every.jsonl
// RUN: not python3 %S/Inputs/llama_reference.py compare %t/scaled %t/scaled/every.jsonl

// MODEL: Each branch has an RMSNorm over its input and one over its output
// MODEL: %x = nn.rms_norm %h, %attn_norm_g
// MODEL: %q2 = nn.rms_norm %q1, %q_norm_g
// MODEL: nn.rope %q2 {theta = 1000000.0 : f64, layer_thetas = array<f64: 10000.0, 1000000.0, 10000.0>}
// MODEL: nn.attention %q, %k, %v causal {layer_windows = array<i64: 3, 0, 3>, scale = 0.3535533905932738 : f64}
// MODEL: %on = nn.rms_norm %o, %attn_post_norm_g
// MODEL: %y = nn.rms_norm %h1, %mlp_norm_g
// MODEL: %g = nn.gelu %g0 approximate
// MODEL: %dn = nn.rms_norm %d, %mlp_post_norm_g
// MODEL: nn.param = "layers.attention_post_norm.weight"
// MODEL: nn.param = "layers.ffn_post_norm.weight"
// CHECK: match
// SAME: same
// SOFTCAP-NOT: softcap
// SOFTCAP: %logits = nn.mul %zt, %cap_b
// DYNAMIC: dynamic.json: rope_scaling {"rope_type": "dynamic", "factor": 8.0}: Gemma 3's global layers scale linearly (a factor >= 1)
// NESTED: "model_type": "gemma3",
// NESTED: "text_config": {
// SCALED: layer_scalings = array<f64: 0.0, 0.0, 0.0, 0.0, 8.0, 1.0, 2.0, 1.0, 0.0, 0.0, 0.0, 0.0>
