// Tests Tessel's Llama against Hugging Face's definition: a Llama of 2
// layers (width 16, 4 query heads over 2 key/value heads, SwiGLU 24,
// vocabulary 20, rope theta 500000, RMSNorm eps 1e-6) written by
// scripts/llama-model.py in f64; random weights in Hugging Face's layout
// converted by scripts/llama-checkpoint.py; the first batch's loss
// (tessel-run --eval) equals a plain-Python forward of transformers'
// LlamaForCausalLM (Inputs/llama_reference.py: rotate_half rope,
// repeat_kv, RMSNorm, SwiGLU) to 1e-12, and the conversion back is the
// file it came from, byte for byte; so with Llama 3.1's rope scaling, and
// with Mistral's sliding window (3 keys of 6 positions), whose loss the
// unwindowed model's is not. The config.json the reference writes, read by
// llama-model.py --config, gives the model its flags gave; a config.json
// the model cannot be (a gelu MLP, LongRoPE's rope) is refused in one line
// naming the field. The script's defaults write
// examples/llama.mlir itself.
//
// RUN: rm -rf %t && mkdir -p %t
// RUN: python3 %scripts/llama-model.py | diff - %examples/llama.mlir
// RUN: python3 %S/Inputs/llama_reference.py make %t --layers 2 --dim 16 --heads 4 --kv-heads 2 --ffn 24 --vocab 20 --seq 6 --batch 2 --theta 500000 --eps 1e-6
// RUN: python3 %scripts/llama-model.py --layers 2 --dim 16 --heads 4 --kv-heads 2 --ffn 24 --vocab 20 --seq 6 --batch 2 --theta 500000 --eps 1e-6 --dtype f64 > %t/tiny.mlir
// RUN: python3 %scripts/llama-checkpoint.py to-tessel %t/hf.safetensors -o %t/tessel.safetensors
// RUN: tessel-run %t/tiny.mlir --eval --steps 1 --quiet --load %t/tessel.safetensors --data %t/tokens.bin --data-dtype i32 --metrics %t/eval.jsonl
// RUN: python3 %S/Inputs/llama_reference.py compare %t %t/eval.jsonl | FileCheck %s
// RUN: python3 %scripts/llama-checkpoint.py to-hf %t/tessel.safetensors -o %t/back.safetensors
// RUN: python3 %S/Inputs/llama_reference.py same %t/hf.safetensors %t/back.safetensors | FileCheck %s --check-prefix=SAME
// With Llama 3.1's rope scaling (factor 8, low 1, high 4, original 64: at
// theta 500000 and head dimension 4, pair 0 keeps its frequency, pair 1's
// is divided by 8), the same agreement (measured 1.2e-16).
// RUN: mkdir -p %t/scaled
// RUN: python3 %S/Inputs/llama_reference.py make %t/scaled --layers 2 --dim 16 --heads 4 --kv-heads 2 --ffn 24 --vocab 20 --seq 6 --batch 2 --theta 500000 --eps 1e-6 --rope-scaling 8,1,4,64
// RUN: python3 %scripts/llama-model.py --layers 2 --dim 16 --heads 4 --kv-heads 2 --ffn 24 --vocab 20 --seq 6 --batch 2 --theta 500000 --eps 1e-6 --rope-scaling 8,1,4,64 --dtype f64 > %t/scaled/tiny.mlir
// RUN: python3 %scripts/llama-checkpoint.py to-tessel %t/scaled/hf.safetensors -o %t/scaled/tessel.safetensors
// RUN: tessel-run %t/scaled/tiny.mlir --eval --steps 1 --quiet --load %t/scaled/tessel.safetensors --data %t/scaled/tokens.bin --data-dtype i32 --metrics %t/scaled/eval.jsonl
// RUN: python3 %S/Inputs/llama_reference.py compare %t/scaled %t/scaled/eval.jsonl | FileCheck %s --check-prefix=SCALED
// Unscaled weights under the scaled model: another loss.
// RUN: tessel-run %t/scaled/tiny.mlir --eval --steps 1 --quiet --load %t/tessel.safetensors --data %t/tokens.bin --data-dtype i32 --metrics %t/scaled/other.jsonl
// RUN: not python3 %S/Inputs/llama_reference.py compare %t %t/scaled/other.jsonl
// make's config.json gives the model the flags gave.
// RUN: python3 %scripts/llama-model.py --config %t/config.json --seq 6 --batch 2 --dtype f64 | diff - %t/tiny.mlir
// Mistral's sliding window of 3 keys, model from its config.json: the same
// agreement; the same weights under the unwindowed model: another loss.
// RUN: mkdir -p %t/window
// RUN: python3 %S/Inputs/llama_reference.py make %t/window --layers 2 --dim 16 --heads 4 --kv-heads 2 --ffn 24 --vocab 20 --seq 6 --batch 2 --theta 500000 --eps 1e-6 --sliding-window 3
// RUN: python3 %scripts/llama-model.py --config %t/window/config.json --seq 6 --batch 2 --dtype f64 > %t/window/tiny.mlir
// RUN: FileCheck %s --check-prefix=MASK < %t/window/tiny.mlir
// RUN: python3 %scripts/llama-checkpoint.py to-tessel %t/window/hf.safetensors -o %t/window/tessel.safetensors
// RUN: tessel-run %t/window/tiny.mlir --eval --steps 1 --quiet --load %t/window/tessel.safetensors --data %t/window/tokens.bin --data-dtype i32 --metrics %t/window/eval.jsonl
// RUN: python3 %S/Inputs/llama_reference.py compare %t/window %t/window/eval.jsonl | FileCheck %s --check-prefix=WINDOW
// RUN: tessel-run %t/tiny.mlir --eval --steps 1 --quiet --load %t/window/tessel.safetensors --data %t/window/tokens.bin --data-dtype i32 --metrics %t/window/other.jsonl
// RUN: not python3 %S/Inputs/llama_reference.py compare %t/window %t/window/other.jsonl
// A config.json the model cannot be: one line naming the file and field.
// RUN: echo '{"model_type": "llama", "hidden_act": "gelu"}' > %t/bad-act.json
// RUN: not python3 %scripts/llama-model.py --config %t/bad-act.json 2>&1 | FileCheck %s --check-prefix=GELU
// RUN: echo '{"model_type": "llama", "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}}' > %t/bad-rope.json
// RUN: not python3 %scripts/llama-model.py --config %t/bad-rope.json 2>&1 | FileCheck %s --check-prefix=BADROPE
// A trained checkpoint goes to Hugging Face's layout and back unchanged
// (its optimizer states stay behind).
// RUN: tessel-run %t/tiny.mlir --steps 1 --quiet --load %t/tessel.safetensors --data %t/tokens.bin --data-dtype i32 --save %t/trained.safetensors
// RUN: python3 %scripts/llama-checkpoint.py to-hf %t/trained.safetensors -o %t/trained-hf.safetensors
// RUN: python3 %scripts/llama-checkpoint.py to-tessel %t/trained-hf.safetensors -o %t/trained-again.safetensors
// RUN: tessel-run %t/tiny.mlir --eval --steps 1 --quiet --load %t/trained-again.safetensors --data %t/tokens.bin --data-dtype i32 --metrics %t/a.jsonl
// RUN: tessel-run %t/tiny.mlir --eval --steps 1 --quiet --load %t/trained.safetensors --data %t/tokens.bin --data-dtype i32 --metrics %t/b.jsonl
// RUN: sed 's/,"microbatches.*//' %t/a.jsonl > %t/a.loss
// RUN: sed 's/,"microbatches.*//' %t/b.jsonl > %t/b.loss
// RUN: diff %t/a.loss %t/b.loss
// Not a checkpoint, or one without a layer's tensor: one line, no output.
// RUN: not python3 %scripts/llama-checkpoint.py to-tessel %t/tokens.bin -o %t/bad.safetensors 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not python3 %scripts/llama-checkpoint.py to-hf %t/hf.safetensors -o %t/bad.safetensors 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not ls %t/bad.safetensors

// CHECK: relative error 0
// CHECK: match
// SCALED: match
// MASK: nn.attention %q, %k, %v causal window 3 :
// WINDOW: match
// SAME: same 21 tensors
// BAD: llama-checkpoint: {{.*}}tokens.bin: header of {{[0-9]+}} bytes past the end of the file
// MISSING: llama-checkpoint: missing layers.attention_norm.weight
// GELU: llama-model.py: error: {{.*}}bad-act.json: hidden_act "gelu"
// BADROPE: llama-model.py: error: {{.*}}bad-rope.json: rope_scaling of type "mrope": only llama3's, linear, dynamic, yarn or longrope scaling
