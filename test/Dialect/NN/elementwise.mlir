// RUN: tessel-opt %s | tessel-opt | FileCheck %s
// RUN: tessel-opt %s --mlir-print-op-generic | tessel-opt | FileCheck %s

// Tests that nn.add round-trips on every element type it allows.
// CHECK-LABEL: func.func @add
func.func @add(%a: tensor<4x8xf32>, %b: tensor<4x8xbf16>, %c: tensor<4x8xf16>,
               %d: tensor<4x8xi32>, %e: tensor<4x8xi64>, %f: tensor<4x8xf64>)
    -> (tensor<4x8xf32>, tensor<4x8xbf16>, tensor<4x8xf16>, tensor<4x8xi32>,
        tensor<4x8xi64>, tensor<4x8xf64>) {
  // CHECK: nn.add %{{.*}}, %{{.*}} : tensor<4x8xf32>
  %0 = nn.add %a, %a : tensor<4x8xf32>
  // CHECK: nn.add %{{.*}}, %{{.*}} : tensor<4x8xbf16>
  %1 = nn.add %b, %b : tensor<4x8xbf16>
  // CHECK: nn.add %{{.*}}, %{{.*}} : tensor<4x8xf16>
  %2 = nn.add %c, %c : tensor<4x8xf16>
  // CHECK: nn.add %{{.*}}, %{{.*}} : tensor<4x8xi32>
  %3 = nn.add %d, %d : tensor<4x8xi32>
  // CHECK: nn.add %{{.*}}, %{{.*}} : tensor<4x8xi64>
  %4 = nn.add %e, %e : tensor<4x8xi64>
  // CHECK: nn.add %{{.*}}, %{{.*}} : tensor<4x8xf64>
  %5 = nn.add %f, %f : tensor<4x8xf64>
  return %0, %1, %2, %3, %4, %5 : tensor<4x8xf32>, tensor<4x8xbf16>, tensor<4x8xf16>,
                                  tensor<4x8xi32>, tensor<4x8xi64>, tensor<4x8xf64>
}

// Tests that nn.add accepts a rank-0 tensor.
// CHECK-LABEL: func.func @add_scalar
func.func @add_scalar(%a: tensor<f32>) -> tensor<f32> {
  // CHECK: nn.add %{{.*}}, %{{.*}} : tensor<f32>
  %0 = nn.add %a, %a : tensor<f32>
  return %0 : tensor<f32>
}

// Tests that nn.sub round-trips on float and integer tensors.
// CHECK-LABEL: func.func @sub
func.func @sub(%a: tensor<16xf32>, %b: tensor<16xbf16>, %c: tensor<16xf16>,
               %d: tensor<16xi32>)
    -> (tensor<16xf32>, tensor<16xbf16>, tensor<16xf16>, tensor<16xi32>) {
  // CHECK: nn.sub %{{.*}}, %{{.*}} : tensor<16xf32>
  %0 = nn.sub %a, %a : tensor<16xf32>
  // CHECK: nn.sub %{{.*}}, %{{.*}} : tensor<16xbf16>
  %1 = nn.sub %b, %b : tensor<16xbf16>
  // CHECK: nn.sub %{{.*}}, %{{.*}} : tensor<16xf16>
  %2 = nn.sub %c, %c : tensor<16xf16>
  // CHECK: nn.sub %{{.*}}, %{{.*}} : tensor<16xi32>
  %3 = nn.sub %d, %d : tensor<16xi32>
  return %0, %1, %2, %3 : tensor<16xf32>, tensor<16xbf16>, tensor<16xf16>, tensor<16xi32>
}

// Tests that nn.mul round-trips on float and integer tensors.
// CHECK-LABEL: func.func @mul
func.func @mul(%a: tensor<2x3x4xf32>, %b: tensor<2x3x4xbf16>, %c: tensor<2x3x4xf16>,
               %d: tensor<2x3x4xi32>)
    -> (tensor<2x3x4xf32>, tensor<2x3x4xbf16>, tensor<2x3x4xf16>, tensor<2x3x4xi32>) {
  // CHECK: nn.mul %{{.*}}, %{{.*}} : tensor<2x3x4xf32>
  %0 = nn.mul %a, %a : tensor<2x3x4xf32>
  // CHECK: nn.mul %{{.*}}, %{{.*}} : tensor<2x3x4xbf16>
  %1 = nn.mul %b, %b : tensor<2x3x4xbf16>
  // CHECK: nn.mul %{{.*}}, %{{.*}} : tensor<2x3x4xf16>
  %2 = nn.mul %c, %c : tensor<2x3x4xf16>
  // CHECK: nn.mul %{{.*}}, %{{.*}} : tensor<2x3x4xi32>
  %3 = nn.mul %d, %d : tensor<2x3x4xi32>
  return %0, %1, %2, %3 : tensor<2x3x4xf32>, tensor<2x3x4xbf16>, tensor<2x3x4xf16>, tensor<2x3x4xi32>
}

