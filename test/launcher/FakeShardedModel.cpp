//===- FakeShardedModel.cpp - A hand-written partitioned model for tests --===//
//
// FakeTrainModel at batch 16 (loss = cross_entropy(x · W, y), x [16, 8],
// W [8, 5], Adam with clipping under a warm-up + cosine schedule) as
// tessel-partition would emit it for a mesh dp=FAKE_DP, tp=FAKE_TP: the
// batch split over dp, the features (x's columns, W's rows) over tp. Each
// rank computes partial logits x_l · W_l and all-reduces them over tp; the
// loss is the mean over dp of the ranks' mean losses; W's gradient is
// summed over dp; the clipping norm sums the blocks' squares over tp. Its
// description carries the mesh, every split tensor's "sharding" and
// "global_shape", and the "collectives" each entry runs, so the launcher's
// mesh support is tested on its own, before the compiler partitions
// anything.
//
// Variants (compile definitions): FAKE_DP, FAKE_TP (axis sizes; an axis of
// size 1 is left out of the mesh), FAKE_FAIL_RANK (that rank's backward
// records an error in step 2 and returns before its collectives),
// FAKE_ZERO (ZeRO-1: Adam's moments are ZeRO-sharded over dp with "dims" 1
// — each rank keeps columns [g·s, g·s + s) of every row of W's block, s =
// ceil(5 / dp), zero-padded — and the update steps that chunk of W, then
// all-gathers W over dp).
//
//===----------------------------------------------------------------------===//

#include "tessel/runtime.h"

#include <algorithm>
#include <string>
#include <utility>

#ifndef FAKE_DP
#define FAKE_DP 1
#endif
#ifndef FAKE_TP
#define FAKE_TP 1
#endif

