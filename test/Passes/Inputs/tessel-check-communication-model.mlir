// A two-layer model for tessel-check-communication.mlir: enough layers for
// two pipeline stages, a batch that splits over dp.
func.func private @layer(%h: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %0 = nn.matmul %h, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %1 = nn.tanh %0 : tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}

func.func @loss(%x: tensor<4x8xf32> {nn.input, nn.axes = ["batch", "embed"]},
                %w: tensor<2x8x8xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.02>,
                                       nn.axes = ["layers", "embed", "mlp"]}) -> tensor<f32> {
  %h = nn.repeat @layer(%x) params(%w) : (tensor<4x8xf32>, tensor<2x8x8xf32>) -> tensor<4x8xf32>
  %r = nn.reduce_sum %h dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %r : tensor<f32>
}
