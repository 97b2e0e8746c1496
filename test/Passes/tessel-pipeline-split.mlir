// Tests tessel-pipeline-split: a small model's four layers over pp=2,
// balanced by flops and pinned by stage-layers, interleaved over four
// virtual stages, sharded at the boundary, and examples/gpt.mlir balanced
// over pp=4.
//
// RUN: tessel-opt %s --tessel-pipeline-split="mesh=pp=2" | FileCheck %s
// RUN: tessel-opt %s --tessel-pipeline-split="mesh=pp=2 stage-layers=1,3 schedule=gpipe microbatches=4" | FileCheck %s --check-prefix=PINNED
// RUN: tessel-opt %s --tessel-pipeline-split="mesh=pp=2 schedule=interleaved microbatches=2" | FileCheck %s --check-prefix=INTERLEAVED
// RUN: tessel-opt %s --tessel-pipeline-split="mesh=dp=2,pp=2" | FileCheck %s --check-prefix=SHARDED
// RUN: tessel-opt %s --tessel-pipeline-split="mesh=dp=2" | FileCheck %s --check-prefix=NOPP
// RUN: tessel-opt %examples/gpt.mlir --tessel-pipeline-split="mesh=pp=4 microbatches=8" | FileCheck %s --check-prefix=GPT
// RUN: sed 's/<4x/<14x/g' %examples/gpt.mlir | tessel-opt --tessel-pipeline-split="mesh=pp=4 microbatches=8" | FileCheck %s --check-prefix=GPT14

// Tests that the four layers split 2 + 2 by flops (the last stage also
// holds the head and the loss, 1,800 flops against the first stage's
// 1,664), that each stage holds its rows of the stacked parameters
// (nn.layers = [offset, total]), that the activation crosses as
// nn.stage_output / nn.stage_input, and that @e, used before the layers and
// after them (a tied embedding and head), is held by both stages, the
// second's a tied copy (the gradient norm counts the first's).
// CHECK: module attributes {nn.pipeline = {flops = array<i64: 1664, 1800>, layers = array<i64: 2, 2>, microbatches = 2 : i64, ranks = 2 : i64, schedule = "1f1b", tied = {e = array<i64: 0, 1>}, virtual_stages = 1 : i64}}
// CHECK-LABEL: module @stage0 attributes {nn.first_layer = 0 : i64, nn.keep_activations, nn.stage = 0 : i64}
// CHECK: func.func private @layer
// CHECK: func.func @loss(%{{.*}}: tensor<4x8xf32> {nn.axes = ["batch", "embed"], nn.input}, %{{.*}}: tensor<8x8xf32> {{{.*}}nn.param = "e"}, %{{.*}}: tensor<2x8x8xf32> {{{.*}}nn.layers = array<i64: 0, 4>, nn.param = "w"}, %{{.*}}: tensor<2x8xf32> {{{.*}}nn.layers = array<i64: 0, 4>, nn.param = "b"}) -> (tensor<4x8xf32> {nn.stage_output}) attributes {nn.stage = 0 : i64}
// CHECK: nn.matmul
// CHECK: nn.repeat @layer
// CHECK-NOT: nn.cross_entropy
// CHECK: return
// CHECK-LABEL: module @stage1 attributes {nn.first_layer = 2 : i64, nn.keep_activations, nn.stage = 1 : i64}
// CHECK: func.func @loss(%{{.*}}: tensor<4x8xf32> {nn.stage_input}, %{{.*}}: tensor<4xi32> {nn.axes = ["batch"], nn.label}, %{{.*}}: tensor<8x8xf32> {{{.*}}nn.param = "e", nn.tied_copy}, %{{.*}}: tensor<2x8x8xf32> {{{.*}}nn.layers = array<i64: 2, 4>, nn.param = "w"}, %{{.*}}: tensor<2x8xf32> {{{.*}}nn.layers = array<i64: 2, 4>, nn.param = "b"}) -> tensor<f32> attributes {nn.stage = 1 : i64}
// CHECK-NEXT: nn.repeat @layer(%{{.*}}) params
// CHECK-NEXT: nn.matmul {{.*}} transpose_rhs
// CHECK-NEXT: nn.cross_entropy

