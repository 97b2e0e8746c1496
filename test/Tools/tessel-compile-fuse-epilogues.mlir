// RUN: tessel-compile %examples/mlp.mlir --report -o %t.mlp.so | FileCheck %s --check-prefix=FUSED
// RUN: tessel-compile %examples/mlp.mlir --no-fuse-epilogues --report -o %t.mlp-unfused.so | FileCheck %s --check-prefix=UNFUSED
// RUN: tessel-compile %examples/mlp.mlir --emit=mlir -o - | FileCheck %s --check-prefix=FUSED-IR
// RUN: tessel-compile %examples/mlp.mlir --no-fuse-epilogues --emit=mlir -o - | FileCheck %s --check-prefix=UNFUSED-IR
// RUN: tessel-run %t.mlp.so --steps 4 --microbatches 4 --quiet --save %t.mlp.safetensors
// RUN: tessel-run %t.mlp-unfused.so --steps 4 --microbatches 4 --quiet --save %t.mlp-unfused.safetensors
// RUN: python3 %S/Inputs/compare_safetensors.py %t.mlp.safetensors %t.mlp-unfused.safetensors | FileCheck %s --check-prefix=SAME
// RUN: tessel-compile %examples/gpt.mlir --emit=mlir -o - | FileCheck %s --check-prefix=NORM-IR
// RUN: tessel-compile %examples/gpt.mlir --no-fuse-residual-norms --emit=mlir -o - | FileCheck %s --check-prefix=NORM-OFF-IR
// RUN: tessel-compile %examples/gpt.mlir --mesh dp=2,tp=2 -o %t.gpt.so
// RUN: tessel-compile %examples/gpt.mlir --mesh dp=2,tp=2 --no-fuse-epilogues -o %t.gpt-unfused.so
// RUN: tessel-run %t.gpt.so --steps 3 --quiet --save %t.gpt.safetensors
// RUN: tessel-run %t.gpt-unfused.so --steps 3 --quiet --save %t.gpt-unfused.safetensors
// RUN: python3 %S/Inputs/compare_safetensors.py %t.gpt.safetensors %t.gpt-unfused.safetensors | FileCheck %s --check-prefix=SAME
// RUN: tessel-compile %examples/gpt.mlir --precision bf16 --grad-precision bf16 -o %t.bf16.so
// RUN: tessel-compile %examples/gpt.mlir --precision bf16 --grad-precision bf16 --no-fuse-epilogues -o %t.bf16-unfused.so
// RUN: tessel-run %t.bf16.so --steps 3 --quiet --save %t.bf16.safetensors
// RUN: tessel-run %t.bf16-unfused.so --steps 3 --quiet --save %t.bf16-unfused.safetensors
// RUN: python3 %S/Inputs/compare_safetensors.py %t.bf16.safetensors %t.bf16-unfused.safetensors | FileCheck %s --check-prefix=SAME
// RUN: tessel-compile %examples/gpt.mlir --precision bf16 --grad-precision bf16 --mesh tp=2 --emit=mlir -o - | FileCheck %s --check-prefix=VOCAB-IR
// RUN: tessel-compile %examples/gpt.mlir --precision bf16 --grad-precision bf16 --mesh tp=2 -o %t.tp-bf16.so
// RUN: tessel-compile %examples/gpt.mlir --precision bf16 --grad-precision bf16 --mesh tp=2 --no-fuse-epilogues -o %t.tp-bf16-unfused.so
// RUN: tessel-run %t.tp-bf16.so --steps 3 --quiet --save %t.tp-bf16.safetensors
// RUN: tessel-run %t.tp-bf16-unfused.so --steps 3 --quiet --save %t.tp-bf16-unfused.safetensors
// RUN: python3 %S/Inputs/compare_safetensors.py %t.tp-bf16.safetensors %t.tp-bf16-unfused.safetensors | FileCheck %s --check-prefix=SAME
// RUN: tessel-compile %examples/gpt.mlir --mesh pp=2 --microbatches 4 -o %t.pp.so
// RUN: tessel-compile %examples/gpt.mlir --mesh pp=2 --microbatches 4 --no-fuse-epilogues -o %t.pp-unfused.so
// RUN: tessel-run %t.pp.so --steps 4 --quiet --save %t.pp.safetensors
// RUN: tessel-run %t.pp-unfused.so --steps 4 --quiet --save %t.pp-unfused.safetensors
// RUN: python3 %S/Inputs/compare_safetensors.py %t.pp.safetensors %t.pp-unfused.safetensors 1e-5 | FileCheck %s --check-prefix=CLOSE
// RUN: tessel-compile %examples/gpt.mlir --mesh dp=2 --zero 3 --emit=mlir -o %t.z3.mlir
// RUN: FileCheck %s --check-prefix=BGRAD-IR --input-file %t.z3.mlir
// RUN: tessel-compile %examples/gpt.mlir --mesh dp=2 --zero 3 -o %t.z3.so
// RUN: tessel-compile %examples/gpt.mlir --mesh dp=2 --zero 3 --no-fuse-epilogues -o %t.z3-unfused.so
// RUN: tessel-run %t.z3.so --steps 3 --quiet --save %t.z3.safetensors
// RUN: tessel-run %t.z3-unfused.so --steps 3 --quiet --save %t.z3-unfused.safetensors
// RUN: python3 %S/Inputs/compare_safetensors.py %t.z3.safetensors %t.z3-unfused.safetensors | FileCheck %s --check-prefix=SAME

