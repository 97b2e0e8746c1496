// RUN: tessel-opt %s -tessel-plan-memory -tessel-lower-to-runtime --split-input-file | FileCheck %s

// Tests that a function becomes an llvm.func over pointers (ctx, scratch,
// arguments, results) and an op one runtime call on planned pointers: the
// scratch, or the result pointer for the value returned (no copy).
// CHECK-LABEL: llvm.func @tessel_fn_unary
// CHECK-SAME: (%[[CTX:.*]]: !llvm.ptr, %[[SCRATCH:.*]]: !llvm.ptr, %[[A:.*]]: !llvm.ptr, %[[OUT:.*]]: !llvm.ptr)
// CHECK: llvm.call @tessel_unary(%[[CTX]], %{{.*}}, %{{.*}}, %[[A]], %[[SCRATCH]], %{{.*}})
// CHECK: llvm.call @tessel_unary(%[[CTX]], %{{.*}}, %{{.*}}, %[[SCRATCH]], %[[OUT]], %{{.*}})
// CHECK-NOT: @tessel_copy
// CHECK: llvm.return
// CHECK-NOT: func.func
func.func @unary(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = nn.exp %a : tensor<4x8xf32>
  %1 = nn.tanh %0 : tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}

// -----

// Tests that a returned view of a scratch value, and a value returned a
// second time, are copied to their result pointers.
// CHECK-LABEL: llvm.func @tessel_fn_copies
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[SCRATCH:[^:]*]]: !llvm.ptr, %[[A:[^:]*]]: !llvm.ptr, %[[OUT0:[^:]*]]: !llvm.ptr, %[[OUT1:[^:]*]]: !llvm.ptr, %[[OUT2:[^:]*]]: !llvm.ptr)
// CHECK: llvm.call @tessel_unary(%[[CTX]], %{{.*}}, %{{.*}}, %[[A]], %[[SCRATCH]], %{{.*}})
// CHECK: llvm.call @tessel_unary(%[[CTX]], %{{.*}}, %{{.*}}, %[[A]], %[[OUT1]], %{{.*}})
// CHECK: llvm.call @tessel_copy(%[[CTX]], %[[OUT0]], %[[SCRATCH]], %{{.*}})
// CHECK: llvm.call @tessel_copy(%[[CTX]], %[[OUT2]], %[[OUT1]], %{{.*}})
func.func @copies(%a: tensor<2x8xf32>) -> (tensor<16xf32>, tensor<2x8xf32>, tensor<2x8xf32>) {
  %t = nn.tanh %a : tensor<2x8xf32>
  %e = nn.exp %a : tensor<2x8xf32>
  %r = nn.reshape %t : tensor<2x8xf32> -> tensor<16xf32>
  return %r, %e, %e : tensor<16xf32>, tensor<2x8xf32>, tensor<2x8xf32>
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

// Tests that a splat constant is one tessel_fill of its element count from
// one element in the .so (the host reads it: device memory need not be
// host-readable), and another constant one copy of all its bytes.
// CHECK: llvm.mlir.global private constant @[[ONE:__tessel_const_[0-9]+]]("\00\00\80?")
// CHECK-LABEL: llvm.func @tessel_fn_constants
// CHECK-DAG: %[[F32:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-DAG: %[[COUNT:.*]] = llvm.mlir.constant(24 : i64) : i64
// CHECK-DAG: %[[VALUE:.*]] = llvm.mlir.addressof @[[ONE]]
// CHECK: llvm.call @tessel_fill(%{{.*}}, %[[F32]], %{{.*}}, %[[COUNT]], %[[VALUE]])
// CHECK-DAG: %[[BYTES:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK: llvm.call @tessel_copy_to_device(%{{.*}}, %{{.*}}, %{{.*}}, %[[BYTES]])
// CHECK-NOT: llvm.call @tessel_strided_copy
func.func @constants() -> (tensor<4x6xf32>, tensor<2xf32>) {
  %one = nn.constant dense<1.0> : tensor<4x6xf32>
  %two = nn.constant dense<[1.0, 2.0]> : tensor<2xf32>
  return %one, %two : tensor<4x6xf32>, tensor<2xf32>
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

// Tests that a matmul_accumulate calls tessel_matmul_epilogue with beta 1,
// no epilogue and its accumulator as C, which its result is (in place).
// CHECK-LABEL: llvm.func @tessel_fn_matmul_accumulate
// CHECK-SAME: %[[CTX:[^:]*]]: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[A:[^:]*]]: !llvm.ptr, %[[B:[^:]*]]: !llvm.ptr, %[[G:[^:]*]]: !llvm.ptr
// CHECK-DAG: %[[BETA:.*]] = llvm.mlir.constant(1.000000e+00 : f64) : f64
// CHECK-DAG: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK: llvm.call @tessel_matmul_epilogue(%[[CTX]], %{{.*}}, %[[A]], %[[B]], %[[G]], {{.*}}, %[[BETA]], %{{[0-9]+}}, %[[NULL]])
// CHECK-NOT: @tessel_matmul(
func.func @matmul_accumulate(%a: tensor<6x4xf32>, %b: tensor<6x5xf32>, %g: tensor<4x5xf32>) -> tensor<4x5xf32> {
  %0 = nn.matmul_accumulate %a, %b transpose_lhs outs(%g) : (tensor<6x4xf32>, tensor<6x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

// Tests that a matmul_bias calls tessel_matmul_epilogue with beta 0, the
// bias epilogue and the bias's pointer.
// CHECK-LABEL: llvm.func @tessel_fn_matmul_bias
// CHECK-SAME: %[[CTX:[^:]*]]: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[A:[^:]*]]: !llvm.ptr, %[[W:[^:]*]]: !llvm.ptr, %[[BIAS:[^:]*]]: !llvm.ptr
// CHECK-DAG: %[[BETA:.*]] = llvm.mlir.constant(0.000000e+00 : f64) : f64
// CHECK: llvm.call @tessel_matmul_epilogue(%[[CTX]], %{{.*}}, %[[A]], %[[W]], %{{.*}}, {{.*}}, %[[BETA]], %{{[0-9]+}}, %[[BIAS]])
func.func @matmul_bias(%a: tensor<2x3x4xf32>, %w: tensor<4x5xf32>, %bias: tensor<5xf32>) -> tensor<2x3x5xf32> {
  %0 = nn.matmul_bias %a, %w, %bias : (tensor<2x3x4xf32>, tensor<4x5xf32>, tensor<5xf32>) -> tensor<2x3x5xf32>
  return %0 : tensor<2x3x5xf32>
}

// -----

// Tests that a matmul_bias_gelu calls tessel_matmul_epilogue_aux with the
// GELU_BIAS epilogue (2), the bias and its pre-activation result as aux,
// and that matmul_gelu_grad passes the DGELU epilogue (3), no bias and the
// GELU's input as aux.
// CHECK-LABEL: llvm.func @tessel_fn_matmul_gelu
// CHECK-SAME: %[[CTX:[^:]*]]: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[A:[^:]*]]: !llvm.ptr, %[[W:[^:]*]]: !llvm.ptr, %[[BIAS:[^:]*]]: !llvm.ptr, %[[DY:[^:]*]]: !llvm.ptr
// CHECK: %[[GELU:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK: llvm.call @tessel_matmul_epilogue_aux(%[[CTX]], %{{.*}}, %[[A]], %[[W]], %{{.*}}, {{.*}}, %[[GELU]], %[[BIAS]], %[[PRE:[^)]+]])
// CHECK: %[[DGELU:.*]] = llvm.mlir.constant(3 : i32) : i32
// CHECK: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK: llvm.call @tessel_matmul_epilogue_aux(%[[CTX]], %{{.*}}, %[[DY]], %[[W]], %{{.*}}, {{.*}}, %[[DGELU]], %[[NULL]], %[[PRE]])
func.func @matmul_gelu(%a: tensor<2x3x4xf32>, %w: tensor<4x8xf32>, %bias: tensor<8xf32>, %dy: tensor<2x3x4xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>) {
  %y, %pre = nn.matmul_bias_gelu %a, %w, %bias : (tensor<2x3x4xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>)
  %d = nn.matmul_gelu_grad %dy, %w, %pre : (tensor<2x3x4xf32>, tensor<4x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  return %y, %d : tensor<2x3x8xf32>, tensor<2x3x8xf32>
}

// -----

// Tests that a matmul_bias_grad calls tessel_matmul_epilogue_aux with beta
// 0, the BGRADB epilogue (4), no bias and its bias-gradient result as aux.
// CHECK-LABEL: llvm.func @tessel_fn_matmul_bias_grad
// CHECK-SAME: %[[CTX:[^:]*]]: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[X:[^:]*]]: !llvm.ptr, %[[DY:[^:]*]]: !llvm.ptr, %[[DW:[^:]*]]: !llvm.ptr, %[[DB:[^:]*]]: !llvm.ptr
// CHECK: %[[BGRADB:.*]] = llvm.mlir.constant(4 : i32) : i32
// CHECK-NEXT: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-NEXT: llvm.call @tessel_matmul_epilogue_aux(%[[CTX]], %{{.*}}, %[[X]], %[[DY]], %[[DW]], {{.*}}, %[[BGRADB]], %[[NULL]], %[[DB]])
func.func @matmul_bias_grad(%x: tensor<6x4xf32>, %dy: tensor<6x5xf32>) -> (tensor<4x5xf32>, tensor<5xf32>) {
  %dw, %db = nn.matmul_bias_grad %x, %dy transpose_lhs : (tensor<6x4xf32>, tensor<6x5xf32>) -> (tensor<4x5xf32>, tensor<5xf32>)
  return %dw, %db : tensor<4x5xf32>, tensor<5xf32>
}

// -----

// Tests that nn.repeat becomes a loop over the layers that calls the layer's
// function on a parameter slice (l * 16 bytes) and alternates buffers.
// CHECK-LABEL: llvm.func @tessel_fn_layer
// CHECK-LABEL: llvm.func @tessel_fn_stack
// CHECK: scf.for %[[L:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args
// CHECK: arith.muli %[[L]], %{{.*}} : i64
// CHECK: llvm.select
// CHECK-NOT: rng_stream
// CHECK: llvm.call @tessel_fn_layer(
// CHECK: scf.yield
// CHECK-NOT: rng_stream
// CHECK: llvm.return
func.func private @layer(%h: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  %0 = nn.mul %h, %w : tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func @stack(%h: tensor<4xf32>, %w: tensor<3x4xf32>) -> tensor<4xf32> {
  %0 = nn.repeat @layer(%h) params(%w) : (tensor<4xf32>, tensor<3x4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that a repeat whose layer draws random bits (here through a nested
// repeat) runs layer l on the random stream folded from its caller's and l,
// and gives the caller its stream back after the loop.
// CHECK-LABEL: llvm.func @tessel_fn_outer(
// CHECK-SAME: %[[CTX:[^:]*]]: !llvm.ptr
// CHECK: %[[CALLER:.*]] = llvm.call @tessel_get_rng_stream(%[[CTX]])
// CHECK: scf.for %[[L:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args
// CHECK: %[[STREAM:.*]] = llvm.call @tessel_fold_in(%[[CALLER]], %[[L]])
// CHECK: llvm.call @tessel_set_rng_stream(%[[CTX]], %[[STREAM]])
// CHECK: llvm.call @tessel_fn_inner(
// CHECK: scf.yield
// CHECK: llvm.call @tessel_set_rng_stream(%[[CTX]], %[[CALLER]])
func.func private @drop(%h: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  %0 = nn.mul %h, %w : tensor<4xf32>
  %1 = nn.dropout %0 rate = 0.5 seed = 1 : tensor<4xf32>
  return %1 : tensor<4xf32>
}
func.func private @inner(%h: tensor<4xf32>, %w: tensor<2x4xf32>) -> tensor<4xf32> {
  %0 = nn.repeat @drop(%h) params(%w) : (tensor<4xf32>, tensor<2x4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func @outer(%h: tensor<4xf32>, %w: tensor<3x2x4xf32>) -> tensor<4xf32> {
  %0 = nn.repeat @inner(%h) params(%w) : (tensor<4xf32>, tensor<3x2x4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that the model function gets the ABI: tessel_forward lays out the
// arena (param at 0, input at 64, label at 128, loss at 192, scratch of 64
// at 256: the logits; the loss is computed in its slot) and
// tessel_model_json describes it.
// CHECK: llvm.mlir.global private constant @__tessel_model_json
// CHECK-SAME: \22arena_bytes\22:320
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

// -----

// Tests that optimizer_step updates its inits in place through the _current
// entry (the update count and the rate are the context's step's as the
// update runs, so a captured step replays): the optimizer's constants are one
// constant global, its schedule another (kind 1 = warmup_cosine, lr 3e-4,
// min_lr 0, warmup 10, total 100), and the results are the inits' pointers
// (copied out from them).
// CHECK: llvm.mlir.global private constant @[[SCHED:__tessel_const_[0-9]+]]("\01\00\00\00\00\00\00\00a2U0*\A93?\00\00\00\00\00\00\00\00\0A\00\00\00\00\00\00\00d\00\00\00\00\00\00\00")
// CHECK: llvm.mlir.global private constant @[[OPT:__tessel_const_[0-9]+]]("\02\00
// CHECK-LABEL: llvm.func @tessel_fn_adamw
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[P:[^:]*]]: !llvm.ptr, %[[G:[^:]*]]: !llvm.ptr, %[[S:[^:]*]]: !llvm.ptr, %[[M:[^:]*]]: !llvm.ptr, %[[V:[^:]*]]: !llvm.ptr, %[[OUTP:[^:]*]]: !llvm.ptr, %[[OUTM:[^:]*]]: !llvm.ptr, %[[OUTV:[^:]*]]: !llvm.ptr)
// CHECK: %[[OPTPTR:.*]] = llvm.mlir.addressof @[[OPT]]
// CHECK: %[[SCHEDPTR:.*]] = llvm.mlir.addressof @[[SCHED]]
// CHECK-NOT: tessel_get_step
// CHECK: llvm.call @tessel_optimizer_update_current(%[[CTX]], %[[OPTPTR]], %[[SCHEDPTR]], %{{.*}}, %[[P]], %[[G]], %[[S]], %[[M]], %[[V]], %{{.*}})
// CHECK: llvm.call @tessel_copy(%[[CTX]], %[[OUTP]], %[[P]],
// CHECK: llvm.call @tessel_copy(%[[CTX]], %[[OUTM]], %[[M]],
// CHECK: llvm.call @tessel_copy(%[[CTX]], %[[OUTV]], %[[V]],
func.func @adamw(%p: tensor<4xf32>, %g: tensor<4xf32>, %s: tensor<f32>, %m: tensor<4xf32>, %v: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %p2, %m2, %v2 = nn.optimizer_step adamw %g, %s outs(%p, %m, %v : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {lr = 3.0e-4 : f64, schedule = #nn.lr_schedule<warmup_cosine>, warmup = 10 : i64, total_steps = 100 : i64} : tensor<4xf32>
  return %p2, %m2, %v2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that plain SGD passes null states, and accumulate adds into its init
// in place (tessel_binary with out == acc).
// CHECK-LABEL: llvm.func @tessel_fn_sgd_accumulate
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[P:[^:]*]]: !llvm.ptr, %[[G:[^:]*]]: !llvm.ptr, %[[S:[^:]*]]: !llvm.ptr, %[[ACC:[^:]*]]: !llvm.ptr,
// CHECK: %[[NULL0:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK: %[[NULL1:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK: llvm.call @tessel_optimizer_update_current(%[[CTX]], %{{.*}}, %{{.*}}, %{{.*}}, %[[P]], %[[G]], %[[S]], %[[NULL0]], %[[NULL1]], %{{.*}})
// CHECK: %[[ADD:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK: llvm.call @tessel_binary(%[[CTX]], %[[ADD]], %{{.*}}, %[[ACC]], %[[G]], %[[ACC]], %{{.*}})
func.func @sgd_accumulate(%p: tensor<4xf32>, %g: tensor<4xf32>, %s: tensor<f32>, %acc: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %p2 = nn.optimizer_step sgd %g, %s outs(%p : tensor<4xf32>) : tensor<4xf32>
  %a2 = nn.accumulate %g outs(%acc) : tensor<4xf32>
  return %p2, %a2 : tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that sum_squares zeroes its f32 result and accumulates one call per
// operand into it, and clip_scale reads it with max_norm and the grad scale.
// CHECK-LABEL: llvm.func @tessel_fn_clip
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[SCRATCH:[^:]*]]: !llvm.ptr, %[[A:[^:]*]]: !llvm.ptr, %[[B:[^:]*]]: !llvm.ptr, %[[GS:[^:]*]]: !llvm.ptr,
// CHECK: llvm.call @tessel_zero(%[[CTX]], %[[SCRATCH]], %{{.*}})
// CHECK: llvm.call @tessel_sum_squares(%[[CTX]], %{{.*}}, %[[A]], %{{.*}}, %[[SCRATCH]])
// CHECK: llvm.call @tessel_sum_squares(%[[CTX]], %{{.*}}, %[[B]], %{{.*}}, %[[SCRATCH]])
// CHECK: %[[MAX:.*]] = llvm.mlir.constant(5.000000e-01 : f64) : f64
// CHECK: llvm.call @tessel_clip_scale(%[[CTX]], %[[SCRATCH]], %[[MAX]], %[[GS]], %{{.*}})
func.func @clip(%a: tensor<4xf32>, %b: tensor<2xbf16>, %gs: tensor<f32>) -> tensor<f32> {
  %0 = nn.sum_squares %a, %b : (tensor<4xf32>, tensor<2xbf16>) -> tensor<f32>
  %1 = nn.clip_scale %0, %gs {max_norm = 0.5 : f64} : tensor<f32>
  return %1 : tensor<f32>
}

// -----

// Tests that slice_grad zeroes its result, then copies dy to the window: from
// element 1 (4 bytes) with stride 2.
// CHECK-LABEL: llvm.func @tessel_fn_slice_grad
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[SCRATCH:[^:]*]]: !llvm.ptr, %[[DY:[^:]*]]: !llvm.ptr, %[[OUT:[^:]*]]: !llvm.ptr)
// CHECK: %[[BYTES:.*]] = llvm.mlir.constant(20 : i64) : i64
// CHECK: llvm.call @tessel_zero(%[[CTX]], %[[OUT]], %[[BYTES]])
// CHECK: %[[FOUR:.*]] = llvm.mlir.constant(4 : i64) : i64
// CHECK: %[[FIRST:.*]] = llvm.getelementptr %[[OUT]][%[[FOUR]]]
// CHECK: llvm.call @tessel_strided_copy(%[[CTX]], %{{.*}}, %[[DY]], %[[FIRST]],
func.func @slice_grad(%dy: tensor<2xf32>) -> tensor<5xf32> {
  %0 = nn.slice_grad %dy start = [1] limit = [5] strides = [2] : tensor<2xf32> -> tensor<5xf32>
  return %0 : tensor<5xf32>
}

// -----

// Tests that rms_norm_grad calls the layer-norm gradient with a null dbeta
// and rms = 1, and equal is tessel_binary's TESSEL_EQUAL (4).
// CHECK-LABEL: llvm.func @tessel_fn_rms_equal
// CHECK: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK: %[[RMS:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK: llvm.call @tessel_layer_norm_grad(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[NULL]], %{{.*}}, %{{.*}}, %{{.*}}, %[[RMS]])
// CHECK: %[[EQ:.*]] = llvm.mlir.constant(4 : i32) : i32
// CHECK: llvm.call @tessel_binary(%{{.*}}, %[[EQ]],
func.func @rms_equal(%x: tensor<3x4xf32>, %g: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %dx, %dg = nn.rms_norm_grad %x, %g, %x : (tensor<3x4xf32>, tensor<4xf32>, tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<4xf32>)
  %e = nn.equal %g, %g : tensor<4xf32>
  return %dg, %e : tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that a reversed repeat runs layer 2 - i at iteration i: parameter
// slice (32 bytes) and stacked output slice (128 bytes) both at that
// layer, while the carried buffers alternate by iteration.
// CHECK-LABEL: llvm.func @tessel_fn_reversed(
// CHECK-SAME: %[[CTX:[^:]*]]: !llvm.ptr, %[[SCRATCH:[^:]*]]: !llvm.ptr, %[[H:[^:]*]]: !llvm.ptr, %[[W:[^:]*]]: !llvm.ptr, %[[OUT:[^:]*]]: !llvm.ptr)
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args
// CHECK:   %[[LAST:.*]] = arith.constant 2 : i64
// CHECK:   %[[LAYER:.*]] = arith.subi %[[LAST]], %[[I]] : i64
// CHECK:   %[[PARAM_BYTES:.*]] = arith.muli %[[LAYER]], %{{.*}} : i64
// CHECK:   %[[SLICE:.*]] = llvm.getelementptr %[[W]][%[[PARAM_BYTES]]]
// CHECK:   %[[STACK_BYTES:.*]] = arith.muli %[[LAYER]], %{{.*}} : i64
// CHECK:   %[[STACK:.*]] = llvm.getelementptr %{{.*}}[%[[STACK_BYTES]]]
// CHECK:   llvm.call @tessel_fn_keep(%[[CTX]], %{{.*}}, %{{.*}}, %[[SLICE]], %{{.*}}, %[[STACK]])
func.func private @keep(%h: tensor<4x8xf32>, %w: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %wb = nn.broadcast %w dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %m = nn.mul %h, %wb : tensor<4x8xf32>
  return %m, %h : tensor<4x8xf32>, tensor<4x8xf32>
}
func.func @reversed(%h: tensor<4x8xf32>, %w: tensor<3x8xf32>) -> tensor<3x4x8xf32> {
  %y, %hs = nn.repeat @keep(%h) params(%w) reverse : (tensor<4x8xf32>, tensor<3x8xf32>) -> (tensor<4x8xf32>, tensor<3x4x8xf32>)
  return %hs : tensor<3x4x8xf32>
}

// -----

// Tests that a repeat's outs are updated in place: the layer gets layer
// l's slice of the accumulator (32 bytes a layer) both as its argument
// and as its result, so returning the updated slice copies nothing; the
// bias gradient's GEMM inside adds into the slice (beta 1).
// CHECK-LABEL: llvm.func @tessel_fn_acc_layer(
// CHECK-SAME: %[[CTX:[^:]*]]: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[GIN:[^:]*]]: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[GOUT:[^:]*]]: !llvm.ptr, %{{[^:]*}}: !llvm.ptr)
// CHECK: %[[BETA:.*]] = llvm.mlir.constant(1.000000e+00 : f64) : f64
// CHECK: %[[BGRADB:.*]] = llvm.mlir.constant(4 : i32) : i32
// CHECK: llvm.call @tessel_matmul_epilogue_aux(%[[CTX]], %{{.*}}, %{{.*}}, %{{.*}}, %[[GIN]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[BETA]], %[[BGRADB]],
// CHECK: llvm.call @tessel_copy(%[[CTX]], %[[GOUT]], %[[GIN]],
// CHECK-LABEL: llvm.func @tessel_fn_outs(
// CHECK-SAME: %[[CTX:[^:]*]]: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[DY:[^:]*]]: !llvm.ptr, %[[X:[^:]*]]: !llvm.ptr, %[[G:[^:]*]]: !llvm.ptr,
// CHECK: scf.for
// CHECK:   %[[BYTES:.*]] = arith.muli %{{.*}}, %c32_i64 : i64
// CHECK:   %[[SLICE:.*]] = llvm.getelementptr %[[G]][%[[BYTES]]]
// CHECK:   llvm.call @tessel_fn_acc_layer(%[[CTX]], %{{.*}}, %{{.*}}, %{{.*}}, %[[SLICE]], %{{.*}}, %[[SLICE]], %{{.*}})
func.func private @acc_layer(%dy: tensor<2x4xf32>, %x: tensor<2x2xf32>, %g: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<4xf32>) {
  %g2, %db = nn.matmul_bias_grad %x, %dy transpose_lhs outs(%g) : (tensor<2x2xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<4xf32>)
  return %dy, %g2, %db : tensor<2x4xf32>, tensor<2x4xf32>, tensor<4xf32>
}
func.func @outs(%dy: tensor<2x4xf32>, %x: tensor<3x2x2xf32>, %g: tensor<3x2x4xf32>) -> (tensor<3x2x4xf32>, tensor<3x4xf32>) {
  %0:3 = nn.repeat @acc_layer(%dy) params(%x) outs(%g) reverse : (tensor<2x4xf32>, tensor<3x2x2xf32>, tensor<3x2x4xf32>) -> (tensor<2x4xf32>, tensor<3x2x4xf32>, tensor<3x4xf32>)
  return %0#1, %0#2 : tensor<3x2x4xf32>, tensor<3x4xf32>
}

// -----

// Tests that a bf16 GEMM summing into an f32 accumulator calls
// tessel_matmul_accumulate_f32 (bf16 operands, the f32 buffer updated in
// place): with null aux, and with the bias gradient (BGRADB, 4) written in
// f32 into the function's result.
// CHECK-LABEL: llvm.func @tessel_fn_accumulate_f32(
// CHECK-SAME: %[[CTX:[^:]*]]: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[X:[^:]*]]: !llvm.ptr, %[[DY:[^:]*]]: !llvm.ptr, %[[G:[^:]*]]: !llvm.ptr, %[[H:[^:]*]]: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[DB:[^:]*]]: !llvm.ptr)
// CHECK: %[[BF16:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-NEXT: llvm.call @tessel_matmul_accumulate_f32(%[[CTX]], %[[BF16]], %[[X]], %[[DY]], %[[G]], {{.*}}, %[[NULL]])
// CHECK: %[[BGRADB:.*]] = llvm.mlir.constant(4 : i32) : i32
// CHECK-NEXT: llvm.call @tessel_matmul_accumulate_f32(%[[CTX]], %{{.*}}, %[[X]], %[[DY]], %[[H]], {{.*}}, %[[BGRADB]], %[[DB]])
func.func @accumulate_f32(%x: tensor<8x4xbf16>, %dy: tensor<8x16xbf16>, %g: tensor<4x16xf32>, %h: tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<16xf32>) {
  %0 = nn.matmul_accumulate %x, %dy transpose_lhs outs(%g) : (tensor<8x4xbf16>, tensor<8x16xbf16>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %1, %2 = nn.matmul_bias_grad %x, %dy transpose_lhs outs(%h) : (tensor<8x4xbf16>, tensor<8x16xbf16>, tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<16xf32>)
  return %0, %1, %2 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<16xf32>
}

// -----

// Tests that a bf16 GEMM written in f32 (nn.matmul_f32, and
// nn.matmul_bias_grad with f32 results and no accumulator) calls
// tessel_matmul_f32 (ABI 15) with bf16 operands straight into the
// function's f32 results: with null aux, and with the bias gradient
// (BGRADB, 4) written in f32.
// CHECK-LABEL: llvm.func @tessel_fn_matmul_f32(
// CHECK-SAME: %[[CTX:[^:]*]]: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[X:[^:]*]]: !llvm.ptr, %[[DY:[^:]*]]: !llvm.ptr, %[[G:[^:]*]]: !llvm.ptr, %[[H:[^:]*]]: !llvm.ptr, %[[DB:[^:]*]]: !llvm.ptr)
// CHECK: %[[BF16:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-NEXT: llvm.call @tessel_matmul_f32(%[[CTX]], %[[BF16]], %[[X]], %[[DY]], %[[G]], {{.*}}, %[[NULL]])
// CHECK: %[[BGRADB:.*]] = llvm.mlir.constant(4 : i32) : i32
// CHECK-NEXT: llvm.call @tessel_matmul_f32(%[[CTX]], %{{.*}}, %[[X]], %[[DY]], %[[H]], {{.*}}, %[[BGRADB]], %[[DB]])
// CHECK-NOT: tessel_cast
func.func @matmul_f32(%x: tensor<8x4xbf16>, %dy: tensor<8x16xbf16>) -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<16xf32>) {
  %0 = nn.matmul_f32 %x, %dy transpose_lhs : (tensor<8x4xbf16>, tensor<8x16xbf16>) -> tensor<4x16xf32>
  %1, %2 = nn.matmul_bias_grad %x, %dy transpose_lhs : (tensor<8x4xbf16>, tensor<8x16xbf16>) -> (tensor<4x16xf32>, tensor<16xf32>)
  return %0, %1, %2 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<16xf32>
}

// -----

// Tests that a bf16 sum written in f32 calls tessel_reduce_f32 (ABI 16)
// with the input's dtype (bf16, 2) straight into the f32 result, and an
// unwidened sum tessel_reduce.
// CHECK-LABEL: llvm.func @tessel_fn_reduce_f32(
// CHECK-SAME: %[[CTX:[^:]*]]: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[X:[^:]*]]: !llvm.ptr, %[[S:[^:]*]]: !llvm.ptr, %[[N:[^:]*]]: !llvm.ptr)
// CHECK: %[[BF16:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK: llvm.call @tessel_reduce_f32(%[[CTX]], %{{.*}}, %[[BF16]], %[[X]], %[[S]],
// CHECK: llvm.call @tessel_reduce(%[[CTX]], %{{.*}}, %{{.*}}, %[[X]], %[[N]],
// CHECK-NOT: tessel_cast
func.func @reduce_f32(%x: tensor<8x16xbf16>) -> (tensor<16xf32>, tensor<16xbf16>) {
  %0 = nn.reduce_sum %x dims = [0] : tensor<8x16xbf16> -> tensor<16xf32>
  %1 = nn.reduce_sum %x dims = [0] : tensor<8x16xbf16> -> tensor<16xbf16>
  return %0, %1 : tensor<16xf32>, tensor<16xbf16>
}

// -----

// Tests that the f32 loss of bf16 logits and its gradient call the ABI 13
// entries with the logits' dtype (bf16, 2): the loss written in f32, the
// gradient in bf16 from an f32 dloss.
// CHECK-LABEL: llvm.func @tessel_fn_loss_f32(
// CHECK-SAME: %[[CTX:[^:]*]]: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[Z:[^:]*]]: !llvm.ptr, %[[Y:[^:]*]]: !llvm.ptr, %[[DL:[^:]*]]: !llvm.ptr, %[[L:[^:]*]]: !llvm.ptr, %[[G:[^:]*]]: !llvm.ptr)
// CHECK: %[[BF16:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK: llvm.call @tessel_cross_entropy_f32(%[[CTX]], %[[BF16]], %{{.*}}, %[[Z]], %[[Y]], %[[L]],
// CHECK: llvm.call @tessel_cross_entropy_grad_f32(%[[CTX]], %{{.*}}, %{{.*}}, %[[Z]], %[[Y]], %[[DL]], %[[G]],
func.func @loss_f32(%z: tensor<2x3xbf16>, %y: tensor<2xi32>, %dl: tensor<f32>) -> (tensor<f32>, tensor<2x3xbf16>) {
  %l = nn.cross_entropy %z, %y : (tensor<2x3xbf16>, tensor<2xi32>) -> tensor<f32>
  %g = nn.cross_entropy_grad %z, %y, %dl : (tensor<2x3xbf16>, tensor<2xi32>, tensor<f32>) -> tensor<2x3xbf16>
  return %l, %g : tensor<f32>, tensor<2x3xbf16>
}

// -----

// Tests that the loss and its gradient are one call with the logits'
// dtype (bf16, 2) and the loss's (f32, 0), the gradient's pointer the
// logits' (scratch offset 0) when it is written in place.
// CHECK-LABEL: llvm.func @tessel_fn_loss_with_grad(
// CHECK-SAME: %[[CTX:[^:]*]]: !llvm.ptr, %[[S:[^:]*]]: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[Y:[^:]*]]: !llvm.ptr, %[[DL:[^:]*]]: !llvm.ptr, %[[L:[^:]*]]: !llvm.ptr
// CHECK: llvm.call @tessel_unary
// CHECK-NEXT: %[[BF16:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK-NEXT: %[[F32:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK: llvm.call @tessel_cross_entropy_with_grad(%[[CTX]], %[[BF16]], %[[F32]], %{{.*}}, %[[S]], %[[Y]], %[[DL]], %[[L]], %[[S]],
func.func @loss_with_grad(%x: tensor<2x3xbf16>, %y: tensor<2xi32>, %dl: tensor<f32>) -> (tensor<f32>, tensor<2x3xbf16>) {
  %z = nn.exp %x : tensor<2x3xbf16>
  %l, %g = nn.cross_entropy_with_grad %z, %y, %dl in_place : (tensor<2x3xbf16>, tensor<2xi32>, tensor<f32>) -> (tensor<f32>, tensor<2x3xbf16>)
  %n = nn.neg %g : tensor<2x3xbf16>
  return %l, %n : tensor<f32>, tensor<2x3xbf16>
}

// -----

// Tests that consecutive optimizer steps with the same constants are one
// grouped update: five pointers a tensor (param, master or null, grad, the
// two states) in a stack array, the sizes in a constant array; a step with
// other constants (here its weight decay) is a call of its own.
// CHECK-LABEL: llvm.func @tessel_fn_grouped
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[P0:[^:]*]]: !llvm.ptr, %[[P1:[^:]*]]: !llvm.ptr, %[[P2:[^:]*]]: !llvm.ptr, %[[G0:[^:]*]]: !llvm.ptr, %[[G1:[^:]*]]: !llvm.ptr, %[[G2:[^:]*]]: !llvm.ptr, %[[S:[^:]*]]: !llvm.ptr, %[[M0:[^:]*]]: !llvm.ptr, %[[V0:[^:]*]]: !llvm.ptr, %[[M1:[^:]*]]: !llvm.ptr, %[[V1:[^:]*]]: !llvm.ptr, %[[M2:[^:]*]]: !llvm.ptr, %[[V2:[^:]*]]: !llvm.ptr
// CHECK: %[[TEN:.*]] = llvm.mlir.constant(10 : i64) : i64
// CHECK: %[[ARRAY:.*]] = llvm.alloca %[[TEN]] x !llvm.ptr
// CHECK: %[[SLOT0:.*]] = llvm.getelementptr %[[ARRAY]][0]
// CHECK: llvm.store %[[P0]], %[[SLOT0]]
// CHECK: %[[SLOT2:.*]] = llvm.getelementptr %[[ARRAY]][2]
// CHECK: llvm.store %[[G0]], %[[SLOT2]]
// CHECK: %[[SLOT5:.*]] = llvm.getelementptr %[[ARRAY]][5]
// CHECK: llvm.store %[[P1]], %[[SLOT5]]
// CHECK: %[[SLOT9:.*]] = llvm.getelementptr %[[ARRAY]][9]
// CHECK: llvm.store %[[V1]], %[[SLOT9]]
// CHECK: %[[COUNTS:.*]] = llvm.mlir.addressof @__tessel_i64s_
// CHECK: llvm.call @tessel_optimizer_update_group_current(%[[CTX]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[S]], %{{.*}}, %[[ARRAY]], %[[COUNTS]])
// CHECK: llvm.call @tessel_optimizer_update_current(%[[CTX]], %{{.*}}, %{{.*}}, %{{.*}}, %[[P2]], %[[G2]], %[[S]], %[[M2]], %[[V2]],
// CHECK-NOT: tessel_optimizer_update
// CHECK: llvm.return
func.func @grouped(%p0: tensor<4xf32>, %p1: tensor<2x3xf32>, %p2: tensor<4xf32>, %g0: tensor<4xf32>, %g1: tensor<2x3xf32>, %g2: tensor<4xf32>, %s: tensor<f32>, %m0: tensor<4xf32>, %v0: tensor<4xf32>, %m1: tensor<2x3xf32>, %v1: tensor<2x3xf32>, %m2: tensor<4xf32>, %v2: tensor<4xf32>) -> (tensor<4xf32>, tensor<2x3xf32>, tensor<4xf32>) {
  %a:3 = nn.optimizer_step adamw %g0, %s outs(%p0, %m0, %v0 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {lr = 3.0e-4 : f64, weight_decay = 0.1 : f64} : tensor<4xf32>
  %b:3 = nn.optimizer_step adamw %g1, %s outs(%p1, %m1, %v1 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {lr = 3.0e-4 : f64, weight_decay = 0.1 : f64} : tensor<2x3xf32>
  %c:3 = nn.optimizer_step adamw %g2, %s outs(%p2, %m2, %v2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {lr = 3.0e-4 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>
  return %a#0, %b#0, %c#0 : tensor<4xf32>, tensor<2x3xf32>, tensor<4xf32>
}

// -----

// Tests an f64 model's update (ABI 18): the sum of squares and the clip
// factor as f64 scalars through their f64 entries, and the f64 steps as
// one f64 group of four pointers a tensor (param, grad, the two states) —
// a single step too, where f32 would call tessel_optimizer_update_current.
// CHECK-LABEL: llvm.func @tessel_fn_update_f64
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[SCRATCH:[^:]*]]: !llvm.ptr, %[[P0:[^:]*]]: !llvm.ptr, %[[P1:[^:]*]]: !llvm.ptr, %[[G0:[^:]*]]: !llvm.ptr, %[[G1:[^:]*]]: !llvm.ptr, %[[GS:[^:]*]]: !llvm.ptr, %[[M0:[^:]*]]: !llvm.ptr, %[[V0:[^:]*]]: !llvm.ptr, %[[M1:[^:]*]]: !llvm.ptr, %[[V1:[^:]*]]: !llvm.ptr
// CHECK: llvm.call @tessel_zero(%[[CTX]], %[[SQ:[^,]*]], %{{.*}})
// CHECK: llvm.call @tessel_sum_squares_f64(%[[CTX]], %{{.*}}, %[[G0]], %{{.*}}, %[[SQ]])
// CHECK: llvm.call @tessel_sum_squares_f64(%[[CTX]], %{{.*}}, %[[G1]], %{{.*}}, %[[SQ]])
// CHECK: llvm.call @tessel_clip_scale_f64(%[[CTX]], %[[SQ]], %{{.*}}, %[[GS]], %[[SCALE:[^)]*]])
// CHECK: %[[TWO:.*]] = llvm.mlir.constant(2 : i64) : i64
// CHECK: %[[EIGHT:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK: %[[ARRAY:.*]] = llvm.alloca %[[EIGHT]] x !llvm.ptr
// CHECK: %[[SLOT1:.*]] = llvm.getelementptr %[[ARRAY]][1]
// CHECK: llvm.store %[[G0]], %[[SLOT1]]
// CHECK: %[[SLOT4:.*]] = llvm.getelementptr %[[ARRAY]][4]
// CHECK: llvm.store %[[P1]], %[[SLOT4]]
// CHECK: %[[SLOT7:.*]] = llvm.getelementptr %[[ARRAY]][7]
// CHECK: llvm.store %[[V1]], %[[SLOT7]]
// CHECK: llvm.call @tessel_optimizer_update_f64_group_current(%[[CTX]], %{{.*}}, %{{.*}}, %[[SCALE]], %[[TWO]], %[[ARRAY]], %{{.*}})
// CHECK-NOT: tessel_optimizer_update
// CHECK: llvm.return
func.func @update_f64(%p0: tensor<4xf64>, %p1: tensor<2x3xf64>, %g0: tensor<4xf64>, %g1: tensor<2x3xf64>, %gs: tensor<f64>, %m0: tensor<4xf64>, %v0: tensor<4xf64>, %m1: tensor<2x3xf64>, %v1: tensor<2x3xf64>) -> (tensor<4xf64>, tensor<2x3xf64>) {
  %ss = nn.sum_squares %g0, %g1 : (tensor<4xf64>, tensor<2x3xf64>) -> tensor<f64>
  %s = nn.clip_scale %ss, %gs {max_norm = 1.0 : f64} : tensor<f64>
  %a:3 = nn.optimizer_step adamw %g0, %s outs(%p0, %m0, %v0 : tensor<4xf64>, tensor<4xf64>, tensor<4xf64>) : tensor<4xf64>
  %b:3 = nn.optimizer_step adamw %g1, %s outs(%p1, %m1, %v1 : tensor<2x3xf64>, tensor<2x3xf64>, tensor<2x3xf64>) : tensor<2x3xf64>
  return %a#0, %b#0 : tensor<4xf64>, tensor<2x3xf64>
}

// -----

// Tests that add_norm calls tessel_add_layer_norm with both addends, gamma,
// beta, the sum and the norm's result over rows of the last dimension
// (rms 0), and norm_grad_add calls tessel_layer_norm_grad_add with the
// residual gradient before dx: null dbeta and rms 1 for an RMS norm, an
// unused dbeta still written (into the arena) for a layer norm.
// CHECK-LABEL: llvm.func @tessel_fn_residual_norms
// CHECK-SAME: %[[CTX:[^:]*]]: !llvm.ptr, %[[SCRATCH:[^:]*]]: !llvm.ptr, %[[H:[^:]*]]: !llvm.ptr, %[[O:[^:]*]]: !llvm.ptr, %[[G:[^:]*]]: !llvm.ptr, %[[B:[^:]*]]: !llvm.ptr, %[[DY:[^:]*]]: !llvm.ptr, %[[S:[^:]*]]: !llvm.ptr, %[[Y:[^:]*]]: !llvm.ptr, %[[DX:[^:]*]]: !llvm.ptr, %[[DG:[^:]*]]: !llvm.ptr, %[[DX2:[^:]*]]: !llvm.ptr, %[[DG2:[^:]*]]: !llvm.ptr
// CHECK-DAG: %[[ROWS:.*]] = llvm.mlir.constant(6 : i64) : i64
// CHECK-DAG: %[[COLS:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-DAG: %[[BF16:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK-DAG: %[[LN:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK: llvm.call @tessel_add_layer_norm(%[[CTX]], %[[BF16]], %[[H]], %[[O]], %[[G]], %[[B]], %[[S]], %[[Y]], %[[ROWS]], %[[COLS]], %{{.*}}, %[[LN]])
// CHECK: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK: %[[RMS:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK: llvm.call @tessel_layer_norm_grad_add(%[[CTX]], %{{.*}}, %[[S]], %[[G]], %[[DY]], %[[O]], %[[DX]], %[[DG]], %[[NULL]], %{{.*}}, %{{.*}}, %{{.*}}, %[[RMS]])
// CHECK: llvm.call @tessel_layer_norm_grad_add(%[[CTX]], %{{.*}}, %[[S]], %[[G]], %[[DY]], %[[DX]], %[[DX2]], %[[DG2]], %[[SCRATCH]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}})
func.func @residual_norms(%h: tensor<2x3x8xbf16>, %o: tensor<2x3x8xbf16>, %g: tensor<8xbf16>, %b: tensor<8xbf16>, %dy: tensor<2x3x8xbf16>) -> (tensor<2x3x8xbf16>, tensor<2x3x8xbf16>, tensor<2x3x8xbf16>, tensor<8xbf16>, tensor<2x3x8xbf16>, tensor<8xbf16>) {
  %s, %y = nn.add_norm %h, %o, %g, %b {epsilon = 1.0e-5 : f64} : (tensor<2x3x8xbf16>, tensor<2x3x8xbf16>, tensor<8xbf16>, tensor<8xbf16>) -> (tensor<2x3x8xbf16>, tensor<2x3x8xbf16>)
  %dx, %dg = nn.norm_grad_add %s, %g, %dy, %o {epsilon = 1.0e-6 : f64, rms} : (tensor<2x3x8xbf16>, tensor<8xbf16>, tensor<2x3x8xbf16>, tensor<2x3x8xbf16>) -> (tensor<2x3x8xbf16>, tensor<8xbf16>)
  %dx2, %dg2, %db2 = nn.norm_grad_add %s, %g, %dy, %dx {epsilon = 1.0e-5 : f64} : (tensor<2x3x8xbf16>, tensor<8xbf16>, tensor<2x3x8xbf16>, tensor<2x3x8xbf16>) -> (tensor<2x3x8xbf16>, tensor<8xbf16>, tensor<8xbf16>)
  return %s, %y, %dx, %dg, %dx2, %dg2 : tensor<2x3x8xbf16>, tensor<2x3x8xbf16>, tensor<2x3x8xbf16>, tensor<8xbf16>, tensor<2x3x8xbf16>, tensor<8xbf16>
}

// -----

// Tests that norm gradients of bf16 rows with f32 parameter gradients call
// the ABI 14 entries with the rows' dtype (bf16, 2); the bf16 ones keep
// tessel_layer_norm_grad.
// CHECK-LABEL: llvm.func @tessel_fn_norm_grads_f32(
// CHECK-SAME: %[[CTX:[^:]*]]: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[X:[^:]*]]: !llvm.ptr, %[[G:[^:]*]]: !llvm.ptr, %[[DY:[^:]*]]: !llvm.ptr, %[[DX:[^:]*]]: !llvm.ptr, %[[DG:[^:]*]]: !llvm.ptr, %[[DB:[^:]*]]: !llvm.ptr, %[[DX2:[^:]*]]: !llvm.ptr, %[[DG2:[^:]*]]: !llvm.ptr, %[[DX3:[^:]*]]: !llvm.ptr, %[[DG3:[^:]*]]: !llvm.ptr)
// CHECK: %[[BF16:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK: llvm.call @tessel_layer_norm_grad_f32(%[[CTX]], %[[BF16]], %[[X]], %[[G]], %[[DY]], %[[DX]], %[[DG]], %[[DB]],
// CHECK: llvm.call @tessel_layer_norm_grad_add_f32(%[[CTX]], %{{.*}}, %[[X]], %[[G]], %[[DY]], %[[DX]], %[[DX2]], %[[DG2]],
// CHECK: llvm.call @tessel_layer_norm_grad(%[[CTX]], %{{.*}}, %[[X]], %[[G]], %[[DY]], %[[DX3]], %[[DG3]],
func.func @norm_grads_f32(%x: tensor<4x8xbf16>, %g: tensor<8xbf16>, %dy: tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>, tensor<4x8xbf16>, tensor<8xf32>, tensor<4x8xbf16>, tensor<8xbf16>) {
  %dx, %dg, %db = nn.layer_norm_grad %x, %g, %dy : (tensor<4x8xbf16>, tensor<8xbf16>, tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>)
  %dx2, %dg2 = nn.norm_grad_add %x, %g, %dy, %dx {epsilon = 1.0e-6 : f64, rms} : (tensor<4x8xbf16>, tensor<8xbf16>, tensor<4x8xbf16>, tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<8xf32>)
  %dx3, %dg3 = nn.rms_norm_grad %x, %g, %dy : (tensor<4x8xbf16>, tensor<8xbf16>, tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<8xbf16>)
  return %dx, %dg, %db, %dx2, %dg2, %dx3, %dg3 : tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>, tensor<4x8xbf16>, tensor<8xf32>, tensor<4x8xbf16>, tensor<8xbf16>
}

// -----

// Tests that an embedding's table gradient calls tessel_embedding_grad with
// dout's dtype (bf16, 2), and tessel_embedding_grad_f32 for an f32 table
// of a bf16 dout (ABI 14): ids i32 (4), 6 of them, the whole table of 5
// rows of 4.
// CHECK-LABEL: llvm.func @tessel_fn_embedding_grads(
// CHECK-SAME: %[[CTX:[^:]*]]: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[IDS:[^:]*]]: !llvm.ptr, %[[DH:[^:]*]]: !llvm.ptr, %[[T16:[^:]*]]: !llvm.ptr, %[[T32:[^:]*]]: !llvm.ptr)
// CHECK: %[[BF16:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK-NEXT: %[[I32:.*]] = llvm.mlir.constant(4 : i32) : i32
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(6 : i64) : i64
// CHECK-NEXT: %[[V:.*]] = llvm.mlir.constant(5 : i64) : i64
// CHECK-NEXT: %[[H:.*]] = llvm.mlir.constant(4 : i64) : i64
// CHECK-NEXT: llvm.call @tessel_embedding_grad(%[[CTX]], %[[BF16]], %[[I32]], %[[IDS]], %[[DH]], %[[T16]], %[[N]], %[[V]], %[[H]],
// CHECK: %[[BF16B:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK: llvm.call @tessel_embedding_grad_f32(%[[CTX]], %[[BF16B]], %{{[^,]*}}, %[[IDS]], %[[DH]], %[[T32]],
func.func @embedding_grads(%ids: tensor<6xi32>, %dh: tensor<6x4xbf16>) -> (tensor<5x4xbf16>, tensor<5x4xf32>) {
  %t16 = nn.embedding_grad %ids, %dh : (tensor<6xi32>, tensor<6x4xbf16>) -> tensor<5x4xbf16>
  %t32 = nn.embedding_grad %ids, %dh : (tensor<6xi32>, tensor<6x4xbf16>) -> tensor<5x4xf32>
  return %t16, %t32 : tensor<5x4xbf16>, tensor<5x4xf32>
}

// -----

// Tests that attention with its log-sum-exp calls tessel_attention_lse,
// that its gradient reads the output and log-sum-exp the forward wrote
// (tessel_attention_grad_lse), and that plain attention keeps
// tessel_attention.
// CHECK-LABEL: llvm.func @tessel_fn_attention_lse
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[SCRATCH:[^:]*]]: !llvm.ptr, %[[Q:[^:]*]]: !llvm.ptr, %[[DO:[^:]*]]: !llvm.ptr,
// CHECK: llvm.call @tessel_attention(%[[CTX]], %{{.*}}, %[[Q]], %[[Q]], %[[Q]],
// CHECK: llvm.call @tessel_attention_lse(%[[CTX]], %{{[^,]*}}, %[[Q]], %[[Q]], %[[Q]], %[[O:[^,]*]], %[[LSE:[^,]*]],
// CHECK: llvm.call @tessel_attention_grad_lse(%[[CTX]], %{{[^,]*}}, %[[Q]], %[[Q]], %[[Q]], %[[O]], %[[LSE]], %[[DO]],
func.func @attention_lse(%q: tensor<1x4x2x8xf32>, %do: tensor<1x4x2x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) {
  %p = nn.attention %q, %q, %q causal : (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) -> tensor<1x4x2x8xf32>
  %o, %lse = nn.attention %q, %q, %q causal lse : (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x2x4xf32>)
  %dq, %dk, %dv = nn.attention_grad %q, %q, %q, %o, %lse, %do causal : (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x2x4xf32>, tensor<1x4x2x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>)
  return %p, %dq, %dv : tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>
}

// -----

// Tests that attention over a sliding window calls tessel_attention_window
// (with and without its log-sum-exp: a null pointer then) and its gradient
// tessel_attention_grad_window, the window last.
// CHECK-LABEL: llvm.func @tessel_fn_attention_window
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[SCRATCH:[^:]*]]: !llvm.ptr, %[[Q:[^:]*]]: !llvm.ptr, %[[DO:[^:]*]]: !llvm.ptr,
// CHECK-DAG: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-DAG: %[[W:.*]] = llvm.mlir.constant(3 : i64) : i64
// CHECK: llvm.call @tessel_attention_window(%[[CTX]], %{{[^,]*}}, %[[Q]], %[[Q]], %[[Q]], %{{[^,]*}}, %[[NULL]], {{.*}}, %[[W]]) :
// CHECK: %[[W2:.*]] = llvm.mlir.constant(3 : i64) : i64
// CHECK: llvm.call @tessel_attention_window(%[[CTX]], %{{[^,]*}}, %[[Q]], %[[Q]], %[[Q]], %[[O:[^,]*]], %[[LSE:[^,]*]], {{.*}}, %[[W2]]) :
// CHECK: %[[W3:.*]] = llvm.mlir.constant(3 : i64) : i64
// CHECK: llvm.call @tessel_attention_grad_window(%[[CTX]], %{{[^,]*}}, %[[Q]], %[[Q]], %[[Q]], %[[O]], %[[LSE]], %[[DO]], {{.*}}, %[[W3]]) :
func.func @attention_window(%q: tensor<1x4x2x8xf32>, %do: tensor<1x4x2x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) {
  %p = nn.attention %q, %q, %q causal window 3 : (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) -> tensor<1x4x2x8xf32>
  %o, %lse = nn.attention %q, %q, %q causal window 3 lse : (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x2x4xf32>)
  %dq, %dk, %dv = nn.attention_grad %q, %q, %q, %o, %lse, %do causal window 3 : (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x2x4xf32>, tensor<1x4x2x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>)
  return %p, %dq, %dv : tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>
}

// -----

// Tests that soft-capped attention calls tessel_attention_softcap and its
// gradient tessel_attention_grad_softcap, the window (0 without one) and
// then the cap last.
// CHECK-LABEL: llvm.func @tessel_fn_attention_softcap
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[SCRATCH:[^:]*]]: !llvm.ptr, %[[Q:[^:]*]]: !llvm.ptr, %[[DO:[^:]*]]: !llvm.ptr,
// CHECK: %[[W:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK: %[[C:.*]] = llvm.mlir.constant(5.000000e+01 : f64) : f64
// CHECK: llvm.call @tessel_attention_softcap(%[[CTX]], %{{[^,]*}}, %[[Q]], %[[Q]], %[[Q]], %[[O:[^,]*]], %[[LSE:[^,]*]], {{.*}}, %[[W]], %[[C]]) :
// CHECK: %[[W2:.*]] = llvm.mlir.constant(3 : i64) : i64
// CHECK: %[[C2:.*]] = llvm.mlir.constant(3.000000e+01 : f64) : f64
// CHECK: llvm.call @tessel_attention_grad_softcap(%[[CTX]], %{{[^,]*}}, %[[Q]], %[[Q]], %[[Q]], %[[O]], %[[LSE]], %[[DO]], {{.*}}, %[[W2]], %[[C2]]) :
// CHECK-NOT: tessel_attention_window
func.func @attention_softcap(%q: tensor<1x4x2x8xf32>, %do: tensor<1x4x2x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) {
  %o, %lse = nn.attention %q, %q, %q causal softcap 50.0 lse : (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x2x4xf32>)
  %dq, %dk, %dv = nn.attention_grad %q, %q, %q, %o, %lse, %do causal window 3 softcap 30.0 : (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x2x4xf32>, tensor<1x4x2x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>)
  return %o, %dq : tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>
}

// -----

// Tests that a repeat whose layer has per-layer attributes runs layer l as
// the model's layer l (tessel_set_layer, the caller's restored after the
// loop), and that its attention, attention gradient and rope read their
// layer's window and theta from a constant table by tessel_get_layer.
// CHECK-LABEL: llvm.func @tessel_fn_local
// CHECK: %[[L:.*]] = llvm.call @tessel_get_layer(%{{.*}}) : (!llvm.ptr) -> i64
// CHECK: %[[WS:.*]] = llvm.mlir.addressof @__tessel_i64s_{{[0-9]+}} : !llvm.ptr
// CHECK: %[[WP:.*]] = llvm.getelementptr %[[WS]][%[[L]]] : (!llvm.ptr, i64) -> !llvm.ptr, i64
// CHECK: %[[W:.*]] = llvm.load %[[WP]] : !llvm.ptr -> i64
// CHECK: llvm.call @tessel_attention_window({{.*}}, %[[W]]) :
// CHECK: llvm.call @tessel_get_layer
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> i64
// CHECK: llvm.call @tessel_attention_grad_window(
// CHECK: %[[L3:.*]] = llvm.call @tessel_get_layer
// CHECK: %[[TP:.*]] = llvm.getelementptr %{{.*}}[%[[L3]]] : (!llvm.ptr, i64) -> !llvm.ptr, f64
// CHECK: %[[T:.*]] = llvm.load %[[TP]] : !llvm.ptr -> f64
// CHECK: llvm.call @tessel_rope({{.*}}, %[[T]], {{.*}}) :
// CHECK-LABEL: llvm.func @tessel_fn_layers(
// CHECK-SAME: %[[CTX:[^:]*]]: !llvm.ptr
// CHECK: %[[CALLER:.*]] = llvm.call @tessel_get_layer(%[[CTX]])
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args
// CHECK: llvm.call @tessel_set_layer(%[[CTX]], %[[I]])
// CHECK: llvm.call @tessel_fn_local(
// CHECK: scf.yield
// CHECK: llvm.call @tessel_set_layer(%[[CTX]], %[[CALLER]])
func.func private @local(%q: tensor<1x4x2x8xf32>, %w: tensor<1x4x2x8xf32>) -> tensor<1x4x2x8xf32> {
  %x = nn.mul %q, %w : tensor<1x4x2x8xf32>
  %o, %lse = nn.attention %x, %x, %x causal lse {layer_windows = array<i64: 3, 0>} : (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x2x4xf32>)
  %dq, %dk, %dv = nn.attention_grad %x, %x, %x, %o, %lse, %o causal {layer_windows = array<i64: 3, 0>} : (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x2x4xf32>, tensor<1x4x2x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>)
  %r = nn.rope %dq {layer_thetas = array<f64: 10000.0, 1000000.0>} : tensor<1x4x2x8xf32>
  return %r : tensor<1x4x2x8xf32>
}
func.func @layers(%q: tensor<1x4x2x8xf32>, %w: tensor<2x1x4x2x8xf32>) -> tensor<1x4x2x8xf32> {
  %0 = nn.repeat @local(%q) params(%w) : (tensor<1x4x2x8xf32>, tensor<2x1x4x2x8xf32>) -> tensor<1x4x2x8xf32>
  return %0 : tensor<1x4x2x8xf32>
}

// -----

// Tests that a concat copies only the inputs the memory plan did not
// compute in place: the matmul writes its product at the concat's start
// in scratch, and the one copy is the argument's, 256 bytes in.
// CHECK-LABEL: llvm.func @tessel_fn_partly_in_place(
// CHECK-SAME: %[[CTX:[^:]*]]: !llvm.ptr, %[[SCRATCH:[^:]*]]: !llvm.ptr, %[[X:[^:]*]]: !llvm.ptr, %[[V:[^:]*]]: !llvm.ptr,
// CHECK: llvm.call @tessel_matmul(%[[CTX]], %{{.*}}, %[[X]], %[[X]], %[[SCRATCH]],
// CHECK: %[[AT:.*]] = llvm.mlir.constant(256 : i64)
// CHECK-NEXT: %[[DST:.*]] = llvm.getelementptr %[[SCRATCH]][%[[AT]]]
// CHECK: llvm.call @tessel_strided_copy(%[[CTX]], %{{.*}}, %[[V]], %[[DST]],
// CHECK-NOT: tessel_strided_copy
// CHECK: llvm.call @tessel_unary
func.func @partly_in_place(%x: tensor<4x8xf32>, %v: tensor<8xf32>) -> tensor<72xf32> {
  %0 = nn.matmul %x, %x transpose_lhs : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %1 = nn.reshape %0 : tensor<8x8xf32> -> tensor<64xf32>
  %2 = nn.concat %1, %v dim = 0 : (tensor<64xf32>, tensor<8xf32>) -> tensor<72xf32>
  %3 = nn.exp %2 : tensor<72xf32>
  return %3 : tensor<72xf32>
}

// -----

// Tests that a binary op reading a broadcast the memory plan made a view
// calls tessel_binary_broadcast on the broadcast's input, no copy: a bias
// per column as the right operand (layout 0, [12, 8]: the result's leading
// dimensions are the rows), and a row statistic as the left operand of a
// sub (TESSEL_BROADCAST_ROWS | TESSEL_BROADCAST_B_FIRST = 3, [3, 32]).
// CHECK-LABEL: llvm.func @tessel_fn_broadcast_views
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[X:[^:]*]]: !llvm.ptr, %[[B:[^:]*]]: !llvm.ptr, %[[R:[^:]*]]: !llvm.ptr,
// CHECK-NOT: tessel_strided_copy
// CHECK: %[[ADD:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK: %[[ROWS:.*]] = llvm.mlir.constant(12 : i64) : i64
// CHECK: %[[COLS:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK: %[[COLUMNS:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK: llvm.call @tessel_binary_broadcast(%[[CTX]], %[[ADD]], %{{.*}}, %[[X]], %[[B]], %{{.*}}, %[[ROWS]], %[[COLS]], %[[COLUMNS]])
// CHECK: %[[SUB:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK: %[[ROWS2:.*]] = llvm.mlir.constant(3 : i64) : i64
// CHECK: %[[COLS2:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK: %[[FIRST:.*]] = llvm.mlir.constant(3 : i32) : i32
// CHECK: llvm.call @tessel_binary_broadcast(%[[CTX]], %[[SUB]], %{{.*}}, %{{.*}}, %[[R]], %{{.*}}, %[[ROWS2]], %[[COLS2]], %[[FIRST]])
// CHECK-NOT: tessel_strided_copy
func.func @broadcast_views(%x: tensor<3x4x8xf32>, %b: tensor<8xf32>, %r: tensor<3xf32>) -> tensor<3x4x8xf32> {
  %bb = nn.broadcast %b dims = [2] : tensor<8xf32> -> tensor<3x4x8xf32>
  %0 = nn.add %x, %bb : tensor<3x4x8xf32>
  %rb = nn.broadcast %r dims = [0] : tensor<3xf32> -> tensor<3x4x8xf32>
  %1 = nn.sub %rb, %0 : tensor<3x4x8xf32>
  return %1 : tensor<3x4x8xf32>
}

// -----

// Tests that rope over [B, C, S, H, D] calls tessel_rope with the leading
// dimensions folded into one (outer = 2·3), the positions, heads and head
// dimension, theta, the layout and direction flags, and no scaling (0s).
// CHECK-LABEL: llvm.func @tessel_fn_rope
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[SCRATCH:[^:]*]]: !llvm.ptr, %[[X:[^:]*]]: !llvm.ptr, %[[Y:[^:]*]]: !llvm.ptr)
// CHECK-DAG: %[[BF16:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK-DAG: %[[OUTER:.*]] = llvm.mlir.constant(6 : i64) : i64
// CHECK-DAG: %[[S:.*]] = llvm.mlir.constant(5 : i64) : i64
// CHECK-DAG: %[[H:.*]] = llvm.mlir.constant(4 : i64) : i64
// CHECK-DAG: %[[D:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-DAG: %[[THETA:.*]] = llvm.mlir.constant(5.000000e+05 : f64) : f64
// CHECK-DAG: %[[YES:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-DAG: %[[NO:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-COUNT-4: llvm.mlir.constant(0.000000e+00 : f64) : f64
// CHECK: llvm.call @tessel_rope(%[[CTX]], %[[BF16]], %[[X]], %[[Y]], %[[OUTER]], %[[S]], %[[H]], %[[D]], %[[THETA]], %[[YES]], %[[NO]], %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^)]*}})
func.func @rope(%x: tensor<2x3x5x4x8xbf16>) -> tensor<2x3x5x4x8xbf16> {
  %y = nn.rope %x interleaved {theta = 500000.0 : f64} : tensor<2x3x5x4x8xbf16>
  return %y : tensor<2x3x5x4x8xbf16>
}

// -----

// Tests that YaRN's rope calls tessel_rope_yarn with its factor, betas,
// original context and truncate after the flags.
// CHECK-LABEL: llvm.func @tessel_fn_rope_yarn
// CHECK-DAG: %[[F:.*]] = llvm.mlir.constant(4.000000e+00 : f64) : f64
// CHECK-DAG: %[[FAST:.*]] = llvm.mlir.constant(3.200000e+01 : f64) : f64
// CHECK-DAG: %[[SLOW:.*]] = llvm.mlir.constant(1.000000e+00 : f64) : f64
// CHECK-DAG: %[[ORIG:.*]] = llvm.mlir.constant(3.276800e+04 : f64) : f64
// CHECK: %[[TRUNC:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: llvm.call @tessel_rope_yarn({{.*}}, %[[F]], %[[FAST]], %[[SLOW]], %[[ORIG]], %[[TRUNC]])
// CHECK-NOT: @tessel_rope(
func.func @rope_yarn(%x: tensor<2x5x4x8xf32>) -> tensor<2x5x4x8xf32> {
  %y = nn.rope %x {theta = 1000000.0 : f64, yarn = array<f64: 4.0, 32.0, 1.0, 32768.0, 0.0>} : tensor<2x5x4x8xf32>
  return %y : tensor<2x5x4x8xf32>
}

// -----

// Tests that a partial rope with LongRoPE's factors calls
// tessel_rope_factors with the rotated width after the head's, the
// factors' constant table (their f64 bits: 1.0 and 1.5) and the attention
// factor, and that a partial rope without factors passes null and 1.
// CHECK-DAG: llvm.mlir.global private constant @__tessel_i64s_{{[0-9]+}}(dense<[4607182418800017408, 4609434218613702656]> : tensor<2xi64>)
// CHECK-LABEL: llvm.func @tessel_fn_rope_partial
// CHECK-DAG: %[[D:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-DAG: %[[R:.*]] = llvm.mlir.constant(4 : i64) : i64
// CHECK-DAG: %[[TABLE:.*]] = llvm.mlir.addressof @__tessel_i64s_{{[0-9]+}} : !llvm.ptr
// CHECK-DAG: %[[A:.*]] = llvm.mlir.constant(1.190000e+00 : f64) : f64
// CHECK: llvm.call @tessel_rope_factors({{.*}}, %[[D]], %[[R]], {{.*}}, %[[TABLE]], %[[A]])
// CHECK-DAG: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-DAG: %[[ONE:.*]] = llvm.mlir.constant(1.000000e+00 : f64) : f64
// CHECK: llvm.call @tessel_rope_factors({{.*}}, %[[NULL]], %[[ONE]])
// CHECK-NOT: @tessel_rope(
func.func @rope_partial(%x: tensor<2x5x3x8xf32>) -> tensor<2x5x3x8xf32> {
  %y = nn.rope %x {rotary_dim = 4 : i64, longrope = array<f64: 1.0, 1.5>, attention_factor = 1.19 : f64} : tensor<2x5x3x8xf32>
  %z = nn.rope %y inverse {rotary_dim = 6 : i64} : tensor<2x5x3x8xf32>
  return %z : tensor<2x5x3x8xf32>
}

// -----

// Tests that masking a loss's ignored labels is one call: the labels' dtype
// (i64, 5), the weights' (f32, 0), the ignore_index and the label count.
// CHECK-LABEL: llvm.func @tessel_fn_mask_labels(
// CHECK-SAME: %[[CTX:[^:]*]]: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[Y:[^:]*]]: !llvm.ptr, %[[SAFE:[^:]*]]: !llvm.ptr, %[[W:[^:]*]]: !llvm.ptr)
// CHECK-DAG: %[[I64:.*]] = llvm.mlir.constant(5 : i32) : i32
// CHECK-DAG: %[[F32:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-DAG: %[[IGNORE:.*]] = llvm.mlir.constant(-100 : i64) : i64
// CHECK-DAG: %[[N:.*]] = llvm.mlir.constant(6 : i64) : i64
// CHECK: llvm.call @tessel_mask_labels(%[[CTX]], %[[I64]], %[[F32]], %[[Y]], %[[IGNORE]], %[[SAFE]], %[[W]], %[[N]])
func.func @mask_labels(%y: tensor<2x3xi64>) -> (tensor<2x3xi64>, tensor<2x3xf32>) {
  %safe, %w = nn.mask_labels %y ignore_index -100 : (tensor<2x3xi64>) -> (tensor<2x3xi64>, tensor<2x3xf32>)
  return %safe, %w : tensor<2x3xi64>, tensor<2x3xf32>
}

// -----

// Tests that a loss with options, its gradient and the two in one call the
// _smoothed entries (ABI 28): the logits' dtype, the loss's, the labels',
// then the cap (0: none) and the label smoothing (0: none) last.
// CHECK-LABEL: llvm.func @tessel_fn_loss_options
// CHECK: %[[C1:.*]] = llvm.mlir.constant(3.000000e+01 : f64) : f64
// CHECK-NEXT: %[[E1:.*]] = llvm.mlir.constant(0.000000e+00 : f64) : f64
// CHECK-NEXT: llvm.call @tessel_cross_entropy_smoothed({{.*}}, %[[C1]], %[[E1]])
// CHECK: %[[C2:.*]] = llvm.mlir.constant(0.000000e+00 : f64) : f64
// CHECK-NEXT: %[[E2:.*]] = llvm.mlir.constant(1.000000e-01 : f64) : f64
// CHECK-NEXT: llvm.call @tessel_cross_entropy_grad_smoothed({{.*}}, %[[C2]], %[[E2]])
// CHECK: %[[C3:.*]] = llvm.mlir.constant(3.000000e+01 : f64) : f64
// CHECK-NEXT: %[[E3:.*]] = llvm.mlir.constant(2.000000e-01 : f64) : f64
// CHECK-NEXT: llvm.call @tessel_cross_entropy_with_grad_smoothed({{.*}}, %[[C3]], %[[E3]])
// CHECK-NOT: @tessel_cross_entropy(
func.func @loss_options(%z: tensor<4x6xf32>, %y: tensor<4xi32>, %d: tensor<f32>) -> (tensor<f32>, tensor<4x6xf32>, tensor<f32>, tensor<4x6xf32>) {
  %l = nn.cross_entropy %z, %y {logit_softcap = 30.0 : f64} : (tensor<4x6xf32>, tensor<4xi32>) -> tensor<f32>
  %g = nn.cross_entropy_grad %z, %y, %d {label_smoothing = 0.1 : f64} : (tensor<4x6xf32>, tensor<4xi32>, tensor<f32>) -> tensor<4x6xf32>
  %l2, %g2 = nn.cross_entropy_with_grad %z, %y, %d {label_smoothing = 0.2 : f64, logit_softcap = 30.0 : f64} : (tensor<4x6xf32>, tensor<4xi32>, tensor<f32>) -> (tensor<f32>, tensor<4x6xf32>)
  return %l, %g, %l2, %g2 : tensor<f32>, tensor<4x6xf32>, tensor<f32>, tensor<4x6xf32>
}
