// RUN: tessel-opt %s --split-input-file -tessel-check-communication -verify-diagnostics

// Each case is a pipeline as tessel-pipeline-split and the stages' plan
// leave it, written by hand and broken in one place: two stages on
// dp=2 x pp=2 (world rank = 2 * dp + pp), one microbatch; stage 0 sends a
// tensor<2x8xf32> activation (tag 0) to stage 1 and receives its gradient
// (tag 3) back.

// Tests that a schedule whose rank 0 waits for the gradient before it sends
// the activation the gradient comes from is refused: a cycle of waits.
module attributes {nn.pipeline = {
    ranks = 2 : i64, virtual_stages = 1 : i64, microbatches = 1 : i64,
    schedule = "gpipe", layers = array<i64: 1, 1>, flops = array<i64: 1, 1>, tied = {},
    actions = [["F0.0", "r<1:B0.0", "s>1:F0.0", "B0.0"],
               ["r<0:F1.0", "F1.0", "B1.0", "s>0:B1.0"]]}} {
  module @stage0 attributes {nn.stage = 0 : i64} {
    shard.grid @mesh(shape = 2x2) {nn.axis_names = ["dp", "pp"]}
    func.func @loss(%x: tensor<2x8xf32> {nn.input}) -> (tensor<2x8xf32> {nn.stage_output}) attributes {nn.stage = 0 : i64} {
      %0 = nn.tanh %x : tensor<2x8xf32>
      return %0 : tensor<2x8xf32>
    }
    func.func @loss_backward(%x: tensor<2x8xf32> {nn.input},
        // expected-error-re @+1 {{communication check: rank 0 waits in recv from rank 1 (tag 3, 64 bytes f32, at {{.*}}tessel-check-communication-invalid.mlir:{{[0-9]+}}:{{[0-9]+}} (r<1:B0.0)) while rank 1 waits in recv from rank 0 (tag 0, 64 bytes f32, at {{.*}} (r<0:F1.0)): a cycle of waits}}
        %g: tensor<2x8xf32> {nn.output_grad}) -> (tensor<2x8xf32> {nn.stage_output})
        attributes {nn.entry = "backward", nn.stage = 0 : i64} {
      return %x : tensor<2x8xf32>
    }
    func.func @loss_update() attributes {nn.entry = "update"} {
      return
    }
  }
  module @stage1 attributes {nn.stage = 1 : i64} {
    shard.grid @mesh(shape = 2x2) {nn.axis_names = ["dp", "pp"]}
    func.func @loss(
        // expected-note @+1 {{rank 1's recv is here}}
        %h: tensor<2x8xf32> {nn.stage_input}, %y: tensor<2x8xf32> {nn.label}) -> tensor<f32> attributes {nn.stage = 1 : i64} {
      %0 = nn.reduce_sum %h dims = [0, 1] : tensor<2x8xf32> -> tensor<f32>
      return %0 : tensor<f32>
    }
    func.func @loss_backward(%h: tensor<2x8xf32> {nn.stage_input}, %y: tensor<2x8xf32> {nn.label}) -> (tensor<f32>, tensor<2x8xf32> {nn.input_grad}) attributes {nn.entry = "backward", nn.stage = 1 : i64} {
      %0 = nn.reduce_sum %h dims = [0, 1] : tensor<2x8xf32> -> tensor<f32>
      return %0, %y : tensor<f32>, tensor<2x8xf32>
    }
    func.func @loss_update() attributes {nn.entry = "update"} {
      return
    }
  }
}

// -----

// Tests that a stage whose input is not the previous stage's output (here
// twice its size) is refused, naming both stages and both types.
module attributes {nn.pipeline = {
    ranks = 2 : i64, virtual_stages = 1 : i64, microbatches = 1 : i64,
    schedule = "gpipe", layers = array<i64: 1, 1>, flops = array<i64: 1, 1>, tied = {}}} {
  module @stage0 attributes {nn.stage = 0 : i64} {
    shard.grid @mesh(shape = 2x2) {nn.axis_names = ["dp", "pp"]}
    func.func @loss(%x: tensor<2x8xf32> {nn.input}) -> (tensor<2x8xf32> {nn.stage_output}) attributes {nn.stage = 0 : i64} {
      %0 = nn.tanh %x : tensor<2x8xf32>
      // expected-note @+1 {{stage 0's output #0}}
      return %0 : tensor<2x8xf32>
    }
  }
  module @stage1 attributes {nn.stage = 1 : i64} {
    shard.grid @mesh(shape = 2x2) {nn.axis_names = ["dp", "pp"]}
    func.func @loss(
        // expected-error @+1 {{stage 1's input #0 is 'tensor<2x16xf32>' but stage 0's output #0 is 'tensor<2x8xf32>': the pipeline would send 64 bytes where 128 are received}}
        %h: tensor<2x16xf32> {nn.stage_input}, %y: tensor<2x8xf32> {nn.label}) -> tensor<f32> attributes {nn.stage = 1 : i64} {
      %0 = nn.reduce_sum %h dims = [0, 1] : tensor<2x16xf32> -> tensor<f32>
      return %0 : tensor<f32>
    }
  }
}

