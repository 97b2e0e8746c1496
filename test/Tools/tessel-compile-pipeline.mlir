// Tests tessel-compile's pipeline flags and report on a model whose stages
// cost exactly the same (the layers carry the loss, so nothing comes before
// or after them: stage s forwards 1,154 flops and backwards 3,588 per
// microbatch), where the simulated bubble must be the closed form, and on
// examples/gpt.mlir (the first stage holds the embeddings, the last the
// head).
//
// RUN: tessel-compile %s --mesh pp=2 --microbatches 4 --pipeline-schedule gpipe --stage-recompute --report --emit=mlir -o %t.gpipe.mlir | FileCheck %s --check-prefix=GPIPE
// RUN: tessel-compile %s --mesh pp=2 --microbatches 4 --pipeline-schedule gpipe --report --emit=mlir -o %t.keep.mlir | FileCheck %s --check-prefix=KEEP
// RUN: tessel-compile %s --mesh pp=2 --microbatches 4 --pipeline-schedule 1f1b --report --emit=mlir -o %t.1f1b.mlir | FileCheck %s --check-prefix=ONEF
// RUN: tessel-compile %s --mesh pp=2 --microbatches 4 --pipeline-schedule zb-h1 --report --emit=mlir -o %t.zb.mlir | FileCheck %s --check-prefix=ZB
// RUN: tessel-compile %s --mesh pp=2 --microbatches 4 --pipeline-schedule interleaved --report --emit=mlir -o %t.int.mlir | FileCheck %s --check-prefix=INTER
// RUN: tessel-compile %s --mesh pp=2 --microbatches 4 --pipeline-schedule zb-v --report --emit=mlir -o %t.zbv.mlir | FileCheck %s --check-prefix=ZBV
// RUN: tessel-compile %s --mesh pp=2 --microbatches 4 --report-json %t.json --dump-schedule %t.schedule.json --emit=mlir -o %t.json.mlir
// RUN: FileCheck %s --check-prefix=JSON --input-file=%t.json
// RUN: FileCheck %s --check-prefix=DUMP --input-file=%t.schedule.json
//
// examples/gpt.mlir:
// RUN: tessel-compile %examples/gpt.mlir --mesh pp=2 --microbatches 4 --pipeline-schedule gpipe --report --emit=mlir -o %t.gpt.mlir | FileCheck %s --check-prefix=GPT
// RUN: tessel-compile %examples/gpt.mlir --mesh dp=2,tp=2,pp=2 --report -o %t.gpt3d.so | FileCheck %s --check-prefix=GPT3D
// RUN: tessel-compile %examples/gpt.mlir --mesh pp=2 --stage-layers 1,3 --report --emit=mlir -o %t.pinned.mlir | FileCheck %s --check-prefix=PINNED
//
// Clipping on stages, with ZeRO's chunks inside them:
// RUN: tessel-compile %s --mesh dp=2,pp=2 --zero 2 --clip 1.0 --report --emit=mlir -o %t.clip.mlir | FileCheck %s --check-prefix=CLIP
// RUN: FileCheck %s --check-prefix=CLIPIR --input-file=%t.clip.mlir
//
// One dp reduction per step on zero-bubble stages:
// RUN: tessel-compile %s --mesh dp=2,pp=2 --pipeline-schedule zb-h1 --microbatches 4 --report --emit=mlir -o %t.zbdp.mlir | FileCheck %s --check-prefix=ZBDP
// RUN: FileCheck %s --check-prefix=ZBDPIR --input-file=%t.zbdp.mlir
//
// The pipeline flags need a pp axis of more than one rank, one line each:
// RUN: not tessel-compile %s --mesh dp=2 --microbatches 4 --pipeline-schedule gpipe --stage-layers 2,2 --virtual-stages 2 --stage-recompute --dump-schedule %t.x.json -o %t.x.so 2>&1 | FileCheck %s --check-prefix=NOPP
// RUN: not tessel-compile %s --microbatches 4 -o %t.x.so 2>&1 | FileCheck %s --check-prefix=NOMESH
// RUN: not tessel-compile %s --mesh dp=2,pp=1 --pipeline-schedule gpipe -o %t.x.so 2>&1 | FileCheck %s --check-prefix=PP1
// RUN: not tessel-compile %s --mesh pp=2 --microbatches 0 -o %t.x.so 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not tessel-compile %s --mesh pp=2 --virtual-stages 0 -o %t.x.so 2>&1 | FileCheck %s --check-prefix=VZERO
// RUN: not tessel-compile %s --mesh pp=2 --dump-schedule %s -o %t.x.so 2>&1 | FileCheck %s --check-prefix=CLOBBER
// RUN: not tessel-compile %s --mesh pp=2 --dump-schedule %t.same.json --report-json %t.same.json -o %t.x.so 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not test -e %t.x.so
//
// What the stages cannot do is tessel-pipeline-split's error, at the model:
// RUN: not tessel-compile %s --mesh pp=2 --stage-layers 1,2 -o %t.x.so 2>&1 | FileCheck %s --check-prefix=SUM
// RUN: not tessel-compile %s --mesh pp=8 -o %t.x.so 2>&1 | FileCheck %s --check-prefix=FEW
// RUN: not tessel-compile %s --mesh pp=4 --microbatches 2 -o %t.x.so 2>&1 | FileCheck %s --check-prefix=ONEF-M
// RUN: not tessel-compile %s --mesh pp=2 --pipeline-schedule zigzag -o %t.x.so 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not tessel-compile %s --mesh pp=2 --virtual-stages 2 -o %t.x.so 2>&1 | FileCheck %s --check-prefix=VIRTUAL

