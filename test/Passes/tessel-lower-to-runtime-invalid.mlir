// RUN: tessel-opt %s -tessel-lower-to-runtime --split-input-file --verify-diagnostics

// Tests that lowering needs the memory plan first.
// expected-error @+1 {{'func.func' op has no memory plan; run -tessel-plan-memory first}}
func.func @unplanned(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = nn.exp %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that a module compiles one model.
func.func @first(%x: tensor<4xf32> {nn.input}) -> tensor<f32> attributes {tessel.scratch_bytes = 0 : i64} {
  %0 = nn.reduce_sum %x dims = [0] {tessel.offsets = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
  return %0 : tensor<f32>
}
// expected-error @+1 {{'func.func' op is a second model function; a module compiles one model (the first is @first)}}
func.func @second(%x: tensor<4xf32> {nn.input}) -> tensor<f32> attributes {tessel.scratch_bytes = 0 : i64} {
  %0 = nn.reduce_sum %x dims = [0] {tessel.offsets = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that an op without a plan for its results is refused.
func.func @partly_planned(%a: tensor<4xf32>) -> tensor<4xf32> attributes {tessel.scratch_bytes = 64 : i64} {
  // expected-error @+1 {{'nn.exp' op has no memory plan; run -tessel-plan-memory first}}
  %0 = nn.exp %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that a constant the runtime cannot copy (a resource blob) is refused.
func.func @resource_constant() -> tensor<2xf32> attributes {tessel.scratch_bytes = 64 : i64} {
  // expected-error @+1 {{'nn.constant' op only dense constants lower to the runtime}}
  %0 = nn.constant {tessel.offsets = array<i64: 0>} dense_resource<blob> : tensor<2xf32>
  return %0 : tensor<2xf32>
}
{-#
  dialect_resources: {
    builtin: {
      blob: "0x040000000000803F00000040"
    }
  }
#-}
