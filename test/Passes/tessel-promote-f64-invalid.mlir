// RUN: tessel-opt %s -split-input-file -tessel-promote-f64 -verify-diagnostics

// Tests that the pass runs before autodiff, not on derived entries.
// expected-error @+1 {{'func.func' op is a derived entry: tessel-promote-f64 runs on the forward model, before autodiff}}
func.func @m_update(%w: tensor<4xf32>) attributes {nn.entry = "update"} {
  return
}

// -----

// Tests that a model already in bf16 mixed precision is refused: its bf16
// parameters and f32 master weights are not an f32 model's.
// expected-error @+1 {{module is already in bf16 mixed precision; tessel-promote-f64 takes an f32 model}}
module attributes {nn.precision = "bf16"} {
}

// -----

// Tests that nn.precision may say f64, but nn.grad_precision may not.
// expected-error @+1 {{'builtin.module' op 'nn.grad_precision' must be "f32" or "bf16" on a module}}
module attributes {nn.precision = "f64", nn.grad_precision = "f64"} {
}

// -----

// Tests that a constant whose value is not dense floats is refused by name
// rather than left f32 beside f64 operands.
func.func @blob(%x: tensor<2xf32> {nn.input}) -> tensor<f32> {
  // expected-error @+1 {{'nn.constant' op holds a value tessel-promote-f64 cannot widen (dense f32 elements are widened)}}
  %c = nn.constant dense_resource<blob> : tensor<2xf32>
  %y = nn.mul %x, %c : tensor<2xf32>
  %l = nn.reduce_sum %y dims = [0] : tensor<2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
{-#
  dialect_resources: {
    builtin: {
      blob: "0x040000000000803F00000040"
    }
  }
#-}
