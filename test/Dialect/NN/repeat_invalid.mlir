// RUN: tessel-opt %s --split-input-file --verify-diagnostics

// Tests that the layer symbol must resolve.
func.func @missing_symbol(%h: tensor<8x16xf32>, %w: tensor<4x16x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'nn.repeat' op layer 'missing' does not name a func.func}}
  %0 = nn.repeat @missing(%h) params(%w) : (tensor<8x16xf32>, tensor<4x16x16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// Tests that a symbol that is not a func.func is not a layer.
module @not_a_func {
}
func.func @symbol_not_func(%h: tensor<8x16xf32>, %w: tensor<4x16x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'nn.repeat' op layer 'not_a_func' does not name a func.func}}
  %0 = nn.repeat @not_a_func(%h) params(%w) : (tensor<8x16xf32>, tensor<4x16x16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// Tests that the layer's parameter inputs must be the slices of the stacked parameters.
func.func private @block(%h: tensor<8x16xf32>, %w: tensor<16x8xf32>) -> tensor<8x16xf32> {
  return %h : tensor<8x16xf32>
}
func.func @wrong_param_slice(%h: tensor<8x16xf32>, %w: tensor<4x16x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'nn.repeat' op layer @block has type '(tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x16xf32>' but this repeat needs '(tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>' (carried values, then one slice of each stacked parameter and of each outs, then what the prefetch returns; the carried values, then one slice of each outs, then of each stacked result the finish does not return, then what the finish takes)}}
  %0 = nn.repeat @block(%h) params(%w) : (tensor<8x16xf32>, tensor<4x16x16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// Tests that the layer must return exactly the carried values.
func.func private @block(%h: tensor<8x16xf32>, %w: tensor<16x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  return %h, %h : tensor<8x16xf32>, tensor<8x16xf32>
}
func.func @wrong_layer_results(%h: tensor<8x16xf32>, %w: tensor<4x16x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'nn.repeat' op layer @block has type '(tensor<8x16xf32>, tensor<16x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>)' but this repeat needs '(tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>' (carried values, then one slice of each stacked parameter and of each outs, then what the prefetch returns; the carried values, then one slice of each outs, then of each stacked result the finish does not return, then what the finish takes)}}
  %0 = nn.repeat @block(%h) params(%w) : (tensor<8x16xf32>, tensor<4x16x16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// Tests that the layer takes the carried values first, then the parameter slices.
func.func private @block(%w: tensor<16x16xf32>, %h: tensor<8x16xf32>) -> tensor<8x16xf32> {
  return %h : tensor<8x16xf32>
}
func.func @wrong_argument_order(%h: tensor<8x16xf32>, %w: tensor<4x16x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'nn.repeat' op layer @block has type '(tensor<16x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>' but this repeat needs '(tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>' (carried values, then one slice of each stacked parameter and of each outs, then what the prefetch returns; the carried values, then one slice of each outs, then of each stacked result the finish does not return, then what the finish takes)}}
  %0 = nn.repeat @block(%h) params(%w) : (tensor<8x16xf32>, tensor<4x16x16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// Tests that all stacked parameters have the same number of layers.
func.func private @block(%h: tensor<8x16xf32>, %w: tensor<16x16xf32>, %b: tensor<16xf32>) -> tensor<8x16xf32> {
  return %h : tensor<8x16xf32>
}
func.func @mismatched_layer_counts(%h: tensor<8x16xf32>, %w: tensor<4x16x16xf32>, %b: tensor<3x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'nn.repeat' op stacked parameter #1 has 3 layers on its leading axis but #0 has 4}}
  %0 = nn.repeat @block(%h) params(%w, %b) : (tensor<8x16xf32>, tensor<4x16x16xf32>, tensor<3x16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// Tests that a repeat needs at least one stacked parameter.
func.func private @block(%h: tensor<8x16xf32>) -> tensor<8x16xf32> {
  return %h : tensor<8x16xf32>
}
func.func @no_params(%h: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'nn.repeat' op needs at least one stacked parameter; a layer without parameters can be written inline}}
  %0 = nn.repeat @block(%h) params() : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// Tests that a repeat needs at least one carried value.
func.func private @block(%w: tensor<16x16xf32>) {
  return
}
func.func @no_carried(%w: tensor<4x16x16xf32>) {
  // expected-error @+1 {{'nn.repeat' op needs at least one carried value (the layer's input activation)}}
  nn.repeat @block() params(%w) : (tensor<4x16x16xf32>) -> ()
  return
}

// -----

// Tests that the results have the types of the carried values.
func.func private @block(%h: tensor<8x16xf32>, %w: tensor<16x16xf32>) -> tensor<8x16xf32> {
  return %h : tensor<8x16xf32>
}
func.func @result_types_differ(%h: tensor<8x16xf32>, %w: tensor<4x16x16xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'nn.repeat' op results ('tensor<8x8xf32>') must start with the types of the carried values ('tensor<8x16xf32>')}}
  %0 = nn.repeat @block(%h) params(%w) : (tensor<8x16xf32>, tensor<4x16x16xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

// Tests that a result after the carried values is stacked over the layers (generic form).
func.func private @block(%h: tensor<8x16xf32>, %w: tensor<16x16xf32>) -> tensor<8x16xf32> {
  return %h : tensor<8x16xf32>
}
func.func @result_count_differs(%h: tensor<8x16xf32>, %w: tensor<4x16x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'nn.repeat' op stacked result #0 needs a leading layer axis of size 4, got 'tensor<8x16xf32>'}}
  %0:2 = "nn.repeat"(%h, %w) <{layer = @block, operandSegmentSizes = array<i32: 1, 1, 0>}> : (tensor<8x16xf32>, tensor<4x16x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>)
  return %0#0 : tensor<8x16xf32>
}

// -----

// Tests that a stacked parameter of rank 0 has no layer axis.
func.func private @block(%h: tensor<8x16xf32>, %w: tensor<f32>) -> tensor<8x16xf32> {
  return %h : tensor<8x16xf32>
}
func.func @param_rank_0(%h: tensor<8x16xf32>, %w: tensor<f32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'nn.repeat' op stacked parameter #0 needs a leading layer axis, got 'tensor<f32>'}}
  %0 = nn.repeat @block(%h) params(%w) : (tensor<8x16xf32>, tensor<f32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// Tests that a stacked parameter with zero layers is rejected.
func.func private @block(%h: tensor<8x16xf32>, %w: tensor<16xf32>) -> tensor<8x16xf32> {
  return %h : tensor<8x16xf32>
}
func.func @param_zero_layers(%h: tensor<8x16xf32>, %w: tensor<0x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'nn.repeat' op stacked parameter #0 needs a leading layer axis, got 'tensor<0x16xf32>'}}
  %0 = nn.repeat @block(%h) params(%w) : (tensor<8x16xf32>, tensor<0x16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// Tests that a layer that repeats itself is rejected.
func.func private @block(%h: tensor<8x16xf32>, %w: tensor<16x16xf32>) -> tensor<8x16xf32> {
  %ws = nn.broadcast %w dims = [1, 2] : tensor<16x16xf32> -> tensor<2x16x16xf32>
  // expected-error @+1 {{'nn.repeat' op layer @block repeats itself (recursive nn.repeat)}}
  %0 = nn.repeat @block(%h) params(%ws) : (tensor<8x16xf32>, tensor<2x16x16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// Tests that recursion through another layer is rejected too (symbol uses are checked from the last function up, so @b's repeat reports it).
func.func private @a(%h: tensor<8x16xf32>, %w: tensor<16x16xf32>) -> tensor<8x16xf32> {
  %0 = nn.repeat @b(%h) params(%w) : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}
func.func private @b(%h: tensor<8x16xf32>, %w: tensor<16xf32>) -> tensor<8x16xf32> {
  %ws = nn.broadcast %w dims = [2] : tensor<16xf32> -> tensor<2x16x16xf32>
  // expected-error @+1 {{'nn.repeat' op layer @b repeats itself (recursive nn.repeat)}}
  %0 = nn.repeat @a(%h) params(%ws) : (tensor<8x16xf32>, tensor<2x16x16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// Tests that a stacked model argument must name its leading axis "layers".
func.func private @block(%h: tensor<8x16xf32>, %w: tensor<16x16xf32>) -> tensor<8x16xf32> {
  return %h : tensor<8x16xf32>
}
func.func @stacked_axes(%h: tensor<8x16xf32>, %w: tensor<4x16x16xf32> {nn.axes = ["embed", "mlp", "heads"]}) -> tensor<8x16xf32> {
  // expected-error @+1 {{'nn.repeat' op stacked parameter #0 (argument #1) must name its leading axis "layers" in nn.axes, got "embed"}}
  %0 = nn.repeat @block(%h) params(%w) : (tensor<8x16xf32>, tensor<4x16x16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// Tests that the "layers" rule applies to every stacked parameter, also a later one of a model.
func.func private @block(%h: tensor<4x16xf32>, %w: tensor<16x16xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  return %h : tensor<4x16xf32>
}
func.func @stacked_axes_second(
    %x: tensor<4x16xf32> {nn.input, nn.axes = ["batch", "embed"]},
    %y: tensor<4xi32> {nn.label, nn.axes = ["batch"]},
    %w: tensor<2x16x16xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.02>, nn.axes = ["layers", "embed", "mlp"]},
    %b: tensor<2x16xf32> {nn.param = "b", nn.init = #nn.init<zeros>, nn.axes = ["embed", "layers"]}) -> tensor<f32> {
  // expected-error @+1 {{'nn.repeat' op stacked parameter #1 (argument #3) must name its leading axis "layers" in nn.axes, got "embed"}}
  %h = nn.repeat @block(%x) params(%w, %b) : (tensor<4x16xf32>, tensor<2x16x16xf32>, tensor<2x16xf32>) -> tensor<4x16xf32>
  %l = nn.cross_entropy %h, %y : (tensor<4x16xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

func.func private @external_layer(%h: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32>

// Tests that a layer without a body is rejected (nothing to repeat or cost).
func.func @declaration_layer(%h: tensor<4xf32>, %w: tensor<3x4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{layer @external_layer is a declaration; nn.repeat needs its body}}
  %0 = nn.repeat @external_layer(%h) params(%w) : (tensor<4xf32>, tensor<3x4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that a layer's recompute policy is one of the three.
// expected-error @+1 {{'nn.recompute' must be "none", "selective" or "full" on a layer function}}
func.func private @block(%h: tensor<8x16xf32>, %w: tensor<16x16xf32>) -> tensor<8x16xf32> attributes {nn.recompute = "some"} {
  return %h : tensor<8x16xf32>
}

// -----

// Tests that nn.train is a dictionary on the module.
// expected-error @+1 {{'nn.train' must be a dictionary on a module}}
func.func private @trained() attributes {nn.train = {lr = 1.0}} {
  return
}

// -----

// Tests that nn.entry names one of the two training entries.
// expected-error @+1 {{'nn.entry' must be "backward", "update", "backward_input", "backward_weight", "grad_norm", "backward_no_sync", "backward_weight_no_sync", "reduce_grads" or "forward_keep" on a function}}
func.func private @entry() attributes {nn.entry = "forward"} {
  return
}

// -----

func.func private @layer(%h: tensor<4xf32>, %w: tensor<4xf32>, %g: tensor<8xf32>) -> tensor<4xf32> {
  return %h : tensor<4xf32>
}
func.func private @not_a_prefetch(%w: tensor<4xf32>) -> tensor<8xf32> {
  %0 = nn.concat %w, %w dim = 0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
// Tests that a repeat's prefetch must be marked nn.prefetch.
func.func @unmarked_prefetch(%h: tensor<4xf32>, %w: tensor<3x4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.repeat' op prefetch 'not_a_prefetch' does not name a func.func with a body marked 'nn.prefetch'}}
  %0 = nn.repeat @layer(%h) params(%w) prefetch @not_a_prefetch : (tensor<4xf32>, tensor<3x4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func private @layer(%h: tensor<4xf32>, %w: tensor<4xf32>, %g: tensor<8xf32>) -> tensor<4xf32> {
  return %h : tensor<4xf32>
}
func.func private @wrong_prefetch(%w: tensor<8xf32>) -> tensor<8xf32> attributes {nn.prefetch} {
  return %w : tensor<8xf32>
}
// Tests that a prefetch takes one slice of each stacked parameter.
func.func @prefetch_of_other_slices(%h: tensor<4xf32>, %w: tensor<3x4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.repeat' op prefetch @wrong_prefetch has type '(tensor<8xf32>) -> tensor<8xf32>' but must take one slice of each stacked parameter ('tensor<4xf32>')}}
  %0 = nn.repeat @layer(%h) params(%w) prefetch @wrong_prefetch : (tensor<4xf32>, tensor<3x4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func private @layer(%h: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  return %h : tensor<4xf32>
}
func.func private @prefetch(%w: tensor<4xf32>) -> tensor<8xf32> attributes {nn.prefetch} {
  %0 = nn.concat %w, %w dim = 0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
// Tests that the layer takes what the prefetch returns after its slices.
func.func @layer_without_prefetched(%h: tensor<4xf32>, %w: tensor<3x4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.repeat' op layer @layer has type '(tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>' but this repeat needs '(tensor<4xf32>, tensor<4xf32>, tensor<8xf32>) -> tensor<4xf32>'}}
  %0 = nn.repeat @layer(%h) params(%w) prefetch @prefetch : (tensor<4xf32>, tensor<3x4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that nn.prefetch marks functions only.
// expected-error @+1 {{'builtin.module' op 'nn.prefetch' is a unit attribute of a function}}
module attributes {nn.prefetch} {
}

// -----

func.func private @layer(%h: tensor<4xf32>, %w: tensor<4xf32>) -> (tensor<4xf32>, tensor<8xf32> {nn.in_flight}) {
  %0 = nn.concat %w, %w dim = 0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
  return %h, %0 : tensor<4xf32>, tensor<8xf32>
}
func.func private @not_a_finish(%b: tensor<8xf32>) -> tensor<4xf32> {
  %0 = nn.slice %b start = [0] limit = [4] : tensor<8xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
// Tests that a repeat's finish must be marked nn.finish.
func.func @unmarked_finish(%h: tensor<4xf32>, %w: tensor<3x4xf32>) -> (tensor<4xf32>, tensor<3x4xf32>) {
  // expected-error @+1 {{'nn.repeat' op finish 'not_a_finish' does not name a func.func with a body marked 'nn.finish'}}
  %0:2 = nn.repeat @layer(%h) params(%w) finish @not_a_finish : (tensor<4xf32>, tensor<3x4xf32>) -> (tensor<4xf32>, tensor<3x4xf32>)
  return %0#0, %0#1 : tensor<4xf32>, tensor<3x4xf32>
}

// -----

func.func private @layer(%h: tensor<4xf32>, %w: tensor<4xf32>) -> (tensor<4xf32>, tensor<8xf32> {nn.in_flight}) {
  %0 = nn.concat %w, %w dim = 0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
  return %h, %0 : tensor<4xf32>, tensor<8xf32>
}
func.func private @finish(%b: tensor<8xf32>) -> tensor<2xf32> attributes {nn.finish} {
  %0 = nn.slice %b start = [0] limit = [2] : tensor<8xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}
// Tests that a finish returns slices of the repeat's last stacked results.
func.func @finish_of_other_outputs(%h: tensor<4xf32>, %w: tensor<3x4xf32>) -> (tensor<4xf32>, tensor<3x4xf32>) {
  // expected-error @+1 {{'nn.repeat' op finish @finish has type '(tensor<8xf32>) -> tensor<2xf32>' but must take what the layer returns in flight, then one slice of each outs (), and return those slices, then one slice of each of the repeat's last stacked results ('tensor<4xf32>')}}
  %0:2 = nn.repeat @layer(%h) params(%w) finish @finish : (tensor<4xf32>, tensor<3x4xf32>) -> (tensor<4xf32>, tensor<3x4xf32>)
  return %0#0, %0#1 : tensor<4xf32>, tensor<3x4xf32>
}

// -----

func.func private @layer(%h: tensor<4xf32>, %w: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  return %h, %w : tensor<4xf32>, tensor<4xf32>
}
func.func private @finish(%b: tensor<8xf32>) -> tensor<4xf32> attributes {nn.finish} {
  %0 = nn.slice %b start = [0] limit = [4] : tensor<8xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
// Tests that the layer returns what the finish takes, after its own
// per-layer outputs.
func.func @layer_without_in_flight(%h: tensor<4xf32>, %w: tensor<3x4xf32>) -> (tensor<4xf32>, tensor<3x4xf32>) {
  // expected-error @+1 {{'nn.repeat' op layer @layer has type '(tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)' but this repeat needs '(tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<8xf32>)'}}
  %0:2 = nn.repeat @layer(%h) params(%w) finish @finish : (tensor<4xf32>, tensor<3x4xf32>) -> (tensor<4xf32>, tensor<3x4xf32>)
  return %0#0, %0#1 : tensor<4xf32>, tensor<3x4xf32>
}

// -----

func.func private @layer(%h: tensor<4xf32>, %w: tensor<4xf32>) -> (tensor<4xf32>, tensor<8xf32>) {
  %0 = nn.concat %w, %w dim = 0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
  return %h, %0 : tensor<4xf32>, tensor<8xf32>
}
func.func private @finish(%b: tensor<8xf32>) -> tensor<4xf32> attributes {nn.finish} {
  %0 = nn.slice %b start = [0] limit = [4] : tensor<8xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
// Tests that what the layer returns for the finish is marked nn.in_flight.
func.func @unmarked_in_flight(%h: tensor<4xf32>, %w: tensor<3x4xf32>) -> (tensor<4xf32>, tensor<3x4xf32>) {
  // expected-error @+1 {{'nn.repeat' op layer @layer result #1 goes to the finish, so it must be marked 'nn.in_flight'}}
  %0:2 = nn.repeat @layer(%h) params(%w) finish @finish : (tensor<4xf32>, tensor<3x4xf32>) -> (tensor<4xf32>, tensor<3x4xf32>)
  return %0#0, %0#1 : tensor<4xf32>, tensor<3x4xf32>
}

// -----

// Tests that nn.finish marks functions only.
// expected-error @+1 {{'builtin.module' op 'nn.finish' is a unit attribute of a function}}
module attributes {nn.finish} {
}

// -----

// Tests that nn.in_flight takes no value.
// expected-error @+1 {{'func.func' op result #0: 'nn.in_flight' is a unit attribute of a function result}}
func.func private @in_flight_value(%x: tensor<4xf32>) -> (tensor<4xf32> {nn.in_flight = 1 : i64}) {
  return %x : tensor<4xf32>
}

// -----

func.func private @grad_layer(%dy: tensor<8x16xf32>, %x: tensor<16x16xf32>, %g: tensor<16x16xf32>) -> (tensor<8x16xf32>, tensor<16x16xf32>) {
  return %dy, %g : tensor<8x16xf32>, tensor<16x16xf32>
}
// Tests that the updated outs follow the carried values among the results.
func.func @outs_result_type(%dy: tensor<8x16xf32>, %x: tensor<4x16x16xf32>, %g: tensor<4x16x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'nn.repeat' op results ('tensor<8x16xf32>', 'tensor<4x16xf32>') must continue with the types of the outs ('tensor<4x16x16xf32>') after the carried values}}
  %0:2 = nn.repeat @grad_layer(%dy) params(%x) outs(%g) : (tensor<8x16xf32>, tensor<4x16x16xf32>, tensor<4x16x16xf32>) -> (tensor<8x16xf32>, tensor<4x16xf32>)
  return %0#1 : tensor<4x16xf32>
}

// -----

func.func private @grad_layer(%dy: tensor<8x16xf32>, %x: tensor<16x16xf32>, %g: tensor<16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>) {
  return %dy, %g : tensor<8x16xf32>, tensor<16xf32>
}
// Tests that an outs is stacked on the parameters' layer axis.
func.func @outs_layers(%dy: tensor<8x16xf32>, %x: tensor<4x16x16xf32>, %g: tensor<3x16xf32>) -> tensor<3x16xf32> {
  // expected-error @+1 {{'nn.repeat' op outs #0 needs a leading layer axis of size 4, got 'tensor<3x16xf32>'}}
  %0:2 = nn.repeat @grad_layer(%dy) params(%x) outs(%g) : (tensor<8x16xf32>, tensor<4x16x16xf32>, tensor<3x16xf32>) -> (tensor<8x16xf32>, tensor<3x16xf32>)
  return %0#1 : tensor<3x16xf32>
}

// -----

func.func private @grad_layer(%dy: tensor<8x16xf32>, %x: tensor<16x16xf32>) -> (tensor<8x16xf32>, tensor<16x16xf32>) {
  return %dy, %x : tensor<8x16xf32>, tensor<16x16xf32>
}
// Tests that the layer takes a slice of each outs after its parameter
// slices.
func.func @outs_slice_missing(%dy: tensor<8x16xf32>, %x: tensor<4x16x16xf32>, %g: tensor<4x16x16xf32>) -> tensor<4x16x16xf32> {
  // expected-error @+1 {{'nn.repeat' op layer @grad_layer has type '(tensor<8x16xf32>, tensor<16x16xf32>) -> (tensor<8x16xf32>, tensor<16x16xf32>)' but this repeat needs '(tensor<8x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>) -> (tensor<8x16xf32>, tensor<16x16xf32>)'}}
  %0:2 = nn.repeat @grad_layer(%dy) params(%x) outs(%g) : (tensor<8x16xf32>, tensor<4x16x16xf32>, tensor<4x16x16xf32>) -> (tensor<8x16xf32>, tensor<4x16x16xf32>)
  return %0#1 : tensor<4x16x16xf32>
}

// -----

func.func private @layer(%h: tensor<4xf32>, %w: tensor<4xf32>, %g: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<8xf32> {nn.in_flight}) {
  %0 = nn.concat %w, %w dim = 0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
  return %h, %g, %0 : tensor<4xf32>, tensor<4xf32>, tensor<8xf32>
}
func.func private @finish(%b: tensor<8xf32>) -> tensor<4xf32> attributes {nn.finish} {
  %0 = nn.slice %b start = [0] limit = [4] : tensor<8xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
// Tests that a repeat's finish takes a slice of each outs after what is in
// flight and returns it first, as the layer does.
func.func @finish_without_outs(%h: tensor<4xf32>, %w: tensor<3x4xf32>, %g: tensor<3x4xf32>) -> (tensor<4xf32>, tensor<3x4xf32>) {
  // expected-error @+1 {{'nn.repeat' op finish @finish has type '(tensor<8xf32>) -> tensor<4xf32>' but must take what the layer returns in flight, then one slice of each outs ('tensor<4xf32>'), and return those slices, then one slice of each of the repeat's last stacked results ()}}
  %0:2 = nn.repeat @layer(%h) params(%w) outs(%g) finish @finish : (tensor<4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) -> (tensor<4xf32>, tensor<3x4xf32>)
  return %0#0, %0#1 : tensor<4xf32>, tensor<3x4xf32>
}

// -----

func.func private @layer(%h: tensor<4xf32>, %w: tensor<4xf32>) -> (tensor<4xf32>, tensor<8xf32> {nn.in_flight}) {
  %0 = nn.concat %w, %w dim = 0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
  return %h, %0 : tensor<4xf32>, tensor<8xf32>
}
func.func private @finish(%b: tensor<8xf32>) -> (tensor<4xf32>, tensor<4xf32>) attributes {nn.finish} {
  %0 = nn.slice %b start = [0] limit = [4] : tensor<8xf32> -> tensor<4xf32>
  return %0, %0 : tensor<4xf32>, tensor<4xf32>
}
// Tests that a finish returns no more per-layer outputs than the repeat
// stacks.
func.func @finish_of_too_many(%h: tensor<4xf32>, %w: tensor<3x4xf32>) -> (tensor<4xf32>, tensor<3x4xf32>) {
  // expected-error @+1 {{'nn.repeat' op finish @finish returns 2 results but this repeat has 0 outs and stacks only 1 results}}
  %0:2 = nn.repeat @layer(%h) params(%w) finish @finish : (tensor<4xf32>, tensor<3x4xf32>) -> (tensor<4xf32>, tensor<3x4xf32>)
  return %0#0, %0#1 : tensor<4xf32>, tensor<3x4xf32>
}
