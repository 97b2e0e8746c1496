//===- NNAttrs.td - attributes of the nn dialect -----------*- tablegen -*-===//

#ifndef TESSEL_DIALECT_NN_NNATTRS_TD
#define TESSEL_DIALECT_NN_NNATTRS_TD

include "dialect/NN/NNDialect.td"
include "mlir/IR/EnumAttr.td"

//===----------------------------------------------------------------------===//
// Parameter initialisers
//===----------------------------------------------------------------------===//

def NN_InitKind : I32EnumAttr<"InitKind", "parameter initialiser", [
  I32EnumAttrCase<"zeros", 0>,
  I32EnumAttrCase<"ones", 1>,
  I32EnumAttrCase<"constant", 2>,
  I32EnumAttrCase<"normal", 3>,
  I32EnumAttrCase<"truncated_normal", 4>,
  I32EnumAttrCase<"uniform", 5>
]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::tessel::nn";
}

def NN_InitAttr : AttrDef<NN_Dialect, "Init"> {
  let mnemonic = "init";
  let summary = "how a parameter gets its initial value";
  let description = [{
    The initial value of a parameter depends only on the seed, the
    parameter's name and the element's index, never on the mesh.

    | form                                  | values                          |
    | ------------------------------------- | ------------------------------- |
    | `#nn.init<zeros>`                     | 0                               |
    | `#nn.init<ones>`                      | 1                               |
    | `#nn.init<constant, 0.5>`             | the given value                 |
    | `#nn.init<normal, 0.02>`              | N(0, 0.02²)                     |
    | `#nn.init<normal, 0.02, 1.0>`         | N(1.0, 0.02²) (std, then mean)  |
    | `#nn.init<truncated_normal, 0.02>`    | N(0, 0.02²) cut at ±2 std       |
    | `#nn.init<uniform, -0.1, 0.1>`        | U(low, high)                    |
  }];
  let parameters = (ins "InitKind":$kind, "::mlir::DenseF64ArrayAttr":$args);
  let builders = [
    AttrBuilder<(ins "InitKind":$kind, CArg<"::llvm::ArrayRef<double>", "{}">:$args), [{
      return $_get($_ctxt, kind, ::mlir::DenseF64ArrayAttr::get($_ctxt, args));
    }]>
  ];
  let skipDefaultBuilders = 1;
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

//===----------------------------------------------------------------------===//
// Loss reduction
//===----------------------------------------------------------------------===//

def NN_LossReduction : I32EnumAttr<"LossReduction",
    "how a per-example loss is reduced", [
  I32EnumAttrCase<"mean", 0>,
  I32EnumAttrCase<"sum", 1>,
  I32EnumAttrCase<"none", 2>
]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::tessel::nn";
}

def NN_LossReductionAttr : EnumAttr<NN_Dialect, NN_LossReduction, "reduction"> {
  let assemblyFormat = "`<` $value `>`";
}

//===----------------------------------------------------------------------===//
// Optimizers (nn.optimizer_step)
//===----------------------------------------------------------------------===//

// The codes equal the runtime's tessel_optimizer_kind.
def NN_OptimizerKind : I32EnumAttr<"OptimizerKind",
    "the update rule of nn.optimizer_step", [
  I32EnumAttrCase<"sgd", 0>,
  I32EnumAttrCase<"adam", 1>,
  I32EnumAttrCase<"adamw", 2>
]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::tessel::nn";
}

def NN_OptimizerKindAttr : EnumAttr<NN_Dialect, NN_OptimizerKind, "optimizer"> {
  let assemblyFormat = "`<` $value `>`";
}

// The codes equal the runtime's tessel_lr_schedule_kind.
def NN_LrSchedule : I32EnumAttr<"LrSchedule",
    "how the learning rate changes over the steps", [
  I32EnumAttrCase<"constant", 0>,
  I32EnumAttrCase<"warmup_cosine", 1>
]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::tessel::nn";
}

def NN_LrScheduleAttr : EnumAttr<NN_Dialect, NN_LrSchedule, "lr_schedule"> {
  let assemblyFormat = "`<` $value `>`";
}

#endif // TESSEL_DIALECT_NN_NNATTRS_TD
