// Tests each output of tessel-compile on a small model: LLVM-dialect MLIR,
// LLVM IR, an object file, a shared object with the model ABI, and the
// report (human and JSON) whose arena equals the description in the .so.
// RUN: tessel-compile %s --emit=mlir -o - | FileCheck %s --check-prefix=MLIR
// RUN: tessel-compile %s --emit=llvm -o - | FileCheck %s --check-prefix=LLVM
// RUN: tessel-compile %s --emit=obj -o %t.o && test -s %t.o
// RUN: tessel-compile %s -o %t.so --report --report-json %t.json | FileCheck %s --check-prefix=REPORT
// RUN: FileCheck %s --check-prefix=JSON --input-file %t.json
// RUN: tessel-run %t.so --steps 2 --quiet --metrics %t.jsonl && FileCheck %s --check-prefix=METRICS --input-file %t.jsonl

// MLIR-LABEL: llvm.func @tessel_fn_loss
// MLIR: llvm.call @tessel_matmul
// MLIR: llvm.call @tessel_cross_entropy
// MLIR-LABEL: llvm.func @tessel_forward

// LLVM-DAG: define void @tessel_forward(ptr %{{.*}}, ptr %{{.*}})
// LLVM-DAG: define {{.*}}ptr @tessel_model_json()
// LLVM-DAG: call void @tessel_matmul(

// Arena: w 4·3·4 = 48 -> 64 at 0; x 2·4·4 = 32 -> 64 at 64; y 8 -> 64 at
// 128; loss at 192; scratch (z and the loss value) 128 at 256: 384 bytes.
// REPORT: model {{.*}}tessel-compile.mlir (@loss)
// REPORT: flops of @loss 76
// REPORT: arena (one rank) 384 bytes
// REPORT: params 64 bytes at 0
// REPORT: scratch 128 bytes at 256

// JSON: "arena_bytes":384
// JSON-SAME: "flops":{"loss":76}

// METRICS-COUNT-2: "loss":{{[0-9.]+}}

// Flops: matmul 2·2·3·4 = 48, cross-entropy 4·6 + 2·2 = 28; 76 in all.
func.func @loss(%x: tensor<2x4xf32> {nn.input, nn.axes = ["batch", "embed"]},
                %y: tensor<2xi32> {nn.label, nn.axes = ["batch"]},
                %w: tensor<4x3xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.5>, nn.axes = ["embed", "classes"]})
    -> tensor<f32> {
  %z = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %l = nn.cross_entropy %z, %y : (tensor<2x3xf32>, tensor<2xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
