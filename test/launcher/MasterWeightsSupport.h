//===- MasterWeightsSupport.h - bf16 models with master copies in tests ---===//
//
// Hand-written ABI v4 descriptions of one trained parameter "w" (bf16 with
// an f32 master copy "w.master", or f32 without one) and a frozen "frozen",
// with Adam or SGD states, on one device, a ZeRO mesh or a pipeline stage;
// and reading and writing their tensors in a CPU arena.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUN_TEST_MASTERWEIGHTSSUPPORT_H
#define TESSEL_RUN_TEST_MASTERWEIGHTSSUPPORT_H

#include "runtime/launcher/FloatFormats.h"
#include "runtime/launcher/ModelDescription.h"
#include "tessel/runtime.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <string>
#include <vector>

namespace tessel::run::test {

using nlohmann::json;

struct MasterModelSpec {
  std::string paramDtype = "bf16"; // "f32" or "f64": no master
  std::string gradDtype = "f32";
  std::string optimizer = "adamw"; // or "sgd"
  std::vector<int64_t> paramShape = {3, 7}; // stored shapes
  std::vector<int64_t> stateShape = {3, 7};
  json mesh;                          // null: one device
  json paramExtra = json::object();   // e.g. "zero", "layers", "sharding"
  json stateExtra = json::object();   // the master's and the moments'
  bool withMaster = true;             // (a bf16 parameter only)
};

/// The default spec with parameters of `paramDtype` and `optimizer`.
inline MasterModelSpec specWith(const std::string &paramDtype,
                                const std::string &optimizer = "adamw") {
  MasterModelSpec spec;
  spec.paramDtype = paramDtype;
  if (paramDtype == "f64")
    spec.gradDtype = "f64"; // only 16-bit parameters have f32 gradients
  spec.optimizer = optimizer;
  return spec;
}

inline bool isSixteenBit(const std::string &dtype) {
  return dtype == "bf16" || dtype == "f16";
}

/// The description's JSON: w (init normal(0, 0.7)), frozen [2] (ones, of
/// the parameters' dtype), w's grad, w.master first among its states, one
/// input, one label, grad_scale and the loss, packed 64-byte aligned.
inline json masterModelJson(const MasterModelSpec &spec) {
  json tensors = json::array();
  int64_t offset = 0;
  auto add = [&](const std::string &name, const std::string &role,
                 const std::string &dtype, const std::vector<int64_t> &shape,
                 const json &extra) -> json & {
    int64_t elements = 1;
    for (int64_t d : shape)
      elements *= d;
    int64_t bytes = elements * tessel_dtype_size(dtypeCodeOf(dtype));
    json t = {{"name", name},   {"role", role},     {"dtype", dtype},
              {"shape", shape}, {"offset", offset}, {"bytes", bytes}};
    for (auto &[key, value] : extra.items())
      t[key] = value;
    offset += (bytes + 63) / 64 * 64;
    tensors.push_back(t);
    return tensors.back();
  };
  json &w = add("w", "param", spec.paramDtype, spec.paramShape, spec.paramExtra);
  w["init"] = {{"kind", "normal"}, {"args", {0.7, 0.0}}};
  add("frozen", "param", spec.paramDtype, {2},
      {{"trainable", false}, {"init", {{"kind", "ones"}}}});
  add("w", "grad", spec.gradDtype, spec.paramShape, spec.paramExtra);
  if (isSixteenBit(spec.paramDtype) && spec.withMaster) {
    json extra = spec.stateExtra;
    extra["master_of"] = "w";
    add("w.master", "state", "f32", spec.stateShape, extra);
  }
  std::vector<std::string> suffixes = spec.optimizer == "sgd"
                                          ? std::vector<std::string>{"momentum"}
                                          : std::vector<std::string>{"m", "v"};
  // An f64 model's states and scale are f64 (ABI 18).
  bool f64 = spec.paramDtype == "f64";
  std::string stateDtype = f64 ? "f64" : "f32";
  for (const std::string &suffix : suffixes)
    add("w." + suffix, "state", stateDtype, spec.stateShape, spec.stateExtra);
  add("input0", "input", "f32", {4, 2}, {{"axes", {"batch", "embed"}}});
  add("label0", "label", "i32", {4}, {{"limit", 3}});
  add("grad_scale", "grad_scale", stateDtype, {}, json::object());
  add("loss", "loss", "f32", {}, json::object());
  json j = {{"abi_version", f64 ? 18 : 4},
            {"source", "m.mlir"},
            {"function", "loss"},
            {"precision", isSixteenBit(spec.paramDtype) ? "bf16" : "f32"},
            {"entries",
             {{"forward", "tessel_forward"},
              {"backward", "tessel_backward"},
              {"update", "tessel_update"}}},
            {"arena_bytes", offset},
            {"train",
             {{"optimizer", spec.optimizer},
              {"lr", 1e-3},
              {"momentum", spec.optimizer == "sgd" ? 0.9 : 0.0}}},
            {"tensors", tensors}};
  if (!spec.mesh.is_null())
    j["mesh"] = spec.mesh;
  return j;
}

inline ModelDesc masterModel(const MasterModelSpec &spec = {}) {
  return parseModelDescription(masterModelJson(spec).dump(), "m.so");
}

inline const TensorDesc &tensorOf(const ModelDesc &m, const std::string &role,
                                  const std::string &name) {
  const TensorDesc *t = m.find(role, name);
  EXPECT_NE(t, nullptr) << role << " " << name;
  return *t;
}

/// The raw bytes of `t` in `arena`.
inline std::vector<char> bytesAt(tessel_ctx *ctx, const void *arena,
                                 const TensorDesc &t) {
  std::vector<char> out(size_t(t.bytes));
  tessel_copy_to_host(ctx, out.data(),
                      static_cast<const char *>(arena) + t.offset, t.bytes);
  return out;
}

/// `t`'s elements as f32 (widened exactly from bf16/f16).
inline std::vector<float> valuesAt(tessel_ctx *ctx, const void *arena,
                                   const TensorDesc &t) {
  std::vector<char> bytes = bytesAt(ctx, arena, t);
  std::vector<float> out(size_t(t.numElements()));
  convertFloats(t.dtypeCode, bytes.data(), TESSEL_F32, out.data(),
                t.numElements());
  return out;
}

/// Writes f32 `values` into `t` (rounded to its dtype).
inline void setValues(tessel_ctx *ctx, void *arena, const TensorDesc &t,
                      const std::vector<float> &values) {
  std::vector<char> bytes(size_t(t.bytes));
  convertFloats(TESSEL_F32, values.data(), t.dtypeCode, bytes.data(),
                t.numElements());
  tessel_copy_to_device(ctx, static_cast<char *>(arena) + t.offset,
                        bytes.data(), t.bytes);
}

/// f32 values the bf16 grid cannot hold: rounding them shows.
inline std::vector<float> offGridValues(int64_t n, float scale) {
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    out[size_t(i)] = scale * (1.0f + float(i) / 3.0f) * (i % 2 ? -1.0f : 1.0f) +
                     scale * 1e-4f;
  return out;
}

/// The bf16 bits of f32 `value` rounded (the launcher's conversion).
inline uint16_t roundedBits(float value) {
  uint16_t bits;
  convertFloats(TESSEL_F32, &value, TESSEL_BF16, &bits, 1);
  return bits;
}

/// bf16 bits of f32 `values` rounded.
inline std::vector<uint16_t> roundedBits(const std::vector<float> &values) {
  std::vector<uint16_t> out;
  for (float v : values)
    out.push_back(roundedBits(v));
  return out;
}

/// The bf16 bits of `t` in `arena`.
inline std::vector<uint16_t> bf16BitsAt(tessel_ctx *ctx, const void *arena,
                                        const TensorDesc &t) {
  std::vector<uint16_t> out(size_t(t.numElements()));
  tessel_copy_to_host(ctx, out.data(),
                      static_cast<const char *>(arena) + t.offset, t.bytes);
  return out;
}

} // namespace tessel::run::test

#endif // TESSEL_RUN_TEST_MASTERWEIGHTSSUPPORT_H
