// RUN: tessel-opt %s -split-input-file -tessel-autodiff -canonicalize -cse | FileCheck %s
// RUN: tessel-opt %s -split-input-file -tessel-autodiff="optimizer=sgd momentum=0.9 clip=1.0" | FileCheck %s --check-prefix=SGD
// RUN: tessel-opt %s -split-input-file -tessel-autodiff="recompute=selective" -canonicalize -cse | FileCheck %s --check-prefix=SELECTIVE
// RUN: tessel-opt %s -split-input-file -tessel-autodiff="recompute=full" -canonicalize -cse | FileCheck %s --check-prefix=FULL

// Tests that a model gets a backward entry (forward, reverse sweep, one
// accumulation per parameter) and an AdamW update entry with two states.
// CHECK-LABEL: func.func @elementwise(
// CHECK-LABEL: func.func @elementwise_backward(
// CHECK-SAME: %[[W:.*]]: tensor<4xf32> {nn.init = #nn.init<zeros>, nn.param = "w"}, %[[X:.*]]: tensor<4xf32> {nn.input}, %[[ACC:.*]]: tensor<4xf32> {nn.grad = "w"})
// CHECK-SAME: -> (tensor<f32>, tensor<4xf32> {nn.grad = "w"}) attributes {nn.entry = "backward"}
// CHECK-DAG:   %[[C1:.*]] = nn.constant dense<1.000000e+00> : tensor<f32>
// CHECK-DAG:   %[[Y:.*]] = nn.mul %[[W]], %[[X]]
// CHECK-DAG:   %[[T:.*]] = nn.tanh %[[Y]]
// CHECK:       %[[L:.*]] = nn.reduce_sum %[[T]]
// CHECK:       %[[ONE:.*]] = nn.broadcast %[[C1]] dims = [] : tensor<f32> -> tensor<4xf32>
// CHECK:       %[[T2:.*]] = nn.mul %[[T]], %[[T]]
// CHECK:       %[[D:.*]] = nn.sub %[[ONE]], %[[T2]]
// CHECK:       %[[DW:.*]] = nn.mul %[[D]], %[[X]]
// CHECK:       %[[NEW:.*]] = nn.accumulate %[[DW]] outs(%[[ACC]])
// CHECK:       return %[[L]], %[[NEW]]
// CHECK-LABEL: func.func @elementwise_update(
// CHECK-SAME: %[[P:.*]]: tensor<4xf32> {nn.init = #nn.init<zeros>, nn.param = "w"}, %[[G:.*]]: tensor<4xf32> {nn.grad = "w"}, %[[M:.*]]: tensor<4xf32> {nn.state = "w.m"}, %[[V:.*]]: tensor<4xf32> {nn.state = "w.v"}, %[[S:.*]]: tensor<f32> {nn.grad_scale})
// CHECK-SAME: -> (tensor<4xf32> {nn.param = "w"}, tensor<4xf32> {nn.state = "w.m"}, tensor<4xf32> {nn.state = "w.v"}) attributes {nn.entry = "update"}
// CHECK:       %[[STEP:.*]]:3 = nn.optimizer_step adamw %[[G]], %[[S]] outs(%[[P]], %[[M]], %[[V]] : {{.*}}) {weight_decay = 1.000000e-02 : f64}
// CHECK:       return %[[STEP]]#0, %[[STEP]]#1, %[[STEP]]#2
// SGD-LABEL: func.func @elementwise_update(
// SGD-SAME: %[[P:.*]]: tensor<4xf32> {{.*}}, %[[G:.*]]: tensor<4xf32> {nn.grad = "w"}, %[[MOM:.*]]: tensor<4xf32> {nn.state = "w.momentum"}, %[[S:.*]]: tensor<f32> {nn.grad_scale})
// SGD:       %[[SQ:.*]] = nn.sum_squares %[[G]]
// SGD:       %[[SCALE:.*]] = nn.clip_scale %[[SQ]], %[[S]]
// SGD:       nn.optimizer_step sgd %[[G]], %[[SCALE]] outs(%[[P]], %[[MOM]] : {{.*}}) {momentum = 9.000000e-01 : f64}
func.func @elementwise(%w: tensor<4xf32> {nn.param = "w", nn.init = #nn.init<zeros>},
                       %x: tensor<4xf32> {nn.input}) -> tensor<f32> {
  %y = nn.mul %w, %x : tensor<4xf32>
  %t = nn.tanh %y : tensor<4xf32>
  %l = nn.reduce_sum %t dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a parameter used twice (a tied weight) sums both cotangents,
// and that a matmul's transposes carry into its derivative.
// CHECK-LABEL: func.func @tied_backward(
// CHECK-SAME: %[[W:[^:]*]]: tensor<4x4xf32> {{.*}}, %[[X:[^:]*]]: tensor<2x4xf32> {nn.input}, %[[ACC:[^:]*]]: tensor<4x4xf32> {nn.grad = "w"})
// CHECK-DAG:   %[[DO:.*]] = nn.constant dense<1.250000e-01> : tensor<2x4xf32>
// CHECK-DAG:   %[[H:.*]] = nn.matmul %[[X]], %[[W]] :
// CHECK:       %[[DH:.*]] = nn.matmul %[[DO]], %[[W]] :
// CHECK:       %[[DW2:.*]] = nn.matmul %[[DO]], %[[H]] transpose_lhs :
// CHECK:       %[[DW1:.*]] = nn.matmul %[[X]], %[[DH]] transpose_lhs :
// CHECK:       %[[SUM:.*]] = nn.add %[[DW2]], %[[DW1]]
// CHECK:       nn.accumulate %[[SUM]] outs(%[[ACC]])
func.func @tied(%w: tensor<4x4xf32> {nn.param = "w", nn.init = #nn.init<zeros>},
                %x: tensor<2x4xf32> {nn.input}) -> tensor<f32> {
  %h = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %o = nn.matmul %h, %w transpose_rhs : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %l = nn.reduce_mean %o dims = [0, 1] : tensor<2x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a parameter that does not reach the loss is left out of the
// training entries, with a warning.
// CHECK-LABEL: func.func @partly_used_backward(
// CHECK-SAME: {nn.grad = "used"})
// CHECK-NOT: nn.grad = "unused"
// CHECK-LABEL: func.func @partly_used_update(
// CHECK-NOT: "unused"
// CHECK: return
func.func @partly_used(%used: tensor<4xf32> {nn.param = "used", nn.init = #nn.init<zeros>},
                       %unused: tensor<4xf32> {nn.param = "unused", nn.init = #nn.init<zeros>}) -> tensor<f32> {
  %l = nn.reduce_sum %used dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a repeat keeps, per layer, what its derivative reads (recompute
// none: the layer input and the matmul before the gelu), and runs the
// layer's derivative in reverse over the stacks; its stacked result is the
// stacked parameter's gradient. Selective recompute keeps only the matmul
// (an expensive op) and recomputes nothing else that is stacked; full
// recompute keeps only the layer input and recomputes the matmul.
// CHECK-LABEL: func.func private @layer_keep(
// CHECK-SAME: %[[H:[^:]*]]: tensor<2x8xf32>, %[[W:[^:]*]]: tensor<8x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>)
// CHECK:       %[[M:.*]] = nn.matmul %[[H]], %[[W]]
// CHECK:       return %{{.*}}, %[[H]], %[[M]]
// CHECK-LABEL: func.func private @layer_derivative(
// CHECK-SAME: %[[DY:[^:]*]]: tensor<2x8xf32>, %[[H:[^:]*]]: tensor<2x8xf32>, %[[W:[^:]*]]: tensor<8x8xf32>, %[[M:[^:]*]]: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<8x8xf32>)
// CHECK-NOT:   nn.matmul %[[H]], %[[W]] :
// CHECK:       %[[DM:.*]] = nn.gelu_grad %[[M]], %[[DY]]
// CHECK:       %[[DH:.*]] = nn.matmul %[[DM]], %[[W]] transpose_rhs
// CHECK:       %[[DW:.*]] = nn.matmul %[[H]], %[[DM]] transpose_lhs
// CHECK:       %[[DX:.*]] = nn.add %[[DY]], %[[DH]]
// CHECK:       return %[[DX]], %[[DW]]
// CHECK-LABEL: func.func @stack_backward(
// CHECK:       %[[FWD:.*]]:3 = nn.repeat @layer_keep(%{{.*}}) params(%[[WS:[^)]*]]) : (tensor<2x8xf32>, tensor<3x8x8xf32>) -> (tensor<2x8xf32>, tensor<3x2x8xf32>, tensor<3x2x8xf32>)
// CHECK:       %[[BWD:.*]]:2 = nn.repeat @layer_derivative(%{{.*}}) params(%[[FWD]]#1, %[[WS]], %[[FWD]]#2) reverse : ({{.*}}) -> (tensor<2x8xf32>, tensor<3x8x8xf32>)
// CHECK:       nn.accumulate %[[BWD]]#1 outs(
// SELECTIVE-LABEL: func.func private @layer_derivative(
// SELECTIVE-SAME: %[[DY:[^:]*]]: tensor<2x8xf32>, %[[H:[^:]*]]: tensor<2x8xf32>, %[[W:[^:]*]]: tensor<8x8xf32>, %[[M:[^:]*]]: tensor<2x8xf32>)
// SELECTIVE-NOT:   nn.matmul %[[H]], %[[W]] :
// SELECTIVE:       nn.gelu_grad %[[M]], %[[DY]]
// FULL-LABEL: func.func private @layer_keep(
// FULL-SAME: -> (tensor<2x8xf32>, tensor<2x8xf32>)
// FULL-LABEL: func.func private @layer_derivative(
// FULL-SAME: %[[DY:[^:]*]]: tensor<2x8xf32>, %[[H:[^:]*]]: tensor<2x8xf32>, %[[W:[^:]*]]: tensor<8x8xf32>) -> (tensor<2x8xf32>, tensor<8x8xf32>)
// FULL:       %[[M:.*]] = nn.matmul %[[H]], %[[W]] :
// FULL:       nn.gelu_grad %[[M]], %[[DY]]
// FULL-LABEL: func.func @stack_backward(
// FULL:       nn.repeat @layer_derivative(%{{.*}}) params(%{{[^,]*}}, %{{[^,)]*}}) reverse
func.func private @layer(%h: tensor<2x8xf32>, %w: tensor<8x8xf32>) -> tensor<2x8xf32> {
  %m = nn.matmul %h, %w : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %g = nn.gelu %m : tensor<2x8xf32>
  %r = nn.add %g, %h : tensor<2x8xf32>
  return %r : tensor<2x8xf32>
}
func.func @stack(%ws: tensor<3x8x8xf32> {nn.param = "ws", nn.init = #nn.init<normal, 0.1>, nn.axes = ["layers", "embed", "mlp"]},
                 %x: tensor<2x8xf32> {nn.input}) -> tensor<f32> {
  %y = nn.repeat @layer(%x) params(%ws) : (tensor<2x8xf32>, tensor<3x8x8xf32>) -> tensor<2x8xf32>
  %l = nn.reduce_sum %y dims = [0, 1] : tensor<2x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that the module's nn.train settings choose the optimizer and are
// written back complete.
// CHECK: module attributes {nn.train = {{{.*}}optimizer = "adam"{{.*}}schedule = "warmup_cosine", total_steps = 100 : i64, warmup = 10 : i64
// CHECK-LABEL: func.func @configured_update(
// CHECK: nn.optimizer_step adam {{.*}}lr = 3.000000e-04 : f64{{.*}}schedule = #nn.lr_schedule<warmup_cosine>
module attributes {nn.train = {optimizer = "adam", lr = 3.0e-4, schedule = "warmup_cosine", warmup = 10, total_steps = 100}} {
  func.func @configured(%w: tensor<4xf32> {nn.param = "w", nn.init = #nn.init<zeros>}) -> tensor<f32> {
    %l = nn.reduce_sum %w dims = [0] : tensor<4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Tests that a layer function's own nn.recompute overrides the module-wide
// policy: this layer keeps only its input although the default is none.
// CHECK-LABEL: func.func private @pinned_keep(
// CHECK-SAME: -> (tensor<2x8xf32>, tensor<2x8xf32>)
// CHECK-LABEL: func.func private @pinned_derivative(
// CHECK-SAME: %[[DY:[^:]*]]: tensor<2x8xf32>, %[[H:[^:]*]]: tensor<2x8xf32>, %[[W:[^:]*]]: tensor<8x8xf32>) -> (tensor<2x8xf32>, tensor<8x8xf32>)
// CHECK:       nn.matmul %[[H]], %[[W]] :
func.func private @pinned(%h: tensor<2x8xf32>, %w: tensor<8x8xf32>) -> tensor<2x8xf32> attributes {nn.recompute = "full"} {
  %m = nn.matmul %h, %w : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %g = nn.gelu %m : tensor<2x8xf32>
  return %g : tensor<2x8xf32>
}
func.func @pinned_stack(%ws: tensor<2x8x8xf32> {nn.param = "ws", nn.init = #nn.init<normal, 0.1>},
                        %x: tensor<2x8xf32> {nn.input}) -> tensor<f32> {
  %y = nn.repeat @pinned(%x) params(%ws) : (tensor<2x8xf32>, tensor<2x8x8xf32>) -> tensor<2x8xf32>
  %l = nn.reduce_sum %y dims = [0, 1] : tensor<2x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that attention's gradient reads the forward's output and
// log-sum-exp instead of running the forward again: in a repeat, the
// keeping layer returns the log-sum-exp ([B, H, S], f32 for bf16) and the
// output once, not the output and its reshape (a reshape is a view: the
// derivative reshapes the kept output again). The evaluation model's
// attention (@attn_stack's repeat of @attn_layer) computes no log-sum-exp
// once canonicalized. Full recompute keeps only the layer input and runs
// the forward (with its log-sum-exp) in the derivative. The sliding
// window and the soft cap stay on every attention and reach the gradient.
// CHECK-LABEL: func.func private @attn_layer(
// CHECK:       nn.attention %{{[^,]*}}, %{{[^,]*}}, %{{[^ ]*}} causal window 3 softcap 5.000000e+01 : (tensor<2x4x2x4xbf16>, tensor<2x4x2x4xbf16>, tensor<2x4x2x4xbf16>) -> tensor<2x4x2x4xbf16>
// CHECK-LABEL: func.func private @attn_layer_keep(
// CHECK-SAME: -> (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4x2x4xbf16>, tensor<2x2x4xf32>)
// CHECK:       %[[O:.*]], %[[LSE:.*]] = nn.attention %{{[^,]*}}, %{{[^,]*}}, %{{[^ ]*}} causal window 3 softcap 5.000000e+01 lse :
// CHECK:       return %{{.*}}, %{{.*}}, %[[O]], %[[LSE]]
// CHECK-LABEL: func.func private @attn_layer_derivative(
// CHECK-SAME: %[[DY:[^:]*]]: tensor<2x4x8xbf16>, %[[H:[^:]*]]: tensor<2x4x8xbf16>, %{{[^:]*}}: tensor<8x8xbf16>, %[[O:[^:]*]]: tensor<2x4x2x4xbf16>, %[[LSE:[^:]*]]: tensor<2x2x4xf32>)
// CHECK-NOT:   nn.attention %
// CHECK:       %[[Q:.*]] = nn.reshape %[[H]]
// CHECK:       %[[O2:.*]] = nn.reshape %[[O]]
// CHECK:       nn.matmul %[[O2]], %{{.*}} transpose_lhs
// CHECK:       nn.attention_grad %[[Q]], %[[Q]], %[[Q]], %[[O]], %[[LSE]], %{{[^ ]*}} causal window 3 softcap 5.000000e+01 :
// CHECK-LABEL: func.func @attn_stack(
// CHECK:       nn.repeat @attn_layer(
// CHECK-LABEL: func.func @attn_stack_backward(
// CHECK:       nn.repeat @attn_layer_keep(
// FULL-LABEL: func.func private @attn_layer_keep(
// FULL-SAME: -> (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>)
// FULL-LABEL: func.func private @attn_layer_derivative(
// FULL:       %[[O:.*]], %[[LSE:.*]] = nn.attention %{{[^,]*}}, %{{[^,]*}}, %{{[^ ]*}} causal window 3 softcap 5.000000e+01 lse :
// FULL:       nn.attention_grad %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %[[O]], %[[LSE]], %{{[^ ]*}} causal window 3 softcap 5.000000e+01 :
func.func private @attn_layer(%h: tensor<2x4x8xbf16>, %w: tensor<8x8xbf16>) -> tensor<2x4x8xbf16> {
  %q = nn.reshape %h : tensor<2x4x8xbf16> -> tensor<2x4x2x4xbf16>
  %a = nn.attention %q, %q, %q causal window 3 softcap 50.0 : (tensor<2x4x2x4xbf16>, tensor<2x4x2x4xbf16>, tensor<2x4x2x4xbf16>) -> tensor<2x4x2x4xbf16>
  %a2 = nn.reshape %a : tensor<2x4x2x4xbf16> -> tensor<2x4x8xbf16>
  %o = nn.matmul %a2, %w : (tensor<2x4x8xbf16>, tensor<8x8xbf16>) -> tensor<2x4x8xbf16>
  return %o : tensor<2x4x8xbf16>
}
func.func @attn_stack(%ws: tensor<2x8x8xbf16> {nn.param = "ws", nn.init = #nn.init<normal, 0.1>},
                      %x: tensor<2x4x8xbf16> {nn.input}) -> tensor<f32> {
  %y = nn.repeat @attn_layer(%x) params(%ws) : (tensor<2x4x8xbf16>, tensor<2x8x8xbf16>) -> tensor<2x4x8xbf16>
  %y32 = nn.cast %y : tensor<2x4x8xbf16> to tensor<2x4x8xf32>
  %l = nn.reduce_sum %y32 dims = [0, 1, 2] : tensor<2x4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests the derivative of a bf16 sum written in f32 (the loss of a model
// that reduces in f32): its f32 cotangent is rounded to bf16, then
// broadcast over the summed dimension.
// CHECK-LABEL: func.func @widened_sum_backward(
// CHECK:       %[[ONE:.*]] = nn.constant dense<1.000000e+00> : tensor<f32>
// CHECK:       %[[R:.*]] = nn.cast %[[ONE]] : tensor<f32> to tensor<bf16>
// CHECK:       %[[B:.*]] = nn.broadcast %[[R]] dims = [] : tensor<bf16> -> tensor<4xbf16>
func.func @widened_sum(%w: tensor<4xbf16> {nn.param = "w", nn.init = #nn.init<zeros>},
                       %x: tensor<4xbf16> {nn.input}) -> tensor<f32> {
  %y = nn.mul %w, %x : tensor<4xbf16>
  %l = nn.reduce_sum %y dims = [0] : tensor<4xbf16> -> tensor<f32>
  return %l : tensor<f32>
}
