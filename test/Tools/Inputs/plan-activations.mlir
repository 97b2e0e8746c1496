// A model whose activations, not its parameters, outgrow a device: four
// tanh layers of width 8192 over 131072 rows keep 4 GiB per tensor, so one
// 80 GiB device holds its step only with recomputation.
func.func private @layer(%h: tensor<131072x8192xf32>, %w: tensor<8192x8192xf32>) -> tensor<131072x8192xf32> {
  %m = nn.matmul %h, %w : (tensor<131072x8192xf32>, tensor<8192x8192xf32>) -> tensor<131072x8192xf32>
  %t = nn.tanh %m : tensor<131072x8192xf32>
  %u = nn.tanh %t : tensor<131072x8192xf32>
  %v = nn.tanh %u : tensor<131072x8192xf32>
  return %v : tensor<131072x8192xf32>
}
func.func @loss(%x: tensor<131072x8192xf32> {nn.input, nn.axes = ["batch", "embed"]},
                %w: tensor<4x8192x8192xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.01>, nn.axes = ["layers", "embed", "mlp"]}) -> tensor<f32> {
  %h = nn.repeat @layer(%x) params(%w) : (tensor<131072x8192xf32>, tensor<4x8192x8192xf32>) -> tensor<131072x8192xf32>
  %l = nn.reduce_sum %h dims = [0, 1] : tensor<131072x8192xf32> -> tensor<f32>
  return %l : tensor<f32>
}
