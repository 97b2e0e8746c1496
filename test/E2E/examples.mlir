// Tests the acceptance path on every example: compile to a .so (a training
// step), train 3 steps with metrics, resume 1 step from a checkpoint of 2
// and get the third step's loss exactly, and find that the runtime
// allocated exactly the arena the compiler reported. Untrained losses sit near ln(classes): ln 10 = 2.30
// for the MLPs, ln 256 = 5.55 for the byte-level GPT.
//
// RUN: tessel-compile %examples/mlp.mlir -o %t.mlp.so --report-json %t.mlp.json
// RUN: tessel-run %t.mlp.so --steps 3 --quiet --metrics %t.mlp.jsonl
// RUN: tessel-run %t.mlp.so --steps 2 --quiet --save %t.mlp.safetensors
// RUN: cat %t.mlp.json %t.mlp.jsonl | FileCheck %s --check-prefix=MLP
// RUN: tessel-run %t.mlp.so --steps 1 --quiet --load %t.mlp.safetensors --metrics %t.mlp2.jsonl
// RUN: cat %t.mlp.jsonl %t.mlp2.jsonl | FileCheck %s --check-prefix=SAME
// RUN: tessel-run %t.mlp.so --eval --steps 1 --quiet --metrics %t.mlp.eval.jsonl
// RUN: cat %t.mlp.jsonl %t.mlp.eval.jsonl | FileCheck %s --check-prefix=EVAL
//
// RUN: tessel-compile %examples/bn_mlp.mlir -o %t.bn.so --report-json %t.bn.json
// RUN: tessel-run %t.bn.so --steps 3 --quiet --metrics %t.bn.jsonl
// RUN: tessel-run %t.bn.so --steps 2 --quiet --save %t.bn.safetensors
// RUN: cat %t.bn.json %t.bn.jsonl | FileCheck %s --check-prefix=MLP
// RUN: tessel-run %t.bn.so --steps 1 --quiet --load %t.bn.safetensors --metrics %t.bn2.jsonl
// RUN: cat %t.bn.jsonl %t.bn2.jsonl | FileCheck %s --check-prefix=SAME
//
// RUN: tessel-compile %examples/gpt.mlir -o %t.gpt.so --report-json %t.gpt.json
// RUN: tessel-run %t.gpt.so --steps 3 --quiet --metrics %t.gpt.jsonl
// RUN: tessel-run %t.gpt.so --steps 2 --quiet --save %t.gpt.safetensors
// RUN: cat %t.gpt.json %t.gpt.jsonl | FileCheck %s --check-prefix=GPT
// RUN: tessel-run %t.gpt.so --steps 1 --quiet --load %t.gpt.safetensors --metrics %t.gpt2.jsonl
// RUN: cat %t.gpt.jsonl %t.gpt2.jsonl | FileCheck %s --check-prefix=SAME
// A character-level corpus every Debian machine has, read as bytes.
// RUN: tessel-run %t.gpt.so --data /usr/share/common-licenses/GPL-3 --data-dtype u8 --steps 2 --quiet --metrics %t.text.jsonl
// RUN: FileCheck %s --check-prefix=TEXT --input-file %t.text.jsonl
//
// The .mlir path compiles in the launcher: the same losses as the .so.
// RUN: tessel-run %examples/mlp.mlir --steps 3 --quiet --metrics %t.direct.jsonl
// RUN: diff <(sed 's/,"tokens_per_s.*//' %t.mlp.jsonl) <(sed 's/,"tokens_per_s.*//' %t.direct.jsonl)

// MLP: "arena_bytes":[[ARENA:[0-9]+]]
// MLP: {"step":1,"loss":2.{{[0-9]+}},{{.*}}"allocated_bytes":[[ARENA]]}
// MLP: {"step":2,"loss":2.{{[0-9]+}},
// MLP: {"step":3,"loss":2.{{[0-9]+}},

// GPT: "arena_bytes":[[ARENA:[0-9]+]]
// GPT: {"step":1,"loss":5.{{[0-9]+}},{{.*}}"allocated_bytes":[[ARENA]]}
// GPT: {"step":3,"loss":5.{{[0-9]+}},

// TEXT: {"step":1,"loss":{{[0-9.]+}},
// TEXT: {"step":2,"loss":{{[0-9.]+}},

// Training 2 steps, saving (parameters, AdamW state, step count), loading
// and training 1 more step gives exactly the third step of one run.
// SAME: {"step":3,"loss":[[LOSS:[0-9.e-]+]],
// SAME: {"step":3,"loss":[[LOSS]],

// The evaluation entry sees the first step's data and the initial
// parameters: the first training step's loss.
// EVAL: {"step":1,"loss":[[LOSS:[0-9.e-]+]],
// EVAL: {"step":1,"loss":[[LOSS]],