// -----

// Tests that a schedule dropping rank 1's receive of the activation is
// refused: rank 0's send is never received.
module attributes {nn.pipeline = {
    ranks = 2 : i64, virtual_stages = 1 : i64, microbatches = 1 : i64,
    schedule = "gpipe", layers = array<i64: 1, 1>, flops = array<i64: 1, 1>, tied = {},
    actions = [["F0.0", "s>1:F0.0", "r<1:B0.0", "B0.0"],
               ["F1.0", "B1.0", "s>0:B1.0"]]}} {
  module @stage0 attributes {nn.stage = 0 : i64} {
    shard.grid @mesh(shape = 2x2) {nn.axis_names = ["dp", "pp"]}
    func.func @loss(%x: tensor<2x8xf32> {nn.input}) -> (tensor<2x8xf32> {nn.stage_output}) attributes {nn.stage = 0 : i64} {
      %0 = nn.tanh %x : tensor<2x8xf32>
      // expected-error-re @+1 {{communication check: rank 0's send to rank 1 (tag 0, 64 bytes f32, at {{.*}} (s>1:F0.0)) is never received: rank 1 finishes without a matching recv}}
      return %0 : tensor<2x8xf32>
    }
    func.func @loss_backward(%x: tensor<2x8xf32> {nn.input}, %g: tensor<2x8xf32> {nn.output_grad}) -> (tensor<2x8xf32> {nn.stage_output}) attributes {nn.entry = "backward", nn.stage = 0 : i64} {
      return %x : tensor<2x8xf32>
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
    func.func @loss_update() attributes {nn.entry = "update"} {
      return
    }
  }
}

// -----

// Tests that a pipeline where only stage 0 clips is refused: its rank adds
// the stages' parts of the gradient norm over pp (4 bytes f32) while rank 1,
// whose stage has no grad_norm entry, is already in the loss's all-reduce.
// expected-error-re @+1 {{communication check: rank 1's all_reduce over pp (8 bytes f64, at {{.*}} (the loss over pp)) meets rank 0's all_reduce over pp (4 bytes f32, at {{.*}} (the gradient norm over pp)): the sizes and types differ}}
module attributes {nn.pipeline = {
    ranks = 2 : i64, virtual_stages = 1 : i64, microbatches = 1 : i64,
    schedule = "gpipe", layers = array<i64: 1, 1>, flops = array<i64: 1, 1>, tied = {}}} {
  module @stage0 attributes {nn.stage = 0 : i64} {
    shard.grid @mesh(shape = 2x2) {nn.axis_names = ["dp", "pp"]}
    func.func @loss(%x: tensor<2x8xf32> {nn.input}) -> (tensor<2x8xf32> {nn.stage_output}) attributes {nn.stage = 0 : i64} {
      %0 = nn.tanh %x : tensor<2x8xf32>
      return %0 : tensor<2x8xf32>
    }
    func.func @loss_update(%t: tensor<f32> {nn.grad_sum_squares}) attributes {nn.entry = "update"} {
      return
    }
    func.func @loss_grad_norm(%g: tensor<8xf32> {nn.grad = "w"}) -> (tensor<f32> {nn.grad_sum_squares}) attributes {nn.entry = "grad_norm"} {
      %0 = nn.sum_squares %g : (tensor<8xf32>) -> tensor<f32>
      %1 = shard.all_reduce %0 on @mesh grid_axes = [0] : tensor<f32> -> tensor<f32>
      return %1 : tensor<f32>
    }
  }
  module @stage1 attributes {nn.stage = 1 : i64} {
    shard.grid @mesh(shape = 2x2) {nn.axis_names = ["dp", "pp"]}
    func.func @loss(%h: tensor<2x8xf32> {nn.stage_input}, %y: tensor<2x8xf32> {nn.label}) -> tensor<f32> attributes {nn.stage = 1 : i64} {
      %0 = nn.reduce_sum %h dims = [0, 1] : tensor<2x8xf32> -> tensor<f32>
      return %0 : tensor<f32>
    }
    func.func @loss_update() attributes {nn.entry = "update"} {
      return
    }
  }
}

// -----

// Tests that stages whose updates all-reduce over different axes are
// refused: rank 0 (stage 0) waits in an all-reduce over dp and pp for rank
// 1, which is past its own update (over dp) and waits in the loss's
// all-reduce over pp for rank 0.
module attributes {nn.pipeline = {
    ranks = 2 : i64, virtual_stages = 1 : i64, microbatches = 1 : i64,
    schedule = "gpipe", layers = array<i64: 1, 1>, flops = array<i64: 1, 1>, tied = {}}} {
  module @stage0 attributes {nn.stage = 0 : i64} {
    shard.grid @mesh(shape = 2x2) {nn.axis_names = ["dp", "pp"]}
    func.func @loss(%x: tensor<2x8xf32> {nn.input}) -> (tensor<2x8xf32> {nn.stage_output}) attributes {nn.stage = 0 : i64} {
      %0 = nn.tanh %x : tensor<2x8xf32>
      return %0 : tensor<2x8xf32>
    }
    func.func @loss_update(%g: tensor<8xf32>) -> tensor<8xf32> attributes {nn.entry = "update"} {
      // expected-error-re @+1 {{communication check: rank 0 waits in all_reduce over dp,pp (32 bytes f32, at {{.*}} (update of stage 0)) for rank 1 while rank 1 waits in all_reduce over pp (8 bytes f64, at {{.*}} (the loss over pp)) for rank 0: a cycle of waits}}
      %0 = shard.all_reduce %g on @mesh grid_axes = [0, 1] : tensor<8xf32> -> tensor<8xf32>
      return %0 : tensor<8xf32>
    }
  }
  module @stage1 attributes {nn.stage = 1 : i64} {
    shard.grid @mesh(shape = 2x2) {nn.axis_names = ["dp", "pp"]}
    func.func @loss(%h: tensor<2x8xf32> {nn.stage_input}, %y: tensor<2x8xf32> {nn.label}) -> tensor<f32> attributes {nn.stage = 1 : i64} {
      %0 = nn.reduce_sum %h dims = [0, 1] : tensor<2x8xf32> -> tensor<f32>
      return %0 : tensor<f32>
    }
    func.func @loss_update(%g: tensor<8xf32>) -> tensor<8xf32> attributes {nn.entry = "update"} {
      %0 = shard.all_reduce %g on @mesh grid_axes = [0] : tensor<8xf32> -> tensor<8xf32>
      return %0 : tensor<8xf32>
    }
  }
}

// -----

// Tests that a module's own schedule is parsed and checked against the
// plan: an action in an unknown notation.
// expected-error @+1 {{malformed 'nn.pipeline': actions of rank 1: 'X1.0': expected F, B, I or W<stage>.<microbatch>, e.g. F0.1}}
module attributes {nn.pipeline = {
    ranks = 2 : i64, virtual_stages = 1 : i64, microbatches = 1 : i64,
    schedule = "gpipe", layers = array<i64: 1, 1>, flops = array<i64: 1, 1>, tied = {},
    actions = [["F0.0"], ["X1.0"]]}} {
}

// -----

// Tests that a module's own schedule may not run a stage on another rank.
// expected-error @+1 {{malformed 'nn.pipeline': actions of rank 0: 'F1.0' is stage 1's, which rank 1 holds}}
module attributes {nn.pipeline = {
    ranks = 2 : i64, virtual_stages = 1 : i64, microbatches = 1 : i64,
    schedule = "gpipe", layers = array<i64: 1, 1>, flops = array<i64: 1, 1>, tied = {},
    actions = [["F1.0"], []]}} {
}

// -----

// Tests that a ZB-V schedule places its stages in a V: stage 2 of 4 on
// two ranks is rank 1's (rank 0 holds 0 and 3).
// expected-error @+1 {{malformed 'nn.pipeline': actions of rank 0: 'F2.0' is stage 2's, which rank 1 holds}}
module attributes {nn.pipeline = {
    ranks = 2 : i64, virtual_stages = 2 : i64, microbatches = 1 : i64,
    schedule = "zb-v", layers = array<i64: 1, 1, 1, 1>, flops = array<i64: 1, 1, 1, 1>, tied = {},
    actions = [["F0.0", "F2.0"], []]}} {
}

// -----

// Tests that a send names the rank holding the stage it feeds.
// expected-error @+1 {{malformed 'nn.pipeline': actions of rank 0: 's>0:F0.0' names peer 0, but stage 1 is on rank 1}}
module attributes {nn.pipeline = {
    ranks = 2 : i64, virtual_stages = 1 : i64, microbatches = 1 : i64,
    schedule = "gpipe", layers = array<i64: 1, 1>, flops = array<i64: 1, 1>, tied = {},
    actions = [["F0.0", "s>0:F0.0"], []]}} {
}

// -----

// Tests that a receive of the first stage's input crosses no boundary.
// expected-error @+1 {{malformed 'nn.pipeline': actions of rank 0: 'r<1:F0.0' crosses no stage boundary (stage 0 of 2)}}
module attributes {nn.pipeline = {
    ranks = 2 : i64, virtual_stages = 1 : i64, microbatches = 1 : i64,
    schedule = "gpipe", layers = array<i64: 1, 1>, flops = array<i64: 1, 1>, tied = {},
    actions = [["r<1:F0.0", "F0.0"], []]}} {
}
