// Tests that the report says what each recompute policy keeps of the GPT
// example's 4 repeated blocks (batch 8, sequence 64, hidden 128, MLP 512;
// an [8, 64, 128] f32 activation is 256 KiB, an [8, 64, 512] one 1 MiB):
// - none keeps what every backward op reads, per layer: the input, ln_1's
//   output, q, k and v, the attention output, the residual, ln_2's output
//   (8 x 256 KiB), the MLP pre-activation and the GELU output (2 x 1 MiB)
//   and the attention's log-sum-exp ([8, 4, 64] f32, 8 KiB): 4 MiB + 8 KiB,
//   16 MiB + 32 KiB in all (the attention output is kept once, though the
//   backward reads it and its reshape: a reshape is a view);
// - selective keeps the input and the results of matmuls and attention
//   the backward needs: q, k, v, attention, c_proj (5 x 256 KiB), c_fc
//   (1 MiB) and the log-sum-exp: 2.5 MiB + 8 KiB, 10 MiB + 32 KiB in all;
// - full keeps the input only: 256 KiB, 1 MiB in all.
// RUN: tessel-compile %examples/gpt.mlir --recompute none -o %t.none.so --report | FileCheck %s --check-prefix=NONE
// RUN: tessel-compile %examples/gpt.mlir --recompute selective -o %t.sel.so --report | FileCheck %s --check-prefix=SELECTIVE
// RUN: tessel-compile %examples/gpt.mlir --recompute full -o %t.full.so --report | FileCheck %s --check-prefix=FULL

// NONE: layer activations kept 16809984 bytes (recompute none)
// SELECTIVE: layer activations kept 10518528 bytes (recompute selective)
// FULL: layer activations kept 1048576 bytes (recompute full)
