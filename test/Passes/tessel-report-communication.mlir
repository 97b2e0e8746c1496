// Tests that tessel-report-communication prints, from tessel-opt, the
// communication table of tessel-compile --report: the same figures, read on
// the same description (examples/gpt.mlir: the parameters' 3,337,216 bytes
// all-reduced once over dp, in 6 buckets, plus the loss; with several
// microbatches, the loss per microbatch and the gradients once; see
// test/Tools/tessel-compile-communication.mlir for the analytical counts).
//
// RUN: tessel-opt %examples/gpt.mlir --tessel-pipeline="mesh=dp=2" --tessel-report-communication -o /dev/null | FileCheck %s --check-prefix=DP
// RUN: tessel-compile %examples/gpt.mlir --mesh dp=2 --report -o %t.so | FileCheck %s --check-prefix=DP
// DP: communication per rank (mesh dp=2)
// DP-NEXT: entry     collective      axes         calls            bytes       ring bytes
// DP-NEXT: forward   all_reduce      dp               1                4                4
// DP-NEXT: backward  all_reduce      dp               6          3337220          3337220
// DP-NEXT: backward_no_sync all_reduce      dp               1                4                4
// DP-NEXT: reduce_grads all_reduce      dp               1          3337216          3337216
// DP-NEXT: step (backward+update)                     6          3337220          3337220
// DP-NEXT: step of M > 1 microbatches: M x 4 (backward_no_sync) + 3337216 (reduce_grads+update) bytes
//
// An evaluation on tp=2 counts the forward's collectives as the step:
// RUN: tessel-opt %examples/gpt.mlir --tessel-pipeline="mesh=tp=2 train=false" --tessel-report-communication -o /dev/null | FileCheck %s --check-prefix=EVAL
// EVAL: communication per rank (mesh tp=2)
// EVAL: forward   all_reduce      tp              12          2365440          2365440
// EVAL-NEXT: step (forward)                              12          2365440          2365440
//
// One device communicates nothing, and the pass prints nothing:
// RUN: tessel-opt %examples/mlp.mlir --tessel-pipeline --tessel-report-communication -o /dev/null | count 0
//
// The pass reads the lowered module; anything else is an error:
// RUN: tessel-opt %s --tessel-report-communication --split-input-file --verify-diagnostics

// Tests that a module the lowering has not run on is refused.
// expected-error @+1 {{has no model description (__tessel_model_json); run tessel-lower-to-runtime first}}
module {
  func.func @loss(%x: tensor<4xf32> {nn.input}) -> tensor<f32> {
    %l = nn.reduce_sum %x dims = [0] : tensor<4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
