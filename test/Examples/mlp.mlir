// Tests that examples/mlp.mlir parses, verifies, round-trips (custom and
// generic form) and costs what the hand count says:
//   fc1 2·32·784·1024 = 51380224, bias add 32768, gelu 8·32768 = 262144,
//   fc2 2·32·1024·10 = 655360, bias add 320, cross-entropy 4·320 + 2·32 = 1344.
// RUN: tessel-opt %examples/mlp.mlir | tessel-opt | FileCheck %s
// RUN: tessel-opt %examples/mlp.mlir --mlir-print-op-generic | tessel-opt | FileCheck %s
// RUN: tessel-opt %examples/mlp.mlir -tessel-report-cost=per-op=false -o /dev/null 2>&1 | FileCheck %s --check-prefix=COST

// CHECK-LABEL: func.func @loss
// CHECK-SAME: nn.input
// CHECK-SAME: nn.label
// CHECK-SAME: nn.init = #nn.init<normal, 0.02>, nn.param = "fc1.weight"
// CHECK: nn.matmul
// CHECK: nn.broadcast %{{.*}} dims = [1] : tensor<1024xf32> -> tensor<32x1024xf32>
// CHECK: nn.gelu
// CHECK: nn.cross_entropy
// COST: remark: function @loss: 8 ops, flops 52332160, bytes 4413100
