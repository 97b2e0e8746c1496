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

def PlanMemoryPass : Pass<"tessel-plan-memory", "mlir::ModuleOp"> {
  let summary = "Give every tensor of every nn function an offset in a static arena";
  let description = [{
    Plans the scratch memory of each function with nn ops: every op result
    gets a byte offset (64-byte aligned) in the function's scratch region,
    reusing space between values whose live ranges do not overlap (greedy
    by size: the largest buffers first, each at the lowest free offset).
    With `report`, each function's peak is printed next to its floor, the
    most bytes alive at one op. A reshape is a view: its result shares
    its operand's buffer, whose live range grows to cover the view's uses.
    An `nn.repeat` reserves a workspace for the whole loop: one buffer per
    carried value plus the layer function's own scratch (layers are planned
    before their callers). Function arguments and results live in memory the
    caller provides and take no scratch.

    Before:
    ```mlir
    func.func @f(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
      %0 = nn.exp %a : tensor<4x8xf32>
      %1 = nn.tanh %0 : tensor<4x8xf32>
      %2 = nn.exp %1 : tensor<4x8xf32>
      return %2 : tensor<4x8xf32>
    }
    ```
    After (%0 is dead when %2 is made, so %2 reuses its bytes):
    ```mlir
    func.func @f(%a: tensor<4x8xf32>) -> tensor<4x8xf32>
        attributes {tessel.scratch_bytes = 256 : i64} {
      %0 = nn.exp %a {tessel.offsets = array<i64: 0>} : tensor<4x8xf32>
      %1 = nn.tanh %0 {tessel.offsets = array<i64: 128>} : tensor<4x8xf32>
      %2 = nn.exp %1 {tessel.offsets = array<i64: 0>} : tensor<4x8xf32>
      return %2 : tensor<4x8xf32>
    }
    ```
  }];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Report each function's scratch peak as a remark">
  ];
  let dependentDialects = ["tessel::nn::NNDialect"];
}

def LowerToRuntimePass : Pass<"tessel-lower-to-runtime", "mlir::ModuleOp"> {
  let summary = "Lower memory-planned nn functions to calls of the runtime C ABI";
  let description = [{
    Runs after `tessel-plan-memory`. Every function with nn ops becomes an
    `llvm.func @tessel_fn_<name>(ctx, scratch, args..., results...)` whose
    tensors are pointers: arguments and results in memory the caller owns,
    every other value at its planned offset in `scratch`. Each nn op becomes
    one call of its runtime kernel (`tessel_matmul`, `tessel_unary`,
    `tessel_strided_copy`, ...), a reshape becomes nothing (a view), and an
    `nn.repeat` becomes an `scf.for` over the layers that calls the layer's
    function on parameter slices, alternating two carried buffers.

    The model function (the one whose arguments carry nn.param, nn.input or
    nn.label) also gets the two symbols of the compiled model's ABI
    (docs/model-abi.md): `tessel_forward(ctx, arena)`, which lays the arena
    out as [params | inputs | outputs | scratch], and `tessel_model_json()`,
    the model's description for the launcher.

    Before:
    ```mlir
    func.func @f(%a: tensor<4x8xf32>) -> tensor<4x8xf32>
        attributes {tessel.scratch_bytes = 128 : i64} {
      %0 = nn.exp %a {tessel.offsets = array<i64: 0>} : tensor<4x8xf32>
      return %0 : tensor<4x8xf32>
    }
    ```
    After:
    ```mlir
    llvm.func @tessel_fn_f(%ctx: !llvm.ptr, %scratch: !llvm.ptr, %a: !llvm.ptr, %out: !llvm.ptr) {
      %0 = llvm.getelementptr %scratch[%c0] : (!llvm.ptr, i64) -> !llvm.ptr, i8
      llvm.call @tessel_unary(%ctx, %exp, %f32, %a, %0, %c32) : (...) -> ()
      llvm.call @tessel_copy(%ctx, %out, %0, %c128) : (...) -> ()
      llvm.return
    }
    ```
  }];
  let options = [
    Option<"sourceName", "source", "std::string", /*default=*/"\"\"",
           "Name of the model's source file, recorded in its description">
  ];
  let dependentDialects = ["mlir::LLVM::LLVMDialect", "mlir::scf::SCFDialect",
                           "mlir::arith::ArithDialect"];
}

#endif // TESSEL_PASSES_PASSES_TD
