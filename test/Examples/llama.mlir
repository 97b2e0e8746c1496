// Tests that examples/llama.mlir parses, verifies, round-trips (custom and
// generic form), survives the standard cleanups, and costs L times its block.
// Per block (b=8, s=64, h=128, 4 query heads of 32 over 2 key/value heads,
// SwiGLU 384; n = b·s = 512):
//   q, o projections          2 · 2·n·h·h          =  33554432
//   k, v projections          2 · 2·n·h·64         =  16777216
//   SwiGLU gate, up, down     3 · 2·n·h·384        = 150994944
//   attention (B·H·S·T = 131072 scores)
//                             2·131072·32·2 + 5·131072 = 17432576
//   rope of q and k           3 · (n·128 + n·64)   =    294912
//   2 RMS norms               2 · 4·n·h            =    524288
//   silu 4·n·384, mul n·384, 2 adds of n·h         =   1114112
//                                                  = 220692480
// The model: 4 blocks 882769920, final RMS norm 262144, untied LM head
// 2·n·h·256 = 33554432, cross-entropy 4·n·256 + 2·n = 525312; total
// 917111808.
// RUN: tessel-opt %examples/llama.mlir | tessel-opt | FileCheck %s
// RUN: tessel-opt %examples/llama.mlir --mlir-print-op-generic | tessel-opt | FileCheck %s
// RUN: tessel-opt %examples/llama.mlir -canonicalize -cse -symbol-dce | FileCheck %s
// RUN: tessel-opt %examples/llama.mlir -tessel-report-cost=per-op=false -o /dev/null 2>&1 | FileCheck %s --check-prefix=COST
// RUN: tessel-opt %examples/llama.mlir -tessel-plan-memory=report=true -o /dev/null 2>&1 | FileCheck %s --check-prefix=PLAN
// RUN: tessel-compile %examples/llama.mlir --mesh tp=4 --report -o %t.tp4.so | FileCheck %s --check-prefix=TP4

// CHECK-LABEL: func.func private @block
// CHECK: nn.rms_norm
// CHECK: nn.rope %{{.*}} : tensor<8x64x4x32xf32>
// CHECK: nn.rope %{{.*}} : tensor<8x64x2x32xf32>
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} causal : (tensor<8x64x4x32xf32>, tensor<8x64x2x32xf32>, tensor<8x64x2x32xf32>)
// CHECK: nn.silu
// CHECK-LABEL: func.func @loss
// CHECK-SAME: nn.param = "output.weight"
// CHECK: nn.embedding
// CHECK: nn.repeat @block(
// CHECK: nn.rms_norm
// CHECK: nn.cross_entropy
// The memory plan reaches the floor (the most bytes alive at one op): at
// the SwiGLU product, h1 (256 KiB), silu(gate), up and their product (768
// KiB each) are alive: 2.5 MiB.
// On tp=4, more ranks than its 2 key/value heads: the k and v
// projections' columns are repeated to one head per rank
// (tessel-repeat-kv-heads), so every rank runs its own query head and
// gathers only the weights' columns (8 all-gathers of 32,768 bytes in the
// forward entry, 16 in the backward's), where it gathered q, k and v
// whole and ran all 4 heads (12 and 28 all-gathers, 2,097,152 and
// 5,767,168 bytes; 10,491,904 bytes in the step).
// TP4: forward   all_gather tp 8 262144
// TP4: backward  all_gather tp 16 786432
// TP4: step (backward+update) 37 5511168
// PLAN: remark: scratch peak of @block: 2621440 bytes (live bytes at most 2621440)
// PLAN: remark: scratch peak of @loss: 3407872 bytes (live bytes at most 3407872)
// COST: remark: function @block: 20 ops, flops 220692480,
// COST: remark: function @loss: 5 ops, flops 917111808,