// GPipe, P = 2, M = 4, equal stages: the bubble is (P-1)/(M+P-1) = 1/5
// exactly. With --stage-recompute a stage keeps each microbatch's input
// activations (64-byte slots, as tessel-run allocates them) from their
// receipt to its backward, which recomputes the rest: stage 0 has none
// (its feeds are drawn again), stage 1 keeps all M: 4 x 192 bytes (the
// activation, 128, and the running loss, 4 in a slot of 64).
// GPIPE: pipeline over pp=2 (mesh pp=2): gpipe, 4 microbatches, 2 stages (1 per rank)
// GPIPE: stage rank layers       model forward          forward         backward         update
// GPIPE-NEXT: 0     0    0-1                   1154             1154             3588           2176
// GPIPE-NEXT: 1     1    2-3                   1154             1154             3588           2176
// GPIPE-NEXT: imbalance (max / mean model forward)        1.0000
// GPIPE: stage       params        grads       states      scratch        arena   microbatch         kept  activations
// GPIPE-NEXT: 0              512          512         1024
// GPIPE-SAME: 0            0            0
// GPIPE-NEXT: 1              512          512         1024
// GPIPE-SAME: 192            0          768
// GPIPE: schedule        bubble   equal stages  in flight per rank   activation bytes per rank
// GPIPE-NEXT: * gpipe         0.2000         0.2000  4,4                  0,768
// GPIPE-NEXT:   1f1b          0.2000         0.2000  2,1                  0,192
// GPIPE-NEXT:   zb-h1         0.0864              -  2,1                  0,384
// GPIPE: gpipe actions per rank
// GPIPE-NEXT: rank 0: F0.0 s>1:F0.0 F0.1 s>1:F0.1 F0.2 s>1:F0.2 F0.3 s>1:F0.3 r<1:B0.0 B0.0 r<1:B0.1 B0.1 r<1:B0.2 B0.2 r<1:B0.3 B0.3
// GPIPE-NEXT: rank 1: r<0:F1.0 F1.0 r<0:F1.1 F1.1 r<0:F1.2 F1.2 r<0:F1.3 F1.3 B1.0 s>0:B1.0 B1.1 s>0:B1.1 B1.2 s>0:B1.2 B1.3 s>0:B1.3
// GPIPE: point-to-point per step (bytes a rank of each stage sends: 4 activations forward, 4 gradients back)
// GPIPE-NEXT: stage 0                528
// GPIPE-NEXT: stage 1                528
// GPIPE-NEXT: the launcher's all-reduces over pp per step: the loss (8 bytes f64)

