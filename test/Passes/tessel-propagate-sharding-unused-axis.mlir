// RUN: tessel-opt %s -tessel-propagate-sharding="mesh=foo=2" --split-input-file --verify-diagnostics
// RUN: tessel-opt %s -tessel-propagate-sharding="mesh=dp=2,foo=1" --split-input-file | FileCheck %s

// Tests that a mesh axis no rule and no annotation splits anything over is
// a warning naming it and the rules: its ranks would all run the same work.
// (An axis of size 1 repeats nothing and is not reported; the second RUN
// line passes without a diagnostic.)
// CHECK-LABEL: func.func @unused_axis
// expected-warning @+1 {{mesh axis 'foo' (size 2) splits nothing (rules: batch=dp,seq=cp,mlp=tp,heads=tp,vocab=tp; no annotation names it): its 2 ranks repeat the same work}}
module {
  func.func @unused_axis(%x: tensor<8x16xf32> {nn.input, nn.axes = ["batch", "mlp"]}) -> tensor<f32> {
    %l = nn.reduce_sum %x dims = [0, 1] : tensor<8x16xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Tests that an axis a user annotation splits over is in use: no warning.
// CHECK-LABEL: func.func @annotated
module {
  func.func @annotated(%x: tensor<8x16xf32> {nn.input, nn.sharding = [["foo"], []]}) -> tensor<f32> {
    %l = nn.reduce_sum %x dims = [0, 1] : tensor<8x16xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