namespace {

constexpr int64_t dp = FAKE_DP, tp = FAKE_TP;
constexpr int64_t batch = 16 / dp, features = 8 / tp, classes = 5;
constexpr int64_t elem = 4;
#ifdef FAKE_ZERO
static_assert(dp > 1, "ZeRO shards over dp");
constexpr bool zeroSharded = true;
#else
constexpr bool zeroSharded = false;
#endif
// The columns of W's block each rank's moments hold (ZeRO: the chunk).
constexpr int64_t chunk = zeroSharded ? (classes + dp - 1) / dp : classes;
constexpr int64_t stateBytes = features * chunk * elem;
// Mesh axes in order; an axis of size 1 is not in the mesh.
constexpr int dpAxis = dp > 1 ? 0 : -1;
constexpr int tpAxis = tp > 1 ? (dp > 1 ? 1 : 0) : -1;
constexpr uint32_t dpMask = dp > 1 ? 1u << dpAxis : 0;
constexpr uint32_t tpMask = tp > 1 ? 1u << tpAxis : 0;

constexpr int64_t align(int64_t bytes) { return (bytes + 63) / 64 * 64; }

constexpr int64_t weightBytes = features * classes * elem;
constexpr int64_t weightOffset = 0;
constexpr int64_t frozenOffset = weightOffset + align(weightBytes);
constexpr int64_t gradsOffset = frozenOffset + align(3 * elem);
constexpr int64_t gradOffset = gradsOffset;
constexpr int64_t statesOffset = gradOffset + align(weightBytes);
constexpr int64_t state0Offset = statesOffset;
constexpr int64_t state1Offset = state0Offset + align(stateBytes);
constexpr int64_t inputsOffset = state1Offset + align(stateBytes);
constexpr int64_t inputBytes = batch * features * elem;
constexpr int64_t inputOffset = inputsOffset;
constexpr int64_t labelOffset = inputOffset + align(inputBytes);
constexpr int64_t gradScaleOffset = labelOffset + align(batch * 4);
constexpr int64_t outputsOffset = gradScaleOffset + 64;
constexpr int64_t lossOffset = outputsOffset;
constexpr int64_t scratchOffset = lossOffset + 64;
constexpr int64_t logitsBytes = batch * classes * elem;
constexpr int64_t logitsOffset = scratchOffset;
constexpr int64_t dlogitsOffset = logitsOffset + align(logitsBytes);
constexpr int64_t dweightOffset = dlogitsOffset + align(logitsBytes);
constexpr int64_t dlossOffset = dweightOffset + align(weightBytes);
constexpr int64_t sumSquaresOffset = dlossOffset + 64;
constexpr int64_t scaleOffset = sumSquaresOffset + 64;
// ZeRO: the chunks of W and its gradient, and W's chunks gathered.
constexpr int64_t weightChunkOffset = scaleOffset + 64;
constexpr int64_t gradChunkOffset = weightChunkOffset + align(stateBytes);
constexpr int64_t gatheredOffset = gradChunkOffset + align(stateBytes);
constexpr int64_t arenaBytes =
    gatheredOffset + (zeroSharded ? align(dp * stateBytes) : 0);

char *at(void *arena, int64_t offset) {
  return static_cast<char *>(arena) + offset;
}

std::string list(std::initializer_list<std::string> items) {
  std::string s = "[";
  for (const std::string &i : items)
    s += (s.size() > 1 ? ", " : "") + i;
  return s + "]";
}

std::string axisIf(bool split, const char *axis) {
  return split ? list({std::string("\"") + axis + "\""}) : "[]";
}

std::string tensor(const std::string &name, const std::string &role,
                   const std::string &dtype, const std::string &shape,
                   int64_t offset, int64_t bytes, const std::string &extra) {
  return "{\"name\": \"" + name + "\", \"role\": \"" + role +
         "\", \"dtype\": \"" + dtype + "\", \"shape\": " + shape +
         ", \"offset\": " + std::to_string(offset) +
         ", \"bytes\": " + std::to_string(bytes) + extra + "}";
}

/// W and its grad and states: rows split over tp.
std::string weightSharding() {
  return tp > 1 ? ", \"global_shape\": [8, 5], \"sharding\": [[\"tp\"], []]"
                : "";
}

/// Adam's moments: W's split, and with ZeRO their chunk of its block.
std::string stateSharding() {
  if (!zeroSharded)
    return weightSharding();
  return ", \"global_shape\": [8, 5]" +
         std::string(tp > 1 ? ", \"sharding\": [[\"tp\"], []]" : "") +
         ", \"zero\": {\"axes\": [\"dp\"], \"dims\": 1, \"block\": [" +
         std::to_string(features) + ", 5]}";
}

std::string region(const std::string &name, int64_t offset, int64_t bytes) {
  return "\"" + name + "\": {\"offset\": " + std::to_string(offset) +
         ", \"bytes\": " + std::to_string(bytes) + "}";
}

std::string collective(const char *axis, int64_t calls, int64_t bytes,
                       const char *kind = "all_reduce") {
  return "{\"kind\": \"" + std::string(kind) + "\", \"axes\": [\"" +
         std::string(axis) + "\"], \"calls\": " + std::to_string(calls) +
         ", \"bytes\": " + std::to_string(bytes) + "}";
}

/// Per entry, what it runs on each rank (groups of one count nothing).
std::string collectives() {
  auto join = [](const std::string &a, const std::string &b) {
    return a.empty() ? b : b.empty() ? a : a + ", " + b;
  };
  std::string forwardTp = tp > 1 ? collective("tp", 1, logitsBytes) : "";
  std::string forward = join(forwardTp, dp > 1 ? collective("dp", 1, 4) : "");
  std::string backward =
      join(forwardTp, dp > 1 ? collective("dp", 2, 4 + weightBytes) : "");
  std::string update = join(
      tp > 1 ? collective("tp", 1, 4) : "",
      zeroSharded ? collective("dp", 1, dp * stateBytes, "all_gather") : "");
  return "{\"forward\": [" + forward + "], \"backward\": [" + backward +
         "], \"update\": [" + update + "]}";
}

std::string mesh() {
  std::string axes, shape;
  if (dp > 1) {
    axes = "\"dp\"";
    shape = std::to_string(dp);
  }
  if (tp > 1) {
    axes += std::string(axes.empty() ? "" : ", ") + "\"tp\"";
    shape += (shape.empty() ? "" : ", ") + std::to_string(tp);
  }
  return "{\"axes\": [" + axes + "], \"shape\": [" + shape + "]}";
}

std::string describe() {
  std::string w = list({std::to_string(features), "5"});
  std::string stateShape =
      list({std::to_string(features), std::to_string(chunk)});
  std::string inputShape =
      list({std::to_string(batch), std::to_string(features)});
  std::string inputSharding =
      dp > 1 || tp > 1 ? ", \"global_shape\": [16, 8], \"sharding\": " +
                             list({axisIf(dp > 1, "dp"), axisIf(tp > 1, "tp")})
                       : "";
  std::string labelSharding =
      dp > 1 ? ", \"global_shape\": [16], \"sharding\": [[\"dp\"]]" : "";
  std::string tensors =
      tensor("fc.weight", "param", "f32", w, weightOffset, weightBytes,
             ", \"axes\": [\"embed\", \"classes\"], \"trainable\": true, "
             "\"init\": {\"kind\": \"normal\", \"args\": [0.5, 0.0]}" +
                 weightSharding()) +
      ",\n" +
      tensor("fc.frozen", "param", "f32", "[3]", frozenOffset, 3 * elem,
             ", \"trainable\": false, \"init\": {\"kind\": \"ones\"}") +
      ",\n" +
      tensor("fc.weight", "grad", "f32", w, gradOffset, weightBytes,
             weightSharding()) +
      ",\n" +
      tensor("fc.weight.m", "state", "f32", stateShape, state0Offset,
             stateBytes, stateSharding()) +
      ",\n" +
      tensor("fc.weight.v", "state", "f32", stateShape, state1Offset,
             stateBytes, stateSharding()) +
      ",\n" +
      tensor("input0", "input", "f32", inputShape, inputOffset, inputBytes,
             ", \"axes\": [\"batch\", \"embed\"]" + inputSharding) +
      ",\n" +
      tensor("label0", "label", "i32", list({std::to_string(batch)}),
             labelOffset, batch * 4,
             ", \"axes\": [\"batch\"], \"limit\": 5" + labelSharding) +
      ",\n" +
      tensor("grad_scale", "grad_scale", "f32", "[]", gradScaleOffset, 4, "") +
      ",\n" + tensor("loss", "loss", "f32", "[]", lossOffset, elem, "");
  std::string train =
      "\"optimizer\": \"adam\", \"momentum\": 0.0, \"nesterov\": false, "
      "\"lr\": 0.05, \"beta1\": 0.9, \"beta2\": 0.999, \"eps\": 1e-08, "
      "\"weight_decay\": 0.0, \"schedule\": \"warmup_cosine\", "
      "\"warmup\": 2, \"min_lr\": 0.005, \"total_steps\": 50, "
      "\"clip\": 1.0, \"recompute\": \"none\"";
  return "{\n\"abi_version\": 3, \"source\": \"fake/sharded.mlir\", "
         "\"function\": \"loss\",\n\"entry\": \"tessel_forward\",\n"
         "\"entries\": {\"forward\": \"tessel_forward\", \"backward\": "
         "\"tessel_backward\", \"update\": \"tessel_update\"},\n"
         "\"mesh\": " +
         mesh() + ",\n\"arena_bytes\": " + std::to_string(arenaBytes) +
         ", \"peak_bytes\": " + std::to_string(arenaBytes - scratchOffset) +
         ",\n\"regions\": {" + region("params", 0, gradsOffset) + ", " +
         region("grads", gradsOffset, statesOffset - gradsOffset) + ", " +
         region("states", statesOffset, inputsOffset - statesOffset) + ", " +
         region("inputs", inputsOffset, gradScaleOffset - inputsOffset) + ", " +
         region("outputs", outputsOffset, scratchOffset - outputsOffset) +
         ", " + region("scratch", scratchOffset, arenaBytes - scratchOffset) +
         "},\n\"train\": {" + train + "},\n\"collectives\": " + collectives() +
         ",\n\"tensors\": [\n" + tensors + "\n]\n}";
}

void forward(tessel_ctx *ctx, void *arena) {
  tessel_matmul(ctx, TESSEL_F32, at(arena, inputOffset),
                at(arena, weightOffset), at(arena, logitsOffset), /*batch=*/1,
                /*m=*/batch, /*n=*/classes, /*k=*/features, 0, 0,
                /*b_shared=*/1);
  // x · W = Σ over the tp blocks of x_l · W_l.
  if (tp > 1)
    tessel_all_reduce(ctx, tpMask, TESSEL_F32, at(arena, logitsOffset),
                      at(arena, logitsOffset), batch * classes,
                      TESSEL_REDUCE_SUM);
  tessel_cross_entropy(ctx, TESSEL_F32, TESSEL_I32, at(arena, logitsOffset),
                       at(arena, labelOffset), at(arena, lossOffset), batch,
                       classes, TESSEL_LOSS_MEAN);
  // Equal local batches: the global mean is the mean of the ranks' means.
  if (dp > 1)
    tessel_all_reduce(ctx, dpMask, TESSEL_F32, at(arena, lossOffset),
                      at(arena, lossOffset), 1, TESSEL_REDUCE_MEAN);
}

} // namespace