// By default a stage keeps what its backward reads of its forward, which
// it then no longer recomputes: the backward's 3,588 flops become 2,434
// (3,588 - the forward's 1,154). Each stage keeps 576 bytes per microbatch
// from its Forward to its Backward (per layer its input and its tanh,
// 2 x 4 x 8 f32 each, and the running loss), M of them under GPipe; stage
// 1 also its input.
// KEEP: stage rank layers       model forward          forward         backward         update
// KEEP-NEXT: 0     0    0-1                   1154             1154             2434           2176
// KEEP-NEXT: 1     1    2-3                   1154             1154             2434           2176
// KEEP: stage       params        grads       states      scratch        arena   microbatch         kept  activations
// KEEP-NEXT: 0              512          512         1024
// KEEP-SAME: 0          576         2304
// KEEP-NEXT: 1              512          512         1024
// KEEP-SAME: 192          576         3072
// KEEP: * gpipe         0.2000         0.2000  4,4                  2304,3072
// KEEP-NEXT:   1f1b          0.2000         0.2000  2,1                  1152,192
// KEEP: step (forward_keep+backward+update)        0                0                0                0

// 1F1B: the same bubble, 1/5; rank r has at most P - r microbatches in
// flight, not M: stage 0 keeps 2 x 576 bytes in slots (its Backward needs
// a microbatch's kept values while the next one's are in the arena);
// stage 1 runs each Backward right after its Forward, on the kept values
// where forward_keep left them, and keeps only its input (1 x 192).
// ONEF: * 1f1b          0.2000         0.2000  2,1                  1152,192
// ONEF: 1f1b actions per rank
// ONEF-NEXT: rank 0: F0.0 s>1:F0.0 F0.1 s>1:F0.1 r<1:B0.0 B0.0 F0.2 s>1:F0.2 r<1:B0.1 B0.1 F0.3 s>1:F0.3 r<1:B0.2 B0.2 r<1:B0.3 B0.3
// ONEF-NEXT: rank 1: r<0:F1.0 F1.0 B1.0 s>0:B1.0 r<0:F1.1 F1.1 B1.1 s>0:B1.1 r<0:F1.2 F1.2 B1.2 s>0:B1.2 r<0:F1.3 F1.3 B1.3 s>0:B1.3

// ZB-H1 on the compiled split of each backward (tessel-split-backward,
// after the forward moved to forward_keep; stage 0: I = 0, its input has
// no gradient to send, W = 2,434; stage 1: I = 1,282, W = 1,152; I + W is
// the backward's 2,434: nothing is computed twice). Each stage also keeps
// its weight part's stash (192 and 256 bytes) from I to W, and its kept
// activations and stage 1 its input until W.
// ZB: {{^}}    0              512          512         1024 {{.*}} 0          576         1344
// ZB: * zb-h1         0.0821              -  2,1                  1344,2048
// ZB: zb-h1 actions per rank
// ZB-NEXT: rank 0: F0.0 s>1:F0.0 F0.1 s>1:F0.1 r<1:B0.0 I0.0 W0.0

// Interleaved, V = 2 (four stages of one layer, 577 and 1,794 flops): the
// bubble is (P-1)/(V·M+P-1) = 1/9. A rank's two stages share the pools of
// their slot sizes: rank 0 holds 1,664 bytes, not its stages' 1,280 and
// 1,024 apart (their peaks fall at different times).
// INTER: pipeline over pp=2 (mesh pp=2): interleaved, 4 microbatches, 4 stages (2 per rank)
// INTER: * interleaved   0.1111         0.1111  5,3                  1664,1536