// Tests that nn.div round-trips on float and integer tensors.
// CHECK-LABEL: func.func @div
func.func @div(%a: tensor<8x8xf32>, %b: tensor<8x8xbf16>, %c: tensor<8x8xf16>,
               %d: tensor<8x8xi32>)
    -> (tensor<8x8xf32>, tensor<8x8xbf16>, tensor<8x8xf16>, tensor<8x8xi32>) {
  // CHECK: nn.div %{{.*}}, %{{.*}} : tensor<8x8xf32>
  %0 = nn.div %a, %a : tensor<8x8xf32>
  // CHECK: nn.div %{{.*}}, %{{.*}} : tensor<8x8xbf16>
  %1 = nn.div %b, %b : tensor<8x8xbf16>
  // CHECK: nn.div %{{.*}}, %{{.*}} : tensor<8x8xf16>
  %2 = nn.div %c, %c : tensor<8x8xf16>
  // CHECK: nn.div %{{.*}}, %{{.*}} : tensor<8x8xi32>
  %3 = nn.div %d, %d : tensor<8x8xi32>
  return %0, %1, %2, %3 : tensor<8x8xf32>, tensor<8x8xbf16>, tensor<8x8xf16>, tensor<8x8xi32>
}

// Tests that nn.neg round-trips on every float type.
// CHECK-LABEL: func.func @neg
func.func @neg(%a: tensor<8xf32>, %b: tensor<8xbf16>, %c: tensor<8xf16>)
    -> (tensor<8xf32>, tensor<8xbf16>, tensor<8xf16>) {
  // CHECK: nn.neg %{{.*}} : tensor<8xf32>
  %0 = nn.neg %a : tensor<8xf32>
  // CHECK: nn.neg %{{.*}} : tensor<8xbf16>
  %1 = nn.neg %b : tensor<8xbf16>
  // CHECK: nn.neg %{{.*}} : tensor<8xf16>
  %2 = nn.neg %c : tensor<8xf16>
  return %0, %1, %2 : tensor<8xf32>, tensor<8xbf16>, tensor<8xf16>
}

// Tests that nn.exp round-trips on every float type.
// CHECK-LABEL: func.func @exp
func.func @exp(%a: tensor<8xf32>, %b: tensor<8xbf16>, %c: tensor<8xf16>, %d: tensor<8xf64>)
    -> (tensor<8xf32>, tensor<8xbf16>, tensor<8xf16>, tensor<8xf64>) {
  // CHECK: nn.exp %{{.*}} : tensor<8xf32>
  %0 = nn.exp %a : tensor<8xf32>
  // CHECK: nn.exp %{{.*}} : tensor<8xbf16>
  %1 = nn.exp %b : tensor<8xbf16>
  // CHECK: nn.exp %{{.*}} : tensor<8xf16>
  %2 = nn.exp %c : tensor<8xf16>
  // CHECK: nn.exp %{{.*}} : tensor<8xf64>
  %3 = nn.exp %d : tensor<8xf64>
  return %0, %1, %2, %3 : tensor<8xf32>, tensor<8xbf16>, tensor<8xf16>, tensor<8xf64>
}

// Tests that nn.log round-trips on every float type.
// CHECK-LABEL: func.func @log
func.func @log(%a: tensor<8xf32>, %b: tensor<8xbf16>, %c: tensor<8xf16>)
    -> (tensor<8xf32>, tensor<8xbf16>, tensor<8xf16>) {
  // CHECK: nn.log %{{.*}} : tensor<8xf32>
  %0 = nn.log %a : tensor<8xf32>
  // CHECK: nn.log %{{.*}} : tensor<8xbf16>
  %1 = nn.log %b : tensor<8xbf16>
  // CHECK: nn.log %{{.*}} : tensor<8xf16>
  %2 = nn.log %c : tensor<8xf16>
  return %0, %1, %2 : tensor<8xf32>, tensor<8xbf16>, tensor<8xf16>
}

