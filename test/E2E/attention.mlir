// Tests causal and full attention through the runtime. Keys are zero, so
// every visible key weighs the same: causal rows see v[0..i], full rows see
// all of v = [2, 4] (one head of width 1).
//   causal: [2, 3]  (sum 5);  full: [3, 3]  (sum 6);  loss = 5 + 10·6 = 65.
// RUN: tessel-compile %s -o %t.so
// RUN: tessel-run %t.so --steps 1 --quiet --metrics %t.jsonl
// RUN: FileCheck %s --input-file %t.jsonl
// CHECK: "loss":65{{(\.0)?}},

func.func @loss(%x: tensor<1xf32> {nn.input, nn.axes = ["batch"]}) -> tensor<f32> {
  %q = nn.constant dense<1.0> : tensor<1x2x1x1xf32>
  %k = nn.constant dense<0.0> : tensor<1x2x1x1xf32>
  %v = nn.constant dense<[[[[2.0]], [[4.0]]]]> : tensor<1x2x1x1xf32>
  %c = nn.attention %q, %k, %v causal : (tensor<1x2x1x1xf32>, tensor<1x2x1x1xf32>, tensor<1x2x1x1xf32>) -> tensor<1x2x1x1xf32>
  %f = nn.attention %q, %k, %v : (tensor<1x2x1x1xf32>, tensor<1x2x1x1xf32>, tensor<1x2x1x1xf32>) -> tensor<1x2x1x1xf32>
  %sc = nn.reduce_sum %c dims = [0, 1, 2, 3] : tensor<1x2x1x1xf32> -> tensor<f32>
  %sf = nn.reduce_sum %f dims = [0, 1, 2, 3] : tensor<1x2x1x1xf32> -> tensor<f32>
  %ten = nn.constant dense<10.0> : tensor<f32>
  %sf10 = nn.mul %sf, %ten : tensor<f32>
  %r = nn.add %sc, %sf10 : tensor<f32>
  return %r : tensor<f32>
}
