//===- collectives.cpp - Mesh queries and the collectives' entry points ---===//
//
// The backend-neutral half of the collectives, in one place for all five
// and their started forms: the group of a rank for an axes mask, the
// argument checks, groups of one (a local copy), all_slice (no
// communication: a strided copy), and the counters. Only the data movement
// among a group of more than one rank goes to the context's Communicator:
// at once for a blocking call, and for a started one through the
// communicator's own start (a stream-ordered one) or the context's comm
// worker (core/async_comm.h), in the rank's call order either way.
//
//===----------------------------------------------------------------------===//

#include "core/async_comm.h"
#include "core/backend.h"
#include "core/rng.h"

using namespace tessel;

//===--- Groups -----------------------------------------------------------===//

bool tessel::groupOf(const tessel_ctx *ctx, uint32_t mask, Group &group) {
  const int32_t axes = int32_t(ctx->meshShape.size());
  if (axes < 32 && (mask >> axes) != 0)
    return false;
  group = Group();
  group.mask = mask;
  for (int32_t a = 0; a < axes; ++a) {
    int64_t size = ctx->meshShape[size_t(a)], coord = ctx->meshCoord[size_t(a)];
    if (mask & (1u << a)) {
      group.index = group.index * size + coord;
      group.size *= size;
    } else {
      group.id = group.id * size + coord;
    }
  }
  return true;
}

int32_t tessel::groupMemberRank(const tessel_ctx *ctx, const Group &group,
                                int64_t j) {
  const size_t axes = ctx->meshShape.size();
  std::vector<int64_t> coord(ctx->meshCoord);
  // The last masked axis is the fastest digit of the group index.
  for (size_t a = axes; a-- > 0;) {
    if (group.mask & (1u << a)) {
      coord[a] = j % ctx->meshShape[a];
      j /= ctx->meshShape[a];
    }
  }
  int64_t rank = 0;
  for (size_t a = 0; a < axes; ++a)
    rank = rank * ctx->meshShape[a] + coord[a];
  return int32_t(rank);
}

//===--- Collective descriptions ------------------------------------------===//

