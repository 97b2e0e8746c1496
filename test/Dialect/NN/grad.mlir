// RUN: tessel-opt %s | tessel-opt | FileCheck %s
// RUN: tessel-opt %s --mlir-print-op-generic | tessel-opt | FileCheck %s

// Tests that the activation gradients take the forward input and dy of one type, gelu_grad with or without approximate.
// CHECK-LABEL: func.func @activation_grads
// CHECK: nn.gelu_grad %{{.*}}, %{{.*}} : tensor<8x16xf32>
// CHECK: nn.gelu_grad %{{.*}}, %{{.*}} approximate : tensor<8x16xf32>
// CHECK: nn.silu_grad %{{.*}}, %{{.*}} : tensor<8x16xf32>
// CHECK: nn.relu_grad %{{.*}}, %{{.*}} : tensor<8x16xf32>
func.func @activation_grads(%x: tensor<8x16xf32>, %dy: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) {
  %0 = nn.gelu_grad %x, %dy : tensor<8x16xf32>
  %1 = nn.gelu_grad %x, %dy approximate : tensor<8x16xf32>
  %2 = nn.silu_grad %x, %dy : tensor<8x16xf32>
  %3 = nn.relu_grad %x, %dy : tensor<8x16xf32>
  return %0, %1, %2, %3 : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>
}

// Tests that the activation gradients accept 16-bit floats.
// CHECK-LABEL: func.func @activation_grads_bf16
// CHECK: nn.gelu_grad %{{.*}}, %{{.*}} : tensor<4xbf16>
// CHECK: nn.silu_grad %{{.*}}, %{{.*}} : tensor<4xf16>
func.func @activation_grads_bf16(%x: tensor<4xbf16>, %dy: tensor<4xbf16>, %h: tensor<4xf16>) -> (tensor<4xbf16>, tensor<4xf16>) {
  %0 = nn.gelu_grad %x, %dy : tensor<4xbf16>
  %1 = nn.silu_grad %h, %h : tensor<4xf16>
  return %0, %1 : tensor<4xbf16>, tensor<4xf16>
}

// Tests that equal gives a mask in the operands' own type, float or integer.
// CHECK-LABEL: func.func @equal
// CHECK: nn.equal %{{.*}}, %{{.*}} : tensor<8x16xf32>
// CHECK: nn.equal %{{.*}}, %{{.*}} : tensor<8xi32>
func.func @equal(%a: tensor<8x16xf32>, %b: tensor<8x16xf32>, %i: tensor<8xi32>, %j: tensor<8xi32>) -> (tensor<8x16xf32>, tensor<8xi32>) {
  %0 = nn.equal %a, %b : tensor<8x16xf32>
  %1 = nn.equal %i, %j : tensor<8xi32>
  return %0, %1 : tensor<8x16xf32>, tensor<8xi32>
}

// Tests that softmax_grad defaults to the last dimension (elided) and keeps an explicit one.
// CHECK-LABEL: func.func @softmax_grad
// CHECK: nn.softmax_grad %{{.*}}, %{{.*}} : tensor<8x10xf32>
// CHECK-NOT: dim = -1
// CHECK: nn.softmax_grad %{{.*}}, %{{.*}} {dim = 0 : i64} : tensor<8x10xf32>
// CHECK: nn.softmax_grad %{{.*}}, %{{.*}} {dim = -2 : i64} : tensor<8x10xf32>
func.func @softmax_grad(%y: tensor<8x10xf32>, %dy: tensor<8x10xf32>) -> (tensor<8x10xf32>, tensor<8x10xf32>, tensor<8x10xf32>) {
  %0 = nn.softmax_grad %y, %dy {dim = -1 : i64} : tensor<8x10xf32>
  %1 = nn.softmax_grad %y, %dy {dim = 0 : i64} : tensor<8x10xf32>
  %2 = nn.softmax_grad %y, %dy {dim = -2 : i64} : tensor<8x10xf32>
  return %0, %1, %2 : tensor<8x10xf32>, tensor<8x10xf32>, tensor<8x10xf32>
}

