// Tests that transpose, slice and elementwise ops lower with the right
// strides and offsets: the loss is known exactly.
//   c = [[1,2,3],[4,5,6]]; transpose -> [[1,4],[2,5],[3,6]];
//   rows 1..2 -> [[2,5],[3,6]]; times [[1,10],[100,1000]] -> [[2,50],[300,6000]];
//   sum = 6352.
// RUN: tessel-compile %s -o %t.so
// RUN: tessel-run %t.so --steps 1 --quiet --metrics %t.jsonl
// RUN: FileCheck %s --input-file %t.jsonl
// CHECK: "loss":6352{{(\.0)?}},

func.func @loss(%x: tensor<1xf32> {nn.input, nn.axes = ["batch"]}) -> tensor<f32> {
  %c = nn.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %t = nn.transpose %c perm = [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  %s = nn.slice %t start = [1, 0] limit = [3, 2] : tensor<3x2xf32> -> tensor<2x2xf32>
  %w = nn.constant dense<[[1.0, 10.0], [100.0, 1000.0]]> : tensor<2x2xf32>
  %p = nn.mul %s, %w : tensor<2x2xf32>
  %r = nn.reduce_sum %p dims = [0, 1] : tensor<2x2xf32> -> tensor<f32>
  return %r : tensor<f32>
}
