// Tests LongRoPE (Hugging Face's rope_type "longrope"; Phi-3's and
// Phi-3.5's 128k contexts) and the partial rope (partial_rotary_factor:
// Phi-4-mini turns 3/4 of each head) against transformers' definitions
// (Inputs/llama_reference.py): a Phi-3 of 2 layers in f64, heads of 16,
// whose config.json has original_max_position_embeddings 4,
// max_position_embeddings 16 and short and long factors of its own. At the
// context 6 (past 4) transformers divides each pair's frequency by its long
// factor (up to 17.7), and cos and sin are times sqrt(1 + ln 4 / ln 4) =
// sqrt 2 (the turned elements only). llama-model.py --config writes
// nn.rope's longrope and attention_factor; the loss (tessel-run --eval)
// equals the plain-Python forward's to 1e-12, gradients match finite
// differences, and the plain rope loses another loss. At the context 4 the
// short factors are written. Phi-4-mini's shape, partial_rotary_factor 0.75
// (12 of 16 elements turned, 6 factors), matches the same way, and the
// whole-head model loses another loss on its weights. Configs the model
// cannot be are refused in one line.
//
// RUN: rm -rf %t && mkdir -p %t/long %t/partial
// RUN: python3 %S/Inputs/llama_reference.py make %t/long --phi3 --layers 2 --dim 32 --heads 2 --kv-heads 1 --ffn 24 --vocab 20 --seq 6 --batch 2 --theta 10000 --eps 1e-5 --rope-longrope 4,16
// RUN: python3 %scripts/llama-model.py --config %t/long/config.json --seq 6 --batch 2 --dtype f64 > %t/long/tiny.mlir
// RUN: FileCheck %s --check-prefix=LONG < %t/long/tiny.mlir
// RUN: python3 %scripts/llama-checkpoint.py to-tessel %t/long/hf.safetensors --config %t/long/config.json -o %t/long/tessel.safetensors
// RUN: tessel-run %t/long/tiny.mlir --eval --steps 1 --quiet --load %t/long/tessel.safetensors --data %t/long/tokens.bin --data-dtype i32 --metrics %t/long/eval.jsonl
// RUN: python3 %S/Inputs/llama_reference.py compare %t/long %t/long/eval.jsonl | FileCheck %s
// RUN: tessel-run %t/long/tiny.mlir --check-grads --quiet --load %t/long/tessel.safetensors --data %t/long/tokens.bin --data-dtype i32
// Within the original context: the short factors.
// RUN: python3 %scripts/llama-model.py --config %t/long/config.json --seq 4 --batch 2 --dtype f64 | FileCheck %s --check-prefix=SHORT
// The plain rope: another loss.
// RUN: python3 %scripts/llama-model.py --layers 2 --dim 32 --heads 2 --kv-heads 1 --ffn 24 --vocab 20 --seq 6 --batch 2 --eps 1e-5 --dtype f64 > %t/long/plain.mlir
// RUN: tessel-run %t/long/plain.mlir --eval --steps 1 --quiet --load %t/long/tessel.safetensors --data %t/long/tokens.bin --data-dtype i32 --metrics %t/long/plain.jsonl
// RUN: not python3 %S/Inputs/llama_reference.py compare %t/long %t/long/plain.jsonl
//
// Phi-4-mini's partial rope with LongRoPE.
// RUN: python3 %S/Inputs/llama_reference.py make %t/partial --phi3 --layers 2 --dim 32 --heads 2 --kv-heads 1 --ffn 24 --vocab 20 --seq 6 --batch 2 --theta 10000 --eps 1e-5 --rope-longrope 4,16 --partial-rotary 0.75
// RUN: python3 %scripts/llama-model.py --config %t/partial/config.json --seq 6 --batch 2 --dtype f64 > %t/partial/tiny.mlir
// RUN: FileCheck %s --check-prefix=PARTIAL < %t/partial/tiny.mlir
// RUN: python3 %scripts/llama-checkpoint.py to-tessel %t/partial/hf.safetensors --config %t/partial/config.json -o %t/partial/tessel.safetensors
// RUN: tessel-run %t/partial/tiny.mlir --eval --steps 1 --quiet --load %t/partial/tessel.safetensors --data %t/partial/tokens.bin --data-dtype i32 --metrics %t/partial/eval.jsonl
// RUN: python3 %S/Inputs/llama_reference.py compare %t/partial %t/partial/eval.jsonl | FileCheck %s
// RUN: tessel-run %t/partial/tiny.mlir --check-grads --quiet --load %t/partial/tessel.safetensors --data %t/partial/tokens.bin --data-dtype i32
// The flags write the same model.
// RUN: python3 %scripts/llama-model.py --layers 2 --dim 32 --heads 2 --kv-heads 1 --ffn 24 --vocab 20 --seq 6 --batch 2 --eps 1e-5 --dtype f64 --partial-rotary 0.75 --rope-longrope 1.0,1.9,3.5455844122715714,5.676537180435969,8.2,11.062305898749054 --longrope-attention-factor 1.4142135623730951 | diff - %t/partial/tiny.mlir
// The equivalence tests' Phi-4-mini (test/launcher/Inputs/phi4_mini.mlir).
// RUN: python3 %scripts/llama-model.py --layers 4 --dim 64 --heads 4 --kv-heads 2 --ffn 128 --vocab 128 --seq 32 --batch 4 --partial-rotary 0.75 --rope-longrope 1.0,1.5,2.25,4.0,7.5,12.0 --longrope-attention-factor 1.19 | diff - %S/../launcher/Inputs/phi4_mini.mlir
// Whole heads on its weights: another loss.
// RUN: tessel-run %t/long/tiny.mlir --eval --steps 1 --quiet --load %t/partial/tessel.safetensors --data %t/partial/tokens.bin --data-dtype i32 --metrics %t/partial/whole.jsonl
// RUN: not python3 %S/Inputs/llama_reference.py compare %t/partial %t/partial/whole.jsonl
//
// Refusals, one line each: factors that are not one a pair, a factor list
// missing, a partial rope beside YaRN, a partial factor past 1 or turning
// an odd width.
// RUN: echo '{"model_type": "phi3", "hidden_size": 32, "num_attention_heads": 2, "max_position_embeddings": 16, "original_max_position_embeddings": 4, "rope_scaling": {"type": "longrope", "short_factor": [1.0, 1.0], "long_factor": [1.0, 1.0]}}' > %t/count.json
// RUN: not python3 %scripts/llama-model.py --config %t/count.json 2>&1 | FileCheck %s --check-prefix=COUNT
// RUN: echo '{"model_type": "phi3", "original_max_position_embeddings": 4096, "rope_scaling": {"type": "su", "short_factor": [1.0]}}' > %t/nolong.json
// RUN: not python3 %scripts/llama-model.py --config %t/nolong.json 2>&1 | FileCheck %s --check-prefix=NOLONG
// RUN: not python3 %scripts/llama-model.py --partial-rotary 0.5 --rope-yarn 4,4096 2>&1 | FileCheck %s --check-prefix=YARN
// RUN: echo '{"model_type": "phi3", "partial_rotary_factor": 1.5}' > %t/wide.json
// RUN: not python3 %scripts/llama-model.py --config %t/wide.json 2>&1 | FileCheck %s --check-prefix=WIDE
// RUN: not python3 %scripts/llama-model.py --dim 24 --heads 2 --partial-rotary 0.25 2>&1 | FileCheck %s --check-prefix=ODD

