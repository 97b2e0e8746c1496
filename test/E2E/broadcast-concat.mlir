// Tests strided slices, both kinds of broadcast (new and size-1 dimensions),
// concat and reduce_max through the runtime, with an exactly known loss:
//   s = [0..7][1::3] = [1,4,7]; b = [[1,4,7],[1,4,7]]; e = [[10]*3,[20]*3];
//   m = b*e = [[10,40,70],[20,80,140]]; concat(m, b) along 1; max over rows
//   = [20,80,140,1,4,7]; · [1,10,100,1000,10000,100000] = 755820.
// RUN: tessel-compile %s -o %t.so
// RUN: tessel-run %t.so --steps 1 --quiet --metrics %t.jsonl
// RUN: FileCheck %s --input-file %t.jsonl
// CHECK: "loss":755820{{(\.0)?}},

func.func @loss(%x: tensor<1xf32> {nn.input, nn.axes = ["batch"]}) -> tensor<f32> {
  %c = nn.constant dense<[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]> : tensor<8xf32>
  %s = nn.slice %c start = [1] limit = [8] strides = [3] : tensor<8xf32> -> tensor<3xf32>
  %b = nn.broadcast %s dims = [1] : tensor<3xf32> -> tensor<2x3xf32>
  %d = nn.constant dense<[[10.0], [20.0]]> : tensor<2x1xf32>
  %e = nn.broadcast %d dims = [0, 1] : tensor<2x1xf32> -> tensor<2x3xf32>
  %m = nn.mul %b, %e : tensor<2x3xf32>
  %cat = nn.concat %m, %b dim = 1 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
  %mx = nn.reduce_max %cat dims = [0] : tensor<2x6xf32> -> tensor<6xf32>
  %w = nn.constant dense<[1.0, 10.0, 100.0, 1000.0, 10000.0, 100000.0]> : tensor<6xf32>
  %p = nn.mul %mx, %w : tensor<6xf32>
  %r = nn.reduce_sum %p dims = [0] : tensor<6xf32> -> tensor<f32>
  return %r : tensor<f32>
}