// ZB-V, P = 2, M = 4: stages 0 and 3 on rank 0, 1 and 2 on rank 1 (a V),
// each a layer; the bubble less than half interleaved's on the same four
// stages. Rank 1 hands stage 1's activations to stage 2 and stage 2's
// gradients back to stage 1 in memory: stage 1 sends only its input's
// gradients and stage 2 only its activations (4 x 132 bytes each), and
// rank 1 keeps one handed-over gradient (within its 3,392 bytes).
// ZBV: pipeline over pp=2 (mesh pp=2): zb-v, 4 microbatches, 4 stages (2 per rank)
// ZBV: stage rank layers
// ZBV-NEXT: 0     0    0-0
// ZBV-NEXT: 1     1    1-1
// ZBV-NEXT: 2     1    2-2
// ZBV-NEXT: 3     0    3-3
// ZBV: interleaved   0.1111         0.1111  5,3                  1664,1536
// ZBV-NEXT: * zb-v          0.0428              -  4,4                  1792,3392
// ZBV: rank 1: r<0:F1.0 F1.0 s>1:F1.0 r<1:F2.0 F2.0 s>0:F2.0
// ZBV: point-to-point per step (bytes a rank of each stage sends: 4 activations forward, 4 gradients back)
// ZBV-NEXT: stage 0                528
// ZBV-NEXT: stage 1                528
// ZBV-NEXT: stage 2                528
// ZBV-NEXT: stage 3                528

// The JSON report: the pipeline's figures under "pipeline"; the simulated
// bubble is the closed form's double, exactly.
// JSON: "pipeline":{"actions":["rank 0: F0.0 s>1:F0.0
// JSON-SAME: "backward_split":"even","bubble_fraction":0.20000000000000001,"equal_stage_bubble_fraction":0.20000000000000001,"flops":[1154,1154],"imbalance":1,"launcher_all_reduces":[{"bytes":8,"dtype":"f64","what":"the loss"}],"layers":[2,2],"makespan_flops":17940,"microbatches":4,"ranks":2,"schedule":"1f1b"
// JSON-SAME: "stages":[{"arena_bytes":3968,"backward_flops":2434,
// JSON-SAME: "kept_bytes":576,
// JSON-SAME: "microbatch_bytes":0,
// JSON-SAME: "regions":{"control":
// JSON-SAME: "tied":{},"tied_grad_bytes":{},"timeline":[{"activation_bytes":1152,"busy_flops":14352,"peak_activations":2,"peak_weight_pending":0},{"activation_bytes":192,"busy_flops":14352,"peak_activations":1,"peak_weight_pending":0}]

// --dump-schedule writes the compiled schedule's actions (1F1B by default).
// DUMP: {"schedule":"1f1b","ranks":2,"microbatches":4,"virtual_stages":1,"actions":{{\[\[}}{"kind":"forward","stage":0,"microbatch":0},{"kind":"send","stage":0,"microbatch":0,"gradient":false,"peer":1},

// GPT on pp=2: the blocks 2 + 2; the backwards no longer recompute the
// forwards (1,348,568,064 and 1,451,592,448 flops with --stage-recompute,
// less the forward's 445,317,120 and 479,855,616). The last stage's
// forward_keep also runs the loss's gradient, fused with the loss (524,800
// flops more there, 786,944 fewer in its backward: the stage saves the
// 262,144, 2 per logit, of the row statistics the gradient recomputed).
// Each stage keeps what its backward reads per microbatch (8.4 and 9.5 MB:
// the layers' stacks, and on the last stage the logits' gradient in place
// of the logits) from its Forward to its Backward, the
// last stage also its input (262,144 bytes), M of them under GPipe (under
// 1F1B the last stage's Backward follows its Forward and finds them where
// forward_keep left them: its input only); the
// stages differ (the head), so the bubble exceeds 1/5. Besides the
// schedule's messages each holder sends the tied embedding's gradient
// (256 x 128 f32) to the other, and the loss is all-reduced over pp.
// GPT: pipeline over pp=2 (mesh pp=2): gpipe, 4 microbatches, 2 stages (1 per rank)
// GPT: 0     0    0-1              445317120        445317120        903250944        7437568
// GPT-NEXT: 1     1    2-3              479855616        480380416        971212032        7302656
// GPT-NEXT: imbalance (max / mean model forward)        1.0373
// GPT-NEXT: tied parameter wte held by stages 0,1 (a copy on each)
// GPT: 0          1750016      1750016      3500032
// GPT-SAME: 0      8404992     33619968
// GPT-NEXT: 1          1718272      1718272      3436544
// GPT-SAME: 262144      9453568     38862848
// GPT: * gpipe         0.2173         0.2000  4,4                  33619968,38862848
// GPT-NEXT:   1f1b          0.2173         0.2000  2,1                  16809984,262144
// GPT-NEXT:   zb-h1         0.1042              -  2,1                  16809984,19431424
// GPT: point-to-point per step (bytes a rank of each stage sends: 4 activations forward, 4 gradients back)
// GPT-NEXT: stage 0            1048576
// GPT-NEXT: stage 1            1048576
// GPT-NEXT: tied wte: 131072 bytes (its gradient) from each holder to each other
// GPT-NEXT: the launcher's all-reduces over pp per step: the loss (8 bytes f64)

