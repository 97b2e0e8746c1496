// RUN: tessel-opt %s -tessel-fuse-logit-softcap --split-input-file --verify-diagnostics

// Tests that a loss's logit soft cap is finite and positive.
func.func @zero(%z: tensor<2x6xf32>, %y: tensor<2xi32>) -> tensor<f32> {
  // expected-error @+1 {{'nn.cross_entropy' op logit_softcap 0.000000e+00 must be finite and positive}}
  %l = nn.cross_entropy %z, %y {logit_softcap = 0.0 : f64} : (tensor<2x6xf32>, tensor<2xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

func.func @grad(%z: tensor<2x6xf32>, %y: tensor<2xi32>, %d: tensor<f32>) -> tensor<2x6xf32> {
  // expected-error @+1 {{'nn.cross_entropy_grad' op logit_softcap -3.000000e+00 must be finite and positive}}
  %g = nn.cross_entropy_grad %z, %y, %d {logit_softcap = -3.0 : f64} : (tensor<2x6xf32>, tensor<2xi32>, tensor<f32>) -> tensor<2x6xf32>
  return %g : tensor<2x6xf32>
}

// -----

func.func @fused(%z: tensor<2x6xf32>, %y: tensor<2xi32>, %d: tensor<f32>) -> (tensor<f32>, tensor<2x6xf32>) {
  // expected-error @+1 {{'nn.cross_entropy_with_grad' op logit_softcap INF must be finite and positive}}
  %l, %g = nn.cross_entropy_with_grad %z, %y, %d {logit_softcap = 0x7FF0000000000000 : f64} : (tensor<2x6xf32>, tensor<2xi32>, tensor<f32>) -> (tensor<f32>, tensor<2x6xf32>)
  return %l, %g : tensor<f32>, tensor<2x6xf32>
}
