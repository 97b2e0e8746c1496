// RUN: tessel-opt %s | tessel-opt | FileCheck %s
// RUN: tessel-opt %s --mlir-print-op-generic | tessel-opt | FileCheck %s

// Tests that nn.broadcast adds a leading dimension (bias broadcast).
// CHECK-LABEL: func.func @broadcast_bias
func.func @broadcast_bias(%b: tensor<1024xf32>) -> tensor<32x1024xf32> {
  // CHECK: nn.broadcast %{{.*}} dims = [1] : tensor<1024xf32> -> tensor<32x1024xf32>
  %0 = nn.broadcast %b dims = [1] : tensor<1024xf32> -> tensor<32x1024xf32>
  return %0 : tensor<32x1024xf32>
}

// Tests that nn.broadcast expands size-1 dimensions and adds new ones.
// CHECK-LABEL: func.func @broadcast_expand_unit
func.func @broadcast_expand_unit(%x: tensor<1x8xbf16>) -> tensor<4x3x8xbf16> {
  // CHECK: nn.broadcast %{{.*}} dims = [0, 2] : tensor<1x8xbf16> -> tensor<4x3x8xbf16>
  %0 = nn.broadcast %x dims = [0, 2] : tensor<1x8xbf16> -> tensor<4x3x8xbf16>
  return %0 : tensor<4x3x8xbf16>
}

// Tests that nn.broadcast accepts a rank-0 operand and f16/i32 tensors.
// CHECK-LABEL: func.func @broadcast_types
func.func @broadcast_types(%s: tensor<f16>, %i: tensor<8xi32>)
    -> (tensor<2x3xf16>, tensor<8x5xi32>) {
  // CHECK: nn.broadcast %{{.*}} dims = [] : tensor<f16> -> tensor<2x3xf16>
  %0 = nn.broadcast %s dims = [] : tensor<f16> -> tensor<2x3xf16>
  // CHECK: nn.broadcast %{{.*}} dims = [0] : tensor<8xi32> -> tensor<8x5xi32>
  %1 = nn.broadcast %i dims = [0] : tensor<8xi32> -> tensor<8x5xi32>
  return %0, %1 : tensor<2x3xf16>, tensor<8x5xi32>
}

