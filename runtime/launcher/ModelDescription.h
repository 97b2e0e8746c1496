//===- ModelDescription.h - A compiled model's JSON description -----------===//
//
// What tessel_model_json() says about a model .so — its entries, arena,
// tensors, training settings, mesh and collectives — parsed and validated
// once, and the questions the rest of the launcher asks of it. Nothing here
// touches a runtime context.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_LAUNCHER_MODELDESCRIPTION_H
#define TESSEL_LAUNCHER_MODELDESCRIPTION_H

#include "runtime/config/TrainConfig.h"
#include "runtime/launcher/MeshBlocks.h"
#include "tessel/runtime.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tessel::run {

/// A ZeRO-sharded tensor (a parameter, gradient or optimizer state split over
/// the `dp`-like mesh axes `axes`): the rank's block before ZeRO is `block`
/// (what `shape` would be without it); dimensions [0, dims) of it stay,
/// dimensions [dims, rank) are flattened row-major into I elements,
/// zero-padded to G·s (G the product of the axes' sizes, s = ceil(I / G)),
/// and the rank holds chunk g (its coordinates on `axes`, row-major) of
/// each prefix row: flat elements [g·s, (g + 1)·s). So `shape` is
/// block[0:dims] + [s]. Padding (flat index >= I) is no global element.
struct ZeroShard {
  std::vector<std::string> axes;
  int64_t dims = 0;
  std::vector<int64_t> block;
};

/// One tensor of the arena, as the model's JSON describes it.
struct TensorDesc {
  std::string name;
  std::string role;  // param, grad, state, input, label, grad_scale, loss or
                     // output
  std::string dtype; // f32 f16 bf16 f64 i32 i64
  int32_t dtypeCode = 0;
  std::vector<int64_t> shape;
  std::vector<std::string> axes;
  int64_t offset = 0;
  int64_t bytes = 0;
  // Parameters only. A parameter no gradient reaches is not trainable: it
  // has no grad and no state and the update leaves it alone.
  bool trainable = true;
  // A trainable parameter's weight decay (its group: 0 when a no_decay
  // pattern names it), when the description says.
  std::optional<double> weightDecay;
  int32_t initKind = TESSEL_INIT_ZEROS;
  double initArgs[2] = {0.0, 0.0};
  // Integer inputs and labels: values lie in [0, limit), or equal
  // ignoreIndex (a loss's labels it ignores: fine-tuning's -100).
  std::optional<int64_t> limit;
  std::optional<int64_t> ignoreIndex;
  // A partitioned model (one with a mesh): `shape` is the rank's block, the
  // arena's; `globalShape` the tensor's (equal to `shape` when nothing is
  // split); `sharding` per dimension the mesh axes that split it, outer
  // first (empty when no dimension is split).
  std::vector<int64_t> globalShape;
  std::vector<std::vector<std::string>> sharding;
  // A pipeline stage's slice of a stacked tensor (parameters, their
  // gradients and states): rows [offset, offset + shape[0]) of `total`.
  struct LayerRows {
    int64_t offset = 0, total = 0;
  };
  std::optional<LayerRows> layers;
  /// ZeRO: the rank stores a chunk of its block (see ZeroShard); `shape`,
  /// `bytes` and numElements() are then the chunk's (padding included).
  std::optional<ZeroShard> zero;
  /// States only (ABI v4): the f32 master copy of the 16-bit trainable
  /// parameter of this name ("master_of"). The update steps it and writes
  /// the parameter as it rounded; it starts from the parameter's init or
  /// the checkpoint's parameter values, never at zero.
  std::optional<std::string> masterOf;

  /// The rank's block before ZeRO: `zero->block`, else `shape`. Sharding,
  /// layer rows and the global shape are about it.
  const std::vector<int64_t> &blockShape() const {
    return zero ? zero->block : shape;
  }
  int64_t numElements() const;
  int64_t globalNumElements() const;
  /// Bytes of the global tensor (a checkpoint's entry).
  int64_t globalBytes() const;
  bool isInteger() const;
  /// Some dimension is split over a mesh axis.
  bool isSharded() const { return !sharding.empty(); }
  /// A parameter's f32 master copy (a state with "master_of").
  bool isMaster() const { return masterOf.has_value(); }
};

/// The checkpoint key (and description name) of parameter `param`'s master
/// copy: "<param>.master". A checkpoint is read without the description
/// that wrote it, so the name is what says a key is a master.
std::string masterKeyOf(const std::string &param);

/// What the training step was compiled with: the description's "train"
/// (runtime/config/TrainConfig.h, the compiler's own type).
using tessel::TrainConfig;

/// This step's learning rate (`step` 0-based, as tessel_set_step), as the
/// update entry computes it.
double lrAt(const TrainConfig &train, int64_t step);

/// A byte range of the arena.
struct Region {
  int64_t offset = 0;
  int64_t bytes = 0;
};

