// Tests Gemma 2 (Gemma2ForCausalLM, model_type gemma2) against Hugging
// Face's definition, as gemma3-hf.mlir tests Gemma 3. A model of 3 layers
// (width 16, 4 query heads of 8 over 2 key/value heads, GeGLU 24,
// vocabulary 20, RMSNorm eps 1e-6, the head tied), written by
// scripts/llama-model.py from the config.json Inputs/llama_reference.py
// writes: Gemma's (1 + w) norms, tanh GELU and sqrt(width) embeddings; four
// norms a layer; scores times query_pre_attn_scalar^-1/2 (8 here); every
// other layer global from layer 1 (the released configs have no
// layer_types), the others within a sliding window of 3 keys; and Gemma 2's
// soft caps: each score s (after its scale) as 2 tanh(s / 2) before the
// mask and softmax (attn_logit_softcapping, nn.attention's softcap), each
// logit z as 1.5 tanh(z / 1.5) (final_logit_softcapping, which
// tessel-fuse-logit-softcap folds into the loss's kernels). In f64 its loss
// equals the plain-Python forward's to 1e-12 (measured 3.4e-16), the
// checkpoint converts back to the file it came from, and its gradients
// match finite differences. Without either cap the loss is another. The
// layer_types newer configs write give the same model; a cap that is not a
// positive number is refused in one line.
//
// The test model ParallelEquivalenceTest trains on meshes is the script's:
// RUN: python3 %scripts/llama-model.py --layers 4 --dim 64 --heads 4 --kv-heads 2 --head-dim 32 --ffn 128 --vocab 128 --seq 32 --batch 4 --mlp-act gelu-tanh --norm-offset --embed-scale --tie-embeddings --sandwich-norms --sliding-window 8 --global-every 2 --attention-multiplier 0.0625 --attn-softcap 0.01 --final-softcap 0.1 | diff - %S/../launcher/Inputs/gemma2.mlir
// RUN: rm -rf %t && mkdir -p %t
// RUN: python3 %S/Inputs/llama_reference.py make %t --layers 3 --dim 16 --heads 4 --kv-heads 2 --head-dim 8 --ffn 24 --vocab 20 --seq 6 --batch 2 --theta 10000 --eps 1e-6 --sliding-window 3 --layer-types sliding,full,sliding --gemma2 8 --tie-embeddings --attn-softcap 2 --final-softcap 1.5
// RUN: FileCheck %s --check-prefix=CONFIG < %t/config.json
// RUN: python3 %scripts/llama-model.py --config %t/config.json --seq 6 --batch 2 --dtype f64 > %t/gemma2.mlir
// RUN: FileCheck %s --check-prefix=MODEL < %t/gemma2.mlir
// RUN: python3 %scripts/llama-checkpoint.py to-tessel %t/hf.safetensors -o %t/tessel.safetensors
// RUN: tessel-run %t/gemma2.mlir --eval --steps 1 --quiet --load %t/tessel.safetensors --data %t/tokens.bin --data-dtype i32 --metrics %t/eval.jsonl
// RUN: python3 %S/Inputs/llama_reference.py compare %t %t/eval.jsonl | FileCheck %s
// RUN: python3 %scripts/llama-checkpoint.py to-hf %t/tessel.safetensors -o %t/back.safetensors
// RUN: python3 %S/Inputs/llama_reference.py same %t/hf.safetensors %t/back.safetensors | FileCheck %s --check-prefix=SAME
// RUN: tessel-run %t/gemma2.mlir --check-grads --quiet --load %t/tessel.safetensors --data %t/tokens.bin --data-dtype i32
// Without the scores' cap, and without the logits': other losses.
// RUN: python3 -c "import json, sys; c = json.load(open(sys.argv[1])); c[sys.argv[2]] = None; json.dump(c, open(sys.argv[3], 'w'))" %t/config.json attn_logit_softcapping %t/no-attn-cap.json
// RUN: python3 %scripts/llama-model.py --config %t/no-attn-cap.json --seq 6 --batch 2 --dtype f64 > %t/no-attn-cap.mlir
// RUN: tessel-run %t/no-attn-cap.mlir --eval --steps 1 --quiet --load %t/tessel.safetensors --data %t/tokens.bin --data-dtype i32 --metrics %t/no-attn-cap.jsonl
// RUN: not python3 %S/Inputs/llama_reference.py compare %t %t/no-attn-cap.jsonl
// RUN: python3 -c "import json, sys; c = json.load(open(sys.argv[1])); c[sys.argv[2]] = None; json.dump(c, open(sys.argv[3], 'w'))" %t/config.json final_logit_softcapping %t/no-final-cap.json
// RUN: python3 %scripts/llama-model.py --config %t/no-final-cap.json --seq 6 --batch 2 --dtype f64 > %t/no-final-cap.mlir
// RUN: tessel-run %t/no-final-cap.mlir --eval --steps 1 --quiet --load %t/tessel.safetensors --data %t/tokens.bin --data-dtype i32 --metrics %t/no-final-cap.jsonl
// RUN: not python3 %S/Inputs/llama_reference.py compare %t %t/no-final-cap.jsonl
// layer_types as newer configs write them: the same model.
// RUN: python3 -c "import json, sys; c = json.load(open(sys.argv[1])); c['layer_types'] = ['sliding_attention', 'full_attention', 'sliding_attention']; json.dump(c, open(sys.argv[2], 'w'))" %t/config.json %t/types.json
// RUN: python3 %scripts/llama-model.py --config %t/types.json --seq 6 --batch 2 --dtype f64 | diff - %t/gemma2.mlir
// Refusals.
// RUN: sed 's/"attn_logit_softcapping": 2.0/"attn_logit_softcapping": -1/' %t/config.json > %t/negative.json
// RUN: not python3 %scripts/llama-model.py --config %t/negative.json 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: not python3 %scripts/llama-model.py --final-softcap 0 2>&1 | FileCheck %s --check-prefix=ZERO

// CONFIG: "model_type": "gemma2",
// CONFIG-NOT: layer_types
// CONFIG: "final_logit_softcapping": 1.5,
// CONFIG: "attn_logit_softcapping": 2.0
// MODEL: Each branch has an RMSNorm over its input and one over its output
// MODEL: Soft-capped (Gemma 2's): each attention score s as 2.0 tanh(s / 2.0)
// MODEL: %x = nn.rms_norm %h, %attn_norm_g
// MODEL-NOT: q_norm
// MODEL: nn.attention %q, %k, %v causal softcap 2.0 {layer_windows = array<i64: 3, 0, 3>, scale = 0.3535533905932738 : f64}
// MODEL: %on = nn.rms_norm %o, %attn_post_norm_g
// MODEL: %dn = nn.rms_norm %d, %mlp_post_norm_g
// MODEL: %z = nn.matmul %hf, %embed transpose_rhs
// MODEL: %cap = nn.constant dense<1.5> : tensor<f64>
// MODEL: %zt = nn.tanh %zc
// MODEL: %logits = nn.mul %zt, %cap_b
// MODEL: nn.cross_entropy %logits
// CHECK: match
// SAME: same
// NEGATIVE: negative.json: attn_logit_softcapping -1 is not a positive number
// ZERO: --final-softcap must be positive and finite
