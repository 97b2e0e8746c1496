// RUN: tessel-compile %examples/gpt.mlir --mesh dp=2 --bucket-mb 0.5 -o %t.ddp.so
// RUN: tessel-run %t.ddp.so --steps 2 --trace %t.ddp.json 2>&1 | FileCheck %s --check-prefix=DDP
// RUN: python3 %S/Inputs/check_trace.py %t.ddp.json 2 2 3337220 | FileCheck %s --check-prefix=DDP-FILE
// RUN: tessel-compile %examples/gpt.mlir --mesh dp=4 --zero 3 -o %t.z3.so
// RUN: tessel-run %t.z3.so --steps 1 --trace %t.z3.json 2>&1 | FileCheck %s --check-prefix=Z3
// RUN: python3 %S/Inputs/check_trace.py %t.z3.json 4 1 9955844 | FileCheck %s --check-prefix=Z3-FILE
// RUN: tessel-compile %examples/gpt.mlir --mesh tp=2 -o %t.tp.so
// RUN: tessel-run %t.tp.so --steps 2 --trace %t.tp.json 2>&1 | FileCheck %s --check-prefix=TP
// RUN: not tessel-run %t.ddp.so --steps 1 --trace %t.ddp.so 2>&1 | FileCheck %s --check-prefix=CLOBBER
// RUN: not tessel-run %t.ddp.so --steps 1 --trace %t.missing/trace.json 2>&1 | FileCheck %s --check-prefix=NO-DIR
// RUN: not tessel-run %t.ddp.so --trace 2>&1 | FileCheck %s --check-prefix=NO-VALUE

// Tests that --trace records the second step (the first warms up) of
// every rank: its kernels and waits on one thread, its collectives on
// another, and that the trace witnesses the compiler's accounting: the
// bytes the trace sees started before a kernel and completed after one
// equal the report's overlapped bytes (tessel-compile-overlap.mlir), and
// tessel-run warns on any difference. 210 kernels: 315 before each layer's
// residual add went into its norm and both norms' input gradients into
// their adds (tessel-fuse-epilogues), and its six bias gradients into
// their weight gradients' GEMMs (tessel-fuse-bias-grads; attention's q, k
// and v bias gradients sum a view of the per-head gradient the GEMM reads
// through another): nine fewer per layer, the same bytes overlapped; one
// fewer since the loss and its gradient are one call; 68 fewer since
// each bucket's gradients are computed where the bucket holds them
// (tessel-plan-memory: no concat copies); and 20 fewer since each layer
// sums its gradients from its buckets into their buffers (a view of the
// bucket, no copy into a stack: 64 adds in the layers and their finishes
// for 64 copies, 16 adds of stacks and 4 slice copies of the last bucket
// gone); one fewer since the position table is added where it lies
// (tessel-plan-memory's broadcast view, tessel_binary_broadcast: no copy);
// and 8 fewer since each layer's input gradient through q, k and v is
// three GEMMs into one buffer (tessel-fuse-epilogues: beta = 1, no adds).

// DDP-NOT: warning
// DDP: tessel-run: trace of step 2 (rank 0): 181 kernels ({{.*}}), 14 collectives ({{.*}}); 3172356 of 3172356 started bytes overlapped kernels
// DDP-NOT: warning
// DDP-FILE: rank 0: 181 kernels, 14 collectives (13 started), 13 waits, 3337220 bytes
// DDP-FILE: rank 1: 181 kernels, 14 collectives (13 started), 13 waits, 3337220 bytes

// Tensor parallelism: the row-parallel all-reduces before a bias add
// block (the bias is read where it lies, no copy to hide them behind); the
// vocabulary-parallel loss's label logit starts early and overlaps its
// maximum's, and so does each layer's input gradient's all-reduce behind
// the last weight gradient's GEMM (its q, k, v sum is their GEMMs' own: it
// starts after the last). 142 kernels: the vocabulary-parallel loss's
// statistics and its gradient are one kernel each (ABI 29), 3 fewer.
// TP-NOT: warning
// TP: tessel-run: trace of step 2 (rank 0): 142 kernels ({{.*}}), 21 collectives ({{.*}}); 2361344 of 2361344 started bytes overlapped kernels
// TP-NOT: warning

// ZeRO-3's two 512-byte gathers of the first layer's norm, started in the
// prefetch before the loop, complete before any kernel runs: started, not
// overlapped, in the trace as in the report.
// Z3-NOT: warning
// Z3: tessel-run: trace of step 1 (rank 0): {{[0-9]+}} kernels ({{.*}}), 171 collectives ({{.*}}); 9692676 of 9693700 started bytes overlapped kernels
// Z3-NOT: warning
// Z3-FILE-COUNT-4: rank {{[0-3]}}: {{[0-9]+}} kernels, 171 collectives

// CLOBBER: tessel-run: error: --trace '{{.*}}.ddp.so' is the model '{{.*}}.ddp.so': refusing to overwrite it
// NO-DIR: tessel-run: error: cannot write --trace file '{{.*}}trace.json': directory '{{.*}}.missing': No such file or directory
// NO-VALUE: tessel-run: error: missing value for --trace
