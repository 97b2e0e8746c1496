// Tests Gemma against Hugging Face's definition, as llama-hf.mlir tests the
// Llama it extends. A GemmaForCausalLM of 2 layers (width 16, 4 query heads
// of 8 over one key/value head, GeGLU 24, vocabulary 20, RMSNorm eps 1e-6,
// the head tied to the embedding), its model written by
// scripts/llama-model.py from the config.json Inputs/llama_reference.py
// writes (model_type gemma: every RMSNorm scales by 1 + w, the MLP's
// activation is hidden_activation's tanh GELU, the embeddings are
// multiplied by sqrt(hidden_size)), in f64: random weights in Hugging
// Face's layout (norm weights near 0, no lm_head.weight) converted by
// scripts/llama-checkpoint.py give the reference forward's loss to 1e-12
// (measured 0), and convert back to the file they came from. The same
// weights under the Llama the same flags write without Gemma's three
// differences give another loss; its gradients match finite differences.
// What this model cannot be (another activation, biases) is refused in one
// line.
//
// The test model ParallelEquivalenceTest trains on meshes is the script's:
// RUN: python3 %scripts/llama-model.py --layers 2 --dim 64 --heads 4 --kv-heads 2 --head-dim 32 --ffn 128 --vocab 128 --seq 32 --batch 4 --mlp-act gelu-tanh --norm-offset --embed-scale --tie-embeddings | diff - %S/../launcher/Inputs/gemma.mlir
// RUN: rm -rf %t && mkdir -p %t
// RUN: python3 %S/Inputs/llama_reference.py make %t --layers 2 --dim 16 --heads 4 --kv-heads 1 --head-dim 8 --ffn 24 --vocab 20 --seq 6 --batch 2 --theta 10000 --eps 1e-6 --gemma --tie-embeddings
// RUN: python3 %scripts/llama-model.py --config %t/config.json --seq 6 --batch 2 --dtype f64 > %t/gemma.mlir
// RUN: FileCheck %s --check-prefix=MODEL < %t/gemma.mlir
// RUN: python3 %scripts/llama-model.py --layers 2 --dim 16 --heads 4 --kv-heads 1 --head-dim 8 --ffn 24 --vocab 20 --seq 6 --batch 2 --eps 1e-6 --mlp-act gelu-tanh --norm-offset --embed-scale --tie-embeddings --dtype f64 | diff - %t/gemma.mlir
// RUN: python3 %scripts/llama-checkpoint.py to-tessel %t/hf.safetensors -o %t/tessel.safetensors
// RUN: tessel-run %t/gemma.mlir --eval --steps 1 --quiet --load %t/tessel.safetensors --data %t/tokens.bin --data-dtype i32 --metrics %t/eval.jsonl
// RUN: python3 %S/Inputs/llama_reference.py compare %t %t/eval.jsonl | FileCheck %s
// RUN: python3 %scripts/llama-checkpoint.py to-hf %t/tessel.safetensors -o %t/back.safetensors
// RUN: python3 %S/Inputs/llama_reference.py same %t/hf.safetensors %t/back.safetensors | FileCheck %s --check-prefix=SAME
// Without Gemma's norms, activation and scale: another loss.
// RUN: python3 %scripts/llama-model.py --config %t/config.json --seq 6 --batch 2 --dtype f64 --mlp-act silu --no-norm-offset --no-embed-scale > %t/llama.mlir
// RUN: tessel-run %t/llama.mlir --eval --steps 1 --quiet --load %t/tessel.safetensors --data %t/tokens.bin --data-dtype i32 --metrics %t/llama.jsonl
// RUN: not python3 %S/Inputs/llama_reference.py compare %t %t/llama.jsonl
// RUN: tessel-run %t/gemma.mlir --check-grads --quiet --load %t/tessel.safetensors --data %t/tokens.bin --data-dtype i32
// Refusals: an activation GemmaMLP's GeGLU is not written with, biases.
// RUN: sed 's/"gelu_pytorch_tanh"/"relu"/' %t/config.json > %t/relu.json
// RUN: not python3 %scripts/llama-model.py --config %t/relu.json 2>&1 | FileCheck %s --check-prefix=RELU
// RUN: sed 's/"attention_bias": false/"attention_bias": true/' %t/config.json > %t/bias.json
// RUN: not python3 %scripts/llama-model.py --config %t/bias.json 2>&1 | FileCheck %s --check-prefix=BIAS

// MODEL: %one16 = nn.constant dense<1.0> : tensor<16xf64>
// MODEL: %attn_norm_g = nn.add %attn_norm, %one16 : tensor<16xf64>
// MODEL: %g = nn.gelu %g0 approximate
// MODEL: %x_c = nn.constant dense<4.0> : tensor<16xf64>
// MODEL: %x_b = nn.broadcast %x_c dims = [2] : tensor<16xf64> -> tensor<2x6x16xf64>
// MODEL: %x = nn.mul %x0, %x_b
// MODEL: %norm_g = nn.add %norm, %one16
// MODEL: nn.matmul %hf, %embed transpose_rhs
// CHECK: relative error 0
// CHECK: match
// SAME: same
// RELU: relu.json: hidden_activation "relu": only gelu_pytorch_tanh or gelu
// BIAS: bias.json: attention_bias true: Gemma has no biases
