// Tests Phi-3 against Hugging Face's definitions, as llama-hf.mlir tests the
// Llama it follows: a Phi3ForCausalLM is a Llama (no biases, its own head)
// with Mistral's sliding window, whose checkpoint fuses each layer's q, k
// and v into self_attn.qkv_proj.weight [(H + 2 Hkv) hd, dim] and gate and
// up into mlp.gate_up_proj.weight [2 F, dim]. A Phi-3 of 2 layers (width
// 16, 4 query heads over 2 key/value heads: qkv_proj 16 -> 32; SwiGLU 24,
// gate_up_proj 16 -> 48; vocabulary 20, rope theta 10000, RMSNorm eps 1e-5,
// a sliding window of 3 keys of 6 positions), its model written by
// scripts/llama-model.py from the config.json Inputs/llama_reference.py
// writes, in f64: random weights in Hugging Face's fused layout, split by
// scripts/llama-checkpoint.py --config, give the reference forward's loss
// to 1e-12, and fuse back (to-hf --config) to the file they came from. The
// config and the flags give the same model; without the window, another
// loss. The fused file without --config is refused in one line. (Phi-3's
// 128k configs, LongRoPE, and Phi-4-mini's partial rope: longrope-hf.mlir.)
//
// RUN: rm -rf %t && mkdir -p %t
// RUN: python3 %S/Inputs/llama_reference.py make %t --phi3 --layers 2 --dim 16 --heads 4 --kv-heads 2 --ffn 24 --vocab 20 --seq 6 --batch 2 --theta 10000 --eps 1e-5 --sliding-window 3
// RUN: python3 %scripts/llama-model.py --config %t/config.json --seq 6 --batch 2 --dtype f64 > %t/tiny.mlir
// RUN: FileCheck %s --check-prefix=PHI3 < %t/tiny.mlir
// RUN: python3 %scripts/llama-model.py --layers 2 --dim 16 --heads 4 --kv-heads 2 --ffn 24 --vocab 20 --seq 6 --batch 2 --sliding-window 3 --dtype f64 | diff - %t/tiny.mlir
// RUN: python3 %scripts/llama-checkpoint.py to-tessel %t/hf.safetensors --config %t/config.json -o %t/tessel.safetensors
// RUN: tessel-run %t/tiny.mlir --eval --steps 1 --quiet --load %t/tessel.safetensors --data %t/tokens.bin --data-dtype i32 --metrics %t/eval.jsonl
// RUN: python3 %S/Inputs/llama_reference.py compare %t %t/eval.jsonl | FileCheck %s
// Without the window: another loss.
// RUN: python3 %scripts/llama-model.py --layers 2 --dim 16 --heads 4 --kv-heads 2 --ffn 24 --vocab 20 --seq 6 --batch 2 --dtype f64 > %t/full.mlir
// RUN: tessel-run %t/full.mlir --eval --steps 1 --quiet --load %t/tessel.safetensors --data %t/tokens.bin --data-dtype i32 --metrics %t/full.jsonl
// RUN: not python3 %S/Inputs/llama_reference.py compare %t %t/full.jsonl
// Back to Hugging Face's layout, fused (the config says phi3, or --fuse):
// the same tensors; without either, Llama's separate ones.
// RUN: python3 %scripts/llama-checkpoint.py to-hf %t/tessel.safetensors --config %t/config.json -o %t/back.safetensors
// RUN: python3 %S/Inputs/llama_reference.py same %t/hf.safetensors %t/back.safetensors | FileCheck %s --check-prefix=SAME
// RUN: python3 %scripts/llama-checkpoint.py to-hf %t/tessel.safetensors --fuse -o %t/fused.safetensors
// RUN: python3 %S/Inputs/llama_reference.py same %t/hf.safetensors %t/fused.safetensors | FileCheck %s --check-prefix=SAME
// RUN: python3 %scripts/llama-checkpoint.py to-hf %t/tessel.safetensors -o %t/llama.safetensors
// RUN: python3 %scripts/llama-checkpoint.py to-tessel %t/llama.safetensors -o %t/again.safetensors
// RUN: python3 %S/Inputs/llama_reference.py same %t/tessel.safetensors %t/again.safetensors | FileCheck %s --check-prefix=AGAIN
// The fused file without the config to split qkv_proj by: refused.
// RUN: not python3 %scripts/llama-checkpoint.py to-tessel %t/hf.safetensors -o %t/bad.safetensors 2>&1 | FileCheck %s --check-prefix=NOCONFIG
// RUN: not ls %t/bad.safetensors

// CHECK: relative error
// CHECK: match
// PHI3: Attention is causal within a sliding window of 3 keys
// PHI3: %q0 = nn.matmul %x, %w_q : (tensor<2x6x16xf64>, tensor<16x16xf64>) -> tensor<2x6x16xf64>
// PHI3: %k0 = nn.matmul %x, %w_k : (tensor<2x6x16xf64>, tensor<16x8xf64>) -> tensor<2x6x8xf64>
// PHI3: nn.attention %q, %k, %v causal window 3 :
// PHI3-NOT: .bias
// PHI3: %logits = nn.matmul %hf, %w_out
// SAME: same 15 tensors
// AGAIN: same 12 tensors
// NOCONFIG: llama-checkpoint: model.layers.0.self_attn.qkv_proj.weight is q, k and v fused (Phi-3's): --config config.json needed to split it
// NOCONFIG-NOT: {{.}}