extern "C" const char *tessel_model_json(void) {
  static const std::string json = describe();
  return json.c_str();
}

extern "C" void tessel_forward(tessel_ctx *ctx, void *arena) {
  forward(ctx, arena);
}

extern "C" void tessel_backward(tessel_ctx *ctx, void *arena) {
#ifdef FAKE_FAIL_RANK
  if (tessel_ctx_rank(ctx) == FAKE_FAIL_RANK && tessel_get_step(ctx) == 1) {
    double args[2] = {0, 0};
    tessel_init_param(ctx, at(arena, dweightOffset), TESSEL_F32, 0, 1,
                      /*kind=*/99, args, 0, "fail");
    return;
  }
#endif
  forward(ctx, arena);
  // d loss / d local loss = 1 / dp.
  float dloss = 1.0f / float(dp);
  tessel_copy_to_device(ctx, at(arena, dlossOffset), &dloss, sizeof(dloss));
  tessel_cross_entropy_grad(ctx, TESSEL_F32, TESSEL_I32,
                            at(arena, logitsOffset), at(arena, labelOffset),
                            at(arena, dlossOffset), at(arena, dlogitsOffset),
                            batch, classes, TESSEL_LOSS_MEAN);
  // dW_l = x_lᵀ · dlogits over this rank's samples, summed over dp.
  tessel_matmul(ctx, TESSEL_F32, at(arena, inputOffset),
                at(arena, dlogitsOffset), at(arena, dweightOffset), 1,
                /*m=*/features, /*n=*/classes, /*k=*/batch, /*trans_a=*/1, 0,
                0);
  if (dp > 1)
    tessel_all_reduce(ctx, dpMask, TESSEL_F32, at(arena, dweightOffset),
                      at(arena, dweightOffset), features * classes,
                      TESSEL_REDUCE_SUM);
  tessel_binary(ctx, TESSEL_ADD, TESSEL_F32, at(arena, gradOffset),
                at(arena, dweightOffset), at(arena, gradOffset),
                features * classes);
}