// Tests that nn.sqrt round-trips on every float type.
// CHECK-LABEL: func.func @sqrt
func.func @sqrt(%a: tensor<8xf32>, %b: tensor<8xbf16>, %c: tensor<8xf16>)
    -> (tensor<8xf32>, tensor<8xbf16>, tensor<8xf16>) {
  // CHECK: nn.sqrt %{{.*}} : tensor<8xf32>
  %0 = nn.sqrt %a : tensor<8xf32>
  // CHECK: nn.sqrt %{{.*}} : tensor<8xbf16>
  %1 = nn.sqrt %b : tensor<8xbf16>
  // CHECK: nn.sqrt %{{.*}} : tensor<8xf16>
  %2 = nn.sqrt %c : tensor<8xf16>
  return %0, %1, %2 : tensor<8xf32>, tensor<8xbf16>, tensor<8xf16>
}

// Tests that nn.rsqrt round-trips on every float type.
// CHECK-LABEL: func.func @rsqrt
func.func @rsqrt(%a: tensor<8xf32>, %b: tensor<8xbf16>, %c: tensor<8xf16>)
    -> (tensor<8xf32>, tensor<8xbf16>, tensor<8xf16>) {
  // CHECK: nn.rsqrt %{{.*}} : tensor<8xf32>
  %0 = nn.rsqrt %a : tensor<8xf32>
  // CHECK: nn.rsqrt %{{.*}} : tensor<8xbf16>
  %1 = nn.rsqrt %b : tensor<8xbf16>
  // CHECK: nn.rsqrt %{{.*}} : tensor<8xf16>
  %2 = nn.rsqrt %c : tensor<8xf16>
  return %0, %1, %2 : tensor<8xf32>, tensor<8xbf16>, tensor<8xf16>
}

// Tests that nn.tanh round-trips on every float type.
// CHECK-LABEL: func.func @tanh
func.func @tanh(%a: tensor<8xf32>, %b: tensor<8xbf16>, %c: tensor<8xf16>)
    -> (tensor<8xf32>, tensor<8xbf16>, tensor<8xf16>) {
  // CHECK: nn.tanh %{{.*}} : tensor<8xf32>
  %0 = nn.tanh %a : tensor<8xf32>
  // CHECK: nn.tanh %{{.*}} : tensor<8xbf16>
  %1 = nn.tanh %b : tensor<8xbf16>
  // CHECK: nn.tanh %{{.*}} : tensor<8xf16>
  %2 = nn.tanh %c : tensor<8xf16>
  return %0, %1, %2 : tensor<8xf32>, tensor<8xbf16>, tensor<8xf16>
}

// Tests that nn.sigmoid round-trips on every float type.
// CHECK-LABEL: func.func @sigmoid
func.func @sigmoid(%a: tensor<8xf32>, %b: tensor<8xbf16>, %c: tensor<8xf16>)
    -> (tensor<8xf32>, tensor<8xbf16>, tensor<8xf16>) {
  // CHECK: nn.sigmoid %{{.*}} : tensor<8xf32>
  %0 = nn.sigmoid %a : tensor<8xf32>
  // CHECK: nn.sigmoid %{{.*}} : tensor<8xbf16>
  %1 = nn.sigmoid %b : tensor<8xbf16>
  // CHECK: nn.sigmoid %{{.*}} : tensor<8xf16>
  %2 = nn.sigmoid %c : tensor<8xf16>
  return %0, %1, %2 : tensor<8xf32>, tensor<8xbf16>, tensor<8xf16>
}

// Tests that nn.relu round-trips on every float type.
// CHECK-LABEL: func.func @relu
func.func @relu(%a: tensor<8xf32>, %b: tensor<8xbf16>, %c: tensor<8xf16>)
    -> (tensor<8xf32>, tensor<8xbf16>, tensor<8xf16>) {
  // CHECK: nn.relu %{{.*}} : tensor<8xf32>
  %0 = nn.relu %a : tensor<8xf32>
  // CHECK: nn.relu %{{.*}} : tensor<8xbf16>
  %1 = nn.relu %b : tensor<8xbf16>
  // CHECK: nn.relu %{{.*}} : tensor<8xf16>
  %2 = nn.relu %c : tensor<8xf16>
  return %0, %1, %2 : tensor<8xf32>, tensor<8xbf16>, tensor<8xf16>
}

