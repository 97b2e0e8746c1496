// Tests OLMo 2 against Hugging Face's definition, as llama-hf.mlir tests
// the Llama it extends. An Olmo2ForCausalLM of 2 layers (width 16, 4 query
// heads over 2 key/value heads, SwiGLU 24, vocabulary 20, rope theta
// 500000, RMSNorm eps 1e-6, its own head), its model written by
// scripts/llama-model.py from the config.json Inputs/llama_reference.py
// writes (model_type olmo2: no norm before the attention and the MLP, an
// RMSNorm over each one's output before its residual add, and q_norm /
// k_norm over the whole q and k projections), in f64: random weights in
// Hugging Face's layout (post_attention_layernorm and
// post_feedforward_layernorm, no input_layernorm; q_norm [64], k_norm [32])
// converted by scripts/llama-checkpoint.py give the reference forward's
// loss to 1e-12 (measured 0) and convert back to the file they came from;
// the gradients match finite differences.
//
// The test model ParallelEquivalenceTest trains on meshes is the script's:
// RUN: python3 %scripts/llama-model.py --layers 2 --dim 64 --heads 4 --kv-heads 2 --ffn 128 --vocab 128 --seq 32 --batch 4 --post-norms --qk-norm-full --theta 500000 | diff - %S/../launcher/Inputs/olmo2.mlir
// RUN: rm -rf %t && mkdir -p %t
// RUN: python3 %S/Inputs/llama_reference.py make %t --layers 2 --dim 16 --heads 4 --kv-heads 2 --ffn 24 --vocab 20 --seq 6 --batch 2 --theta 500000 --eps 1e-6 --olmo2
// RUN: python3 %scripts/llama-model.py --config %t/config.json --seq 6 --batch 2 --dtype f64 > %t/olmo2.mlir
// RUN: FileCheck %s --check-prefix=MODEL < %t/olmo2.mlir
// RUN: python3 %scripts/llama-model.py --layers 2 --dim 16 --heads 4 --kv-heads 2 --ffn 24 --vocab 20 --seq 6 --batch 2 --theta 500000 --eps 1e-6 --post-norms --qk-norm-full --dtype f64 | diff - %t/olmo2.mlir
// RUN: python3 %scripts/llama-checkpoint.py to-tessel %t/hf.safetensors -o %t/tessel.safetensors
// RUN: tessel-run %t/olmo2.mlir --eval --steps 1 --quiet --load %t/tessel.safetensors --data %t/tokens.bin --data-dtype i32 --metrics %t/eval.jsonl
// RUN: python3 %S/Inputs/llama_reference.py compare %t %t/eval.jsonl | FileCheck %s
// RUN: python3 %scripts/llama-checkpoint.py to-hf %t/tessel.safetensors -o %t/back.safetensors
// RUN: python3 %S/Inputs/llama_reference.py same %t/hf.safetensors %t/back.safetensors | FileCheck %s --check-prefix=SAME
// RUN: tessel-run %t/olmo2.mlir --check-grads --quiet --load %t/tessel.safetensors --data %t/tokens.bin --data-dtype i32
// The weights under a pre-norm model: named at load (the norms' places
// differ).
// RUN: python3 %scripts/llama-model.py --config %t/config.json --seq 6 --batch 2 --dtype f64 --no-post-norms > %t/pre.mlir
// RUN: not tessel-run %t/pre.mlir --eval --steps 1 --quiet --load %t/tessel.safetensors --data %t/tokens.bin --data-dtype i32 2>&1 | FileCheck %s --check-prefix=PRE

// MODEL: %q0n = nn.rms_norm %q0, %q_norm {epsilon = 1.0e-06 : f64} : (tensor<2x6x16xf64>, tensor<16xf64>) -> tensor<2x6x16xf64>
// MODEL: %k0n = nn.rms_norm %k0, %k_norm {epsilon = 1.0e-06 : f64} : (tensor<2x6x8xf64>, tensor<8xf64>) -> tensor<2x6x8xf64>
// MODEL: %on = nn.rms_norm %o, %attn_norm
// MODEL: %h1 = nn.add %h, %on
// MODEL: %dn = nn.rms_norm %d, %mlp_norm
// MODEL: %h2 = nn.add %h1, %dn
// MODEL: nn.param = "layers.attention_post_norm.weight"
// MODEL: nn.param = "layers.ffn_post_norm.weight"
// CHECK: relative error 0
// CHECK: match
// SAME: same
// PRE: layers.attention_post_norm.weight