// Tests that nn.broadcast to the same type (the identity) is accepted.
// CHECK-LABEL: func.func @broadcast_identity
func.func @broadcast_identity(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: nn.broadcast %{{.*}} dims = [0, 1] : tensor<4x8xf32> -> tensor<4x8xf32>
  %0 = nn.broadcast %x dims = [0, 1] : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// Tests that nn.reshape splits a dimension (heads).
// CHECK-LABEL: func.func @reshape_split
func.func @reshape_split(%x: tensor<8x12x64xf32>) -> tensor<8x12x4x16xf32> {
  // CHECK: nn.reshape %{{.*}} : tensor<8x12x64xf32> -> tensor<8x12x4x16xf32>
  %0 = nn.reshape %x : tensor<8x12x64xf32> -> tensor<8x12x4x16xf32>
  return %0 : tensor<8x12x4x16xf32>
}

// Tests that nn.reshape merges dimensions and reaches or leaves rank 0.
// CHECK-LABEL: func.func @reshape_merge_and_scalar
func.func @reshape_merge_and_scalar(%x: tensor<2x3x4xbf16>, %s: tensor<i32>)
    -> (tensor<24xbf16>, tensor<1x1xi32>, tensor<f16>) {
  // CHECK: nn.reshape %{{.*}} : tensor<2x3x4xbf16> -> tensor<24xbf16>
  %0 = nn.reshape %x : tensor<2x3x4xbf16> -> tensor<24xbf16>
  // CHECK: nn.reshape %{{.*}} : tensor<i32> -> tensor<1x1xi32>
  %1 = nn.reshape %s : tensor<i32> -> tensor<1x1xi32>
  %c = nn.constant dense<1.0> : tensor<1xf16>
  // CHECK: nn.reshape %{{.*}} : tensor<1xf16> -> tensor<f16>
  %2 = nn.reshape %c : tensor<1xf16> -> tensor<f16>
  return %0, %1, %2 : tensor<24xbf16>, tensor<1x1xi32>, tensor<f16>
}

// Tests that nn.reshape accepts a many-to-many regrouping (6x4 -> 4x6).
// CHECK-LABEL: func.func @reshape_regroup
func.func @reshape_regroup(%x: tensor<6x4xf32>) -> tensor<4x6xf32> {
  // CHECK: nn.reshape %{{.*}} : tensor<6x4xf32> -> tensor<4x6xf32>
  %0 = nn.reshape %x : tensor<6x4xf32> -> tensor<4x6xf32>
  return %0 : tensor<4x6xf32>
}

// Tests that nn.transpose swaps the two dimensions of a matrix.
// CHECK-LABEL: func.func @transpose_2d
func.func @transpose_2d(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  // CHECK: nn.transpose %{{.*}} perm = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  %0 = nn.transpose %x perm = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// Tests that nn.transpose permutes a rank-4 tensor ([b, s, h, d] -> [b, h, s, d]).
// CHECK-LABEL: func.func @transpose_heads
func.func @transpose_heads(%x: tensor<2x16x4x8xbf16>) -> tensor<2x4x16x8xbf16> {
  // CHECK: nn.transpose %{{.*}} perm = [0, 2, 1, 3] : tensor<2x16x4x8xbf16> -> tensor<2x4x16x8xbf16>
  %0 = nn.transpose %x perm = [0, 2, 1, 3] : tensor<2x16x4x8xbf16> -> tensor<2x4x16x8xbf16>
  return %0 : tensor<2x4x16x8xbf16>
}

// Tests that nn.transpose works on f16, i32 and rank-0 tensors.
// CHECK-LABEL: func.func @transpose_types
func.func @transpose_types(%a: tensor<2x3x4xf16>, %b: tensor<3x5xi32>, %s: tensor<f32>)
    -> (tensor<4x2x3xf16>, tensor<5x3xi32>, tensor<f32>) {
  // CHECK: nn.transpose %{{.*}} perm = [2, 0, 1] : tensor<2x3x4xf16> -> tensor<4x2x3xf16>
  %0 = nn.transpose %a perm = [2, 0, 1] : tensor<2x3x4xf16> -> tensor<4x2x3xf16>
  // CHECK: nn.transpose %{{.*}} perm = [1, 0] : tensor<3x5xi32> -> tensor<5x3xi32>
  %1 = nn.transpose %b perm = [1, 0] : tensor<3x5xi32> -> tensor<5x3xi32>
  // CHECK: nn.transpose %{{.*}} perm = [] : tensor<f32> -> tensor<f32>
  %2 = nn.transpose %s perm = [] : tensor<f32> -> tensor<f32>
  return %0, %1, %2 : tensor<4x2x3xf16>, tensor<5x3xi32>, tensor<f32>
}

// Tests that nn.slice without strides prints none.
// CHECK-LABEL: func.func @slice_no_strides
func.func @slice_no_strides(%qkv: tensor<8x192xf32>) -> tensor<8x64xf32> {
  // CHECK: nn.slice %{{.*}} start = [0, 64] limit = [8, 128] : tensor<8x192xf32> -> tensor<8x64xf32>
  %0 = nn.slice %qkv start = [0, 64] limit = [8, 128] : tensor<8x192xf32> -> tensor<8x64xf32>
  return %0 : tensor<8x64xf32>
}

// Tests that nn.slice with strides rounds the result size up (ceil((limit - start) / stride)).
// CHECK-LABEL: func.func @slice_strides
func.func @slice_strides(%x: tensor<4x10xbf16>) -> tensor<2x3xbf16> {
  // CHECK: nn.slice %{{.*}} start = [0, 1] limit = [4, 8] strides = [2, 3] : tensor<4x10xbf16> -> tensor<2x3xbf16>
  %0 = nn.slice %x start = [0, 1] limit = [4, 8] strides = [2, 3] : tensor<4x10xbf16> -> tensor<2x3xbf16>
  return %0 : tensor<2x3xbf16>
}

// Tests that nn.slice allows an empty window (start == limit) and f16/i32 tensors.
// CHECK-LABEL: func.func @slice_types_and_empty
func.func @slice_types_and_empty(%a: tensor<4x8xf16>, %b: tensor<6xi32>)
    -> (tensor<0x8xf16>, tensor<2xi32>) {
  // CHECK: nn.slice %{{.*}} start = [2, 0] limit = [2, 8] : tensor<4x8xf16> -> tensor<0x8xf16>
  %0 = nn.slice %a start = [2, 0] limit = [2, 8] : tensor<4x8xf16> -> tensor<0x8xf16>
  // CHECK: nn.slice %{{.*}} start = [1] limit = [6] strides = [4] : tensor<6xi32> -> tensor<2xi32>
  %1 = nn.slice %b start = [1] limit = [6] strides = [4] : tensor<6xi32> -> tensor<2xi32>
  return %0, %1 : tensor<0x8xf16>, tensor<2xi32>
}

// Tests that nn.concat joins two tensors along the last dimension.
// CHECK-LABEL: func.func @concat_two
func.func @concat_two(%a: tensor<4x3xf32>, %b: tensor<4x5xf32>) -> tensor<4x8xf32> {
  // CHECK: nn.concat %{{.*}}, %{{.*}} dim = 1 : (tensor<4x3xf32>, tensor<4x5xf32>) -> tensor<4x8xf32>
  %0 = nn.concat %a, %b dim = 1 : (tensor<4x3xf32>, tensor<4x5xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// Tests that nn.concat joins three inputs along the first dimension.
// CHECK-LABEL: func.func @concat_three
func.func @concat_three(%a: tensor<1x8xbf16>, %b: tensor<2x8xbf16>, %c: tensor<3x8xbf16>)
    -> tensor<6x8xbf16> {
  // CHECK: nn.concat %{{.*}}, %{{.*}}, %{{.*}} dim = 0 : (tensor<1x8xbf16>, tensor<2x8xbf16>, tensor<3x8xbf16>) -> tensor<6x8xbf16>
  %0 = nn.concat %a, %b, %c dim = 0 : (tensor<1x8xbf16>, tensor<2x8xbf16>, tensor<3x8xbf16>) -> tensor<6x8xbf16>
  return %0 : tensor<6x8xbf16>
}

// Tests that nn.concat accepts a single input and f16/i32 tensors.
// CHECK-LABEL: func.func @concat_types
func.func @concat_types(%a: tensor<2x4xf16>, %b: tensor<3xi32>, %c: tensor<2xi32>)
    -> (tensor<2x4xf16>, tensor<5xi32>) {
  // CHECK: nn.concat %{{.*}} dim = 1 : (tensor<2x4xf16>) -> tensor<2x4xf16>
  %0 = nn.concat %a dim = 1 : (tensor<2x4xf16>) -> tensor<2x4xf16>
  // CHECK: nn.concat %{{.*}}, %{{.*}} dim = 0 : (tensor<3xi32>, tensor<2xi32>) -> tensor<5xi32>
  %1 = nn.concat %b, %c dim = 0 : (tensor<3xi32>, tensor<2xi32>) -> tensor<5xi32>
  return %0, %1 : tensor<2x4xf16>, tensor<5xi32>
}
