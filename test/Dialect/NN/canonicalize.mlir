// RUN: tessel-opt %s -canonicalize --split-input-file | FileCheck %s

// Tests that x + 0 folds to x.
// CHECK-LABEL: func.func @add_zero_rhs
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NOT: nn.add
// CHECK: return %[[X]]
func.func @add_zero_rhs(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %zero = nn.constant dense<0.0> : tensor<4x8xf32>
  %0 = nn.add %x, %zero : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that 0 + x folds to x (integer tensor).
// CHECK-LABEL: func.func @add_zero_lhs
// CHECK-SAME: (%[[X:.*]]: tensor<4xi32>)
// CHECK-NOT: nn.add
// CHECK: return %[[X]]
func.func @add_zero_lhs(%x: tensor<4xi32>) -> tensor<4xi32> {
  %zero = nn.constant dense<0> : tensor<4xi32>
  %0 = nn.add %zero, %x : tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// Tests that x + 1 does not fold.
// CHECK-LABEL: func.func @add_one_no_fold
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK: %[[ONE:.*]] = nn.constant dense<1.000000e+00> : tensor<4x8xf32>
// CHECK: %[[ADD:.*]] = nn.add %[[X]], %[[ONE]] : tensor<4x8xf32>
// CHECK: return %[[ADD]]
func.func @add_one_no_fold(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %one = nn.constant dense<1.0> : tensor<4x8xf32>
  %0 = nn.add %x, %one : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that x + c with a non-splat constant containing zeros does not fold.
// CHECK-LABEL: func.func @add_non_splat_no_fold
// CHECK: nn.add
func.func @add_non_splat_no_fold(%x: tensor<2xf32>) -> tensor<2xf32> {
  %c = nn.constant dense<[0.0, 1.0]> : tensor<2xf32>
  %0 = nn.add %x, %c : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// Tests that x - 0 folds to x.
// CHECK-LABEL: func.func @sub_zero
// CHECK-SAME: (%[[X:.*]]: tensor<16xbf16>)
// CHECK-NOT: nn.sub
// CHECK: return %[[X]]
func.func @sub_zero(%x: tensor<16xbf16>) -> tensor<16xbf16> {
  %zero = nn.constant dense<0.0> : tensor<16xbf16>
  %0 = nn.sub %x, %zero : tensor<16xbf16>
  return %0 : tensor<16xbf16>
}

// -----

// Tests that 0 - x does not fold (it is -x, not x).
// CHECK-LABEL: func.func @zero_sub_no_fold
// CHECK: %[[SUB:.*]] = nn.sub %{{.*}}, %{{.*}} : tensor<16xf32>
// CHECK: return %[[SUB]]
func.func @zero_sub_no_fold(%x: tensor<16xf32>) -> tensor<16xf32> {
  %zero = nn.constant dense<0.0> : tensor<16xf32>
  %0 = nn.sub %zero, %x : tensor<16xf32>
  return %0 : tensor<16xf32>
}

// -----

// Tests that x * 1 folds to x.
// CHECK-LABEL: func.func @mul_one_rhs
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf16>)
// CHECK-NOT: nn.mul
// CHECK: return %[[X]]
func.func @mul_one_rhs(%x: tensor<2x3xf16>) -> tensor<2x3xf16> {
  %one = nn.constant dense<1.0> : tensor<2x3xf16>
  %0 = nn.mul %x, %one : tensor<2x3xf16>
  return %0 : tensor<2x3xf16>
}

// -----

// Tests that 1 * x folds to x (integer tensor).
// CHECK-LABEL: func.func @mul_one_lhs
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xi32>)
// CHECK-NOT: nn.mul
// CHECK: return %[[X]]
func.func @mul_one_lhs(%x: tensor<2x3xi32>) -> tensor<2x3xi32> {
  %one = nn.constant dense<1> : tensor<2x3xi32>
  %0 = nn.mul %one, %x : tensor<2x3xi32>
  return %0 : tensor<2x3xi32>
}

// -----

// Tests that x * 2 does not fold.
// CHECK-LABEL: func.func @mul_two_no_fold
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
// CHECK: %[[TWO:.*]] = nn.constant dense<2.000000e+00> : tensor<2x3xf32>
// CHECK: %[[MUL:.*]] = nn.mul %[[X]], %[[TWO]] : tensor<2x3xf32>
// CHECK: return %[[MUL]]
func.func @mul_two_no_fold(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %two = nn.constant dense<2.0> : tensor<2x3xf32>
  %0 = nn.mul %x, %two : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// Tests that x * 0 is not folded to x.
// CHECK-LABEL: func.func @mul_zero_no_fold
// CHECK: nn.mul
func.func @mul_zero_no_fold(%x: tensor<4xf32>) -> tensor<4xf32> {
  %zero = nn.constant dense<0.0> : tensor<4xf32>
  %0 = nn.mul %x, %zero : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that x / 1 folds to x.
// CHECK-LABEL: func.func @div_one
// CHECK-SAME: (%[[X:.*]]: tensor<8xf32>)
// CHECK-NOT: nn.div
// CHECK: return %[[X]]
func.func @div_one(%x: tensor<8xf32>) -> tensor<8xf32> {
  %one = nn.constant dense<1.0> : tensor<8xf32>
  %0 = nn.div %x, %one : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// Tests that 1 / x does not fold.
// CHECK-LABEL: func.func @one_div_no_fold
// CHECK: %[[DIV:.*]] = nn.div %{{.*}}, %{{.*}} : tensor<8xf32>
// CHECK: return %[[DIV]]
func.func @one_div_no_fold(%x: tensor<8xf32>) -> tensor<8xf32> {
  %one = nn.constant dense<1.0> : tensor<8xf32>
  %0 = nn.div %one, %x : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// Tests that neg(neg(x)) folds to x.
// CHECK-LABEL: func.func @neg_neg
// CHECK-SAME: (%[[X:.*]]: tensor<8xf32>)
// CHECK-NOT: nn.neg
// CHECK: return %[[X]]
func.func @neg_neg(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = nn.neg %x : tensor<8xf32>
  %1 = nn.neg %0 : tensor<8xf32>
  return %1 : tensor<8xf32>
}

// -----

// Tests that a single neg stays.
// CHECK-LABEL: func.func @neg_single_no_fold
// CHECK: %[[NEG:.*]] = nn.neg %{{.*}} : tensor<8xf32>
// CHECK: return %[[NEG]]
func.func @neg_single_no_fold(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = nn.neg %x : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// Tests that a cast to the same type folds to its input.
// CHECK-LABEL: func.func @cast_same_type
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xbf16>)
// CHECK-NOT: nn.cast
// CHECK: return %[[X]]
func.func @cast_same_type(%x: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  %0 = nn.cast %x : tensor<4x8xbf16> to tensor<4x8xbf16>
  return %0 : tensor<4x8xbf16>
}

// -----

// Tests that a cast to another element type stays.
// CHECK-LABEL: func.func @cast_other_type_no_fold
// CHECK: nn.cast %{{.*}} : tensor<4x8xf32> to tensor<4x8xbf16>
func.func @cast_other_type_no_fold(%x: tensor<4x8xf32>) -> tensor<4x8xbf16> {
  %0 = nn.cast %x : tensor<4x8xf32> to tensor<4x8xbf16>
  return %0 : tensor<4x8xbf16>
}

// -----

// Tests that dropout with rate 0 folds to its input.
// CHECK-LABEL: func.func @dropout_rate_zero
// CHECK-SAME: (%[[X:.*]]: tensor<32x64xf32>)
// CHECK-NOT: nn.dropout
// CHECK: return %[[X]]
func.func @dropout_rate_zero(%x: tensor<32x64xf32>) -> tensor<32x64xf32> {
  %0 = nn.dropout %x rate = 0.0 seed = 7 : tensor<32x64xf32>
  return %0 : tensor<32x64xf32>
}

// -----

// Tests that dropout with a nonzero rate stays.
// CHECK-LABEL: func.func @dropout_rate_nonzero_no_fold
// CHECK: nn.dropout %{{.*}} rate = 1.000000e-01 seed = 7 : tensor<32x64xf32>
func.func @dropout_rate_nonzero_no_fold(%x: tensor<32x64xf32>) -> tensor<32x64xf32> {
  %0 = nn.dropout %x rate = 0.1 seed = 7 : tensor<32x64xf32>
  return %0 : tensor<32x64xf32>
}

// -----

// Tests that a reduction over no dimension folds to its input, with or without keep_dims.
// CHECK-LABEL: func.func @reduce_empty_dims
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NOT: nn.reduce
// CHECK: return %[[X]], %[[X]], %[[X]]
func.func @reduce_empty_dims(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %0 = nn.reduce_sum %x dims = [] : tensor<4x8xf32> -> tensor<4x8xf32>
  %1 = nn.reduce_mean %x dims = [] keep_dims : tensor<4x8xf32> -> tensor<4x8xf32>
  %2 = nn.reduce_max %x dims = [] : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0, %1, %2 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests that a reduction over a size-1 dimension with keep_dims is not folded (not an empty dims list).
// CHECK-LABEL: func.func @reduce_unit_dim_no_fold
// CHECK: nn.reduce_sum %{{.*}} dims = [1] keep_dims : tensor<4x1xf32> -> tensor<4x1xf32>
func.func @reduce_unit_dim_no_fold(%x: tensor<4x1xf32>) -> tensor<4x1xf32> {
  %0 = nn.reduce_sum %x dims = [1] keep_dims : tensor<4x1xf32> -> tensor<4x1xf32>
  return %0 : tensor<4x1xf32>
}

// -----

// Tests that a broadcast to the operand's own type folds away.
// CHECK-LABEL: func.func @broadcast_identity
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NOT: nn.broadcast
// CHECK: return %[[X]]
func.func @broadcast_identity(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = nn.broadcast %x dims = [0, 1] : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that a broadcast of a splat constant that some user reads at the
// full shape (here the return) folds to a splat constant of that shape,
// an integer one too, and one adding no element (unit dimensions) as well.
// CHECK-LABEL: func.func @broadcast_splat_constant
// CHECK-DAG: %[[C:.*]] = nn.constant dense<2.000000e+00> : tensor<4x8xf32>
// CHECK-DAG: %[[I:.*]] = nn.constant dense<-3> : tensor<2x3x4xi32>
// CHECK-DAG: %[[U:.*]] = nn.constant dense<5> : tensor<1x4xi32>
// CHECK-NOT: nn.broadcast
// CHECK: return %[[C]], %[[I]], %[[U]]
func.func @broadcast_splat_constant() -> (tensor<4x8xf32>, tensor<2x3x4xi32>, tensor<1x4xi32>) {
  %c = nn.constant dense<2.0> : tensor<8xf32>
  %0 = nn.broadcast %c dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %i = nn.constant dense<-3> : tensor<1x4xi32>
  %1 = nn.broadcast %i dims = [1, 2] : tensor<1x4xi32> -> tensor<2x3x4xi32>
  %u = nn.constant dense<5> : tensor<4xi32>
  %2 = nn.broadcast %u dims = [1] : tensor<4xi32> -> tensor<1x4xi32>
  return %0, %1, %2 : tensor<4x8xf32>, tensor<2x3x4xi32>, tensor<1x4xi32>
}

// -----

// Tests that a broadcast of a splat constant that only binary ops read
// stays a broadcast of the small constant (the memory plan reads it where
// it lies, not a filled buffer of the larger shape).
// CHECK-LABEL: func.func @broadcast_splat_read_by_binary_ops
// CHECK: %[[C:.*]] = nn.constant dense<3.000000e+01> : tensor<f32>
// CHECK: %[[B:.*]] = nn.broadcast %[[C]] dims = [] : tensor<f32> -> tensor<2x3x4xf32>
// CHECK: nn.div %{{.*}}, %[[B]]
// CHECK: nn.mul %{{.*}}, %[[B]]
func.func @broadcast_splat_read_by_binary_ops(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %c = nn.constant dense<30.0> : tensor<f32>
  %b = nn.broadcast %c dims = [] : tensor<f32> -> tensor<2x3x4xf32>
  %0 = nn.div %x, %b : tensor<2x3x4xf32>
  %1 = nn.tanh %0 : tensor<2x3x4xf32>
  %2 = nn.mul %1, %b : tensor<2x3x4xf32>
  return %2 : tensor<2x3x4xf32>
}

// -----

// Tests that x times a broadcast one, or plus a broadcast zero, folds to x.
// CHECK-LABEL: func.func @broadcast_splat_identity
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-NOT: nn.mul
// CHECK-NOT: nn.add
// CHECK: return %[[X]]
func.func @broadcast_splat_identity(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %one = nn.constant dense<1.0> : tensor<f32>
  %b1 = nn.broadcast %one dims = [] : tensor<f32> -> tensor<2x3x4xf32>
  %0 = nn.mul %x, %b1 : tensor<2x3x4xf32>
  %zero = nn.constant dense<0.0> : tensor<4xf32>
  %b0 = nn.broadcast %zero dims = [2] : tensor<4xf32> -> tensor<2x3x4xf32>
  %1 = nn.add %0, %b0 : tensor<2x3x4xf32>
  return %1 : tensor<2x3x4xf32>
}

// -----

// Tests that a broadcast of a non-splat constant does not fold.
// CHECK-LABEL: func.func @broadcast_dense_constant_no_fold
// CHECK: %[[C:.*]] = nn.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK: %[[B:.*]] = nn.broadcast %[[C]] dims = [1] : tensor<2xf32> -> tensor<3x2xf32>
// CHECK: return %[[B]]
func.func @broadcast_dense_constant_no_fold() -> tensor<3x2xf32> {
  %c = nn.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %0 = nn.broadcast %c dims = [1] : tensor<2xf32> -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

// Tests that broadcast(broadcast(x)) composes into one broadcast.
// CHECK-LABEL: func.func @broadcast_broadcast
// CHECK-SAME: (%[[X:.*]]: tensor<8xf32>)
// CHECK: %[[B:.*]] = nn.broadcast %[[X]] dims = [2] : tensor<8xf32> -> tensor<2x4x8xf32>
// CHECK-NOT: nn.broadcast
// CHECK: return %[[B]]
func.func @broadcast_broadcast(%x: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %0 = nn.broadcast %x dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %1 = nn.broadcast %0 dims = [1, 2] : tensor<4x8xf32> -> tensor<2x4x8xf32>
  return %1 : tensor<2x4x8xf32>
}

// -----

// Tests that composing broadcasts maps a size-1 operand dimension through both.
// CHECK-LABEL: func.func @broadcast_broadcast_unit
// CHECK-SAME: (%[[X:.*]]: tensor<1x8xbf16>)
// CHECK: %[[B:.*]] = nn.broadcast %[[X]] dims = [1, 3] : tensor<1x8xbf16> -> tensor<2x3x5x8xbf16>
// CHECK-NOT: nn.broadcast
// CHECK: return %[[B]]
func.func @broadcast_broadcast_unit(%x: tensor<1x8xbf16>) -> tensor<2x3x5x8xbf16> {
  %0 = nn.broadcast %x dims = [0, 2] : tensor<1x8xbf16> -> tensor<1x5x8xbf16>
  %1 = nn.broadcast %0 dims = [1, 2, 3] : tensor<1x5x8xbf16> -> tensor<2x3x5x8xbf16>
  return %1 : tensor<2x3x5x8xbf16>
}

// -----

// Tests that a reshape to the operand's own type folds away.
// CHECK-LABEL: func.func @reshape_same_type
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NOT: nn.reshape
// CHECK: return %[[X]]
func.func @reshape_same_type(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = nn.reshape %x : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that reshape(reshape(x)) becomes one reshape of x.
// CHECK-LABEL: func.func @reshape_reshape
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK: %[[R:.*]] = nn.reshape %[[X]] : tensor<4x8xf32> -> tensor<2x16xf32>
// CHECK-NOT: nn.reshape
// CHECK: return %[[R]]
func.func @reshape_reshape(%x: tensor<4x8xf32>) -> tensor<2x16xf32> {
  %0 = nn.reshape %x : tensor<4x8xf32> -> tensor<32xf32>
  %1 = nn.reshape %0 : tensor<32xf32> -> tensor<2x16xf32>
  return %1 : tensor<2x16xf32>
}

// -----

// Tests that reshape(reshape(x)) back to the type of x folds to x.
// CHECK-LABEL: func.func @reshape_reshape_back
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NOT: nn.reshape
// CHECK: return %[[X]]
func.func @reshape_reshape_back(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = nn.reshape %x : tensor<4x8xf32> -> tensor<32xf32>
  %1 = nn.reshape %0 : tensor<32xf32> -> tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}

// -----

// Tests that a chain of three reshapes collapses and keeps the other user of the middle one.
// CHECK-LABEL: func.func @reshape_chain_shared
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-DAG: %[[A:.*]] = nn.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK-DAG: %[[B:.*]] = nn.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<24xf32>
// CHECK: return %[[A]], %[[B]]
func.func @reshape_chain_shared(%x: tensor<2x3x4xf32>) -> (tensor<6x4xf32>, tensor<24xf32>) {
  %0 = nn.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %1 = nn.reshape %0 : tensor<6x4xf32> -> tensor<4x6xf32>
  %2 = nn.reshape %1 : tensor<4x6xf32> -> tensor<24xf32>
  return %0, %2 : tensor<6x4xf32>, tensor<24xf32>
}

// -----

// Tests that a reshape of a dense constant folds to a reshaped constant (row-major order).
// CHECK-LABEL: func.func @reshape_dense_constant
// CHECK: %[[C:.*]] = nn.constant dense<{{\[}}[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi32>
// CHECK-NOT: nn.reshape
// CHECK: return %[[C]]
func.func @reshape_dense_constant() -> tensor<2x3xi32> {
  %c = nn.constant dense<[1, 2, 3, 4, 5, 6]> : tensor<6xi32>
  %0 = nn.reshape %c : tensor<6xi32> -> tensor<2x3xi32>
  return %0 : tensor<2x3xi32>
}

// -----

// Tests that a reshape of a splat constant folds to a splat constant.
// CHECK-LABEL: func.func @reshape_splat_constant
// CHECK: %[[C:.*]] = nn.constant dense<5.000000e-01> : tensor<2x2xf16>
// CHECK-NOT: nn.reshape
// CHECK: return %[[C]]
func.func @reshape_splat_constant() -> tensor<2x2xf16> {
  %c = nn.constant dense<0.5> : tensor<4xf16>
  %0 = nn.reshape %c : tensor<4xf16> -> tensor<2x2xf16>
  return %0 : tensor<2x2xf16>
}

// -----

// Tests that the identity transpose folds away.
// CHECK-LABEL: func.func @transpose_identity
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-NOT: nn.transpose
// CHECK: return %[[X]]
func.func @transpose_identity(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %0 = nn.transpose %x perm = [0, 1, 2] : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// -----

// Tests that a non-identity transpose between equal dimensions (same type) stays.
// CHECK-LABEL: func.func @transpose_square_no_fold
// CHECK: nn.transpose %{{.*}} perm = [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
func.func @transpose_square_no_fold(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = nn.transpose %x perm = [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

// Tests that transpose(transpose(x)) composes into one transpose.
// CHECK-LABEL: func.func @transpose_transpose
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK: %[[T:.*]] = nn.transpose %[[X]] perm = [1, 2, 0] : tensor<2x3x4xf32> -> tensor<3x4x2xf32>
// CHECK-NOT: nn.transpose
// CHECK: return %[[T]]
func.func @transpose_transpose(%x: tensor<2x3x4xf32>) -> tensor<3x4x2xf32> {
  %0 = nn.transpose %x perm = [1, 0, 2] : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  %1 = nn.transpose %0 perm = [0, 2, 1] : tensor<3x2x4xf32> -> tensor<3x4x2xf32>
  return %1 : tensor<3x4x2xf32>
}

// -----

// Tests that transpose(transpose(x)) with inverse permutations folds to x.
// CHECK-LABEL: func.func @transpose_transpose_identity
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-NOT: nn.transpose
// CHECK: return %[[X]]
func.func @transpose_transpose_identity(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %0 = nn.transpose %x perm = [1, 2, 0] : tensor<2x3x4xf32> -> tensor<3x4x2xf32>
  %1 = nn.transpose %0 perm = [2, 0, 1] : tensor<3x4x2xf32> -> tensor<2x3x4xf32>
  return %1 : tensor<2x3x4xf32>
}

// -----

// Tests that a swap applied twice to a square matrix folds to x.
// CHECK-LABEL: func.func @transpose_twice_square
// CHECK-SAME: (%[[X:.*]]: tensor<4x4xi32>)
// CHECK-NOT: nn.transpose
// CHECK: return %[[X]]
func.func @transpose_twice_square(%x: tensor<4x4xi32>) -> tensor<4x4xi32> {
  %0 = nn.transpose %x perm = [1, 0] : tensor<4x4xi32> -> tensor<4x4xi32>
  %1 = nn.transpose %0 perm = [1, 0] : tensor<4x4xi32> -> tensor<4x4xi32>
  return %1 : tensor<4x4xi32>
}

// -----

// Tests that a slice of the whole tensor folds away.
// CHECK-LABEL: func.func @slice_full
// CHECK-SAME: (%[[X:.*]]: tensor<8x192xf32>)
// CHECK-NOT: nn.slice
// CHECK: return %[[X]]
func.func @slice_full(%x: tensor<8x192xf32>) -> tensor<8x192xf32> {
  %0 = nn.slice %x start = [0, 0] limit = [8, 192] : tensor<8x192xf32> -> tensor<8x192xf32>
  return %0 : tensor<8x192xf32>
}

// -----

// Tests that a whole-tensor slice with explicit unit strides folds away too.
// CHECK-LABEL: func.func @slice_full_unit_strides
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xbf16>)
// CHECK-NOT: nn.slice
// CHECK: return %[[X]]
func.func @slice_full_unit_strides(%x: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  %0 = nn.slice %x start = [0, 0] limit = [4, 8] strides = [1, 1] : tensor<4x8xbf16> -> tensor<4x8xbf16>
  return %0 : tensor<4x8xbf16>
}

// -----

// Tests that a partial slice does not fold.
// CHECK-LABEL: func.func @slice_partial_no_fold
// CHECK: %[[S:.*]] = nn.slice %{{.*}} start = [0, 64] limit = [8, 128] : tensor<8x192xf32> -> tensor<8x64xf32>
// CHECK: return %[[S]]
func.func @slice_partial_no_fold(%x: tensor<8x192xf32>) -> tensor<8x64xf32> {
  %0 = nn.slice %x start = [0, 64] limit = [8, 128] : tensor<8x192xf32> -> tensor<8x64xf32>
  return %0 : tensor<8x64xf32>
}

// -----

// Tests that a strided slice over the full range does not fold.
// CHECK-LABEL: func.func @slice_strided_no_fold
// CHECK: nn.slice %{{.*}} start = [0] limit = [8] strides = [2] : tensor<8xf32> -> tensor<4xf32>
func.func @slice_strided_no_fold(%x: tensor<8xf32>) -> tensor<4xf32> {
  %0 = nn.slice %x start = [0] limit = [8] strides = [2] : tensor<8xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that a concat of a single input folds to that input.
// CHECK-LABEL: func.func @concat_single
// CHECK-SAME: (%[[X:.*]]: tensor<4x3xf32>)
// CHECK-NOT: nn.concat
// CHECK: return %[[X]]
func.func @concat_single(%x: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %0 = nn.concat %x dim = 1 : (tensor<4x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

// Tests that a concat of two inputs stays.
// CHECK-LABEL: func.func @concat_two_no_fold
// CHECK: nn.concat %{{.*}}, %{{.*}} dim = 0 : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<8x3xf32>
func.func @concat_two_no_fold(%x: tensor<4x3xf32>) -> tensor<8x3xf32> {
  %0 = nn.concat %x, %x dim = 0 : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<8x3xf32>
  return %0 : tensor<8x3xf32>
}

// -----

// Tests that an attention log-sum-exp nothing reads is dropped, with the
// op's attributes kept, and that one a gradient reads stays.
// CHECK-LABEL: func.func @attention_unused_lse
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} causal {scale = 5.000000e-01 : f64} : (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) -> tensor<1x4x2x8xf32>
// CHECK: %[[O:.*]], %[[LSE:.*]] = nn.attention %{{.*}}, %{{.*}}, %{{.*}} lse :
// CHECK: nn.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %[[O]], %[[LSE]], %{{.*}} :
func.func @attention_unused_lse(%q: tensor<1x4x2x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) {
  %0, %1 = nn.attention %q, %q, %q causal lse {scale = 0.5 : f64} : (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x2x4xf32>)
  %2, %3 = nn.attention %0, %q, %q lse : (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x2x4xf32>)
  %dq, %dk, %dv = nn.attention_grad %0, %q, %q, %2, %3, %q : (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x2x4xf32>, tensor<1x4x2x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>)
  return %2, %dq : tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>
}
