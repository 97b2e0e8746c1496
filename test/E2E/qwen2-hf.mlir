// Tests tied embeddings and projection biases against Hugging Face's
// definitions, as llama-hf.mlir tests the Llama they extend. A Qwen2 of 2
// layers (width 16, 4 query heads over 2 key/value heads, SwiGLU 24,
// vocabulary 20, rope theta 1000000, RMSNorm eps 1e-6; biases on q, k and
// v; the head tied to the embedding), its model written by
// scripts/llama-model.py from the config.json Inputs/llama_reference.py
// writes (whose sliding_window, 3 of 6 positions, use_sliding_window false
// leaves unused), in f64: random weights and biases in Hugging Face's layout
// (no lm_head.weight, as save_pretrained leaves a tied model) converted by
// scripts/llama-checkpoint.py give the reference forward's loss to 1e-12
// (measured 0), and convert back to the file they came from; so does a
// trained checkpoint. The tied weights under an untied model, or under one
// without biases, are refused at load naming the tensors; converted with
// --untie they give the same first loss under the untied model, and after
// one step of training another (the tied table learns from the head too).
// A Llama with attention_bias (q, k, v, o) and mlp_bias (gate, up, down)
// and its own head agrees as well (measured 1.3e-16). A Qwen2 with
// use_sliding_window true windows the layers from max_window_layers on
// (nn.attention's layer_windows; layer-types-hf.mlir checks its loss).
//
// The test model ParallelEquivalenceTest trains on meshes is the script's:
// RUN: python3 %scripts/llama-model.py --qkv-bias --attention-bias --mlp-bias --tie-embeddings --layers 2 --dim 64 --heads 4 --kv-heads 2 --ffn 128 --vocab 128 --seq 32 --batch 4 | diff - %S/../launcher/Inputs/llama_biases_tied.mlir
// RUN: rm -rf %t && mkdir -p %t
// RUN: python3 %S/Inputs/llama_reference.py make %t --layers 2 --dim 16 --heads 4 --kv-heads 2 --ffn 24 --vocab 20 --seq 6 --batch 2 --theta 1000000 --eps 1e-6 --qkv-bias --tie-embeddings
// RUN: python3 %scripts/llama-model.py --config %t/config.json --seq 6 --batch 2 --dtype f64 > %t/tiny.mlir
// RUN: FileCheck %s --check-prefix=QWEN < %t/tiny.mlir
// RUN: python3 %scripts/llama-model.py --layers 2 --dim 16 --heads 4 --kv-heads 2 --ffn 24 --vocab 20 --seq 6 --batch 2 --theta 1000000 --eps 1e-6 --qkv-bias --tie-embeddings --dtype f64 | diff - %t/tiny.mlir
// RUN: python3 %scripts/llama-checkpoint.py to-tessel %t/hf.safetensors -o %t/tessel.safetensors
// RUN: tessel-run %t/tiny.mlir --eval --steps 1 --quiet --load %t/tessel.safetensors --data %t/tokens.bin --data-dtype i32 --metrics %t/eval.jsonl
// RUN: python3 %S/Inputs/llama_reference.py compare %t %t/eval.jsonl | FileCheck %s
// Back to Hugging Face's layout: the same tensors, and no lm_head.weight.
// RUN: python3 %scripts/llama-checkpoint.py to-hf %t/tessel.safetensors -o %t/back.safetensors
// RUN: python3 %S/Inputs/llama_reference.py same %t/hf.safetensors %t/back.safetensors | FileCheck %s --check-prefix=SAME
// A trained tied checkpoint goes to Hugging Face's layout and back unchanged.
// RUN: tessel-run %t/tiny.mlir --steps 1 --quiet --load %t/tessel.safetensors --data %t/tokens.bin --data-dtype i32 --save %t/trained.safetensors
// RUN: python3 %scripts/llama-checkpoint.py to-hf %t/trained.safetensors -o %t/trained-hf.safetensors
// RUN: python3 %scripts/llama-checkpoint.py to-tessel %t/trained-hf.safetensors -o %t/trained-again.safetensors
// RUN: tessel-run %t/tiny.mlir --eval --steps 1 --quiet --load %t/trained-again.safetensors --data %t/tokens.bin --data-dtype i32 --metrics %t/a.jsonl
// RUN: tessel-run %t/tiny.mlir --eval --steps 1 --quiet --load %t/trained.safetensors --data %t/tokens.bin --data-dtype i32 --metrics %t/b.jsonl
// RUN: sed 's/,"microbatches.*//' %t/a.jsonl > %t/a.loss
// RUN: sed 's/,"microbatches.*//' %t/b.jsonl > %t/b.loss
// RUN: diff %t/a.loss %t/b.loss
// The tied weights under a model with a head of its own, or without
// biases: refused at load, naming the tensors.
// RUN: python3 %scripts/llama-model.py --config %t/config.json --no-tie-embeddings --seq 6 --batch 2 --dtype f64 > %t/untied.mlir
// RUN: not tessel-run %t/untied.mlir --eval --steps 1 --quiet --load %t/tessel.safetensors --data %t/tokens.bin --data-dtype i32 2>&1 | FileCheck %s --check-prefix=UNTIED
// RUN: python3 %scripts/llama-model.py --config %t/config.json --no-qkv-bias --seq 6 --batch 2 --dtype f64 > %t/nobias.mlir
// RUN: not tessel-run %t/nobias.mlir --eval --steps 1 --quiet --load %t/tessel.safetensors --data %t/tokens.bin --data-dtype i32 2>&1 | FileCheck %s --check-prefix=NOBIAS
// Untied by the converter (--untie: the embedding as output.weight): the
// same first loss; after a step, another, as the tied table trains as
// embedding and head at once.
// RUN: python3 %scripts/llama-checkpoint.py to-tessel %t/hf.safetensors --untie -o %t/untied.safetensors
// RUN: tessel-run %t/untied.mlir --steps 2 --quiet --load %t/untied.safetensors --data %t/tokens.bin --data-dtype i32 --metrics %t/untied2.jsonl
// RUN: python3 %S/Inputs/llama_reference.py compare %t %t/untied2.jsonl | FileCheck %s --check-prefix=UNTIE
// RUN: tessel-run %t/tiny.mlir --steps 2 --quiet --load %t/tessel.safetensors --data %t/tokens.bin --data-dtype i32 --metrics %t/tied2.jsonl
// RUN: sed -n '2s/,"lr.*//p' %t/tied2.jsonl > %t/tied2.loss
// RUN: sed -n '2s/,"lr.*//p' %t/untied2.jsonl > %t/untied2.loss
// RUN: not diff %t/tied2.loss %t/untied2.loss
// A tied model saved with its head as well (the untied checkpoint in
// Hugging Face's layout): --tie leaves the head out, giving the tied
// checkpoint again; a head that is not the embedding it refuses.
// RUN: python3 %scripts/llama-checkpoint.py to-hf %t/untied.safetensors -o %t/both.safetensors
// RUN: python3 %scripts/llama-checkpoint.py to-tessel %t/both.safetensors --tie -o %t/retied.safetensors
// RUN: python3 %S/Inputs/llama_reference.py same %t/tessel.safetensors %t/retied.safetensors | FileCheck %s --check-prefix=RETIED
//
// A Llama with attention_bias and mlp_bias, its head its own.
// RUN: mkdir -p %t/llama
// RUN: python3 %S/Inputs/llama_reference.py make %t/llama --layers 2 --dim 16 --heads 4 --kv-heads 2 --ffn 24 --vocab 20 --seq 6 --batch 2 --theta 500000 --eps 1e-6 --attention-bias --mlp-bias
// RUN: python3 %scripts/llama-model.py --config %t/llama/config.json --seq 6 --batch 2 --dtype f64 > %t/llama/tiny.mlir
// RUN: FileCheck %s --check-prefix=LLAMA < %t/llama/tiny.mlir
// RUN: python3 %scripts/llama-model.py --layers 2 --dim 16 --heads 4 --kv-heads 2 --ffn 24 --vocab 20 --seq 6 --batch 2 --theta 500000 --eps 1e-6 --attention-bias --mlp-bias --dtype f64 | diff - %t/llama/tiny.mlir
// RUN: python3 %scripts/llama-checkpoint.py to-tessel %t/llama/hf.safetensors -o %t/llama/tessel.safetensors
// RUN: tessel-run %t/llama/tiny.mlir --eval --steps 1 --quiet --load %t/llama/tessel.safetensors --data %t/llama/tokens.bin --data-dtype i32 --metrics %t/llama/eval.jsonl
// RUN: python3 %S/Inputs/llama_reference.py compare %t/llama %t/llama/eval.jsonl | FileCheck %s --check-prefix=BIASED
// RUN: python3 %scripts/llama-checkpoint.py to-hf %t/llama/tessel.safetensors -o %t/llama/back.safetensors
// RUN: python3 %S/Inputs/llama_reference.py same %t/llama/hf.safetensors %t/llama/back.safetensors | FileCheck %s --check-prefix=LSAME
// RUN: not python3 %scripts/llama-checkpoint.py to-tessel %t/llama/hf.safetensors --tie -o %t/bad.safetensors 2>&1 | FileCheck %s --check-prefix=HEAD
// RUN: not ls %t/bad.safetensors
//
// A Qwen2 whose later layers take a sliding window: refused in one line.
// RUN: echo '{"model_type": "qwen2", "use_sliding_window": true, "sliding_window": 4, "max_window_layers": 1, "num_hidden_layers": 2, "hidden_size": 16, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 24, "vocab_size": 20}' > %t/swa.json
// RUN: python3 %scripts/llama-model.py --config %t/swa.json | FileCheck %s --check-prefix=SWA

