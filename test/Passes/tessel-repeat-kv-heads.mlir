// RUN: tessel-opt %s --split-input-file -tessel-repeat-kv-heads="mesh=tp=4" | FileCheck %s --check-prefix=TP4
// RUN: tessel-opt %s --split-input-file -tessel-repeat-kv-heads="mesh=dp=2,tp=8" | FileCheck %s --check-prefix=TP8
// RUN: tessel-opt %s --split-input-file -tessel-repeat-kv-heads="mesh=tp=2" | FileCheck %s --check-prefix=SAME
// RUN: tessel-opt %s --split-input-file -tessel-repeat-kv-heads="mesh=dp=4" | FileCheck %s --check-prefix=SAME
// RUN: tessel-opt %s --split-input-file -tessel-repeat-kv-heads | FileCheck %s --check-prefix=SAME
// RUN: tessel-opt %s --split-input-file -tessel-repeat-kv-heads="mesh=mp=4 rules=heads=mp" | FileCheck %s --check-prefix=TP4
// RUN: not tessel-opt %s -tessel-repeat-kv-heads="mesh=tp=4 rules=heads" 2>&1 | FileCheck %s --check-prefix=RULE

// RULE: tessel-repeat-kv-heads: 'heads': expected logical=mesh, e.g. batch=dp

// Tests that grouped-query attention's 2 key/value heads are repeated to
// the 4 ranks of tp=4 (each head twice in a row, key and value alike), and
// to 8 on tp=8 (four times each; dp splits no heads), the attention
// otherwise unchanged; on tp=2 (as many kv heads as ranks), dp=4 (heads
// unsplit) or without a mesh nothing changes. The rules decide which mesh
// axes split the heads.
// TP4-LABEL: func.func @gqa
// TP4: %[[KB:.*]] = nn.broadcast %arg1 dims = [0, 1, 2, 4] : tensor<2x8x2x16xf32> -> tensor<2x8x2x2x16xf32>
// TP4: %[[K:.*]] = nn.reshape %[[KB]] : tensor<2x8x2x2x16xf32> -> tensor<2x8x4x16xf32>
// TP4: %[[VB:.*]] = nn.broadcast %arg2 dims = [0, 1, 2, 4] : tensor<2x8x2x8xf32> -> tensor<2x8x2x2x8xf32>
// TP4: %[[V:.*]] = nn.reshape %[[VB]] : tensor<2x8x2x2x8xf32> -> tensor<2x8x4x8xf32>
// TP4: nn.attention %arg0, %[[K]], %[[V]] causal lse : (tensor<2x8x8x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x8xf32>) -> (tensor<2x8x8x8xf32>, tensor<2x8x8xf32>)
// TP8-LABEL: func.func @gqa
// TP8: nn.reshape %{{.*}} : tensor<2x8x2x4x16xf32> -> tensor<2x8x8x16xf32>
// TP8: nn.reshape %{{.*}} : tensor<2x8x2x4x8xf32> -> tensor<2x8x8x8xf32>
// TP8: nn.attention %arg0, %{{.*}}, %{{.*}} causal lse : (tensor<2x8x8x16xf32>, tensor<2x8x8x16xf32>, tensor<2x8x8x8xf32>)
// SAME-LABEL: func.func @gqa
// SAME-NOT: nn.broadcast
// SAME: nn.attention %arg0, %arg1, %arg2 causal lse
func.func @gqa(%q: tensor<2x8x8x16xf32>, %k: tensor<2x8x2x16xf32>, %v: tensor<2x8x2x8xf32>) -> (tensor<2x8x8x8xf32>, tensor<2x8x8xf32>) {
  %o, %lse = nn.attention %q, %k, %v causal lse : (tensor<2x8x8x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x8xf32>) -> (tensor<2x8x8x8xf32>, tensor<2x8x8xf32>)
  return %o, %lse : tensor<2x8x8x8xf32>, tensor<2x8x8xf32>
}

// -----

