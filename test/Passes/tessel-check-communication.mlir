// RUN: tessel-opt %s --split-input-file -tessel-check-communication="remark=true" -verify-diagnostics | FileCheck %s
// RUN: tessel-opt %S/Inputs/tessel-check-communication-model.mlir -mlir-print-op-on-diagnostic=false -o /dev/null \
// RUN:   --pass-pipeline="builtin.module(tessel-pipeline-split{mesh=dp=2,pp=2 microbatches=4},builtin.module(tessel-autodiff,tessel-propagate-sharding{mesh=dp=2,pp=2},tessel-partition,canonicalize,cse,tessel-plan-memory),tessel-check-communication{remark=true})" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=MODEL
// RUN: tessel-opt %S/Inputs/tessel-check-communication-model.mlir --tessel-pipeline="mesh=dp=2,pp=2 pipeline-schedule=gpipe" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=COMPILE

// The model (Inputs/) split over pp=2 with 4 microbatches of 1F1B and
// planned per stage: every rank of dp=2 x pp=2 sends 4 activations or
// gradients and receives as many; the collectives are the dp gradient
// all-reduces (one per backward), the last stage's dp loss all-reduces (one
// per forward and backward) and the step's loss all-reduce over pp.
// MODEL-NOT: error
// MODEL: remark: communication check: 4 ranks match: 36 collective calls, 16 sends, 16 receives
// MODEL-NOT: error

// The whole compile pipeline runs the check and, with no diagnostic,
// links the stages.
// COMPILE-NOT: {{error|remark}}
// COMPILE: llvm.func @tessel_s0_forward
// COMPILE: llvm.func @tessel_s1_backward

// Tests that a module's own schedule (nn.pipeline's actions, here GPipe over
// 2 microbatches on 2 ranks, written out) is what is checked, and matches:
// per rank of dp=2 x pp=2, two activations or gradients each way, the dp
// all-reduce of stage 1's update and the loss over pp.
// CHECK-LABEL: module @custom_schedule
// expected-remark @+1 {{communication check: 4 ranks match: 6 collective calls, 8 sends, 8 receives}}
module @custom_schedule attributes {nn.pipeline = {
    ranks = 2 : i64, virtual_stages = 1 : i64, microbatches = 2 : i64,
    schedule = "gpipe", layers = array<i64: 1, 1>, flops = array<i64: 1, 1>,
    tied = {},
    actions = [["F0.0", "s>1:F0.0", "F0.1", "s>1:F0.1", "r<1:B0.0", "B0.0", "r<1:B0.1", "B0.1"],
               ["r<0:F1.0", "F1.0", "r<0:F1.1", "F1.1", "B1.0", "s>0:B1.0", "B1.1", "s>0:B1.1"]]}} {
  module @stage0 attributes {nn.stage = 0 : i64} {
    shard.grid @mesh(shape = 2x2) {nn.axis_names = ["dp", "pp"]}
    func.func @loss(%x: tensor<2x8xf32> {nn.input}) -> (tensor<2x8xf32> {nn.stage_output}) attributes {nn.stage = 0 : i64} {
      %0 = nn.tanh %x : tensor<2x8xf32>
      return %0 : tensor<2x8xf32>
    }
    func.func @loss_backward(%x: tensor<2x8xf32> {nn.input}, %g: tensor<2x8xf32> {nn.output_grad}) -> (tensor<2x8xf32> {nn.stage_output}) attributes {nn.entry = "backward", nn.stage = 0 : i64} {
      %0 = nn.mul %x, %g : tensor<2x8xf32>
      return %0 : tensor<2x8xf32>
    }
    func.func @loss_update() attributes {nn.entry = "update"} {
      return
    }
  }
  module @stage1 attributes {nn.stage = 1 : i64} {
    shard.grid @mesh(shape = 2x2) {nn.axis_names = ["dp", "pp"]}
    func.func @loss(%h: tensor<2x8xf32> {nn.stage_input}, %y: tensor<2x8xf32> {nn.label}) -> tensor<f32> attributes {nn.stage = 1 : i64} {
      %0 = nn.reduce_sum %h dims = [0, 1] : tensor<2x8xf32> -> tensor<f32>
      return %0 : tensor<f32>
    }
    func.func @loss_backward(%h: tensor<2x8xf32> {nn.stage_input}, %y: tensor<2x8xf32> {nn.label}) -> (tensor<f32>, tensor<2x8xf32> {nn.input_grad}) attributes {nn.entry = "backward", nn.stage = 1 : i64} {
      %0 = nn.reduce_sum %h dims = [0, 1] : tensor<2x8xf32> -> tensor<f32>
      return %0, %y : tensor<f32>, tensor<2x8xf32>
    }
    func.func @loss_update(%g: tensor<8xf32>) -> tensor<8xf32> attributes {nn.entry = "update"} {
      %0 = shard.all_reduce %g on @mesh grid_axes = [0] : tensor<8xf32> -> tensor<8xf32>
      return %0 : tensor<8xf32>
    }
  }
}

// -----

// Tests that a partitioned module without stages runs @loss_backward then
// @loss_update on every rank: SPMD programs match (2 collectives per rank;
// the one over a group of one, tp=1, moves nothing and is left out).
// CHECK-LABEL: module @spmd
// expected-remark @+1 {{communication check: 2 ranks match: 4 collective calls, 0 sends, 0 receives}}
module @spmd {
  shard.grid @mesh(shape = 2x1) {nn.axis_names = ["dp", "tp"]}
  func.func @loss(%x: tensor<2x8xf32> {nn.input}) -> tensor<f32> {
    %0 = nn.reduce_sum %x dims = [0, 1] : tensor<2x8xf32> -> tensor<f32>
    %1 = shard.all_reduce %0 on @mesh grid_axes = [0] : tensor<f32> -> tensor<f32>
    return %1 : tensor<f32>
  }
  func.func @loss_backward(%x: tensor<2x8xf32> {nn.input}, %w: tensor<8xf32>) -> (tensor<f32>, tensor<8xf32>) attributes {nn.entry = "backward"} {
    %0 = nn.reduce_sum %x dims = [0, 1] : tensor<2x8xf32> -> tensor<f32>
    %1 = shard.all_reduce %0 on @mesh grid_axes = [0] : tensor<f32> -> tensor<f32>
    %2 = shard.all_reduce %w on @mesh grid_axes = [1] : tensor<8xf32> -> tensor<8xf32>
    return %1, %2 : tensor<f32>, tensor<8xf32>
  }
  func.func @loss_update(%g: tensor<8xf32>) -> tensor<8xf32> attributes {nn.entry = "update"} {
    %0 = shard.all_reduce %g on @mesh grid_axes = [0] : tensor<8xf32> -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

// Tests that a module without a mesh (one rank) is left alone, with no
// remark.
// CHECK-LABEL: module @no_mesh
// CHECK: func.func @f
module @no_mesh {
  func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
}
