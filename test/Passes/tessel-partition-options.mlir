// Tests the pass options: a negative bucket size and per-rank batch norm
// statistics (not supported yet) are refused.
// RUN: not tessel-opt %s -tessel-partition="bucket-mb=-1" 2>&1 | FileCheck %s --check-prefix=BUCKET
// RUN: not tessel-opt %s -tessel-partition="local-batchnorm=true" 2>&1 | FileCheck %s --check-prefix=LOCALBN
// BUCKET: bucket-mb must be 0 or more, not -1
// LOCALBN: local-batchnorm is not supported yet

shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  return %x : tensor<8xf32>
}
