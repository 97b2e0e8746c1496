// RUN: tessel-opt %s --split-input-file --verify-diagnostics

// Tests that nn.add rejects operands of different shapes.
func.func @add_shape_mismatch(%a: tensor<4xf32>, %b: tensor<5xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.add' op requires the same type for all operands and results}}
  %0 = "nn.add"(%a, %b) : (tensor<4xf32>, tensor<5xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that nn.add rejects operands of different element types (no implicit cast).
func.func @add_element_type_mismatch(%a: tensor<4xf32>, %b: tensor<4xbf16>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.add' op requires the same type for all operands and results}}
  %0 = "nn.add"(%a, %b) : (tensor<4xf32>, tensor<4xbf16>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that nn.sub rejects a result type that differs from its operands.
func.func @sub_result_mismatch(%a: tensor<4xf32>) -> tensor<4xf16> {
  // expected-error @+1 {{'nn.sub' op requires the same type for all operands and results}}
  %0 = "nn.sub"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

// Tests that nn.mul rejects an element type outside the allowed set (i8).
func.func @mul_i8(%a: tensor<4xi8>) -> tensor<4xi8> {
  // expected-error @+1 {{'nn.mul' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float or 32-bit signless integer or 64-bit signless integer values without encoding, but got 'tensor<4xi8>'}}
  %0 = nn.mul %a, %a : tensor<4xi8>
  return %0 : tensor<4xi8>
}

// -----

// Tests that nn.div rejects a dynamically shaped tensor.
func.func @div_dynamic(%a: tensor<?x4xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'nn.div' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float or 32-bit signless integer or 64-bit signless integer values without encoding, but got 'tensor<?x4xf32>'}}
  %0 = nn.div %a, %a : tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

// Tests that nn.exp, a float-only op, rejects an i32 tensor.
func.func @exp_i32(%a: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'nn.exp' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values without encoding, but got 'tensor<4xi32>'}}
  %0 = nn.exp %a : tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// Tests that nn.relu rejects a dynamically shaped tensor.
func.func @relu_dynamic(%a: tensor<?x4xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'nn.relu' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values without encoding, but got 'tensor<?x4xf32>'}}
  %0 = nn.relu %a : tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

// Tests that nn.log rejects an unranked tensor.
func.func @log_unranked(%a: tensor<*xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{'nn.log' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values without encoding, but got 'tensor<*xf32>'}}
  %0 = "nn.log"(%a) : (tensor<*xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

// Tests that a unary op (nn.neg) cannot change the element type.
func.func @neg_result_mismatch(%a: tensor<4xf32>) -> tensor<4xf16> {
  // expected-error @+1 {{'nn.neg' op requires the same type for all operands and results}}
  %0 = "nn.neg"(%a) : (tensor<4xf32>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

// Tests that a unary op (nn.tanh) cannot change the shape.
func.func @tanh_shape_mismatch(%a: tensor<4xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'nn.tanh' op requires the same type for all operands and results}}
  %0 = "nn.tanh"(%a) : (tensor<4xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// Tests that nn.sigmoid rejects integer tensors.
func.func @sigmoid_i64(%a: tensor<4xi64>) -> tensor<4xi64> {
  // expected-error @+1 {{'nn.sigmoid' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values without encoding, but got 'tensor<4xi64>'}}
  %0 = nn.sigmoid %a : tensor<4xi64>
  return %0 : tensor<4xi64>
}

// -----

// Tests that nn.gelu rejects integer tensors.
func.func @gelu_i32(%a: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'nn.gelu' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values without encoding, but got 'tensor<4xi32>'}}
  %0 = nn.gelu %a approximate : tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// Tests that nn.gelu's `approximate` is a bare keyword, not `approximate = true`.
func.func @gelu_approximate_value(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expected ':'}}
  %0 = nn.gelu %a approximate = true : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that nn.silu rejects integer tensors.
func.func @silu_i32(%a: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'nn.silu' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values without encoding, but got 'tensor<4xi32>'}}
  %0 = nn.silu %a : tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// Tests that nn.cast keeps the shape.
func.func @cast_shape_mismatch(%a: tensor<4xf32>) -> tensor<5xbf16> {
  // expected-error @+1 {{'nn.cast' op requires the same shape for all operands and results}}
  %0 = nn.cast %a : tensor<4xf32> to tensor<5xbf16>
  return %0 : tensor<5xbf16>
}

// -----

// Tests that nn.cast only targets the supported element types.
func.func @cast_to_i8(%a: tensor<4xf32>) -> tensor<4xi8> {
  // expected-error @+1 {{'nn.cast' op result #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float or 32-bit signless integer or 64-bit signless integer values without encoding, but got 'tensor<4xi8>'}}
  %0 = nn.cast %a : tensor<4xf32> to tensor<4xi8>
  return %0 : tensor<4xi8>
}

// -----

// Tests that nn.dropout rejects rate 1 (everything dropped, scale 1/0).
func.func @dropout_rate_one(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.dropout' op rate must be in [0, 1), got 1.000000e+00}}
  %0 = nn.dropout %a rate = 1.0 seed = 3 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that nn.dropout rejects a negative rate.
func.func @dropout_rate_negative(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.dropout' op rate must be in [0, 1), got -5.000000e-01}}
  %0 = nn.dropout %a rate = -0.5 seed = 3 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that nn.dropout rejects a NaN rate.
func.func @dropout_rate_nan(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.dropout' op rate must be in [0, 1), got nan}}
  %0 = nn.dropout %a rate = 0x7FF8000000000000 seed = 3 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that nn.dropout rejects integer tensors.
func.func @dropout_i32(%a: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'nn.dropout' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values without encoding, but got 'tensor<4xi32>'}}
  %0 = "nn.dropout"(%a) {rate = 0.5 : f64, seed = 1 : i64} : (tensor<4xi32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// Tests that nn.dropout's rate must be an f64 attribute.
func.func @dropout_rate_f32(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.dropout' op attribute 'rate' failed to satisfy constraint: 64-bit float attribute}}
  %0 = "nn.dropout"(%a) {rate = 0.5 : f32, seed = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that nn.dropout needs its seed (malformed custom syntax).
func.func @dropout_missing_seed(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{custom op 'nn.dropout' expected 'seed'}}
  %0 = nn.dropout %a rate = 0.5 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that nn.add needs two operands (malformed custom syntax).
func.func @add_one_operand(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expected ','}}
  %0 = nn.add %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that nn.constant's value and result types must match.
func.func @constant_type_mismatch() -> tensor<4x8xf32> {
  // expected-error @+1 {{'nn.constant' op failed to verify that all of {value, result} have same type}}
  %0 = "nn.constant"() {value = dense<1.0> : tensor<4xf32>} : () -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that nn.constant rejects an element type outside the allowed set.
func.func @constant_i8() -> tensor<4xi8> {
  // expected-error @+1 {{'nn.constant' op result #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float or 32-bit signless integer or 64-bit signless integer values without encoding, but got 'tensor<4xi8>'}}
  %0 = nn.constant dense<1> : tensor<4xi8>
  return %0 : tensor<4xi8>
}

// -----

// Tests that nn.constant needs its value attribute.
func.func @constant_no_value() -> tensor<4xf32> {
  // expected-error @+1 {{'nn.constant' op requires attribute 'value'}}
  %0 = "nn.constant"() : () -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that a dropout block needs both its whole shape and its axes.
func.func @dropout_block_half(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.dropout' op needs both global_shape and split_axes, or neither}}
  %0 = nn.dropout %a rate = 0.5 seed = 3 {global_shape = array<i64: 8>} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that a dropout block is a block of its whole shape.
func.func @dropout_block_not_a_block(%a: tensor<4x3xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{'nn.dropout' op dimension 1 of size 3 is not a block of size 7 split over 0 grid axes}}
  %0 = nn.dropout %a rate = 0.5 seed = 3 {global_shape = array<i64: 8, 7>, split_axes = [array<i16: 0>, array<i16>]} : tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

// Tests that a dropout block lists its grid axes in ascending order.
func.func @dropout_block_axes_order(%a: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'nn.dropout' op split_axes[0] must list grid axes in ascending order}}
  %0 = nn.dropout %a rate = 0.5 seed = 3 {global_shape = array<i64: 8>, split_axes = [array<i16: 1, 0>]} : tensor<2xf32>
  return %0 : tensor<2xf32>
}
