// Tests the pass options: a negative bucket size is refused.
// RUN: not tessel-opt %s -tessel-partition="bucket-mb=-1" 2>&1 | FileCheck %s --check-prefix=BUCKET
// BUCKET: bucket-mb must be 0 or more, not -1

shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  return %x : tensor<8xf32>
}
