// RUN: tessel-compile %S/../../examples/gpt.mlir --report -o %t.f32.so | FileCheck %s --check-prefix=F32
// RUN: tessel-compile %S/../../examples/gpt.mlir --precision bf16 --report -o %t.bf16.so | FileCheck %s --check-prefix=BF16
// RUN: tessel-compile %S/../../examples/gpt.mlir --precision bf16 --mesh dp=2,pp=2 --microbatches 2 --report -o %t.pp.so | FileCheck %s --check-prefix=PP
// RUN: tessel-compile %S/../../examples/gpt.mlir --precision bf16 --mesh tp=2 --sequence-parallel -o %t.sp.so
// RUN: tessel-compile %S/../../examples/gpt.mlir --precision f64 --report -o %t.f64.so | FileCheck %s --check-prefix=F64
// RUN: not tessel-compile %S/../../examples/gpt.mlir --precision fp8 -o %t.bad.so 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not tessel-compile %S/../../examples/gpt.mlir --precision f64 --grad-precision f32 -o %t.bad.so 2>&1 | FileCheck %s --check-prefix=BADGRAD
// RUN: not tessel-compile %S/../../examples/gpt.mlir --grad-precision bf16 -o %t.bad.so 2>&1 | FileCheck %s --check-prefix=BADGRAD
// RUN: not tessel-compile %S/../../examples/gpt.mlir --precision bf16 --grad-precision f16 -o %t.bad.so 2>&1 | FileCheck %s --check-prefix=BADGRAD16
// RUN: tessel-compile %S/../../examples/gpt.mlir --precision bf16 --grad-precision bf16 --mesh dp=4 --optimizer adamw --report -o %t.z0.so | FileCheck %s --check-prefix=Z0
// RUN: tessel-compile %S/../../examples/gpt.mlir --precision bf16 --grad-precision bf16 --mesh dp=4 --zero 1 --optimizer adamw --report -o %t.z1.so | FileCheck %s --check-prefix=Z1
// RUN: tessel-compile %S/../../examples/gpt.mlir --precision bf16 --grad-precision bf16 --mesh dp=4 --zero 2 --optimizer adamw --report -o %t.z2.so | FileCheck %s --check-prefix=Z2
// RUN: tessel-compile %S/../../examples/gpt.mlir --precision bf16 --grad-precision bf16 --mesh dp=4 --zero 3 --optimizer adamw --report -o %t.z3.so | FileCheck %s --check-prefix=Z3
// RUN: tessel-compile %S/../../examples/gpt.mlir --precision bf16 --mesh dp=4 --optimizer adamw --report -o %t.g0.so | FileCheck %s --check-prefix=G0
// RUN: tessel-compile %S/../../examples/gpt.mlir --precision bf16 --mesh dp=4 --zero 1 --optimizer adamw --report -o %t.g1.so | FileCheck %s --check-prefix=G1
// RUN: tessel-compile %S/../../examples/gpt.mlir --precision bf16 --mesh dp=4 --zero 3 --optimizer adamw --report -o %t.g3.so | FileCheck %s --check-prefix=G3

// Tests --precision bf16 on examples/gpt.mlir (Ψ = 834,304 parameters):
// the parameters are stored in bf16 (2Ψ bytes), each with an f32 master
// copy in the optimizer state (4Ψ) beside AdamW's m and v (8Ψ); gradients
// are f32 (4Ψ) by default and bf16 (2Ψ) with --grad-precision bf16, which
// gives the ZeRO paper's 16Ψ. The activations the layers keep for the
// backward halve (16 MiB in f32, 8 MiB in bf16), all but the attention's
// log-sum-exp, f32 in both (32 KiB).
// F32:      layer activations kept                16809984 bytes
// F32-NOT:  precision bf16
// F32:        params                               3337216 bytes
// F32-NEXT:   grads                                3337216 bytes
// F32-NEXT:   states                               6674432 bytes
// F32:        total          16Ψ                 13348864 bytes
// BF16:     layer activations kept                 8421376 bytes
// BF16-NEXT: precision bf16: parameters bf16, f32 master weights in the optimizer state, gradients f32
// BF16:       params                               1668608 bytes
// BF16-NEXT:  grads                                3337216 bytes
// BF16-NEXT:  states                              10011648 bytes
// BF16:       params         2Ψ                   1668608 bytes (formula 1668608.0)
// BF16-NEXT:  grads          4Ψ                   3337216 bytes (formula 3337216.0)
// BF16-NEXT:  master         4Ψ                   3337216 bytes (formula 3337216.0)
// BF16-NEXT:  states         8Ψ                   6674432 bytes (formula 6674432.0)
// BF16-NEXT:  total          18Ψ                 15017472 bytes (formula 15017472.0)

