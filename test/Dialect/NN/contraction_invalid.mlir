// RUN: tessel-opt %s --split-input-file --verify-diagnostics

// Tests that matmul rejects an operand of rank below 2.
func.func @matmul_rank_1(%a: tensor<8xf32>, %b: tensor<8x16xf32>) -> tensor<16xf32> {
  // expected-error @+2 {{operands must have rank >= 2, got 'tensor<8xf32>' and 'tensor<8x16xf32>'}}
  // expected-error @+1 {{'nn.matmul' op failed to infer returned types}}
  %0 = nn.matmul %a, %b : (tensor<8xf32>, tensor<8x16xf32>) -> tensor<16xf32>
  return %0 : tensor<16xf32>
}

// -----

// Tests that matmul rejects operands of different element types.
func.func @matmul_element_types(%a: tensor<4x8xf32>, %b: tensor<8x16xbf16>) -> tensor<4x16xf32> {
  // expected-error @+2 {{operand element types differ: 'f32' and 'bf16'}}
  // expected-error @+1 {{'nn.matmul' op failed to infer returned types}}
  %0 = nn.matmul %a, %b : (tensor<4x8xf32>, tensor<8x16xbf16>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// Tests that matmul rejects an rhs of higher rank than a matrix lhs.
func.func @matmul_rhs_rank(%a: tensor<4x8xf32>, %b: tensor<2x8x16xf32>) -> tensor<2x4x16xf32> {
  // expected-error @+2 {{rhs must be a matrix or have the rank of lhs (2), got 'tensor<2x8x16xf32>'}}
  // expected-error @+1 {{'nn.matmul' op failed to infer returned types}}
  %0 = nn.matmul %a, %b : (tensor<4x8xf32>, tensor<2x8x16xf32>) -> tensor<2x4x16xf32>
  return %0 : tensor<2x4x16xf32>
}

// -----

// Tests that a batched rhs of another batched rank than lhs is rejected.
func.func @matmul_batch_rank(%a: tensor<2x3x4x8xf32>, %b: tensor<3x8x16xf32>) -> tensor<2x3x4x16xf32> {
  // expected-error @+2 {{rhs must be a matrix or have the rank of lhs (4), got 'tensor<3x8x16xf32>'}}
  // expected-error @+1 {{'nn.matmul' op failed to infer returned types}}
  %0 = nn.matmul %a, %b : (tensor<2x3x4x8xf32>, tensor<3x8x16xf32>) -> tensor<2x3x4x16xf32>
  return %0 : tensor<2x3x4x16xf32>
}

// -----

// Tests that sum_batch takes only the rows form: lhs transposed, rhs not,
// both batched alike.
func.func @matmul_sum_batch_not_transposed(%a: tensor<2x4x8xf32>, %b: tensor<2x8x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+2 {{sum_batch needs the rows form: transpose_lhs, no transpose_rhs and both operands batched alike, got 'tensor<2x4x8xf32>' and 'tensor<2x8x16xf32>'}}
  // expected-error @+1 {{'nn.matmul' op failed to infer returned types}}
  %0 = nn.matmul %a, %b sum_batch : (tensor<2x4x8xf32>, tensor<2x8x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

func.func @matmul_sum_batch_shared_rhs(%a: tensor<2x8x4xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+2 {{sum_batch needs the rows form: transpose_lhs, no transpose_rhs and both operands batched alike, got 'tensor<2x8x4xf32>' and 'tensor<8x16xf32>'}}
  // expected-error @+1 {{'nn.matmul' op failed to infer returned types}}
  %0 = nn.matmul %a, %b transpose_lhs sum_batch : (tensor<2x8x4xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

func.func @matmul_sum_batch_matrix(%a: tensor<8x4xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+2 {{sum_batch needs the rows form: transpose_lhs, no transpose_rhs and both operands batched alike, got 'tensor<8x4xf32>' and 'tensor<8x16xf32>'}}
  // expected-error @+1 {{'nn.matmul' op failed to infer returned types}}
  %0 = nn.matmul %a, %b transpose_lhs sum_batch : (tensor<8x4xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

func.func @matmul_sum_batch_transposed_rhs(%a: tensor<2x8x4xf32>, %b: tensor<2x16x8xf32>) -> tensor<4x16xf32> {
  // expected-error @+2 {{sum_batch needs the rows form: transpose_lhs, no transpose_rhs and both operands batched alike, got 'tensor<2x8x4xf32>' and 'tensor<2x16x8xf32>'}}
  // expected-error @+1 {{'nn.matmul' op failed to infer returned types}}
  %0 = nn.matmul %a, %b transpose_lhs transpose_rhs sum_batch : (tensor<2x8x4xf32>, tensor<2x16x8xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// Tests that matmul rejects a batched rhs whose batch dimensions differ from lhs's.
func.func @matmul_batch_dims(%a: tensor<2x4x8xf32>, %b: tensor<3x8x16xf32>) -> tensor<2x4x16xf32> {
  // expected-error @+2 {{batch dimensions differ: lhs 'tensor<2x4x8xf32>' and rhs 'tensor<3x8x16xf32>'}}
  // expected-error @+1 {{'nn.matmul' op failed to infer returned types}}
  %0 = nn.matmul %a, %b : (tensor<2x4x8xf32>, tensor<3x8x16xf32>) -> tensor<2x4x16xf32>
  return %0 : tensor<2x4x16xf32>
}

// -----

// Tests that matmul rejects different contracting dimensions.
func.func @matmul_contracting(%a: tensor<4x8xf32>, %b: tensor<6x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+2 {{contracting dimensions differ: lhs has K = 8, rhs has K = 6}}
  // expected-error @+1 {{'nn.matmul' op failed to infer returned types}}
  %0 = nn.matmul %a, %b : (tensor<4x8xf32>, tensor<6x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// Tests that transpose_rhs moves K to rhs's last dimension, so an untransposed [K, N] rhs no longer fits.
func.func @matmul_transpose_rhs_contracting(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x8xf32> {
  // expected-error @+2 {{contracting dimensions differ: lhs has K = 8, rhs has K = 16}}
  // expected-error @+1 {{'nn.matmul' op failed to infer returned types}}
  %0 = nn.matmul %a, %b transpose_rhs : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that transpose_lhs moves K to lhs's second-to-last dimension.
func.func @matmul_transpose_lhs_contracting(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+2 {{contracting dimensions differ: lhs has K = 4, rhs has K = 8}}
  // expected-error @+1 {{'nn.matmul' op failed to infer returned types}}
  %0 = nn.matmul %a, %b transpose_lhs : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// Tests that matmul rejects a declared result type other than the inferred one.
func.func @matmul_result_type(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x8xf32> {
  // expected-error @+2 {{'nn.matmul' op inferred type(s) 'tensor<4x16xf32>' are incompatible with return type(s) of operation 'tensor<4x8xf32>'}}
  // expected-error @+1 {{'nn.matmul' op failed to infer returned types}}
  %0 = nn.matmul %a, %b : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that matmul rejects integer operands.
func.func @matmul_integer(%a: tensor<4x8xi32>, %b: tensor<8x16xi32>) -> tensor<4x16xi32> {
  // expected-error @+1 {{'nn.matmul' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values without encoding, but got 'tensor<4x8xi32>'}}
  %0 = nn.matmul %a, %b : (tensor<4x8xi32>, tensor<8x16xi32>) -> tensor<4x16xi32>
  return %0 : tensor<4x16xi32>
}

// -----

// Tests that matmul rejects a dynamically shaped operand.
func.func @matmul_dynamic(%a: tensor<4x8xf32>, %b: tensor<?x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'nn.matmul' op operand #1 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values without encoding, but got 'tensor<?x16xf32>'}}
  %0 = nn.matmul %a, %b : (tensor<4x8xf32>, tensor<?x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// Tests that embedding rejects a table that is not [vocab, hidden].
func.func @embedding_table_rank(%t: tensor<100x16x2xf32>, %i: tensor<8xi32>) -> tensor<8x16xf32> {
  // expected-error @+2 {{table must be [vocab, hidden], got 'tensor<100x16x2xf32>'}}
  // expected-error @+1 {{'nn.embedding' op failed to infer returned types}}
  %0 = nn.embedding %t, %i : (tensor<100x16x2xf32>, tensor<8xi32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// Tests that embedding rejects a declared result without the hidden dimension.
func.func @embedding_result_type(%t: tensor<100x16xf32>, %i: tensor<8xi32>) -> tensor<8xf32> {
  // expected-error @+2 {{'nn.embedding' op inferred type(s) 'tensor<8x16xf32>' are incompatible with return type(s) of operation 'tensor<8xf32>'}}
  // expected-error @+1 {{'nn.embedding' op failed to infer returned types}}
  %0 = nn.embedding %t, %i : (tensor<100x16xf32>, tensor<8xi32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// Tests that embedding rejects float ids.
func.func @embedding_float_ids(%t: tensor<100x16xf32>, %i: tensor<8xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'nn.embedding' op operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values without encoding, but got 'tensor<8xf32>'}}
  %0 = nn.embedding %t, %i : (tensor<100x16xf32>, tensor<8xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// Tests that embedding rejects ids of another integer width than i32 and i64.
func.func @embedding_i16_ids(%t: tensor<100x16xf32>, %i: tensor<8xi16>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'nn.embedding' op operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values without encoding, but got 'tensor<8xi16>'}}
  %0 = nn.embedding %t, %i : (tensor<100x16xf32>, tensor<8xi16>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// Tests that attention rejects a query that is not rank 4.
func.func @attention_query_rank(%q: tensor<2x8x64xf32>, %k: tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32> {
  // expected-error @+2 {{query must be [batch, seq, heads, head_dim], got 'tensor<2x8x64xf32>'}}
  // expected-error @+1 {{'nn.attention' op failed to infer returned types}}
  %0 = nn.attention %q, %k, %k : (tensor<2x8x64xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32>
  return %0 : tensor<2x8x4x16xf32>
}

// -----

// Tests that attention rejects a key that is not rank 4.
func.func @attention_key_rank(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x64xf32>) -> tensor<2x8x4x16xf32> {
  // expected-error @+2 {{key must be [batch, seq, heads, head_dim], got 'tensor<2x8x64xf32>'}}
  // expected-error @+1 {{'nn.attention' op failed to infer returned types}}
  %0 = nn.attention %q, %k, %q : (tensor<2x8x4x16xf32>, tensor<2x8x64xf32>, tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32>
  return %0 : tensor<2x8x4x16xf32>
}

// -----

// Tests that attention rejects a value that is not rank 4.
func.func @attention_value_rank(%q: tensor<2x8x4x16xf32>, %v: tensor<2x8x4x16x1xf32>) -> tensor<2x8x4x16xf32> {
  // expected-error @+2 {{value must be [batch, seq, heads, head_dim], got 'tensor<2x8x4x16x1xf32>'}}
  // expected-error @+1 {{'nn.attention' op failed to infer returned types}}
  %0 = nn.attention %q, %q, %v : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16x1xf32>) -> tensor<2x8x4x16xf32>
  return %0 : tensor<2x8x4x16xf32>
}

// -----

// Tests that attention rejects key and value of another element type than the query.
func.func @attention_element_types(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x4x16xbf16>) -> tensor<2x8x4x16xf32> {
  // expected-error @+2 {{query, key and value element types differ}}
  // expected-error @+1 {{'nn.attention' op failed to infer returned types}}
  %0 = nn.attention %q, %k, %k : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xbf16>, tensor<2x8x4x16xbf16>) -> tensor<2x8x4x16xf32>
  return %0 : tensor<2x8x4x16xf32>
}

// -----

// Tests that attention rejects different batch sizes.
func.func @attention_batch(%q: tensor<2x8x4x16xf32>, %k: tensor<3x8x4x16xf32>) -> tensor<2x8x4x16xf32> {
  // expected-error @+2 {{batch sizes differ: query 2, key 3, value 3}}
  // expected-error @+1 {{'nn.attention' op failed to infer returned types}}
  %0 = nn.attention %q, %k, %k : (tensor<2x8x4x16xf32>, tensor<3x8x4x16xf32>, tensor<3x8x4x16xf32>) -> tensor<2x8x4x16xf32>
  return %0 : tensor<2x8x4x16xf32>
}

// -----

// Tests that attention rejects a value whose sequence length differs from the key's.
func.func @attention_kv_seq(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x4x16xf32>, %v: tensor<2x6x4x16xf32>) -> tensor<2x8x4x16xf32> {
  // expected-error @+2 {{key 'tensor<2x8x4x16xf32>' and value 'tensor<2x6x4x16xf32>' differ in sequence length or head count}}
  // expected-error @+1 {{'nn.attention' op failed to infer returned types}}
  %0 = nn.attention %q, %k, %v : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x6x4x16xf32>) -> tensor<2x8x4x16xf32>
  return %0 : tensor<2x8x4x16xf32>
}

// -----

// Tests that attention rejects a value whose head count differs from the key's.
func.func @attention_kv_heads(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x2x16xf32>, %v: tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32> {
  // expected-error @+2 {{key 'tensor<2x8x2x16xf32>' and value 'tensor<2x8x4x16xf32>' differ in sequence length or head count}}
  // expected-error @+1 {{'nn.attention' op failed to infer returned types}}
  %0 = nn.attention %q, %k, %v : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32>
  return %0 : tensor<2x8x4x16xf32>
}

// -----

// Tests that attention rejects a key head_dim other than the query's.
func.func @attention_head_dim(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x4x8xf32>, %v: tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32> {
  // expected-error @+2 {{query head_dim 16 differs from key head_dim 8}}
  // expected-error @+1 {{'nn.attention' op failed to infer returned types}}
  %0 = nn.attention %q, %k, %v : (tensor<2x8x4x16xf32>, tensor<2x8x4x8xf32>, tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32>
  return %0 : tensor<2x8x4x16xf32>
}

// -----

// Tests that grouped-query attention needs the key/value heads to divide the query heads.
func.func @attention_gqa_divides(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x3x16xf32>) -> tensor<2x8x4x16xf32> {
  // expected-error @+2 {{key/value heads (3) must divide query heads (4)}}
  // expected-error @+1 {{'nn.attention' op failed to infer returned types}}
  %0 = nn.attention %q, %k, %k : (tensor<2x8x4x16xf32>, tensor<2x8x3x16xf32>, tensor<2x8x3x16xf32>) -> tensor<2x8x4x16xf32>
  return %0 : tensor<2x8x4x16xf32>
}

// -----

// Tests that zero key/value heads are rejected rather than dividing by zero.
func.func @attention_zero_kv_heads(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x0x16xf32>) -> tensor<2x8x4x16xf32> {
  // expected-error @+2 {{key/value heads (0) must divide query heads (4)}}
  // expected-error @+1 {{'nn.attention' op failed to infer returned types}}
  %0 = nn.attention %q, %k, %k : (tensor<2x8x4x16xf32>, tensor<2x8x0x16xf32>, tensor<2x8x0x16xf32>) -> tensor<2x8x4x16xf32>
  return %0 : tensor<2x8x4x16xf32>
}

// -----

// Tests that causal attention needs equal query and key lengths.
func.func @attention_causal_lengths(%q: tensor<2x8x4x16xf32>, %k: tensor<2x12x4x16xf32>) -> tensor<2x8x4x16xf32> {
  // expected-error @+2 {{causal attention needs equal query and key lengths, got 8 and 12}}
  // expected-error @+1 {{'nn.attention' op failed to infer returned types}}
  %0 = nn.attention %q, %k, %k causal : (tensor<2x8x4x16xf32>, tensor<2x12x4x16xf32>, tensor<2x12x4x16xf32>) -> tensor<2x8x4x16xf32>
  return %0 : tensor<2x8x4x16xf32>
}

// -----

// Tests that attention rejects a declared result whose last dimension is not the value's.
func.func @attention_result_type(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x4x16xf32>, %v: tensor<2x8x4x32xf32>) -> tensor<2x8x4x16xf32> {
  // expected-error @+2 {{'nn.attention' op inferred type(s) 'tensor<2x8x4x32xf32>' are incompatible with return type(s) of operation 'tensor<2x8x4x16xf32>'}}
  // expected-error @+1 {{'nn.attention' op failed to infer returned types}}
  %0 = nn.attention %q, %k, %v : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x32xf32>) -> tensor<2x8x4x16xf32>
  return %0 : tensor<2x8x4x16xf32>
}

// -----

// Tests that attention rejects a negative scale.
func.func @attention_negative_scale(%q: tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32> {
  // expected-error @+1 {{'nn.attention' op scale must be positive, got -5.000000e-01}}
  %0 = nn.attention %q, %q, %q {scale = -0.5 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32>
  return %0 : tensor<2x8x4x16xf32>
}

// -----

// Tests that attention rejects a zero scale.
func.func @attention_zero_scale(%q: tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32> {
  // expected-error @+1 {{'nn.attention' op scale must be positive, got 0.000000e+00}}
  %0 = nn.attention %q, %q, %q {scale = 0.0 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32>
  return %0 : tensor<2x8x4x16xf32>
}

// -----

// Tests that attention rejects a scale that is not an f64 attribute.
func.func @attention_integer_scale(%q: tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32> {
  // expected-error @+1 {{'nn.attention' op attribute 'scale' failed to satisfy constraint: 64-bit float attribute}}
  %0 = nn.attention %q, %q, %q {scale = 1 : i64} : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32>
  return %0 : tensor<2x8x4x16xf32>
}

// -----

// Tests that matmul_accumulate rejects an accumulator of another shape than
// the product.
func.func @matmul_accumulate_shape(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %g: tensor<16x4xf32>) -> tensor<16x4xf32> {
  // expected-error @+1 {{'nn.matmul_accumulate' op accumulator 'tensor<16x4xf32>' must have the product's type 'tensor<4x16xf32>' (or its shape in f32 for 16-bit operands)}}
  %0 = nn.matmul_accumulate %a, %b outs(%g) : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<16x4xf32>
  return %0 : tensor<16x4xf32>
}

// -----

// Tests that matmul_accumulate checks its factors as matmul does.
func.func @matmul_accumulate_k(%a: tensor<4x8xf32>, %b: tensor<9x16xf32>, %g: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{contracting dimensions differ: lhs has K = 8, rhs has K = 9}}
  %0 = nn.matmul_accumulate %a, %b outs(%g) : (tensor<4x8xf32>, tensor<9x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// Tests that matmul_accumulate's result is its accumulator's type.
func.func @matmul_accumulate_result(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %g: tensor<4x16xf32>) -> tensor<4x16xf64> {
  // expected-error @+1 {{'nn.matmul_accumulate' op result 'tensor<4x16xf64>' must have the accumulator's type 'tensor<4x16xf32>'}}
  %0 = nn.matmul_accumulate %a, %b outs(%g) : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf64>
  return %0 : tensor<4x16xf64>
}

// -----

// Tests that matmul_bias rejects a bias that is not a vector of the
// product's last dimension.
func.func @matmul_bias_length(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %bias: tensor<4xf32>) -> tensor<4x16xf32> {
  // expected-error @+2 {{bias must be 'tensor<16xf32>' (the product's last dimension), got 'tensor<4xf32>'}}
  // expected-error @+1 {{'nn.matmul_bias' op failed to infer returned types}}
  %0 = nn.matmul_bias %a, %b, %bias : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<4xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// Tests that matmul_bias rejects a bias of another element type.
func.func @matmul_bias_type(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %bias: tensor<16xf64>) -> tensor<4x16xf32> {
  // expected-error @+2 {{bias must be 'tensor<16xf32>' (the product's last dimension), got 'tensor<16xf64>'}}
  // expected-error @+1 {{'nn.matmul_bias' op failed to infer returned types}}
  %0 = nn.matmul_bias %a, %b, %bias : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf64>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// Tests that matmul_bias_gelu checks its bias as matmul_bias does.
func.func @matmul_bias_gelu_bias(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %bias: tensor<8xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  // expected-error @+2 {{bias must be 'tensor<16xf32>' (the product's last dimension), got 'tensor<8xf32>'}}
  // expected-error @+1 {{'nn.matmul_bias_gelu' op failed to infer returned types}}
  %y, %pre = nn.matmul_bias_gelu %a, %b, %bias : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<8xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>)
  return %y, %pre : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Tests that matmul_bias_gelu checks its factors as matmul does.
func.func @matmul_bias_gelu_k(%a: tensor<4x8xf32>, %b: tensor<9x16xf32>, %bias: tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  // expected-error @+2 {{contracting dimensions differ: lhs has K = 8, rhs has K = 9}}
  // expected-error @+1 {{'nn.matmul_bias_gelu' op failed to infer returned types}}
  %y, %pre = nn.matmul_bias_gelu %a, %b, %bias : (tensor<4x8xf32>, tensor<9x16xf32>, tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>)
  return %y, %pre : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Tests that matmul_gelu_grad rejects a GELU input of another shape than
// the product.
func.func @matmul_gelu_grad_pre(%dy: tensor<4x8xf32>, %w: tensor<8x16xf32>, %pre: tensor<16x4xf32>) -> tensor<4x16xf32> {
  // expected-error @+2 {{pre must have the product's type 'tensor<4x16xf32>', got 'tensor<16x4xf32>'}}
  // expected-error @+1 {{'nn.matmul_gelu_grad' op failed to infer returned types}}
  %0 = nn.matmul_gelu_grad %dy, %w, %pre : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// Tests that matmul_gelu_grad's GELU input has the product's element type.
func.func @matmul_gelu_grad_dtype(%dy: tensor<4x8xbf16>, %w: tensor<8x16xbf16>, %pre: tensor<4x16xf32>) -> tensor<4x16xbf16> {
  // expected-error @+2 {{pre must have the product's type 'tensor<4x16xbf16>', got 'tensor<4x16xf32>'}}
  // expected-error @+1 {{'nn.matmul_gelu_grad' op failed to infer returned types}}
  %0 = nn.matmul_gelu_grad %dy, %w, %pre : (tensor<4x8xbf16>, tensor<8x16xbf16>, tensor<4x16xf32>) -> tensor<4x16xbf16>
  return %0 : tensor<4x16xbf16>
}

// -----

// Tests that matmul_bias_grad is one GEMM: batched operands are refused.
func.func @matmul_bias_grad_batched(%x: tensor<2x4x8xf32>, %dy: tensor<2x4x16xf32>) -> (tensor<2x8x16xf32>, tensor<16xf32>) {
  // expected-error @+2 {{operands must be matrices (one GEMM), got 'tensor<2x4x8xf32>' and 'tensor<2x4x16xf32>'}}
  // expected-error @+1 {{'nn.matmul_bias_grad' op failed to infer returned types}}
  %dw, %db = nn.matmul_bias_grad %x, %dy transpose_lhs : (tensor<2x4x8xf32>, tensor<2x4x16xf32>) -> (tensor<2x8x16xf32>, tensor<16xf32>)
  return %dw, %db : tensor<2x8x16xf32>, tensor<16xf32>
}

// -----

// Tests that matmul_bias_grad checks its factors as matmul does.
func.func @matmul_bias_grad_k(%x: tensor<4x8xf32>, %dy: tensor<5x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>) {
  // expected-error @+2 {{contracting dimensions differ: lhs has K = 4, rhs has K = 5}}
  // expected-error @+1 {{'nn.matmul_bias_grad' op failed to infer returned types}}
  %dw, %db = nn.matmul_bias_grad %x, %dy transpose_lhs : (tensor<4x8xf32>, tensor<5x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>)
  return %dw, %db : tensor<8x16xf32>, tensor<16xf32>
}

// -----

// Tests that attention with lse rejects a declared log-sum-exp in the query's 16-bit type (it is f32).
func.func @attention_lse_type(%q: tensor<2x8x4x16xbf16>) -> tensor<2x4x8xbf16> {
  // expected-error @+2 {{'nn.attention' op inferred type(s) 'tensor<2x8x4x16xbf16>', 'tensor<2x4x8xf32>' are incompatible with return type(s) of operation 'tensor<2x8x4x16xbf16>', 'tensor<2x4x8xbf16>'}}
  // expected-error @+1 {{'nn.attention' op failed to infer returned types}}
  %0, %1 = nn.attention %q, %q, %q lse : (tensor<2x8x4x16xbf16>, tensor<2x8x4x16xbf16>, tensor<2x8x4x16xbf16>) -> (tensor<2x8x4x16xbf16>, tensor<2x4x8xbf16>)
  return %1 : tensor<2x4x8xbf16>
}

// -----

// Tests that attention without lse rejects a second result.
func.func @attention_lse_missing(%q: tensor<2x8x4x16xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+2 {{'nn.attention' op inferred type(s) 'tensor<2x8x4x16xf32>' are incompatible with return type(s) of operation 'tensor<2x8x4x16xf32>', 'tensor<2x4x8xf32>'}}
  // expected-error @+1 {{'nn.attention' op failed to infer returned types}}
  %0, %1 = nn.attention %q, %q, %q : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
  return %1 : tensor<2x4x8xf32>
}

// -----

// Tests that matmul_bias_grad's accumulator has the product's type.
func.func @matmul_bias_grad_acc(%x: tensor<4x8xf32>, %dy: tensor<4x16xf32>, %g: tensor<16x8xf32>) -> (tensor<8x16xf32>, tensor<16xf32>) {
  // expected-error @+1 {{'nn.matmul_bias_grad' op accumulator 'tensor<16x8xf32>' must have the product's type 'tensor<8x16xf32>' (or its shape in f32 for 16-bit operands)}}
  %dw, %db = nn.matmul_bias_grad %x, %dy transpose_lhs outs(%g) : (tensor<4x8xf32>, tensor<4x16xf32>, tensor<16x8xf32>) -> (tensor<8x16xf32>, tensor<16xf32>)
  return %dw, %db : tensor<8x16xf32>, tensor<16xf32>
}

// -----

// Tests that only a 16-bit product accumulates into f32: an f16
// accumulator of a bf16 product is refused.
func.func @matmul_accumulate_narrow(%a: tensor<4x8xbf16>, %b: tensor<8x16xbf16>, %g: tensor<4x16xf16>) -> tensor<4x16xf16> {
  // expected-error @+1 {{'nn.matmul_accumulate' op accumulator 'tensor<4x16xf16>' must have the product's type 'tensor<4x16xbf16>' (or its shape in f32 for 16-bit operands)}}
  %0 = nn.matmul_accumulate %a, %b outs(%g) : (tensor<4x8xbf16>, tensor<8x16xbf16>, tensor<4x16xf16>) -> tensor<4x16xf16>
  return %0 : tensor<4x16xf16>
}

// -----

// Tests that matmul_f32 widens 16-bit products only.
func.func @matmul_f32_of_f32(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+2 {{operands must be f16 or bf16 (the product is widened to f32), got 'tensor<4x8xf32>'}}
  // expected-error @+1 {{'nn.matmul_f32' op failed to infer returned types}}
  %0 = nn.matmul_f32 %a, %b : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// Tests that matmul_f32's result is the product in f32, not in 16 bits.
func.func @matmul_f32_result(%a: tensor<4x8xbf16>, %b: tensor<8x16xbf16>) -> tensor<4x16xbf16> {
  // expected-error @+2 {{'nn.matmul_f32' op inferred type(s) 'tensor<4x16xf32>' are incompatible with return type(s) of operation 'tensor<4x16xbf16>'}}
  // expected-error @+1 {{'nn.matmul_f32' op failed to infer returned types}}
  %0 = nn.matmul_f32 %a, %b : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>
  return %0 : tensor<4x16xbf16>
}

// -----

// Tests that matmul_f32 checks its factors as matmul does.
func.func @matmul_f32_k(%a: tensor<4x8xbf16>, %b: tensor<9x16xbf16>) -> tensor<4x16xf32> {
  // expected-error @+2 {{contracting dimensions differ: lhs has K = 8, rhs has K = 9}}
  // expected-error @+1 {{'nn.matmul_f32' op failed to infer returned types}}
  %0 = nn.matmul_f32 %a, %b : (tensor<4x8xbf16>, tensor<9x16xbf16>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// Tests that matmul_bias_grad writes both results in one type: an f32
// product beside a 16-bit bias gradient is refused.
func.func @matmul_bias_grad_half_widened(%x: tensor<4x8xbf16>, %dy: tensor<4x16xbf16>) -> (tensor<8x16xf32>, tensor<16xbf16>) {
  // expected-error @+2 {{'nn.matmul_bias_grad' op inferred type(s) 'tensor<8x16xbf16>', 'tensor<16xbf16>' are incompatible with return type(s) of operation 'tensor<8x16xf32>', 'tensor<16xbf16>'}}
  // expected-error @+1 {{'nn.matmul_bias_grad' op failed to infer returned types}}
  %dw, %db = nn.matmul_bias_grad %x, %dy transpose_lhs : (tensor<4x8xbf16>, tensor<4x16xbf16>) -> (tensor<8x16xf32>, tensor<16xbf16>)
  return %dw, %db : tensor<8x16xf32>, tensor<16xbf16>
}

// -----

// Tests that an f32 matmul_bias_grad has no wider results.
func.func @matmul_bias_grad_f64(%x: tensor<4x8xf32>, %dy: tensor<4x16xf32>) -> (tensor<8x16xf64>, tensor<16xf64>) {
  // expected-error @+2 {{'nn.matmul_bias_grad' op inferred type(s) 'tensor<8x16xf32>', 'tensor<16xf32>' are incompatible with return type(s) of operation 'tensor<8x16xf64>', 'tensor<16xf64>'}}
  // expected-error @+1 {{'nn.matmul_bias_grad' op failed to infer returned types}}
  %dw, %db = nn.matmul_bias_grad %x, %dy transpose_lhs : (tensor<4x8xf32>, tensor<4x16xf32>) -> (tensor<8x16xf64>, tensor<16xf64>)
  return %dw, %db : tensor<8x16xf64>, tensor<16xf64>
}

// -----

// Tests that attention rejects a window without the causal mask.
func.func @attention_window_not_causal(%q: tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32> {
  // expected-error @+1 {{'nn.attention' op window 4 needs the causal mask (a sliding window of past keys)}}
  %0 = nn.attention %q, %q, %q window 4 : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32>
  return %0 : tensor<2x8x4x16xf32>
}

// -----

// Tests that attention rejects an empty window.
func.func @attention_window_zero(%q: tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32> {
  // expected-error @+1 {{'nn.attention' op window must be positive, got 0}}
  %0 = nn.attention %q, %q, %q causal window 0 : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32>
  return %0 : tensor<2x8x4x16xf32>
}

// -----

// Tests that attention takes a window or per-layer windows, not both.
func.func @attention_window_and_layer_windows(%q: tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32> {
  // expected-error @+1 {{'nn.attention' op has a window and layer_windows: give one}}
  %0 = nn.attention %q, %q, %q causal window 4 {layer_windows = array<i64: 4, 0>} : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32>
  return %0 : tensor<2x8x4x16xf32>
}

// -----

// Tests that a layer's window is 0 (none) or positive.
func.func @attention_layer_window_negative(%q: tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32> {
  // expected-error @+1 {{'nn.attention' op layer_windows[1] is -2; a window is >= 0 (0: none)}}
  %0 = nn.attention %q, %q, %q causal {layer_windows = array<i64: 4, -2>} : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32>
  return %0 : tensor<2x8x4x16xf32>
}

// -----

// Tests that a layer's window needs the causal mask.
func.func @attention_layer_window_not_causal(%q: tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32> {
  // expected-error @+1 {{'nn.attention' op layer_windows[0] = 4 needs the causal mask (a sliding window of past keys)}}
  %0 = nn.attention %q, %q, %q {layer_windows = array<i64: 4, 0>} : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32>
  return %0 : tensor<2x8x4x16xf32>
}

// -----

// Tests that attention's soft cap is positive.
func.func @attention_softcap_zero(%q: tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32> {
  // expected-error @+1 {{'nn.attention' op softcap must be finite and positive, got 0.000000e+00}}
  %0 = nn.attention %q, %q, %q causal softcap 0.0 : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32>
  return %0 : tensor<2x8x4x16xf32>
}

// -----

// Tests that attention's soft cap is finite.
func.func @attention_softcap_inf(%q: tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32> {
  // expected-error @+1 {{'nn.attention' op softcap must be finite and positive, got INF}}
  %0 = nn.attention %q, %q, %q softcap 0x7FF0000000000000 : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32>
  return %0 : tensor<2x8x4x16xf32>
}

// -----

// Tests that a block of the queries (block_axes) needs the causal mask.
func.func @attention_block_not_causal(%q: tensor<2x4x4x16xf32>, %k: tensor<2x8x4x16xf32>) -> tensor<2x4x4x16xf32> {
  // expected-error @+1 {{'nn.attention' op has block_axes without the causal mask: only a causal mask tells a block of the queries from the whole sequence's}}
  %0 = nn.attention %q, %k, %k {block_axes = array<i16: 0>} : (tensor<2x4x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) -> tensor<2x4x4x16xf32>
  return %0 : tensor<2x4x4x16xf32>
}

// -----

// Tests that a causal block of the queries divides the keys' sequence.
func.func @attention_block_uneven(%q: tensor<2x3x4x16xf32>, %k: tensor<2x8x4x16xf32>) -> tensor<2x3x4x16xf32> {
  // expected-error @+2 {{a block of 3 queries does not divide the 8 keys' sequence}}
  // expected-error @+1 {{'nn.attention' op failed to infer returned types}}
  %0 = nn.attention %q, %k, %k causal {block_axes = array<i16: 0>} : (tensor<2x3x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) -> tensor<2x3x4x16xf32>
  return %0 : tensor<2x3x4x16xf32>
}
