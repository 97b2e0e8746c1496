//===- FakeTrainModel.cpp - A hand-written trainable model .so for tests --===//
//
// What tessel-compile emits under Model ABI v2 (docs/model-abi.md) for
// loss = cross_entropy(x · W, y), x [B, 8], W [8, 5], labels [B] in [0, 5),
// written by hand so the launcher's training loop is tested on its own:
// forward, backward (loss and W's gradient accumulated into its grad) and
// update (global-norm clipping, then Adam or SGD with momentum under a
// warm-up + cosine schedule). A second parameter, "fc.frozen", reaches no
// loss: it is not trainable and has no grad or state.
//
// Variants (compile definitions): FAKE_BATCH (B), FAKE_SGD (SGD with
// momentum instead of Adam), FAKE_GRAD_FACTOR (a wrong backward that
// accumulates this multiple of the gradient), FAKE_F64 (f64 tensors),
// FAKE_BF16 (ABI v4's bf16 master weights: bf16 parameters, an f32
// gradient, the f32 master copy "fc.weight.master" first among the states,
// stepped by the update and rounded into the parameter; f32 inputs cast
// to bf16 by the forward).
//
//===----------------------------------------------------------------------===//

#include "tessel/runtime.h"

#include <string>

#ifndef FAKE_BATCH
#define FAKE_BATCH 4
#endif
#ifndef FAKE_GRAD_FACTOR
#define FAKE_GRAD_FACTOR 1
#endif

