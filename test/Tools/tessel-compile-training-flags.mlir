// Tests that tessel-compile refuses the training values tessel-run refuses
// (one set of rules: runtime/config/TrainSettings.def), with one located
// line, instead of compiling the defaults in: NaN, negative rates and
// counts, a beta outside [0, 1).
//
// RUN: not tessel-compile %examples/mlp.mlir --lr nan -o %t.so 2>&1 | FileCheck %s --check-prefix=NAN
// RUN: not tessel-compile %examples/mlp.mlir --lr -1 -o %t.so 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: not tessel-compile %examples/mlp.mlir --momentum nan -o %t.so 2>&1 | FileCheck %s --check-prefix=MOMENTUM
// RUN: not tessel-compile %examples/mlp.mlir --min-lr nan -o %t.so 2>&1 | FileCheck %s --check-prefix=MINLR
// RUN: not tessel-compile %examples/mlp.mlir --clip -2 -o %t.so 2>&1 | FileCheck %s --check-prefix=CLIP
// RUN: not tessel-compile %examples/mlp.mlir --warmup -1 -o %t.so 2>&1 | FileCheck %s --check-prefix=WARMUP
// RUN: not tessel-compile %examples/mlp.mlir --total-steps -5 -o %t.so 2>&1 | FileCheck %s --check-prefix=TOTAL
// RUN: not tessel-compile %examples/mlp.mlir --weight-decay -0.1 -o %t.so 2>&1 | FileCheck %s --check-prefix=DECAY
// RUN: not tessel-compile %examples/mlp.mlir --beta1 1 -o %t.so 2>&1 | FileCheck %s --check-prefix=BETA
// RUN: not test -e %t.so
// The same rules hold for the pass's options:
// RUN: not tessel-opt %examples/mlp.mlir --tessel-autodiff="eps=0" 2>&1 | FileCheck %s --check-prefix=EPS

// NAN: mlp.mlir:0:0: error: training settings: lr must be a number, got 'nan'
// NEGATIVE: error: training settings: lr must be a number >= 0, got '-1'
// MOMENTUM: error: training settings: momentum must be a number, got 'nan'
// MINLR: error: training settings: min_lr must be a number, got 'nan'
// CLIP: error: training settings: clip must be a number >= 0, got '-2'
// WARMUP: error: training settings: warmup must be an integer >= 0, got '-1'
// TOTAL: error: training settings: total_steps must be an integer >= 0, got '-5'
// DECAY: error: training settings: weight_decay must be a number >= 0, got '-0.1'
// BETA: error: training settings: beta1 must be a number in [0, 1), got '1'
// EPS: error: training settings: eps must be a number > 0, got '0'
