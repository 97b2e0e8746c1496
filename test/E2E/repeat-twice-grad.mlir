// Tests that one layer function repeated twice (forward, then reversed),
// with two carried values and its parameters used by both repeats, gets
// the sum of both repeats' stacked gradients: the backward entry agrees
// with f64 central differences under each recompute policy.
// RUN: tessel-run %s --check-grads --quiet --recompute none
// RUN: tessel-run %s --check-grads --quiet --recompute selective
// RUN: tessel-run %s --check-grads --quiet --recompute full

func.func private @cell(%h: tensor<2x4xf64>, %c: tensor<2x4xf64>, %w: tensor<4x4xf64>, %u: tensor<4xf64>) -> (tensor<2x4xf64>, tensor<2x4xf64>) {
  %m = nn.matmul %h, %w : (tensor<2x4xf64>, tensor<4x4xf64>) -> tensor<2x4xf64>
  %ub = nn.broadcast %u dims = [1] : tensor<4xf64> -> tensor<2x4xf64>
  %g = nn.sigmoid %m : tensor<2x4xf64>
  %c2 = nn.mul %c, %g : tensor<2x4xf64>
  %c3 = nn.add %c2, %ub : tensor<2x4xf64>
  %h2 = nn.tanh %c3 : tensor<2x4xf64>
  return %h2, %c3 : tensor<2x4xf64>, tensor<2x4xf64>
}
func.func @loss(%x: tensor<2x4xf64> {nn.input}, %c0: tensor<2x4xf64> {nn.input},
                %ws: tensor<3x4x4xf64> {nn.param = "w", nn.init = #nn.init<normal, 0.5>},
                %us: tensor<3x4xf64> {nn.param = "u", nn.init = #nn.init<normal, 0.5>},
                %w2: tensor<4x4xf64> {nn.param = "w2", nn.init = #nn.init<normal, 0.5>}) -> tensor<f64> {
  %h, %c = nn.repeat @cell(%x, %c0) params(%ws, %us) : (tensor<2x4xf64>, tensor<2x4xf64>, tensor<3x4x4xf64>, tensor<3x4xf64>) -> (tensor<2x4xf64>, tensor<2x4xf64>)
  %h2, %c2 = nn.repeat @cell(%h, %c) params(%ws, %us) reverse : (tensor<2x4xf64>, tensor<2x4xf64>, tensor<3x4x4xf64>, tensor<3x4xf64>) -> (tensor<2x4xf64>, tensor<2x4xf64>)
  %o = nn.matmul %h2, %w2 : (tensor<2x4xf64>, tensor<4x4xf64>) -> tensor<2x4xf64>
  %l = nn.reduce_max %o dims = [0, 1] : tensor<2x4xf64> -> tensor<f64>
  %s = nn.reduce_mean %c2 dims = [1] : tensor<2x4xf64> -> tensor<2xf64>
  %s2 = nn.reduce_sum %s dims = [0] : tensor<2xf64> -> tensor<f64>
  %t = nn.add %l, %s2 : tensor<f64>
  return %t : tensor<f64>
}
