// RUN: tessel-compile %examples/gpt.mlir --mesh dp=2 --bucket-mb 0.5 --emit=mlir -o %t.ddp.mlir --report | FileCheck %s --check-prefix=DDP
// RUN: FileCheck %s --check-prefix=DDP-IR --input-file %t.ddp.mlir
// RUN: tessel-compile %examples/gpt.mlir --mesh dp=2 --bucket-mb 0.5 --overlap 0 --emit=mlir -o %t.blocking.mlir --report | FileCheck %s --check-prefix=BLOCKING
// RUN: FileCheck %s --check-prefix=BLOCKING-IR --input-file %t.blocking.mlir
// RUN: tessel-compile %examples/gpt.mlir --mesh dp=4 --zero 3 --emit=mlir -o %t.z3.mlir --report | FileCheck %s --check-prefix=Z3
// RUN: FileCheck %s --check-prefix=Z3-IR --input-file %t.z3.mlir
// RUN: tessel-compile %examples/gpt.mlir --mesh dp=2 --bucket-mb 0.5 -o %t.so
// RUN: tessel-run %t.so --steps 2 2>&1 | FileCheck %s --check-prefix=TRAIN
// RUN: not tessel-compile %examples/gpt.mlir --mesh dp=2 --overlap -1 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: tessel-run %examples/gpt.mlir --mesh dp=2 --bucket-mb 0.5 --overlap 0 --steps 1 2>&1 | FileCheck %s --check-prefix=RUN-BLOCKING
// RUN: not tessel-run %examples/gpt.mlir --mesh dp=2 --overlap two 2>&1 | FileCheck %s --check-prefix=RUN-BAD

// Tests that DDP's gradient buckets overlap the backward. gpt's layer
// derivative fills three buckets of 0.5 MiB per layer, each started as
// soon as it is full. The first completes while the rest of the layer's
// backward runs; the last two fill where the layer ends, so the layer
// returns them in flight and the repeat's finish completes them after the
// next layer's backward (the block_derivative_finish). Only the bucket of
// the embeddings and the final norm (41,216 floats, 164,864 bytes), which
// fills as the backward ends, blocks. Of 3,337,220 bytes, 3,172,356
// overlap compute. The payload and calls are the blocking program's; the
// arena grows by the two slots of in-flight buckets (23,827,072 bytes
// blocking; the same 24,422,016 with --no-fuse-bias-grads). Each bucket's
// gradients are computed where the bucket holds them (no concat copies;
// its concat is therefore no cover of a window), and each layer sums them
// from the bucket into their gradient buffers (tessel-accumulate-in-layers:
// the slices are views), the finish those of the buckets in flight: no
// stack of the layers' gradients (27,594,368 bytes before, 27,327,104
// blocking). Those adds are the kernels the last layer's in-flight buckets
// overlap before the finish after the loop.
// Fusing the bias gradients keeps every overlapped byte
// (tessel-fuse-bias-grads places them where each window keeps a kernel).
// DDP: arena (one rank) 24422016 bytes
// DDP: entry collective axes calls bytes ring bytes overlapped
// DDP: backward all_reduce dp 14 3337220 3337220 3172356
// DDP: step (backward+update) 14 3337220 3337220 3172356
// DDP-IR: llvm.call @tessel_all_reduce_start
// DDP-IR: llvm.call @tessel_comm_wait
// DDP-IR: llvm.func @tessel_fn_block_derivative_finish
// DDP-IR: llvm.call @tessel_fn_block_derivative_finish
// BLOCKING: arena (one rank) 23827072 bytes
// BLOCKING: backward all_reduce dp 14 3337220 3337220 0
// BLOCKING-IR-NOT: _start
// BLOCKING-IR-NOT: tessel_comm_wait

// Tests that ZeRO-3 prefetches its gathers and overlaps its
// reduce-scatters: the same calls and bytes as blocking
// (tessel-compile-zero.mlir: 171 calls, 9,955,844 bytes), of which
// 9,693,700 start early and 9,692,676 overlap compute: the first layer's
// two 512-byte norm gathers start in the prefetch before the loop and are
// waited for before any kernel runs (tessel-run-trace.mlir sees the same
// in a trace). Each repeated layer's gathers move into a
// prefetch that runs one layer ahead (FSDP's forward and backward
// prefetch), so two layers' gathered parameters are alive at once: the
// arena is 11,091,840 bytes against the blocking program's 9,782,400.
// Z3: arena (one rank) 11091840 bytes
// Z3: step (backward+update) 171 9955844 7466886 9692676
// Z3-IR-DAG: llvm.func @tessel_fn_block_prefetch
// Z3-IR-DAG: llvm.func @tessel_fn_block_keep_prefetch
// Z3-IR-DAG: llvm.func @tessel_fn_block_derivative_prefetch
// Z3-IR-DAG: llvm.call @tessel_all_gather_start

// The run's counters equal the report's, started bytes included
// (tessel-run warns on any difference).
// TRAIN-NOT: warning
// TRAIN: all_reduce over dp: 14 calls, 3337220 bytes (3172356 started)

// BAD: tessel-compile: --overlap -1: expected 0 (every collective blocks) or more

// tessel-run passes --overlap to tessel-compile: with 0 nothing overlaps.
// RUN-BLOCKING: all_reduce over dp: 14 calls, 3337220 bytes{{$}}
// RUN-BAD: bad value 'two' for --overlap (expected an integer)