extern "C" void tessel_update(tessel_ctx *ctx, void *arena) {
  float zero = 0;
  tessel_copy_to_device(ctx, at(arena, sumSquaresOffset), &zero, 4);
  tessel_sum_squares(ctx, TESSEL_F32, at(arena, gradOffset), features * classes,
                     at(arena, sumSquaresOffset));
  // The global norm: W's blocks over tp (the grads are equal over dp).
  if (tp > 1)
    tessel_all_reduce(ctx, tpMask, TESSEL_F32, at(arena, sumSquaresOffset),
                      at(arena, sumSquaresOffset), 1, TESSEL_REDUCE_SUM);
  tessel_clip_scale(ctx, at(arena, sumSquaresOffset), /*max_norm=*/1.0,
                    at(arena, gradScaleOffset), at(arena, scaleOffset));
  int64_t step = int64_t(tessel_get_step(ctx)) + 1;
  double lr = tessel_lr_at(TESSEL_LR_WARMUP_COSINE, 0.05, 0.005, 2, 50, step);
  tessel_optimizer opt = {TESSEL_OPT_ADAM, 0, 0.0, 0.9, 0.999, 1e-8, 0.0};
  if (!zeroSharded) {
    tessel_optimizer_update(ctx, &opt, TESSEL_F32, at(arena, weightOffset),
                            at(arena, gradOffset), at(arena, scaleOffset),
                            at(arena, state0Offset), at(arena, state1Offset),
                            features * classes, step, lr);
    return;
  }
  // ZeRO-1: this rank's columns [first, first + held) of W and its
  // gradient, padded to `chunk` columns with zeros (which the update keeps
  // at zero), stepped with its moments, then W gathered back over dp.
  int64_t first = tessel_group_index(ctx, dpMask) * chunk;
  int64_t held = first < classes ? std::min(chunk, classes - first) : 0;
  int64_t whole[2] = {5, 1}, chunked[2] = {chunk, 1};
  int64_t extent[2] = {features, held};
  for (auto [from, to] : {std::pair{weightOffset, weightChunkOffset},
                          std::pair{gradOffset, gradChunkOffset}}) {
    tessel_zero(ctx, at(arena, to), stateBytes);
    if (held > 0)
      tessel_strided_copy(ctx, TESSEL_F32, at(arena, from) + first * elem,
                          at(arena, to), 2, extent, whole, chunked);
  }
  tessel_optimizer_update(ctx, &opt, TESSEL_F32, at(arena, weightChunkOffset),
                          at(arena, gradChunkOffset), at(arena, scaleOffset),
                          at(arena, state0Offset), at(arena, state1Offset),
                          features * chunk, step, lr);
  int64_t shape[2] = {features, chunk};
  tessel_all_gather(ctx, dpMask, TESSEL_F32, at(arena, weightChunkOffset),
                    at(arena, gatheredOffset), 2, shape, 1);
  int64_t gathered[2] = {dp * chunk, 1}, all[2] = {features, classes};
  tessel_strided_copy(ctx, TESSEL_F32, at(arena, gatheredOffset),
                      at(arena, weightOffset), 2, all, gathered, whole);
}
