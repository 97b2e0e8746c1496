// Tests Granite against Hugging Face's definition, as llama-hf.mlir tests
// the Llama it extends. A GraniteForCausalLM of 2 layers (width 16, 4 query
// heads over 2 key/value heads, SwiGLU 24, vocabulary 20, the head tied)
// with Granite 3's muP factors (embedding_multiplier 12, residual_multiplier
// 0.22, attention_multiplier 0.0625 in place of 1 / sqrt(4), logits_scaling
// 8), its model written by scripts/llama-model.py from the config.json
// Inputs/llama_reference.py writes, in f64: random weights in Hugging
// Face's layout converted by scripts/llama-checkpoint.py give the
// reference forward's loss to 1e-12 (measured 0); the same weights under
// the Llama without the factors give another loss; the gradients match
// finite differences. A factor that is not a positive number is refused in
// one line.
//
// The test model ParallelEquivalenceTest trains on meshes is the script's:
// RUN: python3 %scripts/llama-model.py --layers 2 --dim 64 --heads 4 --kv-heads 2 --ffn 128 --vocab 128 --seq 32 --batch 4 --tie-embeddings --embedding-multiplier 12 --residual-multiplier 0.22 --attention-multiplier 0.0625 --logits-scaling 8 | diff - %S/../launcher/Inputs/granite.mlir
// RUN: rm -rf %t && mkdir -p %t
// RUN: python3 %S/Inputs/llama_reference.py make %t --layers 2 --dim 16 --heads 4 --kv-heads 2 --ffn 24 --vocab 20 --seq 6 --batch 2 --theta 10000 --eps 1e-6 --tie-embeddings --granite 12,0.22,0.0625,8
// RUN: python3 %scripts/llama-model.py --config %t/config.json --seq 6 --batch 2 --dtype f64 > %t/granite.mlir
// RUN: FileCheck %s --check-prefix=MODEL < %t/granite.mlir
// RUN: python3 %scripts/llama-checkpoint.py to-tessel %t/hf.safetensors -o %t/tessel.safetensors
// RUN: tessel-run %t/granite.mlir --eval --steps 1 --quiet --load %t/tessel.safetensors --data %t/tokens.bin --data-dtype i32 --metrics %t/eval.jsonl
// RUN: python3 %S/Inputs/llama_reference.py compare %t %t/eval.jsonl | FileCheck %s
// RUN: python3 %scripts/llama-model.py --layers 2 --dim 16 --heads 4 --kv-heads 2 --ffn 24 --vocab 20 --seq 6 --batch 2 --eps 1e-6 --tie-embeddings --dtype f64 > %t/llama.mlir
// RUN: tessel-run %t/llama.mlir --eval --steps 1 --quiet --load %t/tessel.safetensors --data %t/tokens.bin --data-dtype i32 --metrics %t/llama.jsonl
// RUN: not python3 %S/Inputs/llama_reference.py compare %t %t/llama.jsonl
// RUN: tessel-run %t/granite.mlir --check-grads --quiet --load %t/tessel.safetensors --data %t/tokens.bin --data-dtype i32
// RUN: sed 's/"residual_multiplier": 0.22/"residual_multiplier": -1/' %t/config.json > %t/bad.json
// RUN: not python3 %scripts/llama-model.py --config %t/bad.json 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not python3 %scripts/llama-model.py --logits-scaling 0 2>&1 | FileCheck %s --check-prefix=ZERO

// MODEL: nn.attention %q, %k, %v causal {scale = 0.0625 : f64}
// MODEL: %o_r = nn.mul %o, %o_r_b
// MODEL: %h1 = nn.add %h, %o_r
// MODEL: %d_r = nn.mul %d, %d_r_b
// MODEL: %x_c = nn.constant dense<12.0> : tensor<16xf64>
// MODEL: %x = nn.mul %x0, %x_b
// MODEL: %hs_c = nn.constant dense<8.0> : tensor<16xf64>
// MODEL: %hs = nn.div %hf, %hs_b
// MODEL: nn.matmul %hs, %embed transpose_rhs
// CHECK: relative error 0
// CHECK: match
// BAD: bad.json: residual_multiplier -1 is not a positive number
// ZERO: --logits-scaling must be positive
