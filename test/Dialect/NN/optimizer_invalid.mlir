// RUN: tessel-opt %s --split-input-file --verify-diagnostics

// Tests that sum_squares needs at least one input.
func.func @sum_squares_empty() -> tensor<f32> {
  // expected-error @+1 {{'nn.sum_squares' op needs at least one input}}
  %0 = nn.sum_squares : () -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that sum_squares rejects integer inputs.
func.func @sum_squares_integer(%a: tensor<8xi32>) -> tensor<f32> {
  // expected-error @+1 {{'nn.sum_squares' op operand #0 must be variadic of statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values without encoding, but got 'tensor<8xi32>'}}
  %0 = nn.sum_squares %a : (tensor<8xi32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that sum_squares gives an f32 or f64 scalar, whatever its inputs.
func.func @sum_squares_result(%a: tensor<8xbf16>) -> tensor<bf16> {
  // expected-error @+1 {{'nn.sum_squares' op result #0 must be tensor<f32> or tensor<f64>, but got 'tensor<bf16>'}}
  %0 = nn.sum_squares %a : (tensor<8xbf16>) -> tensor<bf16>
  return %0 : tensor<bf16>
}

// -----

// Tests that clip_scale's scalars are of one type (generic form).
func.func @clip_scale_mixed(%ss: tensor<f64>, %gs: tensor<f32>) -> tensor<f64> {
  // expected-error @+1 {{'nn.clip_scale' op requires the same type for all operands and results}}
  %0 = "nn.clip_scale"(%ss, %gs) : (tensor<f64>, tensor<f32>) -> tensor<f64>
  return %0 : tensor<f64>
}

// -----

// Tests that clip_scale rejects operands that are not f32 scalars (generic form).
func.func @clip_scale_type(%ss: tensor<2xf32>, %gs: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'nn.clip_scale' op operand #0 must be tensor<f32> or tensor<f64>, but got 'tensor<2xf32>'}}
  %0 = "nn.clip_scale"(%ss, %gs) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// Tests that clip_scale rejects a max_norm that is not finite.
func.func @clip_scale_max_norm(%ss: tensor<f32>, %gs: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{'nn.clip_scale' op max_norm must be finite (<= 0: no clipping), got inf}}
  %0 = nn.clip_scale %ss, %gs {max_norm = 0x7FF0000000000000 : f64} : tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that optimizer_step names a known optimizer.
func.func @optimizer_unknown(%p: tensor<4xf32>, %s: tensor<f32>) -> tensor<4xf32> {
  // expected-error @+1 {{unknown optimizer 'lamb' (expected sgd, adam or adamw)}}
  %0 = nn.optimizer_step lamb %p, %s outs(%p : tensor<4xf32>) : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that optimizer_step needs the parameter in outs (generic form).
func.func @optimizer_no_outs(%g: tensor<4xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'nn.optimizer_step' op needs the parameter (and its states) in outs}}
  "nn.optimizer_step"(%g, %s) {optimizer = #nn.optimizer<sgd>} : (tensor<4xf32>, tensor<f32>) -> ()
  return
}

// -----

// Tests that optimizer_step rejects a gradient of another type than the parameter.
func.func @optimizer_grad_type(%p: tensor<4xf32>, %g: tensor<4xbf16>, %s: tensor<f32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.optimizer_step' op grad must have the parameter's type 'tensor<4xf32>', got 'tensor<4xbf16>'}}
  %0 = nn.optimizer_step sgd %g, %s outs(%p : tensor<4xf32>) : tensor<4xbf16>
  return %0 : tensor<4xf32>
}

// -----

// Tests that adamw needs both its m and v states.
func.func @optimizer_adamw_states(%p: tensor<4xf32>, %s: tensor<f32>, %m: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.optimizer_step' op adamw keeps 2 states (m and v) after the parameter in outs, got 1}}
  %0, %1 = nn.optimizer_step adamw %p, %s outs(%p, %m : tensor<4xf32>, tensor<4xf32>) : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that sgd with momentum needs its momentum buffer.
func.func @optimizer_momentum_state(%p: tensor<4xf32>, %s: tensor<f32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.optimizer_step' op sgd with momentum keeps 1 state (the momentum buffer) after the parameter in outs, got 0}}
  %0 = nn.optimizer_step sgd %p, %s outs(%p : tensor<4xf32>) {momentum = 0.9 : f64} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that plain sgd keeps no state.
func.func @optimizer_sgd_state(%p: tensor<4xf32>, %s: tensor<f32>, %m: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.optimizer_step' op sgd without momentum keeps no state after the parameter in outs, got 1}}
  %0, %1 = nn.optimizer_step sgd %p, %s outs(%p, %m : tensor<4xf32>, tensor<4xf32>) : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that an f64 parameter's states are f64: its update is not rounded
// to f32.
func.func @optimizer_state_f64(%p: tensor<4xf64>, %s: tensor<f64>, %m: tensor<4xf32>, %v: tensor<4xf32>) -> tensor<4xf64> {
  // expected-error @+1 {{'nn.optimizer_step' op state #0 must be 'tensor<4xf64>' (f64 in the parameter's shape), got 'tensor<4xf32>'}}
  %0, %1, %2 = nn.optimizer_step adamw %p, %s outs(%p, %m, %v : tensor<4xf64>, tensor<4xf32>, tensor<4xf32>) : tensor<4xf64>
  return %0 : tensor<4xf64>
}

// -----

// Tests that an f64 parameter's scale is f64 too (generic form: the custom
// form infers it from the gradient's type).
func.func @optimizer_scale_f64(%p: tensor<4xf64>, %s: tensor<f32>, %m: tensor<4xf64>) -> tensor<4xf64> {
  // expected-error @+1 {{'nn.optimizer_step' op failed to verify that scale is tensor<f64> beside an f64 grad, else tensor<f32>}}
  %0:2 = "nn.optimizer_step"(%p, %s, %p, %m) {optimizer = #nn.optimizer<sgd>, momentum = 0.9 : f64} : (tensor<4xf64>, tensor<f32>, tensor<4xf64>, tensor<4xf64>) -> (tensor<4xf64>, tensor<4xf64>)
  return %0#0 : tensor<4xf64>
}

// -----

// Tests that optimizer states are f32 in the parameter's shape.
func.func @optimizer_state_type(%p: tensor<4xbf16>, %s: tensor<f32>, %m: tensor<4xbf16>, %v: tensor<4xf32>) -> tensor<4xbf16> {
  // expected-error @+1 {{'nn.optimizer_step' op state #0 must be 'tensor<4xf32>' (f32 in the parameter's shape), got 'tensor<4xbf16>'}}
  %0, %1, %2 = nn.optimizer_step adam %p, %s outs(%p, %m, %v : tensor<4xbf16>, tensor<4xbf16>, tensor<4xf32>) : tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

// Tests that optimizer_step rejects a negative learning rate.
func.func @optimizer_lr(%p: tensor<4xf32>, %s: tensor<f32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.optimizer_step' op lr must be >= 0, got -0.1}}
  %0 = nn.optimizer_step sgd %p, %s outs(%p : tensor<4xf32>) {lr = -0.1 : f64} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that beta1 must be below 1.
func.func @optimizer_beta1(%p: tensor<4xf32>, %s: tensor<f32>, %m: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.optimizer_step' op beta1 must be in [0, 1), got 1}}
  %0, %1, %2 = nn.optimizer_step adam %p, %s outs(%p, %m, %m : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {beta1 = 1.0 : f64} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that beta2 must not be negative.
func.func @optimizer_beta2(%p: tensor<4xf32>, %s: tensor<f32>, %m: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.optimizer_step' op beta2 must be in [0, 1), got -0.5}}
  %0, %1, %2 = nn.optimizer_step adamw %p, %s outs(%p, %m, %m : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {beta2 = -0.5 : f64} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that eps must be positive.
func.func @optimizer_eps(%p: tensor<4xf32>, %s: tensor<f32>, %m: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.optimizer_step' op eps must be positive, got 0}}
  %0, %1, %2 = nn.optimizer_step adamw %p, %s outs(%p, %m, %m : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {eps = 0.0 : f64} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that weight_decay must not be negative.
func.func @optimizer_weight_decay(%p: tensor<4xf32>, %s: tensor<f32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.optimizer_step' op weight_decay must be >= 0, got -0.01}}
  %0 = nn.optimizer_step sgd %p, %s outs(%p : tensor<4xf32>) {weight_decay = -0.01 : f64} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that momentum must not be negative.
func.func @optimizer_momentum(%p: tensor<4xf32>, %s: tensor<f32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.optimizer_step' op momentum must be >= 0, got -0.9}}
  %0, %1 = nn.optimizer_step sgd %p, %s outs(%p, %p : tensor<4xf32>, tensor<4xf32>) {momentum = -0.9 : f64} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that nesterov needs sgd with momentum (not adam).
func.func @optimizer_nesterov_adam(%p: tensor<4xf32>, %s: tensor<f32>, %m: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.optimizer_step' op nesterov needs sgd with momentum > 0, got adam with momentum 0}}
  %0, %1, %2 = nn.optimizer_step adam %p, %s outs(%p, %m, %m : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {nesterov} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that nesterov needs a positive momentum.
func.func @optimizer_nesterov_momentum(%p: tensor<4xf32>, %s: tensor<f32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.optimizer_step' op nesterov needs sgd with momentum > 0, got sgd with momentum 0}}
  %0 = nn.optimizer_step sgd %p, %s outs(%p : tensor<4xf32>) {nesterov} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that warmup must not be negative.
func.func @optimizer_warmup(%p: tensor<4xf32>, %s: tensor<f32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.optimizer_step' op warmup must be >= 0, got -1}}
  %0 = nn.optimizer_step sgd %p, %s outs(%p : tensor<4xf32>) {warmup = -1 : i64} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that min_lr must be finite.
func.func @optimizer_min_lr(%p: tensor<4xf32>, %s: tensor<f32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.optimizer_step' op min_lr must be finite, got inf}}
  %0 = nn.optimizer_step sgd %p, %s outs(%p : tensor<4xf32>) {min_lr = 0x7FF0000000000000 : f64} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that a warmup-cosine schedule needs total_steps past the warm-up.
func.func @optimizer_total_steps(%p: tensor<4xf32>, %s: tensor<f32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.optimizer_step' op warmup_cosine needs total_steps (100) > warmup (100)}}
  %0 = nn.optimizer_step sgd %p, %s outs(%p : tensor<4xf32>) {schedule = #nn.lr_schedule<warmup_cosine>, warmup = 100 : i64, total_steps = 100 : i64} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that optimizer_step's results are its outs' types (generic form).
func.func @optimizer_result_types(%p: tensor<4xf32>, %s: tensor<f32>) -> tensor<8xf32> {
  // expected-error @+2 {{'nn.optimizer_step' op inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<8xf32>'}}
  // expected-error @+1 {{'nn.optimizer_step' op failed to infer returned types}}
  %0 = "nn.optimizer_step"(%p, %s, %p) {optimizer = #nn.optimizer<sgd>} : (tensor<4xf32>, tensor<f32>, tensor<4xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// Tests that accumulate rejects a value of another type than the accumulator (generic form).
func.func @accumulate_types(%g: tensor<4xbf16>, %acc: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.accumulate' op requires the same type for all operands and results}}
  %0 = "nn.accumulate"(%g, %acc) : (tensor<4xbf16>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that master weights belong to a bf16 or f16 parameter.
func.func @optimizer_master_f32_param(%p: tensor<4xf32>, %s: tensor<f32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.optimizer_step' op with master weights updates a bf16 or f16 parameter, got 'tensor<4xf32>'}}
  %0, %1 = nn.optimizer_step sgd %p, %s outs(%p, %w : tensor<4xf32>, tensor<4xf32>) {master} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that with master weights the gradient is f32 or the parameter's type.
func.func @optimizer_master_grad(%p: tensor<4xbf16>, %g: tensor<4xf16>, %s: tensor<f32>, %w: tensor<4xf32>) -> tensor<4xbf16> {
  // expected-error @+1 {{'nn.optimizer_step' op grad must be 'tensor<4xbf16>' or 'tensor<4xf32>', got 'tensor<4xf16>'}}
  %0, %1 = nn.optimizer_step sgd %g, %s outs(%p, %w : tensor<4xbf16>, tensor<4xf32>) {master} : tensor<4xf16>
  return %0 : tensor<4xbf16>
}

// -----

// Tests that the master weights come first, then the optimizer's states.
func.func @optimizer_master_states(%p: tensor<4xbf16>, %s: tensor<f32>, %w: tensor<4xf32>) -> tensor<4xbf16> {
  // expected-error @+1 {{'nn.optimizer_step' op adamw keeps 2 states (m and v) after the parameter and its master in outs, got 0}}
  %0, %1 = nn.optimizer_step adamw %p, %s outs(%p, %w : tensor<4xbf16>, tensor<4xf32>) {master} : tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

// Tests that master weights are f32.
func.func @optimizer_master_type(%p: tensor<4xbf16>, %s: tensor<f32>, %w: tensor<4xbf16>) -> tensor<4xbf16> {
  // expected-error @+1 {{'nn.optimizer_step' op state #0 must be 'tensor<4xf32>' (f32 in the parameter's shape), got 'tensor<4xbf16>'}}
  %0, %1 = nn.optimizer_step sgd %p, %s outs(%p, %w : tensor<4xbf16>, tensor<4xbf16>) {master} : tensor<4xbf16>
  return %0 : tensor<4xbf16>
}
