// Tests tessel-compile --zero: the report's training state per rank against
// the ZeRO formulas, and the communication each stage moves, on
// examples/gpt.mlir over dp=4 (AdamW, the default optimizer: two f32 states
// per parameter; one microbatch), exactly as printed; and the padding of a
// parameter that does not split evenly (examples/mlp.mlir's fc2.bias).
//
// RUN: tessel-compile %examples/gpt.mlir --mesh dp=4 --zero 0 --emit=mlir -o %t.z0.mlir --report | FileCheck %s --check-prefix=Z0
// RUN: tessel-compile %examples/gpt.mlir --mesh dp=4 --zero 1 --emit=mlir -o %t.z1.mlir --report | FileCheck %s --check-prefix=Z1
// RUN: tessel-compile %examples/gpt.mlir --mesh dp=4 --zero 2 --emit=mlir -o %t.z2.mlir --report --report-json %t.z2.json | FileCheck %s --check-prefix=Z2
// RUN: FileCheck %s --check-prefix=JSON --input-file %t.z2.json
// RUN: tessel-compile %examples/gpt.mlir --mesh dp=4 --zero 3 --emit=mlir -o %t.z3.mlir --report | FileCheck %s --check-prefix=Z3
// RUN: tessel-compile %examples/gpt.mlir --mesh dp=4 --zero 3 --no-reshard-after-forward --emit=mlir -o %t.z3n.mlir --report | FileCheck %s --check-prefix=Z3N
// RUN: tessel-compile %examples/mlp.mlir --mesh dp=4 --zero 2 --emit=mlir -o %t.mlp.mlir --report --report-json %t.mlp.json | FileCheck %s --check-prefix=PAD
// RUN: FileCheck %s --check-prefix=PAD-JSON --input-file %t.mlp.json
// RUN: tessel-compile %examples/gpt.mlir --mesh dp=2,cp=2 --zero 1 --emit=mlir -o %t.cp.mlir --report | FileCheck %s --check-prefix=CP

