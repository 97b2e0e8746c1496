// RUN: tessel-opt %s | tessel-opt | FileCheck %s
// RUN: tessel-opt %s --mlir-print-op-generic | tessel-opt | FileCheck %s

// Tests that nn.reduce_sum drops one reduced dimension.
// CHECK-LABEL: func.func @reduce_sum_one_dim
func.func @reduce_sum_one_dim(%x: tensor<32x10xf32>) -> tensor<32xf32> {
  // CHECK: nn.reduce_sum %{{.*}} dims = [1] : tensor<32x10xf32> -> tensor<32xf32>
  %0 = nn.reduce_sum %x dims = [1] : tensor<32x10xf32> -> tensor<32xf32>
  return %0 : tensor<32xf32>
}

// Tests that nn.reduce_sum with keep_dims keeps reduced dimensions as size 1.
// CHECK-LABEL: func.func @reduce_sum_keep_dims
func.func @reduce_sum_keep_dims(%x: tensor<2x3x4xf32>) -> tensor<2x1x1xf32> {
  // CHECK: nn.reduce_sum %{{.*}} dims = [1, 2] keep_dims : tensor<2x3x4xf32> -> tensor<2x1x1xf32>
  %0 = nn.reduce_sum %x dims = [1, 2] keep_dims : tensor<2x3x4xf32> -> tensor<2x1x1xf32>
  return %0 : tensor<2x1x1xf32>
}

