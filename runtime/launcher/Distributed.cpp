//===- Distributed.cpp - A partitioned model's data, gathers, traffic -----===//

#include "runtime/launcher/Distributed.h"
#include "runtime/launcher/Error.h"
#include "runtime/launcher/Ranks.h"
#include "runtime/launcher/Safetensors.h"

#include <algorithm>
#include <optional>
#include <tuple>

using namespace tessel::run;

namespace {

/// The feeds of a rank whose inputs or labels are split. When every feed
/// is split along its batch dimension only (data parallelism), the rank
/// reads just its block of samples, as DistributedSampler does; otherwise
/// (a sequence split) the global microbatch is drawn into a staging buffer
/// exactly as one device draws it and each feed's block is copied out (a
/// strided copy on the device).
class RankFeeds : public BatchSource {
public:
  RankFeeds(const ModelDesc &model, const BatchSourceFactory &makeGlobal,
            const std::vector<int64_t> &coordinates, tessel_ctx *ctx)
      : model(model), view(globalFeedView(model)), coordinates(coordinates),
        ctx(ctx) {
    if (std::optional<int64_t> first = firstSampleOfRank()) {
      firstSample = *first;
      rows = makeGlobal(model);
    }
    global = makeGlobal(view);
  }
  ~RankFeeds() override {
    if (staging)
      tessel_free(ctx, staging);
  }
  RankFeeds(const RankFeeds &) = delete;
  RankFeeds &operator=(const RankFeeds &) = delete;

  void fill(int64_t index, tessel_ctx *fillCtx, void *arena) override {
    if (rows && rows->fillSamples(index * globalBatch + firstSample, fillCtx,
                                  arena))
      return;
    if (!staging) {
      staging = tessel_alloc(ctx, std::max<int64_t>(view.arenaBytes, 64));
      if (!staging)
        throw RunError("cannot allocate " + std::to_string(view.arenaBytes) +
                       " bytes to stage the global microbatch");
    }
    global->fill(index, fillCtx, staging);
    std::vector<const TensorDesc *> feeds = model.feeds();
    for (size_t i = 0; i < feeds.size(); ++i) {
      const TensorDesc &local = *feeds[i];
      const TensorDesc &whole = view.tensors[i];
      char *dst = static_cast<char *>(arena) + local.offset;
      const char *src = static_cast<const char *>(staging) + whole.offset;
      TensorBlock block = blockOf(model, local, coordinates);
      if (block.whole()) {
        tessel_copy(fillCtx, dst, src, local.bytes);
        continue;
      }
      std::vector<int64_t> in = rowMajorStrides(block.globalShape);
      std::vector<int64_t> out = rowMajorStrides(block.localShape);
      int64_t first = 0;
      for (size_t d = 0; d < in.size(); ++d)
        first += block.start[d] * in[d];
      tessel_strided_copy(fillCtx, local.dtypeCode,
                          src + first * tessel_dtype_size(local.dtypeCode), dst,
                          int32_t(block.localShape.size()),
                          block.localShape.data(), in.data(), out.data());
    }
  }

private:
  /// The first global sample of this rank's block when every feed is split
  /// along its batch dimension only, at the same samples; else none.
  std::optional<int64_t> firstSampleOfRank() {
    std::optional<int64_t> first;
    std::vector<const TensorDesc *> feeds = model.feeds();
    for (size_t i = 0; i < feeds.size(); ++i) {
      int dim = batchDimOf(*feeds[i]);
      TensorBlock block = blockOf(model, *feeds[i], coordinates);
      if (dim < 0 || block.whole())
        return std::nullopt;
      for (size_t d = 0; d < block.start.size(); ++d)
        if (int(d) != dim && (block.start[d] != 0 ||
                              block.localShape[d] != block.globalShape[d]))
          return std::nullopt;
      int64_t batch = block.globalShape[dim];
      if ((first && *first != block.start[dim]) ||
          (globalBatch && globalBatch != batch))
        return std::nullopt;
      first = block.start[dim];
      globalBatch = batch;
    }
    return first;
  }

