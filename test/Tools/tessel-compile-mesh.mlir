// Tests tessel-compile on a device mesh: the communication report (human
// and JSON) of a training step partitioned by hand; that step trained on 8
// ranks (threads) has the losses of the model on one device and moves what
// the description says; the pipeline that partitions a model with --mesh;
// the parallelism flags' errors.
//
// RUN: tessel-compile %S/Inputs/partitioned-step.mlir --no-train -o %t.so --report --report-json %t.json | FileCheck %s --check-prefix=REPORT
// RUN: FileCheck %s --check-prefix=JSON --input-file %t.json
// RUN: tessel-run %t.so --steps 3 --quiet --metrics %t.mesh.jsonl
// RUN: FileCheck %s --check-prefix=COUNTERS --input-file %t.mesh.jsonl
// RUN: tessel-compile %S/Inputs/one-device-step.mlir --optimizer sgd --lr 0.1 --momentum 0.9 --clip 1 --weight-decay 0 -o %t.one.so
// RUN: tessel-run %t.one.so --steps 3 --quiet --metrics %t.one.jsonl
// RUN: cat %t.one.jsonl %t.mesh.jsonl | FileCheck %s --check-prefix=SAME
// RUN: tessel-compile %examples/mlp.mlir --mesh dp=2,tp=2 --bucket-mb 1 --emit=mlir -o %t.mlp.mlir --report | FileCheck %s --check-prefix=PIPELINE
// RUN: FileCheck %s --check-prefix=LOWERED --input-file %t.mlp.mlir
//
// RUN: not tessel-compile %s --mesh dp=0 2>&1 | FileCheck %s --check-prefix=SIZE
// RUN: not tessel-compile %s --mesh dp=2,tp 2>&1 | FileCheck %s --check-prefix=ENTRY
// RUN: not tessel-compile %s --mesh DP=2 2>&1 | FileCheck %s --check-prefix=NAME
// RUN: not tessel-compile %s --mesh dp=2,dp=4 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not tessel-compile %s --mesh "" 2>&1 | FileCheck %s --check-prefix=EMPTY
// RUN: not tessel-compile %s --mesh a=65536,b=65536 2>&1 | FileCheck %s --check-prefix=HUGE
// RUN: not tessel-compile %s --mesh a=1,b=1,c=1,d=1,e=1,f=1,g=1,h=1,i=1 2>&1 | FileCheck %s --check-prefix=AXES
// RUN: not tessel-compile %s --mesh dp=2 --rules batch 2>&1 | FileCheck %s --check-prefix=RULES
// RUN: not tessel-compile %s --mesh dp=2 --bucket-mb -1 2>&1 | FileCheck %s --check-prefix=BUCKET
// RUN: not tessel-compile %s --rules batch=dp 2>&1 | FileCheck %s --check-prefix=NOMESH
// RUN: not tessel-compile %s --local-batchnorm 2>&1 | FileCheck %s --check-prefix=NOMESH-BN

// dp=2, tp=4. Payload bytes are what the runtime's counters show: the
// backward all-reduces over dp the loss (4) and the weight's gradient (8 x 3
// f32 = 96) and gathers the logits over tp (the 2 x 12 f32 output, 96); the
// update all-reduces the gradient's squared norm over tp (4); the
// all_slice moves nothing. Ring bytes a rank sends: 2(G-1)/G of an
// all-reduce's payload (G = 2: x1; G = 4: x1.5), (G-1)/G of a gather's
// (x0.75). One step (one microbatch) is the backward and the update.
// The loss's gradient is written over the gathered logits (in place).
// REPORT: arena (one rank) 896 bytes
// REPORT: scratch 256 bytes at 640
// Without --zero every dp rank keeps its whole blocks: Ψ = 24 parameters
// (the rank's [8, 3] block of w), SGD with momentum keeps one state each.
// REPORT-NEXT: training state per rank (not sharded; Ψ = 24 parameters per rank before ZeRO)
// REPORT-NEXT: params 4Ψ 96 bytes (formula 96.0)
// REPORT-NEXT: grads 4Ψ 96 bytes (formula 96.0)
// REPORT-NEXT: states 4Ψ 96 bytes (formula 96.0)
// REPORT-NEXT: total 12Ψ 288 bytes (formula 288.0)
// REPORT-NEXT: communication per rank (mesh dp=2,tp=4)
// REPORT-NEXT: entry collective axes calls bytes ring bytes
// REPORT-NEXT: forward all_reduce dp 1 4 4
// REPORT-NEXT: forward all_gather tp 1 96 72
// REPORT-NEXT: backward all_reduce dp 2 100 100
// REPORT-NEXT: backward all_gather tp 1 96 72
// REPORT-NEXT: update all_reduce tp 1 4 6
// REPORT-NEXT: step (backward+update) 4 200 178

