//===- Arena.cpp - A model's tensors in a rank's arena --------------------===//

#include "runtime/launcher/Arena.h"
#include "runtime/launcher/Error.h"
#include "runtime/launcher/FloatFormats.h"

#include <algorithm>
#include <cstring>

using namespace tessel::run;

namespace {

/// Elements converted per call through the f32 staging buffer: bounds the
/// extra device memory a large parameter needs beside the arena.
constexpr int64_t stagingElements = int64_t(1) << 22;

/// Initialises `count` elements of `p` from global element `global` on in
/// f32 and rounds them into `dst` (p's dtype) with the runtime's cast:
/// exactly what its master copy holds, rounded as the update rounds it.
/// (Drawn in p's own dtype instead, a value would be rounded once from f64,
/// and differ in the last bit from the rounded f32 master now and then.)
void initRoundedFromF32(tessel_ctx *ctx, const TensorDesc &p, char *dst,
                        int64_t global, int64_t count, uint64_t seed,
                        void *staging) {
  int64_t size = tessel_dtype_size(p.dtypeCode);
  for (int64_t done = 0; done < count; done += stagingElements) {
    int64_t n = std::min(stagingElements, count - done);
    tessel_init_param(ctx, staging, TESSEL_F32, global + done, n, p.initKind,
                      p.initArgs, seed, p.name.c_str());
    tessel_cast(ctx, TESSEL_F32, p.dtypeCode, staging, dst + done * size, n);
  }
}

} // namespace

void tessel::run::initParams(const ModelDesc &model, tessel_ctx *ctx,
                             void *arena, uint64_t seed,
                             const std::vector<int64_t> &coordinates) {
  void *staging = nullptr;
  for (const TensorDesc *p : model.withRole("param")) {
    char *base = static_cast<char *>(arena) + p->offset;
    int64_t size = tessel_dtype_size(p->dtypeCode);
    bool mastered = model.masterFor(p->name) != nullptr;
    if (mastered && !staging) {
      staging = tessel_alloc(ctx, stagingElements * 4);
      if (!staging)
        throw RunError("cannot allocate " +
                       std::to_string(stagingElements * 4) +
                       " bytes to initialise the parameters");
    }
    // Straight into the arena, one contiguous run of the block at a time.
    forEachRun(blockOf(model, *p, coordinates),
               [&](int64_t local, int64_t global, int64_t count) {
                 if (mastered)
                   initRoundedFromF32(ctx, *p, base + local * size, global,
                                      count, seed, staging);
                 else
                   tessel_init_param(ctx, base + local * size, p->dtypeCode,
                                     /*first=*/global, count, p->initKind,
                                     p->initArgs, seed, p->name.c_str());
               });
  }
  // A master copy starts as its parameter's f32 values: the parameter's
  // init (kind, arguments, name) over the master's own block or ZeRO chunk,
  // whose global elements are the parameter's.
  for (const TensorDesc *m : model.withRole("state")) {
    if (!m->isMaster())
      continue;
    const TensorDesc &p = *model.find("param", *m->masterOf);
    char *base = static_cast<char *>(arena) + m->offset;
    forEachRun(blockOf(model, *m, coordinates),
               [&](int64_t local, int64_t global, int64_t count) {
                 tessel_init_param(ctx, base + local * 4, TESSEL_F32, global,
                                   count, p.initKind, p.initArgs, seed,
                                   p.name.c_str());
               });
  }
  tessel_synchronize(ctx);
  if (staging)
    tessel_free(ctx, staging);
}

void tessel::run::zeroGrads(const ModelDesc &model, tessel_ctx *ctx,
                            void *arena) {
  char *base = static_cast<char *>(arena);
  if (auto grads = model.regions.find("grads"); grads != model.regions.end()) {
    tessel_zero(ctx, base + grads->second.offset, grads->second.bytes);
    return;
  }
  for (const TensorDesc *g : model.withRole("grad"))
    tessel_zero(ctx, base + g->offset, g->bytes);
}

void tessel::run::zeroStates(const ModelDesc &model, tessel_ctx *ctx,
                             void *arena) {
  // A master copy holds its parameter's value (from initParams or the
  // checkpoint), never zero: skipping it leaves the order of calls free.
  for (const TensorDesc *t : model.withRole("state"))
    if (!t->isMaster())
      tessel_zero(ctx, static_cast<char *>(arena) + t->offset, t->bytes);
}

void tessel::run::writeGradScale(const ModelDesc &model, tessel_ctx *ctx,
                                 void *arena, double divisor) {
  const TensorDesc &scale = *model.withRole("grad_scale").at(0);
  void *device = static_cast<char *>(arena) + scale.offset;
  if (scale.dtypeCode == TESSEL_F64) {
    double value = 1.0 / divisor;
    tessel_copy_to_device(ctx, device, &value, sizeof(value));
  } else {
    float value = 1.0f / float(divisor);
    tessel_copy_to_device(ctx, device, &value, sizeof(value));
  }
}

void tessel::run::StepLoss::add(const ModelDesc &model, tessel_ctx *ctx,
                                const void *arena) {
  alignas(8) char loss[8], counted[8];
  auto read = [&](const TensorDesc &t, char *host) {
    tessel_copy_to_host(ctx, host, static_cast<const char *>(arena) + t.offset,
                        tessel_dtype_size(t.dtypeCode));
  };
  read(model.loss(), loss);
  if (const TensorDesc *count = model.lossCount())
    read(*count, counted);
  add(model, loss, counted);
}

void tessel::run::StepLoss::add(const ModelDesc &model, const void *lossHost,
                                const void *countHost) {
  sum += decodeLoss(model.loss(), lossHost);
  const TensorDesc *counted = model.lossCount();
  count += counted ? decodeLoss(*counted, countHost) : 1.0;
}

double tessel::run::decodeLoss(const TensorDesc &loss, const void *host) {
  if (loss.dtypeCode == TESSEL_F64) {
    double value;
    std::memcpy(&value, host, sizeof(value));
    return value;
  }
  float value;
  if (loss.dtypeCode == TESSEL_F32)
    std::memcpy(&value, host, sizeof(value));
  else // f16 / bf16, widened exactly
    convertFloats(loss.dtypeCode, host, TESSEL_F32, &value, 1);
  return value;
}

std::string tessel::run::describeArena(const ModelDesc &model) {
  static const std::pair<const char *, const char *> names[] = {
      {"params", "params"},
      {"grads", "grads"},
      {"states", "optimizer states"},
      {"inputs", "inputs"},
      {"outputs", "outputs"},
      {"stash", "weight-gradient stash"},
      {"kept", "kept forward activations"},
      {"scratch", "activations and scratch"}};
  std::string text;
  for (auto [region, name] : names) {
    auto it = model.regions.find(region);
    if (it == model.regions.end() || it->second.bytes == 0)
      continue;
    text += (text.empty() ? "" : ", ") + std::string(name) + " " +
            std::to_string(it->second.bytes);
  }
  return text.empty() ? text : text + " bytes";
}
