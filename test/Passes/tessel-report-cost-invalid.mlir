// RUN: tessel-opt %s -tessel-report-cost --split-input-file --verify-diagnostics

// Tests that a func.call that was not inlined is an error rather than a silently low report.
func.func private @helper(tensor<4xf32>) -> tensor<4xf32>
func.func @call_not_inlined(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'func.call' op has no cost model; inline calls (-inline) and express the model in nn ops before costing it}}
  %0 = func.call @helper(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that ops costed before the uncosted one are still reported, but the function gets no totals.
func.func private @helper(tensor<4xf32>) -> tensor<4xf32>
func.func @call_after_nn_op(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-remark @+1 {{flops 4, bytes 32}}
  %0 = nn.exp %a : tensor<4xf32>
  // expected-error @+1 {{'func.call' op has no cost model; inline calls (-inline) and express the model in nn ops before costing it}}
  %1 = func.call @helper(%0) : (tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// Tests that an op of another dialect with work but no cost model is an error too.
func.func @tensor_op_without_cost(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'tensor.empty' op has no cost model; inline calls (-inline) and express the model in nn ops before costing it}}
  %0 = tensor.empty() : tensor<4xf32>
  %1 = nn.add %a, %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// Tests that the error stops the report: the function after the failing one is not costed.
func.func private @helper(tensor<4xf32>) -> tensor<4xf32>
func.func @first(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'func.call' op has no cost model; inline calls (-inline) and express the model in nn ops before costing it}}
  %0 = func.call @helper(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func @second(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = nn.exp %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that a function whose ops' flops fit (2^62 each) but whose total
// (2^63) does not is an error, not a negative total.
// expected-error @+1 {{'func.func' op flops or bytes of @flops_sum_overflow do not fit in int64}}
func.func @flops_sum_overflow(%a: tensor<1048576x2097152xf32>, %b: tensor<2097152x1048576xf32>) -> tensor<1048576x1048576xf32> {
  // expected-remark @+1 {{flops 4611686018427387904}}
  %0 = nn.matmul %a, %b : (tensor<1048576x2097152xf32>, tensor<2097152x1048576xf32>) -> tensor<1048576x1048576xf32>
  // expected-remark @+1 {{flops 4611686018427387904}}
  %1 = nn.matmul %a, %b : (tensor<1048576x2097152xf32>, tensor<2097152x1048576xf32>) -> tensor<1048576x1048576xf32>
  // expected-remark @+1 {{flops 1099511627776}}
  %2 = nn.add %0, %1 : tensor<1048576x1048576xf32>
  return %2 : tensor<1048576x1048576xf32>
}