// Tests that layer_norm_grad returns dx of the input's type and dgamma, dbeta of gamma's, default epsilon elided.
// CHECK-LABEL: func.func @layer_norm_grad
// CHECK: %{{.*}}, %{{.*}}, %{{.*}} = nn.layer_norm_grad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<2x8x16xf32>) -> (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>)
// CHECK: nn.layer_norm_grad %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 1.000000e-03 : f64} : (tensor<8x16xbf16>, tensor<16xbf16>, tensor<8x16xbf16>) -> (tensor<8x16xbf16>, tensor<16xbf16>, tensor<16xbf16>)
func.func @layer_norm_grad(%x: tensor<2x8x16xf32>, %g: tensor<16xf32>, %dy: tensor<2x8x16xf32>, %h: tensor<8x16xbf16>, %hg: tensor<16xbf16>) -> (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xbf16>) {
  %dx, %dg, %db = nn.layer_norm_grad %x, %g, %dy : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<2x8x16xf32>) -> (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>)
  %hx, %hdg, %hdb = nn.layer_norm_grad %h, %hg, %h {epsilon = 1.0e-3 : f64} : (tensor<8x16xbf16>, tensor<16xbf16>, tensor<8x16xbf16>) -> (tensor<8x16xbf16>, tensor<16xbf16>, tensor<16xbf16>)
  return %dx, %db, %hdb : tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xbf16>
}

// Tests that the parameter gradients of a 16-bit norm may be f32 (the
// column sums written unrounded: a bf16 step's f32 gradients, ABI 14).
// CHECK-LABEL: func.func @norm_grad_f32_params
// CHECK: nn.layer_norm_grad {{.*}} : (tensor<8x16xbf16>, tensor<16xbf16>, tensor<8x16xbf16>) -> (tensor<8x16xbf16>, tensor<16xf32>, tensor<16xf32>)
// CHECK: nn.rms_norm_grad {{.*}} : (tensor<8x16xf16>, tensor<16xf16>, tensor<8x16xf16>) -> (tensor<8x16xf16>, tensor<16xf32>)
func.func @norm_grad_f32_params(%h: tensor<8x16xbf16>, %hg: tensor<16xbf16>, %f: tensor<8x16xf16>, %fg: tensor<16xf16>) -> (tensor<16xf32>, tensor<16xf32>) {
  %hx, %hdg, %hdb = nn.layer_norm_grad %h, %hg, %h : (tensor<8x16xbf16>, tensor<16xbf16>, tensor<8x16xbf16>) -> (tensor<8x16xbf16>, tensor<16xf32>, tensor<16xf32>)
  %fx, %fdg = nn.rms_norm_grad %f, %fg, %f : (tensor<8x16xf16>, tensor<16xf16>, tensor<8x16xf16>) -> (tensor<8x16xf16>, tensor<16xf32>)
  return %hdb, %fdg : tensor<16xf32>, tensor<16xf32>
}

// Tests that rms_norm_grad returns dx and dgamma, default epsilon 1e-6 elided.
// CHECK-LABEL: func.func @rms_norm_grad
// CHECK: %{{.*}}, %{{.*}} = nn.rms_norm_grad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<8x16xf32>, tensor<16xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>)
// CHECK-NOT: epsilon
func.func @rms_norm_grad(%x: tensor<8x16xf32>, %g: tensor<16xf32>, %dy: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>) {
  %dx, %dg = nn.rms_norm_grad %x, %g, %dy {epsilon = 1.0e-6 : f64} : (tensor<8x16xf32>, tensor<16xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>)
  return %dx, %dg : tensor<8x16xf32>, tensor<16xf32>
}

