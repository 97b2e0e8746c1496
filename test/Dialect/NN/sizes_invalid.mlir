// RUN: tessel-opt %s --split-input-file --verify-diagnostics

// Tests that a tensor whose byte size wraps int64 (2^62 · 2 f32 = 2^65 bytes)
// is refused where an nn op uses it, not planned as a zero-byte buffer.
func.func @tensor_bytes_overflow(%a: tensor<2305843009213693952x2xf32>) -> tensor<2305843009213693952x2xf32> {
  // expected-error @+1 {{'nn.add' op operand #0 of type 'tensor<2305843009213693952x2xf32>' has a byte size that does not fit in int64}}
  %0 = nn.add %a, %a : tensor<2305843009213693952x2xf32>
  return %0 : tensor<2305843009213693952x2xf32>
}

// -----

// Tests that an element count that wraps int64 is refused too.
func.func @element_count_overflow(%a: tensor<4294967296x4294967296xi32>) -> tensor<4294967296x4294967296xi32> {
  // expected-error @+1 {{'nn.add' op operand #0 of type 'tensor<4294967296x4294967296xi32>' has a byte size that does not fit in int64}}
  %0 = nn.add %a, %a : tensor<4294967296x4294967296xi32>
  return %0 : tensor<4294967296x4294967296xi32>
}

// -----

// Tests that a matmul whose tensors fit but whose flops (2 · 2^63) do not is
// refused rather than costed as a negative number.
func.func @matmul_flops_overflow(%a: tensor<2097152x2097152xf32>, %b: tensor<2097152x2097152xf32>) -> tensor<2097152x2097152xf32> {
  // expected-error @+1 {{'nn.matmul' op flop count does not fit in int64}}
  %0 = nn.matmul %a, %b : (tensor<2097152x2097152xf32>, tensor<2097152x2097152xf32>) -> tensor<2097152x2097152xf32>
  return %0 : tensor<2097152x2097152xf32>
}

// -----

// Tests that an elementwise flop count (5 per element of 2^61 f16) past
// int64 is refused.
func.func @softmax_flops_overflow(%a: tensor<2305843009213693952xf16>) -> tensor<2305843009213693952xf16> {
  // expected-error @+1 {{'nn.softmax' op flop count does not fit in int64}}
  %0 = nn.softmax %a : tensor<2305843009213693952xf16>
  return %0 : tensor<2305843009213693952xf16>
}

// -----

// Tests that bytes read plus written (3 · 2^62) past int64 are refused.
func.func @bytes_accessed_overflow(%a: tensor<1152921504606846976xf32>) -> tensor<1152921504606846976xf32> {
  // expected-error @+1 {{'nn.add' op bytes accessed (operands plus results) do not fit in int64}}
  %0 = nn.add %a, %a : tensor<1152921504606846976xf32>
  return %0 : tensor<1152921504606846976xf32>
}
