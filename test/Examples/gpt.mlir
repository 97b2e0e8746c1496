// Tests that examples/gpt.mlir parses, verifies, round-trips (custom and
// generic form), survives the standard cleanups, and costs L times its block.
// Per block (b=8, s=64, h=128, 4 heads of 32, mlp 512; n = b·s = 512):
//   q, k, v, o projections   4 · 2·n·h·h          =  67108864
//   MLP fc and proj          2 · 2·n·h·512        = 134217728
//   attention (B·H·S·T = 131072 scores)
//                            2·131072·32·2 + 5·131072 = 17432576
//   2 layer norms            2 · 8·n·h            =   1048576
//   7 adds of n·h, 1 of n·512                     =    720896
//   gelu                     8·n·512              =   2097152
//                                                  = 222625792
// The model: 4 blocks 890503168, embedding add n·h = 65536, final norm
// 524288, tied LM head 2·n·h·256 = 33554432, cross-entropy
// 4·n·256 + 2·n = 525312; total 925172736.
// RUN: tessel-opt %examples/gpt.mlir | tessel-opt | FileCheck %s
// RUN: tessel-opt %examples/gpt.mlir --mlir-print-op-generic | tessel-opt | FileCheck %s
// RUN: tessel-opt %examples/gpt.mlir -canonicalize -cse -symbol-dce | FileCheck %s
// RUN: tessel-opt %examples/gpt.mlir -tessel-report-cost=per-op=false -o /dev/null 2>&1 | FileCheck %s --check-prefix=COST
// RUN: tessel-opt %examples/gpt.mlir -tessel-plan-memory=report=true -o /dev/null 2>&1 | FileCheck %s --check-prefix=PLAN

// CHECK-LABEL: func.func private @block
// CHECK: nn.layer_norm
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} causal
// CHECK: nn.gelu %{{.*}} approximate
// CHECK-LABEL: func.func @loss
// CHECK-SAME: nn.axes = ["layers", "embed", "heads"]
// CHECK: nn.embedding
// CHECK: nn.repeat @block(
// CHECK: nn.matmul %{{.*}}, %{{.*}} transpose_rhs
// CHECK: nn.cross_entropy
// The memory plan reaches the floor (the most bytes alive at one op): at
// the MLP's bias add, h1 (256 KiB) and fc's matmul output and sum (1 MiB
// each) are alive, the bias read where it lies (a broadcast view): 2.25
// MiB; the loss's peak is the layer's workspace and what it carries.
// PLAN: remark: scratch peak of @block: 2359296 bytes (live bytes at most 2359296)
// PLAN: remark: scratch peak of @loss: 3145728 bytes (live bytes at most 3145728)
// COST: remark: function @block: 28 ops, flops 222625792,
// COST: remark: function @loss: 7 ops, flops 925172736,
