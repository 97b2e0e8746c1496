// RUN: tessel-opt %s -tessel-plan-memory --split-input-file --verify-diagnostics

// Tests that an op that does not lower to the runtime cannot be planned.
func.func @foreign_op(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'arith.addf' op cannot be placed in a static arena; only nn ops and shard collectives lower to the runtime}}
  %0 = arith.addf %a, %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func private @bad_layer(%h: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'arith.mulf' op cannot be placed in a static arena; only nn ops and shard collectives lower to the runtime}}
  %0 = arith.mulf %h, %w : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// Tests that a repeated layer that cannot be planned fails its caller too.
func.func @stack(%h: tensor<4xf32>, %w: tensor<3x4xf32>) -> tensor<4xf32> {
  %0 = nn.repeat @bad_layer(%h) params(%w) : (tensor<4xf32>, tensor<3x4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that an in-place update whose init is read afterwards is refused:
// the later read would see the updated bytes.
func.func @read_after_update(%g: tensor<4xf32>, %acc: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %e = nn.exp %acc : tensor<4xf32>
  // expected-error @+1 {{'nn.accumulate' op updates operand #1 in place, but a later op still reads it}}
  %new = nn.accumulate %g outs(%e) : tensor<4xf32>
  %late = nn.neg %e : tensor<4xf32>
  return %new, %late : tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that a collective the runtime cannot run is refused before it is
// placed (here: on a grid other than @mesh).
shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
shard.grid @other(shape = 2)
func.func @other_grid(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'shard.all_reduce' op runs on the grid @other; only the mesh @mesh lowers to the runtime}}
  %0 = shard.all_reduce %a on @other grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that a shard op other than the five collectives is refused.
shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
func.func @broadcast(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'shard.broadcast' op cannot be placed in a static arena; only nn ops and shard collectives lower to the runtime}}
  %0 = shard.broadcast %a on @mesh grid_axes = [0] root = [0] : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
// Tests that an asynchronous collective's result is read only through its
// wait: read directly, it could be read before it arrives.
func.func @async_read_directly(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'shard.all_reduce' op is asynchronous, so its result may only be read through nn.wait, not by 'nn.exp'}}
  %s = shard.all_reduce %x on @mesh grid_axes = [0] {nn.async} : tensor<8xf32> -> tensor<8xf32>
  %e = nn.exp %s : tensor<8xf32>
  %w = nn.wait %s : tensor<8xf32>
  return %e : tensor<8xf32>
}

// -----

shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
// Tests that an asynchronous collective must be waited for.
func.func @async_never_waited(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'shard.all_reduce' op is asynchronous but nothing waits for it (an nn.wait on its result completes it)}}
  %s = shard.all_reduce %x on @mesh grid_axes = [0] {nn.async} : tensor<8xf32> -> tensor<8xf32>
  return %x : tensor<8xf32>
}

// -----

shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
// Tests that a layer returns in flight only an all-reduce that sums in
// place: a reduce-scatter reads the layer's scratch, which the caller
// reuses before the finish.
func.func @in_flight_reads_scratch(%x: tensor<8xf32>) -> (tensor<4xf32> {nn.in_flight}) {
  %e = nn.exp %x : tensor<8xf32>
  // expected-error @+1 {{'shard.reduce_scatter' op is returned in flight, but the layer's scratch that it reads is reused before its finish: only an all-reduce of a buffer of its own (summed in place) can be}}
  %s = shard.reduce_scatter %e on @mesh grid_axes = [0] scatter_axis = 0 {nn.async} : tensor<8xf32> -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

// Tests that a result marked nn.in_flight comes from a started collective.
func.func @in_flight_computed(%x: tensor<8xf32>) -> (tensor<8xf32> {nn.in_flight}) {
  %e = nn.exp %x : tensor<8xf32>
  // expected-error @+1 {{'func.return' op returns result #0, marked 'nn.in_flight', but not from an asynchronous collective (a shard collective marked 'nn.async')}}
  return %e : tensor<8xf32>
}

// -----

func.func private @acc_layer(%h: tensor<4xf32>, %w: tensor<4xf32>, %g: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = nn.accumulate %w outs(%g) : tensor<4xf32>
  return %h, %0 : tensor<4xf32>, tensor<4xf32>
}
// Tests that nothing reads a repeat's outs after the repeat updated it.
func.func @outs_read_after(%h: tensor<4xf32>, %w: tensor<3x4xf32>, %g: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>) {
  // expected-error @+1 {{'nn.repeat' op updates operand #2 in place, but a later op still reads it}}
  %0:2 = nn.repeat @acc_layer(%h) params(%w) outs(%g) : (tensor<4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) -> (tensor<4xf32>, tensor<3x4xf32>)
  %1 = nn.exp %g : tensor<3x4xf32>
  return %0#1, %1 : tensor<3x4xf32>, tensor<3x4xf32>
}

// -----

func.func private @fresh_layer(%h: tensor<4xf32>, %w: tensor<4xf32>, %g: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = nn.add %g, %w : tensor<4xf32>
  return %h, %0 : tensor<4xf32>, tensor<4xf32>
}
// Tests that a layer returns its outs slice updated in place, not a value
// computed elsewhere (the caller passes one memory for both).
func.func @outs_not_in_place(%h: tensor<4xf32>, %w: tensor<3x4xf32>, %g: tensor<3x4xf32>) -> tensor<3x4xf32> {
  // expected-error @+1 {{'nn.repeat' op updates outs #0 in place, but @fresh_layer returns for it a value that is not its slice argument #2 updated in place}}
  %0:2 = nn.repeat @fresh_layer(%h) params(%w) outs(%g) : (tensor<4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) -> (tensor<4xf32>, tensor<3x4xf32>)
  return %0#1 : tensor<3x4xf32>
}

// -----

// Tests that nothing reads a bias gradient's accumulator after the GEMM
// added into it.
func.func @bias_grad_acc_read_after(%x: tensor<2x2xf32>, %dy: tensor<2x4xf32>, %g: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<4xf32>, tensor<2x4xf32>) {
  // expected-error @+1 {{'nn.matmul_bias_grad' op updates operand #2 in place, but a later op still reads it}}
  %g2, %db = nn.matmul_bias_grad %x, %dy transpose_lhs outs(%g) : (tensor<2x2xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<4xf32>)
  %e = nn.exp %g : tensor<2x4xf32>
  return %g2, %db, %e : tensor<2x4xf32>, tensor<4xf32>, tensor<2x4xf32>
}

// -----

// Tests that a loss gradient written in place over logits read afterwards
// is refused: the later read would see the gradient.
func.func @loss_gradient_over_read_logits(%x: tensor<8x16xf32>, %y: tensor<8xi32>, %dl: tensor<f32>) -> (tensor<f32>, tensor<8x16xf32>, tensor<8x16xf32>) {
  %z = nn.exp %x : tensor<8x16xf32>
  // expected-error @+1 {{'nn.cross_entropy_with_grad' op updates operand #0 in place, but a later op still reads it}}
  %l, %g = nn.cross_entropy_with_grad %z, %y, %dl in_place : (tensor<8x16xf32>, tensor<8xi32>, tensor<f32>) -> (tensor<f32>, tensor<8x16xf32>)
  %late = nn.neg %z : tensor<8x16xf32>
  return %l, %g, %late : tensor<f32>, tensor<8x16xf32>, tensor<8x16xf32>
}
