// RUN: tessel-opt %s -split-input-file -verify-diagnostics
// RUN: tessel-opt %s -split-input-file -verify-diagnostics -tessel-plan-memory

// (The malformed IR the pass meets. Its option's bad value, in-flight=0, is
// in tessel-overlap-communication.mlir, which parses.)

// Tests that nn.wait waits only on an asynchronous collective's result.
func.func @wait_on_plain_value(%x: tensor<8xf32>) -> tensor<8xf32> {
  %e = nn.exp %x : tensor<8xf32>
  // expected-error @+1 {{'nn.wait' op waits on a value that no asynchronous collective (a shard collective marked 'nn.async'), prefetch (an argument marked 'nn.prefetched') or layer (an argument of a function marked 'nn.finish') produces}}
  %w = nn.wait %e : tensor<8xf32>
  return %w : tensor<8xf32>
}

// -----

shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
// Tests that a blocking collective cannot be waited for.
func.func @wait_on_blocking(%x: tensor<8xf32>) -> tensor<8xf32> {
  %s = shard.all_reduce %x on @mesh grid_axes = [0] : tensor<8xf32> -> tensor<8xf32>
  // expected-error @+1 {{'nn.wait' op waits on a value that no asynchronous collective}}
  %w = nn.wait %s : tensor<8xf32>
  return %w : tensor<8xf32>
}

// -----

// Tests that nn.async marks only the collectives that move data.
func.func @async_on_compute(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'nn.exp' op 'nn.async' is a unit attribute of a shard all_reduce, all_gather, reduce_scatter or all_to_all}}
  %e = nn.exp %x {nn.async} : tensor<8xf32>
  return %e : tensor<8xf32>
}

// -----

shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
// Tests that all_slice, which moves nothing, is never asynchronous.
func.func @async_slice(%x: tensor<8xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'shard.all_slice' op 'nn.async' is a unit attribute}}
  %s = shard.all_slice %x on @mesh grid_axes = [0] slice_axis = 0 {nn.async} : tensor<8xf32> -> tensor<4xf32>
  return %s : tensor<4xf32>
}