// Tests that batch_norm_grad normalises over every dimension but feature_dim, default 1 elided.
// CHECK-LABEL: func.func @batch_norm_grad
// CHECK: nn.batch_norm_grad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<4x3x5xf32>, tensor<3xf32>, tensor<4x3x5xf32>) -> (tensor<4x3x5xf32>, tensor<3xf32>, tensor<3xf32>)
// CHECK: nn.batch_norm_grad %{{.*}}, %{{.*}}, %{{.*}} {feature_dim = 2 : i64} : (tensor<4x3x5xf32>, tensor<5xf32>, tensor<4x3x5xf32>) -> (tensor<4x3x5xf32>, tensor<5xf32>, tensor<5xf32>)
func.func @batch_norm_grad(%x: tensor<4x3x5xf32>, %g: tensor<3xf32>, %g5: tensor<5xf32>, %dy: tensor<4x3x5xf32>) -> (tensor<4x3x5xf32>, tensor<5xf32>) {
  %dx, %dg, %db = nn.batch_norm_grad %x, %g, %dy : (tensor<4x3x5xf32>, tensor<3xf32>, tensor<4x3x5xf32>) -> (tensor<4x3x5xf32>, tensor<3xf32>, tensor<3xf32>)
  %ex, %eg, %eb = nn.batch_norm_grad %x, %g5, %dy {feature_dim = 2 : i64} : (tensor<4x3x5xf32>, tensor<5xf32>, tensor<4x3x5xf32>) -> (tensor<4x3x5xf32>, tensor<5xf32>, tensor<5xf32>)
  return %dx, %eb : tensor<4x3x5xf32>, tensor<5xf32>
}

