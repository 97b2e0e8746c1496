// Tests tessel-plan on a model of four repeated layers and a head over 4 (and
// 1) devices: every (dp, cp, tp, pp, ZeRO stage, schedule) compiled, its
// figures the compile's own, ranked by the predicted step time.
//
// RUN: tessel-plan %s --devices 4 --top 3 --json %t.json | FileCheck %s
// RUN: FileCheck %s --check-prefix=JSON --input-file=%t.json
// RUN: tessel-compile %s --report -o %t.one.so > %t.one
// RUN: tessel-plan %s --devices 1 >> %t.one
// RUN: FileCheck %s --check-prefix=ONE --input-file=%t.one
// RUN: tessel-compile %s --mesh dp=4 --report -o %t.dp.so > %t.dp
// RUN: tessel-plan %s --devices 4 --top 100 >> %t.dp
// RUN: FileCheck %s --check-prefix=DP --input-file=%t.dp
// RUN: not tessel-plan %s --devices 4 --memory-gib 0.00001 | FileCheck %s --check-prefix=NOFIT
// RUN: tessel-plan %s --devices 4 --memory-gib 0.0000136 --top 2 | FileCheck %s --check-prefix=RECOMPUTE
// RUN: tessel-plan %s --devices 4 --memory-gib 0.0000136 --recompute none --top 2 | FileCheck %s --check-prefix=FIXED
// RUN: tessel-plan %s --devices 4 --memory-gib 0.000012 --top 2 --json %t.stage.json | FileCheck %s --check-prefix=STAGE
// RUN: FileCheck %s --check-prefix=STAGE-JSON --input-file=%t.stage.json
// RUN: tessel-plan %examples/gpt.mlir --devices 2 --sequence-parallel | FileCheck %s --check-prefix=SP-FIXED
// RUN: not tessel-plan %s --devices 2 --recompute half 2>&1 | FileCheck %s --check-prefix=RECOMPUTE-BAD
// RUN: tessel-compile %examples/gpt.mlir --mesh tp=2 --sequence-parallel --report -o %t.sp.so > %t.sp
// RUN: tessel-plan %examples/gpt.mlir --devices 2 --top 30 --json %t.sp.json >> %t.sp
// RUN: FileCheck %s --check-prefix=SP --input-file=%t.sp
// RUN: FileCheck %s --check-prefix=SP-JSON --input-file=%t.sp.json
// RUN: tessel-compile %S/Inputs/plan-activations.mlir --mesh auto --devices 1 --report -o %t.act.so 2>&1 | FileCheck %s --check-prefix=AUTO-RECOMPUTE
// RUN: not tessel-compile %S/Inputs/plan-activations.mlir --mesh auto --devices 1 --recompute none -o %t.x.so 2>&1 | FileCheck %s --check-prefix=AUTO-NO-RECOMPUTE
// RUN: tessel-plan %s --devices 4 --nodes 2 --top 1 | FileCheck %s --check-prefix=NODES
// Any number of compiles at once ranks alike, byte for byte:
// RUN: tessel-plan %s --devices 4 --top 100 --jobs 1 --json %t.jobs1.json > %t.jobs1
// RUN: tessel-plan %s --devices 4 --top 100 --jobs 3 --json %t.jobs3.json > %t.jobs3
// RUN: diff %t.jobs1 %t.jobs3
// RUN: diff %t.jobs1.json %t.jobs3.json
// RUN: FileCheck %s --check-prefix=NO-CP --input-file=%t.jobs1
// RUN: tessel-compile %S/Inputs/plan-long-sequence.mlir --mesh cp=2 --report -o %t.cp.so > %t.cp
// RUN: tessel-plan %S/Inputs/plan-long-sequence.mlir --devices 2 --json %t.cp.json >> %t.cp
// RUN: FileCheck %s --check-prefix=CP --input-file=%t.cp
// RUN: FileCheck %s --check-prefix=CP-JSON --input-file=%t.cp.json
// RUN: tessel-plan %S/Inputs/plan-long-sequence.mlir --devices 4 --nodes 2 --top 2 | FileCheck %s --check-prefix=CP-NODES
// RUN: tessel-run %S/Inputs/plan-long-sequence.mlir --mesh auto --devices 2 --steps 1 2>&1 | FileCheck %s --check-prefix=CP-AUTO
// RUN: tessel-plan %s --devices 2 --device h200 --precision bf16 --microbatches 2 --efficiency 0.25 | FileCheck %s --check-prefix=H200
// RUN: tessel-plan %s --devices 2 --precision f64 --top 1 | FileCheck %s --check-prefix=F64
// RUN: tessel-compile %s --mesh auto --devices 4 --report -o %t.auto.so 2>&1 | FileCheck %s --check-prefix=AUTO
// RUN: tessel-compile %s --mesh auto --devices 1 --precision bf16 -o %t.auto1.so 2>&1 | FileCheck %s --check-prefix=AUTO1
// RUN: tessel-compile %s --mesh auto --devices 2 --microbatches 2 --optimizer sgd -o %t.auto2.so 2>&1 | FileCheck %s --check-prefix=AUTO2
// RUN: tessel-run %s --mesh auto --devices 4 --steps 2 --seed 3 > %t.runs 2>&1
// RUN: tessel-run %s --mesh pp=2,dp=2 --zero 1 --pipeline-schedule zb-h1 --microbatches 4 --steps 2 --seed 3 >> %t.runs 2>&1
// RUN: FileCheck %s --check-prefix=RUN-AUTO --input-file=%t.runs
//
// Bad flags and models: one line each, nothing written.
// RUN: not tessel-run %s --devices 4 2>&1 | FileCheck %s --check-prefix=RUN-ONLY
// RUN: not tessel-run %s --mesh auto 2>&1 | FileCheck %s --check-prefix=RUN-DEVICES
// RUN: not tessel-run %s --mesh auto --devices 2 --zero 1 2>&1 | FileCheck %s --check-prefix=RUN-ZERO
// RUN: not tessel-run %s --mesh auto --devices 2 --eval 2>&1 | FileCheck %s --check-prefix=RUN-EVAL
// RUN: not tessel-run %t.auto.so --mesh auto --devices 2 2>&1 | FileCheck %s --check-prefix=RUN-SO
// RUN: not tessel-compile %s --mesh auto -o %t.x.so 2>&1 | FileCheck %s --check-prefix=AUTO-DEVICES
// RUN: not tessel-compile %s --mesh auto --devices 4 --zero 1 -o %t.x.so 2>&1 | FileCheck %s --check-prefix=AUTO-ZERO
// RUN: not tessel-compile %s --mesh auto --devices 4 --pipeline-schedule gpipe -o %t.x.so 2>&1 | FileCheck %s --check-prefix=AUTO-SCHEDULE
// RUN: not tessel-compile %s --mesh auto --devices 4 --no-train -o %t.x.so 2>&1 | FileCheck %s --check-prefix=AUTO-EVAL
// RUN: not tessel-compile %s --mesh auto --devices 4 --device a100 -o %t.x.so 2>&1 | FileCheck %s --check-prefix=AUTO-DEVICE
// RUN: not tessel-compile %s --mesh dp=2 --devices 4 -o %t.x.so 2>&1 | FileCheck %s --check-prefix=AUTO-ONLY
// RUN: not tessel-compile %s --mesh auto --devices 4 --rules batch -o %t.x.so 2>&1 | FileCheck %s --check-prefix=AUTO-REFUSED
// RUN: not test -e %t.x.so
// RUN: not tessel-plan %s --devices 0 2>&1 | FileCheck %s --check-prefix=DEVICES
// RUN: not tessel-plan %s --devices 2 --device a100 2>&1 | FileCheck %s --check-prefix=DEVICE
// RUN: not tessel-plan %s --devices 4 --nodes 3 2>&1 | FileCheck %s --check-prefix=NODES-BAD
// RUN: not tessel-plan %s --devices 2 --efficiency 1.5 2>&1 | FileCheck %s --check-prefix=EFFICIENCY
// RUN: not tessel-plan %s --devices 2 --precision f16 2>&1 | FileCheck %s --check-prefix=PRECISION
// RUN: tessel-plan %s --devices 2 --top 1 | FileCheck %s --check-prefix=ADAMW
// RUN: tessel-plan %s --devices 2 --top 1 --optimizer sgd | FileCheck %s --check-prefix=SGD
// RUN: tessel-plan %s --devices 2 --top 1 --optimizer sgd --freeze w | FileCheck %s --check-prefix=FROZEN
// RUN: not tessel-plan %s --devices 2 --optimizer lamb 2>&1 | FileCheck %s --check-prefix=BAD-OPTIMIZER
// RUN: not tessel-plan %s --devices 2 --memory-gib -1 2>&1 | FileCheck %s --check-prefix=MEMORY
// RUN: not tessel-plan %s --devices 2 --microbatches -2 2>&1 | FileCheck %s --check-prefix=MICRO
// RUN: not tessel-plan %s --devices 2 --jobs 5000 2>&1 | FileCheck %s --check-prefix=JOBS
// RUN: not tessel-plan %s --devices 2 --json %s 2>&1 | FileCheck %s --check-prefix=CLOBBER
// RUN: not tessel-plan %t.missing.mlir --devices 2 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: echo 'func.func @loss(%%x: tensor<4xf32>' > %t.bad.mlir
// RUN: not tessel-plan %t.bad.mlir --devices 2 2>&1 | FileCheck %s --check-prefix=BAD

