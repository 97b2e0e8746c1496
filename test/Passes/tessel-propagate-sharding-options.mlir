// Tests the pass options: a malformed mesh, a rule naming an unknown axis,
// sequence parallelism without tp.
// RUN: not tessel-opt %s -tessel-propagate-sharding="mesh=dp=0" 2>&1 | FileCheck %s --check-prefix=SIZE
// RUN: not tessel-opt %s -tessel-propagate-sharding="mesh=dp=2,dp=2" 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not tessel-opt %s -tessel-propagate-sharding="mesh=dp=2 rules=batch=pp" 2>&1 | FileCheck %s --check-prefix=RULE
// RUN: not tessel-opt %s -tessel-propagate-sharding="mesh=dp=2 sequence-parallel=true" 2>&1 | FileCheck %s --check-prefix=SP
// RUN: tessel-opt %s -tessel-propagate-sharding="mesh=dp=2" | FileCheck %s --check-prefix=DEFAULTS

// SIZE: mesh entry 'dp=0' is not name=size (a name and a positive size)
// TWICE: mesh axis 'dp' is given twice
// RULE: rule 'batch=pp' names unknown mesh axis 'pp'
// SP: sequence parallelism splits the sequence over 'tp', which the mesh lacks
// The default rules name tp; on a mesh without it they are skipped.
// DEFAULTS: nn.sharding = {{\[}}["dp"], []]
func.func @f(%x: tensor<8x16xf32> {nn.input, nn.axes = ["batch", "mlp"]}) -> tensor<f32> {
  %l = nn.reduce_sum %x dims = [0, 1] : tensor<8x16xf32> -> tensor<f32>
  return %l : tensor<f32>
}