// Tests that nn.reduce_sum accepts unsorted dims.
// CHECK-LABEL: func.func @reduce_sum_unsorted_dims
func.func @reduce_sum_unsorted_dims(%x: tensor<2x3x4xf32>) -> tensor<3xf32> {
  // CHECK: nn.reduce_sum %{{.*}} dims = [2, 0] : tensor<2x3x4xf32> -> tensor<3xf32>
  %0 = nn.reduce_sum %x dims = [2, 0] : tensor<2x3x4xf32> -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// Tests that nn.reduce_sum over every dimension gives a rank-0 tensor.
// CHECK-LABEL: func.func @reduce_sum_all
func.func @reduce_sum_all(%x: tensor<4x8xf32>) -> tensor<f32> {
  // CHECK: nn.reduce_sum %{{.*}} dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %0 = nn.reduce_sum %x dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %0 : tensor<f32>
}

// Tests that nn.reduce_sum over no dimension is accepted (it folds away later).
// CHECK-LABEL: func.func @reduce_sum_empty_dims
func.func @reduce_sum_empty_dims(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: nn.reduce_sum %{{.*}} dims = [] : tensor<4x8xf32> -> tensor<4x8xf32>
  %0 = nn.reduce_sum %x dims = [] : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// Tests that nn.reduce_sum works on bf16, f16, i32 and i64 tensors.
// CHECK-LABEL: func.func @reduce_sum_types
func.func @reduce_sum_types(%a: tensor<4x8xbf16>, %b: tensor<4x8xf16>, %c: tensor<4x8xi32>,
                            %d: tensor<4x8xi64>)
    -> (tensor<8xbf16>, tensor<4xf16>, tensor<4x1xi32>, tensor<i64>) {
  // CHECK: nn.reduce_sum %{{.*}} dims = [0] : tensor<4x8xbf16> -> tensor<8xbf16>
  %0 = nn.reduce_sum %a dims = [0] : tensor<4x8xbf16> -> tensor<8xbf16>
  // CHECK: nn.reduce_sum %{{.*}} dims = [1] : tensor<4x8xf16> -> tensor<4xf16>
  %1 = nn.reduce_sum %b dims = [1] : tensor<4x8xf16> -> tensor<4xf16>
  // CHECK: nn.reduce_sum %{{.*}} dims = [1] keep_dims : tensor<4x8xi32> -> tensor<4x1xi32>
  %2 = nn.reduce_sum %c dims = [1] keep_dims : tensor<4x8xi32> -> tensor<4x1xi32>
  // CHECK: nn.reduce_sum %{{.*}} dims = [0, 1] : tensor<4x8xi64> -> tensor<i64>
  %3 = nn.reduce_sum %d dims = [0, 1] : tensor<4x8xi64> -> tensor<i64>
  return %0, %1, %2, %3 : tensor<8xbf16>, tensor<4xf16>, tensor<4x1xi32>, tensor<i64>
}

// Tests that nn.reduce_mean reduces to a scalar.
// CHECK-LABEL: func.func @reduce_mean_all
func.func @reduce_mean_all(%x: tensor<32x10xf32>) -> tensor<f32> {
  // CHECK: nn.reduce_mean %{{.*}} dims = [0, 1] : tensor<32x10xf32> -> tensor<f32>
  %0 = nn.reduce_mean %x dims = [0, 1] : tensor<32x10xf32> -> tensor<f32>
  return %0 : tensor<f32>
}

// Tests that nn.reduce_mean keeps reduced dimensions with keep_dims.
// CHECK-LABEL: func.func @reduce_mean_keep_dims
func.func @reduce_mean_keep_dims(%x: tensor<8x16x64xf32>) -> tensor<8x16x1xf32> {
  // CHECK: nn.reduce_mean %{{.*}} dims = [2] keep_dims : tensor<8x16x64xf32> -> tensor<8x16x1xf32>
  %0 = nn.reduce_mean %x dims = [2] keep_dims : tensor<8x16x64xf32> -> tensor<8x16x1xf32>
  return %0 : tensor<8x16x1xf32>
}

// Tests that nn.reduce_mean works on every float type.
// CHECK-LABEL: func.func @reduce_mean_types
func.func @reduce_mean_types(%a: tensor<4x8xbf16>, %b: tensor<4x8xf16>, %c: tensor<4x8xf64>)
    -> (tensor<4xbf16>, tensor<1x8xf16>, tensor<8xf64>) {
  // CHECK: nn.reduce_mean %{{.*}} dims = [1] : tensor<4x8xbf16> -> tensor<4xbf16>
  %0 = nn.reduce_mean %a dims = [1] : tensor<4x8xbf16> -> tensor<4xbf16>
  // CHECK: nn.reduce_mean %{{.*}} dims = [0] keep_dims : tensor<4x8xf16> -> tensor<1x8xf16>
  %1 = nn.reduce_mean %b dims = [0] keep_dims : tensor<4x8xf16> -> tensor<1x8xf16>
  // CHECK: nn.reduce_mean %{{.*}} dims = [0] : tensor<4x8xf64> -> tensor<8xf64>
  %2 = nn.reduce_mean %c dims = [0] : tensor<4x8xf64> -> tensor<8xf64>
  return %0, %1, %2 : tensor<4xbf16>, tensor<1x8xf16>, tensor<8xf64>
}

// Tests that nn.reduce_max with keep_dims keeps the reduced dimension.
// CHECK-LABEL: func.func @reduce_max_keep_dims
func.func @reduce_max_keep_dims(%x: tensor<32x10xf32>) -> tensor<32x1xf32> {
  // CHECK: nn.reduce_max %{{.*}} dims = [1] keep_dims : tensor<32x10xf32> -> tensor<32x1xf32>
  %0 = nn.reduce_max %x dims = [1] keep_dims : tensor<32x10xf32> -> tensor<32x1xf32>
  return %0 : tensor<32x1xf32>
}

// Tests that nn.reduce_max drops the reduced dimension without keep_dims.
// CHECK-LABEL: func.func @reduce_max_drop
func.func @reduce_max_drop(%x: tensor<2x3x4xf32>) -> tensor<2x4xf32> {
  // CHECK: nn.reduce_max %{{[^ ]*}} dims = [1] : tensor<2x3x4xf32> -> tensor<2x4xf32>
  %0 = nn.reduce_max %x dims = [1] : tensor<2x3x4xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// Tests that nn.reduce_max works on bf16, f16 and i32 tensors.
// CHECK-LABEL: func.func @reduce_max_types
func.func @reduce_max_types(%a: tensor<4x8xbf16>, %b: tensor<4x8xf16>, %c: tensor<4x8xi32>)
    -> (tensor<4xbf16>, tensor<f16>, tensor<1x8xi32>) {
  // CHECK: nn.reduce_max %{{.*}} dims = [1] : tensor<4x8xbf16> -> tensor<4xbf16>
  %0 = nn.reduce_max %a dims = [1] : tensor<4x8xbf16> -> tensor<4xbf16>
  // CHECK: nn.reduce_max %{{.*}} dims = [0, 1] : tensor<4x8xf16> -> tensor<f16>
  %1 = nn.reduce_max %b dims = [0, 1] : tensor<4x8xf16> -> tensor<f16>
  // CHECK: nn.reduce_max %{{.*}} dims = [0] keep_dims : tensor<4x8xi32> -> tensor<1x8xi32>
  %2 = nn.reduce_max %c dims = [0] keep_dims : tensor<4x8xi32> -> tensor<1x8xi32>
  return %0, %1, %2 : tensor<4xbf16>, tensor<f16>, tensor<1x8xi32>
}

// Tests that a reduction of a rank-0 tensor over no dimension is accepted.
// CHECK-LABEL: func.func @reduce_scalar
func.func @reduce_scalar(%x: tensor<f32>) -> tensor<f32> {
  // CHECK: nn.reduce_max %{{.*}} dims = [] : tensor<f32> -> tensor<f32>
  %0 = nn.reduce_max %x dims = [] : tensor<f32> -> tensor<f32>
  return %0 : tensor<f32>
}

// Tests that the sum of a 16-bit tensor may be written in f32 (the widening
// tessel-fuse-epilogues folds into it); it round-trips.
// CHECK-LABEL: func.func @reduce_sum_f32
func.func @reduce_sum_f32(%a: tensor<4x8xbf16>, %b: tensor<4x8xf16>) -> (tensor<8xf32>, tensor<4x1xf32>) {
  // CHECK: nn.reduce_sum %{{.*}} dims = [0] : tensor<4x8xbf16> -> tensor<8xf32>
  %0 = nn.reduce_sum %a dims = [0] : tensor<4x8xbf16> -> tensor<8xf32>
  // CHECK: nn.reduce_sum %{{.*}} dims = [1] keep_dims : tensor<4x8xf16> -> tensor<4x1xf32>
  %1 = nn.reduce_sum %b dims = [1] keep_dims : tensor<4x8xf16> -> tensor<4x1xf32>
  return %0, %1 : tensor<8xf32>, tensor<4x1xf32>
}
