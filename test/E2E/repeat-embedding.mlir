// Tests nn.repeat over stacked parameters and an embedding lookup through
// the runtime. The stacked parameter starts at 2 everywhere
// (#nn.init<constant, 2.0>), so 3 layers of h * w multiply by 8; h is the
// embedding of ids [2, 0] in [[1,2],[3,4],[5,6]] = [[5,6],[1,2]] (sum 14).
//   loss = 8 · 14 = 112.
// RUN: tessel-compile %s -o %t.so
// RUN: tessel-run %t.so --steps 1 --quiet --metrics %t.jsonl
// RUN: FileCheck %s --input-file %t.jsonl
// CHECK: "loss":112{{(\.0)?}},

func.func private @layer(%h: tensor<2x2xf32>, %w: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %0 = nn.mul %h, %w : tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

func.func @loss(%w: tensor<3x2x2xf32> {nn.param = "w", nn.init = #nn.init<constant, 2.0>,
                                       nn.axes = ["layers", "batch", "embed"]}) -> tensor<f32> {
  %table = nn.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : tensor<3x2xf32>
  %ids = nn.constant dense<[2, 0]> : tensor<2xi32>
  %h = nn.embedding %table, %ids : (tensor<3x2xf32>, tensor<2xi32>) -> tensor<2x2xf32>
  %o = nn.repeat @layer(%h) params(%w) : (tensor<2x2xf32>, tensor<3x2x2xf32>) -> tensor<2x2xf32>
  %r = nn.reduce_sum %o dims = [0, 1] : tensor<2x2xf32> -> tensor<f32>
  return %r : tensor<f32>
}
