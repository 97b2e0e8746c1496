// RUN: tessel-opt %s -tessel-plan-memory --split-input-file | FileCheck %s
// RUN: tessel-opt %s -tessel-plan-memory=report=true --split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT

// Tests that values live at the same time get distinct bytes and that the
// returned value is computed straight into the caller's result memory
// (-2: result 0), taking no scratch; the peak is two buffers.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: tessel.scratch_bytes = 256
// CHECK: nn.exp %{{.*}} {tessel.offsets = array<i64: 0>}
// CHECK: nn.tanh %{{.*}} {tessel.offsets = array<i64: 128>}
// CHECK: nn.exp %{{.*}} {tessel.offsets = array<i64: -2>}
// REPORT: remark: scratch peak of @chain: 256 bytes (live bytes at most 256)
func.func @chain(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = nn.exp %a : tensor<4x8xf32>
  %1 = nn.tanh %0 : tensor<4x8xf32>
  %2 = nn.exp %1 : tensor<4x8xf32>
  return %2 : tensor<4x8xf32>
}

// -----

// Tests that a value used later stays live (no reuse while %0 is needed) and
// that sizes round up to 64 bytes (3 floats take 64).
// CHECK-LABEL: func.func @long_lived
// CHECK-SAME: tessel.scratch_bytes = 192
// CHECK: nn.exp %{{.*}} {tessel.offsets = array<i64: 0>}
// CHECK: nn.tanh %{{.*}} {tessel.offsets = array<i64: 64>}
// CHECK: nn.neg %{{.*}} {tessel.offsets = array<i64: 128>}
// CHECK: nn.add %{{.*}} {tessel.offsets = array<i64: -2>}
func.func @long_lived(%a: tensor<3xf32>) -> tensor<3xf32> {
  %0 = nn.exp %a : tensor<3xf32>
  %1 = nn.tanh %0 : tensor<3xf32>
  %2 = nn.neg %1 : tensor<3xf32>
  %3 = nn.add %0, %2 : tensor<3xf32>
  return %3 : tensor<3xf32>
}

// -----

// Tests that a reshape is a view: it shares its operand's offset and keeps
// the operand alive; a reshape of an argument takes no scratch (-1).
// CHECK-LABEL: func.func @views
// CHECK-SAME: tessel.scratch_bytes = 128
// CHECK: nn.reshape %{{.*}} {tessel.offsets = array<i64: -1>}
// CHECK: nn.exp %{{.*}} {tessel.offsets = array<i64: 0>}
// CHECK: nn.reshape %{{.*}} {tessel.offsets = array<i64: 0>}
// CHECK: nn.tanh %{{.*}} {tessel.offsets = array<i64: 64>}
func.func @views(%a: tensor<2x8xf32>) -> tensor<16xf32> {
  %r = nn.reshape %a : tensor<2x8xf32> -> tensor<16xf32>
  %0 = nn.exp %r : tensor<16xf32>
  %1 = nn.reshape %0 : tensor<16xf32> -> tensor<4x4xf32>
  %2 = nn.tanh %1 : tensor<4x4xf32>
  %3 = nn.reshape %2 : tensor<4x4xf32> -> tensor<16xf32>
  return %3 : tensor<16xf32>
}

// -----

