// RUN: tessel-opt %s --split-input-file --verify-diagnostics

// Tests that a reduced dimension must be below the rank.
func.func @dim_out_of_range(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{reduced dimension 2 is out of range for rank 2}}
  // expected-error @+1 {{'nn.reduce_sum' op failed to infer returned types}}
  %0 = nn.reduce_sum %x dims = [2] : tensor<4x8xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that a negative reduced dimension is rejected (no counting from the end).
func.func @dim_negative(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{reduced dimension -1 is out of range for rank 2}}
  // expected-error @+1 {{'nn.reduce_max' op failed to infer returned types}}
  %0 = nn.reduce_max %x dims = [-1] : tensor<4x8xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that a reduced dimension may be listed only once.
func.func @dim_twice(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{reduced dimension 1 is listed twice}}
  // expected-error @+1 {{'nn.reduce_mean' op failed to infer returned types}}
  %0 = nn.reduce_mean %x dims = [1, 1] : tensor<4x8xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that any dimension of a rank-0 tensor is out of range.
func.func @dim_of_scalar(%x: tensor<f32>) -> tensor<f32> {
  // expected-error @+2 {{reduced dimension 0 is out of range for rank 0}}
  // expected-error @+1 {{'nn.reduce_sum' op failed to infer returned types}}
  %0 = nn.reduce_sum %x dims = [0] : tensor<f32> -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that the result must drop the reduced dimension, not another one.
func.func @wrong_result_shape(%x: tensor<4x8xf32>) -> tensor<8xf32> {
  // expected-error @+2 {{'nn.reduce_sum' op inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<8xf32>'}}
  // expected-error @+1 {{'nn.reduce_sum' op failed to infer returned types}}
  %0 = nn.reduce_sum %x dims = [1] : tensor<4x8xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// Tests that keep_dims needs the reduced dimension kept with size 1.
func.func @keep_dims_dropped(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{'nn.reduce_max' op inferred type(s) 'tensor<4x1xf32>' are incompatible with return type(s) of operation 'tensor<4xf32>'}}
  // expected-error @+1 {{'nn.reduce_max' op failed to infer returned types}}
  %0 = nn.reduce_max %x dims = [1] keep_dims : tensor<4x8xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that without keep_dims the reduced dimension must be dropped.
func.func @no_keep_dims_kept(%x: tensor<4x8xf32>) -> tensor<4x1xf32> {
  // expected-error @+2 {{'nn.reduce_mean' op inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<4x1xf32>'}}
  // expected-error @+1 {{'nn.reduce_mean' op failed to infer returned types}}
  %0 = nn.reduce_mean %x dims = [1] : tensor<4x8xf32> -> tensor<4x1xf32>
  return %0 : tensor<4x1xf32>
}

// -----

// Tests that a reduction keeps the element type.
func.func @element_type_change(%x: tensor<4x8xf32>) -> tensor<4xbf16> {
  // expected-error @+2 {{'nn.reduce_sum' op inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<4xbf16>'}}
  // expected-error @+1 {{'nn.reduce_sum' op failed to infer returned types}}
  %0 = nn.reduce_sum %x dims = [1] : tensor<4x8xf32> -> tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

// Tests that nn.reduce_mean rejects integer tensors.
func.func @mean_i32(%x: tensor<4x8xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'nn.reduce_mean' op needs a float tensor, not 'tensor<4x8xi32>'}}
  %0 = nn.reduce_mean %x dims = [1] : tensor<4x8xi32> -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// Tests that reductions reject a dynamically shaped operand.
func.func @dynamic_operand(%x: tensor<?x4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.reduce_sum' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float or 32-bit signless integer or 64-bit signless integer values without encoding, but got 'tensor<?x4xf32>'}}
  %0 = nn.reduce_sum %x dims = [0] : tensor<?x4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that reductions reject a dynamically shaped result.
func.func @dynamic_result(%x: tensor<4x8xf32>) -> tensor<?xf32> {
  // expected-error @+1 {{'nn.reduce_max' op result #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float or 32-bit signless integer or 64-bit signless integer values without encoding, but got 'tensor<?xf32>'}}
  %0 = "nn.reduce_max"(%x) {dims = array<i64: 0>} : (tensor<4x8xf32>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

// Tests that reductions reject an element type outside the allowed set.
func.func @i8_operand(%x: tensor<4x8xi8>) -> tensor<4xi8> {
  // expected-error @+1 {{'nn.reduce_max' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float or 32-bit signless integer or 64-bit signless integer values without encoding, but got 'tensor<4x8xi8>'}}
  %0 = nn.reduce_max %x dims = [1] : tensor<4x8xi8> -> tensor<4xi8>
  return %0 : tensor<4xi8>
}

// -----

// Tests that the generic form needs the dims attribute.
func.func @missing_dims_attr(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.reduce_sum' op requires attribute 'dims'}}
  %0 = "nn.reduce_sum"(%x) : (tensor<4x8xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that the custom form needs the `dims =` keyword (malformed text).
func.func @missing_dims_keyword(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{custom op 'nn.reduce_sum' expected 'dims'}}
  %0 = nn.reduce_sum %x [1] : tensor<4x8xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that a tensor with an encoding is rejected (inference would drop it).
func.func @encoded_operand(%x: tensor<4xf32, "enc">) -> tensor<f32> {
  // expected-error @+1 {{values without encoding, but got 'tensor<4xf32, "enc">'}}
  %0 = nn.reduce_sum %x dims = [0] : tensor<4xf32, "enc"> -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that only a 16-bit sum may be written in f32: not an f32 one in
// bf16, nor a 16-bit mean or max (their widening stays a cast).
func.func @narrowed_sum(%x: tensor<4x8xf32>) -> tensor<8xbf16> {
  // expected-error @+2 {{'nn.reduce_sum' op inferred type(s) 'tensor<8xf32>' are incompatible with return type(s) of operation 'tensor<8xbf16>'}}
  // expected-error @+1 {{'nn.reduce_sum' op failed to infer returned types}}
  %0 = nn.reduce_sum %x dims = [0] : tensor<4x8xf32> -> tensor<8xbf16>
  return %0 : tensor<8xbf16>
}

// -----

func.func @widened_mean(%x: tensor<4x8xbf16>) -> tensor<8xf32> {
  // expected-error @+2 {{'nn.reduce_mean' op inferred type(s) 'tensor<8xbf16>' are incompatible with return type(s) of operation 'tensor<8xf32>'}}
  // expected-error @+1 {{'nn.reduce_mean' op failed to infer returned types}}
  %0 = nn.reduce_mean %x dims = [0] : tensor<4x8xbf16> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