// CHECK: relative error 0
// CHECK: match
// QWEN: %q0w = nn.matmul %x, %w_q
// QWEN-NEXT: %bq = nn.broadcast %b_q dims = [2] : tensor<16xf64> -> tensor<2x6x16xf64>
// QWEN-NEXT: %q0 = nn.add %q0w, %bq
// QWEN: %k0 = nn.add %k0w, %bk
// QWEN: %v0 = nn.add %v0w, %bv
// QWEN: nn.attention %q, %k, %v causal :
// QWEN: %o = nn.matmul %att2, %w_o
// QWEN: %g0 = nn.matmul %y, %w_gate
// QWEN: %b_k: tensor<2x8xf64> {nn.param = "layers.attention.wk.bias",
// QWEN-NEXT: nn.init = #nn.init<zeros>,
// QWEN-NEXT: nn.axes = ["layers", "heads"]}
// QWEN-NOT: output.weight
// QWEN: %logits = nn.matmul %hf, %embed transpose_rhs : (tensor<2x6x16xf64>, tensor<20x16xf64>) -> tensor<2x6x20xf64>
// SAME: same 26 tensors
// UNTIED: tessel-run: error: checkpoint '{{.*}}tessel.safetensors': missing parameters output.weight
// NOBIAS: tessel-run: error: checkpoint '{{.*}}tessel.safetensors': unexpected keys layers.attention.wk.bias, layers.attention.wq.bias, layers.attention.wv.bias
// UNTIE: match
// RETIED: same 14 tensors
// LLAMA: %o = nn.add %ow, %bo
// LLAMA: %g0 = nn.add %g0w, %bg
// LLAMA: %u = nn.add %uw, %bu
// LLAMA: %d = nn.add %dw, %bd
// LLAMA: %b_o: tensor<2x16xf64> {nn.param = "layers.attention.wo.bias",
// LLAMA-NEXT: nn.init = #nn.init<zeros>,
// LLAMA-NEXT: nn.axes = ["layers", "embed"]}
// LLAMA: %b_gate: tensor<2x24xf64> {nn.param = "layers.feed_forward.w1.bias",
// LLAMA-NEXT: nn.init = #nn.init<zeros>,
// LLAMA-NEXT: nn.axes = ["layers", "mlp"]}
// LLAMA: %b_down: tensor<2x16xf64> {nn.param = "layers.feed_forward.w2.bias",
// LLAMA-NEXT: nn.init = #nn.init<zeros>,
// LLAMA-NEXT: nn.axes = ["layers", "embed"]}
// LLAMA: %logits = nn.matmul %hf, %w_out
// BIASED: match
// LSAME: same 35 tensors
// HEAD: llama-checkpoint: --tie: lm_head.weight is not model.embed_tokens.weight
// SWA: nn.attention %q, %k, %v causal {layer_windows = array<i64: 0, 4>}
