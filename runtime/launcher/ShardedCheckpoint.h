//===- ShardedCheckpoint.h - A checkpoint as one file per rank ------------===//
//
// `tessel-run --save-sharded DIR`: every rank writes the checkpoint tensors
// its arena holds — its blocks, ZeRO chunks and pipeline stage rows, with
// their local shapes — to DIR/rank-<r>-of-<W>.safetensors, in parallel and
// without gathering, and rank 0 writes DIR/index.json, which says for every
// global tensor which piece each file holds and where it lies (the piece's
// layout in the terms of a model description: shape, sharding, layers,
// zero, and the file's mesh coordinates). So the global tensors can be
// reassembled without the model that wrote them, and `--load DIR` loads
// them on any other mesh, ZeRO stage, pipeline or one device.
//
// A save is written into a fresh temporary directory beside DIR, every file
// fsynced, then (after every rank is done) swapped in at once: DIR is always
// the last whole checkpoint. docs/tessel-run.md, "Sharded checkpoints".
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUN_SHARDEDCHECKPOINT_H
#define TESSEL_RUN_SHARDEDCHECKPOINT_H

#include "runtime/launcher/ModelDescription.h"
#include "runtime/launcher/Safetensors.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tessel::run {

/// index.json's "format" and "version".
inline constexpr const char *kShardedCheckpointFormat =
    "tessel-sharded-checkpoint";
inline constexpr int64_t kShardedCheckpointVersion = 1;

/// "rank-<rank>-of-<world>.safetensors".
std::string shardFileName(int64_t rank, int64_t world);

/// One tensor of a rank's shard file.
struct ShardPiece {
  std::string key;                    // its name in the file
  const ModelDesc *layout = nullptr;  // the model, or the stage holding it
  const TensorDesc *tensor = nullptr; // of `layout`: what the arena holds
  int stage = -1; // the pipeline stage; -1 without a pipeline
};

/// What rank `rank` of `model` writes to its shard, in file order: the
/// parameters, then (`withStates`) the optimizer states, each as its arena
/// holds it. A pipeline rank writes every stage it runs, keyed
/// "stage<s>/<name>" (two stages of one rank may hold rows of one tensor);
/// otherwise the key is the tensor's name.
std::vector<ShardPiece> shardPieces(const ModelDesc &model, int32_t rank,
                                    bool withStates);

/// The text of index.json for a checkpoint of `model` (every rank's
/// pieces), with `runId` and `metadata` (the one-file checkpoint's
/// "__metadata__": "tessel.step" becomes the index's "step").
std::string shardIndexText(const ModelDesc &model, bool withStates,
                           const std::string &runId,
                           const std::map<std::string, std::string> &metadata);

/// Rank `rank`'s part of saving a sharded checkpoint of `model` to `dir`;
/// every rank of the mesh calls it at the same point. Rank 0 makes the
/// temporary directory and the run id and hands them to the others through
/// a tiny all-reduce (which is also the first barrier); each rank writes
/// its shard there (fsynced); rank 0 writes index.json; after a second
/// all-reduce (every shard is on disk) rank 0 fsyncs the directory and
/// swaps it in for `dir` (replaceDirectory). `arenaOf(stage)` is the arena
/// holding a piece (`stage` -1 without a pipeline). A rank that fails
/// throws RunError (its peers then fail in the next collective); rank 0
/// removes the temporary directory when it fails or sees a peer fail.
void saveShardedCheckpoint(const std::string &dir, const ModelDesc &model,
                           int32_t rank, tessel_ctx *ctx,
                           const std::function<const void *(int)> &arenaOf,
                           const std::map<std::string, std::string> &metadata,
                           bool withStates);

/// A sharded checkpoint directory, read: index.json parsed and checked (its
/// format, its files, every piece's layout against the mesh and its
/// tensor's global shape, the pieces covering every tensor exactly once)
/// and every shard mapped with its header checked against the index (the
/// run id, the keys, each piece's dtype and shape, no truncation). Every
/// error is one RunError line naming the file at fault. Nothing is copied
/// until assemble().
class ShardedCheckpoint {
public:
  explicit ShardedCheckpoint(const std::string &dir);
  ~ShardedCheckpoint();
  ShardedCheckpoint(const ShardedCheckpoint &) = delete;
  ShardedCheckpoint &operator=(const ShardedCheckpoint &) = delete;

  /// DIR/index.json, which errors about the tensors it lists name.
  const std::string &indexPath() const { return index; }
  /// The one-file checkpoint's "__metadata__" equivalent: the index's
  /// "metadata" and its "step" as "tessel.step".
  const std::map<std::string, std::string> &metadata() const {
    return metadata_;
  }
  /// Every global tensor as a one-file checkpoint's header would list it:
  /// its dtype and global shape, data_offsets packed in index order.
  std::map<std::string, SafetensorsFile::Entry> globalEntries() const;
  /// Writes global tensor `name` (row-major, its global shape) to `out`
  /// from the pieces (a replicated piece is read once).
  void assemble(const std::string &name, char *out) const;

  /// The layout of rank `rank`'s file as a model description: the index's
  /// mesh, and each piece a tensor named by its key, its offset within the
  /// file's data (exactly what the writing rank's arena held, so
  /// blockOf/forEachRun place it as they place a model's tensors).
  const ModelDesc &layoutOfRank(int64_t rank) const;
  /// The mesh coordinates of rank `rank`'s file.
  const std::vector<int64_t> &coordinatesOfRank(int64_t rank) const;

private:
  struct Piece;
  struct Tensor;
  struct Shard;
  std::string index;
  std::map<std::string, std::string> metadata_;
  std::vector<std::unique_ptr<Shard>> shards;
  std::vector<Tensor> tensors;
};

} // namespace tessel::run

#endif // TESSEL_RUN_SHARDEDCHECKPOINT_H