// Tests the ranking's head: 36 candidates compile (pp=4 interleaved, zb-v
// and dualpipev need 8 stages of the 4 layers), the fastest first; dp=2,pp=2 with
// ZeRO-1 and zero bubble sends the fewest bytes that do not overlap
// compute.
// CHECK: plan for {{.*}}tessel-plan.mlir on 4 x h100 (80 GiB, 67 TFLOP/s f32 at 50%, links 450 GB/s), 4 microbatches per step
// CHECK-NEXT: rank mesh             zero schedule    sp  recompute    step ms compute ms   comm ms  bubble   memory bytes            flops     ring bytes
// CHECK-NEXT: 1    pp=2,dp=2           1 zb-h1       -   -          1.148e-05  2.864e-06  8.62e-06  0.0794          20480            95944           3264
// CHECK-NEXT: 2    pp=2,dp=2           1 1f1b        -   -          1.148e-05  3.277e-06 8.208e-06  0.2031          20224           109768           3264
// CHECK-NEXT: 3    pp=2,dp=2           0 zb-h1       -   -           1.26e-05  3.071e-06 9.529e-06  0.0794          25280           102880           3264
// CHECK-NEXT: (33 more that fit: --top)
// CHECK-NEXT: refused (pp=4 interleaved, pp=4 zb-v, pp=4 dualpipev): the nn.repeat has 4 layers, fewer than the 8 pipeline stages (pp=4 x 2 virtual stages) need: every stage holds at least one layer
// CHECK-NOT: refused

