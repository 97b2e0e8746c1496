func.func @loss(%x: tensor<2x4xf32> {nn.input}, %w: tensor<5x3xf32> {nn.param = "w", nn.init = #nn.init<zeros>}) -> tensor<f32> {
  %z = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<5x3xf32>) -> tensor<2x3xf32>
  %s = nn.reduce_sum %z dims = [0, 1] : tensor<2x3xf32> -> tensor<f32>
  return %s : tensor<f32>
}
