// Tests every error of tessel-pipeline-split (passes/PipelineSplit.cpp) and
// of the pipeline's plan (passes/PipelinePlan.cpp): the model's shape
// first, one case per split, then the options, one file each (split-file).
//
// RUN: split-file %s %t
// RUN: tessel-opt %t/model.mlir --tessel-pipeline-split="mesh=pp=2" --split-input-file --verify-diagnostics
// RUN: tessel-opt %t/plan.mlir --tessel-pipeline-split="mesh=pp=2 schedule=zigzag" --verify-diagnostics
// RUN: tessel-opt %t/virtual.mlir --tessel-pipeline-split="mesh=pp=2 virtual-stages=2" --verify-diagnostics
// RUN: tessel-opt %t/zbv-three.mlir --tessel-pipeline-split="mesh=pp=2 schedule=zb-v virtual-stages=3" --verify-diagnostics
// RUN: tessel-opt %t/virtual-zero.mlir --tessel-pipeline-split="mesh=pp=2 schedule=interleaved virtual-stages=0" --verify-diagnostics
// RUN: tessel-opt %t/negative-microbatches.mlir --tessel-pipeline-split="mesh=pp=2 microbatches=-1" --verify-diagnostics
// RUN: tessel-opt %t/too-large.mlir --tessel-pipeline-split="mesh=pp=2 microbatches=2000000" --verify-diagnostics
// RUN: tessel-opt %t/1f1b.mlir --tessel-pipeline-split="mesh=pp=4 microbatches=2" --verify-diagnostics
// RUN: tessel-opt %t/interleaved-microbatches.mlir --tessel-pipeline-split="mesh=pp=2 schedule=interleaved microbatches=3" --verify-diagnostics
// RUN: tessel-opt %t/few-layers.mlir --tessel-pipeline-split="mesh=dp=2,pp=8" --verify-diagnostics
// RUN: tessel-opt %t/few-layers-interleaved.mlir --tessel-pipeline-split="mesh=pp=4 schedule=interleaved microbatches=4" --verify-diagnostics
// RUN: tessel-opt %t/stage-layers-integer.mlir --tessel-pipeline-split="mesh=pp=2 stage-layers=2,x" --verify-diagnostics
// RUN: tessel-opt %t/stage-layers-zero.mlir --tessel-pipeline-split="mesh=pp=2 stage-layers=4,0" --verify-diagnostics
// RUN: tessel-opt %t/stage-layers-count.mlir --tessel-pipeline-split="mesh=pp=2 stage-layers=1,1,2" --verify-diagnostics
// RUN: tessel-opt %t/stage-layers-sum.mlir --tessel-pipeline-split="mesh=pp=2 stage-layers=1,2" --verify-diagnostics
// RUN: tessel-opt %t/stage-layers-no-pp.mlir --tessel-pipeline-split="mesh=dp=2,pp=1 stage-layers=2,2" --verify-diagnostics
// RUN: tessel-opt %t/bad-mesh.mlir --tessel-pipeline-split="mesh=pp=two" --verify-diagnostics
//
// A malformed nn.pipeline, read back by the passes after the split
// (PipelinePlan::fromModule; tessel-link-stages here):
// RUN: tessel-opt %t/malformed.mlir --tessel-link-stages --split-input-file --verify-diagnostics

//--- model.mlir

