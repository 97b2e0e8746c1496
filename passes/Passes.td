//===- Passes.td - every Tessel pass -----------------------*- tablegen -*-===//

#ifndef TESSEL_PASSES_PASSES_TD
#define TESSEL_PASSES_PASSES_TD

include "mlir/Pass/PassBase.td"

def ReportCostPass : Pass<"tessel-report-cost", "mlir::ModuleOp"> {
  let summary = "Report the flops and bytes of every nn op and function";
  let description = [{
    Asks every op for its cost (`CostOpInterface`) and reports it as a remark
    on the op, then the totals of each function as a remark on the function.
    An op with work but no cost model (e.g. a `func.call` that was not
    inlined) is an error: the report would otherwise be silently low.

    Before:
    ```mlir
    func.func @f(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
      %c = nn.matmul %a, %b : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
      return %c : tensor<2x4xf32>
    }
    ```
    Reports (the IR is unchanged):
    ```
    remark: flops 48, bytes 104
    remark: function @f: 1 ops, flops 48, bytes 104
    ```
  }];
  let options = [
    Option<"perOp", "per-op", "bool", /*default=*/"true",
           "Report every op, not only the function totals">
  ];
  let dependentDialects = ["tessel::nn::NNDialect"];
}

#endif // TESSEL_PASSES_PASSES_TD
