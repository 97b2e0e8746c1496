// RUN: tessel-opt %s | tessel-opt | FileCheck %s
// RUN: tessel-opt %s --mlir-print-op-generic | tessel-opt | FileCheck %s

// Tests that rope's default theta (10000) is elided, that the pair
// layout and the direction print as keywords, Llama 3.1's scaling, YaRN,
// and a partial rope with LongRoPE's factors.
// CHECK-LABEL: func.func @rope_forms
// CHECK: nn.rope %{{.*}} : tensor<2x16x4x8xf32>
// CHECK: nn.rope %{{.*}} {theta = 5.000000e+05 : f64} : tensor<2x16x4x8xbf16>
// CHECK: nn.rope %{{.*}} interleaved inverse : tensor<2x16x4x8xf32>
// CHECK: nn.rope %{{.*}} : tensor<16x4x8xf64>
// CHECK: nn.rope %{{.*}} : tensor<2x3x16x4x8xf16>
// CHECK: nn.rope %{{.*}} {scaling = array<f64: 3.200000e+01, 1.000000e+00, 4.000000e+00, 8.192000e+03>, theta = 5.000000e+05 : f64} : tensor<2x16x4x8xf32>
// CHECK: nn.rope %{{.*}} {theta = 1.000000e+06 : f64, yarn = array<f64: 4.000000e+00, 3.200000e+01, 1.000000e+00, 3.276800e+04, 1.000000e+00>} : tensor<2x16x4x8xf32>
// CHECK: nn.rope %{{.*}} inverse {attention_factor = 1.190000e+00 : f64, longrope = array<f64: 1.000000e+00, 1.500000e+00>, rotary_dim = 4 : i64} : tensor<2x16x4x8xf32>
// CHECK: nn.rope %{{.*}} {longrope = array<f64: 1.000000e+00, 1.250000e+00, 1.500000e+00, 2.000000e+00>} : tensor<2x16x4x8xf32>
func.func @rope_forms(%x: tensor<2x16x4x8xf32>, %b: tensor<2x16x4x8xbf16>,
                      %s: tensor<16x4x8xf64>, %h: tensor<2x3x16x4x8xf16>)
    -> (tensor<2x16x4x8xf32>, tensor<2x16x4x8xbf16>, tensor<2x16x4x8xf32>,
        tensor<16x4x8xf64>, tensor<2x3x16x4x8xf16>, tensor<2x16x4x8xf32>,
        tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>) {
  %0 = nn.rope %x {theta = 10000.0 : f64} : tensor<2x16x4x8xf32>
  %1 = nn.rope %b {theta = 500000.0 : f64} : tensor<2x16x4x8xbf16>
  %2 = nn.rope %x interleaved inverse : tensor<2x16x4x8xf32>
  %3 = nn.rope %s : tensor<16x4x8xf64>
  %4 = nn.rope %h : tensor<2x3x16x4x8xf16>
  %5 = nn.rope %x {theta = 500000.0 : f64, scaling = array<f64: 32.0, 1.0, 4.0, 8192.0>} : tensor<2x16x4x8xf32>
  %6 = nn.rope %x {theta = 1000000.0 : f64, yarn = array<f64: 4.0, 32.0, 1.0, 32768.0, 1.0>} : tensor<2x16x4x8xf32>
  %7 = nn.rope %x inverse {rotary_dim = 4 : i64, longrope = array<f64: 1.0, 1.5>, attention_factor = 1.19 : f64} : tensor<2x16x4x8xf32>
  %8 = nn.rope %x {longrope = array<f64: 1.0, 1.25, 1.5, 2.0>} : tensor<2x16x4x8xf32>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8 : tensor<2x16x4x8xf32>, tensor<2x16x4x8xbf16>,
      tensor<2x16x4x8xf32>, tensor<16x4x8xf64>, tensor<2x3x16x4x8xf16>,
      tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>,
      tensor<2x16x4x8xf32>
}
