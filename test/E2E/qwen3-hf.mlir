// Tests Qwen3's QK-norm and a head dimension of its own against Hugging
// Face's definitions, as qwen2-hf.mlir tests the Qwen2 they follow. A Qwen3
// of 2 layers (width 16, 4 query heads of 6 over 2 key/value heads: q_proj
// 16 -> 24, k and v 16 -> 12, o_proj 24 -> 16; SwiGLU 24, vocabulary 20,
// rope theta 1000000, RMSNorm eps 1e-6; an RMSNorm of [6] over each query
// and key head before rope; no biases; the head tied to the embedding), its
// model written by scripts/llama-model.py from the config.json
// Inputs/llama_reference.py writes, in f64: random weights (q_norm and
// k_norm included) in Hugging Face's layout converted by
// scripts/llama-checkpoint.py give the reference forward's loss to 1e-12
// (measured 0 to 2e-16), and convert back to the file they came from. The
// config and the flags give the same model. The weights under a model
// without QK-norm are refused at load naming q_norm and k_norm. A Qwen3
// with use_sliding_window true windows the layers from max_window_layers
// on (nn.attention's layer_windows).
//
// The test model ParallelEquivalenceTest trains on meshes is the script's:
// RUN: python3 %scripts/llama-model.py --layers 2 --dim 64 --heads 4 --kv-heads 2 --head-dim 24 --ffn 128 --vocab 128 --seq 32 --batch 4 --qk-norm --tie-embeddings | diff - %S/../launcher/Inputs/llama_qk_norm.mlir
// RUN: rm -rf %t && mkdir -p %t
// RUN: python3 %S/Inputs/llama_reference.py make %t --layers 2 --dim 16 --heads 4 --kv-heads 2 --head-dim 6 --ffn 24 --vocab 20 --seq 6 --batch 2 --theta 1000000 --eps 1e-6 --qk-norm --tie-embeddings
// RUN: python3 %scripts/llama-model.py --config %t/config.json --seq 6 --batch 2 --dtype f64 > %t/tiny.mlir
// RUN: FileCheck %s --check-prefix=QWEN3 < %t/tiny.mlir
// RUN: python3 %scripts/llama-model.py --layers 2 --dim 16 --heads 4 --kv-heads 2 --head-dim 6 --ffn 24 --vocab 20 --seq 6 --batch 2 --theta 1000000 --eps 1e-6 --qk-norm --tie-embeddings --dtype f64 | diff - %t/tiny.mlir
// RUN: tessel-opt %t/tiny.mlir > /dev/null
// RUN: python3 %scripts/llama-checkpoint.py to-tessel %t/hf.safetensors -o %t/tessel.safetensors
// RUN: tessel-run %t/tiny.mlir --eval --steps 1 --quiet --load %t/tessel.safetensors --data %t/tokens.bin --data-dtype i32 --metrics %t/eval.jsonl
// RUN: python3 %S/Inputs/llama_reference.py compare %t %t/eval.jsonl | FileCheck %s
// Back to Hugging Face's layout: the same tensors (q_norm and k_norm per
// layer), and no lm_head.weight.
// RUN: python3 %scripts/llama-checkpoint.py to-hf %t/tessel.safetensors -o %t/back.safetensors
// RUN: python3 %S/Inputs/llama_reference.py same %t/hf.safetensors %t/back.safetensors | FileCheck %s --check-prefix=SAME
// The weights under a model without QK-norm: refused at load, naming them.
// RUN: python3 %scripts/llama-model.py --config %t/config.json --no-qk-norm --seq 6 --batch 2 --dtype f64 > %t/nonorm.mlir
// RUN: not tessel-run %t/nonorm.mlir --eval --steps 1 --quiet --load %t/tessel.safetensors --data %t/tokens.bin --data-dtype i32 2>&1 | FileCheck %s --check-prefix=NONORM
// A Qwen3 whose later layers take a sliding window: refused in one line.
// RUN: echo '{"model_type": "qwen3", "use_sliding_window": true, "sliding_window": 4, "max_window_layers": 1, "head_dim": 4, "num_hidden_layers": 2, "hidden_size": 16, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 24, "vocab_size": 20}' > %t/swa.json
// RUN: python3 %scripts/llama-model.py --config %t/swa.json | FileCheck %s --check-prefix=SWA

// CHECK: relative error
// CHECK: match
// QWEN3: %q0 = nn.matmul %x, %w_q : (tensor<2x6x16xf64>, tensor<16x24xf64>) -> tensor<2x6x24xf64>
// QWEN3-NEXT: %q1 = nn.reshape %q0 : tensor<2x6x24xf64> -> tensor<2x6x4x6xf64>
// QWEN3-NEXT: %q2 = nn.rms_norm %q1, %q_norm {epsilon = 1.0e-06 : f64} : (tensor<2x6x4x6xf64>, tensor<6xf64>) -> tensor<2x6x4x6xf64>
// QWEN3-NEXT: %q = nn.rope %q2 {theta = 1000000.0 : f64} : tensor<2x6x4x6xf64>
// QWEN3-NEXT: %k0 = nn.matmul %x, %w_k : (tensor<2x6x16xf64>, tensor<16x12xf64>) -> tensor<2x6x12xf64>
// QWEN3-NEXT: %k1 = nn.reshape %k0 : tensor<2x6x12xf64> -> tensor<2x6x2x6xf64>
// QWEN3-NEXT: %k2 = nn.rms_norm %k1, %k_norm {epsilon = 1.0e-06 : f64} : (tensor<2x6x2x6xf64>, tensor<6xf64>) -> tensor<2x6x2x6xf64>
// QWEN3-NEXT: %k = nn.rope %k2 {theta = 1000000.0 : f64} : tensor<2x6x2x6xf64>
// QWEN3: nn.attention %q, %k, %v causal : (tensor<2x6x4x6xf64>, tensor<2x6x2x6xf64>, tensor<2x6x2x6xf64>) -> tensor<2x6x4x6xf64>
// QWEN3: %o = nn.matmul %att2, %w_o : (tensor<2x6x24xf64>, tensor<24x16xf64>) -> tensor<2x6x16xf64>
// QWEN3: %q_norm: tensor<2x6xf64> {nn.param = "layers.attention.q_norm.weight",
// QWEN3-NEXT: nn.init = #nn.init<ones>,
// QWEN3-NEXT: nn.axes = ["layers", "head_dim"]}
// QWEN3: %k_norm: tensor<2x6xf64> {nn.param = "layers.attention.k_norm.weight",
// QWEN3-NEXT: nn.init = #nn.init<ones>,
// QWEN3-NEXT: nn.axes = ["layers", "head_dim"]}
// QWEN3-NOT: output.weight
// QWEN3-NOT: .bias
// QWEN3: %logits = nn.matmul %hf, %embed transpose_rhs
// SAME: same 24 tensors
// NONORM: tessel-run: error: checkpoint '{{.*}}tessel.safetensors': unexpected keys layers.attention.k_norm.weight, layers.attention.q_norm.weight
// SWA: nn.attention %q, %k, %v causal {layer_windows = array<i64: 0, 4>}
