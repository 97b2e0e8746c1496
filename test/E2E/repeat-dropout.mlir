// Tests that every layer of a repeat, nested repeats included, draws a
// dropout mask of its own, and that the backward (and each recomputation)
// draws its forward's. Four layers (2 outer × 2 inner) drop half of a
// vector of ones and scale by 2: independent masks keep 1/16 of the
// elements at 16, a mean of 1 (4096 elements: 1 ± 0.06); a mask shared by
// any two layers would keep at least 1/8 at 16, a mean of 2 or more.
// RUN: tessel-run %s --steps 1 --quiet --optimizer sgd --metrics %t.jsonl
// RUN: FileCheck %s --input-file %t.jsonl
// CHECK: "loss":{{0\.9[0-9]*|1\.0[0-9]*}},
// RUN: tessel-run %s --check-grads --quiet --recompute none
// RUN: tessel-run %s --check-grads --quiet --recompute selective
// RUN: tessel-run %s --check-grads --quiet --recompute full

func.func private @drop(%h: tensor<4096xf64>, %s: tensor<4096xf64>) -> tensor<4096xf64> {
  %m = nn.mul %h, %s : tensor<4096xf64>
  %d = nn.dropout %m rate = 0.5 seed = 11 : tensor<4096xf64>
  return %d : tensor<4096xf64>
}
func.func private @pair(%h: tensor<4096xf64>, %s: tensor<2x4096xf64>) -> tensor<4096xf64> {
  %d = nn.repeat @drop(%h) params(%s) : (tensor<4096xf64>, tensor<2x4096xf64>) -> tensor<4096xf64>
  return %d : tensor<4096xf64>
}
func.func @loss(%x: tensor<1xf64> {nn.input, nn.axes = ["batch"]},
                %s: tensor<2x2x4096xf64> {nn.param = "scale", nn.init = #nn.init<ones>}) -> tensor<f64> {
  %ones = nn.constant dense<1.0> : tensor<4096xf64>
  %d = nn.repeat @pair(%ones) params(%s) : (tensor<4096xf64>, tensor<2x2x4096xf64>) -> tensor<4096xf64>
  %l = nn.reduce_mean %d dims = [0] : tensor<4096xf64> -> tensor<f64>
  return %l : tensor<f64>
}
