// RUN: tessel-opt %s | tessel-opt | FileCheck %s
// RUN: tessel-opt %s --mlir-print-op-generic | tessel-opt | FileCheck %s

// Tests that a plain 2-D matmul [M, K] x [K, N] gives [M, N].
// CHECK-LABEL: func.func @matmul_2d
// CHECK: nn.matmul %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
func.func @matmul_2d(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %0 = nn.matmul %a, %b : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// Tests that a batched lhs shares one rank-2 rhs across its batch dimensions.
// CHECK-LABEL: func.func @matmul_batched_shared_rhs
// CHECK: nn.matmul %{{.*}}, %{{.*}} : (tensor<2x3x4x8xf32>, tensor<8x16xf32>) -> tensor<2x3x4x16xf32>
func.func @matmul_batched_shared_rhs(%a: tensor<2x3x4x8xf32>, %b: tensor<8x16xf32>) -> tensor<2x3x4x16xf32> {
  %0 = nn.matmul %a, %b : (tensor<2x3x4x8xf32>, tensor<8x16xf32>) -> tensor<2x3x4x16xf32>
  return %0 : tensor<2x3x4x16xf32>
}

// Tests that a batched rhs with the lhs's batch dimensions gives a batched product.
// CHECK-LABEL: func.func @matmul_batched_rhs
// CHECK: nn.matmul %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<2x8x16xf32>) -> tensor<2x4x16xf32>
func.func @matmul_batched_rhs(%a: tensor<2x4x8xf32>, %b: tensor<2x8x16xf32>) -> tensor<2x4x16xf32> {
  %0 = nn.matmul %a, %b : (tensor<2x4x8xf32>, tensor<2x8x16xf32>) -> tensor<2x4x16xf32>
  return %0 : tensor<2x4x16xf32>
}

// Tests that transpose_lhs reads lhs as [K, M].
// CHECK-LABEL: func.func @matmul_transpose_lhs
// CHECK: nn.matmul %{{.*}}, %{{.*}} transpose_lhs : (tensor<2x8x4xf32>, tensor<2x8x16xf32>) -> tensor<2x4x16xf32>
func.func @matmul_transpose_lhs(%a: tensor<2x8x4xf32>, %b: tensor<2x8x16xf32>) -> tensor<2x4x16xf32> {
  %0 = nn.matmul %a, %b transpose_lhs : (tensor<2x8x4xf32>, tensor<2x8x16xf32>) -> tensor<2x4x16xf32>
  return %0 : tensor<2x4x16xf32>
}

// Tests that sum_batch sums the rows form over its batch: [..., K, M]ᵀ ·
// [..., K, N] -> [M, N] (a weight gradient over [B, S] rows).
// CHECK-LABEL: func.func @matmul_sum_batch
// CHECK: nn.matmul %{{.*}}, %{{.*}} transpose_lhs sum_batch : (tensor<2x3x8x4xf32>, tensor<2x3x8x16xf32>) -> tensor<4x16xf32>
func.func @matmul_sum_batch(%a: tensor<2x3x8x4xf32>, %b: tensor<2x3x8x16xf32>) -> tensor<4x16xf32> {
  %0 = nn.matmul %a, %b transpose_lhs sum_batch : (tensor<2x3x8x4xf32>, tensor<2x3x8x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// Tests that transpose_rhs reads rhs as [N, K], as in q kᵀ.
// CHECK-LABEL: func.func @matmul_transpose_rhs
// CHECK: nn.matmul %{{.*}}, %{{.*}} transpose_rhs : (tensor<8x64x32xf32>, tensor<8x48x32xf32>) -> tensor<8x64x48xf32>
func.func @matmul_transpose_rhs(%q: tensor<8x64x32xf32>, %k: tensor<8x48x32xf32>) -> tensor<8x64x48xf32> {
  %0 = nn.matmul %q, %k transpose_rhs : (tensor<8x64x32xf32>, tensor<8x48x32xf32>) -> tensor<8x64x48xf32>
  return %0 : tensor<8x64x48xf32>
}

// Tests that a shared rank-2 rhs can be transposed too.
// CHECK-LABEL: func.func @matmul_transpose_shared_rhs
// CHECK: nn.matmul %{{.*}}, %{{.*}} transpose_rhs : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
func.func @matmul_transpose_shared_rhs(%a: tensor<2x4x8xf32>, %b: tensor<16x8xf32>) -> tensor<2x4x16xf32> {
  %0 = nn.matmul %a, %b transpose_rhs : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  return %0 : tensor<2x4x16xf32>
}

// Tests that both transposes together give [M, N] from [K, M] and [N, K].
// CHECK-LABEL: func.func @matmul_transpose_both
// CHECK: nn.matmul %{{.*}}, %{{.*}} transpose_lhs transpose_rhs : (tensor<8x4xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
func.func @matmul_transpose_both(%a: tensor<8x4xf32>, %b: tensor<16x8xf32>) -> tensor<4x16xf32> {
  %0 = nn.matmul %a, %b transpose_lhs transpose_rhs : (tensor<8x4xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// Tests that bf16 operands give a bf16 result.
// CHECK-LABEL: func.func @matmul_bf16
// CHECK: nn.matmul %{{.*}}, %{{.*}} : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>
func.func @matmul_bf16(%a: tensor<4x8xbf16>, %b: tensor<8x16xbf16>) -> tensor<4x16xbf16> {
  %0 = nn.matmul %a, %b : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>
  return %0 : tensor<4x16xbf16>
}

// Tests that 1-D i32 ids give [ids, hidden].
// CHECK-LABEL: func.func @embedding_1d_i32
// CHECK: nn.embedding %{{.*}}, %{{.*}} : (tensor<100x16xf32>, tensor<8xi32>) -> tensor<8x16xf32>
func.func @embedding_1d_i32(%table: tensor<100x16xf32>, %ids: tensor<8xi32>) -> tensor<8x16xf32> {
  %0 = nn.embedding %table, %ids : (tensor<100x16xf32>, tensor<8xi32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// Tests that 2-D i64 ids give [batch, seq, hidden].
// CHECK-LABEL: func.func @embedding_2d_i64
// CHECK: nn.embedding %{{.*}}, %{{.*}} : (tensor<100x16xf32>, tensor<2x8xi64>) -> tensor<2x8x16xf32>
func.func @embedding_2d_i64(%table: tensor<100x16xf32>, %ids: tensor<2x8xi64>) -> tensor<2x8x16xf32> {
  %0 = nn.embedding %table, %ids : (tensor<100x16xf32>, tensor<2x8xi64>) -> tensor<2x8x16xf32>
  return %0 : tensor<2x8x16xf32>
}

// Tests that 2-D i32 ids into a bf16 table give a bf16 result.
// CHECK-LABEL: func.func @embedding_2d_i32_bf16
// CHECK: nn.embedding %{{.*}}, %{{.*}} : (tensor<50x4xbf16>, tensor<3x5xi32>) -> tensor<3x5x4xbf16>
func.func @embedding_2d_i32_bf16(%table: tensor<50x4xbf16>, %ids: tensor<3x5xi32>) -> tensor<3x5x4xbf16> {
  %0 = nn.embedding %table, %ids : (tensor<50x4xbf16>, tensor<3x5xi32>) -> tensor<3x5x4xbf16>
  return %0 : tensor<3x5x4xbf16>
}

// Tests that a single (rank-0) id looks up one row.
// CHECK-LABEL: func.func @embedding_scalar_id
// CHECK: nn.embedding %{{.*}}, %{{.*}} : (tensor<100x16xf32>, tensor<i64>) -> tensor<16xf32>
func.func @embedding_scalar_id(%table: tensor<100x16xf32>, %id: tensor<i64>) -> tensor<16xf32> {
  %0 = nn.embedding %table, %id : (tensor<100x16xf32>, tensor<i64>) -> tensor<16xf32>
  return %0 : tensor<16xf32>
}

// Tests that causal self-attention keeps the query's shape.
// CHECK-LABEL: func.func @attention_causal
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} causal : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32>
func.func @attention_causal(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x4x16xf32>, %v: tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32> {
  %0 = nn.attention %q, %k, %v causal : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32>
  return %0 : tensor<2x8x4x16xf32>
}

// Tests that non-causal attention allows a key length T different from the query length S and a value dimension E different from D.
// CHECK-LABEL: func.func @attention_cross
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x8x4x16xf32>, tensor<2x12x4x16xf32>, tensor<2x12x4x32xf32>) -> tensor<2x8x4x32xf32>
// CHECK-NOT: causal
func.func @attention_cross(%q: tensor<2x8x4x16xf32>, %k: tensor<2x12x4x16xf32>, %v: tensor<2x12x4x32xf32>) -> tensor<2x8x4x32xf32> {
  %0 = nn.attention %q, %k, %v : (tensor<2x8x4x16xf32>, tensor<2x12x4x16xf32>, tensor<2x12x4x32xf32>) -> tensor<2x8x4x32xf32>
  return %0 : tensor<2x8x4x32xf32>
}

// Tests that grouped-query attention accepts fewer key/value heads than query heads.
// CHECK-LABEL: func.func @attention_grouped_query
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} causal : (tensor<2x8x8x16xbf16>, tensor<2x8x2x16xbf16>, tensor<2x8x2x16xbf16>) -> tensor<2x8x8x16xbf16>
func.func @attention_grouped_query(%q: tensor<2x8x8x16xbf16>, %k: tensor<2x8x2x16xbf16>, %v: tensor<2x8x2x16xbf16>) -> tensor<2x8x8x16xbf16> {
  %0 = nn.attention %q, %k, %v causal : (tensor<2x8x8x16xbf16>, tensor<2x8x2x16xbf16>, tensor<2x8x2x16xbf16>) -> tensor<2x8x8x16xbf16>
  return %0 : tensor<2x8x8x16xbf16>
}

// Tests that multi-query attention (one key/value head) is accepted.
// CHECK-LABEL: func.func @attention_multi_query
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} : (tensor<1x4x6x8xf32>, tensor<1x4x1x8xf32>, tensor<1x4x1x8xf32>) -> tensor<1x4x6x8xf32>
func.func @attention_multi_query(%q: tensor<1x4x6x8xf32>, %k: tensor<1x4x1x8xf32>, %v: tensor<1x4x1x8xf32>) -> tensor<1x4x6x8xf32> {
  %0 = nn.attention %q, %k, %v : (tensor<1x4x6x8xf32>, tensor<1x4x1x8xf32>, tensor<1x4x1x8xf32>) -> tensor<1x4x6x8xf32>
  return %0 : tensor<1x4x6x8xf32>
}

// Tests that an explicit scale attribute round-trips, with and without causal.
// CHECK-LABEL: func.func @attention_scale
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} {scale = 1.250000e-01 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32>
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} causal {scale = 5.000000e-01 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32>
func.func @attention_scale(%q: tensor<2x8x4x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) {
  %0 = nn.attention %q, %q, %q {scale = 0.125 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32>
  %1 = nn.attention %q, %q, %q causal {scale = 0.5 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32>
  return %0, %1 : tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>
}

// Tests that attention with `lse` also returns the log-sum-exp per query row, [B, H, S] in f32 for 16-bit inputs and f64 for f64.
// CHECK-LABEL: func.func @attention_lse
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} causal lse : (tensor<2x8x4x16xbf16>, tensor<2x8x2x16xbf16>, tensor<2x8x2x16xbf16>) -> (tensor<2x8x4x16xbf16>, tensor<2x4x8xf32>)
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} lse {scale = 2.500000e-01 : f64} : (tensor<1x3x2x4xf64>, tensor<1x5x2x4xf64>, tensor<1x5x2x4xf64>) -> (tensor<1x3x2x4xf64>, tensor<1x2x3xf64>)
func.func @attention_lse(%q: tensor<2x8x4x16xbf16>, %k: tensor<2x8x2x16xbf16>, %q1: tensor<1x3x2x4xf64>, %k1: tensor<1x5x2x4xf64>) -> (tensor<2x4x8xf32>, tensor<1x2x3xf64>) {
  %0, %1 = nn.attention %q, %k, %k causal lse : (tensor<2x8x4x16xbf16>, tensor<2x8x2x16xbf16>, tensor<2x8x2x16xbf16>) -> (tensor<2x8x4x16xbf16>, tensor<2x4x8xf32>)
  %2, %3 = nn.attention %q1, %k1, %k1 lse {scale = 0.25 : f64} : (tensor<1x3x2x4xf64>, tensor<1x5x2x4xf64>, tensor<1x5x2x4xf64>) -> (tensor<1x3x2x4xf64>, tensor<1x2x3xf64>)
  return %1, %3 : tensor<2x4x8xf32>, tensor<1x2x3xf64>
}

// Tests that causal attention takes a sliding window of keys, with and without lse and an explicit scale.
// CHECK-LABEL: func.func @attention_window
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} causal window 3 : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> tensor<2x8x4x16xf32>
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} causal window 4096 lse {scale = 5.000000e-01 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
func.func @attention_window(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x2x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>) {
  %0 = nn.attention %q, %k, %k causal window 3 : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> tensor<2x8x4x16xf32>
  %1, %2 = nn.attention %q, %k, %k causal window 4096 lse {scale = 0.5 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
  return %0, %2 : tensor<2x8x4x16xf32>, tensor<2x4x8xf32>
}

// Tests that attention takes a soft cap of its scores (Gemma 2), alone, under a window and with lse.
// CHECK-LABEL: func.func @attention_softcap
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} softcap 5.000000e+01 : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> tensor<2x8x4x16xf32>
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} causal window 4 softcap 2.500000e+00 lse : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
func.func @attention_softcap(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x2x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>) {
  %0 = nn.attention %q, %k, %k softcap 50.0 : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> tensor<2x8x4x16xf32>
  %1, %2 = nn.attention %q, %k, %k causal window 4 softcap 2.5 lse : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
  return %0, %2 : tensor<2x8x4x16xf32>, tensor<2x4x8xf32>
}

// Tests that matmul_accumulate adds a (transposed) product into its
// accumulator, which has the product's type.
// CHECK-LABEL: func.func @matmul_accumulate
// CHECK: nn.matmul_accumulate %{{.*}}, %{{.*}} transpose_lhs outs(%{{.*}}) : (tensor<32x784xf32>, tensor<32x1024xf32>, tensor<784x1024xf32>) -> tensor<784x1024xf32>
func.func @matmul_accumulate(%x: tensor<32x784xf32>, %dy: tensor<32x1024xf32>, %g: tensor<784x1024xf32>) -> tensor<784x1024xf32> {
  %0 = nn.matmul_accumulate %x, %dy transpose_lhs outs(%g) : (tensor<32x784xf32>, tensor<32x1024xf32>, tensor<784x1024xf32>) -> tensor<784x1024xf32>
  return %0 : tensor<784x1024xf32>
}

// Tests that matmul_bias adds a vector of the product's last dimension to
// a batched product with a shared rhs.
// CHECK-LABEL: func.func @matmul_bias
// CHECK: nn.matmul_bias %{{.*}}, %{{.*}}, %{{.*}} : (tensor<8x64x128xf32>, tensor<128x512xf32>, tensor<512xf32>) -> tensor<8x64x512xf32>
func.func @matmul_bias(%x: tensor<8x64x128xf32>, %w: tensor<128x512xf32>, %b: tensor<512xf32>) -> tensor<8x64x512xf32> {
  %0 = nn.matmul_bias %x, %w, %b : (tensor<8x64x128xf32>, tensor<128x512xf32>, tensor<512xf32>) -> tensor<8x64x512xf32>
  return %0 : tensor<8x64x512xf32>
}

// Tests that matmul_bias takes transpose_rhs: the bias follows the rhs's rows.
// CHECK-LABEL: func.func @matmul_bias_transpose_rhs
// CHECK: nn.matmul_bias %{{.*}}, %{{.*}}, %{{.*}} transpose_rhs : (tensor<4x8xf64>, tensor<16x8xf64>, tensor<16xf64>) -> tensor<4x16xf64>
func.func @matmul_bias_transpose_rhs(%x: tensor<4x8xf64>, %w: tensor<16x8xf64>, %b: tensor<16xf64>) -> tensor<4x16xf64> {
  %0 = nn.matmul_bias %x, %w, %b transpose_rhs : (tensor<4x8xf64>, tensor<16x8xf64>, tensor<16xf64>) -> tensor<4x16xf64>
  return %0 : tensor<4x16xf64>
}

// Tests that matmul_bias_gelu returns the GELU's output and its input (the
// biased product), both of the product's type.
// CHECK-LABEL: func.func @matmul_bias_gelu
// CHECK: %{{.*}}, %{{.*}} = nn.matmul_bias_gelu %{{.*}}, %{{.*}}, %{{.*}} : (tensor<8x64x128xbf16>, tensor<128x512xbf16>, tensor<512xbf16>) -> (tensor<8x64x512xbf16>, tensor<8x64x512xbf16>)
func.func @matmul_bias_gelu(%x: tensor<8x64x128xbf16>, %w: tensor<128x512xbf16>, %b: tensor<512xbf16>) -> (tensor<8x64x512xbf16>, tensor<8x64x512xbf16>) {
  %y, %pre = nn.matmul_bias_gelu %x, %w, %b : (tensor<8x64x128xbf16>, tensor<128x512xbf16>, tensor<512xbf16>) -> (tensor<8x64x512xbf16>, tensor<8x64x512xbf16>)
  return %y, %pre : tensor<8x64x512xbf16>, tensor<8x64x512xbf16>
}

// Tests that matmul_gelu_grad takes the GELU's input of the product's type
// and transposes as matmul.
// CHECK-LABEL: func.func @matmul_gelu_grad
// CHECK: nn.matmul_gelu_grad %{{.*}}, %{{.*}}, %{{.*}} transpose_rhs : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
func.func @matmul_gelu_grad(%dy: tensor<4x8xf32>, %w: tensor<16x8xf32>, %pre: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %0 = nn.matmul_gelu_grad %dy, %w, %pre transpose_rhs : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// Tests that matmul_bias_grad returns the product and the column sums of
// its rhs, a vector of the product's last dimension.
// CHECK-LABEL: func.func @matmul_bias_grad
// CHECK: %{{.*}}, %{{.*}} = nn.matmul_bias_grad %{{.*}}, %{{.*}} transpose_lhs : (tensor<512x128xbf16>, tensor<512x256xbf16>) -> (tensor<128x256xbf16>, tensor<256xbf16>)
func.func @matmul_bias_grad(%x: tensor<512x128xbf16>, %dy: tensor<512x256xbf16>) -> (tensor<128x256xbf16>, tensor<256xbf16>) {
  %dw, %db = nn.matmul_bias_grad %x, %dy transpose_lhs : (tensor<512x128xbf16>, tensor<512x256xbf16>) -> (tensor<128x256xbf16>, tensor<256xbf16>)
  return %dw, %db : tensor<128x256xbf16>, tensor<256xbf16>
}

// Tests that a 16-bit matmul may accumulate into an f32 accumulator of the
// product's shape, and that matmul_bias_grad with one returns the product
// and the bias gradient in f32.
// CHECK-LABEL: func.func @accumulate_f32
// CHECK: nn.matmul_accumulate %{{.*}}, %{{.*}} transpose_lhs outs(%{{.*}}) : (tensor<512x128xbf16>, tensor<512x256xbf16>, tensor<128x256xf32>) -> tensor<128x256xf32>
// CHECK: nn.matmul_bias_grad %{{.*}}, %{{.*}} transpose_lhs outs(%{{.*}}) : (tensor<512x128xbf16>, tensor<512x256xbf16>, tensor<128x256xf32>) -> (tensor<128x256xf32>, tensor<256xf32>)
func.func @accumulate_f32(%x: tensor<512x128xbf16>, %dy: tensor<512x256xbf16>, %g: tensor<128x256xf32>, %h: tensor<128x256xf32>) -> (tensor<128x256xf32>, tensor<128x256xf32>, tensor<256xf32>) {
  %0 = nn.matmul_accumulate %x, %dy transpose_lhs outs(%g) : (tensor<512x128xbf16>, tensor<512x256xbf16>, tensor<128x256xf32>) -> tensor<128x256xf32>
  %1, %2 = nn.matmul_bias_grad %x, %dy transpose_lhs outs(%h) : (tensor<512x128xbf16>, tensor<512x256xbf16>, tensor<128x256xf32>) -> (tensor<128x256xf32>, tensor<256xf32>)
  return %0, %1, %2 : tensor<128x256xf32>, tensor<128x256xf32>, tensor<256xf32>
}

// Tests that matmul_f32 writes a 16-bit product (batched, shared rhs,
// transposed) in f32, and that matmul_bias_grad without an accumulator may
// return both of its results in f32 for 16-bit operands.
// CHECK-LABEL: func.func @matmul_f32
// CHECK: nn.matmul_f32 %{{.*}}, %{{.*}} transpose_rhs : (tensor<2x4x8xbf16>, tensor<16x8xbf16>) -> tensor<2x4x16xf32>
// CHECK: nn.matmul_f32 %{{.*}}, %{{.*}} transpose_lhs : (tensor<8x4xf16>, tensor<8x16xf16>) -> tensor<4x16xf32>
// CHECK: nn.matmul_bias_grad %{{.*}}, %{{.*}} transpose_lhs : (tensor<512x128xbf16>, tensor<512x256xbf16>) -> (tensor<128x256xf32>, tensor<256xf32>)
func.func @matmul_f32(%a: tensor<2x4x8xbf16>, %w: tensor<16x8xbf16>, %x: tensor<8x4xf16>, %y: tensor<8x16xf16>, %h: tensor<512x128xbf16>, %dz: tensor<512x256xbf16>) -> (tensor<2x4x16xf32>, tensor<4x16xf32>, tensor<128x256xf32>, tensor<256xf32>) {
  %0 = nn.matmul_f32 %a, %w transpose_rhs : (tensor<2x4x8xbf16>, tensor<16x8xbf16>) -> tensor<2x4x16xf32>
  %1 = nn.matmul_f32 %x, %y transpose_lhs : (tensor<8x4xf16>, tensor<8x16xf16>) -> tensor<4x16xf32>
  %2, %3 = nn.matmul_bias_grad %h, %dz transpose_lhs : (tensor<512x128xbf16>, tensor<512x256xbf16>) -> (tensor<128x256xf32>, tensor<256xf32>)
  return %0, %1, %2, %3 : tensor<2x4x16xf32>, tensor<4x16xf32>, tensor<128x256xf32>, tensor<256xf32>
}

// Tests that matmul_bias_grad may add its product into an accumulator of
// the product's type.
// CHECK-LABEL: func.func @matmul_bias_grad_outs
// CHECK: %{{.*}}, %{{.*}} = nn.matmul_bias_grad %{{.*}}, %{{.*}} transpose_lhs outs(%{{.*}}) : (tensor<512x128xf32>, tensor<512x256xf32>, tensor<128x256xf32>) -> (tensor<128x256xf32>, tensor<256xf32>)
func.func @matmul_bias_grad_outs(%x: tensor<512x128xf32>, %dy: tensor<512x256xf32>, %g: tensor<128x256xf32>) -> (tensor<128x256xf32>, tensor<256xf32>) {
  %dw, %db = nn.matmul_bias_grad %x, %dy transpose_lhs outs(%g) : (tensor<512x128xf32>, tensor<512x256xf32>, tensor<128x256xf32>) -> (tensor<128x256xf32>, tensor<256xf32>)
  return %dw, %db : tensor<128x256xf32>, tensor<256xf32>
}

// Tests that causal attention takes a block of the queries (block_axes,
// context parallelism's local op): 4 queries of a sequence of 8 keys.
// CHECK-LABEL: func.func @attention_query_block
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} causal window 3 lse {block_axes = array<i16: 0>} : (tensor<2x4x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> (tensor<2x4x4x16xf32>, tensor<2x4x4xf32>)
func.func @attention_query_block(%q: tensor<2x4x4x16xf32>, %k: tensor<2x8x2x16xf32>) -> tensor<2x4x4xf32> {
  %0, %1 = nn.attention %q, %k, %k causal window 3 lse {block_axes = array<i16: 0>} : (tensor<2x4x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> (tensor<2x4x4x16xf32>, tensor<2x4x4xf32>)
  return %1 : tensor<2x4x4xf32>
}