  const ModelDesc &model;
  const ModelDesc view; // Outlives `global`, which points into it.
  std::vector<int64_t> coordinates;
  tessel_ctx *ctx;
  std::unique_ptr<BatchSource> global;
  // The rank's own samples: a source over the rank's feeds, where they
  // start and the global batch.
  std::unique_ptr<BatchSource> rows;
  int64_t firstSample = 0, globalBatch = 0;
  void *staging = nullptr;
};

/// Sorts by (collective, axes mask) and merges equal keys.
std::vector<CommCount> normalise(std::vector<CommCount> counts,
                                 const Mesh &mesh) {
  const std::vector<std::string> &names = collectiveNames();
  auto key = [&](const CommCount &c) {
    return std::make_tuple(std::find(names.begin(), names.end(), c.kind) -
                               names.begin(),
                           axesMaskOf(mesh, c.axes));
  };
  std::sort(
      counts.begin(), counts.end(),
      [&](const CommCount &a, const CommCount &b) { return key(a) < key(b); });
  std::vector<CommCount> out;
  for (CommCount &c : counts) {
    c.axes = mesh.axesOf(axesMaskOf(mesh, c.axes));
    if (!out.empty() && key(out.back()) == key(c)) {
      out.back().calls += c.calls;
      out.back().bytes += c.bytes;
      out.back().asyncBytes += c.asyncBytes;
      out.back().overlappedBytes += c.overlappedBytes;
    } else {
      out.push_back(c);
    }
  }
  out.erase(std::remove_if(out.begin(), out.end(),
                           [](const CommCount &c) {
                             return c.calls == 0 && c.bytes == 0;
                           }),
            out.end());
  return out;
}

std::string axesText(const std::vector<std::string> &axes) {
  std::string text;
  for (const std::string &a : axes)
    text += (text.empty() ? "" : ",") + a;
  return text;
}

std::string countText(const CommCount &c) {
  return std::to_string(c.calls) + (c.calls == 1 ? " call, " : " calls, ") +
         std::to_string(c.bytes) + " bytes" +
         (c.asyncBytes ? " (" + std::to_string(c.asyncBytes) + " started)"
                       : std::string());
}

} // namespace

std::unique_ptr<BatchSource> tessel::run::makeRankFeeds(
    const ModelDesc &model, const BatchSourceFactory &makeGlobal,
    const std::vector<int64_t> &coordinates, tessel_ctx *ctx) {
  bool split = false;
  for (const TensorDesc *t : model.feeds())
    split |= t->isSharded();
  if (!split)
    return makeGlobal(model);
  return std::make_unique<RankFeeds>(model, makeGlobal, coordinates, ctx);
}

namespace {

/// A device buffer of the gathers, freed with the object.
struct DeviceBuffer {
  tessel_ctx *ctx;
  void *data = nullptr;
  DeviceBuffer(tessel_ctx *ctx, int64_t bytes, const TensorDesc &t) : ctx(ctx) {
    data = tessel_alloc(ctx, std::max<int64_t>(bytes, 64));
    if (!data)
      throw RunError("cannot allocate " + std::to_string(bytes) +
                     " bytes to gather '" + t.name + "'");
  }
  ~DeviceBuffer() { tessel_free(ctx, data); }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
};

/// The collective just run, synchronised; throws RunError on its error.
void checkGather(tessel_ctx *ctx, const TensorDesc &t) {
  tessel_synchronize(ctx);
  if (const char *error = tessel_error(ctx))
    throw RunError("gathering '" + t.name + "' for the checkpoint: " + error);
}

/// Gathers `current` (of `shape`) over `axes` along dimension `dim`, so
/// that the pieces come back in the row-major order of the axes' coordinates
/// (outer first, as blockIndex): with `oneCall`, one call over the whole
/// group when the axes are in mesh order (the runtime numbers a group's
/// ranks by axis, lower axis slower); else one axis at a time, innermost
/// first. `current`, `shape` and `owned` are updated in place.
void gatherAlong(tessel_ctx *ctx, const Mesh &mesh, const TensorDesc &t,
                 const std::vector<std::string> &axes, int dim, bool oneCall,
                 const void *&current, std::vector<int64_t> &shape,
                 std::unique_ptr<DeviceBuffer> &owned) {
  std::vector<int> indices;
  for (const std::string &name : axes)
    if (mesh.shape[axisOf(mesh, name)] > 1)
      indices.push_back(axisOf(mesh, name));
  if (indices.empty())
    return;
  std::vector<std::vector<int>> calls;
  if (oneCall && std::is_sorted(indices.begin(), indices.end()))
    calls.push_back(indices);
  else
    for (size_t i = indices.size(); i-- > 0;)
      calls.push_back({indices[i]});
  int64_t elem = tessel_dtype_size(t.dtypeCode);
  for (const std::vector<int> &group : calls) {
    uint32_t mask = 0;
    int64_t size = 1;
    for (int axis : group) {
      mask |= 1u << axis;
      size *= mesh.shape[axis];
    }
    int64_t bytes = product(shape) * elem * size;
    auto gathered = std::make_unique<DeviceBuffer>(ctx, bytes, t);
    tessel_all_gather(ctx, mask, t.dtypeCode, current, gathered->data,
                      int32_t(shape.size()), shape.data(), int32_t(dim));
    checkGather(ctx, t);
    owned = std::move(gathered);
    current = owned->data;
    shape[dim] *= size;
  }
}

} // namespace

