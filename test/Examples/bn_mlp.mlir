// Tests that examples/bn_mlp.mlir parses, verifies, round-trips and costs
// what the hand count says:
//   fc1 2·64·256·512 = 16777216, batch_norm 8·32768 = 262144, relu 32768,
//   fc2 2·64·512·512 = 33554432, batch_norm 262144, relu 32768,
//   head 2·64·512·10 = 655360, bias add 640, cross-entropy 4·640 + 2·64 = 2688.
// RUN: tessel-opt %examples/bn_mlp.mlir | tessel-opt | FileCheck %s
// RUN: tessel-opt %examples/bn_mlp.mlir --mlir-print-op-generic | tessel-opt | FileCheck %s
// RUN: tessel-opt %examples/bn_mlp.mlir -tessel-report-cost=per-op=false -o /dev/null 2>&1 | FileCheck %s --check-prefix=COST

// CHECK-LABEL: func.func @loss
// CHECK-COUNT-2: nn.batch_norm
// CHECK: nn.cross_entropy
// COST: remark: function @loss: 10 ops, flops 51580160, bytes 3255596