// gpt: Ψ = 834304 parameters (wte 256·128, wpe 64·128, 4 layers of 198272,
// ln_f 2·128), every one a multiple of 4 elements per layer, so each chunk
// is exact and every "bytes" equals its formula. Per parameter: 4 bytes of
// f32 weight, 4 of gradient, 8 of AdamW's m and v; N = 4.
//   ZeRO-0: 4Ψ + 4Ψ + 8Ψ        = 16Ψ          = 13348864
//   ZeRO-1: 4Ψ + 4Ψ + 8Ψ/N      = 8Ψ+8Ψ/N      =  8343040
//   ZeRO-2: 4Ψ + 4Ψ/N + 8Ψ/N    = 4Ψ+12Ψ/N     =  5840128
//   ZeRO-3: 4Ψ/N + 4Ψ/N + 8Ψ/N  = 16Ψ/N        =  3337216
//
// Communication: "bytes" is the payload of the calls, "ring bytes" what a
// rank sends in a ring: 2(N-1)/N = 1.5x an all-reduce's payload, (N-1)/N =
// 0.75x a reduce-scatter's or an all-gather's (of the gathered size).
//
// ZeRO-0 (plain DDP): the backward all-reduces the loss (4 bytes) and
// every gradient, 4Ψ = 3337216 bytes, in 25 MiB buckets: 6 calls,
// 1.5 · 3337220 = 5005830 ring bytes a step. M > 1 microbatches reduce
// the loss in each (backward_no_sync) and the summed gradients once
// (reduce_grads, one 25 MiB bucket).
// Z0: training state per rank (not sharded; Ψ = 834304 parameters per rank before ZeRO)
// Z0-NEXT: params 4Ψ 3337216 bytes (formula 3337216.0)
// Z0-NEXT: grads 4Ψ 3337216 bytes (formula 3337216.0)
// Z0-NEXT: states 8Ψ 6674432 bytes (formula 6674432.0)
// Z0-NEXT: total 16Ψ 13348864 bytes (formula 13348864.0)
// Z0-NEXT: communication per rank (mesh dp=4)
// Z0-NEXT: entry collective axes calls bytes ring bytes
// Z0-NEXT: forward all_reduce dp 1 4 6
// Z0-NEXT: backward all_reduce dp 6 3337220 5005830
// Z0-NEXT: backward_no_sync all_reduce dp 1 4 6
// Z0-NEXT: reduce_grads all_reduce dp 1 3337216 5005824
// Z0-NEXT: step (backward+update) 6 3337220 5005830
// Z0-NEXT: step of M > 1 microbatches: M x 4 (backward_no_sync) + 3337216 (reduce_grads+update) bytes
//
// ZeRO-1 on dp=2,cp=2: the data axes are dp and cp (Megatron's
// distributed optimizer over its data-parallel group with the
// context-parallel ranks in it), so the states shard 4 ways as on dp=4;
// wpe, whose rows cp splits (a rank's block is 32·128), shards over dp
// alone. Ψ = 834304 − 4096 = 830208 a rank; the states hold
// 8 · (830208 − 4096) / 4 + 8 · 4096 / 2 = 1668608 bytes, the formula's
// 8Ψ/N with N = 4 for all of them 1660416. The update reduce-scatters and
// all-gathers the 19 parameters over dp·cp, wpe over dp.
// CP: training state per rank (ZeRO-1 over dp·cp=4; Ψ = 830208 parameters per rank before ZeRO)
// CP-NEXT: params 4Ψ 3320832 bytes (formula 3320832.0)
// CP-NEXT: grads 4Ψ 3320832 bytes (formula 3320832.0)
// CP-NEXT: states 8Ψ/N 1668608 bytes (formula 1660416.0)
// CP: update all_gather dp 1 16384
// CP-NEXT: update all_gather dp,cp 19 3304448
// CP-NEXT: update reduce_scatter dp 1 16384
// CP-NEXT: update reduce_scatter dp,cp 19 3304448
//
// ZeRO-1: the backward keeps its partial gradients (only the loss is
// all-reduced); the update reduce-scatters them (0.75 · 4Ψ = 2502912) and
// all-gathers the stepped parameters (2502912 again), one call per
// parameter (the 16 stacked ones whole): 6 + 2 · 2502912 = 5005830 ring
// bytes, the same as DDP (an all-reduce is a reduce-scatter and an
// all-gather).
// Z1: training state per rank (ZeRO-1 over dp=4; Ψ = 834304 parameters per rank before ZeRO)
// Z1-NEXT: params 4Ψ 3337216 bytes (formula 3337216.0)
// Z1-NEXT: grads 4Ψ 3337216 bytes (formula 3337216.0)
// Z1-NEXT: states 8Ψ/N 1668608 bytes (formula 1668608.0)
// Z1-NEXT: total 8Ψ+8Ψ/N 8343040 bytes (formula 8343040.0)
// Z1-NEXT: communication per rank (mesh dp=4)
// Z1-NEXT: entry collective axes calls bytes ring bytes
// Z1-NEXT: forward all_reduce dp 1 4 6
// Z1-NEXT: backward all_reduce dp 1 4 6
// Z1-NEXT: update all_gather dp 20 3337216 2502912
// Z1-NEXT: update reduce_scatter dp 20 3337216 2502912
// Z1-NEXT: step (backward+update) 41 6674436 5005830
//
// ZeRO-2: the reduce-scatters move into the backward, a stacked
// parameter's per layer (4 layers x 16 + 4 others = 68 calls); the same
// 5005830 ring bytes.
// Z2: training state per rank (ZeRO-2 over dp=4; Ψ = 834304 parameters per rank before ZeRO)
// Z2-NEXT: params 4Ψ 3337216 bytes (formula 3337216.0)
// Z2-NEXT: grads 4Ψ/N 834304 bytes (formula 834304.0)
// Z2-NEXT: states 8Ψ/N 1668608 bytes (formula 1668608.0)
// Z2-NEXT: total 4Ψ+12Ψ/N 5840128 bytes (formula 5840128.0)
// Z2-NEXT: communication per rank (mesh dp=4)
// Z2-NEXT: entry collective axes calls bytes ring bytes
// Z2-NEXT: forward all_reduce dp 1 4 6
// Z2-NEXT: backward all_reduce dp 1 4 6
// Z2-NEXT: backward reduce_scatter dp 68 3337216 2502912
// Z2-NEXT: update all_gather dp 20 3337216 2502912
// Z2-NEXT: step (backward+update) 89 6674436 5005830
//
// ZeRO-3: the update gathers nothing; every use gathers its parameter,
// per layer (68 calls, 4Ψ, for a forward). The backward entry gathers all
// of them for its forward (68 calls) and again those its backward reads
// (34 calls, 3281408 bytes): not the 13952 elements the backward never
// reads (the biases that are only added, the layer norms' shifts, wpe:
// 4 · (7 · 128 + 512) + 64 · 128 + 128 = 13952; 55808 bytes). Ring bytes:
// 0.75 · (6618624 + 3337216) + 6 = 7466886 <= 1.5 x DDP's 5005830
// (7508745), by 0.75 · 55808 + 3.
// Z3: training state per rank (ZeRO-3 over dp=4; Ψ = 834304 parameters per rank before ZeRO)
// Z3-NEXT: params 4Ψ/N 834304 bytes (formula 834304.0)
// Z3-NEXT: grads 4Ψ/N 834304 bytes (formula 834304.0)
// Z3-NEXT: states 8Ψ/N 1668608 bytes (formula 1668608.0)
// Z3-NEXT: total 16Ψ/N 3337216 bytes (formula 3337216.0)
// Z3-NEXT: communication per rank (mesh dp=4)
// Z3-NEXT: entry collective axes calls bytes ring bytes
// Z3-NEXT: forward all_reduce dp 1 4 6
// Z3-NEXT: forward all_gather dp 68 3337216 2502912
// Z3-NEXT: backward all_reduce dp 1 4 6
// Z3-NEXT: backward all_gather dp 102 6618624 4963968
// Z3-NEXT: backward reduce_scatter dp 68 3337216 2502912
// Z3-NEXT: step (backward+update) 171 9955844 7466886
//
// ZeRO-3 without resharding after the forward: the backward entry gathers
// each parameter once (a stack whole: 16 + 4 = 20 calls) and keeps it to
// the backward, so a step moves DDP's 5005830 ring bytes; the gathered
// parameters live in scratch: 12689280 bytes of arena against 11091840
// resharded (tessel-compile-overlap.mlir).
// Z3N: arena (one rank) 12689280 bytes
// Z3N: total 16Ψ/N 3337216 bytes (formula 3337216.0)
// Z3N: forward all_gather dp 68 3337216 2502912
// Z3N-NEXT: backward all_reduce dp 1 4 6
// Z3N-NEXT: backward all_gather dp 20 3337216 2502912
// Z3N-NEXT: backward reduce_scatter dp 68 3337216 2502912
// Z3N-NEXT: step (backward+update) 89 6674436 5005830

