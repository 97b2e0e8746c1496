// RUN: tessel-opt %s -tessel-plan-memory -tessel-lower-to-runtime --split-input-file | FileCheck %s

// Tests that a function becomes an llvm.func over pointers (ctx, scratch,
// arguments, results) and an op one runtime call on planned pointers.
// CHECK-LABEL: llvm.func @tessel_fn_unary
// CHECK-SAME: (%[[CTX:.*]]: !llvm.ptr, %[[SCRATCH:.*]]: !llvm.ptr, %[[A:.*]]: !llvm.ptr, %[[OUT:.*]]: !llvm.ptr)
// CHECK: llvm.call @tessel_unary(%[[CTX]], %{{.*}}, %{{.*}}, %[[A]], %[[SCRATCH]], %{{.*}})
// CHECK: llvm.call @tessel_copy(%[[CTX]], %[[OUT]], %[[SCRATCH]], %{{.*}})
// CHECK: llvm.return
// CHECK-NOT: func.func
func.func @unary(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = nn.exp %a : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that a reshape is a view (no call) and a transpose one strided copy
// with the permuted input strides.
// (Constant arrays are module globals, printed before the function.)
// CHECK: llvm.mlir.global private constant @__tessel_i64s_{{.*}}(dense<[1, 2]> : tensor<2xi64>)
// CHECK-LABEL: llvm.func @tessel_fn_views
// CHECK-NOT: llvm.call @tessel_copy(
// CHECK: llvm.call @tessel_strided_copy
func.func @views(%a: tensor<8xf32>) -> tensor<2x4xf32> {
  %r = nn.reshape %a : tensor<8xf32> -> tensor<4x2xf32>
  %t = nn.transpose %r perm = [1, 0] : tensor<4x2xf32> -> tensor<2x4xf32>
  return %t : tensor<2x4xf32>
}

// -----

// Tests that a matmul passes batch, M, N, K and the shared-rhs flag.
// CHECK-LABEL: llvm.func @tessel_fn_matmul
// CHECK-DAG: %[[B:.*]] = llvm.mlir.constant(2 : i64) : i64
// CHECK-DAG: %[[M:.*]] = llvm.mlir.constant(3 : i64) : i64
// CHECK-DAG: %[[N:.*]] = llvm.mlir.constant(5 : i64) : i64
// CHECK-DAG: %[[K:.*]] = llvm.mlir.constant(4 : i64) : i64
// CHECK: llvm.call @tessel_matmul(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[B]], %[[M]], %[[N]], %[[K]],
func.func @matmul(%a: tensor<2x3x4xf32>, %b: tensor<4x5xf32>) -> tensor<2x3x5xf32> {
  %0 = nn.matmul %a, %b : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  return %0 : tensor<2x3x5xf32>
}

// -----

// Tests that nn.repeat becomes a loop over the layers that calls the layer's
// function on a parameter slice (l * 16 bytes) and alternates buffers.
// CHECK-LABEL: llvm.func @tessel_fn_layer
// CHECK-LABEL: llvm.func @tessel_fn_stack
// CHECK: scf.for %[[L:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args
// CHECK: arith.muli %[[L]], %{{.*}} : i64
// CHECK: llvm.select
// CHECK: llvm.call @tessel_fn_layer(
// CHECK: scf.yield
func.func private @layer(%h: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  %0 = nn.mul %h, %w : tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func @stack(%h: tensor<4xf32>, %w: tensor<3x4xf32>) -> tensor<4xf32> {
  %0 = nn.repeat @layer(%h) params(%w) : (tensor<4xf32>, tensor<3x4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that the model function gets the ABI: tessel_forward lays out the
// arena (param at 0, input at 64, label at 128, loss at 192, scratch of 128 at 256)
// and tessel_model_json describes it.
// CHECK: llvm.mlir.global private constant @__tessel_model_json
// CHECK-SAME: \22arena_bytes\22:384
// CHECK-SAME: \22name\22:\22w\22,\22offset\22:0,\22role\22:\22param\22
// CHECK-SAME: \22limit\22:3,\22name\22:\22label0\22,\22offset\22:128
// CHECK-LABEL: llvm.func @tessel_forward
// CHECK: llvm.call @tessel_fn_loss(
// CHECK-LABEL: llvm.func @tessel_model_json() -> !llvm.ptr
func.func @loss(%x: tensor<2x4xf32> {nn.input, nn.axes = ["batch", "embed"]},
                %y: tensor<2xi32> {nn.label, nn.axes = ["batch"]},
                %w: tensor<4x3xf32> {nn.param = "w", nn.init = #nn.init<zeros>, nn.axes = ["embed", "classes"]})
    -> tensor<f32> {
  %z = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %l = nn.cross_entropy %z, %y : (tensor<2x3xf32>, tensor<2xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
