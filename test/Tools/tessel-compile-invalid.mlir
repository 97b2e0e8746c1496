// Tests that tessel-compile fails with one located line on bad input and
// writes no output.
// RUN: not tessel-compile %t.missing.mlir -o %t.so 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not tessel-compile %S/Inputs/bad-shape.mlir -o %t.bad.so 2>&1 | FileCheck %s --check-prefix=SHAPE
// RUN: not test -e %t.bad.so
// RUN: not tessel-compile %S/Inputs/no-model.mlir -o %t.none.so 2>&1 | FileCheck %s --check-prefix=NOMODEL
// RUN: not tessel-compile %s --emit=wasm 2>&1 | FileCheck %s --check-prefix=FLAG
// RUN: not tessel-compile %examples/mlp.mlir --optimizer lamb -o %t.opt.so 2>&1 | FileCheck %s --check-prefix=OPTIMIZER
// RUN: not test -e %t.opt.so
// RUN: not tessel-compile %examples/mlp.mlir --schedule warmup-cosine --warmup 10 -o %t.sched.so 2>&1 | FileCheck %s --check-prefix=SCHEDULE

// MISSING: tessel-compile: {{.*}}.missing.mlir: cannot open input file '{{.*}}.missing.mlir': No such file or directory
// SHAPE: bad-shape.mlir:2:8: error: contracting dimensions differ: lhs has K = 4, rhs has K = 5
// NOMODEL: no-model.mlir:{{.*}} error: the module has no model function (a func.func whose arguments carry nn.param, nn.input or nn.label)
// FLAG: Cannot find option named 'wasm'
// OPTIMIZER: mlp.mlir:0:0: error: training settings: unknown optimizer 'lamb'; expected sgd, adam or adamw
// OPTIMIZER-NOT: see current operation
// SCHEDULE: error: training settings: the warmup-cosine schedule needs total_steps (0) > warmup (10)
