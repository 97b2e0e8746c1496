//===- Safetensors.h - Parameter checkpoints in the safetensors format ----===//

#ifndef TESSEL_RUN_SAFETENSORS_H
#define TESSEL_RUN_SAFETENSORS_H

#include "runtime/launcher/ModelDescription.h"

#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tessel::run {

/// The safetensors name of a tessel dtype code ("F32", "BF16", ...).
const char *safetensorsDtype(int32_t dtypeCode);
/// The tessel dtype code of a safetensors dtype name; -1 for another.
int32_t safetensorsDtypeCode(const std::string &name);

/// One tensor of a safetensors file being written.
struct SafetensorsEntry {
  std::string name;
  int32_t dtypeCode = 0;
  std::vector<int64_t> shape;
};

/// Puts the bytes of entry `i` into its second argument.
using SafetensorsBytes = std::function<void(size_t i, std::vector<char> &)>;

/// Writes `entries` to `f` in order (`path` names it in errors): the
/// 8-byte header length, the header (with `metadata` as "__metadata__"),
/// then each entry's bytes. Throws RunError.
void writeSafetensors(std::FILE *f, const std::string &path,
                      const std::vector<SafetensorsEntry> &entries,
                      const std::map<std::string, std::string> &metadata,
                      const SafetensorsBytes &bytesOf);

/// A safetensors file mapped read-only, its header parsed and checked: no
/// repeated key, every tensor's bytes inside the file, the tensors tiling
/// the data exactly. Throws RunError "checkpoint 'PATH': ..." (a file
/// shorter than its header says is "truncated").
class SafetensorsFile {
public:
  struct Entry {
    std::string dtype; // "F32", ...
    std::vector<int64_t> shape;
    uint64_t begin = 0, end = 0; // data_offsets
  };
  explicit SafetensorsFile(const std::string &path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile &) = delete;
  SafetensorsFile &operator=(const SafetensorsFile &) = delete;

  /// Every tensor by name ("__metadata__" is not one).
  const std::map<std::string, Entry> &entries() const { return entries_; }
  /// The string entries of "__metadata__".
  const std::map<std::string, std::string> &metadata() const {
    return metadata_;
  }
  /// The first byte of the data (data_offsets count from here).
  const char *data() const { return data_; }

private:
  struct Mapping;
  std::unique_ptr<Mapping> mapping;
  std::map<std::string, Entry> entries_;
  std::map<std::string, std::string> metadata_;
  const char *data_ = nullptr;
};

/// Writes every parameter of `model` (read from `arena`) to `path` as
/// safetensors, and with `withStates` every optimizer state tensor after
/// them: first to a temporary of its own beside `path` (synced), then
/// renamed over `path`, so a crash, an error or a concurrent save never
/// leaves a half-written or mixed checkpoint behind (writeFileAtomically).
/// `metadata` goes to the header's "__metadata__" (a training run writes
/// "tessel.step").
void writeSafetensorsAtomically(
    const std::string &path, const ModelDesc &model, tessel_ctx *ctx,
    const void *arena, const std::map<std::string, std::string> &metadata,
    bool withStates = false);

/// The tensors a checkpoint holds, in file order: every parameter, then
/// (`withStates`) every optimizer state. Their entries have the global
/// shapes (a checkpoint saved on one mesh loads on any other).
std::vector<const TensorDesc *> checkpointTensors(const ModelDesc &model,
                                                  bool withStates);

/// As above, from the global tensors of a partitioned model gathered on the
/// host: `globalTensors` maps each name of checkpointTensors() to its
/// globalBytes() bytes.
void writeSafetensorsAtomically(
    const std::string &path, const ModelDesc &model,
    const std::map<std::string, std::vector<char>> &globalTensors,
    const std::map<std::string, std::string> &metadata, bool withStates);

/// What a checkpoint brought besides the parameters.
struct LoadedCheckpoint {
  /// Parameters only (no optimizer state, no "tessel.step"): a training run
  /// starts its optimizer from zero at step 0 (its master copies from the
  /// parameters).
  bool paramsOnly = true;
  int64_t step = 0; // "tessel.step": optimizer updates done so far
  /// How tensors were read into a model of another precision, for a note
  /// ("converted 2 parameters from F32 to BF16; ..."); "" when every one
  /// was read as stored.
  std::string conversions;
};

/// Reads every parameter of `model` from `path` into `arena`. The file must
/// hold exactly the model's parameters with their shapes, plus optionally
/// optimizer states ("<param>.<suffix>"). With `training`, those states
/// must be exactly the model's optimizer's (or absent: parameters only) and
/// are loaded too; otherwise they are ignored. Everything is validated
/// before the first byte of the arena is written.
///
/// Precisions (bf16 master weights, ModelDesc::precision):
///  - a parameter stored as f32 where the model's is bf16/f16, or the
///    reverse, is converted on the host (rounded to nearest even; widened
///    exactly); other dtype differences are errors;
///  - a master copy the file lacks (an f32 run's checkpoint, parameters
///    only) is its parameter's stored values in f32; it is never missing
///    optimizer state;
///  - a model without a master copy of P that reads a file with one
///    ("P.master", a bf16 run's) takes P from it: the exact f32 values.
LoadedCheckpoint loadSafetensors(const std::string &path,
                                 const ModelDesc &model, tessel_ctx *ctx,
                                 void *arena, bool training = false);

/// loadSafetensors in two halves, for a mesh: the file is opened and
/// validated once (global shapes) before any rank starts, then each rank
/// copies its blocks out of the mapping (concurrently: load() only reads).
/// `path` may also be a sharded checkpoint's directory (--save-sharded,
/// ShardedCheckpoint.h): its index and every shard are validated, then the
/// global tensors the run loads are assembled on the host, and load()
/// copies out of them alike.
class CheckpointReader {
public:
  /// Validates as loadSafetensors does; throws RunError.
  CheckpointReader(const std::string &path, const ModelDesc &model,
                   bool training);
  ~CheckpointReader();
  CheckpointReader(const CheckpointReader &) = delete;
  CheckpointReader &operator=(const CheckpointReader &) = delete;

  const LoadedCheckpoint &info() const { return loaded; }
  /// Writes into `arena` the block of every parameter (and, unless
  /// info().paramsOnly, every state; training from parameters only, every
  /// master copy) the rank at `coordinates` holds.
  /// `target`: place the tensors as that model lays them out (a pipeline
  /// stage's share of the whole model this reader checked against).
  void load(tessel_ctx *ctx, void *arena,
            const std::vector<int64_t> &coordinates = {},
            const ModelDesc *target = nullptr) const;

private:
  /// What load() writes of `layout`'s tensors.
  std::vector<const TensorDesc *> tensorsToLoad(const ModelDesc &layout) const;

  struct File;
  std::unique_ptr<File> file;
  const ModelDesc &model;
  bool training;
  LoadedCheckpoint loaded;
};

} // namespace tessel::run

#endif // TESSEL_RUN_SAFETENSORS_H
