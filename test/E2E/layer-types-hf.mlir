// Tests per-layer attention (local layers within a sliding window beside
// global ones, Hugging Face's layer_types) against transformers'
// definitions (Inputs/llama_reference.py), in f64 at context 6:
//
// - A Qwen2 whose config.json has use_sliding_window from layer
//   max_window_layers = 1 on: llama-model.py --config writes nn.attention's
//   layer_windows [0, 3]; its loss equals the plain-Python forward's, where
//   the window on every layer, or on none, gives another.
// - Gemma 3's pattern by flags: --global-every 2 (layer 1 global) and the
//   local layers' rope at --local-theta 10000 beside the global theta
//   500000 (nn.rope's layer_thetas); its loss equals the reference's, and
//   its gradients (through attention_grad and the inverse rope, each
//   reading its layer's entry) match finite differences.
//
// The test model ParallelEquivalenceTest trains on meshes (3 local layers,
// then a global one) is the script's:
// RUN: python3 %scripts/llama-model.py --layers 4 --dim 64 --heads 4 --kv-heads 2 --ffn 128 --vocab 128 --seq 32 --batch 4 --sliding-window 8 --global-every 4 --local-theta 10000 --theta 500000 | diff - %S/../launcher/Inputs/llama_local_global.mlir
// RUN: rm -rf %t && mkdir -p %t/qwen %t/local
// RUN: python3 %S/Inputs/llama_reference.py make %t/qwen --layers 2 --dim 16 --heads 4 --kv-heads 2 --ffn 24 --vocab 20 --seq 6 --batch 2 --theta 1000000 --eps 1e-6 --qkv-bias --sliding-window 3 --layer-types full,sliding
// RUN: FileCheck %s --check-prefix=CONFIG < %t/qwen/config.json
// RUN: python3 %scripts/llama-model.py --config %t/qwen/config.json --seq 6 --batch 2 --dtype f64 > %t/qwen/tiny.mlir
// RUN: FileCheck %s --check-prefix=QWEN < %t/qwen/tiny.mlir
// RUN: python3 %scripts/llama-checkpoint.py to-tessel %t/qwen/hf.safetensors -o %t/qwen/tessel.safetensors
// RUN: tessel-run %t/qwen/tiny.mlir --eval --steps 1 --quiet --load %t/qwen/tessel.safetensors --data %t/qwen/tokens.bin --data-dtype i32 --metrics %t/qwen/eval.jsonl
// RUN: python3 %S/Inputs/llama_reference.py compare %t/qwen %t/qwen/eval.jsonl | FileCheck %s
// RUN: python3 %scripts/llama-model.py --config %t/qwen/config.json --seq 6 --batch 2 --dtype f64 --layer-types sliding,sliding > %t/qwen/every.mlir
// RUN: tessel-run %t/qwen/every.mlir --eval --steps 1 --quiet --load %t/qwen/tessel.safetensors --data %t/qwen/tokens.bin --data-dtype i32 --metrics %t/qwen/every.jsonl
// RUN: not python3 %S/Inputs/llama_reference.py compare %t/qwen %t/qwen/every.jsonl
// RUN: python3 %scripts/llama-model.py --config %t/qwen/config.json --seq 6 --batch 2 --dtype f64 --layer-types full,full > %t/qwen/none.mlir
// RUN: tessel-run %t/qwen/none.mlir --eval --steps 1 --quiet --load %t/qwen/tessel.safetensors --data %t/qwen/tokens.bin --data-dtype i32 --metrics %t/qwen/none.jsonl
// RUN: not python3 %S/Inputs/llama_reference.py compare %t/qwen %t/qwen/none.jsonl
//
// RUN: python3 %S/Inputs/llama_reference.py make %t/local --layers 2 --dim 16 --heads 4 --kv-heads 2 --ffn 24 --vocab 20 --seq 6 --batch 2 --theta 500000 --eps 1e-6 --sliding-window 3 --layer-types sliding,full --local-theta 10000
// RUN: python3 %scripts/llama-model.py --layers 2 --dim 16 --heads 4 --kv-heads 2 --ffn 24 --vocab 20 --seq 6 --batch 2 --theta 500000 --eps 1e-6 --sliding-window 3 --global-every 2 --local-theta 10000 --dtype f64 > %t/local/tiny.mlir
// RUN: FileCheck %s --check-prefix=LOCAL < %t/local/tiny.mlir
// RUN: python3 %scripts/llama-checkpoint.py to-tessel %t/local/hf.safetensors -o %t/local/tessel.safetensors
// RUN: tessel-run %t/local/tiny.mlir --eval --steps 1 --quiet --load %t/local/tessel.safetensors --data %t/local/tokens.bin --data-dtype i32 --metrics %t/local/eval.jsonl
// RUN: python3 %S/Inputs/llama_reference.py compare %t/local %t/local/eval.jsonl | FileCheck %s
// RUN: tessel-run %t/local/tiny.mlir --check-grads --quiet --load %t/local/tessel.safetensors --data %t/local/tokens.bin --data-dtype i32
// The same layers at one theta lose another loss.
// RUN: python3 %scripts/llama-model.py --layers 2 --dim 16 --heads 4 --kv-heads 2 --ffn 24 --vocab 20 --seq 6 --batch 2 --theta 500000 --eps 1e-6 --sliding-window 3 --global-every 2 --dtype f64 > %t/local/one-theta.mlir
// RUN: tessel-run %t/local/one-theta.mlir --eval --steps 1 --quiet --load %t/local/tessel.safetensors --data %t/local/tokens.bin --data-dtype i32 --metrics %t/local/one-theta.jsonl
// RUN: not python3 %S/Inputs/llama_reference.py compare %t/local %t/local/one-theta.jsonl
//
// Refusals, one line each.
// RUN: not python3 %scripts/llama-model.py --layers 2 --layer-types sliding,full 2>&1 | FileCheck %s --check-prefix=NOWINDOW
// RUN: not python3 %scripts/llama-model.py --layers 2 --sliding-window 4 --layer-types sliding 2>&1 | FileCheck %s --check-prefix=COUNT
// RUN: not python3 %scripts/llama-model.py --layers 2 --local-theta 10000 2>&1 | FileCheck %s --check-prefix=THETA
// RUN: echo '{"model_type": "qwen2", "layer_types": ["full_attention", "chunked_attention"]}' > %t/chunked.json
// RUN: not python3 %scripts/llama-model.py --config %t/chunked.json 2>&1 | FileCheck %s --check-prefix=CHUNKED

// CONFIG: "sliding_window": 3,
// CONFIG: "use_sliding_window": true,
// CONFIG: "max_window_layers": 1
// QWEN: nn.attention %q, %k, %v causal {layer_windows = array<i64: 0, 3>}
// CHECK: match
// LOCAL: Layer 1 attends to every earlier key; the others are local, within a
// LOCAL: nn.rope %q1 {theta = 500000.0 : f64, layer_thetas = array<f64: 10000.0, 500000.0>}
// LOCAL: nn.attention %q, %k, %v causal {layer_windows = array<i64: 3, 0>}
// NOWINDOW: llama-model.py: error: sliding layers need --sliding-window N
// COUNT: llama-model.py: error: --layer-types gives 1 layers, the model has 2
// THETA: llama-model.py: error: --local-theta is the sliding layers' positive theta
// CHUNKED: llama-model.py: error: {{.*}}chunked.json: layer_types holds other than sliding_attention and full_attention