// dp x tp x pp: each stage's collectives, on dp and tp; a training
// forward (forward_keep) runs the forward's tp all-reduces, and the
// backward only its own (it no longer recomputes the forward's 5).
// GPT3D: pipeline over pp=2 (mesh dp=2,tp=2,pp=2): 1f1b, 2 microbatches, 2 stages (1 per rank)
// GPT3D: stage 0 communication per rank (mesh dp=2,tp=2,pp=2)
// GPT3D-NEXT: entry     collective      axes         calls            bytes       ring bytes
// GPT3D-NEXT: forward   all_reduce      tp               5           655360           655360
// GPT3D-NEXT: forward_keep all_reduce      tp               5           655360           655360
// GPT3D-NEXT: backward  all_reduce      dp               3           894464           894464
// GPT3D-NEXT: backward  all_reduce      tp               4           524288           524288
// GPT3D: step (forward_keep+backward+update)       12          2074112          2074112
// GPT3D-NEXT: step of M > 1 microbatches: M x 1179648 (forward_keep+backward_no_sync) + 894464 (reduce_grads+update) bytes
// GPT3D: stage 1 communication per rank (mesh dp=2,tp=2,pp=2)

// PINNED: 0     0    0-0              222691328
// PINNED-NEXT: 1     1    1-3              702481408
// PINNED-NEXT: imbalance (max / mean model forward)        1.5186

// NOPP: tessel-compile: --stage-layers needs a mesh with a pp axis of more than one rank (e.g. --mesh dp=2,pp=2)
// NOPP-NEXT: tessel-compile: --microbatches needs a mesh with a pp axis of more than one rank
// NOPP-NEXT: tessel-compile: --pipeline-schedule needs a mesh with a pp axis of more than one rank
// NOPP-NEXT: tessel-compile: --virtual-stages needs a mesh with a pp axis of more than one rank
// NOPP-NEXT: tessel-compile: --stage-recompute needs a mesh with a pp axis of more than one rank
// NOPP-NEXT: tessel-compile: --dump-schedule needs a mesh with a pp axis of more than one rank
// NOMESH: tessel-compile: --microbatches needs a mesh with a pp axis of more than one rank
// PP1: tessel-compile: --pipeline-schedule needs a mesh with a pp axis of more than one rank
// ZERO: tessel-compile: --microbatches 0: a step runs at least one microbatch
// VZERO: tessel-compile: --virtual-stages 0: every pp rank holds at least one stage
// CLOBBER: tessel-compile: --dump-schedule '{{.*}}tessel-compile-pipeline.mlir' is the input file
// TWICE: tessel-compile: --dump-schedule '{{.*}}same.json' is also the --report-json file

// SUM: tessel-compile-pipeline.mlir:{{[0-9]+}}:{{[0-9]+}}: error: --stage-layers '1,2' gives 2 stages 3 layers; the pipeline has 2 stages and the repeat 4 layers
// FEW: tessel-compile-pipeline.mlir:{{[0-9]+}}:{{[0-9]+}}: error: the nn.repeat has 4 layers, fewer than the 8 pipeline stages (pp=8) need
// ONEF-M: error: pipeline schedule: 1f1b needs at least as many microbatches as stages (M = 2 < P = 4)
// UNKNOWN: error: unknown pipeline schedule 'zigzag' (expected gpipe, 1f1b, interleaved, zb-h1, zb-v or dualpipev)
// VIRTUAL: error: --virtual-stages 2 needs the interleaved, zb-v or dualpipev schedule (1f1b runs one stage per rank)