// JSON: {"candidates":[{"bubble_fraction":0.0793{{[0-9]*}},"comm_seconds":{{.*}},"dp":2,"exposed_bytes":2608,"fits":true,"flops":95944,"memory_bytes":20480,"mesh":"pp=2,dp=2","p2p_bytes":1024,"pp":2,"ring_bytes":3264,"schedule":"zb-h1",
// JSON-SAME: {"cp":1,"dp":1,"mesh":"pp=4","pp":4,"refused":"the nn.repeat has 4 layers, fewer than the 8 pipeline stages (pp=4 x 2 virtual stages) need: every stage holds at least one layer","schedule":"interleaved","sequence_parallel":false,"tp":1,"zero":0}
// JSON-SAME: {"cp":1,"dp":1,"mesh":"pp=4","pp":4,"refused":"the nn.repeat has 4 layers, fewer than the 8 pipeline stages (pp=4 x 2 virtual stages) need: every stage holds at least one layer","schedule":"zb-v","sequence_parallel":false,"tp":1,"zero":0}
// JSON-SAME: {"cp":1,"dp":1,"mesh":"pp=4","pp":4,"refused":"the nn.repeat has 4 layers, fewer than the 8 pipeline stages (pp=4 x 2 virtual stages) need: every stage holds at least one layer","schedule":"dualpipev","sequence_parallel":false,"tp":1,"zero":0}]
// JSON-SAME: "devices":4,"efficiency":0.5,"microbatches":4,"nodes":1,"precision":"f32","source":"{{.*}}tessel-plan.mlir"}

