// Tests label smoothing (PyTorch's CrossEntropyLoss(label_smoothing=e),
// Hugging Face Trainer's label_smoothing_factor) against its definition:
// the target (1 - e) on the label and e / V everywhere, a position's loss
// (1 - e)(lse - z_label) + e (lse - mean z). A 2-layer Llama (width 16, 4
// query heads over 2 key/value heads, SwiGLU 24, vocabulary 20) with random
// weights in Hugging Face's layout; llama-model.py --label-smoothing
// writes nn.cross_entropy's label_smoothing, which the loss kernels and
// their gradient compute inside (runtime ABI 28). In f64 its loss
// equals the plain-Python forward's (Inputs/llama_reference.py
// --label-smoothing) to 1e-12, with every position labelled and with a
// fine-tuning dataset's ignored prompts (ignore_index -100: the smoothed
// loss of the labelled positions only); without the smoothing the loss is
// another. Its gradients match finite differences. A smoothing outside
// [0, 1] is refused in one line.
//
// The test model ParallelEquivalenceTest trains on meshes is the script's:
// RUN: python3 %scripts/llama-model.py --layers 2 --dim 64 --heads 4 --kv-heads 2 --ffn 128 --vocab 128 --seq 32 --batch 4 --ignore-index -100 --label-smoothing 0.1 | diff - %S/../launcher/Inputs/llama_smooth.mlir
// RUN: rm -rf %t && mkdir -p %t/all %t/sft
// Every position labelled.
// RUN: python3 %S/Inputs/llama_reference.py make %t/all --layers 2 --dim 16 --heads 4 --kv-heads 2 --ffn 24 --vocab 20 --seq 6 --batch 2 --theta 10000 --eps 1e-5 --label-smoothing 0.1
// RUN: python3 %scripts/llama-model.py --config %t/all/config.json --seq 6 --batch 2 --dtype f64 --label-smoothing 0.1 > %t/all/smooth.mlir
// RUN: FileCheck %s --check-prefix=MODEL < %t/all/smooth.mlir
// RUN: python3 %scripts/llama-checkpoint.py to-tessel %t/all/hf.safetensors -o %t/all/tessel.safetensors
// RUN: tessel-run %t/all/smooth.mlir --eval --steps 1 --quiet --load %t/all/tessel.safetensors --data %t/all/tokens.bin --data-dtype i32 --metrics %t/all/eval.jsonl
// RUN: python3 %S/Inputs/llama_reference.py compare %t/all %t/all/eval.jsonl | FileCheck %s
// RUN: tessel-run %t/all/smooth.mlir --check-grads --quiet --load %t/all/tessel.safetensors --data %t/all/tokens.bin --data-dtype i32
// Without the smoothing: another loss.
// RUN: python3 %scripts/llama-model.py --config %t/all/config.json --seq 6 --batch 2 --dtype f64 > %t/all/plain.mlir
// RUN: tessel-run %t/all/plain.mlir --eval --steps 1 --quiet --load %t/all/tessel.safetensors --data %t/all/tokens.bin --data-dtype i32 --metrics %t/all/plain.jsonl
// RUN: not python3 %S/Inputs/llama_reference.py compare %t/all %t/all/plain.jsonl
// Ignored prompts (-100) and smoothing: the smoothed mean over the labelled
// positions, and its gradients.
// RUN: python3 %S/Inputs/llama_reference.py make %t/sft --layers 2 --dim 16 --heads 4 --kv-heads 2 --ffn 24 --vocab 20 --seq 6 --batch 2 --theta 10000 --eps 1e-5 --ignore-prompts --label-smoothing 0.2
// RUN: python3 %scripts/llama-model.py --config %t/sft/config.json --seq 6 --batch 2 --dtype f64 --ignore-index -100 --label-smoothing 0.2 > %t/sft/smooth.mlir
// RUN: python3 %scripts/llama-checkpoint.py to-tessel %t/sft/hf.safetensors -o %t/sft/tessel.safetensors
// RUN: tessel-run %t/sft/smooth.mlir --eval --steps 1 --quiet --load %t/sft/tessel.safetensors --data %t/sft/tokens.bin --labels %t/sft/labels.bin --data-dtype i32 --metrics %t/sft/eval.jsonl
// RUN: python3 %S/Inputs/llama_reference.py compare %t/sft %t/sft/eval.jsonl | FileCheck %s
// RUN: tessel-run %t/sft/smooth.mlir --check-grads --quiet --load %t/sft/tessel.safetensors --data %t/sft/tokens.bin --labels %t/sft/labels.bin --data-dtype i32
// Refusal.
// RUN: not python3 %scripts/llama-model.py --label-smoothing 1.5 2>&1 | FileCheck %s --check-prefix=RANGE

// MODEL: nn.cross_entropy %logits, %targets {label_smoothing = 0.1 : f64}
// CHECK: match
// RANGE: --label-smoothing must be in [0, 1]
