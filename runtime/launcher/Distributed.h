//===- Distributed.h - A partitioned model's data, gathers, traffic -------===//
//
// What a run on a mesh adds to the one-device launcher once its ranks are
// set up (Ranks.h): each rank's block of every global microbatch, the global
// tensors of a checkpoint gathered with the runtime's collectives, and the
// collectives a step ran against what the compiler reported.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUN_DISTRIBUTED_H
#define TESSEL_RUN_DISTRIBUTED_H

#include "runtime/launcher/Data.h"
#include "runtime/launcher/ModelDescription.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tessel::run {

/// Makes a data source writing the feeds `view` describes.
using BatchSourceFactory =
    std::function<std::unique_ptr<BatchSource>(const ModelDesc &view)>;

/// The data source of the rank at `coordinates`: `makeGlobal` fills the
/// global microbatch (globalFeedView(model): the samples one device's run
/// sees) into a staging buffer of this rank's context, and each feed's
/// block is copied from there into the arena. A model none of whose feeds
/// is split gets makeGlobal(model) itself (no staging).
std::unique_ptr<BatchSource>
makeRankFeeds(const ModelDesc &model, const BatchSourceFactory &makeGlobal,
              const std::vector<int64_t> &coordinates, tessel_ctx *ctx);

/// The global value of `t` assembled from every rank's block with
/// tessel_all_gather, one mesh axis at a time (innermost first, so a
/// dimension split by [a1, a2] comes back in block order whatever the
/// axes' order in the mesh). A ZeRO tensor's chunks are gathered first
/// (over all its ZeRO axes in one call when they are in mesh order, else
/// one at a time) and their padding dropped, giving the block. Every rank
/// of the mesh must call it for the same tensors in the same order; a rank
/// with `keep` gets the global bytes on the host, the others an empty
/// vector. Throws RunError on a runtime error (a failed peer included).
std::vector<char> gatherGlobalTensor(const ModelDesc &model,
                                     const TensorDesc &t, tessel_ctx *ctx,
                                     const void *arena, bool keep);

/// `values` reduced element by element (`kind`, a tessel_reduce_kind) over
/// mesh `axes`, in place, through a device buffer: every member of this
/// rank's groups calls it alike. Throws RunError naming `what` on a
/// runtime error.
void allReduceOnHost(tessel_ctx *ctx, uint32_t axes,
                     std::vector<double> &values, int32_t kind,
                     const std::string &what);
void allReduceOnHost(tessel_ctx *ctx, uint32_t axes,
                     std::vector<int64_t> &values, int32_t kind,
                     const std::string &what);

/// gatherGlobalTensor of every tensor of checkpointTensors(model,
/// withStates), by name (empty unless `keep`).
std::map<std::string, std::vector<char>>
gatherCheckpoint(const ModelDesc &model, tessel_ctx *ctx, const void *arena,
                 bool withStates, bool keep);

/// The names of the runtime's collectives, indexed by tessel_collective.
const std::vector<std::string> &collectiveNames();

/// This rank's collective counters (since tessel_reset_counters), one entry
/// per (collective, axes) that ran, ordered by collective then axes mask.
std::vector<CommCount> readCommCounters(tessel_ctx *ctx, const Mesh &mesh);

/// What one step moves on each rank by the description's "collectives":
/// training with M microbatches backward × M + update, evaluation
/// forward × M; ordered and merged as readCommCounters.
std::vector<CommCount> expectedCommPerStep(const ModelDesc &model,
                                           bool training, int64_t microbatches);

/// The (collective, axes) where `measured` differs from `expected`, as
/// "all_reduce over dp: 3 calls, 120 bytes (compiled: 2 calls, 80 bytes)";
/// "" when they agree.
std::string commDifference(const std::vector<CommCount> &expected,
                           const std::vector<CommCount> &measured);

/// "all_reduce over dp: 3 calls, 12345 bytes; all_gather over tp: ..."
/// ("none" for an empty list).
std::string describeComm(const std::vector<CommCount> &counts);

} // namespace tessel::run

#endif // TESSEL_RUN_DISTRIBUTED_H
