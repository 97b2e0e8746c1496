// Tests that the report says what each recompute policy keeps of the GPT
// example's 4 repeated blocks (batch 8, sequence 64, hidden 128, MLP 512;
// an [8, 64, 128] f32 activation is 256 KiB, an [8, 64, 512] one 1 MiB):
// - none keeps what every backward op reads, per layer: the input, ln_1's
//   output, q, k and v, the attention output, the residual, ln_2's output
//   (8 x 256 KiB), the MLP pre-activation and the GELU output (2 x 1 MiB):
//   4 MiB, 16 MiB in all;
// - selective keeps the input and the results of matmuls and attention
//   the backward needs: q, k, v, attention, c_proj (5 x 256 KiB) and
//   c_fc (1 MiB): 2.5 MiB, 10 MiB in all;
// - full keeps the input only: 256 KiB, 1 MiB in all.
// RUN: tessel-compile %examples/gpt.mlir --recompute none -o %t.none.so --report | FileCheck %s --check-prefix=NONE
// RUN: tessel-compile %examples/gpt.mlir --recompute selective -o %t.sel.so --report | FileCheck %s --check-prefix=SELECTIVE
// RUN: tessel-compile %examples/gpt.mlir --recompute full -o %t.full.so --report | FileCheck %s --check-prefix=FULL

// NONE: layer activations kept 16777216 bytes (recompute none)
// SELECTIVE: layer activations kept 10485760 bytes (recompute selective)
// FULL: layer activations kept 1048576 bytes (recompute full)
