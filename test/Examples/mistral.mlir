// Tests that examples/mistral.mlir is scripts/llama-model.py's Llama with a
// sliding window of 16 keys (Mistral's sliding_window) over its 64
// positions, that it parses, verifies and round-trips, and that the window
// bounds attention's cost: each query row reads at most 16 keys, so
// B·H·S·16 = 32768 scores instead of 131072:
//   attention                 2·32768·32·2 + 5·32768 =   4358144
// and a block costs llama's 220692480 less 17432576 plus that, 207618048.
// The model: 4 blocks 830472192, final RMS norm 262144, LM head 33554432,
// cross-entropy 525312; total 864814080.
// RUN: python3 %scripts/llama-model.py --sliding-window 16 | diff - %examples/mistral.mlir
// RUN: tessel-opt %examples/mistral.mlir | tessel-opt | FileCheck %s
// RUN: tessel-opt %examples/mistral.mlir --mlir-print-op-generic | tessel-opt | FileCheck %s
// RUN: tessel-opt %examples/mistral.mlir -tessel-report-cost=per-op=false -o /dev/null 2>&1 | FileCheck %s --check-prefix=COST
// The gradient keeps the window.
// RUN: tessel-opt %examples/mistral.mlir -tessel-autodiff -canonicalize -cse | FileCheck %s --check-prefix=GRAD

// CHECK-LABEL: func.func private @block
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} causal window 16 : (tensor<8x64x4x32xf32>, tensor<8x64x2x32xf32>, tensor<8x64x2x32xf32>)
// COST: remark: function @block: 20 ops, flops 207618048,
// COST: remark: function @loss: 5 ops, flops 864814080,
// GRAD: nn.attention %{{.*}}, %{{.*}}, %{{.*}} causal window 16 lse :
// GRAD: nn.attention_grad %{{.*}} causal window 16 :