namespace {

#ifdef FAKE_F64
using Real = double;
constexpr int32_t dtype = TESSEL_F64;
constexpr const char *dtypeName = "f64";
#elif defined(FAKE_BF16)
using Real = uint16_t; // bf16 bits
constexpr int32_t dtype = TESSEL_BF16;
constexpr const char *dtypeName = "bf16";
#else
using Real = float;
constexpr int32_t dtype = TESSEL_F32;
constexpr const char *dtypeName = "f32";
#endif
constexpr int64_t batch = FAKE_BATCH, features = 8, classes = 5;
constexpr int64_t elem = sizeof(Real);
#ifdef FAKE_BF16
constexpr int32_t gradDtype = TESSEL_F32, inputDtype = TESSEL_F32;
constexpr const char *gradDtypeName = "f32", *inputDtypeName = "f32";
constexpr int64_t gradElem = 4, inputElem = 4;
constexpr int64_t masterStates = 1;
constexpr Real realOne = 0x3f80;
#else
constexpr int32_t gradDtype = dtype, inputDtype = dtype;
constexpr const char *gradDtypeName = dtypeName, *inputDtypeName = dtypeName;
constexpr int64_t gradElem = elem, inputElem = elem;
constexpr int64_t masterStates = 0;
constexpr Real realOne = 1;
#endif

constexpr int64_t align(int64_t bytes) { return (bytes + 63) / 64 * 64; }

// [params | grads | states | inputs and labels | grad_scale | outputs |
//  scratch], every tensor 64-byte aligned.
constexpr int64_t weightBytes = features * classes * elem;
constexpr int64_t gradBytes = features * classes * gradElem;
constexpr int64_t weightOffset = 0;
constexpr int64_t frozenOffset = weightOffset + align(weightBytes);
constexpr int64_t gradsOffset = frozenOffset + align(3 * elem);
constexpr int64_t gradOffset = gradsOffset;
constexpr int64_t statesOffset = gradOffset + align(gradBytes);
constexpr int64_t stateBytes = features * classes * 4; // f32
constexpr int64_t masterOffset = statesOffset;
constexpr int64_t state0Offset = statesOffset + masterStates * align(stateBytes);
#ifdef FAKE_SGD
constexpr int64_t inputsOffset = state0Offset + align(stateBytes);
#else
constexpr int64_t state1Offset = state0Offset + align(stateBytes);
constexpr int64_t inputsOffset = state1Offset + align(stateBytes);
#endif
constexpr int64_t inputBytes = batch * features * inputElem;
constexpr int64_t inputOffset = inputsOffset;
constexpr int64_t labelOffset = inputOffset + align(inputBytes);
constexpr int64_t gradScaleOffset = labelOffset + align(batch * 4);
constexpr int64_t outputsOffset = gradScaleOffset + 64;
constexpr int64_t lossOffset = outputsOffset;
constexpr int64_t scratchOffset = lossOffset + 64;
constexpr int64_t logitsOffset = scratchOffset;
constexpr int64_t dlogitsOffset = logitsOffset + align(batch * classes * elem);
constexpr int64_t dweightOffset = dlogitsOffset + align(batch * classes * elem);
constexpr int64_t dlossOffset = dweightOffset + align(weightBytes);
constexpr int64_t sumSquaresOffset = dlossOffset + 64;
constexpr int64_t scaleOffset = sumSquaresOffset + 64;
// FAKE_BF16: the input cast to bf16, and dW widened to f32.
constexpr int64_t castInputOffset = scaleOffset + 64;
constexpr int64_t wideGradOffset = castInputOffset + align(batch * features * 2);
constexpr int64_t arenaBytes = wideGradOffset + align(gradBytes);

char *at(void *arena, int64_t offset) {
  return static_cast<char *>(arena) + offset;
}

std::string tensor(const std::string &name, const std::string &role,
                   const std::string &dtype, const std::string &shape,
                   int64_t offset, int64_t bytes, const std::string &extra) {
  return "{\"name\": \"" + name + "\", \"role\": \"" + role +
         "\", \"dtype\": \"" + dtype + "\", \"shape\": " + shape +
         ", \"offset\": " + std::to_string(offset) +
         ", \"bytes\": " + std::to_string(bytes) + extra + "}";
}

std::string region(const std::string &name, int64_t offset, int64_t bytes) {
  return "\"" + name + "\": {\"offset\": " + std::to_string(offset) +
         ", \"bytes\": " + std::to_string(bytes) + "}";
}

std::string describe() {
  std::string real = dtypeName;
  std::string w = "[8, 5]", b = std::to_string(batch);
  std::string tensors =
      tensor("fc.weight", "param", real, w, weightOffset, weightBytes,
             ", \"axes\": [\"embed\", \"classes\"], \"trainable\": true, "
             "\"init\": {\"kind\": \"normal\", \"args\": [0.5, 0.0]}") +
      ",\n" +
      tensor("fc.frozen", "param", real, "[3]", frozenOffset, 3 * elem,
             ", \"trainable\": false, \"init\": {\"kind\": \"ones\"}") +
      ",\n" +
      tensor("fc.weight", "grad", gradDtypeName, w, gradOffset, gradBytes,
             "") +
      ",\n" +
#ifdef FAKE_BF16
      tensor("fc.weight.master", "state", "f32", w, masterOffset, stateBytes,
             ", \"master_of\": \"fc.weight\"") +
      ",\n" +
#endif
#ifdef FAKE_SGD
      tensor("fc.weight.momentum", "state", "f32", w, state0Offset, stateBytes,
             "") +
#else
      tensor("fc.weight.m", "state", "f32", w, state0Offset, stateBytes, "") +
      ",\n" +
      tensor("fc.weight.v", "state", "f32", w, state1Offset, stateBytes, "") +
#endif
      ",\n" +
      tensor("input0", "input", inputDtypeName, "[" + b + ", 8]", inputOffset,
             inputBytes,
             ", \"axes\": [\"batch\", \"embed\"]") +
      ",\n" +
      tensor("label0", "label", "i32", "[" + b + "]", labelOffset, batch * 4,
             ", \"axes\": [\"batch\"], \"limit\": 5") +
      ",\n" +
      tensor("grad_scale", "grad_scale", "f32", "[]", gradScaleOffset, 4, "") +
      ",\n" + tensor("loss", "loss", real, "[]", lossOffset, elem, "");
#ifdef FAKE_SGD
  std::string train = "\"optimizer\": \"sgd\", \"momentum\": 0.9, "
                      "\"nesterov\": false, \"lr\": 0.05";
#else
  std::string train = "\"optimizer\": \"adam\", \"momentum\": 0.0, "
                      "\"nesterov\": false, \"lr\": 0.05";
#endif
  train += ", \"beta1\": 0.9, \"beta2\": 0.999, \"eps\": 1e-08, "
           "\"weight_decay\": 0.0, \"schedule\": \"warmup_cosine\", "
           "\"warmup\": 2, \"min_lr\": 0.005, \"total_steps\": 50, "
           "\"clip\": 1.0, \"recompute\": \"none\"";
  return "{\n\"abi_version\": " + std::string(masterStates ? "4" : "2") +
         ", \"precision\": \"" + (masterStates ? "bf16" : "f32") +
         "\", \"source\": \"fake/train.mlir\", "
         "\"function\": \"loss\",\n\"entry\": \"tessel_forward\",\n"
         "\"entries\": {\"forward\": \"tessel_forward\", \"backward\": "
         "\"tessel_backward\", \"update\": \"tessel_update\"},\n"
         "\"arena_bytes\": " +
         std::to_string(arenaBytes) +
         ", \"peak_bytes\": " + std::to_string(arenaBytes - scratchOffset) +
         ",\n\"regions\": {" + region("params", 0, gradsOffset) + ", " +
         region("grads", gradsOffset, statesOffset - gradsOffset) + ", " +
         region("states", statesOffset, inputsOffset - statesOffset) + ", " +
         region("inputs", inputsOffset, gradScaleOffset - inputsOffset) + ", " +
         region("outputs", outputsOffset, scratchOffset - outputsOffset) +
         ", " + region("scratch", scratchOffset, arenaBytes - scratchOffset) +
         "},\n\"train\": {" + train + "},\n\"tensors\": [\n" + tensors +
         "\n]\n}";
}

void forward(tessel_ctx *ctx, void *arena) {
  int64_t x = inputOffset;
  if (inputDtype != dtype) {
    tessel_cast(ctx, inputDtype, dtype, at(arena, inputOffset),
                at(arena, castInputOffset), batch * features);
    x = castInputOffset;
  }
  tessel_matmul(ctx, dtype, at(arena, x), at(arena, weightOffset),
                at(arena, logitsOffset), /*batch=*/1, /*m=*/batch,
                /*n=*/classes, /*k=*/features, 0, 0, /*b_shared=*/1);
  tessel_cross_entropy(ctx, dtype, TESSEL_I32, at(arena, logitsOffset),
                       at(arena, labelOffset), at(arena, lossOffset), batch,
                       classes, TESSEL_LOSS_MEAN);
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
  forward(ctx, arena);
  Real one = realOne;
  tessel_copy_to_device(ctx, at(arena, dlossOffset), &one, sizeof(one));
  int64_t x = inputDtype != dtype ? castInputOffset : inputOffset;
  tessel_cross_entropy_grad(ctx, dtype, TESSEL_I32, at(arena, logitsOffset),
                            at(arena, labelOffset), at(arena, dlossOffset),
                            at(arena, dlogitsOffset), batch, classes,
                            TESSEL_LOSS_MEAN);
  // dW = xᵀ · dlogits, accumulated into the grad.
  tessel_matmul(ctx, dtype, at(arena, x), at(arena, dlogitsOffset),
                at(arena, dweightOffset), 1, /*m=*/features, /*n=*/classes,
                /*k=*/batch, /*trans_a=*/1, 0, 0);
  int64_t dweight = dweightOffset;
  if (gradDtype != dtype) {
    tessel_cast(ctx, dtype, gradDtype, at(arena, dweightOffset),
                at(arena, wideGradOffset), features * classes);
    dweight = wideGradOffset;
  }
  for (int i = 0; i < FAKE_GRAD_FACTOR; ++i)
    tessel_binary(ctx, TESSEL_ADD, gradDtype, at(arena, gradOffset),
                  at(arena, dweight), at(arena, gradOffset),
                  features * classes);
}

extern "C" void tessel_update(tessel_ctx *ctx, void *arena) {
  float zero = 0;
  tessel_copy_to_device(ctx, at(arena, sumSquaresOffset), &zero, 4);
  tessel_sum_squares(ctx, gradDtype, at(arena, gradOffset), features * classes,
                     at(arena, sumSquaresOffset));
  tessel_clip_scale(ctx, at(arena, sumSquaresOffset), /*max_norm=*/1.0,
                    at(arena, gradScaleOffset), at(arena, scaleOffset));
  int64_t step = int64_t(tessel_get_step(ctx)) + 1;
  double lr = tessel_lr_at(TESSEL_LR_WARMUP_COSINE, 0.05, 0.005, 2, 50, step);
#ifdef FAKE_SGD
  tessel_optimizer opt = {TESSEL_OPT_SGD, 0, 0.9, 0.9, 0.999, 1e-8, 0.0};
  void *state1 = nullptr;
#else
  tessel_optimizer opt = {TESSEL_OPT_ADAM, 0, 0.0, 0.9, 0.999, 1e-8, 0.0};
  void *state1 = at(arena, state1Offset);
#endif
  // bf16: the master copy steps, the parameter is it rounded.
  int64_t stepped = masterStates ? masterOffset : weightOffset;
  tessel_optimizer_update(ctx, &opt, gradDtype, at(arena, stepped),
                          at(arena, gradOffset), at(arena, scaleOffset),
                          at(arena, state0Offset), state1, features * classes,
                          step, lr);
  if (masterStates)
    tessel_cast(ctx, TESSEL_F32, dtype, at(arena, masterOffset),
                at(arena, weightOffset), features * classes);
}