// Tests that one device's step is the compile's backward and update
// (one microbatch: as many as devices) and its memory the arena.
// ONE-DAG: flops of @loss_update {{ *}}[[#UPDATE:]]
// ONE-DAG: flops of @loss_backward {{ *}}[[#BACKWARD:]]
// ONE: arena (one rank) {{ *}}[[#ARENA:]] bytes
// ONE: plan for {{.*}} on 1 x h100 ({{.*}}), 1 microbatch per step
// ONE: 1    one device          0 - - - {{.*}} 0.0000 {{ *}}[[#ARENA]] {{ *}}[[#BACKWARD+UPDATE]]              0

// Tests dp=4 without ZeRO: 4 microbatches run the backward without its
// gradient reductions, then reduce once: flops 4 x backward_no_sync +
// update (reduce_grads computes nothing), ring bytes 4 x the loss's 6 +
// reduce_grads' 9,600.
// DP-DAG: flops of @loss_update {{ *}}[[#UPDATE:]]
// DP-DAG: flops of @loss_backward_no_sync {{ *}}[[#NOSYNC:]]
// DP: arena (one rank) {{ *}}[[#ARENA:]] bytes
// DP: backward_no_sync all_reduce      dp               1                4                [[#RING:]]
// DP: reduce_grads all_reduce      dp               1             6400             [[#REDUCE:]]
// DP: dp=4                0 - - - {{.*}} 0.0000 {{ *}}[[#ARENA]] {{ *}}[[#add(mul(4,NOSYNC),UPDATE)]] {{ *}}[[#add(mul(4,RING),REDUCE)]]

// Tests that candidates over the memory are listed by memory, none ranked,
// and the exit status says none fits; each was compiled again with
// selective, then full recomputation, and is listed with the policy that
// holds the least where one does (tp=4 keeps no layer's activations to
// recompute).
// NOFIT: none fits in 10737 bytes per device
// NOFIT-NEXT: over memory: tp=4 zero 0 needs 10752 bytes
// NOFIT-NEXT: over memory: pp=2,tp=2 zero 0 1f1b stage-recompute needs 12800 bytes
// NOFIT-NEXT: over memory: dp=4 zero 3 recompute full needs 14656 bytes
// NOFIT-NEXT: over memory: dp=2,tp=2 zero 3 needs 14656 bytes

// Tests the recompute search: with 14,603 bytes a device, pp=2,tp=2 1f1b
// fits only recomputing its layers' forward (full; selective does not
// suffice): 15,872 -> 14,592 bytes for 108,056 -> 131,352 flops (and tp's
// all-reduces of the forward again, 12,288 -> 15,360 ring bytes); it
// ranks above tp=4, which fits as it is.
// RECOMPUTE: rank mesh
// RECOMPUTE-NEXT: 1    pp=2,tp=2           0 1f1b        -   full       {{.*}} 0.2130          14592           131352          15360
// RECOMPUTE-NEXT: 2    tp=4                0 -           -   -          {{.*}} 0.0000          10752            87440          25152

