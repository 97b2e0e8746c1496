// RUN: tessel-opt %s -tessel-partition --split-input-file --verify-diagnostics

// Tests that partitioning needs the mesh of tessel-propagate-sharding.
// expected-error @+1 {{tessel-partition needs a mesh: run tessel-propagate-sharding first}}
module {
  func.func @no_mesh(%x: tensor<8xf32>) -> tensor<8xf32> {
    return %x : tensor<8xf32>
  }
}

// -----

shard.grid @mesh(shape = 2) {nn.axis_names = ["tp"]}

// Tests that a loop that must stay whole cannot be split by hand.
func.func @unsplittable(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'nn.softmax' op loop 1 must stay whole but is split over 'tp'}}
  %s = nn.softmax %x {nn.loop_sharding = [[], ["tp"]]} : tensor<8x16xf32>
  return %s : tensor<8x16xf32>
}

// -----

shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}

// Tests that an in-place update must split like the value it updates.
func.func @in_place_mismatch(%g: tensor<8x16xf32>, %acc: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'nn.accumulate' op updates operand #1 in place, but its sharding differs from the op's}}
  %a = nn.accumulate %g outs(%acc) {nn.loop_sharding = [["dp"], []]} : tensor<8x16xf32>
  return %a : tensor<8x16xf32>
}

// -----

shard.grid @mesh(shape = 2) {nn.axis_names = ["cp"]}

// Tests that a block of causal attention's queries (context parallelism's
// local op, numbered by its block_axes) is not split a second time.
func.func @query_block_split_twice(%q: tensor<2x8x2x4xf32>, %kv: tensor<2x16x2x4xf32>) -> tensor<2x8x2x4xf32> {
  // expected-error @+1 {{'nn.attention' op is already a block of a larger query sequence; it cannot be split again}}
  %a = nn.attention %q, %kv, %kv causal {block_axes = array<i16: 0>, nn.loop_sharding = [[], ["cp"], [], [], [], []]} : (tensor<2x8x2x4xf32>, tensor<2x16x2x4xf32>, tensor<2x16x2x4xf32>) -> tensor<2x8x2x4xf32>
  return %a : tensor<2x8x2x4xf32>
}

// -----

shard.grid @mesh(shape = 2x2) {nn.axis_names = ["cp", "tp"]}

// Tests that a split of the queries over grid axes out of order is
// refused: a block is numbered by its axes in ascending order.
func.func @query_axes_out_of_order(%q: tensor<2x8x2x4xf32>, %k: tensor<2x8x2x4xf32>, %v: tensor<2x8x2x4xf32>) -> tensor<2x8x2x4xf32> {
  // expected-error @+1 {{'nn.attention' op splits its query sequence over grid axes out of order; a block is numbered by axes in ascending order}}
  %a = nn.attention %q, %k, %v causal {nn.loop_sharding = [[], ["tp", "cp"], [], [], [], []]} : (tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>) -> tensor<2x8x2x4xf32>
  return %a : tensor<2x8x2x4xf32>
}

// -----

shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}

// Tests that a dropout that is already a block of a larger tensor (its
// mask numbered by the whole tensor) is not split a second time.
func.func @dropout_split_twice(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'nn.dropout' op is already a block of a larger tensor; it cannot be split again}}
  %d = nn.dropout %x rate = 0.1 seed = 7 {global_shape = array<i64: 16, 16>, split_axes = [array<i16: 0>, array<i16>], nn.loop_sharding = [["dp"], []]} : tensor<8x16xf32>
  return %d : tensor<8x16xf32>
}

// -----

shard.grid @mesh(shape = 2) {nn.axis_names = ["dp"]}

// Tests that a loop sharding must name every loop of the op's rule.
func.func @malformed_loops(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'nn.exp' op has a malformed nn.loop_sharding}}
  %e = nn.exp %x {nn.loop_sharding = [["dp"]]} : tensor<8x16xf32>
  return %e : tensor<8x16xf32>
}

// -----

shard.grid @mesh(shape = 4) {nn.axis_names = ["dp"]}

// Tests that an argument whose dimension does not divide by its axes is a
// located error naming the dimension, its size and the axis.
// expected-error @+1 {{dimension 0 of size 6 does not split evenly over mesh axes 'dp' of size 4}}
func.func @uneven(%x: tensor<6xf32> {nn.sharding = [["dp"]]}) -> tensor<6xf32> {
  return %x : tensor<6xf32>
}

