// Tests the rope scalings of Hugging Face's config.json beyond Llama 3.1's
// against transformers' definitions (Inputs/llama_reference.py): a Llama of
// 2 layers in f64 at context 6 whose rope_scaling is of type linear
// (every frequency over the factor: positions interpolated) or dynamic
// (NTK: at a context past max_position_embeddings the base grows, here
// 500000 · (2 · 6 / 4 − 1)^(4 / 2) = 2000000 for heads of 4). llama-model.py
// --config writes each from the config; the loss (tessel-run --eval) equals
// the plain-Python forward's to 1e-12 (measured 1.2e-16), and the model
// without the scaling loses another (1.5e-2 apart). Dynamic NTK at a
// context within max_position_embeddings is the plain rope. Training
// through the linear rope matches finite differences. YaRN (Qwen's long
// contexts: rope_scaling of type yarn, factor 4 over 4096 original
// positions, heads of 16 so that its ramp keeps pairs 0-2, blends 3-5 and
// divides 6-7) writes nn.rope's yarn and scales the scores by its
// attention factor (0.1 ln 4 + 1) squared; its loss equals the forward's
// too, and its gradients match finite differences.
//
// RUN: rm -rf %t && mkdir -p %t/linear %t/dynamic %t/yarn
// RUN: python3 %S/Inputs/llama_reference.py make %t/linear --layers 2 --dim 16 --heads 4 --kv-heads 2 --ffn 24 --vocab 20 --seq 6 --batch 2 --theta 500000 --eps 1e-6 --rope-linear 4
// RUN: python3 %scripts/llama-model.py --config %t/linear/config.json --seq 6 --batch 2 --dtype f64 > %t/linear/tiny.mlir
// RUN: FileCheck %s --check-prefix=LINEAR < %t/linear/tiny.mlir
// RUN: python3 %scripts/llama-checkpoint.py to-tessel %t/linear/hf.safetensors -o %t/linear/tessel.safetensors
// RUN: tessel-run %t/linear/tiny.mlir --eval --steps 1 --quiet --load %t/linear/tessel.safetensors --data %t/linear/tokens.bin --data-dtype i32 --metrics %t/linear/eval.jsonl
// RUN: python3 %S/Inputs/llama_reference.py compare %t/linear %t/linear/eval.jsonl | FileCheck %s
// RUN: python3 %scripts/llama-model.py --layers 2 --dim 16 --heads 4 --kv-heads 2 --ffn 24 --vocab 20 --seq 6 --batch 2 --theta 500000 --eps 1e-6 --dtype f64 > %t/plain.mlir
// RUN: tessel-run %t/plain.mlir --eval --steps 1 --quiet --load %t/linear/tessel.safetensors --data %t/linear/tokens.bin --data-dtype i32 --metrics %t/linear/plain.jsonl
// RUN: not python3 %S/Inputs/llama_reference.py compare %t/linear %t/linear/plain.jsonl
// RUN: tessel-run %t/linear/tiny.mlir --check-grads --quiet --load %t/linear/tessel.safetensors --data %t/linear/tokens.bin --data-dtype i32
//
// RUN: python3 %S/Inputs/llama_reference.py make %t/dynamic --layers 2 --dim 16 --heads 4 --kv-heads 2 --ffn 24 --vocab 20 --seq 6 --batch 2 --theta 500000 --eps 1e-6 --rope-dynamic 2,4
// RUN: python3 %scripts/llama-model.py --config %t/dynamic/config.json --seq 6 --batch 2 --dtype f64 > %t/dynamic/tiny.mlir
// RUN: FileCheck %s --check-prefix=DYNAMIC < %t/dynamic/tiny.mlir
// RUN: python3 %scripts/llama-checkpoint.py to-tessel %t/dynamic/hf.safetensors -o %t/dynamic/tessel.safetensors
// RUN: tessel-run %t/dynamic/tiny.mlir --eval --steps 1 --quiet --load %t/dynamic/tessel.safetensors --data %t/dynamic/tokens.bin --data-dtype i32 --metrics %t/dynamic/eval.jsonl
// RUN: python3 %S/Inputs/llama_reference.py compare %t/dynamic %t/dynamic/eval.jsonl | FileCheck %s
// RUN: tessel-run %t/plain.mlir --eval --steps 1 --quiet --load %t/dynamic/tessel.safetensors --data %t/dynamic/tokens.bin --data-dtype i32 --metrics %t/dynamic/plain.jsonl
// RUN: not python3 %S/Inputs/llama_reference.py compare %t/dynamic %t/dynamic/plain.jsonl
// YaRN.
// RUN: python3 %S/Inputs/llama_reference.py make %t/yarn --layers 2 --dim 16 --heads 4 --kv-heads 2 --head-dim 16 --ffn 24 --vocab 20 --seq 6 --batch 2 --theta 10000 --eps 1e-6 --rope-yarn 4,4096
// RUN: python3 %scripts/llama-model.py --config %t/yarn/config.json --seq 6 --batch 2 --dtype f64 > %t/yarn/tiny.mlir
// RUN: FileCheck %s --check-prefix=YARN < %t/yarn/tiny.mlir
// RUN: python3 %scripts/llama-checkpoint.py to-tessel %t/yarn/hf.safetensors -o %t/yarn/tessel.safetensors
// RUN: tessel-run %t/yarn/tiny.mlir --eval --steps 1 --quiet --load %t/yarn/tessel.safetensors --data %t/yarn/tokens.bin --data-dtype i32 --metrics %t/yarn/eval.jsonl
// RUN: python3 %S/Inputs/llama_reference.py compare %t/yarn %t/yarn/eval.jsonl | FileCheck %s
// RUN: tessel-run %t/yarn/tiny.mlir --check-grads --quiet --load %t/yarn/tessel.safetensors --data %t/yarn/tokens.bin --data-dtype i32
// RUN: python3 %scripts/llama-model.py --layers 2 --dim 16 --heads 4 --kv-heads 2 --head-dim 16 --ffn 24 --vocab 20 --seq 6 --batch 2 --theta 10000 --eps 1e-6 --dtype f64 > %t/yarn/plain.mlir
// RUN: tessel-run %t/yarn/plain.mlir --eval --steps 1 --quiet --load %t/yarn/tessel.safetensors --data %t/yarn/tokens.bin --data-dtype i32 --metrics %t/yarn/plain.jsonl
// RUN: not python3 %S/Inputs/llama_reference.py compare %t/yarn %t/yarn/plain.jsonl
// Within max_position_embeddings dynamic NTK changes nothing.
// RUN: python3 %scripts/llama-model.py --layers 2 --dim 16 --heads 4 --kv-heads 2 --ffn 24 --vocab 20 --seq 6 --batch 2 --theta 500000 --eps 1e-6 --dtype f64 --rope-dynamic 2,8 | FileCheck %s --check-prefix=WITHIN
//
// Refusals, one line each: a factor below 1, dynamic without
// max_position_embeddings, two scalings at once.
// RUN: echo '{"model_type": "llama", "rope_scaling": {"rope_type": "linear", "factor": 0.5}}' > %t/small.json
// RUN: not python3 %scripts/llama-model.py --config %t/small.json 2>&1 | FileCheck %s --check-prefix=SMALL
// RUN: echo '{"model_type": "llama", "max_position_embeddings": null, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}' > %t/nomax.json
// RUN: not python3 %scripts/llama-model.py --config %t/nomax.json 2>&1 | FileCheck %s --check-prefix=NOMAX
// RUN: not python3 %scripts/llama-model.py --rope-linear 2 --rope-scaling 8,1,4,64 2>&1 | FileCheck %s --check-prefix=TWO
// RUN: echo '{"model_type": "llama", "max_position_embeddings": 4096, "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "beta_fast": -1}}' > %t/badyarn.json
// RUN: not python3 %scripts/llama-model.py --config %t/badyarn.json 2>&1 | FileCheck %s --check-prefix=BADYARN