// Tests the last resort: with 12,885 bytes a device neither policy is
// enough, and pp=2,tp=2 1f1b fits with its stages recomputing their whole
// forward from their inputs (--stage-recompute): 12,800 bytes for 142,456
// flops, more than full recomputation's 131,352.
// STAGE: rank mesh
// STAGE-NEXT: 1    pp=2,tp=2           0 1f1b        -   stage      {{.*}} 0.2067          12800           142456          15360
// STAGE-NEXT: 2    tp=4                0 -           -   -          {{.*}} 0.0000          10752            87440          25152
// STAGE-JSON: {"candidates":[{"bubble_fraction":{{.*}},"memory_bytes":12800,"mesh":"pp=2,tp=2",{{.*}}"stage_recompute":true,

// Tests that --recompute fixes the policy instead (stage recomputation
// not searched either): none, and only tp=4 fits; --sequence-parallel compiles every tp split with it, once.
// FIXED: 1    tp=4
// FIXED-NEXT: over memory: dp=2,tp=2 zero 3 needs 14656 bytes
// FIXED-NOT: recompute full
// SP-FIXED: tp=2                0 -           yes -
// SP-FIXED-NOT: tp=2
// RECOMPUTE-BAD: error: training settings: unknown recompute policy 'half'; expected none, selective or full

// Tests the sequence-parallel dimension on gpt (which has a sequence
// axis): tp=2 both ways, sp's memory the compile's arena exactly; the
// JSON says which is which.
// SP: arena (one rank) {{ *}}[[#SPARENA:]] bytes
// SP: tp=2                0 -           -   -
// SP: tp=2                0 -           yes -          {{.*}} 0.0000 {{ *}}[[#SPARENA]]
// SP-JSON: "mesh":"tp=2",{{.*}}"sequence_parallel":true,"step_seconds"

// Tests --mesh auto with a model whose activations outgrow one device:
// it compiles with the recompute policy the search chose (the report is
// that compile's: 73,014,444,160 bytes against 103,079,215,232 without);
// given --recompute, the search keeps it, and nothing fits.
// AUTO-RECOMPUTE: tessel-compile: --mesh auto on 1 x h100: one device --recompute selective (predicted step
// AUTO-RECOMPUTE: arena (one rank) {{ *}}73014444160 bytes
// AUTO-NO-RECOMPUTE: tessel-compile: --mesh auto: no split of the model over 1 x h100 fits in its memory

// Tests two nodes of two devices: ranks are placed tp first, then dp,
// then pp (Megatron's order), so pp=2,dp=2 keeps dp's reduction in a node
// and sends between stages over the network, 50 GB/s instead of 450: the
// same figures, more time.
// NODES: plan for {{.*}} on 4 x h100 (80 GiB, 67 TFLOP/s f32 at 50%, links 450 GB/s in each of 2 nodes, 50 GB/s between), 4 microbatches per step
// NODES: 1    pp=2,dp=2           1 zb-h1       -   -          2.969e-05  2.864e-06 2.682e-05  0.0794          20480            95944           3264
// NODES-BAD: tessel-plan: --nodes 3: expected a divisor of --devices 4

// Tests context parallelism: a model none of whose arguments has a
// dimension the rules split over cp (here none has a sequence) is not
// searched over cp, whose ranks would each run the whole program.
// NO-CP: plan for
// NO-CP-NOT: cp=

