// Tests a fine-tuning loss, PyTorch's ignore_index, against Hugging Face's
// definition. A 2-layer Llama (width 16, 4 query heads over 2 key/value
// heads, SwiGLU 24, vocabulary 20) with random weights in Hugging Face's
// layout, and labels as a fine-tuning dataset gives them: one per token,
// aligned with the tokens, -100 over a prompt of random length at the start
// of each window (Inputs/llama_reference.py --ignore-prompts). tessel-run
// --labels reads them beside --data; the model's loss has ignore_index
// -100 (llama-model.py --ignore-index): in f64 its loss equals the plain
// Python forward's mean over the labelled positions only (relative error
// 0 measured), and differs from the mean over every position. On dp=2,
// whose ranks label 2 and 6 positions, training loses what one device
// loses, and so does one device with each window a microbatch. Its gradients match finite differences through the masked mean. A batch
// whose every label is ignored has loss 0 and leaves SGD's parameters as
// they were (PyTorch's mean would be NaN). A label that is neither a class
// nor the ignored value, and ignored labels under a model whose loss
// ignores none, are refused in one line each.
//
// The test model ParallelEquivalenceTest trains on meshes is the script's:
// RUN: python3 %scripts/llama-model.py --layers 2 --dim 64 --heads 4 --kv-heads 2 --ffn 128 --vocab 128 --seq 32 --batch 4 --ignore-index -100 | diff - %S/../launcher/Inputs/llama_sft.mlir
// RUN: rm -rf %t && mkdir -p %t
// RUN: python3 %S/Inputs/llama_reference.py make %t --layers 2 --dim 16 --heads 4 --kv-heads 2 --ffn 24 --vocab 20 --seq 6 --batch 2 --theta 10000 --eps 1e-5 --ignore-prompts
// RUN: python3 %scripts/llama-model.py --config %t/config.json --seq 6 --batch 2 --dtype f64 --ignore-index -100 > %t/sft.mlir
// RUN: FileCheck %s --check-prefix=MODEL < %t/sft.mlir
// RUN: python3 %scripts/llama-checkpoint.py to-tessel %t/hf.safetensors -o %t/tessel.safetensors
// RUN: tessel-run %t/sft.mlir --eval --steps 1 --quiet --load %t/tessel.safetensors --data %t/tokens.bin --labels %t/labels.bin --data-dtype i32 --metrics %t/eval.jsonl
// RUN: python3 %S/Inputs/llama_reference.py compare %t %t/eval.jsonl | FileCheck %s
// The next tokens as labels (no --labels): every position counts, another
// loss.
// RUN: tessel-run %t/sft.mlir --eval --steps 1 --quiet --load %t/tessel.safetensors --data %t/tokens.bin --data-dtype i32 --metrics %t/all.jsonl
// RUN: not python3 %S/Inputs/llama_reference.py compare %t %t/all.jsonl
// On dp=2 each rank holds one window (2 and 6 labelled positions): two SGD
// steps lose what one device loses (f64, within 1e-12 relative).
// RUN: tessel-run %t/sft.mlir --steps 2 --quiet --optimizer sgd --lr 0.1 --load %t/tessel.safetensors --data %t/tokens.bin --labels %t/labels.bin --data-dtype i32 --metrics %t/one.jsonl
// RUN: tessel-run %t/sft.mlir --mesh dp=2 --steps 2 --quiet --optimizer sgd --lr 0.1 --load %t/tessel.safetensors --data %t/tokens.bin --labels %t/labels.bin --data-dtype i32 --metrics %t/dp.jsonl
// RUN: python3 -c "import json, sys; a, b = ([json.loads(l)['loss'] for l in open(f)] for f in sys.argv[1:]); assert len(a) == len(b) == 2 and all(abs(x - y) <= 1e-12 * abs(y) for x, y in zip(a, b)), (a, b)" %t/one.jsonl %t/dp.jsonl
// Gradient accumulation: the model at batch 1 with --microbatches 2 (a
// window each, 2 and 6 labelled positions) trains as batch 2 does: the
// step's loss is one mean over its 8 labelled positions (the model returns
// the sum and the count, the launcher divides), not the mean of the two
// windows' means, which the evaluation of each window gives.
// RUN: python3 %scripts/llama-model.py --config %t/config.json --seq 6 --batch 1 --dtype f64 --ignore-index -100 > %t/sft1.mlir
// RUN: tessel-run %t/sft1.mlir --microbatches 2 --steps 2 --quiet --optimizer sgd --lr 0.1 --load %t/tessel.safetensors --data %t/tokens.bin --labels %t/labels.bin --data-dtype i32 --metrics %t/accumulated.jsonl
// RUN: python3 -c "import json, sys; a, b = ([json.loads(l)['loss'] for l in open(f)] for f in sys.argv[1:]); assert len(a) == len(b) == 2 and all(abs(x - y) <= 1e-12 * abs(y) for x, y in zip(a, b)), (a, b)" %t/one.jsonl %t/accumulated.jsonl
// RUN: tessel-run %t/sft1.mlir --eval --steps 2 --quiet --load %t/tessel.safetensors --data %t/tokens.bin --labels %t/labels.bin --data-dtype i32 --metrics %t/windows.jsonl
// RUN: python3 -c "import json, sys; w, o = ([json.loads(l)['loss'] for l in open(f)] for f in sys.argv[1:]); m = sum(w) / 2; assert abs(m - o[0]) > 1e-3 * abs(o[0]), (m, o[0]); print('mean of means', m, 'step', o[0])" %t/windows.jsonl %t/one.jsonl | FileCheck %s --check-prefix=MEANS
// Gradients through the masked mean against finite differences.
// RUN: tessel-run %t/sft.mlir --check-grads --quiet --load %t/tessel.safetensors --data %t/tokens.bin --labels %t/labels.bin --data-dtype i32
// Every label ignored: loss 0, and SGD leaves the parameters unchanged.
// RUN: python3 -c "import struct; open('%t/none.bin', 'wb').write(struct.pack('<13i', *[-100] * 13))"
// RUN: tessel-run %t/sft.mlir --steps 2 --quiet --optimizer sgd --lr 0.5 --load %t/tessel.safetensors --data %t/tokens.bin --labels %t/none.bin --data-dtype i32 --metrics %t/none.jsonl --save %t/none.safetensors
// RUN: FileCheck %s --check-prefix=NONE < %t/none.jsonl
// RUN: python3 %S/Inputs/llama_reference.py same %t/tessel.safetensors %t/none.safetensors | FileCheck %s --check-prefix=SAME
// Refusals: a label outside the classes, ignored labels under a loss that
// ignores none, a labels file of another length, --labels without --data.
// RUN: python3 -c "import struct; open('%t/bad.bin', 'wb').write(struct.pack('<13i', *([3] * 12 + [20])))"
// RUN: not tessel-run %t/sft.mlir --eval --steps 1 --quiet --data %t/tokens.bin --labels %t/bad.bin --data-dtype i32 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: python3 %scripts/llama-model.py --config %t/config.json --seq 6 --batch 2 --dtype f64 > %t/plain.mlir
// RUN: not tessel-run %t/plain.mlir --eval --steps 1 --quiet --data %t/tokens.bin --labels %t/labels.bin --data-dtype i32 2>&1 | FileCheck %s --check-prefix=PLAIN
// RUN: python3 -c "import struct; open('%t/short.bin', 'wb').write(struct.pack('<12i', *[3] * 12))"
// RUN: not tessel-run %t/sft.mlir --eval --steps 1 --quiet --data %t/tokens.bin --labels %t/short.bin --data-dtype i32 2>&1 | FileCheck %s --check-prefix=SHORT
// RUN: not tessel-run %t/sft.mlir --eval --steps 1 --quiet --labels %t/labels.bin 2>&1 | FileCheck %s --check-prefix=NODATA

// MODEL: nn.cross_entropy %logits, %targets {ignore_index = -100 : i64}
// CHECK: relative error 0
// CHECK: match
// NONE: {"step":1,"loss":0.0,
// NONE: {"step":2,"loss":0.0,
// SAME: same
// MEANS: mean of means {{.*}} step
// BAD: labels file {{.*}}bad.bin: label 20 at position 12 is outside [0, 20) and is not the ignored -100
// PLAIN: labels file {{.*}}labels.bin: label -100 at position {{[0-9]+}} is outside [0, 20) (the model's loss ignores no label: give nn.cross_entropy an ignore_index)
// SHORT: labels file {{.*}}short.bin has 12 labels, the data file {{.*}}tokens.bin 13 tokens (one each)
// NODATA: --labels needs --data FILE (the tokens they label)