int64_t Collective::inBytes() const {
  if (kind == TESSEL_COLL_ALL_REDUCE)
    return count * elemSize;
  if (kind == TESSEL_COLL_ALL_TO_ALL) {
    int64_t n = elemSize;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  return outer * len * inner * elemSize;
}

uint64_t Collective::signature() const {
  uint64_t h =
      hash4(uint64_t(kind), uint64_t(dtype), uint64_t(reduce), uint64_t(count));
  h = hash4(h, uint64_t(outer), uint64_t(len), uint64_t(inner));
  h = hash4(h, uint64_t(splitDim), uint64_t(concatDim), shape.size());
  for (int64_t d : shape)
    h = mix64(h ^ uint64_t(d));
  return h;
}

//===--- Checks -----------------------------------------------------------===//

namespace {

/// all_slice's kind in a Collective: past the counted collectives (it
/// counts nothing and never reaches a communicator).
constexpr int32_t kAllSlice = TESSEL_NUM_COLLECTIVES;
constexpr int32_t kNoReduction = -1;

/// The arguments of any of the five entry points, as the caller gave them.
struct Call {
  int32_t kind;
  const char *name;
  uint32_t axes;
  int32_t dtype;
  const void *in;
  void *out;
  int32_t reduce = kNoReduction; /// a reduction's kind
  int64_t count = 0;             /// all_reduce
  int32_t rank = 0;              /// the others: the input tensor
  const int64_t *shape = nullptr;
  int32_t dim = 0;       /// the gathered / scattered / sliced / split dim
  int32_t concatDim = 0; /// all_to_all
};

bool isReduceKind(int32_t kind) {
  return kind == TESSEL_REDUCE_SUM || kind == TESSEL_REDUCE_MEAN ||
         kind == TESSEL_REDUCE_MAX;
}

/// Checks a tensor shape and `dim` and views the tensor as [outer, len,
/// inner] around it.
bool checkShape(tessel_ctx *ctx, Collective &c, int32_t rank,
                const int64_t *shape, int32_t dim, const char *what) {
  if (rank < 1 || rank > 64 || !shape) {
    setError(ctx, "%s: bad tensor rank %d", c.name, rank);
    return false;
  }
  c.shape.assign(shape, shape + rank);
  int64_t elems = 1;
  for (int32_t d = 0; d < rank; ++d) {
    if (shape[d] < 0 || __builtin_mul_overflow(elems, shape[d], &elems)) {
      setError(ctx, "%s: bad size %lld of dimension %d", c.name,
               (long long)shape[d], d);
      return false;
    }
  }
  int64_t bytes;
  if (__builtin_mul_overflow(elems, c.elemSize, &bytes)) {
    setError(ctx, "%s: tensor size overflows", c.name);
    return false;
  }
  if (dim < 0 || dim >= rank) {
    setError(ctx, "%s: %s %d outside a tensor of rank %d", c.name, what, dim,
             rank);
    return false;
  }
  c.outer = 1;
  c.inner = 1;
  for (int32_t d = 0; d < dim; ++d)
    c.outer *= shape[d];
  for (int32_t d = dim + 1; d < rank; ++d)
    c.inner *= shape[d];
  c.len = shape[dim];
  return true;
}

bool checkDivisible(tessel_ctx *ctx, const Collective &c, int32_t dim,
                    const Group &group) {
  if (c.shape[size_t(dim)] % group.size == 0)
    return true;
  setError(ctx,
           "%s: dimension %d of size %lld does not split over a group "
           "of %lld",
           c.name, dim, (long long)c.shape[size_t(dim)], (long long)group.size);
  return false;
}

bool checkBuffers(tessel_ctx *ctx, const Collective &c, const Group &group,
                  bool inPlaceAllowed) {
  if (c.inBytes() > 0 && (!c.in || !c.out)) {
    setError(ctx, "%s: null buffer", c.name);
    return false;
  }
  if (!inPlaceAllowed && group.size > 1 && c.in == c.out && c.inBytes() > 0) {
    setError(ctx, "%s: in and out must be distinct buffers", c.name);
    return false;
  }
  return true;
}

/// Every check of every collective: describes `call` in `c` and finds the
/// calling rank's group; false with the error recorded.
bool prepare(tessel_ctx *ctx, const Call &call, Collective &c, Group &group) {
  c.kind = call.kind;
  c.name = call.name;
  c.in = call.in;
  c.out = call.out;
  if (!groupOf(ctx, call.axes, group)) {
    setError(ctx, "%s: axes mask 0x%x names an axis beyond the mesh's %d",
             c.name, call.axes, int(ctx->meshShape.size()));
    return false;
  }
  c.dtype = call.dtype;
  c.elemSize = tessel_dtype_size(call.dtype);
  if (c.elemSize == 0) {
    setError(ctx, "%s: unsupported dtype %d", c.name, call.dtype);
    return false;
  }
  if (call.reduce != kNoReduction) {
    c.reduce = call.reduce;
    if (!isReduceKind(call.reduce)) {
      setError(ctx, "%s: unknown reduction kind %d", c.name, call.reduce);
      return false;
    }
  }
  switch (call.kind) {
  case TESSEL_COLL_ALL_REDUCE: {
    int64_t bytes;
    if (call.count < 0 ||
        __builtin_mul_overflow(call.count, c.elemSize, &bytes)) {
      setError(ctx, "%s: bad count %lld", c.name, (long long)call.count);
      return false;
    }
    c.count = call.count;
    break;
  }
  case TESSEL_COLL_ALL_GATHER: {
    int64_t outBytes;
    if (!checkShape(ctx, c, call.rank, call.shape, call.dim, "dim"))
      return false;
    if (__builtin_mul_overflow(c.inBytes(), group.size, &outBytes)) {
      setError(ctx, "%s: output size overflows", c.name);
      return false;
    }
    break;
  }
  case TESSEL_COLL_ALL_TO_ALL:
    if (!checkShape(ctx, c, call.rank, call.shape, call.concatDim,
                    "concat_dim") ||
        !checkShape(ctx, c, call.rank, call.shape, call.dim, "split_dim") ||
        !checkDivisible(ctx, c, call.dim, group))
      return false;
    c.splitDim = call.dim;
    c.concatDim = call.concatDim;
    break;
  default: // reduce_scatter, all_slice: block g of `dim`.
    if (!checkShape(ctx, c, call.rank, call.shape, call.dim, "dim") ||
        !checkDivisible(ctx, c, call.dim, group))
      return false;
    break;
  }
  return checkBuffers(ctx, c, group,
                      /*inPlaceAllowed=*/call.kind == TESSEL_COLL_ALL_REDUCE);
}

/// Counts a collective that completed (or, on a stream-ordered
/// communicator, was issued) without error. The comm worker counts from its
/// thread, hence the lock.
/// The payload bytes a collective counts: its input's, all_gather's output's.
int64_t payloadBytes(const Collective &c, const Group &group) {
  return c.kind == TESSEL_COLL_ALL_GATHER ? c.inBytes() * group.size
                                          : c.inBytes();
}

void countCollective(tessel_ctx *ctx, const Collective &c, const Group &group,
                     bool started) {
  const int64_t bytes = payloadBytes(c, group);
  std::lock_guard<std::mutex> lock(ctx->stateMutex);
  CommCounter &counter = ctx->commCounters[c.kind][group.mask];
  counter.bytes += bytes;
  ++counter.calls;
  if (started)
    counter.asyncBytes += bytes;
}

/// The collectives that involve no peer: a group of one copies, all_slice
/// takes its block. True when `c` is one of them (and has run).
bool runWithoutPeers(tessel_ctx *ctx, const Collective &c, const Group &group) {
  Backend &backend = *ctx->backend;
  if (group.size == 1) {
    // Every collective of one rank is the identity on its input.
    const int64_t bytes = c.inBytes();
    if (c.out != c.in && bytes > 0)
      backend.copy(c.out, c.in, bytes);
    return true;
  }
  if (c.kind == kAllSlice) {
    // Block g of every [len] row; no peer is involved and nothing counts.
    const int64_t rowBytes = c.len / group.size * c.inner * c.elemSize;
    if (rowBytes > 0 && c.outer > 0)
      backend.copy2d(c.out, rowBytes,
                     static_cast<const uint8_t *>(c.in) +
                         group.index * rowBytes,
                     c.len * c.inner * c.elemSize, c.outer, rowBytes);
    return true;
  }
  return false;
}

/// The communicator of a group of more than one rank, or null with the
/// error recorded.
Communicator *communicatorFor(tessel_ctx *ctx, const Collective &c,
                              const Group &group) {
  if (Communicator *comm = ctx->communicator.get())
    return comm;
  // Unreachable: a COMM_NONE context has one rank, so every group is one.
  setError(ctx, "%s: no communicator for a group of %lld", c.name,
           (long long)group.size);
  return nullptr;
}

/// Moves the data of a checked collective among a group of more than one
/// rank and counts it if it completed: the comm worker's RunCollective,
/// and a blocking call's own path when nothing started is pending.
bool communicate(tessel_ctx *ctx, const Collective &c, const Group &group,
                 bool started) {
  Communicator *comm = communicatorFor(ctx, c, group);
  if (!comm)
    return false;
  bool ok = false;
  switch (c.kind) {
  case TESSEL_COLL_ALL_REDUCE:
    ok = comm->allReduce(ctx, group, c);
    break;
  case TESSEL_COLL_ALL_GATHER:
    ok = comm->allGather(ctx, group, c);
    break;
  case TESSEL_COLL_REDUCE_SCATTER:
    ok = comm->reduceScatter(ctx, group, c);
    break;
  case TESSEL_COLL_ALL_TO_ALL:
    ok = comm->allToAll(ctx, group, c);
    break;
  }
  if (ok)
    countCollective(ctx, c, group, started);
  return ok;
}

/// The whole of every blocking entry point. With started collectives
/// pending on the comm worker, the call queues behind them and waits: the
/// members of a group match calls in each rank's call order.
void runCollective(tessel_ctx *ctx, const Call &call) {
  if (!ctx)
    return;
  Collective c;
  Group group;
  if (!prepare(ctx, call, c, group) || runWithoutPeers(ctx, c, group))
    return;
  const double begin = ctx->tracing ? ctx->trace->now() : 0;
  CommWorker *worker = ctx->commWorker.get();
  if (worker && !worker->idle())
    worker->wait(worker->enqueue(c, group, /*started=*/false));
  else
    communicate(ctx, c, group, /*started=*/false);
  if (ctx->tracing)
    ctx->trace->complete(ctx->trace->collective(
        c.name, c.kind, group.mask, payloadBytes(c, group),
        /*started=*/false, c.out, begin));
}

/// The whole of every *_start entry point: the blocking call's checks
/// (synchronous errors), then the collective issued to run in call order
/// while the caller goes on. Collectives without peers run at once.
void startCollective(tessel_ctx *ctx, const Call &call) {
  if (!ctx)
    return;
  Collective c;
  Group group;
  if (!prepare(ctx, call, c, group) || runWithoutPeers(ctx, c, group))
    return;
  Communicator *comm = communicatorFor(ctx, c, group);
  if (!comm)
    return;
  if (ctx->tracing)
    c.traceIndex = ctx->trace->collective(
        c.name, c.kind, group.mask, payloadBytes(c, group), /*started=*/true,
        c.out, ctx->trace->now());
  if (StreamCollectives *stream = comm->streamCollectives()) {
    if (stream->start(ctx, group, c))
      countCollective(ctx, c, group, /*started=*/true);
    return; // Completed, as far as the trace knows, at its wait.
  }
  if (CommWorker *worker = commWorkerOf(ctx, &communicate)) {
    worker->enqueue(c, group, /*started=*/true); // It completes the event.
    return;
  }
  // A communicator that cannot run on another thread: synchronous.
  communicate(ctx, c, group, /*started=*/true);
  if (c.traceIndex >= 0)
    ctx->trace->complete(c.traceIndex);
}

/// A counter of (collective, axes), or null.
const CommCounter *commCounterOf(const tessel_ctx *ctx, int32_t collective,
                                 uint32_t axes) {
  if (!ctx || collective < 0 || collective >= TESSEL_NUM_COLLECTIVES)
    return nullptr;
  auto it = ctx->commCounters[collective].find(axes);
  return it == ctx->commCounters[collective].end() ? nullptr : &it->second;
}

/// One field of a (collective, axes) counter, read under the state lock (a
/// comm worker may be counting); 0 when nothing was counted.
int64_t counterField(const tessel_ctx *ctx, int32_t collective, uint32_t axes,
                     int64_t CommCounter::*field) {
  if (!ctx)
    return 0;
  std::lock_guard<std::mutex> lock(ctx->stateMutex);
  const CommCounter *counter = commCounterOf(ctx, collective, axes);
  return counter ? counter->*field : 0;
}

/// The arguments of each entry point, shared by its blocking and started
/// forms (`name` is the one errors give).
Call allReduceCall(const char *name, uint32_t axes, int32_t dtype,
                   const void *in, void *out, int64_t count, int32_t kind) {
  Call call{TESSEL_COLL_ALL_REDUCE, name, axes, dtype, in, out};
  call.reduce = kind;
  call.count = count;
  return call;
}

/// all_gather, reduce_scatter (reduceScatterCall adds its kind) and
/// all_slice.
Call alongDimCall(int32_t collective, const char *name, uint32_t axes,
                  int32_t dtype, const void *in, void *out, int32_t rank,
                  const int64_t *shape, int32_t dim) {
  Call call{collective, name, axes, dtype, in, out};
  call.rank = rank;
  call.shape = shape;
  call.dim = dim;
  return call;
}

Call reduceScatterCall(const char *name, uint32_t axes, int32_t dtype,
                       const void *in, void *out, int32_t rank,
                       const int64_t *shape, int32_t dim, int32_t kind) {
  Call call = alongDimCall(TESSEL_COLL_REDUCE_SCATTER, name, axes, dtype, in,
                           out, rank, shape, dim);
  call.reduce = kind;
  return call;
}

Call allToAllCall(const char *name, uint32_t axes, int32_t dtype,
                  const void *in, void *out, int32_t rank, const int64_t *shape,
                  int32_t splitDim, int32_t concatDim) {
  Call call = alongDimCall(TESSEL_COLL_ALL_TO_ALL, name, axes, dtype, in, out,
                           rank, shape, splitDim);
  call.concatDim = concatDim;
  return call;
}

} // namespace

extern "C" {

int32_t tessel_ctx_mesh_rank(const tessel_ctx *ctx) {
  return ctx ? int32_t(ctx->meshShape.size()) : 0;
}

int64_t tessel_ctx_mesh_size(const tessel_ctx *ctx, int32_t axis) {
  if (!ctx || axis < 0 || size_t(axis) >= ctx->meshShape.size())
    return 0;
  return ctx->meshShape[size_t(axis)];
}

int64_t tessel_ctx_mesh_coord(const tessel_ctx *ctx, int32_t axis) {
  if (!ctx || axis < 0 || size_t(axis) >= ctx->meshCoord.size())
    return -1;
  return ctx->meshCoord[size_t(axis)];
}

int64_t tessel_group_size(const tessel_ctx *ctx, uint32_t axes) {
  Group group;
  if (!ctx || !groupOf(ctx, axes, group))
    return -1;
  return group.size;
}

int64_t tessel_group_index(const tessel_ctx *ctx, uint32_t axes) {
  Group group;
  if (!ctx || !groupOf(ctx, axes, group))
    return -1;
  return group.index;
}

void tessel_all_reduce(tessel_ctx *ctx, uint32_t axes, int32_t dtype,
                       const void *in, void *out, int64_t count, int32_t kind) {
  runCollective(ctx, allReduceCall("tessel_all_reduce", axes, dtype, in, out,
                                   count, kind));
}

void tessel_all_gather(tessel_ctx *ctx, uint32_t axes, int32_t dtype,
                       const void *in, void *out, int32_t rank_,
                       const int64_t *shape, int32_t dim) {
  runCollective(ctx, alongDimCall(TESSEL_COLL_ALL_GATHER, "tessel_all_gather",
                                  axes, dtype, in, out, rank_, shape, dim));
}

void tessel_reduce_scatter(tessel_ctx *ctx, uint32_t axes, int32_t dtype,
                           const void *in, void *out, int32_t rank_,
                           const int64_t *shape, int32_t dim, int32_t kind) {
  runCollective(ctx, reduceScatterCall("tessel_reduce_scatter", axes, dtype, in,
                                       out, rank_, shape, dim, kind));
}

void tessel_all_to_all(tessel_ctx *ctx, uint32_t axes, int32_t dtype,
                       const void *in, void *out, int32_t rank_,
                       const int64_t *shape, int32_t split_dim,
                       int32_t concat_dim) {
  runCollective(ctx, allToAllCall("tessel_all_to_all", axes, dtype, in, out,
                                  rank_, shape, split_dim, concat_dim));
}

void tessel_all_slice(tessel_ctx *ctx, uint32_t axes, int32_t dtype,
                      const void *in, void *out, int32_t rank_,
                      const int64_t *shape, int32_t dim) {
  runCollective(ctx, alongDimCall(kAllSlice, "tessel_all_slice", axes, dtype,
                                  in, out, rank_, shape, dim));
}

void tessel_all_reduce_start(tessel_ctx *ctx, uint32_t axes, int32_t dtype,
                             const void *in, void *out, int64_t count,
                             int32_t kind) {
  startCollective(ctx, allReduceCall("tessel_all_reduce_start", axes, dtype, in,
                                     out, count, kind));
}

void tessel_all_gather_start(tessel_ctx *ctx, uint32_t axes, int32_t dtype,
                             const void *in, void *out, int32_t rank_,
                             const int64_t *shape, int32_t dim) {
  startCollective(ctx, alongDimCall(TESSEL_COLL_ALL_GATHER,
                                    "tessel_all_gather_start", axes, dtype, in,
                                    out, rank_, shape, dim));
}

void tessel_reduce_scatter_start(tessel_ctx *ctx, uint32_t axes, int32_t dtype,
                                 const void *in, void *out, int32_t rank_,
                                 const int64_t *shape, int32_t dim,
                                 int32_t kind) {
  startCollective(ctx,
                  reduceScatterCall("tessel_reduce_scatter_start", axes, dtype,
                                    in, out, rank_, shape, dim, kind));
}

void tessel_all_to_all_start(tessel_ctx *ctx, uint32_t axes, int32_t dtype,
                             const void *in, void *out, int32_t rank_,
                             const int64_t *shape, int32_t split_dim,
                             int32_t concat_dim) {
  startCollective(ctx, allToAllCall("tessel_all_to_all_start", axes, dtype, in,
                                    out, rank_, shape, split_dim, concat_dim));
}

void tessel_comm_wait(tessel_ctx *ctx, const void *out) {
  if (!ctx)
    return;
  const double begin = ctx->tracing ? ctx->trace->now() : 0;
  if (ctx->commWorker)
    ctx->commWorker->waitForOutput(out);
  else if (ctx->communicator)
    if (StreamCollectives *stream = ctx->communicator->streamCollectives())
      stream->wait(ctx, out);
  if (ctx->tracing)
    ctx->trace->waited(out, begin);
}

void tessel_comm_wait_all(tessel_ctx *ctx) {
  if (!ctx)
    return;
  const double begin = ctx->tracing ? ctx->trace->now() : 0;
  waitForStartedCollectives(ctx);
  if (ctx->tracing)
    ctx->trace->waited(nullptr, begin);
}

int64_t tessel_comm_bytes(const tessel_ctx *ctx, int32_t collective,
                          uint32_t axes) {
  return counterField(ctx, collective, axes, &CommCounter::bytes);
}

int64_t tessel_comm_calls(const tessel_ctx *ctx, int32_t collective,
                          uint32_t axes) {
  return counterField(ctx, collective, axes, &CommCounter::calls);
}

int64_t tessel_comm_async_bytes(const tessel_ctx *ctx, int32_t collective,
                                uint32_t axes) {
  return counterField(ctx, collective, axes, &CommCounter::asyncBytes);
}

} // extern "C"
