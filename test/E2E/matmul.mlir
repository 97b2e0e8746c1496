// Tests batched matmul with a shared rhs, with transposes and with a summed
// batch through the runtime: a = [[[1,2],[3,4]],[[5,6],[7,8]]], b = [[1,0],[1,1]].
//   a·b = [[[3,2],[7,4]],[[11,6],[15,8]]]          (sum 56)
//   aᵀ·bᵀ per batch with b batched as [b, b]: aᵀ = [[1,3],[2,4]], bᵀ = [[1,1],[0,1]]
//   -> [[1,4],[2,6]] and [[5,12],[6,14]]         (sum 50)
//   Σ_b a[b]ᵀ · b (sum_batch, b batched as [b, b]) = (a0 + a1)ᵀ · b
//   = [[6,10],[8,12]] · b = [[16,10],[20,12]]       (sum 58)
// loss = 56 + 1000 · 50 + 100000 · 58 = 5850056 (exact in f32).
// RUN: tessel-compile %s -o %t.so
// RUN: tessel-run %t.so --steps 1 --quiet --metrics %t.jsonl
// RUN: FileCheck %s --input-file %t.jsonl
// CHECK: "loss":5850056{{(\.0)?}},

func.func @loss(%x: tensor<1xf32> {nn.input, nn.axes = ["batch"]}) -> tensor<f32> {
  %a = nn.constant dense<[[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]]> : tensor<2x2x2xf32>
  %b = nn.constant dense<[[1.0, 0.0], [1.0, 1.0]]> : tensor<2x2xf32>
  %ab = nn.matmul %a, %b : (tensor<2x2x2xf32>, tensor<2x2xf32>) -> tensor<2x2x2xf32>
  %s1 = nn.reduce_sum %ab dims = [0, 1, 2] : tensor<2x2x2xf32> -> tensor<f32>
  %bb = nn.broadcast %b dims = [1, 2] : tensor<2x2xf32> -> tensor<2x2x2xf32>
  %t = nn.matmul %a, %bb transpose_lhs transpose_rhs : (tensor<2x2x2xf32>, tensor<2x2x2xf32>) -> tensor<2x2x2xf32>
  %s2 = nn.reduce_sum %t dims = [0, 1, 2] : tensor<2x2x2xf32> -> tensor<f32>
  %k = nn.constant dense<1000.0> : tensor<f32>
  %s3 = nn.mul %s2, %k : tensor<f32>
  %r = nn.add %s1, %s3 : tensor<f32>
  %sb = nn.matmul %a, %bb transpose_lhs sum_batch : (tensor<2x2x2xf32>, tensor<2x2x2xf32>) -> tensor<2x2xf32>
  %s4 = nn.reduce_sum %sb dims = [0, 1] : tensor<2x2xf32> -> tensor<f32>
  %k2 = nn.constant dense<100000.0> : tensor<f32>
  %s5 = nn.mul %s4, %k2 : tensor<f32>
  %t2 = nn.add %r, %s5 : tensor<f32>
  return %t2 : tensor<f32>
}
