// Tests parameter groups for weight decay through tessel-compile: the
// description's "train" records the no_decay patterns, and each trainable
// parameter its own weight decay (0 in the no-decay group); tessel-run loads
// and trains it, and refuses a different --no-decay for the .so. A pattern
// that matches nothing warns; an empty pattern is refused.
//
// RUN: tessel-compile %examples/mlp.mlir --emit=mlir --weight-decay 0.1 --no-decay 'fc1.bias,fc2.*' -o - | FileCheck %s
// RUN: tessel-compile %examples/mlp.mlir --weight-decay 0.1 --no-decay 'fc1.bias,fc2.*' -o %t.so
// RUN: tessel-run %t.so --steps 1 --quiet --weight-decay 0.1 --no-decay 'fc1.bias,fc2.*'
// RUN: not tessel-run %t.so --steps 1 --quiet --no-decay '*.bias' 2>&1 | FileCheck %s --check-prefix=MISMATCH
// RUN: tessel-compile %examples/mlp.mlir --no-decay 'fc1.bias,wte' -o %t.typo.so 2>&1 | FileCheck %s --check-prefix=TYPO
// RUN: not tessel-compile %examples/mlp.mlir --no-decay 'fc1.bias,,wte' -o %t.bad.so 2>&1 | FileCheck %s --check-prefix=EMPTY
// RUN: tessel-compile %examples/gpt.mlir --mesh pp=2 --no-decay 'wte,*.bais' -o %t.pp.so 2>&1 | FileCheck %s --check-prefix=PIPELINE
// RUN: tessel-compile %examples/gpt.mlir --mesh pp=2 --no-decay 'wte,h.ln_*' -o %t.ppok.so 2>&1 | FileCheck %s --allow-empty --check-prefix=PIPELINE-OK

// The description (a JSON string in the module, '"' written \22): the
// parameters in argument order, then "train".
// CHECK: __tessel_model_json
// CHECK-SAME: \22name\22:\22fc1.weight\22,{{[^}]*}}\22trainable\22:true,\22weight_decay\22:0.10000000000000001}
// CHECK-SAME: \22name\22:\22fc1.bias\22,{{[^}]*}}\22trainable\22:true,\22weight_decay\22:0}
// CHECK-SAME: \22name\22:\22fc2.weight\22,{{[^}]*}}\22trainable\22:true,\22weight_decay\22:0}
// CHECK-SAME: \22name\22:\22fc2.bias\22,{{[^}]*}}\22trainable\22:true,\22weight_decay\22:0}
// CHECK-SAME: \22train\22:{{{[^}]*}}\22no_decay\22:\22fc1.bias,fc2.*\22,{{[^}]*}}\22weight_decay\22:0.10000000000000001}

// MISMATCH: tessel-run: error: --no-decay '*.bias' differs from the no_decay 'fc1.bias,fc2.*' that model '{{.*}}.so' was compiled with (training options are compiled in); recompile with tessel-compile {{.*}}mlp.mlir --no-decay '*.bias' -o {{.*}}.so

// TYPO: mlp.mlir:{{[0-9]+}}:{{[0-9]+}}: warning: no_decay pattern 'wte' matches no parameter of the model

// On a pipeline the whole model is checked once, before the split: a
// typo is said once, and a pattern that matches the parameters of only one
// stage (wte: the first; h.ln_*: layers of both) is not a typo.
// PIPELINE: gpt.mlir:{{[0-9]+}}:{{[0-9]+}}: warning: no_decay pattern '*.bais' matches no parameter of the model
// PIPELINE-NOT: warning
// PIPELINE-OK-NOT: warning

// EMPTY: error: training settings: no_decay must be comma-separated name patterns, none empty, without spaces, got 'fc1.bias,,wte'
