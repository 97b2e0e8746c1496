//===- Arena.cpp - A model's tensors in a rank's arena --------------------===//

#include "runtime/launcher/Arena.h"

#include <cmath>
#include <cstring>

using namespace tessel::run;

void tessel::run::initParams(const ModelDesc &model, tessel_ctx *ctx,
                             void *arena, uint64_t seed,
                             const std::vector<int64_t> &coordinates) {
  for (const TensorDesc *p : model.withRole("param")) {
    char *base = static_cast<char *>(arena) + p->offset;
    int64_t size = tessel_dtype_size(p->dtypeCode);
    // Straight into the arena, one contiguous run of the block at a time.
    forEachRun(blockOf(model, *p, coordinates),
               [&](int64_t local, int64_t global, int64_t count) {
                 tessel_init_param(ctx, base + local * size, p->dtypeCode,
                                   /*first=*/global, count, p->initKind,
                                   p->initArgs, seed, p->name.c_str());
               });
  }
  tessel_synchronize(ctx);
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
  for (const TensorDesc *t : model.withRole("state"))
    tessel_zero(ctx, static_cast<char *>(arena) + t->offset, t->bytes);
}

/// The value of a bfloat16: the upper half of an f32.
static double bf16ToDouble(uint16_t bits) {
  uint32_t word = uint32_t(bits) << 16;
  float value;
  std::memcpy(&value, &word, sizeof(value));
  return value;
}

/// The value of an IEEE half (subnormals, infinities and NaN included).
static double f16ToDouble(uint16_t bits) {
  int exponent = (bits >> 10) & 0x1F;
  int mantissa = bits & 0x3FF;
  double sign = (bits & 0x8000) ? -1.0 : 1.0;
  if (exponent == 0)
    return sign * std::ldexp(double(mantissa), -24);
  if (exponent == 0x1F)
    return mantissa ? std::nan("") : sign * HUGE_VAL;
  return sign * std::ldexp(double(mantissa | 0x400), exponent - 25);
}

double tessel::run::readLoss(const TensorDesc &loss, tessel_ctx *ctx,
                             const void *arena) {
  const char *src = static_cast<const char *>(arena) + loss.offset;
  if (loss.dtypeCode == TESSEL_F64) {
    double value;
    tessel_copy_to_host(ctx, &value, src, sizeof(value));
    return value;
  }
  if (loss.dtypeCode == TESSEL_F32) {
    float value;
    tessel_copy_to_host(ctx, &value, src, sizeof(value));
    return value;
  }
  // f16 / bf16: two bytes on the device, widened exactly on the host.
  uint16_t bits;
  tessel_copy_to_host(ctx, &bits, src, sizeof(bits));
  return loss.dtypeCode == TESSEL_BF16 ? bf16ToDouble(bits) : f16ToDouble(bits);
}

std::string tessel::run::describeArena(const ModelDesc &model) {
  static const std::pair<const char *, const char *> names[] = {
      {"params", "params"},
      {"grads", "grads"},
      {"states", "optimizer states"},
      {"inputs", "inputs"},
      {"outputs", "outputs"},
      {"stash", "weight-gradient stash"},
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