// --precision f64: every f32 tensor widened, so every region is twice
// f32's (8 bytes a parameter, gradient and state element: 32Ψ with
// AdamW), activations included (the log-sum-exp too, f64 for f64 queries).
// F64:      layer activations kept                33619968 bytes
// F64-NEXT: precision f64: the model's f32 tensors computed in f64 (parameters, gradients and optimizer state f64)
// F64:        params                               6674432 bytes
// F64-NEXT:   grads                                6674432 bytes
// F64-NEXT:   states                              13348864 bytes
// F64:        total          32Ψ                 26697728 bytes

// The ZeRO paper's mixed-precision Adam on dp=4 (N = 4): 16Ψ, 4Ψ+12Ψ/N,
// 2Ψ+14Ψ/N, 16Ψ/N bytes, each row exactly its formula. Data parallelism
// all-reduces bf16 gradients (half the f32 ring bytes, 5,005,830); stages
// 1 and 2 move the same bytes (a bf16 reduce-scatter and a bf16 gather of
// the parameters), stage 3 1.49x (the backward gathers again only the 34
// parameters it reads).
// Z0:   precision bf16: parameters bf16, f32 master weights in the optimizer state, gradients bf16
// Z0:     params         2Ψ                   1668608 bytes (formula 1668608.0)
// Z0-NEXT: grads         2Ψ                   1668608 bytes (formula 1668608.0)
// Z0-NEXT: master        4Ψ                   3337216 bytes (formula 3337216.0)
// Z0-NEXT: states        8Ψ                   6674432 bytes (formula 6674432.0)
// Z0-NEXT: total         16Ψ                 13348864 bytes (formula 13348864.0)
// Z0:     step (backward+update) 6 1668612 2502918
// Z1:     params         2Ψ                   1668608 bytes (formula 1668608.0)
// Z1-NEXT: grads         2Ψ                   1668608 bytes (formula 1668608.0)
// Z1-NEXT: master        4Ψ/N                  834304 bytes (formula 834304.0)
// Z1-NEXT: states        8Ψ/N                 1668608 bytes (formula 1668608.0)
// Z1-NEXT: total         4Ψ+12Ψ/N            5840128 bytes (formula 5840128.0)
// Z1:     step (backward+update) {{[0-9]+ [0-9]+}} 2502918
// Z2:     grads          2Ψ/N                  417152 bytes (formula 417152.0)
// Z2:     total          2Ψ+14Ψ/N            4588672 bytes (formula 4588672.0)
// Z2:     step (backward+update) {{[0-9]+ [0-9]+}} 2502918
// Z3:     params         2Ψ/N                  417152 bytes (formula 417152.0)
// Z3:     total          16Ψ/N                3337216 bytes (formula 3337216.0)
// Z3:     step (backward+update) {{[0-9]+ [0-9]+}} 3733446

// f32 gradients (the default) are reduced in f32: stage 0 all-reduces the
// f32 ring bytes, stage 1 reduce-scatters f32 and gathers bf16 parameters
// (0.75x); the state is 18Ψ, 6Ψ+12Ψ/N, 2Ψ+16Ψ/N, 18Ψ/N.
// G0:     total          18Ψ                 15017472 bytes
// G0:     step (backward+update) {{[0-9]+ [0-9]+}} 5005830
// G1:     total          6Ψ+12Ψ/N            7508736 bytes
// G1:     step (backward+update) {{[0-9]+ [0-9]+}} 3754374
// G3:     total          18Ψ/N                3754368 bytes

// A pipeline's stages pass bf16 activations: a microbatch of 4x64x128 is
// 65,536 bytes (f32 would send twice that), 2 per step each way.
// PP:      point-to-point per step (bytes a rank of each stage sends: 2 activations forward, 2 gradients back)
// PP-NEXT:   stage 0             131072
// PP-NEXT:   stage 1             131072

// Sequence parallelism compiles (the run that checks it against one
// device is tessel-run-precision-tests): the weights' bf16 copies keep the
// weights' tensor-parallel split, so attention's queries stay whole.

// BAD: --precision fp8: expected f32, bf16 or f64
// BADGRAD: --grad-precision applies to --precision bf16
// BADGRAD16: --grad-precision f16: expected f32 or bf16
