// RUN: tessel-opt %s -split-input-file -verify-diagnostics -tessel-fuse-bias-grads

// (The malformed IR the pass meets: the windows it keeps covered are read
// from nn.async and nn.wait, whose misuse is refused before it runs.)

// Tests that a wait on a value no started collective produces is refused,
// not read as a window.
func.func @wait_on_plain_value(%x: tensor<32x8xf32>, %dy: tensor<32x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>) {
  %db = nn.reduce_sum %dy dims = [0] : tensor<32x16xf32> -> tensor<16xf32>
  // expected-error @+1 {{'nn.wait' op waits on a value that no asynchronous collective}}
  %w = nn.wait %db : tensor<16xf32>
  %dw = nn.matmul %x, %dy transpose_lhs : (tensor<32x8xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  return %dw, %w : tensor<8x16xf32>, tensor<16xf32>
}

// -----

shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
// Tests that a wait before its collective is refused (a window must open
// before it closes).
func.func @wait_before_start(%x: tensor<32x8xf32>, %dy: tensor<32x16xf32>, %g: tensor<64xf32>) -> (tensor<8x16xf32>, tensor<16xf32>, tensor<64xf32>) {
  %db = nn.reduce_sum %dy dims = [0] : tensor<32x16xf32> -> tensor<16xf32>
  // expected-error @+1 {{'nn.wait' op must follow its collective in the same block}}
  %w = nn.wait %ar : tensor<64xf32>
  %ar = shard.all_reduce %g on @mesh grid_axes = [0] {nn.async} : tensor<64xf32> -> tensor<64xf32>
  %dw = nn.matmul %x, %dy transpose_lhs : (tensor<32x8xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  return %dw, %db, %w : tensor<8x16xf32>, tensor<16xf32>, tensor<64xf32>
}
