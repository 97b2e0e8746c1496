// Tests that a parameter used by every layer of a repeat (shared across the
// layers, ALBERT-style, by broadcasting it onto the layer axis) and tied to
// the head gets the sum of every use's gradient: the backward entry agrees
// with f64 central differences of the loss under each recompute policy.
// RUN: tessel-run %s --check-grads --quiet --recompute none
// RUN: tessel-run %s --check-grads --quiet --recompute selective
// RUN: tessel-run %s --check-grads --quiet --recompute full

func.func private @layer(%h: tensor<4x8xf64>, %w: tensor<8x8xf64>, %b: tensor<8xf64>) -> tensor<4x8xf64> {
  %m = nn.matmul %h, %w : (tensor<4x8xf64>, tensor<8x8xf64>) -> tensor<4x8xf64>
  %bb = nn.broadcast %b dims = [1] : tensor<8xf64> -> tensor<4x8xf64>
  %a = nn.add %m, %bb : tensor<4x8xf64>
  %t = nn.tanh %a : tensor<4x8xf64>
  %r = nn.add %t, %h : tensor<4x8xf64>
  return %r : tensor<4x8xf64>
}

func.func @loss(%x: tensor<4x8xf64> {nn.input},
                %y: tensor<4xi32> {nn.label},
                %w: tensor<8x8xf64> {nn.param = "shared.weight", nn.init = #nn.init<normal, 0.3>},
                %bs: tensor<3x8xf64> {nn.param = "layers.bias", nn.init = #nn.init<normal, 0.1>, nn.axes = ["layers", "embed"]})
    -> tensor<f64> {
  %ws = nn.broadcast %w dims = [1, 2] : tensor<8x8xf64> -> tensor<3x8x8xf64>
  %h = nn.repeat @layer(%x) params(%ws, %bs) : (tensor<4x8xf64>, tensor<3x8x8xf64>, tensor<3x8xf64>) -> tensor<4x8xf64>
  %logits = nn.matmul %h, %w transpose_rhs : (tensor<4x8xf64>, tensor<8x8xf64>) -> tensor<4x8xf64>
  %l = nn.cross_entropy %logits, %y : (tensor<4x8xf64>, tensor<4xi32>) -> tensor<f64>
  return %l : tensor<f64>
}
