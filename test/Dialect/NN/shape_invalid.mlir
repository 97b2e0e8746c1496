// RUN: tessel-opt %s --split-input-file --verify-diagnostics

// Tests that nn.broadcast cannot change the element type.
func.func @broadcast_element_type(%x: tensor<8xf32>) -> tensor<4x8xbf16> {
  // expected-error @+1 {{'nn.broadcast' op changes the element type from 'f32' to 'bf16'; use nn.cast}}
  %0 = nn.broadcast %x dims = [1] : tensor<8xf32> -> tensor<4x8xbf16>
  return %0 : tensor<4x8xbf16>
}

// -----

// Tests that nn.broadcast needs one dims entry per operand dimension.
func.func @broadcast_dims_count(%x: tensor<8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'nn.broadcast' op dims has 2 entries but the operand has rank 1}}
  %0 = nn.broadcast %x dims = [0, 1] : tensor<8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that nn.broadcast's dims must name result dimensions.
func.func @broadcast_dim_out_of_range(%x: tensor<8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'nn.broadcast' op dims[0] = 2 is out of range for a result of rank 2}}
  %0 = nn.broadcast %x dims = [2] : tensor<8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that nn.broadcast rejects a negative dims entry.
func.func @broadcast_dim_negative(%x: tensor<8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'nn.broadcast' op dims[0] = -1 is out of range for a result of rank 2}}
  %0 = nn.broadcast %x dims = [-1] : tensor<8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that nn.broadcast's dims must be strictly increasing (it cannot transpose).
func.func @broadcast_dims_not_increasing(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'nn.broadcast' op dims must be strictly increasing, got [1, 0]}}
  %0 = nn.broadcast %x dims = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

// Tests that nn.broadcast only expands dimensions of size 1.
func.func @broadcast_bad_size(%x: tensor<3xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'nn.broadcast' op operand dimension 0 of size 3 cannot broadcast to result dimension 1 of size 8}}
  %0 = nn.broadcast %x dims = [1] : tensor<3xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that nn.broadcast cannot shrink a dimension.
func.func @broadcast_shrink(%x: tensor<4x8xf32>) -> tensor<4x1xf32> {
  // expected-error @+1 {{'nn.broadcast' op operand dimension 1 of size 8 cannot broadcast to result dimension 1 of size 1}}
  %0 = nn.broadcast %x dims = [0, 1] : tensor<4x8xf32> -> tensor<4x1xf32>
  return %0 : tensor<4x1xf32>
}

// -----

