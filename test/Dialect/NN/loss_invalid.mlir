// RUN: tessel-opt %s --split-input-file --verify-diagnostics

// Tests that cross_entropy rejects rank-0 logits.
func.func @cross_entropy_scalar_logits(%logits: tensor<f32>, %labels: tensor<i32>) -> tensor<f32> {
  // expected-error @+2 {{logits must be [..., classes], got 'tensor<f32>'}}
  // expected-error @+1 {{'nn.cross_entropy' op failed to infer returned types}}
  %0 = nn.cross_entropy %logits, %labels : (tensor<f32>, tensor<i32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that cross_entropy rejects 1-D labels the size of the class dimension.
func.func @cross_entropy_labels_shape(%logits: tensor<8x10xf32>, %labels: tensor<10xi32>) -> tensor<f32> {
  // expected-error @+2 {{labels 'tensor<10xi32>' must have the shape of the logits 'tensor<8x10xf32>' without the class dimension (8)}}
  // expected-error @+1 {{'nn.cross_entropy' op failed to infer returned types}}
  %0 = nn.cross_entropy %logits, %labels : (tensor<8x10xf32>, tensor<10xi32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that cross_entropy rejects 2-D labels whose shape differs from the logits' leading dimensions.
func.func @cross_entropy_labels_shape_2d(%logits: tensor<2x8x50xf32>, %labels: tensor<8x2xi64>) -> tensor<f32> {
  // expected-error @+2 {{labels 'tensor<8x2xi64>' must have the shape of the logits 'tensor<2x8x50xf32>' without the class dimension (2x8)}}
  // expected-error @+1 {{'nn.cross_entropy' op failed to infer returned types}}
  %0 = nn.cross_entropy %logits, %labels : (tensor<2x8x50xf32>, tensor<8x2xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that cross_entropy rejects labels with the class dimension kept (one-hot shape).
func.func @cross_entropy_labels_rank(%logits: tensor<8x10xf32>, %labels: tensor<8x10xi32>) -> tensor<f32> {
  // expected-error @+2 {{labels 'tensor<8x10xi32>' must have the shape of the logits 'tensor<8x10xf32>' without the class dimension (8)}}
  // expected-error @+1 {{'nn.cross_entropy' op failed to infer returned types}}
  %0 = nn.cross_entropy %logits, %labels : (tensor<8x10xf32>, tensor<8x10xi32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that 1-D logits need a rank-0 label.
func.func @cross_entropy_single_example_labels(%logits: tensor<10xf32>, %labels: tensor<1xi32>) -> tensor<f32> {
  // expected-error @+2 {{labels 'tensor<1xi32>' must have the shape of the logits 'tensor<10xf32>' without the class dimension (scalar)}}
  // expected-error @+1 {{'nn.cross_entropy' op failed to infer returned types}}
  %0 = nn.cross_entropy %logits, %labels : (tensor<10xf32>, tensor<1xi32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that the none reduction does not give a scalar.
func.func @cross_entropy_none_scalar(%logits: tensor<8x10xf32>, %labels: tensor<8xi32>) -> tensor<f32> {
  // expected-error @+2 {{'nn.cross_entropy' op inferred type(s) 'tensor<8xf32>' are incompatible with return type(s) of operation 'tensor<f32>'}}
  // expected-error @+1 {{'nn.cross_entropy' op failed to infer returned types}}
  %0 = nn.cross_entropy %logits, %labels {reduction = #nn.reduction<none>} : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that the default mean reduction does not keep per-position losses.
func.func @cross_entropy_mean_not_scalar(%logits: tensor<8x10xf32>, %labels: tensor<8xi32>) -> tensor<8xf32> {
  // expected-error @+2 {{'nn.cross_entropy' op inferred type(s) 'tensor<f32>' are incompatible with return type(s) of operation 'tensor<8xf32>'}}
  // expected-error @+1 {{'nn.cross_entropy' op failed to infer returned types}}
  %0 = nn.cross_entropy %logits, %labels : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// Tests that the sum reduction does not keep per-position losses.
func.func @cross_entropy_sum_not_scalar(%logits: tensor<2x8x50xf32>, %labels: tensor<2x8xi32>) -> tensor<2x8xf32> {
  // expected-error @+2 {{'nn.cross_entropy' op inferred type(s) 'tensor<f32>' are incompatible with return type(s) of operation 'tensor<2x8xf32>'}}
  // expected-error @+1 {{'nn.cross_entropy' op failed to infer returned types}}
  %0 = nn.cross_entropy %logits, %labels {reduction = #nn.reduction<sum>} : (tensor<2x8x50xf32>, tensor<2x8xi32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// Tests that cross_entropy rejects float labels.
func.func @cross_entropy_float_labels(%logits: tensor<8x10xf32>, %labels: tensor<8xf32>) -> tensor<f32> {
  // expected-error @+1 {{'nn.cross_entropy' op operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values without encoding, but got 'tensor<8xf32>'}}
  %0 = nn.cross_entropy %logits, %labels : (tensor<8x10xf32>, tensor<8xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that cross_entropy rejects integer logits.
func.func @cross_entropy_integer_logits(%logits: tensor<8x10xi32>, %labels: tensor<8xi32>) -> tensor<i32> {
  // expected-error @+1 {{'nn.cross_entropy' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values without encoding, but got 'tensor<8x10xi32>'}}
  %0 = nn.cross_entropy %logits, %labels : (tensor<8x10xi32>, tensor<8xi32>) -> tensor<i32>
  return %0 : tensor<i32>
}

// -----

// Tests that an unknown reduction keyword is rejected.
func.func @cross_entropy_unknown_reduction(%logits: tensor<8x10xf32>, %labels: tensor<8xi32>) -> tensor<f32> {
  // expected-error @+2 {{expected ::tessel::nn::LossReduction to be one of: mean, sum, none}}
  // expected-error @+1 {{failed to parse NN_LossReductionAttr parameter 'value' which is to be a `::tessel::nn::LossReduction`}}
  %0 = nn.cross_entropy %logits, %labels {reduction = #nn.reduction<avg>} : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that a reduction that is not an #nn.reduction attribute is rejected.
func.func @cross_entropy_integer_reduction(%logits: tensor<8x10xf32>, %labels: tensor<8xi32>) -> tensor<f32> {
  // expected-error @+1 {{'nn.cross_entropy' op attribute 'reduction' failed to satisfy constraint: how a per-example loss is reduced}}
  %0 = nn.cross_entropy %logits, %labels {reduction = 1 : i32} : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that the loss of 16-bit logits is of their type or f32, not f64.
func.func @cross_entropy_f64_loss_of_bf16(%logits: tensor<8x10xbf16>, %labels: tensor<8xi32>) -> tensor<f64> {
  // expected-error @+2 {{'nn.cross_entropy' op inferred type(s) 'tensor<bf16>' are incompatible with return type(s) of operation 'tensor<f64>'}}
  // expected-error @+1 {{'nn.cross_entropy' op failed to infer returned types}}
  %0 = nn.cross_entropy %logits, %labels : (tensor<8x10xbf16>, tensor<8xi32>) -> tensor<f64>
  return %0 : tensor<f64>
}

// -----

// Tests that f32 logits have an f32 loss only: a loss in another type is
// no widening.
func.func @cross_entropy_bf16_loss_of_f32(%logits: tensor<8x10xf32>, %labels: tensor<8xi32>) -> tensor<bf16> {
  // expected-error @+2 {{'nn.cross_entropy' op inferred type(s) 'tensor<f32>' are incompatible with return type(s) of operation 'tensor<bf16>'}}
  // expected-error @+1 {{'nn.cross_entropy' op failed to infer returned types}}
  %0 = nn.cross_entropy %logits, %labels : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<bf16>
  return %0 : tensor<bf16>
}

// -----

// Tests that the f32 loss of 16-bit logits keeps the reduction's shape.
func.func @cross_entropy_f32_loss_shape(%logits: tensor<8x10xbf16>, %labels: tensor<8xi32>) -> tensor<f32> {
  // expected-error @+2 {{'nn.cross_entropy' op inferred type(s) 'tensor<8xbf16>' are incompatible with return type(s) of operation 'tensor<f32>'}}
  // expected-error @+1 {{'nn.cross_entropy' op failed to infer returned types}}
  %0 = nn.cross_entropy %logits, %labels {reduction = #nn.reduction<none>} : (tensor<8x10xbf16>, tensor<8xi32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that the fused loss's loss has the cross-entropy's type.
func.func @with_grad_loss_type(%z: tensor<8x10xf32>, %y: tensor<8xi32>, %dl: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'nn.cross_entropy_with_grad' op loss must have type 'tensor<f32>', got 'tensor<8xf32>'}}
  %l, %dz = nn.cross_entropy_with_grad %z, %y, %dl : (tensor<8x10xf32>, tensor<8xi32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8x10xf32>)
  return %l : tensor<8xf32>
}

// -----

// Tests that the loss of bf16 logits is bf16 or f32.
func.func @with_grad_loss_f64(%z: tensor<8x10xbf16>, %y: tensor<8xi32>, %dl: tensor<f64>) -> tensor<f64> {
  // expected-error @+1 {{'nn.cross_entropy_with_grad' op loss must have type 'tensor<bf16>' (or f32), got 'tensor<f64>'}}
  %l, %dz = nn.cross_entropy_with_grad %z, %y, %dl : (tensor<8x10xbf16>, tensor<8xi32>, tensor<f64>) -> (tensor<f64>, tensor<8x10xbf16>)
  return %l : tensor<f64>
}

// -----

// Tests that dloss has the loss's type.
func.func @with_grad_dloss_type(%z: tensor<8x10xbf16>, %y: tensor<8xi32>, %dl: tensor<bf16>) -> tensor<f32> {
  // expected-error @+1 {{'nn.cross_entropy_with_grad' op dloss must have the loss's type 'tensor<f32>', got 'tensor<bf16>'}}
  %l, %dz = nn.cross_entropy_with_grad %z, %y, %dl : (tensor<8x10xbf16>, tensor<8xi32>, tensor<bf16>) -> (tensor<f32>, tensor<8x10xbf16>)
  return %l : tensor<f32>
}

// -----

// Tests that dlogits have the logits' type.
func.func @with_grad_dlogits_type(%z: tensor<8x10xbf16>, %y: tensor<8xi32>, %dl: tensor<f32>) -> tensor<8x10xf32> {
  // expected-error @+1 {{'nn.cross_entropy_with_grad' op dlogits must have the logits' type 'tensor<8x10xbf16>', got 'tensor<8x10xf32>'}}
  %l, %dz = nn.cross_entropy_with_grad %z, %y, %dl : (tensor<8x10xbf16>, tensor<8xi32>, tensor<f32>) -> (tensor<f32>, tensor<8x10xf32>)
  return %dz : tensor<8x10xf32>
}

// -----

// Tests that the labels fit the logits.
func.func @with_grad_labels(%z: tensor<8x10xf32>, %y: tensor<4xi32>, %dl: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{labels 'tensor<4xi32>' must have the shape of the logits 'tensor<8x10xf32>' without the class dimension (8)}}
  %l, %dz = nn.cross_entropy_with_grad %z, %y, %dl : (tensor<8x10xf32>, tensor<4xi32>, tensor<f32>) -> (tensor<f32>, tensor<8x10xf32>)
  return %l : tensor<f32>
}

// -----

// Tests that mask_labels' safe labels keep the labels' type.
func.func @mask_labels_safe_type(%labels: tensor<4xi32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.mask_labels' op safe labels must have the labels' type 'tensor<4xi32>', got 'tensor<4xi64>'}}
  %safe, %w = nn.mask_labels %labels ignore_index -100 : (tensor<4xi32>) -> (tensor<4xi64>, tensor<4xf32>)
  return %w : tensor<4xf32>
}

// -----

// Tests that mask_labels' weights have one value per label.
func.func @mask_labels_weights_shape(%labels: tensor<4xi32>) -> tensor<2x2xf32> {
  // expected-error @+1 {{'nn.mask_labels' op weights must have the labels' shape (4), got 'tensor<2x2xf32>'}}
  %safe, %w = nn.mask_labels %labels ignore_index -100 : (tensor<4xi32>) -> (tensor<4xi32>, tensor<2x2xf32>)
  return %w : tensor<2x2xf32>
}

// -----

// Tests that mask_labels' weights are floats.
func.func @mask_labels_integer_weights(%labels: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'nn.mask_labels' op result #1 must be}}
  %safe, %w = nn.mask_labels %labels ignore_index -100 : (tensor<4xi32>) -> (tensor<4xi32>, tensor<4xi32>)
  return %w : tensor<4xi32>
}

// -----

// Tests that the labels to mask are integers.
func.func @mask_labels_float_labels(%labels: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.mask_labels' op operand #0 must be}}
  %safe, %w = nn.mask_labels %labels ignore_index -100 : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return %w : tensor<4xf32>
}

// -----

// Tests that label smoothing is a weight in [0, 1].
func.func @cross_entropy_label_smoothing_above_one(%z: tensor<4x7xf32>, %y: tensor<4xi32>) -> tensor<f32> {
  // expected-error @+1 {{'nn.cross_entropy' op label_smoothing must be in [0, 1], got 1.5}}
  %l = nn.cross_entropy %z, %y {label_smoothing = 1.5 : f64} : (tensor<4x7xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that label smoothing is not negative.
func.func @cross_entropy_label_smoothing_negative(%z: tensor<4x7xf32>, %y: tensor<4xi32>) -> tensor<f32> {
  // expected-error @+1 {{'nn.cross_entropy' op label_smoothing must be in [0, 1], got -1.000000e-01}}
  %l = nn.cross_entropy %z, %y {label_smoothing = -0.1 : f64} : (tensor<4x7xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that the vocabulary-parallel statistics are one per position.
func.func @vocab_loss_stats_rows(%z: tensor<4x7xf32>, %y: tensor<4xi32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.vocab_loss_stats' op logit_sum must be 'tensor<4xf32>' (one per position), got 'tensor<4xf16>'}}
  %m, %s, %zy, %zs = nn.vocab_loss_stats %z, %y : (tensor<4x7xf32>, tensor<4xi32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf16>)
  return %m : tensor<4xf32>
}

// -----

// Tests that the statistics are of the logits' type: wider only for 16-bit
// logits, and then f32.
func.func @vocab_loss_stats_wide(%z: tensor<4x7xf32>, %y: tensor<4xi32>) -> tensor<4xf64> {
  // expected-error @+1 {{'nn.vocab_loss_stats' op statistics must be of the logits' type 'f32', got 'f64'}}
  %m, %s, %zy, %zs = nn.vocab_loss_stats %z, %y : (tensor<4x7xf32>, tensor<4xi32>) -> (tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>)
  return %m : tensor<4xf64>
}

// -----

func.func @vocab_loss_stats_half(%z: tensor<4x7xbf16>, %y: tensor<4xi32>) -> tensor<4xf16> {
  // expected-error @+1 {{'nn.vocab_loss_stats' op statistics must be of the logits' type 'bf16' or f32, got 'f16'}}
  %m, %s, %zy, %zs = nn.vocab_loss_stats %z, %y : (tensor<4x7xbf16>, tensor<4xi32>) -> (tensor<4xf16>, tensor<4xf16>, tensor<4xf16>, tensor<4xf16>)
  return %m : tensor<4xf16>
}

// -----

// Tests that a gradient's statistics and row gradients are of one type.
func.func @vocab_loss_grad_mixed(%z: tensor<4x7xbf16>, %y: tensor<4xi32>, %m: tensor<4xf32>, %s: tensor<4xbf16>) -> tensor<4x7xbf16> {
  // expected-error @+1 {{'nn.vocab_loss_grad' op sum_exp must be 'tensor<4xf32>' (one per position), got 'tensor<4xbf16>'}}
  %dz = nn.vocab_loss_grad %z, %y, %m, %s, %m : (tensor<4x7xbf16>, tensor<4xi32>, tensor<4xf32>, tensor<4xbf16>, tensor<4xf32>) -> tensor<4x7xbf16>
  return %dz : tensor<4x7xbf16>
}

// -----

// Tests that the labels have the positions' shape.
func.func @vocab_loss_stats_labels(%z: tensor<4x7xf32>, %y: tensor<5xi32>) -> tensor<4xf32> {
  // expected-error @+1 {{labels 'tensor<5xi32>' must have the shape of the logits 'tensor<4x7xf32>' without the class dimension (4)}}
  %m, %s, %zy, %zs = nn.vocab_loss_stats %z, %y : (tensor<4x7xf32>, tensor<5xi32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return %m : tensor<4xf32>
}

// -----

// Tests the gradient's row operands, its type and its options.
func.func @vocab_loss_grad_rows(%z: tensor<4x7xf32>, %y: tensor<4xi32>, %m: tensor<4xf32>, %g: tensor<7xf32>) -> tensor<4x7xf32> {
  // expected-error @+1 {{'nn.vocab_loss_grad' op row_grad must be 'tensor<4xf32>' (one per position), got 'tensor<7xf32>'}}
  %dz = nn.vocab_loss_grad %z, %y, %m, %m, %g : (tensor<4x7xf32>, tensor<4xi32>, tensor<4xf32>, tensor<4xf32>, tensor<7xf32>) -> tensor<4x7xf32>
  return %dz : tensor<4x7xf32>
}

// -----

func.func @vocab_loss_grad_type(%z: tensor<4x7xf32>, %y: tensor<4xi32>, %m: tensor<4xf32>) -> tensor<4x7xf64> {
  // expected-error @+1 {{'nn.vocab_loss_grad' op dlogits must have the logits' type 'tensor<4x7xf32>', got 'tensor<4x7xf64>'}}
  %dz = nn.vocab_loss_grad %z, %y, %m, %m, %m : (tensor<4x7xf32>, tensor<4xi32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4x7xf64>
  return %dz : tensor<4x7xf64>
}

// -----

func.func @vocab_loss_grad_smoothing(%z: tensor<4x7xf32>, %y: tensor<4xi32>, %m: tensor<4xf32>) -> tensor<4x7xf32> {
  // expected-error @+1 {{'nn.vocab_loss_grad' op label_smoothing must be in [0, 1], got 2}}
  %dz = nn.vocab_loss_grad %z, %y, %m, %m, %m {label_smoothing = 2.0 : f64} : (tensor<4x7xf32>, tensor<4xi32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4x7xf32>
  return %dz : tensor<4x7xf32>
}
