// A vocabulary-parallel embedding feeding an untied head split over the same
// vocabulary (both tables [vocab, width], "vocab" on tp): the embedding's
// output, a partial sum over tp, must be completed before the head's product,
// whose other factor is split over tp. Batch 4, sequence 8, vocabulary 64,
// width 16; the tables start at unit scale so that the logits are far from 0.
func.func @loss(
    %tokens:  tensor<4x8xi32> {nn.input, nn.axes = ["batch", "seq"]},
    %targets: tensor<4x8xi32> {nn.label, nn.axes = ["batch", "seq"]},
    %wte:  tensor<64x16xf32> {nn.param = "wte", nn.init = #nn.init<normal, 1.0>,
                              nn.axes = ["vocab", "embed"]},
    %head: tensor<64x16xf32> {nn.param = "head", nn.init = #nn.init<normal, 0.25>,
                              nn.axes = ["vocab", "embed"]})
    -> tensor<f32> {
  %x = nn.embedding %wte, %tokens : (tensor<64x16xf32>, tensor<4x8xi32>) -> tensor<4x8x16xf32>
  %logits = nn.matmul %x, %head transpose_rhs : (tensor<4x8x16xf32>, tensor<64x16xf32>) -> tensor<4x8x64xf32>
  %l = nn.cross_entropy %logits, %targets : (tensor<4x8x64xf32>, tensor<4x8xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
