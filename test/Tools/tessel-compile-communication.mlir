// Tests that the communication of examples/gpt.mlir on a mesh is exactly
// the analytical figure, per rank and step (b = 8, s = 64, h = 128, V = 256,
// 4 blocks; one activation b·s·h·4 = 262,144 bytes, one value per position
// b·s·4 = 2,048 bytes, the parameters 834,304 · 4 = 3,337,216 bytes).
// tessel-run checks the runtime's counters against these reports after the
// first step (ParallelEquivalenceTest).
//
// RUN: tessel-compile %examples/gpt.mlir --mesh dp=2 --report -o %t.dp.so | FileCheck %s --check-prefix=DP
// RUN: tessel-compile %examples/gpt.mlir --mesh tp=2 --report -o %t.tp.so | FileCheck %s --check-prefix=TP
// RUN: tessel-compile %examples/gpt.mlir --mesh tp=2 --sequence-parallel --report -o %t.sp.so | FileCheck %s --check-prefix=SP

// Data parallel: the loss once (4 bytes); the backward all-reduces every
// gradient once, 3,337,216 bytes, + the loss, in 6 calls: one bucket per
// repeated layer (4, each issued when its layer's backward is done), one
// for the embeddings and the final norm, and the loss.
// DP: communication per rank (mesh dp=2)
// DP-NEXT: entry     collective      axes         calls            bytes       ring bytes
// DP-NEXT: forward   all_reduce      dp               1                4                4
// DP-NEXT: backward  all_reduce      dp               6          3337220          3337220

// Tensor parallel (Megatron), forward: 2 all-reduces of b·s·h per block
// (8 × 262,144), the vocabulary-parallel embedding's output (262,144) and
// the vocabulary-parallel cross-entropy's row maximum, Σexp and label logit
// (3 × 2,048: one value per position each, never the logits) = 2,365,440.
// Backward (the training step recomputes the forward): the forward's 12
// (its cross-entropy statistics serve the gradient too), 2 per block (8 ×
// 262,144) and the LM head's input gradient (262,144) = 4,724,736.
// TP: communication per rank (mesh tp=2)
// TP-NEXT: entry     collective      axes         calls            bytes       ring bytes
// TP-NEXT: forward   all_reduce      tp              12          2365440          2365440
// TP-NEXT: backward  all_reduce      tp              21          4724736          4724736
// TP-NEXT: step (backward+update)                    21          4724736          4724736

// Sequence parallel, forward: each block's 2 all-reduces become 2
// reduce-scatters and 2 all-gathers of b·s·h, the same ring volume (per
// block 4 × 131,072 = 524,288 ring bytes, as 2 all-reduces of 262,144);
// the embedding's partial sum is reduce-scattered into the sequence split
// (9 reduce-scatters); the token ids (2,048) and the final norm's output
// for the LM head (262,144) are gathered (10 all-gathers); the
// cross-entropy's 3 reductions of b·s values stay.
// SP: communication per rank (mesh tp=2)
// SP-NEXT: entry     collective      axes         calls            bytes       ring bytes
// SP-NEXT: forward   all_reduce      tp               3             6144             6144
// SP-NEXT: forward   all_gather      tp              10          2361344          1180672
// SP-NEXT: forward   reduce_scatter  tp               9          2359296          1179648
