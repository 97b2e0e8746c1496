// Tests that tessel-compile refuses an output path that names its input
// (directly, through a symlink or a hard link, or as the default output of
// a .so input) before writing anything: the source is left unchanged.
// RUN: rm -rf %t && mkdir -p %t
// RUN: cp %examples/mlp.mlir %t/model.mlir && cp %t/model.mlir %t/orig.mlir
// RUN: not tessel-compile %t/model.mlir -o %t/model.mlir 2>&1 | FileCheck %s --check-prefix=SAME
// RUN: cmp %t/model.mlir %t/orig.mlir
// RUN: ln -s model.mlir %t/link.mlir
// RUN: not tessel-compile %t/model.mlir -o %t/link.mlir 2>&1 | FileCheck %s --check-prefix=LINK
// RUN: cmp %t/model.mlir %t/orig.mlir
// RUN: ln %t/model.mlir %t/hard.mlir
// RUN: not tessel-compile %t/hard.mlir -o %t/model.mlir 2>&1 | FileCheck %s --check-prefix=HARD
// RUN: cmp %t/model.mlir %t/orig.mlir
// RUN: not tessel-compile %t/model.mlir --report-json %t/link.mlir -o %t/out.so 2>&1 | FileCheck %s --check-prefix=REPORT
// RUN: cmp %t/model.mlir %t/orig.mlir
// RUN: not test -e %t/out.so
// RUN: not tessel-compile %t/model.mlir --report-json %t/out.so -o %t/out.so 2>&1 | FileCheck %s --check-prefix=BOTH
// RUN: not test -e %t/out.so
// RUN: cp %t/model.mlir %t/text.so
// RUN: not tessel-compile %t/text.so 2>&1 | FileCheck %s --check-prefix=DEFAULT
// RUN: cmp %t/text.so %t/orig.mlir

// SAME: tessel-compile: -o '{{.*}}/model.mlir' is the input file '{{.*}}/model.mlir': refusing to overwrite it
// LINK: tessel-compile: -o '{{.*}}/link.mlir' is the input file
// HARD: tessel-compile: -o '{{.*}}/model.mlir' is the input file '{{.*}}/hard.mlir'
// REPORT: tessel-compile: --report-json '{{.*}}/link.mlir' is the input file
// BOTH: tessel-compile: --report-json '{{.*}}/out.so' is also the -o file
// DEFAULT: tessel-compile: -o '{{.*}}/text.so' is the input file