// Tests the cp candidates of a model with a sequence: one sample of 1024
// tokens over 2 devices, which dp cannot split. cp=2 ranks first, ahead of
// tp=2, at every ZeRO stage (which shards over cp as over dp): its
// all-gathers of the keys and values and reduce-scatters of their
// gradients send fewer bytes than tp's all-reduces of the activations, and
// ZeRO-2 reduce-scatters the gradients behind the backward. Its figures
// are the compile's (the arena, the backward and update). On two nodes of
// two devices, ranks are placed tp first, then cp: cp=2,tp=2 keeps tp's
// all-reduces in a node. --mesh auto runs the choice.
// CP-DAG: flops of @loss_update {{ *}}[[#CPUPDATE:]]
// CP-DAG: flops of @loss_backward_no_sync {{ *}}[[#CPNOSYNC:]]
// CP: arena (one rank) {{ *}}[[#CPARENA:]] bytes
// CP: plan for {{.*}}plan-long-sequence.mlir on 2 x h100
// CP: 1    cp=2                    2 -           -   -
// CP: 4    cp=2                    0 -           -   -          {{.*}} 0.0000 {{ *}}[[#CPARENA]] {{ *}}[[#add(mul(2,CPNOSYNC),CPUPDATE)]]
// CP-NEXT: 5    tp=2                    0 -           -   -
// CP: refused (dp=2): argument #0: dimension 0 of size 1 does not split evenly over mesh axes 'dp' of size 2
// CP-JSON: {"candidates":[{"bubble_fraction":0,{{.*}}"cp":2,"dp":1,{{.*}}"mesh":"cp=2",
// CP-NODES: links 450 GB/s in each of 2 nodes, 50 GB/s between
// CP-NODES: 1    cp=2,tp=2               2 -
// CP-NODES-NEXT: 2    cp=2,tp=2               3 -
// CP-AUTO: tessel-compile: --mesh auto on 2 x h100: --mesh cp=2 --zero 2 (predicted step {{.*}} ms; tessel-plan ranks all 15)
// CP-AUTO: done: 1 steps ({{.*}}mesh cp=2 (2 ranks, threads)), loss

// Tests the device, precision, efficiency and microbatches settings: bf16
// at 25% of the H200's 989 TFLOP/s, two microbatches for pp=2.
// H200: plan for {{.*}} on 2 x h200 (131.3 GiB, 989 TFLOP/s bf16 at 25%, links 450 GB/s), 2 microbatches per step
// H200: 1    pp=2                0 zb-h1
// H200-COUNT-7: {{^  [0-9] }}

// f64 (each candidate compiled with tessel-promote-f64) runs at the FP64
// tensor cores' 67 TFLOP/s.
// F64: plan for {{.*}} on 2 x h100 (80 GiB, 67 TFLOP/s f64 at 50%, links 450 GB/s), 2 microbatches per step

// Tests that the training flags are every candidate's: the default AdamW
// keeps two states a parameter, SGD without momentum none, and a frozen
// parameter (the layers' w) no gradient: its layers' derivative computes
// none (95,328 flops a step become 86,880) nor keeps the activation only
// it read (20,352 bytes become 19,328), and the shorter backward leaves
// more of the pipeline idle; a bad setting is refused once, at the model,
// before any candidate compiles.
// ADAMW: 1    pp=2                0 zb-h1       -   -          {{.*}}  0.1492          29760
// SGD: 1    pp=2                0 zb-h1       -   -          {{.*}}  0.1492          23232
// FROZEN: 1    pp=2                0 zb-h1       -   -          {{.*}}  0.2614          19328            86880
// BAD-OPTIMIZER: error: training settings: unknown optimizer 'lamb'; expected sgd, adam or adamw
// BAD-OPTIMIZER-NOT: plan for

// Tests tessel-compile --mesh auto: the ranking's first, compiled as if
// its flags had been given (the report is that split's); one device
// compiles without a mesh; the command line's other options (the
// optimizer, the microbatches) are every candidate's.
// AUTO: tessel-compile: --mesh auto on 4 x h100: --mesh pp=2,dp=2 --zero 1 --pipeline-schedule zb-h1 --microbatches 4 (predicted step 1.148e-05 ms; tessel-plan ranks all 39)
// AUTO: pipeline over pp=2 (mesh pp=2,dp=2): zb-h1, 4 microbatches, 2 stages (1 per rank)
// AUTO1: tessel-compile: --mesh auto on 1 x h100: one device (predicted step {{.*}} ms; tessel-plan ranks all 1)
// AUTO2: tessel-compile: --mesh auto on 2 x h100: --mesh pp=2 --pipeline-schedule zb-h1 --microbatches 2
// AUTO-DEVICES: tessel-compile: --mesh auto needs --devices N: the devices to split the model over
// AUTO-ZERO: tessel-compile: --zero is what --mesh auto chooses; give --mesh to set it
// AUTO-SCHEDULE: tessel-compile: --pipeline-schedule is what --mesh auto chooses; give --mesh to set it
// AUTO-EVAL: tessel-compile: --mesh auto ranks training steps; it does not apply with --no-train
// AUTO-DEVICE: tessel-compile: --device a100: expected one of h100, h200
// AUTO-ONLY: tessel-compile: --devices applies to --mesh auto
// AUTO-REFUSED: tessel-compile: --mesh auto: the compiler refused every split of the model over 4 devices; the first: 

