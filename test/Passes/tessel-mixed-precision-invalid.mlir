// RUN: tessel-opt %s -split-input-file -tessel-mixed-precision -verify-diagnostics
// RUN: not tessel-opt %s -split-input-file -tessel-mixed-precision="precision=fp8" 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// RUN: not tessel-opt %s -split-input-file -tessel-mixed-precision="grad-precision=f16" 2>&1 | FileCheck %s --check-prefix=UNKNOWN-GRAD

// UNKNOWN: error: unknown precision 'fp8'; expected f32 or bf16
// UNKNOWN-GRAD: error: unknown gradient precision 'f16'; expected f32 or bf16

// Tests that an f64 model is refused: bf16 is a precision for f32 models.
// expected-error @+1 {{'func.func' op argument #0 is f64: bf16 mixed precision applies to f32 models (compile f64 models without it)}}
func.func @f64_model(%w: tensor<4xf64> {nn.param = "w", nn.init = #nn.init<zeros>}) -> tensor<f64> {
  %l = nn.reduce_sum %w dims = [0] : tensor<4xf64> -> tensor<f64>
  return %l : tensor<f64>
}

// -----

// Tests that the pass runs before autodiff, not on derived entries.
// expected-error @+1 {{'func.func' op is a derived entry: tessel-mixed-precision runs on the forward model, before autodiff}}
func.func @m_update(%w: tensor<4xf32>) attributes {nn.entry = "update"} {
  return
}

// -----

// Tests that nn.precision is checked where it is written.
// expected-error @+1 {{'builtin.module' op 'nn.precision' must be "f32", "bf16" or "f64" on a module}}
module attributes {nn.precision = "fp8"} {
}

// -----

// Tests that nn.grad_precision is checked where it is written.
// expected-error @+1 {{'builtin.module' op 'nn.grad_precision' must be "f32" or "bf16" on a module}}
module attributes {nn.grad_precision = "f16"} {
}

// -----

func.func private @acc_layer(%h: tensor<4xf32>, %w: tensor<4xf32>, %g: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = nn.accumulate %w outs(%g) : tensor<4xf32>
  return %h, %0 : tensor<4xf32>, tensor<4xf32>
}
// Tests that a repeat with outs, the form a later pass makes, is refused.
func.func @repeat_outs(%h: tensor<4xf32>, %w: tensor<3x4xf32>, %g: tensor<3x4xf32>) -> tensor<3x4xf32> {
  // expected-error @+1 {{'nn.repeat' op has outs (updated in place, the form tessel-accumulate-in-layers makes after the passes that differentiate, split, shard or cast a repeat); tessel-mixed-precision takes repeats without outs}}
  %0:2 = nn.repeat @acc_layer(%h) params(%w) outs(%g) : (tensor<4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) -> (tensor<4xf32>, tensor<3x4xf32>)
  return %0#1 : tensor<3x4xf32>
}