namespace {
template <typename T>
void allReduceVector(tessel_ctx *ctx, uint32_t axes, std::vector<T> &values,
                     int32_t dtype, int32_t kind, const std::string &what) {
  int64_t bytes = int64_t(values.size() * sizeof(T));
  void *device = tessel_alloc(ctx, std::max<int64_t>(bytes, 64));
  if (!device)
    throw RunError("out of memory " + what);
  tessel_copy_to_device(ctx, device, values.data(), bytes);
  tessel_all_reduce(ctx, axes, dtype, device, device, int64_t(values.size()),
                    kind);
  tessel_copy_to_host(ctx, values.data(), device, bytes);
  tessel_free(ctx, device);
  checkKernelError(ctx, what);
}
} // namespace

void tessel::run::allReduceOnHost(tessel_ctx *ctx, uint32_t axes,
                                  std::vector<double> &values, int32_t kind,
                                  const std::string &what) {
  allReduceVector(ctx, axes, values, TESSEL_F64, kind, what);
}

void tessel::run::allReduceOnHost(tessel_ctx *ctx, uint32_t axes,
                                  std::vector<int64_t> &values, int32_t kind,
                                  const std::string &what) {
  allReduceVector(ctx, axes, values, TESSEL_I64, kind, what);
}

std::vector<char>
tessel::run::gatherGlobalTensor(const ModelDesc &model, const TensorDesc &t,
                                tessel_ctx *ctx, const void *arena, bool keep) {
  const char *local = static_cast<const char *>(arena) + t.offset;
  std::vector<char> host;
  if (!model.mesh || (!t.isSharded() && !t.zero)) {
    // Replicated: every rank holds the global tensor.
    if (keep) {
      host.resize(t.bytes);
      tessel_copy_to_host(ctx, host.data(), local, t.bytes);
    }
    return host;
  }
  const Mesh &mesh = *model.mesh;
  std::vector<int64_t> shape = t.shape;
  const void *current = local;
  std::unique_ptr<DeviceBuffer> owned;
  if (t.zero) {
    // The ZeRO chunks [block[:k], s] along dim k -> [block[:k], G·s], then
    // the first I of each row: the block.
    int dims = int(t.zero->dims);
    gatherAlong(ctx, mesh, t, t.zero->axes, dims, /*oneCall=*/true, current,
                shape, owned);
    const std::vector<int64_t> &block = t.blockShape();
    int64_t rows =
        product(std::vector<int64_t>(block.begin(), block.begin() + dims));
    int64_t inner =
        product(std::vector<int64_t>(block.begin() + dims, block.end()));
    if (shape[dims] != inner && rows * inner > 0) {
      auto unpadded = std::make_unique<DeviceBuffer>(
          ctx, rows * inner * tessel_dtype_size(t.dtypeCode), t);
      int64_t extent[2] = {rows, inner}, in[2] = {shape[dims], 1},
              out[2] = {inner, 1};
      tessel_strided_copy(ctx, t.dtypeCode, current, unpadded->data, 2, extent,
                          in, out);
      checkGather(ctx, t);
      owned = std::move(unpadded);
      current = owned->data;
    }
    shape = block;
  }
  for (size_t d = 0; d < t.sharding.size(); ++d)
    gatherAlong(ctx, mesh, t, t.sharding[d], int(d), /*oneCall=*/false, current,
                shape, owned);
  if (keep) {
    int64_t bytes = product(shape) * tessel_dtype_size(t.dtypeCode);
    host.resize(bytes);
    tessel_copy_to_host(ctx, host.data(), current, bytes);
    tessel_synchronize(ctx);
  }
  return host;
}

