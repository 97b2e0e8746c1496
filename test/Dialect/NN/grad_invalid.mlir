// RUN: tessel-opt %s --split-input-file --verify-diagnostics

// Tests that an activation gradient rejects dy of another type than x (generic form).
func.func @gelu_grad_types(%x: tensor<8xf32>, %dy: tensor<8xbf16>) -> tensor<8xf32> {
  // expected-error @+1 {{'nn.gelu_grad' op requires the same type for all operands and results}}
  %0 = "nn.gelu_grad"(%x, %dy) : (tensor<8xf32>, tensor<8xbf16>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// Tests that an activation gradient rejects integer tensors.
func.func @relu_grad_integer(%x: tensor<8xi32>) -> tensor<8xi32> {
  // expected-error @+1 {{'nn.relu_grad' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values without encoding, but got 'tensor<8xi32>'}}
  %0 = nn.relu_grad %x, %x : tensor<8xi32>
  return %0 : tensor<8xi32>
}

// -----

// Tests that equal rejects operands of different types (generic form).
func.func @equal_types(%a: tensor<8xf32>, %b: tensor<8xi32>) -> tensor<8xf32> {
  // expected-error @+1 {{'nn.equal' op requires the same type for all operands and results}}
  %0 = "nn.equal"(%a, %b) : (tensor<8xf32>, tensor<8xi32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// Tests that softmax_grad rejects a rank-0 tensor.
func.func @softmax_grad_rank_0(%y: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{'nn.softmax_grad' op needs a tensor of rank >= 1}}
  %0 = nn.softmax_grad %y, %y : tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that softmax_grad rejects a dim at or past the rank.
func.func @softmax_grad_dim_too_large(%y: tensor<8x10xf32>) -> tensor<8x10xf32> {
  // expected-error @+1 {{'nn.softmax_grad' op dim 2 is out of range for rank 2}}
  %0 = nn.softmax_grad %y, %y {dim = 2 : i64} : tensor<8x10xf32>
  return %0 : tensor<8x10xf32>
}

// -----

// Tests that softmax_grad rejects a negative dim below -rank.
func.func @softmax_grad_dim_too_negative(%y: tensor<8x10xf32>) -> tensor<8x10xf32> {
  // expected-error @+1 {{'nn.softmax_grad' op dim -3 is out of range for rank 2}}
  %0 = nn.softmax_grad %y, %y {dim = -3 : i64} : tensor<8x10xf32>
  return %0 : tensor<8x10xf32>
}

// -----

// Tests that softmax_grad rejects y and dy of different types (generic form).
func.func @softmax_grad_types(%y: tensor<8x10xf32>, %dy: tensor<8x5xf32>) -> tensor<8x10xf32> {
  // expected-error @+1 {{'nn.softmax_grad' op requires the same type for all operands and results}}
  %0 = "nn.softmax_grad"(%y, %dy) : (tensor<8x10xf32>, tensor<8x5xf32>) -> tensor<8x10xf32>
  return %0 : tensor<8x10xf32>
}

// -----

// Tests that layer_norm_grad rejects a rank-0 input.
func.func @layer_norm_grad_rank_0(%x: tensor<f32>, %g: tensor<1xf32>) -> tensor<f32> {
  // expected-error @+2 {{input must have rank >= 1}}
  // expected-error @+1 {{'nn.layer_norm_grad' op failed to infer returned types}}
  %dx, %dg, %db = nn.layer_norm_grad %x, %g, %x : (tensor<f32>, tensor<1xf32>, tensor<f32>) -> (tensor<f32>, tensor<1xf32>, tensor<1xf32>)
  return %dx : tensor<f32>
}

// -----

// Tests that layer_norm_grad rejects a gamma whose size is not the last dimension's.
func.func @layer_norm_grad_gamma(%x: tensor<8x16xf32>, %g: tensor<8xf32>) -> tensor<8x16xf32> {
  // expected-error @+2 {{gamma must be 'tensor<16xf32>' (the size of the last dimension), got 'tensor<8xf32>'}}
  // expected-error @+1 {{'nn.layer_norm_grad' op failed to infer returned types}}
  %dx, %dg, %db = nn.layer_norm_grad %x, %g, %x : (tensor<8x16xf32>, tensor<8xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8xf32>, tensor<8xf32>)
  return %dx : tensor<8x16xf32>
}

// -----

// Tests that layer_norm_grad rejects dy of another type than the input.
func.func @layer_norm_grad_dy(%x: tensor<8x16xf32>, %g: tensor<16xf32>, %dy: tensor<8x15xf32>) -> tensor<8x16xf32> {
  // expected-error @+2 {{dy must have the input's type 'tensor<8x16xf32>', got 'tensor<8x15xf32>'}}
  // expected-error @+1 {{'nn.layer_norm_grad' op failed to infer returned types}}
  %dx, %dg, %db = nn.layer_norm_grad %x, %g, %dy : (tensor<8x16xf32>, tensor<16xf32>, tensor<8x15xf32>) -> (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>)
  return %dx : tensor<8x16xf32>
}

// -----

// Tests that f32 parameter gradients need 16-bit rows: an f32 norm's are
// f32 already, an f64 norm's cannot be narrowed.
func.func @layer_norm_grad_f32_params_of_f64(%x: tensor<8x16xf64>, %g: tensor<16xf64>) -> tensor<8x16xf64> {
  // expected-error @+2 {{'nn.layer_norm_grad' op inferred type(s) 'tensor<8x16xf64>', 'tensor<16xf64>', 'tensor<16xf64>' are incompatible with return type(s) of operation 'tensor<8x16xf64>', 'tensor<16xf32>', 'tensor<16xf32>'}}
  // expected-error @+1 {{'nn.layer_norm_grad' op failed to infer returned types}}
  %dx, %dg, %db = nn.layer_norm_grad %x, %g, %x : (tensor<8x16xf64>, tensor<16xf64>, tensor<8x16xf64>) -> (tensor<8x16xf64>, tensor<16xf32>, tensor<16xf32>)
  return %dx : tensor<8x16xf64>
}

// -----

// Tests that the parameter gradients are all f32 or none (one dtype for
// the kernel's column sums), and dx keeps the input's type.
func.func @layer_norm_grad_f32_params_mixed(%x: tensor<8x16xbf16>, %g: tensor<16xbf16>) -> tensor<8x16xbf16> {
  // expected-error @+2 {{'nn.layer_norm_grad' op inferred type(s) 'tensor<8x16xbf16>', 'tensor<16xbf16>', 'tensor<16xbf16>' are incompatible with return type(s) of operation 'tensor<8x16xbf16>', 'tensor<16xf32>', 'tensor<16xbf16>'}}
  // expected-error @+1 {{'nn.layer_norm_grad' op failed to infer returned types}}
  %dx, %dg, %db = nn.layer_norm_grad %x, %g, %x : (tensor<8x16xbf16>, tensor<16xbf16>, tensor<8x16xbf16>) -> (tensor<8x16xbf16>, tensor<16xf32>, tensor<16xbf16>)
  return %dx : tensor<8x16xbf16>
}

// -----

func.func @rms_norm_grad_f32_dx(%x: tensor<8x16xbf16>, %g: tensor<16xbf16>) -> tensor<8x16xf32> {
  // expected-error @+2 {{'nn.rms_norm_grad' op inferred type(s) 'tensor<8x16xbf16>', 'tensor<16xbf16>' are incompatible with return type(s) of operation 'tensor<8x16xf32>', 'tensor<16xf32>'}}
  // expected-error @+1 {{'nn.rms_norm_grad' op failed to infer returned types}}
  %dx, %dg = nn.rms_norm_grad %x, %g, %x : (tensor<8x16xbf16>, tensor<16xbf16>, tensor<8x16xbf16>) -> (tensor<8x16xf32>, tensor<16xf32>)
  return %dx : tensor<8x16xf32>
}

// -----

// Tests that layer_norm_grad rejects a non-positive epsilon.
func.func @layer_norm_grad_epsilon(%x: tensor<8x16xf32>, %g: tensor<16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'nn.layer_norm_grad' op epsilon must be positive, got 0}}
  %dx, %dg, %db = nn.layer_norm_grad %x, %g, %x {epsilon = 0.0 : f64} : (tensor<8x16xf32>, tensor<16xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>)
  return %dx : tensor<8x16xf32>
}

// -----

// Tests that layer_norm_grad rejects result types other than the inferred ones (generic form).
func.func @layer_norm_grad_results(%x: tensor<8x16xf32>, %g: tensor<16xf32>) -> tensor<8x16xf32> {
  // expected-error @+2 {{'nn.layer_norm_grad' op inferred type(s) 'tensor<8x16xf32>', 'tensor<16xf32>', 'tensor<16xf32>' are incompatible with return type(s) of operation 'tensor<8x16xf32>', 'tensor<16xf32>', 'tensor<8x16xf32>'}}
  // expected-error @+1 {{'nn.layer_norm_grad' op failed to infer returned types}}
  %dx, %dg, %db = "nn.layer_norm_grad"(%x, %g, %x) : (tensor<8x16xf32>, tensor<16xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>, tensor<8x16xf32>)
  return %dx : tensor<8x16xf32>
}

// -----

// Tests that rms_norm_grad rejects a gamma of another element type.
func.func @rms_norm_grad_gamma_type(%x: tensor<8x16xf32>, %g: tensor<16xbf16>) -> tensor<8x16xf32> {
  // expected-error @+2 {{gamma must be 'tensor<16xf32>' (the size of the last dimension), got 'tensor<16xbf16>'}}
  // expected-error @+1 {{'nn.rms_norm_grad' op failed to infer returned types}}
  %dx, %dg = nn.rms_norm_grad %x, %g, %x : (tensor<8x16xf32>, tensor<16xbf16>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xbf16>)
  return %dx : tensor<8x16xf32>
}

// -----

// Tests that rms_norm_grad rejects a negative epsilon.
func.func @rms_norm_grad_epsilon(%x: tensor<8x16xf32>, %g: tensor<16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'nn.rms_norm_grad' op epsilon must be positive, got -1}}
  %dx, %dg = nn.rms_norm_grad %x, %g, %x {epsilon = -1.0 : f64} : (tensor<8x16xf32>, tensor<16xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>)
  return %dx : tensor<8x16xf32>
}