// Tests that tessel-fuse-epilogues (on by default) folds mlp's weight
// gradients into accumulating GEMMs and its linear layers' bias adds into
// the GEMM: the 784x1024 and 1024x10 product buffers go from the arena
// (16,513,600 -> 13,520,704 bytes), and training computes the same
// parameters bit for bit, with 4 microbatches accumulating into each
// gradient too. gpt on dp=2,tp=2 (bias adds in every layer) trains to the
// same parameters, and so does gpt in bf16 (the CPU rounds the product
// and each add as the unfused ops do). With a pipeline's microbatches the accumulating GEMM
// may add in another order than a product and an add (OpenBLAS's kernels
// for beta = 1 are not those for beta = 0): within f32 rounding.
// FUSED: arena (one rank) 13520704 bytes
// UNFUSED: arena (one rank) 16513600 bytes
// The forward's two linear layers; the backward recomputes them, takes
// the input gradient of the second with a plain matmul (nothing is added
// to it) and accumulates both weight gradients.
// FUSED-IR-LABEL: llvm.func @tessel_fn_loss(
// FUSED-IR-COUNT-2: llvm.call @tessel_matmul_epilogue
// FUSED-IR-NOT: llvm.call @tessel_matmul
// FUSED-IR-LABEL: llvm.func @tessel_fn_loss_backward(
// FUSED-IR-COUNT-2: llvm.call @tessel_matmul_epilogue
// FUSED-IR: llvm.call @tessel_matmul(
// FUSED-IR-COUNT-2: llvm.call @tessel_matmul_epilogue
// FUSED-IR-NOT: llvm.call @tessel_matmul
// FUSED-IR-LABEL: llvm.func @tessel_fn_loss_update(
// UNFUSED-IR-NOT: llvm.call @tessel_matmul_epilogue
// gpt's block: the attention's residual add and the second norm are one
// pass (the first norm reads the block's input, the last layer's sum goes
// on to the final norm through nn.repeat); in the backward, both norms'
// input gradients are added to the residual stream's as they are written.
// NORM-IR-LABEL: llvm.func @tessel_fn_block(
// NORM-IR: llvm.call @tessel_layer_norm(
// NORM-IR: llvm.call @tessel_add_layer_norm(
// NORM-IR-LABEL: llvm.func @tessel_fn_block_keep(
// NORM-IR: llvm.call @tessel_add_layer_norm(
// NORM-IR-LABEL: llvm.func @tessel_fn_block_derivative(
// NORM-IR-COUNT-2: llvm.call @tessel_layer_norm_grad_add(
// NORM-IR-NOT: llvm.call @tessel_layer_norm_grad_add(
// NORM-IR-LABEL: llvm.func @tessel_fn_loss_backward(
// NORM-IR-NOT: llvm.call @tessel_add_layer_norm(
// NORM-IR: llvm.call @tessel_layer_norm_grad(
// NORM-OFF-IR-NOT: @tessel_add_layer_norm(
// NORM-OFF-IR-NOT: @tessel_layer_norm_grad_add(
// gpt's MLP fuses its tanh GELU (epilogue 2) and its gradient (3), and
// its layer's weight gradients also sum their bias gradients (4,
// tessel-fuse-bias-grads). Trained with ZeRO-3, the same parameters bit
// for bit.
// BGRAD-IR-DAG: llvm.mlir.constant(2 : i32)
// BGRAD-IR-DAG: llvm.mlir.constant(3 : i32)
// BGRAD-IR-DAG: llvm.mlir.constant(4 : i32)
// BGRAD-IR: llvm.call @tessel_matmul_epilogue_aux
// gpt in bf16 on tp=2: the vocabulary-parallel loss reads each rank's
// bf16 block of the logits with f32 statistics and writes its bf16
// gradient (no f32 block, no casts; ABI 30), the same parameters bit for
// bit as the widened block it replaces.
// VOCAB-IR-LABEL: llvm.func @tessel_fn_loss(
// VOCAB-IR: llvm.call @tessel_vocab_loss_stats_f32(
// VOCAB-IR-LABEL: llvm.func @tessel_fn_loss_backward(
// VOCAB-IR-NOT: llvm.call @tessel_cast(
// VOCAB-IR: llvm.call @tessel_vocab_loss_stats_f32(
// VOCAB-IR-NOT: llvm.call @tessel_cast(
// VOCAB-IR: llvm.call @tessel_vocab_loss_grad_f32(
// SAME: identical
// CLOSE: 60 tensors, largest difference {{.*}}, {{identical|within 1e-5}}