// Tests tessel-run --mesh auto: it compiles the .mlir for tessel-compile
// --mesh auto's choice and runs on that mesh, the same run as the choice's
// flags given.
// RUN-AUTO: tessel-compile: --mesh auto on 4 x h100: --mesh pp=2,dp=2 --zero 1 --pipeline-schedule zb-h1 --microbatches 4
// RUN-AUTO: done: 2 steps ({{.*}}mesh pp=2,dp=2 (4 ranks, threads)), loss [[FIRST:[0-9.]+]] -> [[LAST:[0-9.]+]],
// RUN-AUTO: done: 2 steps ({{.*}}mesh pp=2,dp=2 (4 ranks, threads)), loss [[FIRST]] -> [[LAST]],
// RUN-ONLY: tessel-run: error: --devices applies to --mesh auto
// RUN-DEVICES: tessel-run: error: --mesh auto needs --devices N: the devices to split the model over
// RUN-ZERO: tessel-run: error: --zero is what --mesh auto chooses; give --mesh to set it
// RUN-EVAL: tessel-run: error: --mesh auto ranks training steps; not with --eval
// RUN-SO: tessel-run: error: --mesh auto compiles a .mlir model (a .so was partitioned when it was compiled)

// DEVICES: tessel-plan: --devices 0: expected 1 to 4096
// DEVICE: tessel-plan: --device a100: expected one of h100, h200
// EFFICIENCY: tessel-plan: --efficiency must be in (0, 1]
// PRECISION: tessel-plan: --precision f16: expected f32, bf16 or f64
// MEMORY: tessel-plan: --memory-gib must be a positive number
// MICRO: tessel-plan: --microbatches -2: expected 1 to 65536
// JOBS: tessel-plan: --jobs 5000: expected 0 to 1024
// CLOBBER: tessel-plan: --json {{.*}}tessel-plan.mlir is the model file: refusing to overwrite it
// MISSING: tessel-plan: {{.*}}missing.mlir: cannot open input file
// BAD: bad.mlir:1:{{[0-9]+}}: error: expected ')'

func.func private @layer(%h: tensor<8x16xf32>, %w: tensor<16x16xf32>, %b: tensor<16xf32>) -> tensor<8x16xf32> {
  %m = nn.matmul %h, %w : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %bb = nn.broadcast %b dims = [1] : tensor<16xf32> -> tensor<8x16xf32>
  %a = nn.add %m, %bb : tensor<8x16xf32>
  %t = nn.tanh %a : tensor<8x16xf32>
  return %t : tensor<8x16xf32>
}
func.func @loss(%x: tensor<8x16xf32> {nn.input, nn.axes = ["batch", "embed"]},
                %y: tensor<8xi32> {nn.label, nn.axes = ["batch"]},
                %w: tensor<4x16x16xf32> {nn.param = "w", nn.init = #nn.init<normal, 0.1>, nn.axes = ["layers", "embed", "mlp"]},
                %b: tensor<4x16xf32> {nn.param = "b", nn.init = #nn.init<zeros>, nn.axes = ["layers", "mlp"]},
                %o: tensor<16x32xf32> {nn.param = "o", nn.init = #nn.init<normal, 0.1>, nn.axes = ["embed", "vocab"]}) -> tensor<f32> {
  %h = nn.repeat @layer(%x) params(%w, %b) : (tensor<8x16xf32>, tensor<4x16x16xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %z = nn.matmul %h, %o : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %l = nn.cross_entropy %z, %y : (tensor<8x32xf32>, tensor<8xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
