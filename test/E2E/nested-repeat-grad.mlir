// Tests that repeats nested in a repeated layer, per-layer stacked outputs
// (JAX's scan ys) with their own cotangents, and a model with an output
// besides the loss differentiate right: the backward entry agrees with f64
// central differences under each recompute policy (the inner repeat's own
// kept values are recomputed by the outer layer's derivative).
// RUN: tessel-run %s --check-grads --quiet --recompute none
// RUN: tessel-run %s --check-grads --quiet --recompute selective
// RUN: tessel-run %s --check-grads --quiet --recompute full

func.func private @inner(%h: tensor<2x4xf64>, %w: tensor<4x4xf64>) -> tensor<2x4xf64> {
  %m = nn.matmul %h, %w : (tensor<2x4xf64>, tensor<4x4xf64>) -> tensor<2x4xf64>
  %t = nn.tanh %m : tensor<2x4xf64>
  return %t : tensor<2x4xf64>
}
func.func private @outer(%h: tensor<2x4xf64>, %ws: tensor<3x4x4xf64>) -> (tensor<2x4xf64>, tensor<2x4xf64>) {
  %y = nn.repeat @inner(%h) params(%ws) : (tensor<2x4xf64>, tensor<3x4x4xf64>) -> tensor<2x4xf64>
  %s = nn.add %y, %h : tensor<2x4xf64>
  return %s, %y : tensor<2x4xf64>, tensor<2x4xf64>
}
func.func @loss(%x: tensor<2x4xf64> {nn.input}, %r: tensor<2x2x4xf64> {nn.input},
                %wss: tensor<2x3x4x4xf64> {nn.param = "w", nn.init = #nn.init<normal, 0.5>}) -> (tensor<f64>, tensor<2x4xf64>) {
  %y, %ys = nn.repeat @outer(%x) params(%wss) : (tensor<2x4xf64>, tensor<2x3x4x4xf64>) -> (tensor<2x4xf64>, tensor<2x2x4xf64>)
  %p = nn.mul %ys, %r : tensor<2x2x4xf64>
  %a = nn.reduce_sum %p dims = [0, 1, 2] : tensor<2x2x4xf64> -> tensor<f64>
  %b = nn.reduce_sum %y dims = [0, 1] : tensor<2x4xf64> -> tensor<f64>
  %l = nn.add %a, %b : tensor<f64>
  return %l, %y : tensor<f64>, tensor<2x4xf64>
}