// Tests that attention whose query heads the ranks cannot split evenly (6
// over 4) is left as it is, and so is attention with one kv head per query
// head (multi-head) or kv heads the ranks do not divide (3 over 4).
// TP4-LABEL: func.func @unsplit
// TP4-NOT: nn.broadcast
// TP4: return
// SAME-LABEL: func.func @unsplit
func.func @unsplit(%q6: tensor<1x4x6x8xf32>, %k2: tensor<1x4x2x8xf32>,
                   %q4: tensor<1x4x4x8xf32>, %k4: tensor<1x4x4x8xf32>,
                   %q12: tensor<1x4x12x8xf32>, %k3: tensor<1x4x3x8xf32>)
    -> (tensor<1x4x6x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x12x8xf32>) {
  %a = nn.attention %q6, %k2, %k2 : (tensor<1x4x6x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) -> tensor<1x4x6x8xf32>
  %b = nn.attention %q4, %k4, %k4 : (tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  %c = nn.attention %q12, %k3, %k3 : (tensor<1x4x12x8xf32>, tensor<1x4x3x8xf32>, tensor<1x4x3x8xf32>) -> tensor<1x4x12x8xf32>
  return %a, %b, %c : tensor<1x4x6x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x12x8xf32>
}

// -----

// Tests that a key projected by a matmul, split into heads and roped has
// its weight's columns repeated instead (each head's 4 columns twice in a
// row on tp=4): the projection and the rope run on the 4 repeated heads,
// and each rank needs only its head's columns of the weight. A value whose
// projection another op also reads repeats itself.
// TP4-LABEL: func.func @projected
// TP4: %[[W3:.*]] = nn.reshape %arg1 : tensor<16x8xf32> -> tensor<16x2x4xf32>
// TP4: %[[WB:.*]] = nn.broadcast %[[W3]] dims = [0, 1, 3] : tensor<16x2x4xf32> -> tensor<16x2x2x4xf32>
// TP4: %[[W4:.*]] = nn.reshape %[[WB]] : tensor<16x2x2x4xf32> -> tensor<16x16xf32>
// TP4: %[[K0:.*]] = nn.matmul %arg0, %[[W4]] : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
// TP4: %[[K1:.*]] = nn.reshape %[[K0]] : tensor<2x8x16xf32> -> tensor<2x8x4x4xf32>
// TP4: %[[K:.*]] = nn.rope %[[K1]] : tensor<2x8x4x4xf32>
// TP4: %[[V0:.*]] = nn.matmul %arg0, %arg2
// TP4: %[[V1:.*]] = nn.reshape %[[V0]] : tensor<2x8x8xf32> -> tensor<2x8x2x4xf32>
// TP4: %[[VB:.*]] = nn.broadcast %[[V1]] dims = [0, 1, 2, 4] : tensor<2x8x2x4xf32> -> tensor<2x8x2x2x4xf32>
// TP4: %[[V:.*]] = nn.reshape %[[VB]] : tensor<2x8x2x2x4xf32> -> tensor<2x8x4x4xf32>
// TP4: nn.attention %arg3, %[[K]], %[[V]] causal : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
// TP4-NOT: nn.matmul %arg0, %arg1
// SAME-LABEL: func.func @projected
// SAME-NOT: dims = [0, 1
func.func @projected(%x: tensor<2x8x16xf32>, %wk: tensor<16x8xf32>, %wv: tensor<16x8xf32>, %q: tensor<2x8x4x4xf32>)
    -> (tensor<2x8x4x4xf32>, tensor<2x8x8xf32>) {
  %k0 = nn.matmul %x, %wk : (tensor<2x8x16xf32>, tensor<16x8xf32>) -> tensor<2x8x8xf32>
  %k1 = nn.reshape %k0 : tensor<2x8x8xf32> -> tensor<2x8x2x4xf32>
  %k = nn.rope %k1 : tensor<2x8x2x4xf32>
  %v0 = nn.matmul %x, %wv : (tensor<2x8x16xf32>, tensor<16x8xf32>) -> tensor<2x8x8xf32>
  %v = nn.reshape %v0 : tensor<2x8x8xf32> -> tensor<2x8x2x4xf32>
  %a = nn.attention %q, %k, %v causal : (tensor<2x8x4x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>) -> tensor<2x8x4x4xf32>
  return %a, %v0 : tensor<2x8x4x4xf32>, tensor<2x8x8xf32>
}

// -----

// Tests that a biased projection (Qwen2's) repeats its bias with the
// weight's columns: each head's 4 entries twice in a row.
// TP4-LABEL: func.func @projected_bias
// TP4: %[[K0:.*]] = nn.matmul %arg0, %{{.*}} : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
// TP4: %[[B2:.*]] = nn.reshape %arg2 : tensor<8xf32> -> tensor<2x4xf32>
// TP4: %[[BB:.*]] = nn.broadcast %[[B2]] dims = [0, 2] : tensor<2x4xf32> -> tensor<2x2x4xf32>
// TP4: %[[B4:.*]] = nn.reshape %[[BB]] : tensor<2x2x4xf32> -> tensor<16xf32>
// TP4: %[[BR:.*]] = nn.broadcast %[[B4]] dims = [2] : tensor<16xf32> -> tensor<2x8x16xf32>
// TP4: %[[K:.*]] = nn.add %[[K0]], %[[BR]] : tensor<2x8x16xf32>
// TP4: %[[KH:.*]] = nn.reshape %[[K]] : tensor<2x8x16xf32> -> tensor<2x8x4x4xf32>
// TP4: nn.attention %arg3, %[[KH]], %{{.*}} causal
func.func @projected_bias(%x: tensor<2x8x16xf32>, %wk: tensor<16x8xf32>, %bk: tensor<8xf32>, %q: tensor<2x8x4x4xf32>, %v: tensor<2x8x2x4xf32>) -> tensor<2x8x4x4xf32> {
  %k0 = nn.matmul %x, %wk : (tensor<2x8x16xf32>, tensor<16x8xf32>) -> tensor<2x8x8xf32>
  %kb = nn.broadcast %bk dims = [2] : tensor<8xf32> -> tensor<2x8x8xf32>
  %k1 = nn.add %k0, %kb : tensor<2x8x8xf32>
  %k = nn.reshape %k1 : tensor<2x8x8xf32> -> tensor<2x8x2x4xf32>
  %a = nn.attention %q, %k, %v causal : (tensor<2x8x4x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>) -> tensor<2x8x4x4xf32>
  return %a : tensor<2x8x4x4xf32>
}
