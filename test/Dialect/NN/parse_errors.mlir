// RUN: tessel-opt %s --split-input-file --verify-diagnostics

// Tests that an nn op name the dialect does not define is a located error.
func.func @unknown_op(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{custom op 'nn.frobnicate' is unknown}}
  %0 = nn.frobnicate %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that an op whose type is missing is a located error.
func.func @missing_type(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expected ':'}}
  %0 = nn.exp %a
  return %0 : tensor<4xf32>
}

// -----

// Tests that a colon without a type after it is a located error.
func.func @empty_type(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expected non-function type}}
  %0 = nn.exp %a :
  return %0 : tensor<4xf32>
}

// -----

// Tests that a functional type without its result is a located error.
func.func @missing_result_type(%a: tensor<4x8xf32>, %b: tensor<8x2xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{expected '->' in function type}}
  %0 = nn.matmul %a, %b : (tensor<4x8xf32>, tensor<8x2xf32>)
  return %0 : tensor<4x2xf32>
}

// -----

// Tests that an unterminated tensor type is a located error.
func.func @unterminated_type(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expected '>' in tensor type}}
  %0 = nn.exp %a : tensor<4xf32
  return %0 : tensor<4xf32>
}

// -----

// Tests that an unterminated operand list of a generic op is a located error.
func.func @unterminated_generic_op(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expected ')' to end operand list}}
  %0 = "nn.exp"(%a : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that an unterminated dense array attribute is a located error.
func.func @unterminated_array(%a: tensor<4x8xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{expected ']'}}
  %0 = nn.transpose %a perm = [1, 0 : tensor<4x8xf32> -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

// Tests that an op missing a keyword of its assembly format is a located error.
func.func @missing_keyword(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{custom op 'nn.dropout' expected 'seed'}}
  %0 = nn.dropout %a rate = 0.1 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that a stray operand is a located error.
func.func @extra_operand(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expected ':'}}
  %0 = nn.exp %a %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that an undeclared SSA value is a located error.
func.func @undeclared_value(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{use of undeclared SSA value name}}
  %0 = nn.exp %b : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that an attribute entry without a value is a located error.
func.func @attribute_without_value(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{expected attribute value}}
  %0 = nn.softmax %a {dim = } : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that an empty #nn.reduction is a located error.
func.func @empty_reduction(%x: tensor<8x10xf32>, %y: tensor<8xi32>) -> tensor<f32> {
  // expected-error @+2 {{expected valid keyword or string}}
  // expected-error @+1 {{failed to parse NN_LossReductionAttr parameter 'value' which is to be a `::tessel::nn::LossReduction`}}
  %0 = nn.cross_entropy %x, %y {reduction = #nn.reduction<>} : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that #nn.init numbers need a separating comma.
func.func @init_missing_comma(
    // expected-error @+1 {{expected '>'}}
    %w: tensor<4xf32> {nn.param = "w", nn.init = #nn.init<normal 0.02>}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that an unknown attribute of the nn dialect is a located error.
func.func @unknown_nn_attribute(
    // expected-error @+1 {{unknown attribute `bogus` in dialect `nn`}}
    %w: tensor<4xf32> {nn.param = "w", nn.init = #nn.bogus<1>}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a function body left open is a located error at the end of the input.
func.func @unterminated_region(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = nn.exp %a : tensor<4xf32>
  // expected-error @+1 {{expected operation name in quotes}}
  return %0 : tensor<4xf32>