// Tests that a module without a model function is refused.
// expected-error@+1 {{pipeline parallelism needs a model function}}
module {
  func.func @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

// Tests that two model functions are refused on the second.
func.func @first(%x: tensor<4xf32> {nn.input}) -> tensor<f32> {
  %l = nn.reduce_mean %x dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
// expected-error@+1 {{is a second model function; pipeline stages split one}}
func.func @second(%x: tensor<4xf32> {nn.input}) -> tensor<f32> {
  %l = nn.reduce_mean %x dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a model without an nn.repeat has no layers to split.
// expected-error@+1 {{has no nn.repeat: pipeline stages split the layers of an nn.repeat over 'pp'}}
func.func @loss(%x: tensor<4x8xf32> {nn.input},
                %w: tensor<8x8xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.1>}) -> tensor<f32> {
  %m = nn.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l = nn.reduce_mean %m dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a model with two nn.repeat is refused on the second, naming
// the first.
func.func private @layer(%h: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %m = nn.matmul %h, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %m : tensor<4x8xf32>
}
func.func @loss(%x: tensor<4x8xf32> {nn.input},
                %w: tensor<4x8x8xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.1>},
                %v: tensor<4x8x8xf32> {nn.param = "v", nn.init = #nn.init<normal, 0.1>}) -> tensor<f32> {
  %h = nn.repeat @layer(%x) params(%w) : (tensor<4x8xf32>, tensor<4x8x8xf32>) -> tensor<4x8xf32>
  // expected-error@+1 {{is a second nn.repeat of the model: pipeline stages split the layers of one (first at}}
  %g = nn.repeat @layer(%h) params(%v) : (tensor<4x8xf32>, tensor<4x8x8xf32>) -> tensor<4x8xf32>
  %l = nn.reduce_mean %g dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a repeat running its layers backwards is refused.
func.func private @layer(%h: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %m = nn.matmul %h, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %m : tensor<4x8xf32>
}
func.func @loss(%x: tensor<4x8xf32> {nn.input},
                %w: tensor<4x8x8xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.1>}) -> tensor<f32> {
  // expected-error@+1 {{runs backwards; pipeline stages split a forward nn.repeat}}
  %h = nn.repeat @layer(%x) params(%w) reverse : (tensor<4x8xf32>, tensor<4x8x8xf32>) -> tensor<4x8xf32>
  %l = nn.reduce_mean %h dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a repeat with per-layer (stacked) outputs is refused.
func.func private @layer(%h: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %m = nn.matmul %h, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %m, %m : tensor<4x8xf32>, tensor<4x8xf32>
}
func.func @loss(%x: tensor<4x8xf32> {nn.input},
                %w: tensor<4x8x8xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.1>}) -> tensor<f32> {
  // expected-error@+1 {{returns per-layer outputs; pipeline stages split a repeat whose layers only carry activations}}
  %h, %ys = nn.repeat @layer(%x) params(%w) : (tensor<4x8xf32>, tensor<4x8x8xf32>) -> (tensor<4x8xf32>, tensor<4x4x8xf32>)
  %l = nn.reduce_mean %h dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a stacked parameter computed in the model (not an nn.param
// argument) is refused: a stage holds its rows of the model's parameters.
func.func private @layer(%h: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %m = nn.matmul %h, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %m : tensor<4x8xf32>
}
func.func @loss(%x: tensor<4x8xf32> {nn.input},
                %w: tensor<4x8x8xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.1>}) -> tensor<f32> {
  %w2 = nn.tanh %w : tensor<4x8x8xf32>
  // expected-error@+1 {{takes a stacked parameter that is not an nn.param argument of the model}}
  %h = nn.repeat @layer(%x) params(%w2) : (tensor<4x8xf32>, tensor<4x8x8xf32>) -> tensor<4x8xf32>
  %l = nn.reduce_mean %h dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a value computed before the layers and used after them is
// refused where it is used (the middle stages would have to pass it on).
func.func private @layer(%h: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %m = nn.matmul %h, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %m : tensor<4x8xf32>
}
func.func @loss(%x: tensor<4x8xf32> {nn.input},
                %w: tensor<4x8x8xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.1>}) -> tensor<f32> {
  %x2 = nn.tanh %x : tensor<4x8xf32>
  %h = nn.repeat @layer(%x2) params(%w) : (tensor<4x8xf32>, tensor<4x8x8xf32>) -> tensor<4x8xf32>
  // expected-error@+1 {{uses a value computed before the repeated layers (at}}
  %s = nn.add %h, %x2 : tensor<4x8xf32>
  %l = nn.reduce_mean %s dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that the model's result computed before the layers is refused on
// the return: the last stage could not return it.
func.func private @layer(%h: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %m = nn.matmul %h, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %m : tensor<4x8xf32>
}
func.func @loss(%x: tensor<4x8xf32> {nn.input},
                %w: tensor<4x8x8xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.1>}) -> (tensor<f32>, tensor<4x8xf32>) {
  %l = nn.reduce_mean %x dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %h = nn.repeat @layer(%x) params(%w) : (tensor<4x8xf32>, tensor<4x8x8xf32>) -> tensor<4x8xf32>
  // expected-error@+1 {{'func.return' op uses a value computed before the repeated layers}}
  return %l, %h : tensor<f32>, tensor<4x8xf32>
}

// -----

func.func private @acc_layer(%h: tensor<4xf32>, %w: tensor<4xf32>, %g: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = nn.accumulate %w outs(%g) : tensor<4xf32>
  return %h, %0 : tensor<4xf32>, tensor<4xf32>
}
// Tests that a repeat with outs, the form a later pass makes, is refused.
func.func @repeat_outs(%h: tensor<4xf32>, %w: tensor<3x4xf32>, %g: tensor<3x4xf32>) -> tensor<3x4xf32> {
  // expected-error @+1 {{'nn.repeat' op has outs (updated in place, the form tessel-accumulate-in-layers makes after the passes that differentiate, split, shard or cast a repeat); tessel-pipeline-split takes repeats without outs}}
  %0:2 = nn.repeat @acc_layer(%h) params(%w) outs(%g) : (tensor<4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) -> (tensor<4xf32>, tensor<3x4xf32>)
  return %0#1 : tensor<3x4xf32>
}

//--- plan.mlir

// Tests that an unknown schedule is named, at the repeat.
func.func private @layer(%h: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %m = nn.matmul %h, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %m : tensor<4x8xf32>
}
func.func @loss(%x: tensor<4x8xf32> {nn.input},
                %w: tensor<4x8x8xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.1>}) -> tensor<f32> {
  // expected-error@+1 {{unknown pipeline schedule 'zigzag' (expected gpipe, 1f1b, interleaved, zb-h1, zb-v or dualpipev)}}
  %h = nn.repeat @layer(%x) params(%w) : (tensor<4x8xf32>, tensor<4x8x8xf32>) -> tensor<4x8xf32>
  %l = nn.reduce_mean %h dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

//--- virtual.mlir

// Tests that virtual stages without the interleaved schedule is refused at the repeat.
func.func private @layer(%h: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %m = nn.matmul %h, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %m : tensor<4x8xf32>
}
func.func @loss(%x: tensor<4x8xf32> {nn.input, nn.axes = ["batch", "embed"]},
                %w: tensor<4x8x8xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.1>}) -> tensor<f32> {
  // expected-error@+1 {{--virtual-stages 2 needs the interleaved, zb-v or dualpipev schedule (1f1b runs one stage per rank)}}
  %h = nn.repeat @layer(%x) params(%w) : (tensor<4x8xf32>, tensor<4x8x8xf32>) -> tensor<4x8xf32>
  %l = nn.reduce_mean %h dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

//--- zbv-three.mlir

// Tests that ZB-V with other than two stages per rank is refused at the repeat.
func.func private @layer(%h: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %m = nn.matmul %h, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %m : tensor<4x8xf32>
}
func.func @loss(%x: tensor<4x8xf32> {nn.input, nn.axes = ["batch", "embed"]},
                %w: tensor<6x8x8xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.1>}) -> tensor<f32> {
  // expected-error@+1 {{pipeline schedule: zb-v runs two stages per rank, down the ranks and back (V = 3)}}
  %h = nn.repeat @layer(%x) params(%w) : (tensor<4x8xf32>, tensor<6x8x8xf32>) -> tensor<4x8xf32>
  %l = nn.reduce_mean %h dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

//--- virtual-zero.mlir

// Tests that zero virtual stages is refused at the repeat.
func.func private @layer(%h: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %m = nn.matmul %h, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %m : tensor<4x8xf32>
}
func.func @loss(%x: tensor<4x8xf32> {nn.input, nn.axes = ["batch", "embed"]},
                %w: tensor<4x8x8xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.1>}) -> tensor<f32> {
  // expected-error@+1 {{--virtual-stages 0: every pp rank holds at least one stage}}
  %h = nn.repeat @layer(%x) params(%w) : (tensor<4x8xf32>, tensor<4x8x8xf32>) -> tensor<4x8xf32>
  %l = nn.reduce_mean %h dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

//--- negative-microbatches.mlir

// Tests that a negative microbatch count is refused at the repeat.
func.func private @layer(%h: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %m = nn.matmul %h, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %m : tensor<4x8xf32>
}
func.func @loss(%x: tensor<4x8xf32> {nn.input, nn.axes = ["batch", "embed"]},
                %w: tensor<4x8x8xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.1>}) -> tensor<f32> {
  // expected-error@+1 {{--microbatches -1: a step runs at least one microbatch (0: as many as pp ranks)}}
  %h = nn.repeat @layer(%x) params(%w) : (tensor<4x8xf32>, tensor<4x8x8xf32>) -> tensor<4x8xf32>
  %l = nn.reduce_mean %h dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

//--- too-large.mlir

// Tests that a pipeline too large to schedule is refused at the repeat.
func.func private @layer(%h: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %m = nn.matmul %h, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %m : tensor<4x8xf32>
}
func.func @loss(%x: tensor<4x8xf32> {nn.input, nn.axes = ["batch", "embed"]},
                %w: tensor<4x8x8xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.1>}) -> tensor<f32> {
  // expected-error@+1 {{pipeline of 2 ranks, 1 virtual stages and 2000000 microbatches is beyond what tessel plans}}
  %h = nn.repeat @layer(%x) params(%w) : (tensor<4x8xf32>, tensor<4x8x8xf32>) -> tensor<4x8xf32>
  %l = nn.reduce_mean %h dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

//--- 1f1b.mlir

// Tests that 1F1B with fewer microbatches than stages is refused at the repeat.
func.func private @layer(%h: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %m = nn.matmul %h, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %m : tensor<4x8xf32>
}
func.func @loss(%x: tensor<4x8xf32> {nn.input, nn.axes = ["batch", "embed"]},
                %w: tensor<4x8x8xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.1>}) -> tensor<f32> {
  // expected-error@+1 {{pipeline schedule: 1f1b needs at least as many microbatches as stages (M = 2 < P = 4)}}
  %h = nn.repeat @layer(%x) params(%w) : (tensor<4x8xf32>, tensor<4x8x8xf32>) -> tensor<4x8xf32>
  %l = nn.reduce_mean %h dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

//--- interleaved-microbatches.mlir

// Tests that interleaving with microbatches not a multiple of the ranks is refused at the repeat.
func.func private @layer(%h: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %m = nn.matmul %h, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %m : tensor<4x8xf32>
}
func.func @loss(%x: tensor<4x8xf32> {nn.input, nn.axes = ["batch", "embed"]},
                %w: tensor<4x8x8xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.1>}) -> tensor<f32> {
  // expected-error@+1 {{pipeline schedule: interleaved needs the microbatches to be a multiple of the ranks, as Megatron does (M = 3, P = 2)}}
  %h = nn.repeat @layer(%x) params(%w) : (tensor<4x8xf32>, tensor<4x8x8xf32>) -> tensor<4x8xf32>
  %l = nn.reduce_mean %h dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

//--- few-layers.mlir

// Tests that fewer layers than stages is refused at the repeat.
func.func private @layer(%h: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %m = nn.matmul %h, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %m : tensor<4x8xf32>
}
func.func @loss(%x: tensor<4x8xf32> {nn.input, nn.axes = ["batch", "embed"]},
                %w: tensor<4x8x8xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.1>}) -> tensor<f32> {
  // expected-error@+1 {{the nn.repeat has 4 layers, fewer than the 8 pipeline stages (pp=8) need: every stage holds at least one layer}}
  %h = nn.repeat @layer(%x) params(%w) : (tensor<4x8xf32>, tensor<4x8x8xf32>) -> tensor<4x8xf32>
  %l = nn.reduce_mean %h dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

//--- few-layers-interleaved.mlir

// Tests that fewer layers than virtual stages is refused at the repeat.
func.func private @layer(%h: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %m = nn.matmul %h, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %m : tensor<4x8xf32>
}
func.func @loss(%x: tensor<4x8xf32> {nn.input, nn.axes = ["batch", "embed"]},
                %w: tensor<4x8x8xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.1>}) -> tensor<f32> {
  // expected-error@+1 {{the nn.repeat has 4 layers, fewer than the 8 pipeline stages (pp=4 x 2 virtual stages) need}}
  %h = nn.repeat @layer(%x) params(%w) : (tensor<4x8xf32>, tensor<4x8x8xf32>) -> tensor<4x8xf32>
  %l = nn.reduce_mean %h dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

//--- stage-layers-integer.mlir

// Tests that a stage-layers entry that is not an integer is refused at the repeat.
func.func private @layer(%h: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %m = nn.matmul %h, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %m : tensor<4x8xf32>
}
func.func @loss(%x: tensor<4x8xf32> {nn.input, nn.axes = ["batch", "embed"]},
                %w: tensor<4x8x8xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.1>}) -> tensor<f32> {
  // expected-error@+1 {{--stage-layers '2,x': each stage's layer count must be a positive integer}}
  %h = nn.repeat @layer(%x) params(%w) : (tensor<4x8xf32>, tensor<4x8x8xf32>) -> tensor<4x8xf32>
  %l = nn.reduce_mean %h dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

//--- stage-layers-zero.mlir

// Tests that a stage of no layers is refused at the repeat.
func.func private @layer(%h: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %m = nn.matmul %h, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %m : tensor<4x8xf32>
}
func.func @loss(%x: tensor<4x8xf32> {nn.input, nn.axes = ["batch", "embed"]},
                %w: tensor<4x8x8xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.1>}) -> tensor<f32> {
  // expected-error@+1 {{--stage-layers '4,0': each stage's layer count must be a positive integer}}
  %h = nn.repeat @layer(%x) params(%w) : (tensor<4x8xf32>, tensor<4x8x8xf32>) -> tensor<4x8xf32>
  %l = nn.reduce_mean %h dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

//--- stage-layers-count.mlir

// Tests that stage-layers for the wrong number of stages is refused at the repeat.
func.func private @layer(%h: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %m = nn.matmul %h, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %m : tensor<4x8xf32>
}
func.func @loss(%x: tensor<4x8xf32> {nn.input, nn.axes = ["batch", "embed"]},
                %w: tensor<4x8x8xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.1>}) -> tensor<f32> {
  // expected-error@+1 {{--stage-layers '1,1,2' gives 3 stages 4 layers; the pipeline has 2 stages and the repeat 4 layers}}
  %h = nn.repeat @layer(%x) params(%w) : (tensor<4x8xf32>, tensor<4x8x8xf32>) -> tensor<4x8xf32>
  %l = nn.reduce_mean %h dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

//--- stage-layers-sum.mlir

// Tests that stage-layers that do not add up to the layers is refused at the repeat.
func.func private @layer(%h: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %m = nn.matmul %h, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %m : tensor<4x8xf32>
}
func.func @loss(%x: tensor<4x8xf32> {nn.input, nn.axes = ["batch", "embed"]},
                %w: tensor<4x8x8xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.1>}) -> tensor<f32> {
  // expected-error@+1 {{--stage-layers '1,2' gives 2 stages 3 layers; the pipeline has 2 stages and the repeat 4 layers}}
  %h = nn.repeat @layer(%x) params(%w) : (tensor<4x8xf32>, tensor<4x8x8xf32>) -> tensor<4x8xf32>
  %l = nn.reduce_mean %h dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

//--- stage-layers-no-pp.mlir

// Tests that stage-layers without a pp axis of more than one rank is refused
// (the model would compile unsplit).
// expected-error@+1 {{--stage-layers needs a mesh with a 'pp' axis of more than one rank}}
module {
  func.func @loss(%x: tensor<4xf32> {nn.input}) -> tensor<f32> {
    %l = nn.reduce_mean %x dims = [0] : tensor<4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

//--- bad-mesh.mlir

// Tests that a malformed mesh is reported on the module.
// expected-error@+1 {{tessel-pipeline-split: mesh entry 'pp=two' is not name=size}}
module {
  func.func @loss(%x: tensor<4xf32> {nn.input}) -> tensor<f32> {
    %l = nn.reduce_mean %x dims = [0] : tensor<4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

//--- malformed.mlir

// Tests that an nn.pipeline without a positive rank count is refused.
// expected-error@+1 {{malformed 'nn.pipeline': needs positive ranks, virtual_stages and microbatches}}
module attributes {nn.pipeline = {ranks = 0 : i64, virtual_stages = 1 : i64, microbatches = 2 : i64, schedule = "1f1b", layers = array<i64: 2, 2>, flops = array<i64: 1, 1>, tied = {}}} {
}

// -----

// Tests that an nn.pipeline whose layers do not list every stage is refused.
// expected-error@+1 {{malformed 'nn.pipeline': needs a schedule, layers and flops per stage, and tied}}
module attributes {nn.pipeline = {ranks = 2 : i64, virtual_stages = 1 : i64, microbatches = 2 : i64, schedule = "1f1b", layers = array<i64: 4>, flops = array<i64: 1>, tied = {}}} {
}

// -----

// Tests that a tied parameter must list the stages holding it.
// expected-error@+1 {{malformed 'nn.pipeline': tied parameters list their stages}}
module attributes {nn.pipeline = {ranks = 2 : i64, virtual_stages = 1 : i64, microbatches = 2 : i64, schedule = "1f1b", layers = array<i64: 2, 2>, flops = array<i64: 1, 1>, tied = {wte = "0,1"}}} {
}