// -----

// Tests that batch_norm_grad rejects an input without a batch dimension.
func.func @batch_norm_grad_rank_1(%x: tensor<8xf32>, %g: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+2 {{input must be [batch, features, ...], got 'tensor<8xf32>'}}
  // expected-error @+1 {{'nn.batch_norm_grad' op failed to infer returned types}}
  %dx, %dg, %db = nn.batch_norm_grad %x, %g, %x : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %dx : tensor<8xf32>
}

// -----

// Tests that batch_norm_grad rejects a feature_dim out of range.
func.func @batch_norm_grad_feature_dim(%x: tensor<4x3x5xf32>, %g: tensor<3xf32>) -> tensor<4x3x5xf32> {
  // expected-error @+2 {{feature_dim 3 is out of range for rank 3}}
  // expected-error @+1 {{'nn.batch_norm_grad' op failed to infer returned types}}
  %dx, %dg, %db = nn.batch_norm_grad %x, %g, %x {feature_dim = 3 : i64} : (tensor<4x3x5xf32>, tensor<3xf32>, tensor<4x3x5xf32>) -> (tensor<4x3x5xf32>, tensor<3xf32>, tensor<3xf32>)
  return %dx : tensor<4x3x5xf32>
}

// -----

// Tests that batch_norm_grad rejects a gamma whose size is not the feature dimension's.
func.func @batch_norm_grad_gamma(%x: tensor<4x3x5xf32>, %g: tensor<5xf32>) -> tensor<4x3x5xf32> {
  // expected-error @+2 {{gamma must be 'tensor<3xf32>' (the size of the feature dimension), got 'tensor<5xf32>'}}
  // expected-error @+1 {{'nn.batch_norm_grad' op failed to infer returned types}}
  %dx, %dg, %db = nn.batch_norm_grad %x, %g, %x : (tensor<4x3x5xf32>, tensor<5xf32>, tensor<4x3x5xf32>) -> (tensor<4x3x5xf32>, tensor<5xf32>, tensor<5xf32>)
  return %dx : tensor<4x3x5xf32>
}

