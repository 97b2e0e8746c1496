// RUN: tessel-opt %s -tessel-plan-memory --split-input-file --verify-diagnostics

// Tests that buffers that each fit but are alive together past int64 bytes
// (five of 2^61 at %4) are refused, not placed at wrapped offsets.
// expected-error @+1 {{'func.func' op needs a scratch arena that does not fit in int64 bytes}}
func.func @arena_overflow(%a: tensor<576460752303423488xf32>) -> tensor<576460752303423488xf32> {
  %0 = nn.add %a, %a : tensor<576460752303423488xf32>
  %1 = nn.add %a, %a : tensor<576460752303423488xf32>
  %2 = nn.add %a, %a : tensor<576460752303423488xf32>
  %3 = nn.add %a, %a : tensor<576460752303423488xf32>
  %4 = nn.add %0, %1 : tensor<576460752303423488xf32>
  %5 = nn.add %2, %3 : tensor<576460752303423488xf32>
  %6 = nn.add %4, %5 : tensor<576460752303423488xf32>
  return %6 : tensor<576460752303423488xf32>
}