// Tests that nn.gelu without `approximate` prints no keyword.
// CHECK-LABEL: func.func @gelu_exact
func.func @gelu_exact(%a: tensor<4x8xf32>, %b: tensor<4x8xbf16>, %c: tensor<4x8xf16>)
    -> (tensor<4x8xf32>, tensor<4x8xbf16>, tensor<4x8xf16>) {
  // CHECK: nn.gelu %{{[^ ]*}} : tensor<4x8xf32>
  %0 = nn.gelu %a : tensor<4x8xf32>
  // CHECK: nn.gelu %{{[^ ]*}} : tensor<4x8xbf16>
  %1 = nn.gelu %b : tensor<4x8xbf16>
  // CHECK: nn.gelu %{{[^ ]*}} : tensor<4x8xf16>
  %2 = nn.gelu %c : tensor<4x8xf16>
  return %0, %1, %2 : tensor<4x8xf32>, tensor<4x8xbf16>, tensor<4x8xf16>
}

// Tests that nn.gelu keeps the `approximate` (tanh) flag.
// CHECK-LABEL: func.func @gelu_approximate
func.func @gelu_approximate(%a: tensor<4x8xf32>, %b: tensor<4x8xbf16>, %c: tensor<4x8xf16>)
    -> (tensor<4x8xf32>, tensor<4x8xbf16>, tensor<4x8xf16>) {
  // CHECK: nn.gelu %{{.*}} approximate : tensor<4x8xf32>
  %0 = nn.gelu %a approximate : tensor<4x8xf32>
  // CHECK: nn.gelu %{{.*}} approximate : tensor<4x8xbf16>
  %1 = nn.gelu %b approximate : tensor<4x8xbf16>
  // CHECK: nn.gelu %{{.*}} approximate : tensor<4x8xf16>
  %2 = nn.gelu %c approximate : tensor<4x8xf16>
  return %0, %1, %2 : tensor<4x8xf32>, tensor<4x8xbf16>, tensor<4x8xf16>
}

// Tests that nn.silu round-trips on every float type.
// CHECK-LABEL: func.func @silu
func.func @silu(%a: tensor<8xf32>, %b: tensor<8xbf16>, %c: tensor<8xf16>)
    -> (tensor<8xf32>, tensor<8xbf16>, tensor<8xf16>) {
  // CHECK: nn.silu %{{.*}} : tensor<8xf32>
  %0 = nn.silu %a : tensor<8xf32>
  // CHECK: nn.silu %{{.*}} : tensor<8xbf16>
  %1 = nn.silu %b : tensor<8xbf16>
  // CHECK: nn.silu %{{.*}} : tensor<8xf16>
  %2 = nn.silu %c : tensor<8xf16>
  return %0, %1, %2 : tensor<8xf32>, tensor<8xbf16>, tensor<8xf16>
}

// Tests that nn.cast converts between float widths and between ints and floats.
// CHECK-LABEL: func.func @cast
func.func @cast(%a: tensor<4x8xf32>, %b: tensor<4x8xbf16>, %c: tensor<4x8xi32>)
    -> (tensor<4x8xbf16>, tensor<4x8xf16>, tensor<4x8xf32>, tensor<4x8xf32>,
        tensor<4x8xi32>, tensor<4x8xi64>, tensor<4x8xf64>) {
  // CHECK: nn.cast %{{.*}} : tensor<4x8xf32> to tensor<4x8xbf16>
  %0 = nn.cast %a : tensor<4x8xf32> to tensor<4x8xbf16>
  // CHECK: nn.cast %{{.*}} : tensor<4x8xf32> to tensor<4x8xf16>
  %1 = nn.cast %a : tensor<4x8xf32> to tensor<4x8xf16>
  // CHECK: nn.cast %{{.*}} : tensor<4x8xbf16> to tensor<4x8xf32>
  %2 = nn.cast %b : tensor<4x8xbf16> to tensor<4x8xf32>
  // CHECK: nn.cast %{{.*}} : tensor<4x8xi32> to tensor<4x8xf32>
  %3 = nn.cast %c : tensor<4x8xi32> to tensor<4x8xf32>
  // CHECK: nn.cast %{{.*}} : tensor<4x8xf32> to tensor<4x8xi32>
  %4 = nn.cast %a : tensor<4x8xf32> to tensor<4x8xi32>
  // CHECK: nn.cast %{{.*}} : tensor<4x8xi32> to tensor<4x8xi64>
  %5 = nn.cast %c : tensor<4x8xi32> to tensor<4x8xi64>
  // CHECK: nn.cast %{{.*}} : tensor<4x8xbf16> to tensor<4x8xf64>
  %6 = nn.cast %b : tensor<4x8xbf16> to tensor<4x8xf64>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<4x8xbf16>, tensor<4x8xf16>, tensor<4x8xf32>,
                                      tensor<4x8xf32>, tensor<4x8xi32>, tensor<4x8xi64>, tensor<4x8xf64>
}