// -----

// Tests that batch_norm_grad rejects dy of another type than the input.
func.func @batch_norm_grad_dy(%x: tensor<4x3xf32>, %g: tensor<3xf32>, %dy: tensor<4x3xbf16>) -> tensor<4x3xf32> {
  // expected-error @+2 {{dy must have the input's type 'tensor<4x3xf32>', got 'tensor<4x3xbf16>'}}
  // expected-error @+1 {{'nn.batch_norm_grad' op failed to infer returned types}}
  %dx, %dg, %db = nn.batch_norm_grad %x, %g, %dy : (tensor<4x3xf32>, tensor<3xf32>, tensor<4x3xbf16>) -> (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>)
  return %dx : tensor<4x3xf32>
}

// -----

// Tests that batch_norm_grad rejects a non-positive epsilon.
func.func @batch_norm_grad_epsilon(%x: tensor<4x3xf32>, %g: tensor<3xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{'nn.batch_norm_grad' op epsilon must be positive, got 0}}
  %dx, %dg, %db = nn.batch_norm_grad %x, %g, %x {epsilon = 0.0 : f64} : (tensor<4x3xf32>, tensor<3xf32>, tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>)
  return %dx : tensor<4x3xf32>
}

// -----

// Tests that cross_entropy_grad rejects scalar logits.
func.func @cross_entropy_grad_rank_0(%z: tensor<f32>, %y: tensor<i32>, %dl: tensor<f32>) -> tensor<f32> {
  // expected-error @+2 {{logits must be [..., classes], got 'tensor<f32>'}}
  // expected-error @+1 {{'nn.cross_entropy_grad' op failed to infer returned types}}
  %0 = nn.cross_entropy_grad %z, %y, %dl : (tensor<f32>, tensor<i32>, tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that cross_entropy_grad rejects labels whose shape is not the logits' without the classes.
func.func @cross_entropy_grad_labels(%z: tensor<8x10xf32>, %y: tensor<4xi32>, %dl: tensor<f32>) -> tensor<8x10xf32> {
  // expected-error @+2 {{labels 'tensor<4xi32>' must have the shape of the logits 'tensor<8x10xf32>' without the class dimension (8)}}
  // expected-error @+1 {{'nn.cross_entropy_grad' op failed to infer returned types}}
  %0 = nn.cross_entropy_grad %z, %y, %dl : (tensor<8x10xf32>, tensor<4xi32>, tensor<f32>) -> tensor<8x10xf32>
  return %0 : tensor<8x10xf32>
}

// -----

// Tests that cross_entropy_grad with mean rejects a dloss that is not the scalar loss.
func.func @cross_entropy_grad_dloss_mean(%z: tensor<8x10xf32>, %y: tensor<8xi32>, %dl: tensor<8xf32>) -> tensor<8x10xf32> {
  // expected-error @+2 {{dloss must have the loss's type 'tensor<f32>' (reduction mean), got 'tensor<8xf32>'}}
  // expected-error @+1 {{'nn.cross_entropy_grad' op failed to infer returned types}}
  %0 = nn.cross_entropy_grad %z, %y, %dl : (tensor<8x10xf32>, tensor<8xi32>, tensor<8xf32>) -> tensor<8x10xf32>
  return %0 : tensor<8x10xf32>
}

// -----

// Tests that cross_entropy_grad with none rejects a scalar dloss.
func.func @cross_entropy_grad_dloss_none(%z: tensor<8x10xf32>, %y: tensor<8xi32>, %dl: tensor<f32>) -> tensor<8x10xf32> {
  // expected-error @+2 {{dloss must have the loss's type 'tensor<8xf32>' (reduction none), got 'tensor<f32>'}}
  // expected-error @+1 {{'nn.cross_entropy_grad' op failed to infer returned types}}
  %0 = nn.cross_entropy_grad %z, %y, %dl {reduction = #nn.reduction<none>} : (tensor<8x10xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x10xf32>
  return %0 : tensor<8x10xf32>
}

// -----

// Tests that cross_entropy_grad rejects a dloss of another element type than the logits.
func.func @cross_entropy_grad_dloss_type(%z: tensor<8x10xf32>, %y: tensor<8xi32>, %dl: tensor<bf16>) -> tensor<8x10xf32> {
  // expected-error @+2 {{dloss must have the loss's type 'tensor<f32>' (reduction sum), got 'tensor<bf16>'}}
  // expected-error @+1 {{'nn.cross_entropy_grad' op failed to infer returned types}}
  %0 = nn.cross_entropy_grad %z, %y, %dl {reduction = #nn.reduction<sum>} : (tensor<8x10xf32>, tensor<8xi32>, tensor<bf16>) -> tensor<8x10xf32>
  return %0 : tensor<8x10xf32>
}

// -----

// Tests that the gradient of bf16 logits takes dloss of bf16 or f32, not f64.
func.func @cross_entropy_grad_dloss_f64_of_bf16(%z: tensor<8x10xbf16>, %y: tensor<8xi32>, %dl: tensor<f64>) -> tensor<8x10xbf16> {
  // expected-error @+2 {{dloss must have the loss's type 'tensor<bf16>' (or f32) (reduction mean), got 'tensor<f64>'}}
  // expected-error @+1 {{'nn.cross_entropy_grad' op failed to infer returned types}}
  %0 = nn.cross_entropy_grad %z, %y, %dl : (tensor<8x10xbf16>, tensor<8xi32>, tensor<f64>) -> tensor<8x10xbf16>
  return %0 : tensor<8x10xbf16>
}

// -----

// Tests that embedding_grad rejects a result that is not a [vocab, hidden] table.
func.func @embedding_grad_result_rank(%ids: tensor<8xi32>, %dout: tensor<8x16xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{'nn.embedding_grad' op result must be the table [vocab, hidden], got 'tensor<16xf32>'}}
  %0 = nn.embedding_grad %ids, %dout : (tensor<8xi32>, tensor<8x16xf32>) -> tensor<16xf32>
  return %0 : tensor<16xf32>
}

// -----

// Tests that embedding_grad rejects a dout that is not the ids' shape followed by the hidden size.
func.func @embedding_grad_dout_shape(%ids: tensor<2x8xi32>, %dout: tensor<2x8x15xf32>) -> tensor<100x16xf32> {
  // expected-error @+1 {{'nn.embedding_grad' op dout 'tensor<2x8x15xf32>' must have the ids' shape followed by the hidden size (2x8x16)}}
  %0 = nn.embedding_grad %ids, %dout : (tensor<2x8xi32>, tensor<2x8x15xf32>) -> tensor<100x16xf32>
  return %0 : tensor<100x16xf32>
}

// -----

// Tests that embedding_grad rejects a table of another element type than
// dout's, or than f32 for a 16-bit dout (ABI 14's f32 table gradient).
func.func @embedding_grad_element_type(%ids: tensor<8xi32>, %dout: tensor<8x16xbf16>) -> tensor<100x16xf16> {
  // expected-error @+1 {{'nn.embedding_grad' op table element type 'f16' must be dout's 'bf16' (or f32)}}
  %0 = nn.embedding_grad %ids, %dout : (tensor<8xi32>, tensor<8x16xbf16>) -> tensor<100x16xf16>
  return %0 : tensor<100x16xf16>
}

// -----

func.func @embedding_grad_f32_table_of_f64(%ids: tensor<8xi32>, %dout: tensor<8x16xf64>) -> tensor<100x16xf32> {
  // expected-error @+1 {{'nn.embedding_grad' op table element type 'f32' must be dout's 'f64'}}
  %0 = nn.embedding_grad %ids, %dout : (tensor<8xi32>, tensor<8x16xf64>) -> tensor<100x16xf32>
  return %0 : tensor<100x16xf32>
}

// -----

// Tests that embedding_grad rejects float ids.
func.func @embedding_grad_float_ids(%ids: tensor<8xf32>, %dout: tensor<8x16xf32>) -> tensor<100x16xf32> {
  // expected-error @+1 {{'nn.embedding_grad' op operand #0 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values without encoding, but got 'tensor<8xf32>'}}
  %0 = nn.embedding_grad %ids, %dout : (tensor<8xf32>, tensor<8x16xf32>) -> tensor<100x16xf32>
  return %0 : tensor<100x16xf32>
}

// -----

// Tests that attention_grad rejects a query that is not [batch, seq, heads, head_dim].
func.func @attention_grad_rank(%q: tensor<2x16x8xf32>, %k: tensor<2x16x4x8xf32>) -> tensor<2x16x8xf32> {
  // expected-error @+2 {{query must be [batch, seq, heads, head_dim], got 'tensor<2x16x8xf32>'}}
  // expected-error @+1 {{'nn.attention_grad' op failed to infer returned types}}
  %dq, %dk, %dv = nn.attention_grad %q, %k, %k, %k, %k, %k : (tensor<2x16x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>) -> (tensor<2x16x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>)
  return %dq : tensor<2x16x8xf32>
}

// -----

// Tests that attention_grad rejects a dout of another type than the attention result.
func.func @attention_grad_dout(%q: tensor<2x16x4x8xf32>, %v: tensor<2x16x4x6xf32>, %lse: tensor<2x4x16xf32>) -> tensor<2x16x4x8xf32> {
  // expected-error @+2 {{dout must have the attention result's type 'tensor<2x16x4x6xf32>', got 'tensor<2x16x4x8xf32>'}}
  // expected-error @+1 {{'nn.attention_grad' op failed to infer returned types}}
  %dq, %dk, %dv = nn.attention_grad %q, %q, %v, %v, %lse, %q : (tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x6xf32>, tensor<2x16x4x6xf32>, tensor<2x4x16xf32>, tensor<2x16x4x8xf32>) -> (tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x6xf32>)
  return %dq : tensor<2x16x4x8xf32>
}

// -----

// Tests that attention_grad rejects a saved output of another type than the attention result.
func.func @attention_grad_out(%q: tensor<2x16x4x8xf32>, %v: tensor<2x16x4x6xf32>, %lse: tensor<2x4x16xf32>) -> tensor<2x16x4x8xf32> {
  // expected-error @+2 {{out must have the attention result's type 'tensor<2x16x4x6xf32>', got 'tensor<2x16x4x8xf32>'}}
  // expected-error @+1 {{'nn.attention_grad' op failed to infer returned types}}
  %dq, %dk, %dv = nn.attention_grad %q, %q, %v, %q, %lse, %v : (tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x6xf32>, tensor<2x16x4x8xf32>, tensor<2x4x16xf32>, tensor<2x16x4x6xf32>) -> (tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x6xf32>)
  return %dq : tensor<2x16x4x8xf32>
}

// -----

// Tests that attention_grad rejects a log-sum-exp in the query's 16-bit type (it is f32) or laid out [B, S, H].
func.func @attention_grad_lse(%q: tensor<2x16x4x8xbf16>, %lse: tensor<2x4x16xbf16>, %lse2: tensor<2x16x4xf32>) -> tensor<2x16x4x8xbf16> {
  // expected-error @+2 {{lse must have the attention log-sum-exp's type 'tensor<2x4x16xf32>', got 'tensor<2x4x16xbf16>'}}
  // expected-error @+1 {{'nn.attention_grad' op failed to infer returned types}}
  %dq, %dk, %dv = nn.attention_grad %q, %q, %q, %q, %lse, %q : (tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>, tensor<2x4x16xbf16>, tensor<2x16x4x8xbf16>) -> (tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>)
  return %dq : tensor<2x16x4x8xbf16>
}

// -----

func.func @attention_grad_lse_layout(%q: tensor<2x16x4x8xf32>, %lse: tensor<2x16x4xf32>) -> tensor<2x16x4x8xf32> {
  // expected-error @+2 {{lse must have the attention log-sum-exp's type 'tensor<2x4x16xf32>', got 'tensor<2x16x4xf32>'}}
  // expected-error @+1 {{'nn.attention_grad' op failed to infer returned types}}
  %dq, %dk, %dv = nn.attention_grad %q, %q, %q, %q, %lse, %q : (tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4xf32>, tensor<2x16x4x8xf32>) -> (tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>)
  return %dq : tensor<2x16x4x8xf32>
}

// -----

// Tests that causal attention_grad rejects different query and key lengths.
func.func @attention_grad_causal(%q: tensor<1x4x2x8xf32>, %k: tensor<1x6x2x8xf32>, %lse: tensor<1x2x4xf32>) -> tensor<1x4x2x8xf32> {
  // expected-error @+2 {{causal attention needs equal query and key lengths, got 4 and 6}}
  // expected-error @+1 {{'nn.attention_grad' op failed to infer returned types}}
  %dq, %dk, %dv = nn.attention_grad %q, %k, %k, %q, %lse, %q causal : (tensor<1x4x2x8xf32>, tensor<1x6x2x8xf32>, tensor<1x6x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x2x4xf32>, tensor<1x4x2x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x6x2x8xf32>, tensor<1x6x2x8xf32>)
  return %dq : tensor<1x4x2x8xf32>
}

// -----

// Tests that attention_grad rejects a non-positive scale.
func.func @attention_grad_scale(%q: tensor<1x4x2x8xf32>, %lse: tensor<1x2x4xf32>) -> tensor<1x4x2x8xf32> {
  // expected-error @+1 {{'nn.attention_grad' op scale must be positive, got 0}}
  %dq, %dk, %dv = nn.attention_grad %q, %q, %q, %q, %lse, %q {scale = 0.0 : f64} : (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x2x4xf32>, tensor<1x4x2x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>)
  return %dq : tensor<1x4x2x8xf32>
}

// -----

// Tests that slice_grad rejects a dy that is not the slice of the result with its attributes.
func.func @slice_grad_dy(%dy: tensor<8x32xf32>) -> tensor<8x192xf32> {
  // expected-error @+1 {{'nn.slice_grad' op dy must have the type of the slice of the result 'tensor<8x192xf32>' ('tensor<8x64xf32>'), got 'tensor<8x32xf32>'}}
  %0 = nn.slice_grad %dy start = [0, 0] limit = [8, 64] : tensor<8x32xf32> -> tensor<8x192xf32>
  return %0 : tensor<8x192xf32>
}

// -----

// Tests that slice_grad rejects a window past the result's size.
func.func @slice_grad_limit(%dy: tensor<8x8xf32>) -> tensor<8x192xf32> {
  // expected-error @+1 {{dimension 1 of size 192 cannot be sliced from 192 to 200 (need 0 <= start <= limit <= size)}}
  %0 = nn.slice_grad %dy start = [0, 192] limit = [8, 200] : tensor<8x8xf32> -> tensor<8x192xf32>
  return %0 : tensor<8x192xf32>
}

// -----

// Tests that slice_grad rejects attribute lists of another length than the result's rank.
func.func @slice_grad_rank(%dy: tensor<8x8xf32>) -> tensor<8x192xf32> {
  // expected-error @+1 {{start has 1 entries but the result has rank 2}}
  %0 = nn.slice_grad %dy start = [0] limit = [8, 8] : tensor<8x8xf32> -> tensor<8x192xf32>
  return %0 : tensor<8x192xf32>
}

// -----

// Tests that slice_grad rejects a zero stride.
func.func @slice_grad_stride(%dy: tensor<8x8xf32>) -> tensor<8x192xf32> {
  // expected-error @+1 {{stride of dimension 1 must be at least 1, got 0}}
  %0 = nn.slice_grad %dy start = [0, 0] limit = [8, 8] strides = [1, 0] : tensor<8x8xf32> -> tensor<8x192xf32>
  return %0 : tensor<8x192xf32>
}

// -----

// Tests that slice_grad rejects a result of another element type than dy.
func.func @slice_grad_element_type(%dy: tensor<8x8xf32>) -> tensor<8x8xbf16> {
  // expected-error @+1 {{'nn.slice_grad' op dy must have the type of the slice of the result 'tensor<8x8xbf16>' ('tensor<8x8xbf16>'), got 'tensor<8x8xf32>'}}
  %0 = nn.slice_grad %dy start = [0, 0] limit = [8, 8] : tensor<8x8xf32> -> tensor<8x8xbf16>
  return %0 : tensor<8x8xbf16>
}

// -----

// Tests that attention_grad rejects a negative window, and one without the causal mask.
func.func @attention_grad_window(%q: tensor<1x4x2x8xf32>, %lse: tensor<1x2x4xf32>) -> tensor<1x4x2x8xf32> {
  // expected-error @+1 {{'nn.attention_grad' op window must be positive, got -2}}
  %dq, %dk, %dv = nn.attention_grad %q, %q, %q, %q, %lse, %q causal window -2 : (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x2x4xf32>, tensor<1x4x2x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>)
  return %dq : tensor<1x4x2x8xf32>
}

// -----

func.func @attention_grad_window_not_causal(%q: tensor<1x4x2x8xf32>, %lse: tensor<1x2x4xf32>) -> tensor<1x4x2x8xf32> {
  // expected-error @+1 {{'nn.attention_grad' op window 2 needs the causal mask (a sliding window of past keys)}}
  %dq, %dk, %dv = nn.attention_grad %q, %q, %q, %q, %lse, %q window 2 : (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x2x4xf32>, tensor<1x4x2x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>)
  return %dq : tensor<1x4x2x8xf32>
}

// -----

// Tests that attention_grad's soft cap is positive, as the forward's.
func.func @attention_grad_softcap_negative(%q: tensor<1x4x2x8xf32>, %lse: tensor<1x2x4xf32>) -> tensor<1x4x2x8xf32> {
  // expected-error @+1 {{'nn.attention_grad' op softcap must be finite and positive, got -5.000000e+00}}
  %dq, %dk, %dv = nn.attention_grad %q, %q, %q, %q, %lse, %q causal softcap -5.0 : (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x2x4xf32>, tensor<1x4x2x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>)
  return %dq : tensor<1x4x2x8xf32>
}

// -----

// Tests that attention_grad's block of the queries needs the causal mask.
func.func @attention_grad_block_not_causal(%q: tensor<1x2x2x8xf32>, %k: tensor<1x4x2x8xf32>, %lse: tensor<1x2x2xf32>) -> tensor<1x2x2x8xf32> {
  // expected-error @+1 {{'nn.attention_grad' op has block_axes without the causal mask}}
  %dq, %dk, %dv = nn.attention_grad %q, %k, %k, %q, %lse, %q {block_axes = array<i16: 0>} : (tensor<1x2x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x2x2x8xf32>, tensor<1x2x2xf32>, tensor<1x2x2x8xf32>) -> (tensor<1x2x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>)
  return %dq : tensor<1x2x2x8xf32>
}