// JSON: "collectives":{"backward":[{"axes":["dp"],"bytes":100,"calls":2,"kind":"all_reduce"},{"axes":["tp"],"bytes":96,"calls":1,"kind":"all_gather"}],"forward":[{{.*}}],"update":[{"axes":["tp"],"bytes":4,"calls":1,"kind":"all_reduce"}]}
// JSON-SAME: "communication":{"collectives":[{{.*}}{"axes":["tp"],"bytes":4,"calls":1,"entry":"update","kind":"all_reduce","overlapped_bytes":0,"ring_bytes":6,"started_bytes":0}],"mesh":"dp=2,tp=4","step":{"bytes":200,"calls":4,"entries":["backward","update"],"overlapped_bytes":0,"ring_bytes":178,"started_bytes":0}}
// JSON-SAME: "mesh":{"axes":["dp","tp"],"shape":[2,4]}

// The launcher's counters after a step: backward + update.
// COUNTERS: "comm":{"all_reduce dp":{"calls":2,"bytes":100},"all_reduce tp":{"calls":1,"bytes":4},"all_gather tp":{"calls":1,"bytes":96}}

// The same losses (to 6 digits: the sums run in another order).
// SAME: {"step":1,"loss":[[L1:[0-9]+\.[0-9]{5}]]
// SAME: {"step":2,"loss":[[L2:[0-9]+\.[0-9]{5}]]
// SAME: {"step":3,"loss":[[L3:[0-9]+\.[0-9]{5}]]
// SAME: {"step":1,"loss":[[L1]]
// SAME: {"step":2,"loss":[[L2]]
// SAME: {"step":3,"loss":[[L3]]

// The partitioner's choices are its own tests'; here: --mesh runs it, and
// data parallelism all-reduces the gradients over dp in the backward.
// PIPELINE: communication per rank (mesh dp=2,tp=2)
// PIPELINE: backward all_reduce dp
// PIPELINE: step (backward+update)
// LOWERED: llvm.func @tessel_fn_loss_backward
// LOWERED: llvm.call @tessel_all_reduce{{(_start)?}}(

// SIZE: tessel-compile: --mesh dp=0: mesh entry 'dp=0' is not name=size (a name and a positive size)
// ENTRY: tessel-compile: --mesh dp=2,tp: mesh entry 'tp' is not name=size (a name and a positive size)
// NAME: tessel-compile: --mesh DP=2: the axis name 'DP' is not [a-z_][a-z0-9_]*
// TWICE: tessel-compile: --mesh dp=2,dp=4: mesh axis 'dp' is given twice
// EMPTY: tessel-compile: --mesh: expected name=size entries, e.g. dp=2,tp=2
// HUGE: tessel-compile: --mesh a=65536,b=65536: more than 2^31 - 1 devices (at the axis 'b')
// AXES: tessel-compile: --mesh a=1,b=1,c=1,d=1,e=1,f=1,g=1,h=1,i=1: a mesh has at most 8 axes
// RULES: tessel-compile: --rules: 'batch': expected logical=mesh, e.g. batch=dp
// BUCKET: tessel-compile: --bucket-mb -1.00: the bucket size must be >= 0 MiB (0: one all-reduce per gradient)
// NOMESH: tessel-compile: --rules applies to a step split over a device mesh; give --mesh too
// NOMESH-BN: tessel-compile: --local-batchnorm applies to a step split over a device mesh; give --mesh too