// Tests that cross_entropy_grad takes dloss of the loss's type: a scalar for mean (elided) and sum, the labels' shape for none.
// CHECK-LABEL: func.func @cross_entropy_grad
// CHECK: nn.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x8x50xf32>, tensor<2x8xi32>, tensor<f32>) -> tensor<2x8x50xf32>
// CHECK: nn.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} {reduction = #nn.reduction<sum>} : (tensor<2x8x50xf32>, tensor<2x8xi32>, tensor<f32>) -> tensor<2x8x50xf32>
// CHECK: nn.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} {reduction = #nn.reduction<none>} : (tensor<2x8x50xf32>, tensor<2x8xi32>, tensor<2x8xf32>) -> tensor<2x8x50xf32>
func.func @cross_entropy_grad(%z: tensor<2x8x50xf32>, %y: tensor<2x8xi32>, %dl: tensor<f32>, %dls: tensor<2x8xf32>) -> (tensor<2x8x50xf32>, tensor<2x8x50xf32>, tensor<2x8x50xf32>) {
  %0 = nn.cross_entropy_grad %z, %y, %dl {reduction = #nn.reduction<mean>} : (tensor<2x8x50xf32>, tensor<2x8xi32>, tensor<f32>) -> tensor<2x8x50xf32>
  %1 = nn.cross_entropy_grad %z, %y, %dl {reduction = #nn.reduction<sum>} : (tensor<2x8x50xf32>, tensor<2x8xi32>, tensor<f32>) -> tensor<2x8x50xf32>
  %2 = nn.cross_entropy_grad %z, %y, %dls {reduction = #nn.reduction<none>} : (tensor<2x8x50xf32>, tensor<2x8xi32>, tensor<2x8xf32>) -> tensor<2x8x50xf32>
  return %0, %1, %2 : tensor<2x8x50xf32>, tensor<2x8x50xf32>, tensor<2x8x50xf32>
}

// Tests that embedding_grad scatters dout [ids..., H] into a [V, H] table whose V comes from the result type.
// CHECK-LABEL: func.func @embedding_grad
// CHECK: nn.embedding_grad %{{.*}}, %{{.*}} : (tensor<2x8xi32>, tensor<2x8x16xf32>) -> tensor<100x16xf32>
// CHECK: nn.embedding_grad %{{.*}}, %{{.*}} : (tensor<i64>, tensor<16xbf16>) -> tensor<7x16xbf16>
// CHECK: nn.embedding_grad %{{.*}}, %{{.*}} : (tensor<i64>, tensor<16xbf16>) -> tensor<7x16xf32>
func.func @embedding_grad(%ids: tensor<2x8xi32>, %dout: tensor<2x8x16xf32>, %id: tensor<i64>, %row: tensor<16xbf16>) -> (tensor<100x16xf32>, tensor<7x16xbf16>, tensor<7x16xf32>) {
  %0 = nn.embedding_grad %ids, %dout : (tensor<2x8xi32>, tensor<2x8x16xf32>) -> tensor<100x16xf32>
  %1 = nn.embedding_grad %id, %row : (tensor<i64>, tensor<16xbf16>) -> tensor<7x16xbf16>
  // A 16-bit dout's table gradient in f32 (ABI 14).
  %2 = nn.embedding_grad %id, %row : (tensor<i64>, tensor<16xbf16>) -> tensor<7x16xf32>
  return %0, %1, %2 : tensor<100x16xf32>, tensor<7x16xbf16>, tensor<7x16xf32>
}

// Tests that attention_grad reads the forward's output and log-sum-exp ([B, H, S], f32 for bf16, f64 for f64) and returns the types of q, k and v, with grouped-query heads, causal, a sliding window, a soft cap and an explicit scale.
// CHECK-LABEL: func.func @attention_grad
// CHECK: nn.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} causal {scale = 1.250000e-01 : f64} : (tensor<2x16x4x8xf32>, tensor<2x16x2x8xf32>, tensor<2x16x2x6xf32>, tensor<2x16x4x6xf32>, tensor<2x4x16xf32>, tensor<2x16x4x6xf32>) -> (tensor<2x16x4x8xf32>, tensor<2x16x2x8xf32>, tensor<2x16x2x6xf32>)
// CHECK: nn.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : (tensor<1x4x2x8xbf16>, tensor<1x6x2x8xbf16>, tensor<1x6x2x8xbf16>, tensor<1x4x2x8xbf16>, tensor<1x2x4xf32>, tensor<1x4x2x8xbf16>) -> (tensor<1x4x2x8xbf16>, tensor<1x6x2x8xbf16>, tensor<1x6x2x8xbf16>)
// CHECK: nn.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} causal window 2 softcap 3.000000e+01 : (tensor<1x4x2x8xf64>, tensor<1x4x2x8xf64>, tensor<1x4x2x8xf64>, tensor<1x4x2x8xf64>, tensor<1x2x4xf64>, tensor<1x4x2x8xf64>) -> (tensor<1x4x2x8xf64>, tensor<1x4x2x8xf64>, tensor<1x4x2x8xf64>)
func.func @attention_grad(%q: tensor<2x16x4x8xf32>, %k: tensor<2x16x2x8xf32>, %v: tensor<2x16x2x6xf32>, %o: tensor<2x16x4x6xf32>, %lse: tensor<2x4x16xf32>, %do: tensor<2x16x4x6xf32>,
                          %q1: tensor<1x4x2x8xbf16>, %k1: tensor<1x6x2x8xbf16>, %do1: tensor<1x4x2x8xbf16>, %lse1: tensor<1x2x4xf32>,
                          %q2: tensor<1x4x2x8xf64>, %lse2: tensor<1x2x4xf64>) -> (tensor<2x16x4x8xf32>, tensor<2x16x2x6xf32>, tensor<1x6x2x8xbf16>, tensor<1x4x2x8xf64>) {
  %dq, %dk, %dv = nn.attention_grad %q, %k, %v, %o, %lse, %do causal {scale = 0.125 : f64} : (tensor<2x16x4x8xf32>, tensor<2x16x2x8xf32>, tensor<2x16x2x6xf32>, tensor<2x16x4x6xf32>, tensor<2x4x16xf32>, tensor<2x16x4x6xf32>) -> (tensor<2x16x4x8xf32>, tensor<2x16x2x8xf32>, tensor<2x16x2x6xf32>)
  %eq, %ek, %ev = nn.attention_grad %q1, %k1, %k1, %do1, %lse1, %do1 : (tensor<1x4x2x8xbf16>, tensor<1x6x2x8xbf16>, tensor<1x6x2x8xbf16>, tensor<1x4x2x8xbf16>, tensor<1x2x4xf32>, tensor<1x4x2x8xbf16>) -> (tensor<1x4x2x8xbf16>, tensor<1x6x2x8xbf16>, tensor<1x6x2x8xbf16>)
  %fq, %fk, %fv = nn.attention_grad %q2, %q2, %q2, %q2, %lse2, %q2 causal window 2 softcap 30.0 : (tensor<1x4x2x8xf64>, tensor<1x4x2x8xf64>, tensor<1x4x2x8xf64>, tensor<1x4x2x8xf64>, tensor<1x2x4xf64>, tensor<1x4x2x8xf64>) -> (tensor<1x4x2x8xf64>, tensor<1x4x2x8xf64>, tensor<1x4x2x8xf64>)
  return %dq, %dv, %ev, %fq : tensor<2x16x4x8xf32>, tensor<2x16x2x6xf32>, tensor<1x6x2x8xbf16>, tensor<1x4x2x8xf64>
}

// Tests that slice_grad places dy back into the slice's input type, with and without strides.
// CHECK-LABEL: func.func @slice_grad
// CHECK: nn.slice_grad %{{.*}} start = [0, 64] limit = [8, 128] : tensor<8x64xf32> -> tensor<8x192xf32>
// CHECK: nn.slice_grad %{{.*}} start = [1, 0] limit = [8, 192] strides = [2, 3] : tensor<4x64xf32> -> tensor<8x192xf32>
// CHECK: nn.slice_grad %{{.*}} start = [0] limit = [0] : tensor<0xi32> -> tensor<5xi32>
func.func @slice_grad(%a: tensor<8x64xf32>, %b: tensor<4x64xf32>, %c: tensor<0xi32>) -> (tensor<8x192xf32>, tensor<8x192xf32>, tensor<5xi32>) {
  %0 = nn.slice_grad %a start = [0, 64] limit = [8, 128] : tensor<8x64xf32> -> tensor<8x192xf32>
  %1 = nn.slice_grad %b start = [1, 0] limit = [8, 192] strides = [2, 3] : tensor<4x64xf32> -> tensor<8x192xf32>
  %2 = nn.slice_grad %c start = [0] limit = [0] : tensor<0xi32> -> tensor<5xi32>
  return %0, %1, %2 : tensor<8x192xf32>, tensor<8x192xf32>, tensor<5xi32>
}

// Tests that the gradient of 16-bit logits takes dloss of their type or,
// for their f32 loss, f32; dlogits keep the logits' type.
// CHECK-LABEL: func.func @cross_entropy_grad_f32_dloss
// CHECK: nn.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x8x50xbf16>, tensor<2x8xi32>, tensor<f32>) -> tensor<2x8x50xbf16>
// CHECK: nn.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} {reduction = #nn.reduction<none>} : (tensor<2x8x50xf16>, tensor<2x8xi32>, tensor<2x8xf32>) -> tensor<2x8x50xf16>
func.func @cross_entropy_grad_f32_dloss(%z: tensor<2x8x50xbf16>, %h: tensor<2x8x50xf16>, %y: tensor<2x8xi32>, %dl: tensor<f32>, %dls: tensor<2x8xf32>) -> (tensor<2x8x50xbf16>, tensor<2x8x50xf16>) {
  %0 = nn.cross_entropy_grad %z, %y, %dl : (tensor<2x8x50xbf16>, tensor<2x8xi32>, tensor<f32>) -> tensor<2x8x50xbf16>
  %1 = nn.cross_entropy_grad %h, %y, %dls {reduction = #nn.reduction<none>} : (tensor<2x8x50xf16>, tensor<2x8xi32>, tensor<2x8xf32>) -> tensor<2x8x50xf16>
  return %0, %1 : tensor<2x8x50xbf16>, tensor<2x8x50xf16>
}