// Tests that stage-layers pins the split (1 + 3 layers) and the schedule
// and microbatches are recorded.
// PINNED: module attributes {nn.pipeline = {flops = array<i64: 1088, 2376>, layers = array<i64: 1, 3>, microbatches = 4 : i64, ranks = 2 : i64, schedule = "gpipe", tied = {e = array<i64: 0, 1>}, virtual_stages = 1 : i64}}
// PINNED: tensor<1x8x8xf32> {{{.*}}nn.layers = array<i64: 0, 4>, nn.param = "w"}
// PINNED: tensor<3x8x8xf32> {{{.*}}nn.layers = array<i64: 1, 4>, nn.param = "w"}

// Tests that interleaving makes two virtual stages per rank (default V = 2):
// four stages of one layer; the middle ones hold only their layer's rows
// and the tied parameter is held by the first and last stages.
// INTERLEAVED: module attributes {nn.pipeline = {flops = array<i64: 1088, 576, 576, 1224>, layers = array<i64: 1, 1, 1, 1>, microbatches = 2 : i64, ranks = 2 : i64, schedule = "interleaved", tied = {e = array<i64: 0, 3>}, virtual_stages = 2 : i64}}
// INTERLEAVED-LABEL: module @stage1
// INTERLEAVED: func.func @loss(%{{.*}}: tensor<4x8xf32> {nn.stage_input}, %{{.*}}: tensor<1x8x8xf32> {{{.*}}nn.layers = array<i64: 1, 4>, nn.param = "w"}, %{{.*}}: tensor<1x8xf32> {{{.*}}nn.layers = array<i64: 1, 4>, nn.param = "b"}) -> (tensor<4x8xf32> {nn.stage_output})
// INTERLEAVED-LABEL: module @stage2
// INTERLEAVED: nn.layers = array<i64: 2, 4>
// INTERLEAVED-LABEL: module @stage3
// INTERLEAVED: nn.param = "e", nn.tied_copy}
// INTERLEAVED: nn.layers = array<i64: 3, 4>

// Tests that the boundary carries the layers' sharding (batch over dp).
// SHARDED-LABEL: module @stage0
// SHARDED: -> (tensor<4x8xf32> {nn.sharding = {{\[\[}}"dp"], []], nn.stage_output})
// SHARDED-LABEL: module @stage1
// SHARDED: func.func @loss(%{{.*}}: tensor<4x8xf32> {nn.sharding = {{\[\[}}"dp"], []], nn.stage_input}

// Tests that without a pp axis the module is left alone.
// NOPP-NOT: nn.pipeline
// NOPP-NOT: module @stage
// NOPP: func.func @loss

// Tests that GPT's 4 blocks go one per stage over pp=4, the embeddings
// with the first and the final norm, tied LM head and loss with the last
// (its extra flops are the head's), and the tied token embedding on both.
// GPT: module attributes {nn.pipeline = {flops = array<i64: 222691328, 222625792, 222625792, 257229824>, layers = array<i64: 1, 1, 1, 1>, microbatches = 8 : i64, ranks = 4 : i64, schedule = "1f1b", tied = {wte = array<i64: 0, 3>}, virtual_stages = 1 : i64}}

// Tests that 14 blocks balance as 3,4,4,3: the ends hold the embeddings and
// the head, the middle stages a block more.
// GPT14: module attributes {nn.pipeline = {flops = array<i64: 667942912, 890503168, 890503168, 702481408>, layers = array<i64: 3, 4, 4, 3>, microbatches = 8 : i64, ranks = 4 : i64, schedule = "1f1b", tied = {wte = array<i64: 0, 3>}, virtual_stages = 1 : i64}}

func.func private @layer(%h: tensor<4x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %m = nn.matmul %h, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %bb = nn.broadcast %b dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %a = nn.add %m, %bb : tensor<4x8xf32>
  %r = nn.relu %a : tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}
func.func @loss(%x: tensor<4x8xf32> {nn.input, nn.axes = ["batch", "embed"]},
                %y: tensor<4xi32> {nn.label, nn.axes = ["batch"]},
                %e: tensor<8x8xf32> {nn.param = "e", nn.init = #nn.init<normal, 0.1>, nn.axes = ["embed", "mlp"]},
                %w: tensor<4x8x8xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.1>, nn.axes = ["layers", "embed", "mlp"]},
                %b: tensor<4x8xf32> {nn.param = "b", nn.init = #nn.init<zeros>, nn.axes = ["layers", "mlp"]}) -> tensor<f32> {
  %x1 = nn.matmul %x, %e : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %h = nn.repeat @layer(%x1) params(%w, %b) : (tensor<4x8xf32>, tensor<4x8x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %z = nn.matmul %h, %e transpose_rhs : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l = nn.cross_entropy %z, %y : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