// Tests that nn.cast to the same type is accepted (it folds away later).
// CHECK-LABEL: func.func @cast_same_type
func.func @cast_same_type(%a: tensor<4xf16>) -> tensor<4xf16> {
  // CHECK: nn.cast %{{.*}} : tensor<4xf16> to tensor<4xf16>
  %0 = nn.cast %a : tensor<4xf16> to tensor<4xf16>
  return %0 : tensor<4xf16>
}

// Tests that nn.dropout keeps its rate and seed on every float type.
// CHECK-LABEL: func.func @dropout
func.func @dropout(%a: tensor<32x64xf32>, %b: tensor<32x64xbf16>, %c: tensor<32x64xf16>)
    -> (tensor<32x64xf32>, tensor<32x64xbf16>, tensor<32x64xf16>) {
  // CHECK: nn.dropout %{{.*}} rate = 1.000000e-01 seed = 7 : tensor<32x64xf32>
  %0 = nn.dropout %a rate = 0.1 seed = 7 : tensor<32x64xf32>
  // CHECK: nn.dropout %{{.*}} rate = 5.000000e-01 seed = 0 : tensor<32x64xbf16>
  %1 = nn.dropout %b rate = 0.5 seed = 0 : tensor<32x64xbf16>
  // CHECK: nn.dropout %{{.*}} rate = 7.500000e-01 seed = -3 : tensor<32x64xf16>
  %2 = nn.dropout %c rate = 0.75 seed = -3 : tensor<32x64xf16>
  return %0, %1, %2 : tensor<32x64xf32>, tensor<32x64xbf16>, tensor<32x64xf16>
}

// Tests that nn.dropout accepts rate 0, the lower bound.
// CHECK-LABEL: func.func @dropout_rate_zero
func.func @dropout_rate_zero(%a: tensor<8xf32>) -> tensor<8xf32> {
  // CHECK: nn.dropout %{{.*}} rate = 0.000000e+00 seed = 42 : tensor<8xf32>
  %0 = nn.dropout %a rate = 0.0 seed = 42 : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// Tests that nn.constant holds splat and dense values of every element type.
// CHECK-LABEL: func.func @constant
func.func @constant() -> (tensor<4x8xf32>, tensor<2xbf16>, tensor<2x2xf16>, tensor<3xi32>,
                          tensor<i64>, tensor<2xf64>) {
  // CHECK: nn.constant dense<0.000000e+00> : tensor<4x8xf32>
  %0 = nn.constant dense<0.0> : tensor<4x8xf32>
  // CHECK: nn.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xbf16>
  %1 = nn.constant dense<[1.0, 2.0]> : tensor<2xbf16>
  // CHECK: nn.constant dense<{{\[}}[1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf16>
  %2 = nn.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf16>
  // CHECK: nn.constant dense<[1, -2, 3]> : tensor<3xi32>
  %3 = nn.constant dense<[1, -2, 3]> : tensor<3xi32>
  // CHECK: nn.constant dense<7> : tensor<i64>
  %4 = nn.constant dense<7> : tensor<i64>
  // CHECK: nn.constant dense<[5.000000e-01, 2.500000e-01]> : tensor<2xf64>
  %5 = nn.constant dense<[0.5, 0.25]> : tensor<2xf64>
  return %0, %1, %2, %3, %4, %5 : tensor<4x8xf32>, tensor<2xbf16>, tensor<2x2xf16>, tensor<3xi32>,
                                  tensor<i64>, tensor<2xf64>
}

// Tests that elementwise ops chain: a GELU MLP-style body with a bias add.
// CHECK-LABEL: func.func @chain
func.func @chain(%x: tensor<2x4xbf16>, %b: tensor<2x4xbf16>) -> tensor<2x4xf32> {
  // CHECK: %[[ADD:.*]] = nn.add %{{.*}}, %{{.*}} : tensor<2x4xbf16>
  %0 = nn.add %x, %b : tensor<2x4xbf16>
  // CHECK: %[[GELU:.*]] = nn.gelu %[[ADD]] approximate : tensor<2x4xbf16>
  %1 = nn.gelu %0 approximate : tensor<2x4xbf16>
  // CHECK: %[[CAST:.*]] = nn.cast %[[GELU]] : tensor<2x4xbf16> to tensor<2x4xf32>
  %2 = nn.cast %1 : tensor<2x4xbf16> to tensor<2x4xf32>
  // CHECK: return %[[CAST]]
  return %2 : tensor<2x4xf32>
}
