//===- Model.h - A compiled model: its description and entry point --------===//

#ifndef TESSEL_RUN_MODEL_H
#define TESSEL_RUN_MODEL_H

#include "tessel/runtime.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessel::run {

/// One tensor of the arena, as the model's JSON describes it.
struct TensorDesc {
  std::string name;
  std::string role;  // param, input, label, loss or output
  std::string dtype; // f32 f16 bf16 f64 i32 i64
  int32_t dtypeCode = 0;
  std::vector<int64_t> shape;
  std::vector<std::string> axes;
  int64_t offset = 0;
  int64_t bytes = 0;
  // Parameters only.
  int32_t initKind = TESSEL_INIT_ZEROS;
  double initArgs[2] = {0.0, 0.0};
  // Integer inputs and labels: values lie in [0, limit).
  std::optional<int64_t> limit;

  int64_t numElements() const;
  bool isInteger() const;
};

/// The description returned by tessel_model_json().
struct ModelDesc {
  int64_t abiVersion = 0;
  std::string source;
  std::string function;
  std::string entry;
  int64_t arenaBytes = 0;
  int64_t peakBytes = 0;
  std::vector<TensorDesc> tensors;

  std::vector<const TensorDesc *> withRole(const std::string &role) const;
  /// Inputs then labels: what the launcher writes before each step.
  std::vector<const TensorDesc *> feeds() const;
  const TensorDesc &loss() const;
};

using ForwardFn = void (*)(tessel_ctx *, void *);

/// A dlopen'ed model .so.
struct LoadedModel {
  void *handle = nullptr;
  ForwardFn forward = nullptr;
  ModelDesc desc;
};

/// Parses and validates the JSON text of `file`'s model; throws RunError.
ModelDesc parseModelDescription(const std::string &json,
                                const std::string &file);

/// dlopens `path` (a .so) with `dlopenFlags` (default RTLD_NOW |
/// RTLD_LOCAL), reads its description and resolves its entry.
LoadedModel loadModel(const std::string &path, int dlopenFlags = 0);

/// The CPU context of rank 0 of 1 and its arena, freed together.
struct RankRuntime {
  tessel_ctx *ctx = nullptr;
  void *arena = nullptr;

  explicit RankRuntime(int64_t arenaBytes);
  ~RankRuntime();
  RankRuntime(const RankRuntime &) = delete;
  RankRuntime &operator=(const RankRuntime &) = delete;
};

/// Initialises every parameter of `model` in `arena` from `seed`.
void initParams(const ModelDesc &model, tessel_ctx *ctx, void *arena,
                uint64_t seed);

/// The scalar loss (f32 or f64) after a step.
double readLoss(const TensorDesc &loss, tessel_ctx *ctx, const void *arena);

/// A kernel error (e.g. a label out of range) makes every later number
/// meaningless: throws RunError naming `when`.
void checkKernelError(tessel_ctx *ctx, const std::string &when);

/// Compiles `mlirPath` with the tessel-compile next to this executable into
/// a fresh temporary .so and returns its path.
std::string compileMlirModel(const std::string &mlirPath);

/// Elements processed per step, for tokens/s: batch × sequence of the first
/// input for a sequence model, its batch otherwise.
int64_t tokensPerStep(const ModelDesc &desc);

} // namespace tessel::run

#endif // TESSEL_RUN_MODEL_H
