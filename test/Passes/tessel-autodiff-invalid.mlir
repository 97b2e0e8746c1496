// RUN: tessel-opt %s -tessel-autodiff -split-input-file -verify-diagnostics
// RUN: not tessel-opt %s -split-input-file -tessel-autodiff="optimizer=lamb" 2>&1 | FileCheck %s --check-prefix=OPTION
// RUN: not tessel-opt %s -split-input-file -tessel-autodiff="schedule=step" 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// RUN: not tessel-opt %s -split-input-file -tessel-autodiff="recompute=some" 2>&1 | FileCheck %s --check-prefix=RECOMPUTE
// RUN: not tessel-opt %s -split-input-file -tessel-autodiff="no-decay=*.bias,,wte" 2>&1 | FileCheck %s --check-prefix=NODECAY

// OPTION: error: training settings: unknown optimizer 'lamb'; expected sgd, adam or adamw
// SCHEDULE: error: training settings: unknown learning-rate schedule 'step'; expected constant or warmup-cosine
// RECOMPUTE: error: training settings: unknown recompute policy 'some'; expected none, selective or full
// NODECAY: error: training settings: no_decay must be comma-separated name patterns, none empty, without spaces, got '*.bias,,wte'

// Tests that a loss that is not a scalar is rejected before autodiff.
// expected-error @+1 {{must return its scalar loss first, as tensor<f32>}}
func.func @vector_loss(%w: tensor<4xf32> {nn.param = "w", nn.init = #nn.init<zeros>}) -> tensor<4xf32> {
  return %w : tensor<4xf32>
}

// -----

// Tests that a parameter reaching the loss only through integer ids is a
// non-differentiable path.
func.func @ids_from_param(%w: tensor<4xf32> {nn.param = "w", nn.init = #nn.init<zeros>},
                          %table: tensor<8x2xf32> {nn.param = "table", nn.init = #nn.init<zeros>}) -> tensor<f32> {
  %ids = nn.cast %w : tensor<4xf32> to tensor<4xi32>
  // expected-error @+1 {{'nn.embedding' op operand #1 is not differentiable, but parameter 'w' reaches the loss through it}}
  %e = nn.embedding %table, %ids : (tensor<8x2xf32>, tensor<4xi32>) -> tensor<4x2xf32>
  %l = nn.reduce_sum %e dims = [0, 1] : tensor<4x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that an op without a derivative on a parameter's path is reported.
func.func @no_derivative(%w: tensor<4xf32> {nn.param = "w", nn.init = #nn.init<zeros>},
                         %x: tensor<4xf32> {nn.input}) -> tensor<f32> {
  // expected-error @+1 {{'nn.equal' op has no derivative, but parameter 'w' reaches the loss through it}}
  %m = nn.equal %w, %x : tensor<4xf32>
  %l = nn.reduce_sum %m dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a model none of whose parameters reaches the loss is rejected.
// expected-error @+2 {{'func.func' op has parameters, but none of them reaches the loss}}
// expected-warning @+1 {{parameter 'w' does not reach the loss: it gets no gradient and is not updated}}
func.func @unused(%w: tensor<4xf32> {nn.param = "w", nn.init = #nn.init<zeros>},
                  %x: tensor<4xf32> {nn.input}) -> tensor<f32> {
  %l = nn.reduce_sum %x dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that an unknown optimizer in nn.train is rejected.
// expected-error @+1 {{training settings: unknown optimizer 'lamb'; expected sgd, adam or adamw}}
module attributes {nn.train = {optimizer = "lamb"}} {
  func.func @f(%w: tensor<4xf32> {nn.param = "w", nn.init = #nn.init<zeros>}) -> tensor<f32> {
    %l = nn.reduce_sum %w dims = [0] : tensor<4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Tests that an unknown schedule in nn.train is rejected.
// expected-error @+1 {{training settings: unknown learning-rate schedule 'step'; expected constant or warmup-cosine}}
module attributes {nn.train = {schedule = "step"}} {
  func.func @f(%w: tensor<4xf32> {nn.param = "w", nn.init = #nn.init<zeros>}) -> tensor<f32> {
    %l = nn.reduce_sum %w dims = [0] : tensor<4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Tests that the warm-up + cosine schedule needs its length.
// expected-error @+1 {{the warmup-cosine schedule needs total_steps (0) > warmup (10)}}
module attributes {nn.train = {schedule = "warmup_cosine", warmup = 10}} {
  func.func @f(%w: tensor<4xf32> {nn.param = "w", nn.init = #nn.init<zeros>}) -> tensor<f32> {
    %l = nn.reduce_sum %w dims = [0] : tensor<4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Tests that an unknown setting in nn.train is named.
// expected-error @+1 {{nn.train: unknown setting 'learning_rate'}}
module attributes {nn.train = {learning_rate = 0.1}} {
  func.func @f(%w: tensor<4xf32> {nn.param = "w", nn.init = #nn.init<zeros>}) -> tensor<f32> {
    %l = nn.reduce_sum %w dims = [0] : tensor<4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Tests that a setting of the wrong kind is named.
// expected-error @+1 {{nn.train: 'lr' must be a number, got "fast"}}
module attributes {nn.train = {lr = "fast"}} {
  func.func @f(%w: tensor<4xf32> {nn.param = "w", nn.init = #nn.init<zeros>}) -> tensor<f32> {
    %l = nn.reduce_sum %w dims = [0] : tensor<4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Tests that Nesterov momentum needs SGD with momentum.
// expected-error @+1 {{nesterov needs sgd with momentum > 0}}
module attributes {nn.train = {optimizer = "adamw", nesterov = true}} {
  func.func @f(%w: tensor<4xf32> {nn.param = "w", nn.init = #nn.init<zeros>}) -> tensor<f32> {
    %l = nn.reduce_sum %w dims = [0] : tensor<4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Tests that the pass runs once.
module {
  func.func @f(%w: tensor<4xf32> {nn.param = "w", nn.init = #nn.init<zeros>}) -> tensor<f32> {
    %l = nn.reduce_sum %w dims = [0] : tensor<4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
  // expected-error @+1 {{is already a training entry ('nn.entry'); tessel-autodiff runs once}}
  func.func @f_backward(%w: tensor<4xf32> {nn.param = "w", nn.init = #nn.init<zeros>}) -> tensor<f32> attributes {nn.entry = "backward"} {
    %l = nn.reduce_sum %w dims = [0] : tensor<4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Tests that a repeat on a parameter's path may not carry integers.
func.func private @int_layer(%h: tensor<4xf32>, %c: tensor<4xi32>, %w: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi32>) {
  %m = nn.mul %h, %w : tensor<4xf32>
  return %m, %c : tensor<4xf32>, tensor<4xi32>
}
func.func @int_carry(%ws: tensor<2x4xf32> {nn.param = "ws", nn.init = #nn.init<zeros>},
                     %x: tensor<4xf32> {nn.input}, %c: tensor<4xi32> {nn.input}) -> tensor<f32> {
  // expected-error @+1 {{carries or stacks an integer tensor ('tensor<4xi32>')}}
  %y:2 = nn.repeat @int_layer(%x, %c) params(%ws) : (tensor<4xf32>, tensor<4xi32>, tensor<2x4xf32>) -> (tensor<4xf32>, tensor<4xi32>)
  %l = nn.reduce_sum %y#0 dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a pattern matching no parameter (a typo, most likely) is a
// warning on the model naming it, not an error.
module attributes {nn.train = {no_decay = "fc.bias,wtee"}} {
  // expected-warning @+1 {{no_decay pattern 'wtee' matches no parameter of the model}}
  func.func @typo(%x: tensor<2x4xf32> {nn.input},
                  %w: tensor<4x3xf32> {nn.param = "fc.weight", nn.init = #nn.init<normal, 0.02>},
                  %b: tensor<3xf32> {nn.param = "fc.bias", nn.init = #nn.init<zeros>}) -> tensor<f32> {
    %h = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
    %bb = nn.broadcast %b dims = [1] : tensor<3xf32> -> tensor<2x3xf32>
    %y = nn.add %h, %bb : tensor<2x3xf32>
    %l = nn.reduce_mean %y dims = [0, 1] : tensor<2x3xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Tests that an empty pattern in nn.train's no_decay is rejected.
// expected-error @+1 {{training settings: no_decay must be comma-separated name patterns, none empty, without spaces, got 'wte,,wpe'}}
module attributes {nn.train = {no_decay = "wte,,wpe"}} {
  func.func @f(%w: tensor<4xf32> {nn.param = "w", nn.init = #nn.init<zeros>}) -> tensor<f32> {
    %l = nn.reduce_sum %w dims = [0] : tensor<4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Tests that a space in a pattern is rejected (no name has one: it would
// match nothing).
// expected-error @+1 {{training settings: no_decay must be comma-separated name patterns, none empty, without spaces, got '*.bias, *ln*'}}
module attributes {nn.train = {no_decay = "*.bias, *ln*"}} {
  func.func @f(%w: tensor<4xf32> {nn.param = "w", nn.init = #nn.init<zeros>}) -> tensor<f32> {
    %l = nn.reduce_sum %w dims = [0] : tensor<4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Tests that no_decay in nn.train is a string.
// expected-error @+1 {{nn.train: 'no_decay' must be a string, got ["wte"]}}
module attributes {nn.train = {no_decay = ["wte"]}} {
  func.func @f(%w: tensor<4xf32> {nn.param = "w", nn.init = #nn.init<zeros>}) -> tensor<f32> {
    %l = nn.reduce_sum %w dims = [0] : tensor<4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Tests that a loss reached through an attention's log-sum-exp (the
// gradient's saved statistic) is refused with the reason, not a crash.
func.func @attention_lse_loss(%w: tensor<1x4x2x8xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.1>}) -> tensor<f32> {
  // expected-error @+1 {{'nn.attention' op reaches the loss through its log-sum-exp result, which has no gradient; differentiate through the attention output only}}
  %o, %lse = nn.attention %w, %w, %w causal lse : (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x2x4xf32>)
  %l = nn.reduce_sum %lse dims = [0, 1, 2] : tensor<1x2x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

func.func private @acc_layer(%h: tensor<4xf32>, %w: tensor<4xf32>, %g: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = nn.accumulate %w outs(%g) : tensor<4xf32>
  return %h, %0 : tensor<4xf32>, tensor<4xf32>
}
// Tests that a repeat with outs, the form a later pass makes, is refused.
func.func @repeat_outs(%h: tensor<4xf32>, %w: tensor<3x4xf32>, %g: tensor<3x4xf32>) -> tensor<3x4xf32> {
  // expected-error @+1 {{'nn.repeat' op has outs (updated in place, the form tessel-accumulate-in-layers makes after the passes that differentiate, split, shard or cast a repeat); tessel-autodiff takes repeats without outs}}
  %0:2 = nn.repeat @acc_layer(%h) params(%w) outs(%g) : (tensor<4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) -> (tensor<4xf32>, tensor<3x4xf32>)
  return %0#1 : tensor<3x4xf32>
}

// -----

// Tests that a model whose every parameter is frozen is refused: there is
// nothing to train (it compiles without training to be evaluated).
module attributes {nn.train = {freeze = "fc.*"}} {
  // expected-error @+1 {{'func.func' op has every parameter frozen (freeze 'fc.*'): there is nothing to train (compile it without training to evaluate it)}}
  func.func @all_frozen(%x: tensor<2x4xf32> {nn.input},
                        %w: tensor<4x3xf32> {nn.param = "fc.weight", nn.init = #nn.init<normal, 0.02>}) -> tensor<f32> {
    %h = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
    %l = nn.reduce_mean %h dims = [0, 1] : tensor<2x3xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