struct PipelineDesc;

/// The description returned by tessel_model_json().
struct ModelDesc {
  int64_t abiVersion = 0;
  std::string source;
  std::string function;
  /// Entry symbols by kind: "forward" always; "backward" and "update" when
  /// the model was compiled for training (ABI v2's "entries"; v1's "entry"
  /// is the forward).
  std::map<std::string, std::string> entries;
  int64_t arenaBytes = 0;
  int64_t peakBytes = 0;
  std::map<std::string, Region> regions;
  std::optional<TrainConfig> train;
  /// The compute type (tessel-compile --precision): "f32" or "bf16". Under
  /// ABI v4, bf16 also stores the trainable parameters in bf16, each with an
  /// f32 master copy among its states (TensorDesc::masterOf); their
  /// gradients are f32 or bf16 (--grad-precision). Before v4 the parameters,
  /// gradients and states are f32 either way. From ABI 18 on an f64
  /// parameter's states, and the gradient scale of a model with one, are
  /// f64.
  std::string precision = "f32";
  std::vector<TensorDesc> tensors;
  /// The mesh a partitioned model was compiled for; none for one device.
  std::optional<Mesh> mesh;
  /// Per entry kind ("forward", "backward", "update"): the collectives one
  /// call of it runs on each rank, one per (kind, axes).
  std::map<std::string, std::vector<CommCount>> collectives;
  /// A pipeline (runtime/launcher/Pipeline.h): its stages, each a model of
  /// its own. This description is then the whole model's view: every
  /// parameter, gradient and state once at its global shape (what a
  /// checkpoint holds), the first stage's feeds and the last stage's loss;
  /// its offsets mean nothing.
  std::shared_ptr<const PipelineDesc> pipeline;

  std::vector<const TensorDesc *> withRole(const std::string &role) const;
  /// Inputs then labels: what the launcher writes before each step.
  std::vector<const TensorDesc *> feeds() const;
  const TensorDesc &loss() const;
  /// The count the loss sums over (loss_count, ABI 22), or null: the
  /// step's loss is then the sum of its losses over the sum of the counts.
  const TensorDesc *lossCount() const;
  /// The gradient accumulator of parameter `name`, or null.
  const TensorDesc *gradOf(const std::string &name) const;
  /// The f32 master copy of parameter `name` (a state), or null.
  const TensorDesc *masterFor(const std::string &name) const;
  const TensorDesc *find(const std::string &role,
                         const std::string &name) const;
  /// Has backward and update entries: a run trains by default.
  bool trains() const;
  /// A step of `microbatches` runs backward_no_sync (and a zero-bubble
  /// stage's backward_weight_no_sync) per microbatch and reduce_grads once
  /// (more than one microbatch, and the entries exist).
  bool reducesGradientsOnce(int64_t microbatches) const;
  /// The batch of one microbatch: the size of the "batch" axis (else the
  /// first dimension) of the first input; 1 without one. A rank's share of
  /// it on a mesh (see globalFeedView).
  int64_t batchSize() const;
  /// The number of ranks: the mesh's world size, 1 without a mesh.
  int64_t worldSize() const { return mesh ? mesh->worldSize() : 1; }
};

/// The code (TESSEL_F32, ...) of a description's dtype name ("f32"); -1
/// for an unknown one.
int32_t dtypeCodeOf(const std::string &dtype);

/// Parses and validates the JSON text of `file`'s model; throws RunError.
ModelDesc parseModelDescription(const std::string &json,
                                const std::string &file);

/// Parses one tensor entry of a description (`entry`, a JSON object's text)
/// against `model`'s mesh and arena size, with every check
/// parseModelDescription makes of it; a problem throws RunError
/// "<prefix>tensor 'NAME': <problem>". A sharded checkpoint's index
/// describes its pieces this way (ShardedCheckpoint.h).
TensorDesc parseTensorDescription(const std::string &entry,
                                  const ModelDesc &model,
                                  const std::string &prefix);

/// Where the rank at `coordinates` holds its block of `t` (the whole tensor
/// without a mesh or a split).
TensorBlock blockOf(const ModelDesc &model, const TensorDesc &t,
                    const std::vector<int64_t> &coordinates);

/// The feeds (inputs, then labels) of one global microbatch — the global
/// shapes, packed from offset 0 of a buffer of `arenaBytes` — what one
/// device's run writes: the data source fills it and each rank copies its
/// block out. Its batchSize() is the global microbatch's.
ModelDesc globalFeedView(const ModelDesc &model);

/// Elements processed per step, for tokens/s: batch × sequence of the first
/// input for a sequence model, its batch otherwise.
int64_t tokensPerStep(const ModelDesc &desc);

} // namespace tessel::run

#endif // TESSEL_LAUNCHER_MODELDESCRIPTION_H