// -----

shard.grid @mesh(shape = 2x2) {nn.axis_names = ["a", "b"]}

// Tests that a vocabulary split over grid axes out of order is refused: a
// rank's block is numbered by its group index, row-major in axis order.
func.func @vocabulary_axes_out_of_order(%t: tensor<16x4xf32> {nn.sharding = [["b", "a"], []]},
                                        %ids: tensor<6xi32>) -> tensor<6x4xf32> {
  // expected-error @+1 {{'nn.embedding' op splits its vocabulary over grid axes out of order; a block is numbered by axes in ascending order}}
  %e = nn.embedding %t, %ids {nn.loop_sharding = [[], [], ["b", "a"]]} : (tensor<16x4xf32>, tensor<6xi32>) -> tensor<6x4xf32>
  return %e : tensor<6x4xf32>
}

// -----

shard.grid @mesh(shape = 2) {nn.axis_names = ["tp"]}

// Tests that a block of a vocabulary is not split again.
func.func @block_split_again(%z: tensor<6x8xf32> {nn.sharding = [[], ["tp"]]},
                             %y: tensor<6xi32>) -> tensor<6xf32> {
  // expected-error @+1 {{'nn.label_logit' op is already a block of a larger vocabulary; it cannot be split again}}
  %p = nn.label_logit %z, %y {block_axes = array<i16: 0>, nn.loop_sharding = [[], ["tp"]]} : (tensor<6x8xf32>, tensor<6xi32>) -> tensor<6xf32>
  return %p : tensor<6xf32>
}

// -----

func.func private @acc_layer(%h: tensor<4xf32>, %w: tensor<4xf32>, %g: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = nn.accumulate %w outs(%g) : tensor<4xf32>
  return %h, %0 : tensor<4xf32>, tensor<4xf32>
}
// Tests that a repeat with outs, the form a later pass makes, is refused.
func.func @repeat_outs(%h: tensor<4xf32>, %w: tensor<3x4xf32>, %g: tensor<3x4xf32>) -> tensor<3x4xf32> {
  // expected-error @+1 {{'nn.repeat' op has outs (updated in place, the form tessel-accumulate-in-layers makes after the passes that differentiate, split, shard or cast a repeat); tessel-partition takes repeats without outs}}
  %0:2 = nn.repeat @acc_layer(%h) params(%w) outs(%g) : (tensor<4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) -> (tensor<4xf32>, tensor<3x4xf32>)
  return %0#1 : tensor<3x4xf32>
}

// -----

shard.grid @mesh(shape = 2) {nn.axis_names = ["tp"]}

// Tests that rope keeps its head dimension whole: a block would split the
// rotated pairs.
func.func @rope_split_head_dim(%x: tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32> {
  // expected-error @+1 {{'nn.rope' op loop 3 must stay whole but is split over 'tp'}}
  %y = nn.rope %x {nn.loop_sharding = [[], [], [], ["tp"]]} : tensor<2x8x4x16xf32>
  return %y : tensor<2x8x4x16xf32>
}

// -----

shard.grid @mesh(shape = 2) {nn.axis_names = ["cp"]}

// Tests that rope's block of the positions (context parallelism's local
// op) is not split a second time.
func.func @rope_block_split_twice(%x: tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32> {
  // expected-error @+1 {{'nn.rope' op is already a block of a larger position sequence; it cannot be split again}}
  %y = nn.rope %x {block_axes = array<i16: 0>, nn.loop_sharding = [[], ["cp"], [], []]} : tensor<2x8x4x16xf32>
  return %y : tensor<2x8x4x16xf32>
}

// -----

shard.grid @mesh(shape = 4) {nn.axis_names = ["tp"]}

// Tests that grouped-query attention refuses a split of its query heads
// whose blocks cut a group of the key/value heads they share.
func.func @gqa_split_cuts_groups(%q: tensor<1x4x4x8xf32>, %kv: tensor<1x4x2x8xf32>) -> tensor<1x4x4x8xf32> {
  // expected-error @+1 {{'nn.attention' op loop 2 of 4 is split over 'tp' in 4 blocks, which cut its groups of 2 (grouped-query attention splits its query heads only where its key/value heads split alike)}}
  %a = nn.attention %q, %kv, %kv {nn.loop_sharding = [[], [], ["tp"], [], [], []]} : (tensor<1x4x4x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) -> tensor<1x4x4x8xf32>
  return %a : tensor<1x4x4x8xf32>
}