// LINEAR: Rope is linear (factor 4)
// LINEAR: nn.rope %q1 {theta = 500000.0 : f64, scaling = array<f64: 4.0, 1.0, 2.0, 1.0>}
// CHECK: match
// DYNAMIC: Rope is dynamic NTK (factor 2 over 4 positions): at the context 6 its
// DYNAMIC-NEXT: base is 2000000.0.
// DYNAMIC: nn.rope %q1 {theta = 2000000.0 : f64}
// WITHIN: nn.rope %q1 {theta = 500000.0 : f64}
// SMALL: llama-model.py: error: {{.*}}small.json: rope_scaling of type linear needs a factor >= 1
// NOMAX: llama-model.py: error: {{.*}}nomax.json: max_position_embeddings missing or not a positive integer (dynamic rope scales past it)
// TWO: llama-model.py: error: --rope-scaling, --rope-linear, --rope-dynamic, --rope-yarn and --rope-longrope are five rope scalings: give one
// YARN: Rope is YaRN (factor 4 over 4096 positions, betas 32 and 1)
// YARN: nn.rope %q1 {yarn = array<f64: 4.0, 32.0, 1.0, 4096.0, 1.0>}
// YARN: nn.attention %q, %k, %v causal {scale = 0.32411924819517657 : f64}
// BADYARN: llama-model.py: error: {{.*}}badyarn.json: rope_scaling of type yarn needs positive beta_fast and beta_slow and truncate true or false