// The layers carry the activation and the running loss: nothing comes
// before them (a constant) or after, so the stages cost the same.
func.func private @layer(%h: tensor<4x8xf32>, %l: tensor<f32>, %w: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<f32>) {
  %m = nn.matmul %h, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %t = nn.tanh %m : tensor<4x8xf32>
  %s = nn.reduce_mean %t dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %l2 = nn.add %l, %s : tensor<f32>
  return %t, %l2 : tensor<4x8xf32>, tensor<f32>
}
func.func @loss(%x: tensor<4x8xf32> {nn.input, nn.axes = ["batch", "embed"]},
                %w: tensor<4x8x8xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.1>, nn.axes = ["layers", "embed", "mlp"]}) -> tensor<f32> {
  %l0 = nn.constant dense<0.0> : tensor<f32>
  %h, %l = nn.repeat @layer(%x, %l0) params(%w) : (tensor<4x8xf32>, tensor<f32>, tensor<4x8x8xf32>) -> (tensor<4x8xf32>, tensor<f32>)
  return %l : tensor<f32>
}

// Tests that a clipping stage's sum of squares is its own entry: each stage
// squares its gradient chunks and all-reduces the 4 bytes over dp (the
// launcher then adds the stages' over pp), counted in the step; the update
// keeps only its all-gather.
// CLIP: the launcher's all-reduces over pp per step: the loss (8 bytes f64), the gradient norm (4 bytes f32)
// CLIP-LABEL: stage 0 communication per rank (mesh dp=2,pp=2)
// CLIP: update    all_gather      dp               1              512              256                0
// CLIP-NEXT: grad_norm all_reduce      dp               1                4                4                0
// CLIP-NEXT: step (forward_keep+backward+update+grad_norm)        6             1036              524                0
// CLIP-LABEL: stage 1 communication per rank (mesh dp=2,pp=2)
// CLIP: grad_norm all_reduce      dp               1                4                4                0
// CLIPIR-DAG: llvm.func @tessel_s0_grad_norm(
// CLIPIR-DAG: llvm.func @tessel_s1_grad_norm(
// CLIPIR-DAG: \22grad_norm\22:\22tessel_grad_norm\22
// CLIPIR-DAG: \22role\22:\22grad_sum_squares\22

// Tests that a zero-bubble stage on dp reduces its gradients once per
// step: its weight part (W) reduces the 512 bytes of the stage's two
// layers' gradients in the backward_weight entry, runs as
// backward_weight_no_sync in a step of several microbatches, and
// reduce_grads reduces them once; the carried loss's two 4-byte
// all-reduces are the training forward's (forward_keep), which the
// backward's parts no longer recompute (backward_no_sync, the deferred
// backward, has no collective left); a step of one microbatch counts the
// parts the stage runs, not its whole backward; the launcher's symbols are
// each stage's.
// ZBDP-LABEL: stage 0 communication per rank (mesh dp=2,pp=2)
// ZBDP: forward_keep all_reduce      dp               2                8                8
// ZBDP-NEXT: backward  all_reduce      dp               2              512              512
// ZBDP-NEXT: backward_weight all_reduce      dp               2              512              512
// ZBDP-NEXT: reduce_grads all_reduce      dp               1              512              512
// ZBDP-NEXT: step (forward_keep+backward_input+backward_weight+update)        4              520              520              256
// ZBDP-NEXT: step of M > 1 microbatches: M x 8 (forward_keep+backward_input+backward_weight_no_sync) + 512 (reduce_grads+update) bytes
// ZBDPIR-DAG: llvm.func @tessel_s0_backward_weight_no_sync(
// ZBDPIR-DAG: llvm.func @tessel_s1_backward_weight_no_sync(
// ZBDPIR-DAG: llvm.func @tessel_s1_reduce_grads(
// ZBDPIR-DAG: \22reduce_grads\22:\22tessel_reduce_grads\22