// CHECK: relative error
// CHECK: match
// LONG: Rope is LongRoPE: pair i's frequency divided by its own factor.
// LONG-NEXT: Cos and sin times its attention factor 1.4142135623730951.
// LONG: %q = nn.rope %q1 {longrope = array<f64: 1.0, 1.9, 3.5455844122715714, 5.676537180435969, 8.2, 11.062305898749054, 14.227244611029162, 17.668233259706923>, attention_factor = 1.4142135623730951 : f64} : tensor<2x6x2x16xf64>
// LONG: nn.attention %q, %k, %v causal :
// SHORT: nn.rope %q1 {longrope = array<f64: 1.0, 1.05, 1.1, 1.15, 1.2, 1.25, 1.3, 1.35>, attention_factor = 1.4142135623730951 : f64} : tensor<2x4x2x16xf64>
// PARTIAL: Rope turns the first 12 of each head's 16 elements
// PARTIAL: %q = nn.rope %q1 {rotary_dim = 12 : i64, longrope = array<f64: 1.0, 1.9, 3.5455844122715714, 5.676537180435969, 8.2, 11.062305898749054>, attention_factor = 1.4142135623730951 : f64} : tensor<2x6x2x16xf64>
// COUNT: llama-model.py: error: LongRoPE needs 8 positive factors (one a pair of the 16 elements turned), got 1.0,1.0
// NOLONG: llama-model.py: error: {{.*}}nolong.json: rope_scaling of type longrope needs long_factor, a list of positive numbers
// YARN: llama-model.py: error: --partial-rotary turns part of each head: not with a Llama 3.1, linear or YaRN rope scaling
// WIDE: llama-model.py: error: {{.*}}wide.json: partial_rotary_factor 1.5 is not in (0, 1]
// ODD: llama-model.py: error: --partial-rotary 0.25 of heads of 12 turns 3 elements: it must be even and at least 2