// Tests that nn.repeat plans its layer first and reserves a workspace of one
// carried buffer (64) plus the layer's scratch (none: the layer computes
// its result straight into the buffer it is given), live only at the
// repeat, whose own result is the function's.
// CHECK-LABEL: func.func private @layer
// CHECK-SAME: tessel.scratch_bytes = 0
// CHECK-LABEL: func.func @stack
// CHECK-SAME: tessel.scratch_bytes = 64
// CHECK: nn.repeat @layer({{.*}}) params({{.*}}) {tessel.offsets = array<i64: -2>, tessel.workspace = 0 : i64}
// REPORT: remark: scratch peak of @layer: 0 bytes
// REPORT: remark: scratch peak of @stack: 64 bytes
func.func private @layer(%h: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  %0 = nn.mul %h, %w : tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func @stack(%h: tensor<4xf32>, %w: tensor<3x4xf32>) -> tensor<4xf32> {
  %0 = nn.repeat @layer(%h) params(%w) : (tensor<4xf32>, tensor<3x4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that an in-place update (DestinationStyleOpInterface) takes its
// init's bytes: a function argument's (-1, the caller's memory) or a
// scratch buffer's (%e's offset 0), which stays live through the update's
// uses.
// CHECK-LABEL: func.func @in_place
// CHECK-SAME: tessel.scratch_bytes = 256
// CHECK: nn.exp %{{.*}} {tessel.offsets = array<i64: 0>}
// CHECK: nn.accumulate %{{.*}} outs(%{{.*}}) {tessel.offsets = array<i64: -1>}
// CHECK: nn.tanh %{{.*}} {tessel.offsets = array<i64: 128>}
// CHECK: nn.accumulate %{{.*}} outs(%{{.*}}) {tessel.offsets = array<i64: 0>}
// CHECK: nn.add %{{.*}} {tessel.offsets = array<i64: -2>}
func.func @in_place(%g: tensor<4x8xf32>, %acc: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = nn.exp %g : tensor<4x8xf32>
  %a = nn.accumulate %e outs(%acc) : tensor<4x8xf32>
  %t = nn.tanh %g : tensor<4x8xf32>
  %b = nn.accumulate %t outs(%e) : tensor<4x8xf32>
  %s = nn.add %a, %b : tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}

// -----

// Tests that a repeat's stacked result is one buffer of L slices (here the
// function's result, -2) beside the workspace (one spare carried buffer of
// 128 and the layer's 128 of scratch at 0) and the final carried value at
// 256.
// CHECK-LABEL: func.func @stacked
// CHECK-SAME: tessel.scratch_bytes = 384
// CHECK: nn.repeat @keep(%{{.*}}) params(%{{.*}}) {tessel.offsets = array<i64: 256, -2>, tessel.workspace = 0 : i64}
func.func private @keep(%h: tensor<4x8xf32>, %w: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %t = nn.tanh %h : tensor<4x8xf32>
  %wb = nn.broadcast %w dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %m = nn.mul %t, %wb : tensor<4x8xf32>
  return %m, %h : tensor<4x8xf32>, tensor<4x8xf32>
}
func.func @stacked(%h: tensor<4x8xf32>, %w: tensor<3x8xf32>) -> tensor<3x4x8xf32> {
  %y, %hs = nn.repeat @keep(%h) params(%w) : (tensor<4x8xf32>, tensor<3x8xf32>) -> (tensor<4x8xf32>, tensor<3x4x8xf32>)
  return %hs : tensor<3x4x8xf32>
}

// -----

// Tests that a repeat's outs result is its operand's memory: an argument's
// (-1) when the outs is one, the buffer of the value it updates otherwise
// (the exp's, at 0, which the function then returns from: the sum is
// computed there and copied out); and that a bias gradient's GEMM adding
// into an accumulator takes the accumulator's memory for its product
// (-1: the layer's argument) and a buffer of its own for the bias
// gradient (here the layer's result, -4).
// CHECK-LABEL: func.func private @acc_layer
// CHECK: nn.matmul_bias_grad {{.*}} {tessel.offsets = array<i64: -1, -4>}
// CHECK-LABEL: func.func @outs_in_place
// CHECK: nn.exp {{.*}} {tessel.offsets = array<i64: 0>}
// CHECK: nn.repeat @acc_layer({{.*}}) params({{.*}}) outs({{.*}}) {tessel.offsets = array<i64: {{[0-9]+}}, 0, -3>, tessel.workspace = {{[0-9]+}} : i64}
// CHECK: nn.repeat @acc_layer({{.*}}) params({{.*}}) outs(%arg2) {tessel.offsets = array<i64: {{[0-9]+}}, -1, {{[0-9]+}}>, tessel.workspace = {{[0-9]+}} : i64}
func.func private @acc_layer(%dy: tensor<2x4xf32>, %x: tensor<2x2xf32>, %g: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<4xf32>) {
  %g2, %db = nn.matmul_bias_grad %x, %dy transpose_lhs outs(%g) : (tensor<2x2xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<4xf32>)
  return %dy, %g2, %db : tensor<2x4xf32>, tensor<2x4xf32>, tensor<4xf32>
}
func.func @outs_in_place(%dy: tensor<2x4xf32>, %x: tensor<3x2x2xf32>, %g: tensor<3x2x4xf32>) -> (tensor<3x2x4xf32>, tensor<3x4xf32>, tensor<3x2x4xf32>) {
  %e = nn.exp %g : tensor<3x2x4xf32>
  %0:3 = nn.repeat @acc_layer(%dy) params(%x) outs(%e) : (tensor<2x4xf32>, tensor<3x2x2xf32>, tensor<3x2x4xf32>) -> (tensor<2x4xf32>, tensor<3x2x4xf32>, tensor<3x4xf32>)
  %1:3 = nn.repeat @acc_layer(%dy) params(%x) outs(%g) : (tensor<2x4xf32>, tensor<3x2x2xf32>, tensor<3x2x4xf32>) -> (tensor<2x4xf32>, tensor<3x2x4xf32>, tensor<3x4xf32>)
  return %0#1, %0#2, %1#1 : tensor<3x2x4xf32>, tensor<3x4xf32>, tensor<3x2x4xf32>
}

// -----

// Tests that only a value returned from a buffer of its own is computed in
// the caller's memory: a value returned twice goes to the first result (the
// second is a copy), and a returned view keeps its operand's scratch.
// CHECK-LABEL: func.func @returned_twice
// CHECK: nn.exp %{{.*}} {tessel.offsets = array<i64: -3>}
// CHECK: nn.tanh %{{.*}} {tessel.offsets = array<i64: 0>}
// CHECK: nn.reshape %{{.*}} {tessel.offsets = array<i64: 0>}
func.func @returned_twice(%a: tensor<2x8xf32>) -> (tensor<16xf32>, tensor<2x8xf32>, tensor<2x8xf32>) {
  %e = nn.exp %a : tensor<2x8xf32>
  %t = nn.tanh %a : tensor<2x8xf32>
  %r = nn.reshape %t : tensor<2x8xf32> -> tensor<16xf32>
  return %r, %e, %e : tensor<16xf32>, tensor<2x8xf32>, tensor<2x8xf32>
}

// -----

// Tests that an all-reduce sums in place when nothing reads its input
// afterwards (the input's offset), and that a returned one sums in the
// caller's result memory, its input computed there too (-2).
// CHECK-LABEL: func.func @reduce_in_place
// CHECK-SAME: tessel.scratch_bytes = 128
// CHECK: nn.exp %{{.*}} {tessel.offsets = array<i64: 0>}
// CHECK: shard.all_reduce %{{.*}} {tessel.offsets = array<i64: 0>}
// CHECK: nn.tanh %{{.*}} {tessel.offsets = array<i64: -2>}
// CHECK: shard.all_reduce %{{.*}} {tessel.offsets = array<i64: -2>}
shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
func.func @reduce_in_place(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = nn.exp %a : tensor<4x8xf32>
  %1 = shard.all_reduce %0 on @mesh grid_axes = [0] : tensor<4x8xf32> -> tensor<4x8xf32>
  %2 = nn.tanh %1 : tensor<4x8xf32>
  %3 = shard.all_reduce %2 on @mesh grid_axes = [0] : tensor<4x8xf32> -> tensor<4x8xf32>
  return %3 : tensor<4x8xf32>
}

// -----

// Tests that an all-reduce gets bytes of its own when its input is read
// later (%0), is an argument (%a), or shares its bytes with a view (%2 and
// its reshape), and that every other collective's result has its own bytes
// like any op's.
// CHECK-LABEL: func.func @reduce_copies
// CHECK-SAME: tessel.scratch_bytes = 192
// CHECK: nn.exp %{{.*}} {tessel.offsets = array<i64: 0>}
// CHECK: shard.all_reduce %{{.*}} {tessel.offsets = array<i64: 64>}
// CHECK: nn.add %{{.*}} {tessel.offsets = array<i64: 128>}
// CHECK: shard.all_reduce %{{.*}} {tessel.offsets = array<i64: 0>}
// CHECK: nn.reshape %{{.*}} {tessel.offsets = array<i64: 128>}
// CHECK: shard.all_reduce %{{.*}} {tessel.offsets = array<i64: 64>}
// CHECK: nn.add %{{.*}} {tessel.offsets = array<i64: -2>}
// CHECK: shard.all_gather %{{.*}} {tessel.offsets = array<i64: 0>}
shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
func.func @reduce_copies(%a: tensor<16xf32>) -> (tensor<16xf32>, tensor<4x4xf32>) {
  %0 = nn.exp %a : tensor<16xf32>
  %1 = shard.all_reduce %0 on @mesh grid_axes = [0] : tensor<16xf32> -> tensor<16xf32>
  %2 = nn.add %0, %1 : tensor<16xf32>
  %3 = shard.all_reduce %a on @mesh grid_axes = [0] : tensor<16xf32> -> tensor<16xf32>
  %r = nn.reshape %2 : tensor<16xf32> -> tensor<4x4xf32>
  %4 = shard.all_reduce %2 on @mesh grid_axes = [0] : tensor<16xf32> -> tensor<16xf32>
  %5 = nn.add %3, %4 : tensor<16xf32>
  %6 = shard.all_gather %r on @mesh grid_axes = [0] gather_axis = 0 : tensor<4x4xf32> -> tensor<8x4xf32>
  %7 = nn.slice %6 start = [0, 0] limit = [4, 4] : tensor<8x4xf32> -> tensor<4x4xf32>
  return %5, %7 : tensor<16xf32>, tensor<4x4xf32>
}

// -----

// Tests that an asynchronous collective's input stays alive until its wait:
// the tanh between them gets bytes of its own (64), where a blocking gather
// would have let it reuse the input's (0). The wait's result is the
// gather's memory, here the caller's result 0.
// CHECK-LABEL: func.func @async_input_lives_to_wait
// CHECK-SAME: tessel.scratch_bytes = 128
// CHECK: nn.exp %arg0 {tessel.offsets = array<i64: 0>}
// CHECK: shard.all_gather {{.*}} {nn.async, tessel.offsets = array<i64: -2>}
// CHECK: nn.tanh %arg0 {tessel.offsets = array<i64: 64>}
// CHECK: nn.wait %{{.*}} {tessel.offsets = array<i64: -2>}
shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
func.func @async_input_lives_to_wait(%x: tensor<16xf32>) -> (tensor<32xf32>, tensor<16xf32>) {
  %a = nn.exp %x : tensor<16xf32>
  %g = shard.all_gather %a on @mesh grid_axes = [0] gather_axis = 0 {nn.async} : tensor<16xf32> -> tensor<32xf32>
  %b = nn.tanh %x : tensor<16xf32>
  %c = nn.exp %b : tensor<16xf32>
  %w = nn.wait %g : tensor<32xf32>
  return %w, %c : tensor<32xf32>, tensor<16xf32>
}

// -----

// Tests that a repeat with a prefetch reserves two slots of what it
// gathers after the layer's scratch: 128 (the carried copy) + 256 (the
// layer's scratch) + 2 x (256 + 64) = 1024 bytes of workspace; the
// prefetch returns its gathers straight into the slot it is given (no
// scratch), and the layer reads its prefetched arguments in place.
// CHECK-LABEL: func.func private @layer
// CHECK-SAME: tessel.scratch_bytes = 256
// CHECK: nn.wait %arg3 {tessel.offsets = array<i64: -1>}
// CHECK-LABEL: func.func private @layer_prefetch
// CHECK-SAME: tessel.scratch_bytes = 0
// CHECK: shard.all_gather {{.*}} {nn.async, tessel.offsets = array<i64: -2>}
// CHECK: shard.all_gather {{.*}} {nn.async, tessel.offsets = array<i64: -3>}
// CHECK-LABEL: func.func @stack
// CHECK-SAME: tessel.scratch_bytes = 1024
// CHECK: nn.repeat {{.*}} prefetch @layer_prefetch {tessel.offsets = array<i64: -2>, tessel.workspace = 0 : i64}
shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
func.func private @layer(%h: tensor<4x8xf32>, %w: tensor<32xf32>, %b: tensor<4xf32>,
                         %gw: tensor<64xf32> {nn.prefetched}, %gb: tensor<8xf32> {nn.prefetched}) -> tensor<4x8xf32> {
  %e = nn.exp %h : tensor<4x8xf32>
  %1 = nn.wait %gw : tensor<64xf32>
  %2 = nn.reshape %1 : tensor<64xf32> -> tensor<8x8xf32>
  %3 = nn.matmul %e, %2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %4 = nn.wait %gb : tensor<8xf32>
  %5 = nn.broadcast %4 dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %6 = nn.add %3, %5 : tensor<4x8xf32>
  return %6 : tensor<4x8xf32>
}
func.func private @layer_prefetch(%w: tensor<32xf32>, %b: tensor<4xf32>) -> (tensor<64xf32>, tensor<8xf32>) attributes {nn.prefetch} {
  %g = shard.all_gather %w on @mesh grid_axes = [0] gather_axis = 0 {nn.async} : tensor<32xf32> -> tensor<64xf32>
  %gb = shard.all_gather %b on @mesh grid_axes = [0] gather_axis = 0 {nn.async} : tensor<4xf32> -> tensor<8xf32>
  return %g, %gb : tensor<64xf32>, tensor<8xf32>
}
func.func @stack(%h: tensor<4x8xf32>, %w: tensor<3x32xf32>, %b: tensor<3x4xf32>) -> tensor<4x8xf32> {
  %0 = nn.repeat @layer(%h) params(%w, %b) prefetch @layer_prefetch : (tensor<4x8xf32>, tensor<3x32xf32>, tensor<3x4xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that a repeat with a finish reserves two slots of what its layer
// returns in flight, and the larger of the layer's and the finish's
// scratch (they never run at once): 128 (the carried copy) + max(0, 0)
// + 2 x 320 (the 288-byte bucket) = 768 bytes of workspace. The bucket's
// gradients are computed straight into the slot (the weight gradient at
// its start, the bias gradient 256 bytes in: the layer needs no scratch
// and its concat copies nothing) and summed there in place; the finish
// reads the slot in place, its slices are views of it (tessel.view), and
// its return copies them out.
// CHECK-LABEL: func.func private @grad_layer
// CHECK-SAME: tessel.scratch_bytes = 0
// CHECK-NEXT: nn.matmul {{.*}} {tessel.offsets = array<i64: -4>}
// CHECK-NEXT: nn.reduce_sum {{.*}} {tessel.offsets = array<i64: -4>, tessel.sub_offsets = array<i64: 256>}
// CHECK: nn.concat {{.*}} {tessel.in_place_inputs = array<i1: true, true>, tessel.offsets = array<i64: -4>}
// CHECK-NEXT: shard.all_reduce {{.*}} {nn.async, tessel.offsets = array<i64: -4>}
// CHECK-LABEL: func.func private @grad_layer_finish
// CHECK-SAME: tessel.scratch_bytes = 0
// CHECK-NEXT: nn.wait %arg0 {tessel.offsets = array<i64: -1>}
// CHECK-NEXT: nn.slice {{.*}} {tessel.offsets = array<i64: -1>, tessel.view}
// CHECK-NEXT: nn.slice {{.*}} {tessel.offsets = array<i64: -1>, tessel.view}
// CHECK-LABEL: func.func @backward
// CHECK-SAME: tessel.scratch_bytes = 768
// CHECK: nn.repeat {{.*}} finish @grad_layer_finish {tessel.offsets = array<i64: -2, -5, -3, -4>, tessel.workspace = 0 : i64}
shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}
func.func private @grad_layer(%arg0: tensor<4x8xf32>, %arg1: tensor<8x8xf32>, %arg2: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<72xf32> {nn.in_flight}) {
  %0 = nn.matmul %arg2, %arg0 transpose_lhs : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %1 = nn.reduce_sum %arg0 dims = [0] : tensor<4x8xf32> -> tensor<8xf32>
  %2 = nn.reshape %0 : tensor<8x8xf32> -> tensor<64xf32>
  %3 = nn.concat %2, %1 dim = 0 : (tensor<64xf32>, tensor<8xf32>) -> tensor<72xf32>
  %all_reduce = shard.all_reduce %3 on @mesh grid_axes = [0] {nn.async} : tensor<72xf32> -> tensor<72xf32>
  %4 = nn.matmul %arg0, %arg1 transpose_rhs : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %5 = nn.exp %4 : tensor<4x8xf32>
  return %4, %5, %all_reduce : tensor<4x8xf32>, tensor<4x8xf32>, tensor<72xf32>
}
func.func private @grad_layer_finish(%arg0: tensor<72xf32>) -> (tensor<8x8xf32>, tensor<8xf32>) attributes {nn.finish} {
  %0 = nn.wait %arg0 : tensor<72xf32>
  %1 = nn.slice %0 start = [64] limit = [72] : tensor<72xf32> -> tensor<8xf32>
  %2 = nn.slice %0 start = [0] limit = [64] : tensor<72xf32> -> tensor<64xf32>
  %3 = nn.reshape %2 : tensor<64xf32> -> tensor<8x8xf32>
  return %3, %1 : tensor<8x8xf32>, tensor<8xf32>
}
func.func @backward(%arg0: tensor<4x8xf32>, %arg1: tensor<3x8x8xf32>, %arg2: tensor<3x4x8xf32>) -> (tensor<4x8xf32>, tensor<3x8x8xf32>, tensor<3x8xf32>, tensor<3x4x8xf32>) {
  %0:4 = nn.repeat @grad_layer(%arg0) params(%arg1, %arg2) reverse finish @grad_layer_finish : (tensor<4x8xf32>, tensor<3x8x8xf32>, tensor<3x4x8xf32>) -> (tensor<4x8xf32>, tensor<3x4x8xf32>, tensor<3x8x8xf32>, tensor<3x8xf32>)
  return %0#0, %0#2, %0#3, %0#1 : tensor<4x8xf32>, tensor<3x8x8xf32>, tensor<3x8xf32>, tensor<3x4x8xf32>
}

// -----

// Tests that a loss gradient written in place takes the logits' bytes
// (offset 0; the scratch is the logits' 512 bytes alone), and one apart a
// buffer of its own beside them (1,024 bytes).
// CHECK-LABEL: func.func @loss_gradient_in_place
// CHECK-SAME: tessel.scratch_bytes = 512
// CHECK: nn.exp %{{.*}} {tessel.offsets = array<i64: 0>}
// CHECK: nn.cross_entropy_with_grad %{{.*}} in_place {tessel.offsets = array<i64: -2, 0>}
func.func @loss_gradient_in_place(%x: tensor<8x16xf32>, %y: tensor<8xi32>, %dl: tensor<f32>) -> (tensor<f32>, tensor<8x16xf32>) {
  %z = nn.exp %x : tensor<8x16xf32>
  %l, %g = nn.cross_entropy_with_grad %z, %y, %dl in_place : (tensor<8x16xf32>, tensor<8xi32>, tensor<f32>) -> (tensor<f32>, tensor<8x16xf32>)
  %n = nn.neg %g : tensor<8x16xf32>
  return %l, %n : tensor<f32>, tensor<8x16xf32>
}

// Tests that a vocabulary-parallel block's gradient written in place takes
// the block's logits' bytes too (offset 0; the statistics after them).
// CHECK-LABEL: func.func @vocab_gradient_in_place
// CHECK: nn.exp %{{.*}} {tessel.offsets = array<i64: 0>}
// CHECK: nn.vocab_loss_grad %{{.*}} in_place {tessel.offsets = array<i64: 0>}
func.func @vocab_gradient_in_place(%x: tensor<8x16xf32>, %y: tensor<8xi32>, %g: tensor<8xf32>) -> tensor<8x16xf32> {
  %z = nn.exp %x : tensor<8x16xf32>
  %m, %s, %zy, %zs = nn.vocab_loss_stats %z, %y : (tensor<8x16xf32>, tensor<8xi32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  %dz = nn.vocab_loss_grad %z, %y, %m, %s, %g in_place : (tensor<8x16xf32>, tensor<8xi32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8x16xf32>
  %n = nn.neg %dz : tensor<8x16xf32>
  return %n : tensor<8x16xf32>
}

// CHECK-LABEL: func.func @loss_gradient_apart
// CHECK-SAME: tessel.scratch_bytes = 1024
// CHECK: nn.cross_entropy_with_grad %{{.*}} {tessel.offsets = array<i64: -2, 512>}
func.func @loss_gradient_apart(%x: tensor<8x16xf32>, %y: tensor<8xi32>, %dl: tensor<f32>) -> (tensor<f32>, tensor<8x16xf32>) {
  %z = nn.exp %x : tensor<8x16xf32>
  %l, %g = nn.cross_entropy_with_grad %z, %y, %dl : (tensor<8x16xf32>, tensor<8xi32>, tensor<f32>) -> (tensor<f32>, tensor<8x16xf32>)
  %n = nn.neg %g : tensor<8x16xf32>
  return %l, %n : tensor<f32>, tensor<8x16xf32>
}

// -----

// Tests which concat inputs the plan computes straight into the concat's
// result (a bucket of gradients, which a collective then sums in place):
// the matmul's product (through its reshape) at the bucket's start and the
// sum 256 bytes in, each in the 448-byte bucket's bytes (their own buffers
// gone: 576 bytes of scratch); not an argument, nor a value read after the
// concat (the exp, which the add reads), nor one given twice: those are
// copied.
// CHECK-LABEL: func.func @bucket
// CHECK-SAME: tessel.scratch_bytes = 576
// CHECK-NEXT: nn.matmul {{.*}} {tessel.offsets = array<i64: 0>}
// CHECK-NEXT: nn.reduce_sum {{.*}} {tessel.offsets = array<i64: 256>}
// CHECK-NEXT: nn.reshape {{.*}} {tessel.offsets = array<i64: 0>}
// CHECK-NEXT: nn.exp {{.*}} {tessel.offsets = array<i64: 448>}
// CHECK-NEXT: nn.neg {{.*}} {tessel.offsets = array<i64: 512>}
// CHECK-NEXT: nn.concat {{.*}} {tessel.in_place_inputs = array<i1: true, true, false, false, false, false>, tessel.offsets = array<i64: 0>}
func.func @bucket(%x: tensor<4x8xf32>, %v: tensor<8xf32>) -> (tensor<104xf32>, tensor<8xf32>) {
  %0 = nn.matmul %x, %x transpose_lhs : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %1 = nn.reduce_sum %x dims = [0] : tensor<4x8xf32> -> tensor<8xf32>
  %2 = nn.reshape %0 : tensor<8x8xf32> -> tensor<64xf32>
  %3 = nn.exp %v : tensor<8xf32>
  %4 = nn.neg %v : tensor<8xf32>
  %5 = nn.concat %2, %1, %v, %3, %4, %4 dim = 0 : (tensor<64xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<104xf32>
  %6 = nn.exp %5 : tensor<104xf32>
  %7 = nn.add %3, %3 : tensor<8xf32>
  return %6, %7 : tensor<104xf32>, tensor<8xf32>
}

// -----

// Tests what stays a copy by its place in the result: an input past an
// offset that is not a multiple of 16 bytes (the [1, 8] sum 12 bytes in;
// the [1, 3] one at 0 is in place), an input of a concat whose leading
// dimension is not 1 (rows of a [2, 11] result are not one slab), and a
// concat's own result (its inputs may lie in it).
// CHECK-LABEL: func.func @not_in_place
// CHECK: nn.concat {{.*}} dim = 1 {tessel.in_place_inputs = array<i1: true, false>,
// CHECK: nn.concat {{.*}} dim = 1 {tessel.offsets
// CHECK: nn.concat {{.*}} dim = 0 {tessel.offsets
func.func @not_in_place(%x: tensor<4x3xf32>, %y: tensor<4x8xf32>) -> (tensor<1x11xf32>, tensor<2x11xf32>, tensor<2x11xf32>) {
  %0 = nn.reduce_sum %x dims = [0] keep_dims : tensor<4x3xf32> -> tensor<1x3xf32>
  %1 = nn.reduce_sum %y dims = [0] keep_dims : tensor<4x8xf32> -> tensor<1x8xf32>
  %2 = nn.concat %0, %1 dim = 1 : (tensor<1x3xf32>, tensor<1x8xf32>) -> tensor<1x11xf32>
  %3 = nn.exp %x : tensor<4x3xf32>
  %4 = nn.slice %3 start = [0, 0] limit = [2, 3] : tensor<4x3xf32> -> tensor<2x3xf32>
  %5 = nn.slice %y start = [0, 0] limit = [2, 8] : tensor<4x8xf32> -> tensor<2x8xf32>
  %6 = nn.concat %4, %5 dim = 1 : (tensor<2x3xf32>, tensor<2x8xf32>) -> tensor<2x11xf32>
  %7 = nn.neg %2 : tensor<1x11xf32>
  %8 = nn.concat %2, %7 dim = 0 : (tensor<1x11xf32>, tensor<1x11xf32>) -> tensor<2x11xf32>
  return %2, %6, %8 : tensor<1x11xf32>, tensor<2x11xf32>, tensor<2x11xf32>
}

// -----

// Tests which slices are views of their operand's bytes (tessel.view, no
// buffer of their own): rows 2 and 3 of a computed [4, 8] (64 bytes into
// its buffer), a row of an argument (offset -1: the lowering offsets the
// argument's pointer), and a slice of that view; not a block of columns
// (strided: copied into a buffer of its own), nor a row of an accumulator
// that is updated in place after it (a view would read the update).
// CHECK-LABEL: func.func @slices
// CHECK: %[[E:.*]] = nn.exp %arg0 {tessel.offsets = array<i64: 0>}
// CHECK-NEXT: nn.slice %[[E]] start = [2, 0] {{.*}} {tessel.offsets = array<i64: 64>, tessel.view}
// CHECK-NEXT: nn.slice %[[E]] start = [0, 0] limit = [4, 4] {tessel.offsets = array<i64: 128>} :
// CHECK-NEXT: %[[ROW:.*]] = nn.slice %arg0 {{.*}} {tessel.offsets = array<i64: -1>, tessel.view}
// CHECK-NEXT: nn.slice %[[ROW]] {{.*}} {tessel.offsets = array<i64: -1>, tessel.view}
// CHECK-NEXT: nn.slice %arg1 {{.*}} {tessel.offsets = array<i64: {{[0-9]+}}>} :
func.func @slices(%a: tensor<4x8xf32>, %g: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<2x8xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<1x8xf32>) {
  %0 = nn.exp %a : tensor<4x8xf32>
  %1 = nn.slice %0 start = [2, 0] limit = [4, 8] : tensor<4x8xf32> -> tensor<2x8xf32>
  %2 = nn.slice %0 start = [0, 0] limit = [4, 4] : tensor<4x8xf32> -> tensor<4x4xf32>
  %3 = nn.slice %a start = [1, 0] limit = [2, 8] : tensor<4x8xf32> -> tensor<1x8xf32>
  %4 = nn.slice %3 start = [0, 4] limit = [1, 8] : tensor<1x8xf32> -> tensor<1x4xf32>
  %5 = nn.slice %g start = [0, 0] limit = [1, 8] : tensor<4x8xf32> -> tensor<1x8xf32>
  %6 = nn.accumulate %0 outs(%g) : tensor<4x8xf32>
  %7 = nn.exp %1 : tensor<2x8xf32>
  %8 = nn.exp %2 : tensor<4x4xf32>
  %9 = nn.reshape %4 : tensor<1x4xf32> -> tensor<4xf32>
  %10 = nn.exp %5 : tensor<1x8xf32>
  return %6, %7, %8, %9, %10 : tensor<4x8xf32>, tensor<2x8xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<1x8xf32>
}

// -----

// Tests which broadcasts are views of their input (tessel.view, no buffer
// of their own; the binary ops read the input along its rows or columns):
// a row statistic computed here (its buffer, at 128, lives until the sub
// that reads it: the sub's result takes 0) and a bias argument read by two
// adds (offset -1). Not a view: a broadcast a matmul reads, one along a
// middle dimension, one of a tensor updated in place later (its add would
// read the update), and one added to another broadcast.
// CHECK-LABEL: func.func @broadcasts
// CHECK: nn.reduce_sum {{.*}} {tessel.offsets = array<i64: 128>}
// CHECK-NEXT: nn.broadcast {{.*}} {tessel.offsets = array<i64: 128>, tessel.view}
// CHECK-NEXT: nn.broadcast %arg1 {{.*}} {tessel.offsets = array<i64: -1>, tessel.view}
// CHECK-NEXT: nn.sub {{.*}} {tessel.offsets = array<i64: 0>}
// CHECK-NEXT: nn.add
// CHECK-NEXT: nn.add
// CHECK-NEXT: nn.broadcast %arg1 {{.*}} {tessel.offsets = array<i64: {{[0-9]+}}>} :
// CHECK-NEXT: nn.matmul
// CHECK-NEXT: nn.broadcast %arg3 {{.*}} {tessel.offsets = array<i64: {{[0-9]+}}>} :
// CHECK-NEXT: nn.mul
// CHECK-NEXT: nn.broadcast %arg4 {{.*}} {tessel.offsets = array<i64: {{[0-9]+}}>} :
// CHECK-NEXT: nn.accumulate
// CHECK-NEXT: nn.add
// CHECK-NEXT: nn.broadcast %arg1 {{.*}} {tessel.offsets = array<i64: {{[0-9]+}}>} :
// CHECK-NEXT: nn.broadcast %arg1 {{.*}} {tessel.offsets = array<i64: {{[0-9]+}}>} :
// CHECK-NEXT: nn.add
func.func @broadcasts(%x: tensor<4x8xf32>, %b: tensor<8xf32>, %w: tensor<8x8xf32>, %m: tensor<2x8xf32>, %acc: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %r = nn.reduce_sum %x dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %rb = nn.broadcast %r dims = [0] : tensor<4xf32> -> tensor<4x8xf32>
  %bb = nn.broadcast %b dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %0 = nn.sub %x, %rb : tensor<4x8xf32>
  %1 = nn.add %bb, %0 : tensor<4x8xf32>
  %2 = nn.add %0, %bb : tensor<4x8xf32>
  %bm = nn.broadcast %b dims = [1] : tensor<8xf32> -> tensor<8x8xf32>
  %3 = nn.matmul %bm, %w : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %mid = nn.broadcast %m dims = [0, 2] : tensor<2x8xf32> -> tensor<2x4x8xf32>
  %4 = nn.mul %mid, %mid : tensor<2x4x8xf32>
  %ab = nn.broadcast %acc dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %5 = nn.accumulate %b outs(%acc) : tensor<8xf32>
  %6 = nn.add %x, %ab : tensor<4x8xf32>
  %b1 = nn.broadcast %b dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %b2 = nn.broadcast %b dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %7 = nn.add %b1, %b2 : tensor<4x8xf32>
  return %1, %2, %3, %4, %5, %6, %7 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}