std::map<std::string, std::vector<char>>
tessel::run::gatherCheckpoint(const ModelDesc &model, tessel_ctx *ctx,
                              const void *arena, bool withStates, bool keep) {
  std::map<std::string, std::vector<char>> tensors;
  for (const TensorDesc *t : checkpointTensors(model, withStates)) {
    std::vector<char> bytes = gatherGlobalTensor(model, *t, ctx, arena, keep);
    if (keep)
      tensors[t->name] = std::move(bytes);
  }
  return tensors;
}

const std::vector<std::string> &tessel::run::collectiveNames() {
  static const std::vector<std::string> names = {
      "all_reduce", "all_gather", "reduce_scatter", "all_to_all"};
  return names;
}

std::vector<CommCount> tessel::run::readCommCounters(tessel_ctx *ctx,
                                                     const Mesh &mesh) {
  std::vector<CommCount> counts;
  for (int32_t kind = 0; kind < TESSEL_NUM_COLLECTIVES; ++kind)
    for (uint32_t mask = 1; mask < (1u << mesh.axes.size()); ++mask) {
      CommCount c;
      c.kind = collectiveNames()[kind];
      c.axes = mesh.axesOf(mask);
      c.calls = tessel_comm_calls(ctx, kind, mask);
      c.bytes = tessel_comm_bytes(ctx, kind, mask);
      c.asyncBytes = tessel_comm_async_bytes(ctx, kind, mask);
      if (c.calls || c.bytes)
        counts.push_back(c);
    }
  return normalise(counts, mesh);
}

std::vector<CommCount> tessel::run::expectedCommPerStep(const ModelDesc &model,
                                                        bool training,
                                                        int64_t microbatches) {
  if (!model.mesh)
    return {};
  std::vector<CommCount> counts;
  auto add = [&](const std::string &entry, int64_t times) {
    auto it = model.collectives.find(entry);
    if (it == model.collectives.end())
      return;
    for (CommCount c : it->second) {
      c.calls *= times;
      c.bytes *= times;
      c.asyncBytes *= times;
      c.overlappedBytes *= times;
      counts.push_back(c);
    }
  };
  if (training) {
    // Several microbatches reduce their summed gradients once.
    bool once = model.reducesGradientsOnce(microbatches);
    add(once ? "backward_no_sync" : "backward", microbatches);
    if (once)
      add("reduce_grads", 1);
    add("update", 1);
    add("grad_norm", 1); // a clipping pipeline stage's
  } else {
    add("forward", microbatches);
  }
  return normalise(counts, *model.mesh);
}

std::string
tessel::run::commDifference(const std::vector<CommCount> &expected,
                            const std::vector<CommCount> &measured) {
  std::map<std::string, std::pair<const CommCount *, const CommCount *>> keys;
  for (const CommCount &c : expected)
    keys[commKey(c)].first = &c;
  for (const CommCount &c : measured)
    keys[commKey(c)].second = &c;
  std::string text;
  CommCount none;
  for (auto &[key, pair] : keys) {
    const CommCount &want = pair.first ? *pair.first : none;
    const CommCount &got = pair.second ? *pair.second : none;
    if (want.calls == got.calls && want.bytes == got.bytes &&
        want.asyncBytes == got.asyncBytes)
      continue;
    const CommCount &named = pair.first ? want : got;
    text += (text.empty() ? "" : "; ") + named.kind + " over " +
            axesText(named.axes) + ": " + countText(got) +
            " (compiled: " + countText(want) + ")";
  }
  return text;
}

std::string tessel::run::describeComm(const std::vector<CommCount> &counts) {
  if (counts.empty())
    return "none";
  std::string text;
  for (const CommCount &c : counts)
    text += (text.empty() ? "" : "; ") + c.kind + " over " + axesText(c.axes) +
            ": " + countText(c);
  return text;
}
