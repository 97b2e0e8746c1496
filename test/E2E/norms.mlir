// Tests softmax, the normalisations and cross-entropy through the runtime:
//   softmax([0, ln 3]) = [1/4, 3/4]; · [4, 8] sums to 7;
//   cross-entropy of zero logits over 10 classes = ln 10 = 2.302585;
//   rms_norm([3, 4]) with gamma 1 = [3, 4] / sqrt(12.5) (sum 1.979899);
// loss = 7 + 2.302585 + 1.979899 = 11.282484 (rms epsilon 1e-6 moves the 7th digit).
// RUN: tessel-compile %s -o %t.so
// RUN: tessel-run %t.so --steps 1 --quiet --metrics %t.jsonl
// RUN: FileCheck %s --input-file %t.jsonl
// CHECK: "loss":11.2824

func.func @loss(%y: tensor<3xi32> {nn.label, nn.axes = ["batch"]}) -> tensor<f32> {
  %x = nn.constant dense<[0.0, 1.0986122886681098]> : tensor<2xf32>
  %p = nn.softmax %x : tensor<2xf32>
  %w = nn.constant dense<[4.0, 8.0]> : tensor<2xf32>
  %pw = nn.mul %p, %w : tensor<2xf32>
  %a = nn.reduce_sum %pw dims = [0] : tensor<2xf32> -> tensor<f32>
  %z = nn.constant dense<0.0> : tensor<3x10xf32>
  %ce = nn.cross_entropy %z, %y : (tensor<3x10xf32>, tensor<3xi32>) -> tensor<f32>
  %v = nn.constant dense<[3.0, 4.0]> : tensor<2xf32>
  %g = nn.constant dense<1.0> : tensor<2xf32>
  %n = nn.rms_norm %v, %g : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %ns = nn.reduce_sum %n dims = [0] : tensor<2xf32> -> tensor<f32>
  %s = nn.add %a, %ce : tensor<f32>
  %r = nn.add %s, %ns : tensor<f32>
  return %r : tensor<f32>
}
