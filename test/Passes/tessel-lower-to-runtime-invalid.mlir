// RUN: tessel-opt %s -tessel-lower-to-runtime --split-input-file --verify-diagnostics

// Tests that lowering needs the memory plan first.
// expected-error @+1 {{'func.func' op has no memory plan; run -tessel-plan-memory first}}
func.func @unplanned(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = nn.exp %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that a module compiles one model.
func.func @first(%x: tensor<4xf32> {nn.input}) -> tensor<f32> attributes {tessel.scratch_bytes = 0 : i64} {
  %0 = nn.reduce_sum %x dims = [0] {tessel.offsets = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
  return %0 : tensor<f32>
}
// expected-error @+1 {{'func.func' op is a second model function; a module compiles one model (the first is @first)}}
func.func @second(%x: tensor<4xf32> {nn.input}) -> tensor<f32> attributes {tessel.scratch_bytes = 0 : i64} {
  %0 = nn.reduce_sum %x dims = [0] {tessel.offsets = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that an op without a plan for its results is refused.
func.func @partly_planned(%a: tensor<4xf32>) -> tensor<4xf32> attributes {tessel.scratch_bytes = 64 : i64} {
  // expected-error @+1 {{'nn.exp' op has no memory plan; run -tessel-plan-memory first}}
  %0 = nn.exp %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that a constant the runtime cannot copy (a resource blob) is refused.
func.func @resource_constant() -> tensor<2xf32> attributes {tessel.scratch_bytes = 64 : i64} {
  // expected-error @+1 {{'nn.constant' op only dense constants lower to the runtime}}
  %0 = nn.constant {tessel.offsets = array<i64: 0>} dense_resource<blob> : tensor<2xf32>
  return %0 : tensor<2xf32>
}
{-#
  dialect_resources: {
    builtin: {
      blob: "0x040000000000803F00000040"
    }
  }
#-}

// -----

// Tests that a collective on a grid other than @mesh is refused.
shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
shard.grid @other(shape = 2)
func.func @other_grid(%a: tensor<4xf32>) -> tensor<4xf32> attributes {tessel.scratch_bytes = 0 : i64} {
  // expected-error @+1 {{'shard.all_reduce' op runs on the grid @other; only the mesh @mesh lowers to the runtime}}
  %0 = shard.all_reduce %a on @other grid_axes = [0] {tessel.offsets = array<i64: -2>} : tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that a collective of integers is refused (the runtime's collectives
// move floats).
shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
func.func @integers(%a: tensor<4xi32>) -> tensor<4xi32> attributes {tessel.scratch_bytes = 0 : i64} {
  // expected-error @+1 {{'shard.all_reduce' op communicates 'i32'; the runtime's collectives take f32, f16, bf16 and f64 (and i32, i64 when they only move data)}}
  %0 = shard.all_reduce %a on @mesh grid_axes = [0] {tessel.offsets = array<i64: -2>} : tensor<4xi32> -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// Tests that an all-reduce that changes the element type is refused.
shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
func.func @widening(%a: tensor<4xf32>) -> tensor<4xf64> attributes {tessel.scratch_bytes = 0 : i64} {
  // expected-error @+1 {{'shard.all_reduce' op converts 'f32' to 'f64'; the runtime's collectives keep the element type}}
  %0 = shard.all_reduce %a on @mesh grid_axes = [0] {tessel.offsets = array<i64: -2>} : tensor<4xf32> -> tensor<4xf64>
  return %0 : tensor<4xf64>
}

// -----

// Tests that a reduction the runtime does not have (min) is refused.
shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
func.func @min(%a: tensor<4x2xf32>) -> tensor<2x2xf32> attributes {tessel.scratch_bytes = 0 : i64} {
  // expected-error @+1 {{'shard.reduce_scatter' op reduces with 'min'; the runtime reduces with sum, average and max}}
  %0 = shard.reduce_scatter %a on @mesh grid_axes = [0] reduction = min scatter_axis = 0 {tessel.offsets = array<i64: -2>} : tensor<4x2xf32> -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

// Tests that a gather whose grid axes are not increasing is refused: the
// runtime orders a group's ranks by axis, upstream by grid_axes.
shard.grid @mesh(shape = 2x2) {nn.axis_names = ["dp", "tp"]}
func.func @axis_order(%a: tensor<2x3xf32>) -> tensor<8x3xf32> attributes {tessel.scratch_bytes = 0 : i64} {
  // expected-error @+1 {{'shard.all_gather' op lists grid_axes out of order; the runtime orders a group's ranks by increasing mesh axis}}
  %0 = shard.all_gather %a on @mesh grid_axes = [1, 0] gather_axis = 0 {tessel.offsets = array<i64: -2>} : tensor<2x3xf32> -> tensor<8x3xf32>
  return %0 : tensor<8x3xf32>
}

// -----

// Tests that a collective of a dynamic shape is refused.
shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
func.func @dynamic(%a: tensor<?x4xf32>) -> tensor<?x4xf32> attributes {tessel.scratch_bytes = 0 : i64} {
  // expected-error @+1 {{'shard.all_reduce' op has the dynamic shape 'tensor<?x4xf32>'; the runtime's collectives need static shapes}}
  %0 = shard.all_reduce %a on @mesh grid_axes = [0] {tessel.offsets = array<i64: -2>} : tensor<?x4xf32> -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

// Tests that a model on a mesh without axis names is refused: the
// description names the axes.
// expected-error @+1 {{'shard.grid' op needs 'nn.axis_names': one distinct name per axis, e.g. ["dp", "tp"]}}
shard.grid @mesh(shape = 2)
func.func @unnamed(%x: tensor<4xf32> {nn.input}) -> tensor<f32> attributes {tessel.scratch_bytes = 0 : i64} {
  %0 = nn.reduce_sum %x dims = [0] {tessel.offsets = array<i64: -2>} : tensor<4xf32> -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that a sharding naming an axis the mesh does not have is refused.
shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
// expected-error @+1 {{'func.func' op argument #0: 'nn.sharding' [["tp"]] must name, per dimension, distinct axes of the mesh (dp)}}
func.func @unknown_axis(%x: tensor<4xf32> {nn.input, nn.sharding = [["tp"]]}) -> tensor<f32> attributes {tessel.scratch_bytes = 0 : i64} {
  %0 = nn.reduce_sum %x dims = [0] {tessel.offsets = array<i64: -2>} : tensor<4xf32> -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that a sharding without a mesh is refused.
// expected-error @+1 {{'func.func' op argument #0 has 'nn.sharding', but the module has no shard.grid @mesh}}
func.func @no_mesh(%x: tensor<4xf32> {nn.input, nn.sharding = [["dp"]]}) -> tensor<f32> attributes {tessel.scratch_bytes = 0 : i64} {
  %0 = nn.reduce_sum %x dims = [0] {tessel.offsets = array<i64: -2>} : tensor<4xf32> -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that a concat's in-place flags (tessel-plan-memory's) must name
// each input once: a plan edited by hand is refused, not read past.
func.func @concat_flags(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<8xf32> attributes {tessel.scratch_bytes = 64 : i64} {
  // expected-error @+1 {{'nn.concat' op has 1 in-place flags for 2 inputs}}
  %0 = nn.concat %a, %b dim = 0 {tessel.in_place_inputs = array<i1: true>, tessel.offsets = array<i64: -2>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// Tests that a plan's offsets and sub-offsets must name each result once.
func.func @short_plan(%a: tensor<4xf32>) -> tensor<4xf32> attributes {tessel.scratch_bytes = 0 : i64} {
  // expected-error @+1 {{'nn.exp' op has a memory plan of 1 offsets and 2 sub-offsets for 1 results}}
  %0 = nn.exp %a {tessel.offsets = array<i64: -2>, tessel.sub_offsets = array<i64: 0, 16>} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that a slice planned as a view must be a contiguous window of its
// operand: a plan edited by hand is refused, not read as the wrong bytes.
func.func @strided_view(%a: tensor<4x8xf32>) -> tensor<4x4xf32> attributes {tessel.scratch_bytes = 0 : i64} {
  // expected-error @+1 {{'nn.slice' op is planned as a view ('tessel.view') but its window is not contiguous}}
  %0 = nn.slice %a start = [0, 0] limit = [4, 4] {tessel.offsets = array<i64: -1>, tessel.view} : tensor<4x8xf32> -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

// Tests that a broadcast planned as a view must broadcast along rows or
// columns and be read only by binary ops: a plan edited by hand is
// refused, not read as the wrong elements.
func.func @middle_view(%a: tensor<2x8xf32>, %x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> attributes {tessel.scratch_bytes = 256 : i64} {
  // expected-error @+1 {{'nn.broadcast' op is planned as a view ('tessel.view') but does not broadcast along rows or columns}}
  %0 = nn.broadcast %a dims = [0, 2] {tessel.offsets = array<i64: -1>, tessel.view} : tensor<2x8xf32> -> tensor<2x4x8xf32>
  %1 = nn.add %x, %0 {tessel.offsets = array<i64: 0>} : tensor<2x4x8xf32>
  return %1 : tensor<2x4x8xf32>
}

// -----

func.func @view_read_by_exp(%b: tensor<8xf32>) -> tensor<4x8xf32> attributes {tessel.scratch_bytes = 128 : i64} {
  // expected-error @+1 {{'nn.broadcast' op is planned as a view ('tessel.view') but is read by an op other than a binary op}}
  %0 = nn.broadcast %b dims = [1] {tessel.offsets = array<i64: -1>, tessel.view} : tensor<8xf32> -> tensor<4x8xf32>
  %1 = nn.exp %0 {tessel.offsets = array<i64: 0>} : tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}

// -----

// Tests that a deferred gradient reduction's entries come together: a
// backward_no_sync without its reduce_grads would leave the gradients of
// a step of microbatches unreduced.
func.func @loss(%x: tensor<4xf32> {nn.input}) -> tensor<f32> attributes {tessel.scratch_bytes = 0 : i64} {
  %l = nn.reduce_sum %x dims = [0] {tessel.offsets = array<i64: -2>} : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
func.func @loss_backward(%x: tensor<4xf32> {nn.input}) -> tensor<f32> attributes {nn.entry = "backward", tessel.scratch_bytes = 0 : i64} {
  %l = nn.reduce_sum %x dims = [0] {tessel.offsets = array<i64: -2>} : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
func.func @loss_update(%x: tensor<4xf32> {nn.input}) attributes {nn.entry = "update", tessel.scratch_bytes = 0 : i64} {
  return
}
// expected-error @+1 {{'func.func' op is a deferred gradient reduction's entry without its partners (reduce_grads comes with backward_no_sync, and with backward_weight_no_sync where there is a backward_weight)}}
func.func @loss_backward_no_sync(%x: tensor<4xf32> {nn.input}) -> tensor<f32> attributes {nn.entry = "backward_no_sync", tessel.scratch_bytes = 0 : i64} {
  %l = nn.reduce_sum %x dims = [0] {tessel.offsets = array<i64: -2>} : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a backward reading kept activations (nn.kept) comes with the
// forward_keep that writes them: without it they would have no place.
func.func @loss(%x: tensor<4xf32> {nn.input}) -> tensor<f32> attributes {tessel.scratch_bytes = 0 : i64} {
  %l = nn.reduce_sum %x dims = [0] {tessel.offsets = array<i64: -2>} : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
// expected-error @+1 {{'func.func' op reads a kept value (argument #1, nn.kept) but the module has no 'forward_keep' entry to keep it}}
func.func @loss_backward(%x: tensor<4xf32> {nn.input}, %k: tensor<4xf32> {nn.kept = 0 : i64}) -> tensor<f32> attributes {nn.entry = "backward", tessel.scratch_bytes = 0 : i64} {
  %l = nn.reduce_sum %k dims = [0] {tessel.offsets = array<i64: -2>} : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
func.func @loss_update(%x: tensor<4xf32> {nn.input}) attributes {nn.entry = "update", tessel.scratch_bytes = 0 : i64} {
  return
}

// -----

// Tests that a forward_keep comes with the backward that reads what it
// keeps.
func.func @loss(%x: tensor<4xf32> {nn.input}) -> tensor<f32> attributes {tessel.scratch_bytes = 0 : i64} {
  %l = nn.reduce_sum %x dims = [0] {tessel.offsets = array<i64: -2>} : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
// expected-error @+1 {{'func.func' op is a 'forward_keep' entry without a backward entry to read what it keeps}}
func.func @loss_forward_keep(%x: tensor<4xf32> {nn.input}) -> tensor<f32> attributes {nn.entry = "forward_keep", tessel.scratch_bytes = 0 : i64} {
  %l = nn.reduce_sum %x dims = [0] {tessel.offsets = array<i64: -2>} : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
