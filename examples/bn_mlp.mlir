// An MLP with batch normalisation between the layers: the model that tells
// SyncBatchNorm (statistics over the global batch) from per-rank BatchNorm
// under data parallelism.

func.func @loss(
    %x:  tensor<64x256xf32> {nn.input, nn.axes = ["batch", "features"]},
    %y:  tensor<64xi32>     {nn.label, nn.axes = ["batch"]},
    %w1: tensor<256x512xf32> {nn.param = "fc1.weight", nn.init = #nn.init<normal, 0.02>,
                              nn.axes = ["features", "mlp"]},
    %g1: tensor<512xf32>     {nn.param = "bn1.weight", nn.init = #nn.init<ones>,
                              nn.axes = ["mlp"]},
    %s1: tensor<512xf32>     {nn.param = "bn1.bias", nn.init = #nn.init<zeros>,
                              nn.axes = ["mlp"]},
    %w2: tensor<512x512xf32> {nn.param = "fc2.weight", nn.init = #nn.init<normal, 0.02>,
                              nn.axes = ["mlp", "embed"]},
    %g2: tensor<512xf32>     {nn.param = "bn2.weight", nn.init = #nn.init<ones>,
                              nn.axes = ["embed"]},
    %s2: tensor<512xf32>     {nn.param = "bn2.bias", nn.init = #nn.init<zeros>,
                              nn.axes = ["embed"]},
    %w3: tensor<512x10xf32>  {nn.param = "head.weight", nn.init = #nn.init<normal, 0.02>,
                              nn.axes = ["embed", "classes"]},
    %b3: tensor<10xf32>      {nn.param = "head.bias", nn.init = #nn.init<zeros>,
                              nn.axes = ["classes"]})
    -> tensor<f32> {
  %h1 = nn.matmul %x, %w1 : (tensor<64x256xf32>, tensor<256x512xf32>) -> tensor<64x512xf32>
  %n1 = nn.batch_norm %h1, %g1, %s1 : (tensor<64x512xf32>, tensor<512xf32>, tensor<512xf32>) -> tensor<64x512xf32>
  %a1 = nn.relu %n1 : tensor<64x512xf32>
  %h2 = nn.matmul %a1, %w2 : (tensor<64x512xf32>, tensor<512x512xf32>) -> tensor<64x512xf32>
  %n2 = nn.batch_norm %h2, %g2, %s2 : (tensor<64x512xf32>, tensor<512xf32>, tensor<512xf32>) -> tensor<64x512xf32>
  %a2 = nn.relu %n2 : tensor<64x512xf32>
  %z = nn.matmul %a2, %w3 : (tensor<64x512xf32>, tensor<512x10xf32>) -> tensor<64x10xf32>
  %bz = nn.broadcast %b3 dims = [1] : tensor<10xf32> -> tensor<64x10xf32>
  %zb = nn.add %z, %bz : tensor<64x10xf32>
  %l = nn.cross_entropy %zb, %y : (tensor<64x10xf32>, tensor<64xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
