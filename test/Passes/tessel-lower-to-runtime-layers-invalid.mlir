// RUN: tessel-opt %s -tessel-plan-memory -tessel-lower-to-runtime --split-input-file --verify-diagnostics

// Tests that a repeat whose layer's per-layer table covers other than its
// layers is refused, naming both counts.
func.func private @local(%q: tensor<1x4x2x8xf32>, %w: tensor<1x4x2x8xf32>) -> tensor<1x4x2x8xf32> {
  %x = nn.mul %q, %w : tensor<1x4x2x8xf32>
  %o = nn.attention %x, %x, %x causal {layer_windows = array<i64: 3, 0, 3>} : (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) -> tensor<1x4x2x8xf32>
  return %o : tensor<1x4x2x8xf32>
}
func.func @layers(%q: tensor<1x4x2x8xf32>, %w: tensor<2x1x4x2x8xf32>) -> tensor<1x4x2x8xf32> {
  // expected-error @+1 {{'nn.repeat' op runs 2 layers, but its layer's 'nn.attention' has per-layer attributes for 3}}
  %0 = nn.repeat @local(%q) params(%w) : (tensor<1x4x2x8xf32>, tensor<2x1x4x2x8xf32>) -> tensor<1x4x2x8xf32>
  return %0 : tensor<1x4x2x8xf32>
}

// -----

// Tests that per-layer attributes outside a repeated layer are refused.
func.func @outside(%q: tensor<1x4x2x8xf32>) -> tensor<1x4x2x8xf32> {
  // expected-error @+1 {{'nn.rope' op has per-layer attributes (layer_windows, layer_thetas) outside a repeated layer: only an nn.repeat's layer function says which layer runs}}
  %r = nn.rope %q {layer_thetas = array<f64: 10000.0, 1000000.0>} : tensor<1x4x2x8xf32>
  return %r : tensor<1x4x2x8xf32>
}
