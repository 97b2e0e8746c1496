// A two-layer perceptron on 784-pixel images and 10 classes: the smallest
// complete model. Parameters, inputs and labels are function arguments with
// logical axes; the mesh and the axis rules come at compile time.
//
//   tessel-opt examples/mlp.mlir -tessel-report-cost

func.func @loss(
    %x:  tensor<32x784xf32> {nn.input, nn.axes = ["batch", "embed"]},
    %y:  tensor<32xi32>     {nn.label, nn.axes = ["batch"]},
    %w1: tensor<784x1024xf32> {nn.param = "fc1.weight", nn.init = #nn.init<normal, 0.02>,
                               nn.axes = ["embed", "mlp"]},
    %b1: tensor<1024xf32>     {nn.param = "fc1.bias", nn.init = #nn.init<zeros>,
                               nn.axes = ["mlp"]},
    %w2: tensor<1024x10xf32>  {nn.param = "fc2.weight", nn.init = #nn.init<normal, 0.02>,
                               nn.axes = ["mlp", "classes"]},
    %b2: tensor<10xf32>       {nn.param = "fc2.bias", nn.init = #nn.init<zeros>,
                               nn.axes = ["classes"]})
    -> tensor<f32> {
  %h = nn.matmul %x, %w1 : (tensor<32x784xf32>, tensor<784x1024xf32>) -> tensor<32x1024xf32>
  %bb1 = nn.broadcast %b1 dims = [1] : tensor<1024xf32> -> tensor<32x1024xf32>
  %hb = nn.add %h, %bb1 : tensor<32x1024xf32>
  %a = nn.gelu %hb : tensor<32x1024xf32>
  %z = nn.matmul %a, %w2 : (tensor<32x1024xf32>, tensor<1024x10xf32>) -> tensor<32x10xf32>
  %bb2 = nn.broadcast %b2 dims = [1] : tensor<10xf32> -> tensor<32x10xf32>
  %zb = nn.add %z, %bb2 : tensor<32x10xf32>
  %l = nn.cross_entropy %zb, %y : (tensor<32x10xf32>, tensor<32xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
