// RUN: tessel-opt %s -tessel-repeat-kv-heads="mesh=tp=0" -verify-diagnostics

// Tests that a malformed mesh is refused with the mesh parser's reason.
// expected-error @+1 {{tessel-repeat-kv-heads: mesh entry 'tp=0' is not name=size (a name and a positive size)}}
module {
  func.func @f(%q: tensor<1x4x4x8xf32>, %k: tensor<1x4x2x8xf32>) -> tensor<1x4x4x8xf32> {
    %a = nn.attention %q, %k, %k : (tensor<1x4x4x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) -> tensor<1x4x4x8xf32>
    return %a : tensor<1x4x4x8xf32>
  }
}
