// Tests each output of tessel-compile on a small model: LLVM-dialect MLIR,
// LLVM IR, an object file, a shared object with the model ABI, and the
// report (human and JSON) whose arena equals the description in the .so.
// RUN: tessel-compile %s --emit=mlir -o - | FileCheck %s --check-prefix=MLIR
// RUN: tessel-compile %s --emit=llvm -o - | FileCheck %s --check-prefix=LLVM
// RUN: tessel-compile %s --emit=obj -o %t.o && test -s %t.o
// RUN: tessel-compile %s -o %t.so --report --report-json %t.json | FileCheck %s --check-prefix=REPORT
// RUN: FileCheck %s --check-prefix=JSON --input-file %t.json
// RUN: tessel-compile %s --no-train -o %t.eval.so --report | FileCheck %s --check-prefix=EVAL
// RUN: tessel-run %t.so --steps 2 --quiet --metrics %t.jsonl && FileCheck %s --check-prefix=METRICS --input-file %t.jsonl

// MLIR-LABEL: llvm.func @tessel_fn_loss
// MLIR: llvm.call @tessel_matmul
// MLIR: llvm.call @tessel_cross_entropy
// MLIR-LABEL: llvm.func @tessel_fn_loss_backward
// MLIR: llvm.call @tessel_cross_entropy_with_grad
// MLIR-LABEL: llvm.func @tessel_fn_loss_update
// MLIR: llvm.call @tessel_optimizer_update
// MLIR-LABEL: llvm.func @tessel_forward
// MLIR-LABEL: llvm.func @tessel_backward
// MLIR-LABEL: llvm.func @tessel_update

// LLVM-DAG: define void @tessel_forward(ptr %{{.*}}, ptr %{{.*}})
// LLVM-DAG: define void @tessel_backward(ptr %{{.*}}, ptr %{{.*}})
// LLVM-DAG: define void @tessel_update(ptr %{{.*}}, ptr %{{.*}})
// LLVM-DAG: define {{.*}}ptr @tessel_model_json()
// LLVM-DAG: call void @tessel_matmul(

// Trained (the default, AdamW): w 4·3·4 = 48 -> 64 at 0; its gradient 64
// at 64; m and v 128 at 128; x 2·4·4 = 32 -> 64 at 256, y 8 -> 64 at 320;
// the gradient scale 64 at 384; the loss at 448; scratch 128 at 512 (the
// backward's logits, which the loss's gradient overwrites in place, and
// the weight gradient; the loss is computed in its slot): 640 bytes.
// REPORT: model {{.*}}tessel-compile.mlir (@loss)
// REPORT: flops of @loss 76
// REPORT: arena (one rank) 640 bytes
// REPORT: params 64 bytes at 0
// REPORT: grads 64 bytes at 64
// REPORT: states 128 bytes at 128
// REPORT: inputs 128 bytes at 256
// REPORT: control 64 bytes at 384
// REPORT: outputs 64 bytes at 448
// REPORT: scratch 128 bytes at 512

// JSON: "arena_bytes":640
// JSON-SAME: "entries":{"backward":"tessel_backward","forward":"tessel_forward","update":"tessel_update"}
// JSON-SAME: "train":{{{.*}}"optimizer":"adamw"

// Evaluation only: w at 0, x at 64, y at 128, the loss at 192, scratch
// (z) 64 at 256: 320 bytes.
// EVAL: arena (one rank) 320 bytes
// EVAL: params 64 bytes at 0
// EVAL-NOT: grads
// EVAL: scratch 64 bytes at 256

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
