// RUN: tessel-compile %S/../../examples/gpt.mlir --report -o %t.f32.so | FileCheck %s --check-prefix=F32
// RUN: tessel-compile %S/../../examples/gpt.mlir --precision bf16 --report -o %t.bf16.so | FileCheck %s --check-prefix=BF16
// RUN: tessel-compile %S/../../examples/gpt.mlir --precision bf16 --mesh dp=2,pp=2 --microbatches 2 --report -o %t.pp.so | FileCheck %s --check-prefix=PP
// RUN: tessel-compile %S/../../examples/gpt.mlir --precision bf16 --mesh tp=2 --sequence-parallel -o %t.sp.so
// RUN: not tessel-compile %S/../../examples/gpt.mlir --precision fp8 -o %t.bad.so 2>&1 | FileCheck %s --check-prefix=BAD

// Tests --precision bf16 on examples/gpt.mlir (Ψ = 834,304 parameters):
// the master weights, gradients and AdamW state stay f32 (4Ψ, 4Ψ, 8Ψ
// bytes, as in f32), the bf16 copies of the weights are 2Ψ bytes of
// scratch, and the activations the layers keep for the backward halve
// (16 MiB in f32; in bf16 8 MiB plus the layers' bf16 weight slices, 4 x
// 393,728 bytes, which the backward reads).
// F32:      layer activations kept                16777216 bytes
// F32-NOT:  weight copies
// F32:        params                               3337216 bytes
// F32-NEXT:   grads                                3337216 bytes
// F32-NEXT:   states                               6674432 bytes
// BF16:     layer activations kept                 9963520 bytes
// BF16-NEXT: bf16 weight copies                     1668608 bytes (in scratch; params, grads and states stay f32)
// BF16:       params                               3337216 bytes
// BF16-NEXT:  grads                                3337216 bytes
// BF16-NEXT:  states                               6674432 bytes

// A pipeline's stages pass bf16 activations: a microbatch of 4x64x128 is
// 65,536 bytes (f32 would send twice that), 2 per step each way.
// PP:      point-to-point per step (bytes a rank of each stage sends: 2 activations forward, 2 gradients back)
// PP-NEXT:   stage 0             131072
// PP-NEXT:   stage 1             131072

// Sequence parallelism compiles (the run that checks it against one
// device is tessel-run-precision-tests): the weights' bf16 copies keep the
// weights' tensor-parallel split, so attention's queries stay whole.

// BAD: --precision fp8: expected f32 or bf16
