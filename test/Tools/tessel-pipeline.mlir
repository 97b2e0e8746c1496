// Tests that tessel-opt --tessel-pipeline is the compile pipeline of
// tessel-compile: on every example, on one device and on meshes, with and
// without training settings, its output is tessel-compile --emit=mlir's.
//
// RUN: tessel-compile %examples/mlp.mlir --emit=mlir -o %t.mlp.compile
// RUN: tessel-opt %examples/mlp.mlir --tessel-pipeline="source=%examples/mlp.mlir" -o %t.mlp.opt
// RUN: diff %t.mlp.compile %t.mlp.opt
//
// RUN: tessel-compile %examples/mlp.mlir --emit=mlir --mesh dp=2,tp=2 --optimizer sgd --lr 0.1 --momentum 0.9 --nesterov -o %t.mlp2.compile
// RUN: tessel-opt %examples/mlp.mlir --tessel-pipeline="source=%examples/mlp.mlir mesh=dp=2,tp=2 optimizer=sgd lr=0.1 momentum=0.9 nesterov=true" -o %t.mlp2.opt
// RUN: diff %t.mlp2.compile %t.mlp2.opt
//
// RUN: tessel-compile %examples/bn_mlp.mlir --emit=mlir --mesh dp=2 --local-batchnorm --bucket-mb 0 -o %t.bn.compile
// RUN: tessel-opt %examples/bn_mlp.mlir --tessel-pipeline="source=%examples/bn_mlp.mlir mesh=dp=2 local-batchnorm=true bucket-mb=0" -o %t.bn.opt
// RUN: diff %t.bn.compile %t.bn.opt
//
// RUN: tessel-compile %examples/bn_mlp.mlir --emit=mlir --no-train -o %t.eval.compile
// RUN: tessel-opt %examples/bn_mlp.mlir --tessel-pipeline="source=%examples/bn_mlp.mlir train=false" -o %t.eval.opt
// RUN: diff %t.eval.compile %t.eval.opt
//
// RUN: tessel-compile %examples/gpt.mlir --emit=mlir --mesh dp=2,tp=2 --sequence-parallel --schedule warmup-cosine --warmup 2 --total-steps 10 --recompute selective -o %t.gpt.compile
// RUN: tessel-opt %examples/gpt.mlir --tessel-pipeline="source=%examples/gpt.mlir mesh=dp=2,tp=2 sequence-parallel=true schedule=warmup-cosine warmup=2 total-steps=10 recompute=selective" -o %t.gpt.opt
// RUN: diff %t.gpt.compile %t.gpt.opt
//
// RUN: tessel-compile %examples/gpt.mlir --emit=mlir --mesh dp=2,pp=2 --stage-layers 1,3 --microbatches 4 --pipeline-schedule gpipe -o %t.pp.compile
// RUN: tessel-opt %examples/gpt.mlir --tessel-pipeline="source=%examples/gpt.mlir mesh=dp=2,pp=2 stage-layers=1,3 microbatches=4 pipeline-schedule=gpipe" -o %t.pp.opt
// RUN: diff %t.pp.compile %t.pp.opt
//
// The pipeline lowers to the LLVM dialect, with the model's description:
// RUN: FileCheck %s --input-file=%t.gpt.opt
// CHECK: llvm.mlir.global {{.*}} @__tessel_model_json
// CHECK-NOT: nn.
// CHECK: llvm.func @tessel_all_reduce
//
// A bad setting is the same located error in both tools:
// RUN: not tessel-opt %examples/mlp.mlir --tessel-pipeline="lr=-1" 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: mlp.mlir:{{.*}}error: training settings: lr must be a number >= 0, got '-1'
