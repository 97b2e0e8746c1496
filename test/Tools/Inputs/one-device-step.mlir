// The model of partitioned-step.mlir on one device: tessel-compile-mesh.mlir
// trains both and compares their losses.
func.func @loss(%x: tensor<4x8xf32> {nn.input, nn.axes = ["batch", "embed"]},
                %y: tensor<4xi32> {nn.label, nn.axes = ["batch"]},
                %w: tensor<8x12xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.5>, nn.axes = ["embed", "classes"]})
    -> tensor<f32> {
  %z = nn.matmul %x, %w : (tensor<4x8xf32>, tensor<8x12xf32>) -> tensor<4x12xf32>
  %l = nn.cross_entropy %z, %y : (tensor<4x12xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
