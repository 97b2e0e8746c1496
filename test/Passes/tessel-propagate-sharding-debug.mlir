// RUN: tessel-opt %s -tessel-propagate-sharding="mesh=dp=2,tp=2 sequence-parallel=true debug=true" --split-input-file --verify-diagnostics | FileCheck %s

// Tests that --debug explains each split, and that a user-annotated weight
// wins over a derived activation split: under sequence parallelism the
// normalised activation arrives split along the sequence over tp, but the
// column-parallel weight claims tp for its columns.
// CHECK-LABEL: func.func @annotation_wins
// CHECK: nn.matmul %{{.*}}, %arg2 {nn.loop_sharding = {{\[}}["dp"], [], ["tp"], []]}
func.func @annotation_wins(
    %x: tensor<8x4x16xf32> {nn.input, nn.axes = ["batch", "seq", "embed"]},
    %g: tensor<16xf32> {nn.param = "g", nn.init = #nn.init<ones>, nn.axes = ["embed"]},
    %w: tensor<16x32xf32> {nn.param = "w", nn.init = #nn.init<zeros>, nn.axes = ["embed", "heads"]})
    -> tensor<f32> {
  // expected-remark @+1 {{sharding: loop 0 over 'dp' asked by operand #0 (user annotation): taken; loop 1 over 'tp' asked by operand #0 (user annotation): taken}}
  %n = nn.rms_norm %x, %g : (tensor<8x4x16xf32>, tensor<16xf32>) -> tensor<8x4x16xf32>
  // expected-remark @+1 {{sharding: loop 2 over 'tp' asked by operand #1 (user annotation): taken; loop 0 over 'dp' asked by result #0: taken; loop 1 over 'tp' asked by operand #0: lost, the axis already splits another loop}}
  %h = nn.matmul %n, %w : (tensor<8x4x16xf32>, tensor<16x32xf32>) -> tensor<8x4x32xf32>
  // expected-remark @+1 {{sharding: loop 0 over 'dp' asked by operand #0: taken; loop 2 over 'tp' asked by operand #0: taken}}
  %l = nn.reduce_sum %h dims = [0, 1, 2] : tensor<8x4x32xf32> -> tensor<f32>
  return %l : tensor<f32>
}
