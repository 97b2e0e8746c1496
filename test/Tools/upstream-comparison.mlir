// Tests that upstream MLIR's sharding-propagation + shard-partition still
// insert the collectives that docs/upstream-comparison.md reports, on every
// model of docs/upstream-comparison/, mesh and traversal order (the default,
// backward-forward, first; forward crashes in MLIR 22.1.8): the doc's
// upstream columns cannot drift from what mlir-opt does. When this fails
// after an LLVM update, rerun scripts/compare-upstream.sh --update-doc and
// update these lines from scripts/compare-upstream.sh --upstream-only.
// Tessel's side is checked by the partitioner's own tests.
//
// RUN: %S/../../scripts/compare-upstream.sh --upstream-only | FileCheck %s --match-full-lines

// CHECK: mlp forward | tp=2 | backward-forward: all_reduce tp 1x 1280 | total 1280
// CHECK-NEXT: mlp forward | tp=2 | forward-backward: all_reduce tp 1x 1280 | total 1280
// CHECK-NEXT: mlp forward | tp=2 | backward: all_reduce tp 1x 1280 | total 1280
// CHECK-NEXT: mlp forward | tp=2 | forward: FAILED crash (signal 11) in mlir::shard::shardShapedType
// CHECK-NEXT: mlp forward | dp=2 | backward-forward: all_gather dp 2x 131200 | total 131200
// CHECK-NEXT: mlp forward | dp=2 | forward-backward: all_reduce dp 1x 4 | total 4
// CHECK-NEXT: mlp forward | dp=2 | backward: all_gather dp 2x 131200 | total 131200
// CHECK-NEXT: mlp forward | dp=2 | forward: FAILED crash (signal 11) in mlir::shard::shardShapedType
// CHECK-NEXT: mlp forward | dp=2,tp=2 | backward-forward: all_reduce tp 1x 1280; all_gather dp 2x 65664 | total 66944
// CHECK-NEXT: mlp forward | dp=2,tp=2 | forward-backward: all_reduce dp 1x 4; all_reduce tp 1x 640 | total 644
// CHECK-NEXT: mlp forward | dp=2,tp=2 | backward: all_reduce tp 1x 1280; all_gather dp 2x 65664 | total 66944
// CHECK-NEXT: mlp forward | dp=2,tp=2 | forward: FAILED crash (signal 11) in mlir::shard::shardShapedType
// CHECK-NEXT: mlp forward+backward | tp=2 | backward-forward: all_reduce tp 1x 1280 | total 1280
// CHECK-NEXT: mlp forward+backward | tp=2 | forward-backward: all_reduce tp 1x 1280 | total 1280
// CHECK-NEXT: mlp forward+backward | tp=2 | backward: all_reduce tp 1x 1280 | total 1280
// CHECK-NEXT: mlp forward+backward | tp=2 | forward: FAILED crash (signal 11) in mlir::shard::shardShapedType
// CHECK-NEXT: mlp forward+backward | dp=2 | backward-forward: all_reduce dp 1x 3211264; all_gather dp 3x 132480 | total 3343744
// CHECK-NEXT: mlp forward+backward | dp=2 | forward-backward: all_reduce dp 5x 3256364 | total 3256364
// CHECK-NEXT: mlp forward+backward | dp=2 | backward: all_reduce dp 1x 3211264; all_gather dp 3x 132480 | total 3343744
// CHECK-NEXT: mlp forward+backward | dp=2 | forward: FAILED crash (signal 11) in mlir::shard::shardShapedType
// CHECK-NEXT: mlp forward+backward | dp=2,tp=2 | backward-forward: all_reduce dp 1x 1605632; all_reduce tp 1x 1280; all_gather dp 3x 66944 | total 1673856
// CHECK-NEXT: mlp forward+backward | dp=2,tp=2 | forward-backward: all_reduce dp 5x 1628204; all_reduce tp 1x 640 | total 1628844
// CHECK-NEXT: mlp forward+backward | dp=2,tp=2 | backward: all_reduce dp 1x 1605632; all_reduce tp 1x 1280; all_gather dp 3x 66944 | total 1673856
// CHECK-NEXT: mlp forward+backward | dp=2,tp=2 | forward: FAILED crash (signal 11) in mlir::shard::shardShapedType
// CHECK-NEXT: gpt block forward | tp=2 | backward-forward: all_reduce tp 2x 524288 | total 524288
// CHECK-NEXT: gpt block forward | tp=2 | forward-backward: all_reduce tp 2x 524288 | total 524288
// CHECK-NEXT: gpt block forward | tp=2 | backward: all_reduce tp 2x 524288 | total 524288
// CHECK-NEXT: gpt block forward | tp=2 | forward: FAILED crash (signal 11) in mlir::shard::shardShapedType
// CHECK-NEXT: gpt block forward | dp=2 | backward-forward: all_gather dp 1x 262144 | total 262144
// CHECK-NEXT: gpt block forward | dp=2 | forward-backward: all_reduce dp 1x 4 | total 4
// CHECK-NEXT: gpt block forward | dp=2 | backward: all_gather dp 1x 262144 | total 262144
// CHECK-NEXT: gpt block forward | dp=2 | forward: FAILED crash (signal 11) in mlir::shard::shardShapedType
// CHECK-NEXT: gpt block forward | dp=2,tp=2 | backward-forward: all_reduce tp 2x 393216; all_gather dp 1x 262144 | total 655360
// CHECK-NEXT: gpt block forward | dp=2,tp=2 | forward-backward: all_reduce dp 1x 4; all_reduce tp 2x 262144 | total 262148
// CHECK-NEXT: gpt block forward | dp=2,tp=2 | backward: all_reduce tp 2x 393216; all_gather dp 1x 262144 | total 655360
// CHECK-NEXT: gpt block forward | dp=2,tp=2 | forward: FAILED crash (signal 11) in mlir::shard::shardShapedType
// CHECK-NEXT: gpt block forward+backward | tp=2 | backward-forward: all_reduce tp 6x 1572864 | total 1572864
// CHECK-NEXT: gpt block forward+backward | tp=2 | forward-backward: all_reduce tp 6x 1572864 | total 1572864
// CHECK-NEXT: gpt block forward+backward | tp=2 | backward: all_reduce tp 6x 1572864 | total 1572864
// CHECK-NEXT: gpt block forward+backward | tp=2 | forward: FAILED crash (signal 11) in mlir::shard::shardShapedType
// CHECK-NEXT: gpt block forward+backward | dp=2 | backward-forward: all_reduce dp 1x 512; all_gather dp 8x 2359296 | total 2359808
// CHECK-NEXT: gpt block forward+backward | dp=2 | forward-backward: all_reduce dp 16x 792580; all_gather dp 1x 262144 | total 1054724
// CHECK-NEXT: gpt block forward+backward | dp=2 | backward: all_reduce dp 1x 512; all_gather dp 8x 2359296 | total 2359808
// CHECK-NEXT: gpt block forward+backward | dp=2 | forward: FAILED crash (signal 11) in mlir::shard::shardShapedType
// CHECK-NEXT: gpt block forward+backward | dp=2,tp=2 | backward-forward: all_reduce dp 1x 512; all_reduce tp 6x 1048576; all_gather dp 8x 1572864 | total 2621952
// CHECK-NEXT: gpt block forward+backward | dp=2,tp=2 | forward-backward: all_reduce dp 16x 397572; all_reduce tp 6x 786432; all_gather dp 1x 262144 | total 1446148
// CHECK-NEXT: gpt block forward+backward | dp=2,tp=2 | backward: all_reduce dp 1x 512; all_reduce tp 6x 1048576; all_gather dp 8x 1572864 | total 2621952
// CHECK-NEXT: gpt block forward+backward | dp=2,tp=2 | forward: FAILED crash (signal 11) in mlir::shard::shardShapedType
// CHECK-NOT: {{.}}