// The JSON report's training state: "bytes" is the sum of the
// description's tensors' bytes per role; every region holds exactly those
// (each tensor a multiple of 64 bytes here).
// JSON: "regions":{{{.*}}"grads":{"bytes":834304,"offset":3337216}{{.*}}"params":{"bytes":3337216,"offset":0}{{.*}}"states":{"bytes":1668608,"offset":4171520}}
// JSON: "training_state":{"dp":4,"grads":{"bytes":834304,"formula":"4Ψ/N","formula_bytes":834304},"padded":[],"parameters":834304,"params":{"bytes":3337216,"formula":"4Ψ","formula_bytes":3337216},"states":{"bytes":1668608,"formula":"8Ψ/N","formula_bytes":1668608},"total":{"bytes":5840128,"formula":"4Ψ+12Ψ/N","formula_bytes":5840128},"zero_axes":"dp","zero_stage":2}
// JSON-SAME: "zero_stage":2

// mlp: Ψ = 784·1024 + 1024 + 1024·10 + 10 = 814090. fc2.bias (10
// elements) is padded to 12 for 4 chunks of 3: its gradient chunk holds 12
// bytes, not 10 (grads +2 over the formula), its m and v 24, not 20
// (states +4). In the arena each tensor is rounded up to 64 bytes: the
// grads region is 802816 + 1024 + 10240 + 64 = 814144. The backward
// reduce-scatters the padded gradients, 4 · (Ψ + 2) = 3256368 bytes:
// 2442276 ring bytes, and the update gathers as much; a step sends 12 ring
// bytes more than DDP's 4884546 (1.5 · 3256364), the padding's.
// PAD: arena (one rank)
// PAD: grads 814144 bytes at 3256384
// PAD: training state per rank (ZeRO-2 over dp=4; Ψ = 814090 parameters per rank before ZeRO)
// PAD-NEXT: params 4Ψ 3256360 bytes (formula 3256360.0)
// PAD-NEXT: grads 4Ψ/N 814092 bytes (formula 814090.0)
// PAD-NEXT: states 8Ψ/N 1628184 bytes (formula 1628180.0)
// PAD-NEXT: total 4Ψ+12Ψ/N 5698636 bytes (formula 5698630.0)
// PAD-NEXT: padded for the shard: fc2.bias 10 -> 12 elements
// PAD-NEXT: communication per rank (mesh dp=4)
// PAD-NEXT: entry collective axes calls bytes ring bytes
// PAD-NEXT: forward all_reduce dp 1 4 6
// PAD-NEXT: backward all_reduce dp 1 4 6
// PAD-NEXT: backward reduce_scatter dp 4 3256368 2442276
// PAD-NEXT: update all_gather dp 4 3256368 2442276
// PAD-NEXT: step (backward+update) 9 6512740 4884558
// PAD-JSON: "padded":[{"elements":10,"name":"fc2.bias","padded":12}]