// Tests that nn.broadcast rejects a dynamically shaped result.
func.func @broadcast_dynamic(%x: tensor<8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'nn.broadcast' op result #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float or 32-bit signless integer or 64-bit signless integer values without encoding, but got 'tensor<?x8xf32>'}}
  %0 = nn.broadcast %x dims = [1] : tensor<8xf32> -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// Tests that nn.reshape cannot change the element type.
func.func @reshape_element_type(%x: tensor<4x8xf32>) -> tensor<32xi32> {
  // expected-error @+1 {{'nn.reshape' op changes the element type from 'f32' to 'i32'; use nn.cast}}
  %0 = nn.reshape %x : tensor<4x8xf32> -> tensor<32xi32>
  return %0 : tensor<32xi32>
}

// -----

// Tests that nn.reshape keeps the number of elements.
func.func @reshape_element_count(%x: tensor<4x8xf32>) -> tensor<30xf32> {
  // expected-error @+1 {{'nn.reshape' op cannot reshape 32 elements (4x8) into 30 (30)}}
  %0 = nn.reshape %x : tensor<4x8xf32> -> tensor<30xf32>
  return %0 : tensor<30xf32>
}

// -----

// Tests that the element-count message names a rank-0 shape "scalar".
func.func @reshape_from_scalar(%x: tensor<f32>) -> tensor<2xf32> {
  // expected-error @+1 {{'nn.reshape' op cannot reshape 1 elements (scalar) into 2 (2)}}
  %0 = nn.reshape %x : tensor<f32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// Tests that nn.reshape rejects a dynamically shaped operand.
func.func @reshape_dynamic(%x: tensor<?x4xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'nn.reshape' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float or 32-bit signless integer or 64-bit signless integer values without encoding, but got 'tensor<?x4xf32>'}}
  %0 = nn.reshape %x : tensor<?x4xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// Tests that nn.transpose needs one perm entry per dimension.
func.func @transpose_perm_count(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{perm has 1 entries but the operand has rank 2}}
  // expected-error @+1 {{'nn.transpose' op failed to infer returned types}}
  %0 = nn.transpose %x perm = [0] : tensor<4x8xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that nn.transpose's perm entries are in range.
func.func @transpose_perm_out_of_range(%x: tensor<4x8xf32>) -> tensor<4x4xf32> {
  // expected-error @+2 {{perm dimension 2 is out of range for rank 2}}
  // expected-error @+1 {{'nn.transpose' op failed to infer returned types}}
  %0 = nn.transpose %x perm = [0, 2] : tensor<4x8xf32> -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

// Tests that nn.transpose's perm is a permutation (no repeated entry).
func.func @transpose_perm_repeated(%x: tensor<4x8xf32>) -> tensor<4x4xf32> {
  // expected-error @+2 {{perm dimension 0 is listed twice}}
  // expected-error @+1 {{'nn.transpose' op failed to infer returned types}}
  %0 = nn.transpose %x perm = [0, 0] : tensor<4x8xf32> -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

// Tests that nn.transpose's result shape must follow perm.
func.func @transpose_wrong_result(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+2 {{'nn.transpose' op inferred type(s) 'tensor<8x4xf32>' are incompatible with return type(s) of operation 'tensor<4x8xf32>'}}
  // expected-error @+1 {{'nn.transpose' op failed to infer returned types}}
  %0 = nn.transpose %x perm = [1, 0] : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that nn.transpose rejects a dynamically shaped operand.
func.func @transpose_dynamic(%x: tensor<?x4xf32>) -> tensor<4x?xf32> {
  // expected-error @+1 {{'nn.transpose' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float or 32-bit signless integer or 64-bit signless integer values without encoding, but got 'tensor<?x4xf32>'}}
  %0 = nn.transpose %x perm = [1, 0] : tensor<?x4xf32> -> tensor<4x?xf32>
  return %0 : tensor<4x?xf32>
}

// -----

// Tests that nn.slice needs one start entry per dimension.
func.func @slice_start_count(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+2 {{start has 1 entries but the operand has rank 2}}
  // expected-error @+1 {{'nn.slice' op failed to infer returned types}}
  %0 = nn.slice %x start = [0] limit = [4, 8] : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that nn.slice needs one limit entry per dimension.
func.func @slice_limit_count(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+2 {{limit has 1 entries but the operand has rank 2}}
  // expected-error @+1 {{'nn.slice' op failed to infer returned types}}
  %0 = nn.slice %x start = [0, 0] limit = [4] : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that nn.slice needs one strides entry per dimension.
func.func @slice_strides_count(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+2 {{strides has 3 entries but the operand has rank 2}}
  // expected-error @+1 {{'nn.slice' op failed to infer returned types}}
  %0 = nn.slice %x start = [0, 0] limit = [4, 8] strides = [1, 1, 1] : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that nn.slice's strides are at least 1.
func.func @slice_zero_stride(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+2 {{stride of dimension 1 must be at least 1, got 0}}
  // expected-error @+1 {{'nn.slice' op failed to infer returned types}}
  %0 = nn.slice %x start = [0, 0] limit = [4, 8] strides = [1, 0] : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that nn.slice rejects a negative stride.
func.func @slice_negative_stride(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+2 {{stride of dimension 0 must be at least 1, got -1}}
  // expected-error @+1 {{'nn.slice' op failed to infer returned types}}
  %0 = nn.slice %x start = [0, 0] limit = [4, 8] strides = [-1, 1] : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that nn.slice's start is not above its limit.
func.func @slice_start_above_limit(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+2 {{dimension 1 of size 8 cannot be sliced from 5 to 3 (need 0 <= start <= limit <= size)}}
  // expected-error @+1 {{'nn.slice' op failed to infer returned types}}
  %0 = nn.slice %x start = [0, 5] limit = [4, 3] : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that nn.slice's limit is not above the dimension size.
func.func @slice_limit_above_size(%x: tensor<4x8xf32>) -> tensor<4x9xf32> {
  // expected-error @+2 {{dimension 1 of size 8 cannot be sliced from 0 to 9 (need 0 <= start <= limit <= size)}}
  // expected-error @+1 {{'nn.slice' op failed to infer returned types}}
  %0 = nn.slice %x start = [0, 0] limit = [4, 9] : tensor<4x8xf32> -> tensor<4x9xf32>
  return %0 : tensor<4x9xf32>
}

// -----

// Tests that nn.slice's start is not negative.
func.func @slice_negative_start(%x: tensor<4x8xf32>) -> tensor<5x8xf32> {
  // expected-error @+2 {{dimension 0 of size 4 cannot be sliced from -1 to 4 (need 0 <= start <= limit <= size)}}
  // expected-error @+1 {{'nn.slice' op failed to infer returned types}}
  %0 = nn.slice %x start = [-1, 0] limit = [4, 8] : tensor<4x8xf32> -> tensor<5x8xf32>
  return %0 : tensor<5x8xf32>
}

// -----

// Tests that a strided slice's result size is rounded up, not down.
func.func @slice_wrong_strided_size(%x: tensor<4x8xf32>) -> tensor<4x2xf32> {
  // expected-error @+2 {{'nn.slice' op inferred type(s) 'tensor<4x3xf32>' are incompatible with return type(s) of operation 'tensor<4x2xf32>'}}
  // expected-error @+1 {{'nn.slice' op failed to infer returned types}}
  %0 = nn.slice %x start = [0, 0] limit = [4, 8] strides = [1, 3] : tensor<4x8xf32> -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

// Tests that nn.concat needs at least one input.
func.func @concat_no_input() -> tensor<4xf32> {
  // expected-error @+2 {{needs at least one input}}
  // expected-error @+1 {{'nn.concat' op failed to infer returned types}}
  %0 = nn.concat dim = 0 : () -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that nn.concat's dim is within the rank.
func.func @concat_dim_out_of_range(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<8x8xf32> {
  // expected-error @+2 {{dim 2 is out of range for rank 2}}
  // expected-error @+1 {{'nn.concat' op failed to infer returned types}}
  %0 = nn.concat %a, %b dim = 2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

// Tests that nn.concat rejects a negative dim.
func.func @concat_dim_negative(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x16xf32> {
  // expected-error @+2 {{dim -1 is out of range for rank 2}}
  // expected-error @+1 {{'nn.concat' op failed to infer returned types}}
  %0 = nn.concat %a, %b dim = -1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// Tests that nn.concat's inputs share the element type.
func.func @concat_element_type(%a: tensor<4x8xf32>, %b: tensor<4x8xbf16>) -> tensor<8x8xf32> {
  // expected-error @+2 {{input #1 'tensor<4x8xbf16>' differs in rank or element type from input #0 'tensor<4x8xf32>'}}
  // expected-error @+1 {{'nn.concat' op failed to infer returned types}}
  %0 = nn.concat %a, %b dim = 0 : (tensor<4x8xf32>, tensor<4x8xbf16>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

// Tests that nn.concat's inputs share the rank.
func.func @concat_rank(%a: tensor<4x8xf32>, %b: tensor<4xf32>) -> tensor<8x8xf32> {
  // expected-error @+2 {{input #1 'tensor<4xf32>' differs in rank or element type from input #0 'tensor<4x8xf32>'}}
  // expected-error @+1 {{'nn.concat' op failed to infer returned types}}
  %0 = nn.concat %a, %b dim = 0 : (tensor<4x8xf32>, tensor<4xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

// Tests that nn.concat's inputs agree on every dimension but dim (reported for the third input).
func.func @concat_other_dim(%a: tensor<2x8xf32>, %b: tensor<2x8xf32>, %c: tensor<2x7xf32>) -> tensor<6x8xf32> {
  // expected-error @+2 {{input #2 has size 7 in dimension 1 but input #0 has 8 (only dimension 0 may differ)}}
  // expected-error @+1 {{'nn.concat' op failed to infer returned types}}
  %0 = nn.concat %a, %b, %c dim = 0 : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x7xf32>) -> tensor<6x8xf32>
  return %0 : tensor<6x8xf32>
}

// -----

// Tests that nn.concat's result size along dim is the sum of the inputs'.
func.func @concat_wrong_result(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<8x8xf32> {
  // expected-error @+2 {{'nn.concat' op inferred type(s) 'tensor<4x16xf32>' are incompatible with return type(s) of operation 'tensor<8x8xf32>'}}
  // expected-error @+1 {{'nn.concat' op failed to infer returned types}}
  %0 = nn.concat %a, %b dim = 1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

// Tests that nn.concat rejects an element type outside the allowed set.
func.func @concat_i8(%a: tensor<4xi8>) -> tensor<4xi8> {
  // expected-error @+1 {{'nn.concat' op operand #0 must be variadic of statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float or 32-bit signless integer or 64-bit signless integer values without encoding, but got 'tensor<4xi8>'}}
  %0 = nn.concat %a dim = 0 : (tensor<4xi8>) -> tensor<4xi8>
  return %0 : tensor<4xi8>
}

// -----

// Tests that the custom form of nn.transpose needs the `perm =` keyword (malformed text).
func.func @transpose_missing_perm_keyword(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{custom op 'nn.transpose' expected 'perm'}}
  %0 = nn.transpose %x [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

// Tests that the custom form of nn.slice needs `limit =` after start (malformed text).
func.func @slice_missing_limit(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{custom op 'nn.slice' expected 'limit'}}
  %0 = nn.slice %x start = [0, 0] : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}
