// RUN: tessel-opt %s --split-input-file --verify-diagnostics

// Tests that an axis name that is neither built in nor declared is rejected.
// expected-error @+1 {{'func.func' op argument #0: unknown logical axis 'bogus' for dimension 1 (known: batch, channels, classes, embed, experts, features, head_dim, heads, height, kv_heads, layers, mlp, norm, seq, vocab, width; declare more with the module attribute 'nn.logical_axes')}}
func.func @unknown_axis(%x: tensor<4x8xf32> {nn.input, nn.axes = ["batch", "bogus"]}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that axis names declared by an enclosing module do not leak into a sibling module.
module {
  module attributes {nn.logical_axes = ["stage"]} {
  }
  // expected-error @+1 {{'func.func' op argument #0: unknown logical axis 'stage' for dimension 0 (known: batch, channels, classes, embed, experts, features, head_dim, heads, height, kv_heads, layers, mlp, norm, seq, vocab, width; declare more with the module attribute 'nn.logical_axes')}}
  func.func @sibling_module_axes(%x: tensor<4x8xf32> {nn.input, nn.axes = ["stage", "embed"]}) -> tensor<f32> {
    %l = nn.constant dense<0.0> : tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Tests that one logical axis cannot name two dimensions.
// expected-error @+1 {{'func.func' op argument #0: logical axis 'batch' names more than one dimension}}
func.func @axis_twice(%x: tensor<4x8xf32> {nn.input, nn.axes = ["batch", "batch"]}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that nn.axes names one axis per dimension.
// expected-error @+1 {{'func.func' op argument #0: 'nn.axes' names 1 axes but the argument 'tensor<4x8xf32>' has rank 2}}
func.func @axes_count(%x: tensor<4x8xf32> {nn.input, nn.axes = ["batch"]}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that nn.axes entries must be strings.
// expected-error @+1 {{'func.func' op argument #0: 'nn.axes' must be an array of logical axis names, e.g. ["batch", "embed"]}}
func.func @axes_not_strings(%x: tensor<4x8xf32> {nn.input, nn.axes = ["batch", 3]}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that nn.axes must be an array.
// expected-error @+1 {{'func.func' op argument #0: 'nn.axes' must be an array of logical axis names, e.g. ["batch", "embed"]}}
func.func @axes_not_array(%x: tensor<4xf32> {nn.input, nn.axes = "batch"}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that nn.param needs a name.
// expected-error @+1 {{'func.func' op argument #0: 'nn.param' must be the parameter's checkpoint name, e.g. nn.param = "fc1.weight"}}
func.func @param_without_name(%w: tensor<4x8xf32> {nn.param, nn.init = #nn.init<zeros>}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that nn.param needs a non-empty name.
// expected-error @+1 {{'func.func' op argument #0: 'nn.param' must be the parameter's checkpoint name, e.g. nn.param = "fc1.weight"}}
func.func @param_empty_name(%w: tensor<4x8xf32> {nn.param = "", nn.init = #nn.init<zeros>}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a nn.param name must be a string.
// expected-error @+1 {{'func.func' op argument #0: 'nn.param' must be the parameter's checkpoint name, e.g. nn.param = "fc1.weight"}}
func.func @param_integer_name(%w: tensor<4x8xf32> {nn.param = 3 : i64, nn.init = #nn.init<zeros>}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that two parameters cannot share a name.
// expected-error @+1 {{'func.func' op parameter name 'w' is used by arguments #0 and #2}}
func.func @duplicate_param_names(%w: tensor<4x8xf32> {nn.param = "w", nn.init = #nn.init<zeros>}, %x: tensor<4xf32> {nn.input}, %v: tensor<8xf32> {nn.param = "w", nn.init = #nn.init<ones>}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a parameter needs an initialiser.
// expected-error @+1 {{'func.func' op parameter 'w' has no initialiser; add e.g. nn.init = #nn.init<normal, 0.02>}}
func.func @param_without_init(%w: tensor<4x8xf32> {nn.param = "w"}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that nn.init on an argument that is no parameter is rejected.
// expected-error @+1 {{'func.func' op argument #0 has 'nn.init' but is not an nn.param}}
func.func @init_on_plain_arg(%w: tensor<4x8xf32> {nn.init = #nn.init<zeros>}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that nn.init on an input is rejected.
// expected-error @+1 {{'func.func' op argument #0 has 'nn.init' but is not an nn.param}}
func.func @init_on_input(%w: tensor<4x8xf32> {nn.input, nn.init = #nn.init<zeros>}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that nn.init must be an #nn.init attribute.
// expected-error @+1 {{'func.func' op argument #0: 'nn.init' must be an #nn.init<...>}}
func.func @init_not_init_attr(%w: tensor<4x8xf32> {nn.param = "w", nn.init = 0.0}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a parameter must be a float tensor.
// expected-error @+1 {{'func.func' op parameter argument #0 must be a float tensor, not 'tensor<4x8xi32>'}}
func.func @integer_param(%w: tensor<4x8xi32> {nn.param = "w", nn.init = #nn.init<zeros>}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that an argument cannot be both input and label.
// expected-error @+1 {{'func.func' op argument #0 can be only one of nn.param, nn.input and nn.label}}
func.func @input_and_label(%y: tensor<4xi32> {nn.input, nn.label}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that an argument cannot be both parameter and input.
// expected-error @+1 {{'func.func' op argument #0 can be only one of nn.param, nn.input and nn.label}}
func.func @param_and_input(%w: tensor<4x8xf32> {nn.param = "w", nn.init = #nn.init<zeros>, nn.input}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that nn.input is a unit attribute.
// expected-error @+1 {{'func.func' op argument #0: 'nn.input' takes no value}}
func.func @input_with_value(%x: tensor<4x8xf32> {nn.input = 1 : i32}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that nn.label is a unit attribute.
// expected-error @+1 {{'func.func' op argument #0: 'nn.label' takes no value}}
func.func @label_with_value(%y: tensor<4xi32> {nn.label = "y"}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a model argument must be a ranked tensor, not a scalar.
// expected-error @+1 {{'func.func' op argument #0 with 'nn.input' must be a ranked tensor}}
func.func @input_not_tensor(%x: f32 {nn.input}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that nn.axes needs a ranked tensor.
// expected-error @+1 {{'func.func' op argument #0 with 'nn.axes' must be a ranked tensor}}
func.func @axes_on_unranked(%x: tensor<*xf32> {nn.axes = ["batch"]}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a model must return a scalar loss, not a vector.
// expected-error @+1 {{'func.func' op is a model (it has nn.param/nn.input/nn.label arguments) and must return its scalar loss first, as tensor<f32>; it returns ('tensor<4xf32>')}}
func.func @loss_not_scalar(%x: tensor<4x8xf32> {nn.input}) -> tensor<4xf32> {
  %l = nn.constant dense<0.0> : tensor<4xf32>
  return %l : tensor<4xf32>
}

// -----

// Tests that a model must return something.
// expected-error @+1 {{'func.func' op is a model (it has nn.param/nn.input/nn.label arguments) and must return its scalar loss first, as tensor<f32>; it returns ()}}
func.func @loss_missing(%w: tensor<4xf32> {nn.param = "w", nn.init = #nn.init<zeros>}) -> () {
  return
}

// -----

// Tests that the loss must be a float.
// expected-error @+1 {{'func.func' op is a model (it has nn.param/nn.input/nn.label arguments) and must return its scalar loss first, as tensor<f32>; it returns ('tensor<i32>')}}
func.func @loss_integer(%y: tensor<4xi32> {nn.label}) -> tensor<i32> {
  %l = nn.constant dense<0> : tensor<i32>
  return %l : tensor<i32>
}

// -----

// Tests that the loss must come first.
// expected-error @+1 {{'func.func' op is a model (it has nn.param/nn.input/nn.label arguments) and must return its scalar loss first, as tensor<f32>; it returns ('tensor<4x8xf32>', 'tensor<f32>')}}
func.func @loss_not_first(%x: tensor<4x8xf32> {nn.input}) -> (tensor<4x8xf32>, tensor<f32>) {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %x, %l : tensor<4x8xf32>, tensor<f32>
}

// -----

// Tests that an unknown nn.* argument attribute is rejected.
// expected-error @+1 {{'func.func' op argument #0: unknown nn argument attribute 'nn.inputs' (known: nn.param, nn.init, nn.input, nn.label, nn.axes, nn.grad, nn.state, nn.grad_scale, nn.grad_sum_squares, nn.sharding, nn.stage_input, nn.output_grad, nn.layers, nn.tied_copy, nn.zero, nn.prefetched)}}
func.func @unknown_arg_attr(%x: tensor<4x8xf32> {nn.inputs}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that an unknown initialiser kind is rejected.
func.func @init_unknown_kind(
    // expected-error @+1 {{unknown initialiser 'xavier' (expected zeros, ones, constant, normal, truncated_normal or uniform)}}
    %w: tensor<4xf32> {nn.param = "w", nn.init = #nn.init<xavier>}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that #nn.init<zeros> takes no number.
func.func @init_zeros_number(
    // expected-error @+1 {{#nn.init<zeros> takes no numbers, got 1 number(s)}}
    %w: tensor<4xf32> {nn.param = "w", nn.init = #nn.init<zeros, 1.0>}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that #nn.init<ones> takes no number.
func.func @init_ones_number(
    // expected-error @+1 {{#nn.init<ones> takes no numbers, got 1 number(s)}}
    %w: tensor<4xf32> {nn.param = "w", nn.init = #nn.init<ones, 1.0>}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that #nn.init<constant> needs its value.
func.func @init_constant_no_value(
    // expected-error @+1 {{#nn.init<constant> takes one number (the value), got 0 number(s)}}
    %w: tensor<4xf32> {nn.param = "w", nn.init = #nn.init<constant>}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that #nn.init<constant> takes only one number.
func.func @init_constant_two_values(
    // expected-error @+1 {{#nn.init<constant> takes one number (the value), got 2 number(s)}}
    %w: tensor<4xf32> {nn.param = "w", nn.init = #nn.init<constant, 1.0, 2.0>}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that #nn.init<normal> needs a standard deviation.
func.func @init_normal_no_std(
    // expected-error @+1 {{#nn.init<normal> takes a standard deviation and an optional mean, got 0 number(s)}}
    %w: tensor<4xf32> {nn.param = "w", nn.init = #nn.init<normal>}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that #nn.init<truncated_normal> takes at most two numbers.
func.func @init_truncated_normal_three(
    // expected-error @+1 {{#nn.init<truncated_normal> takes a standard deviation and an optional mean, got 3 number(s)}}
    %w: tensor<4xf32> {nn.param = "w", nn.init = #nn.init<truncated_normal, 0.1, 0.0, 2.0>}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a negative standard deviation is rejected.
func.func @init_normal_negative_std(
    // expected-error @+1 {{#nn.init<normal> needs a positive standard deviation, got -2.000000e-02}}
    %w: tensor<4xf32> {nn.param = "w", nn.init = #nn.init<normal, -0.02>}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a zero standard deviation is rejected.
func.func @init_truncated_normal_zero_std(
    // expected-error @+1 {{#nn.init<truncated_normal> needs a positive standard deviation, got 0.000000e+00}}
    %w: tensor<4xf32> {nn.param = "w", nn.init = #nn.init<truncated_normal, 0.0>}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that #nn.init<uniform> needs both bounds.
func.func @init_uniform_one_number(
    // expected-error @+1 {{#nn.init<uniform> takes two numbers (low, high), got 1 number(s)}}
    %w: tensor<4xf32> {nn.param = "w", nn.init = #nn.init<uniform, 0.1>}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that uniform needs low < high, not equal bounds.
func.func @init_uniform_equal(
    // expected-error @+1 {{#nn.init<uniform> needs low < high, got 1.000000e-01 and 1.000000e-01}}
    %w: tensor<4xf32> {nn.param = "w", nn.init = #nn.init<uniform, 0.1, 0.1>}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that uniform rejects low > high.
func.func @init_uniform_reversed(
    // expected-error @+1 {{#nn.init<uniform> needs low < high, got 5.000000e-01 and -5.000000e-01}}
    %w: tensor<4xf32> {nn.param = "w", nn.init = #nn.init<uniform, 0.5, -0.5>}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that initialiser numbers are float literals.
func.func @init_integer_number(
    // expected-error @+2 {{unexpected decimal integer literal for a floating point value}}
    // expected-note @+1 {{add a trailing dot to make the literal a float}}
    %w: tensor<4xf32> {nn.param = "w", nn.init = #nn.init<constant, 1>}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that nn.logical_axes belongs on a module, not a function.
// expected-error @+1 {{'func.func' op 'nn.logical_axes' belongs on a module}}
func.func @logical_axes_on_func() attributes {nn.logical_axes = ["stage"]} {
  return
}

// -----

// Tests that declared logical axes are non-empty strings.
// expected-error @+1 {{'builtin.module' op 'nn.logical_axes' must be an array of non-empty UTF-8 strings}}
module attributes {nn.logical_axes = ["stage", ""]} {
}

// -----

// Tests that nn.logical_axes must be an array.
// expected-error @+1 {{'builtin.module' op 'nn.logical_axes' must be an array of non-empty UTF-8 strings}}
module attributes {nn.logical_axes = "stage"} {
}

// -----

// Tests that an unknown nn.* attribute on an op is rejected.
func.func @unknown_op_attr(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.exp' op unknown nn attribute 'nn.foo' on an operation}}
  %0 = nn.exp %x {nn.foo} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that an nn.* attribute other than nn.logical_axes on a module is rejected.
// expected-error @+1 {{'builtin.module' op unknown nn attribute 'nn.axes' on an operation}}
module attributes {nn.axes = ["batch"]} {
}

// -----

// Tests that the known axes listed in the message include the module's declared ones.
module attributes {nn.logical_axes = ["stage"]} {
  // expected-error @+1 {{'func.func' op argument #0: unknown logical axis 'expert' for dimension 1 (known: batch, channels, classes, embed, experts, features, head_dim, heads, height, kv_heads, layers, mlp, norm, seq, stage, vocab, width; declare more with the module attribute 'nn.logical_axes')}}
  func.func @declared_axes_listed(%x: tensor<4x8xf32> {nn.input, nn.axes = ["stage", "expert"]}) -> tensor<f32> {
    %l = nn.constant dense<0.0> : tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Tests that a parameter's checkpoint name is UTF-8 text: the description
// and the safetensors header carry it as a JSON string.
// expected-error @+1 {{'func.func' op argument #0: parameter name is not valid UTF-8}}
func.func @param_name_bytes(%w: tensor<4xf32> {nn.param = "w\FF", nn.init = #nn.init<zeros>}) -> tensor<f32> {
  %l = nn.reduce_sum %w dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a model function's name is UTF-8 text (the description names it).
// expected-error @+1 {{'func.func' op is a model and its name is not valid UTF-8}}
func.func @"lo\FFss"(%w: tensor<4xf32> {nn.param = "w", nn.init = #nn.init<zeros>}) -> tensor<f32> {
  %l = nn.reduce_sum %w dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a gradient's parameter name is UTF-8 text.
// expected-error @+1 {{'func.func' op argument #0: 'nn.grad' must name a parameter (UTF-8 text)}}
func.func @grad_name_bytes(%g: tensor<4xf32> {nn.grad = "w\C3"}) {
  return
}

// -----

// Tests that declared logical axes are UTF-8 text.
// expected-error @+1 {{'builtin.module' op 'nn.logical_axes' must be an array of non-empty UTF-8 strings}}
module attributes {nn.logical_axes = ["st\FFage"]} {
}

// -----

// Tests that nn.tied_copy marks only a parameter.
// expected-error @+1 {{'func.func' op argument #0: 'nn.tied_copy' takes no value and marks an nn.param}}
func.func @tied_copy_of_input(%x: tensor<4x8xf32> {nn.input, nn.tied_copy}) -> tensor<f32> {
  %l = nn.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that the pipeline's gradient sum of squares is an f32 (or f64)
// scalar.
// expected-error @+1 {{'func.func' op argument #0: 'nn.grad_sum_squares' must be a tensor<f32> (or tensor<f64> in an f64 model)}}
func.func @sum_squares_bf16(%ss: tensor<bf16> {nn.grad_sum_squares}) {
  return
}

// -----

// Tests that the gradient scale is a scalar.
// expected-error @+1 {{'func.func' op argument #0: 'nn.grad_scale' must be a tensor<f32> (or tensor<f64> in an f64 model)}}
func.func @grad_scale_vector(%gs: tensor<2xf64> {nn.grad_scale}) {
  return
}

// -----

// Tests that nn.tied_copy outside a pipeline stage is refused (the gradient
// norm would leave the parameter out).
// expected-error @+1 {{'func.func' op argument #0: 'nn.tied_copy' marks a pipeline stage's copy of a tied parameter; it belongs in a stage module (nn.stage)}}
func.func @tied_copy_outside_a_stage(%w: tensor<8xf32> {nn.param = "w", nn.init = #nn.init<zeros>, nn.tied_copy}) -> tensor<f32> {
  %l = nn.reduce_sum %w dims = [0] : tensor<8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that nn.loss_count marks a result after the loss, of its type.
// expected-error @+1 {{'func.func' op result #1: 'nn.loss_count' marks the count the loss (result #0) sums over, a result after it of the loss's type 'tensor<f32>', not 'tensor<f64>'}}
func.func @loss_count_of_another_type(%z: tensor<4x5xf32> {nn.input}, %y: tensor<4xi32> {nn.label}) -> (tensor<f32>, tensor<f64> {nn.loss_count}) {
  %l = nn.cross_entropy %z, %y {reduction = #nn.reduction<sum>} : (tensor<4x5xf32>, tensor<4xi32>) -> tensor<f32>
  %n = nn.constant dense<4.0> : tensor<f64>
  return %l, %n : tensor<f32>, tensor<f64>
}

// -----

// Tests that the loss itself is not its count.
// expected-error @+1 {{'func.func' op result #0: 'nn.loss_count' marks the count the loss (result #0) sums over}}
func.func @loss_count_on_the_loss(%z: tensor<4x5xf32> {nn.input}, %y: tensor<4xi32> {nn.label}) -> (tensor<f32> {nn.loss_count}) {
  %l = nn.cross_entropy %z, %y {reduction = #nn.reduction<sum>} : (tensor<4x5xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a loss has one count, a unit attribute.
// expected-error @+1 {{'func.func' op results #1 and #2 are both 'nn.loss_count': a loss has one count}}
func.func @two_loss_counts(%z: tensor<4x5xf32> {nn.input}, %y: tensor<4xi32> {nn.label}) -> (tensor<f32>, tensor<f32> {nn.loss_count}, tensor<f32> {nn.loss_count}) {
  %l = nn.cross_entropy %z, %y {reduction = #nn.reduction<sum>} : (tensor<4x5xf32>, tensor<4xi32>) -> tensor<f32>
  %n = nn.constant dense<4.0> : tensor<f32>
  return %l, %n, %n : tensor<f32>, tensor<f32>, tensor<f32>
}

// -----

// expected-error @+1 {{'func.func' op result #1: 'nn.loss_count' is a unit attribute of a function result}}
func.func @loss_count_with_a_value(%z: tensor<4x5xf32> {nn.input}, %y: tensor<4xi32> {nn.label}) -> (tensor<f32>, tensor<f32> {nn.loss_count = 2 : i64}) {
  %l = nn.cross_entropy %z, %y {reduction = #nn.reduction<sum>} : (tensor<4x5xf32>, tensor<4xi32>) -> tensor<f32>
  %n = nn.constant dense<4.0> : tensor<f32>
  return %l, %n : tensor<f32>, tensor<f32>
}
