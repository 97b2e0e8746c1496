//===- CudaNcclTest.cpp - The NCCL communicator against the CPU ones ------===//
//
// Host tests of cuda/nccl_plan.h: canonical masks keep the front's groups
// (so one NCCL communicator per canonical mask has the members and ranks
// the front expects), the all_reduce chunking, and each collective's whole
// data path (packing copies, the exchanges NCCL makes, the ordered
// reduction the kernel runs, unpacking) simulated on the host and compared
// bit for bit with the CPU backend's collectives on a local world of
// threads. GPU tests (two ranks as threads on two GPUs) run every
// collective and point-to-point path through the C ABI on CUDA and on the
// CPU and compare the bits, and every started collective (tessel_*_start)
// with the blocking one; they skip without two devices. The tests that
// never reach NCCL (a refused handshake, waits with nothing started) run
// two ranks on one GPU.
//
//===----------------------------------------------------------------------===//

#include "cuda/CudaTestUtil.h"
#include "cuda/nccl_plan.h"

#include "core/backend.h"

#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <thread>

using namespace tessel;
using namespace tessel::cuda;

namespace {

using Mesh = std::vector<int64_t>;
using Bytes = std::vector<uint8_t>;

int64_t product(const std::vector<int64_t> &v) {
  int64_t n = 1;
  for (int64_t d : v)
    n *= d;
  return n;
}

/// A context-free tessel_ctx at `rank` of `mesh`, for the group functions.
void placeRank(tessel_ctx &ctx, const Mesh &mesh, int64_t rank) {
  ctx.meshShape = mesh;
  ctx.meshCoord.assign(mesh.size(), 0);
  ctx.rank = int32_t(rank);
  ctx.worldSize = int32_t(product(mesh));
  for (size_t a = mesh.size(); a-- > 0;) {
    ctx.meshCoord[a] = rank % mesh[a];
    rank /= mesh[a];
  }
}

TEST(CudaNcclPlan, CanonicalMasksKeepTheFrontsGroups) {
  for (const Mesh &mesh : {Mesh{2, 2}, Mesh{2, 3, 2}, Mesh{8}, Mesh{2, 1, 3},
                           Mesh{1, 4}}) {
    const int64_t world = product(mesh);
    for (uint32_t mask = 0; mask < (1u << mesh.size()); ++mask) {
      const uint32_t key = canonicalMask(mesh, mask);
      // Per group id: the NCCL ranks (group indices) its members take.
      std::map<int64_t, std::vector<int>> seen;
      for (int64_t r = 0; r < world; ++r) {
        tessel_ctx ctx;
        placeRank(ctx, mesh, r);
        Group g, k;
        ASSERT_TRUE(groupOf(&ctx, mask, g));
        ASSERT_TRUE(groupOf(&ctx, key, k));
        EXPECT_EQ(g.size, k.size);
        EXPECT_EQ(g.index, k.index);
        EXPECT_EQ(g.id, k.id);
        for (int64_t j = 0; j < g.size; ++j)
          EXPECT_EQ(groupMemberRank(&ctx, g, j), groupMemberRank(&ctx, k, j));
        EXPECT_EQ(groupMemberRank(&ctx, g, g.index), r);
        auto &ranks = seen[g.id];
        ranks.resize(size_t(g.size), 0);
        ++ranks[size_t(g.index)];
      }
      // Every group's members take each NCCL rank 0..G-1 exactly once.
      for (auto &entry : seen)
        for (int count : entry.second)
          EXPECT_EQ(count, 1) << "mask " << mask << " group " << entry.first;
    }
  }
}

TEST(CudaNcclPlan, ChunksCoverTheCount) {
  for (int64_t n : {0, 1, 5, 7, 64, 1001})
    for (int64_t G : {1, 2, 3, 8}) {
      int64_t next = 0;
      for (int64_t j = 0; j < G; ++j) {
        EXPECT_EQ(chunkBegin(j, n, G), next);
        EXPECT_LE(chunkSize(j, n, G) - n / G, 1);
        next += chunkSize(j, n, G);
      }
      EXPECT_EQ(next, n);
    }
}

TEST(CudaNcclPlan, HandshakeMismatches) {
  std::vector<Handshake> all(3);
  EXPECT_EQ(handshakeMismatch(all), nullptr);
  all[2].signature = 1;
  EXPECT_NE(handshakeMismatch(all), nullptr);
  all[2].signature = 0;
  all[1].state = Handshake::kNeedComm;
  EXPECT_NE(handshakeMismatch(all), nullptr);
  for (Handshake &h : all)
    h.state = Handshake::kNeedComm;
  EXPECT_EQ(handshakeMismatch(all), nullptr);
  all[0].state = Handshake::kNoId;
  EXPECT_NE(handshakeMismatch(all), nullptr);
}

//===--- One collective call, described once for every path ---------------===//

struct Case {
  int32_t kind;
  uint32_t axes;
  int32_t dtype;
  int32_t reduce;
  std::vector<int64_t> shape;
  int32_t dim = 0, concatDim = 0;
};

/// The front's view of `cs` (collectives.cpp's checkShape).
Collective describe(const Case &cs) {
  Collective c;
  c.kind = cs.kind;
  c.dtype = cs.dtype;
  c.elemSize = tessel_dtype_size(cs.dtype);
  c.reduce = cs.reduce;
  c.shape = cs.shape;
  c.count = product(cs.shape);
  c.len = cs.shape[size_t(cs.dim)];
  for (int32_t d = 0; d < int32_t(cs.shape.size()); ++d) {
    if (d < cs.dim)
      c.outer *= cs.shape[size_t(d)];
    if (d > cs.dim)
      c.inner *= cs.shape[size_t(d)];
  }
  c.splitDim = cs.dim;
  c.concatDim = cs.concatDim;
  return c;
}

int64_t outElems(const Case &cs, int64_t G) {
  const int64_t n = product(cs.shape);
  if (cs.kind == TESSEL_COLL_ALL_GATHER)
    return n * G;
  if (cs.kind == TESSEL_COLL_REDUCE_SCATTER)
    return n / G;
  return n;
}

/// Rank r's input: values that exercise rounding, wrapping and NaN.
Bytes inputOf(const Case &cs, int64_t r) {
  const int64_t n = product(cs.shape);
  std::mt19937_64 rng(uint64_t(r) * 7919 + uint64_t(cs.dtype));
  std::uniform_real_distribution<double> value(-3, 3);
  Bytes out(size_t(n * tessel_dtype_size(cs.dtype)));
  for (int64_t i = 0; i < n; ++i) {
    const double v = value(rng);
    const bool nan = cs.reduce == TESSEL_REDUCE_MAX && i % 17 == 5 && r == 1;
    const float f = nan ? NAN : float(v);
    switch (cs.dtype) {
    case TESSEL_F32:
      std::memcpy(&out[size_t(i) * 4], &f, 4);
      break;
    case TESSEL_F64: {
      const double d = nan ? NAN : v;
      std::memcpy(&out[size_t(i) * 8], &d, 8);
      break;
    }
    case TESSEL_F16: {
      const uint16_t h = stored::floatToHalf(f);
      std::memcpy(&out[size_t(i) * 2], &h, 2);
      break;
    }
    case TESSEL_BF16: {
      const uint16_t b = stored::floatToBf16(f);
      std::memcpy(&out[size_t(i) * 2], &b, 2);
      break;
    }
    case TESSEL_I32: {
      // Near the top of the range, so that sums wrap.
      const int32_t x = int32_t(int64_t(v * 7.0e8));
      std::memcpy(&out[size_t(i) * 4], &x, 4);
      break;
    }
    case TESSEL_I64: {
      const int64_t x = int64_t(v * 3.0e18);
      std::memcpy(&out[size_t(i) * 8], &x, 8);
      break;
    }
    }
  }
  return out;
}

/// Issues `cs` on device buffers, blocking or with its *_start form.
void issue(tessel_ctx *ctx, const Case &cs, const void *in, void *out,
           bool started) {
  const int32_t rank = int32_t(cs.shape.size());
  switch (cs.kind) {
  case TESSEL_COLL_ALL_REDUCE:
    (started ? &tessel_all_reduce_start : &tessel_all_reduce)(
        ctx, cs.axes, cs.dtype, in, out, product(cs.shape), cs.reduce);
    break;
  case TESSEL_COLL_ALL_GATHER:
    (started ? &tessel_all_gather_start : &tessel_all_gather)(
        ctx, cs.axes, cs.dtype, in, out, rank, cs.shape.data(), cs.dim);
    break;
  case TESSEL_COLL_REDUCE_SCATTER:
    (started ? &tessel_reduce_scatter_start
             : &tessel_reduce_scatter)(ctx, cs.axes, cs.dtype, in, out, rank,
                                       cs.shape.data(), cs.dim, cs.reduce);
    break;
  case TESSEL_COLL_ALL_TO_ALL:
    (started ? &tessel_all_to_all_start
             : &tessel_all_to_all)(ctx, cs.axes, cs.dtype, in, out, rank,
                                   cs.shape.data(), cs.dim, cs.concatDim);
    break;
  }
}

/// Runs `cs` through the C ABI on ctx (any backend) and returns the output.
Bytes runOn(tessel_ctx *ctx, const Case &cs, const Bytes &input, int64_t G) {
  const int64_t es = tessel_dtype_size(cs.dtype);
  const int64_t outBytes = outElems(cs, G) * es;
  void *in = tessel_alloc(ctx, int64_t(input.size()));
  void *out = tessel_alloc(ctx, outBytes);
  if (!input.empty())
    tessel_copy_to_device(ctx, in, input.data(), int64_t(input.size()));
  issue(ctx, cs, in, out, /*started=*/false);
  tessel_synchronize(ctx);
  Bytes result(static_cast<size_t>(outBytes));
  if (outBytes > 0)
    tessel_copy_to_host(ctx, result.data(), out, outBytes);
  tessel_free(ctx, in);
  tessel_free(ctx, out);
  return result;
}

/// Runs `body` on one thread per rank of a local world of `backend`
/// contexts (on device `device(rank)`); returns each rank's final error
/// ("" for none).
std::vector<std::string>
runWorld(const char *backend, const Mesh &mesh, double timeout,
         const std::function<void(tessel_ctx *, int)> &body,
         const std::function<int(int)> &device = [](int r) { return r; }) {
  const int world = int(product(mesh));
  tessel_local_world *localWorld = tessel_local_world_create(world);
  std::vector<std::string> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      tessel_ctx_options options{};
      options.backend_name = backend;
      options.rank = r;
      options.world_size = world;
      options.device = device(r);
      options.comm = TESSEL_COMM_LOCAL;
      options.mesh_rank = int32_t(mesh.size());
      for (size_t a = 0; a < mesh.size(); ++a)
        options.mesh_shape[a] = mesh[a];
      options.local_world = localWorld;
      options.comm_timeout_seconds = timeout;
      tessel_ctx *ctx = tessel_ctx_create(&options);
      if (!ctx) {
        errors[size_t(r)] = std::string("create: ") + tessel_error(nullptr);
        tessel_local_world_abort(localWorld, r, "no context");
        return;
      }
      body(ctx, r);
      if (const char *err = tessel_error(ctx)) {
        errors[size_t(r)] = err;
        tessel_local_world_abort(localWorld, r, err);
      }
      tessel_ctx_destroy(ctx);
    });
  for (std::thread &t : threads)
    t.join();
  tessel_local_world_destroy(localWorld);
  return errors;
}

/// Every rank's output of `cs` on a local world of `backend`.
std::vector<Bytes> runCase(const char *backend, const Mesh &mesh,
                           const Case &cs) {
  std::vector<Bytes> outputs(size_t(product(mesh)));
  auto errors = runWorld(backend, mesh, 60, [&](tessel_ctx *ctx, int r) {
    const int64_t G = tessel_group_size(ctx, cs.axes);
    outputs[size_t(r)] = runOn(ctx, cs, inputOf(cs, r), G);
  });
  for (size_t r = 0; r < errors.size(); ++r)
    EXPECT_EQ(errors[r], "") << backend << " rank " << r;
  return outputs;
}

//===--- The NCCL data path, simulated on the host ------------------------===//

template <class T>
void reduceTyped(const void *blocks, void *out, int64_t n, int64_t G,
                 int32_t reduce) {
  for (int64_t i = 0; i < n; ++i)
    static_cast<T *>(out)[i] =
        reduceOrdered(static_cast<const T *>(blocks), n, G, i, reduce);
}

/// What comm_nccl.cu's reduce kernel computes.
void reduceHost(int32_t dtype, const void *blocks, void *out, int64_t n,
                int64_t G, int32_t reduce) {
  switch (dtype) {
  case TESSEL_F32:
    return reduceTyped<float>(blocks, out, n, G, reduce);
  case TESSEL_F64:
    return reduceTyped<double>(blocks, out, n, G, reduce);
  case TESSEL_F16:
    return reduceTyped<HalfBits>(blocks, out, n, G, reduce);
  case TESSEL_BF16:
    return reduceTyped<Bf16Bits>(blocks, out, n, G, reduce);
  case TESSEL_I32:
    return reduceTyped<int32_t>(blocks, out, n, G, reduce);
  case TESSEL_I64:
    return reduceTyped<int64_t>(blocks, out, n, G, reduce);
  }
}

/// Rank r's output of `cs` as comm_nccl.cu computes it: the members' inputs
/// (by group index) go through the same packing, exchanges, reduction and
/// unpacking.
Bytes simulate(const Case &cs, const std::vector<Bytes> &members, int64_t g) {
  const int64_t G = int64_t(members.size());
  const Collective c = describe(cs);
  const int64_t es = c.elemSize, n = product(cs.shape);
  Bytes out(size_t(outElems(cs, G) * es));
  switch (cs.kind) {
  case TESSEL_COLL_ALL_REDUCE:
    // Member j reduces chunk j of every input; the chunks are then gathered.
    for (int64_t j = 0; j < G; ++j) {
      const int64_t begin = chunkBegin(j, n, G), size = chunkSize(j, n, G);
      Bytes blocks(size_t(G * size * es));
      for (int64_t p = 0; p < G; ++p)
        std::memcpy(&blocks[size_t(p * size * es)],
                    &members[size_t(p)][size_t(begin * es)],
                    size_t(size * es));
      reduceHost(cs.dtype, blocks.data(), &out[size_t(begin * es)], size, G,
                 cs.reduce);
    }
    break;
  case TESSEL_COLL_ALL_GATHER: {
    Bytes gathered;
    for (const Bytes &m : members)
      gathered.insert(gathered.end(), m.begin(), m.end());
    if (c.outer == 1)
      out = gathered;
    else
      applyCopies(out.data(), gathered.data(), allGatherUnpack(c, G));
    break;
  }
  case TESSEL_COLL_REDUCE_SCATTER: {
    const int64_t blockBytes = n / G * es;
    Bytes received(size_t(G * blockBytes));
    for (int64_t p = 0; p < G; ++p) {
      Bytes packed = members[size_t(p)];
      if (c.outer != 1)
        applyCopies(packed.data(), members[size_t(p)].data(),
                    reduceScatterPack(c, G));
      std::memcpy(&received[size_t(p * blockBytes)],
                  &packed[size_t(g * blockBytes)], size_t(blockBytes));
    }
    reduceHost(cs.dtype, received.data(), out.data(), n / G, G, cs.reduce);
    break;
  }
  case TESSEL_COLL_ALL_TO_ALL: {
    const int64_t blockBytes = n / G * es;
    Bytes received(size_t(G * blockBytes));
    for (int64_t p = 0; p < G; ++p) {
      Bytes packed(members[size_t(p)].size());
      applyCopies(packed.data(), members[size_t(p)].data(),
                  allToAllPack(c, G));
      std::memcpy(&received[size_t(p * blockBytes)],
                  &packed[size_t(g * blockBytes)], size_t(blockBytes));
    }
    applyCopies(out.data(), received.data(), allToAllUnpack(c, G));
    break;
  }
  }
  return out;
}

/// The cases both the host and the GPU tests run.
std::vector<Case> casesFor(const Mesh &mesh) {
  std::vector<Case> cases;
  const uint32_t all = (1u << mesh.size()) - 1;
  for (uint32_t axes = 1; axes <= all; ++axes) {
    for (int32_t dtype : {TESSEL_F32, TESSEL_F64, TESSEL_F16, TESSEL_BF16,
                          TESSEL_I32, TESSEL_I64})
      for (int32_t reduce :
           {TESSEL_REDUCE_SUM, TESSEL_REDUCE_MEAN, TESSEL_REDUCE_MAX}) {
        cases.push_back({TESSEL_COLL_ALL_REDUCE, axes, dtype, reduce, {7, 5}});
        cases.push_back(
            {TESSEL_COLL_REDUCE_SCATTER, axes, dtype, reduce, {3, 12, 5}, 1});
      }
    for (int32_t dtype : {TESSEL_F32, TESSEL_BF16, TESSEL_I64}) {
      for (int32_t dim : {0, 1, 2})
        cases.push_back({TESSEL_COLL_ALL_GATHER, axes, dtype, 0, {3, 4, 5},
                         dim});
      cases.push_back({TESSEL_COLL_REDUCE_SCATTER, axes, dtype,
                       TESSEL_REDUCE_SUM, {12, 2}, 0});
      cases.push_back({TESSEL_COLL_ALL_TO_ALL, axes, dtype, 0, {6, 4, 12}, 2,
                       0});
      cases.push_back({TESSEL_COLL_ALL_TO_ALL, axes, dtype, 0, {12, 5, 3}, 0,
                       1});
      cases.push_back({TESSEL_COLL_ALL_TO_ALL, axes, dtype, 0, {2, 12, 3}, 1,
                       1});
    }
  }
  return cases;
}

std::string describeCase(const Case &cs) {
  std::string text = "kind " + std::to_string(cs.kind) + " axes " +
                     std::to_string(cs.axes) + " dtype " +
                     std::to_string(cs.dtype) + " reduce " +
                     std::to_string(cs.reduce) + " shape";
  for (int64_t d : cs.shape)
    text += " " + std::to_string(d);
  return text + " dim " + std::to_string(cs.dim) + " concat " +
         std::to_string(cs.concatDim);
}

TEST(CudaNcclPlan, DataPathMatchesTheCpuCollectives) {
  for (const Mesh &mesh : {Mesh{2}, Mesh{3}, Mesh{2, 3}}) {
    const int64_t world = product(mesh);
    int checked = 0;
    for (const Case &cs : casesFor(mesh)) {
      const std::vector<Bytes> cpu = runCase("cpu", mesh, cs);
      for (int64_t r = 0; r < world; ++r) {
        tessel_ctx ctx;
        placeRank(ctx, mesh, r);
        Group group;
        ASSERT_TRUE(groupOf(&ctx, cs.axes, group));
        if (group.size == 1)
          continue;
        std::vector<Bytes> members;
        for (int64_t j = 0; j < group.size; ++j)
          members.push_back(inputOf(cs, groupMemberRank(&ctx, group, j)));
        EXPECT_EQ(simulate(cs, members, group.index), cpu[size_t(r)])
            << describeCase(cs) << " rank " << r;
        ++checked;
      }
    }
    EXPECT_GT(checked, 100);
  }
}

//===--- On two GPUs ------------------------------------------------------===//

#define TESSEL_REQUIRE_TWO_GPUS()                                              \
  do {                                                                         \
    TESSEL_REQUIRE_CUDA();                                                     \
    if (tessel::cuda::deviceCount() < 2)                                       \
      GTEST_SKIP() << "the NCCL tests run two ranks on two GPUs; "             \
                   << tessel::cuda::deviceCount() << " visible";               \
  } while (0)

TEST(CudaNccl, CollectivesMatchTheCpuBitForBit) {
  TESSEL_REQUIRE_TWO_GPUS();
  const Mesh mesh{2};
  for (const Case &cs : casesFor(mesh)) {
    const std::vector<Bytes> cpu = runCase("cpu", mesh, cs);
    const std::vector<Bytes> gpu = runCase("cuda", mesh, cs);
    for (size_t r = 0; r < cpu.size(); ++r)
      EXPECT_EQ(gpu[r], cpu[r]) << describeCase(cs) << " rank " << r;
  }
}

// Tests that started collectives give the blocking calls' bits: every case
// started back to back (all in flight on the communication stream), each
// output then waited for and copied on the compute stream with no host
// wait in between, so the copy reads the output only if tessel_comm_wait
// ordered the compute stream after the collective.
TEST(CudaNccl, StartedCollectivesMatchBlockingBitForBit) {
  TESSEL_REQUIRE_TWO_GPUS();
  const Mesh mesh{2};
  const std::vector<Case> cases = casesFor(mesh);
  auto errors = runWorld("cuda", mesh, 60, [&](tessel_ctx *ctx, int r) {
    const int64_t G = tessel_group_size(ctx, 1);
    std::vector<Bytes> want;
    std::vector<void *> ins, outs, copies;
    std::vector<int64_t> outBytes;
    for (const Case &cs : cases) {
      const Bytes input = inputOf(cs, r);
      want.push_back(runOn(ctx, cs, input, G));
      outBytes.push_back(int64_t(want.back().size()));
      ins.push_back(tessel_alloc(ctx, int64_t(input.size())));
      outs.push_back(tessel_alloc(ctx, outBytes.back()));
      copies.push_back(tessel_alloc(ctx, outBytes.back()));
      if (!input.empty())
        tessel_copy_to_device(ctx, ins.back(), input.data(),
                              int64_t(input.size()));
    }
    tessel_reset_counters(ctx);
    for (size_t i = 0; i < cases.size(); ++i)
      issue(ctx, cases[i], ins[i], outs[i], /*started=*/true);
    // In reverse: a wait on the last output says nothing of the others'.
    for (size_t i = cases.size(); i-- > 0;) {
      tessel_comm_wait(ctx, outs[i]);
      if (outBytes[i] > 0)
        tessel_copy(ctx, copies[i], outs[i], outBytes[i]);
    }
    tessel_comm_wait_all(ctx);
    tessel_synchronize(ctx);
    ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
    for (size_t i = 0; i < cases.size(); ++i) {
      Bytes got(want[i].size());
      if (!got.empty())
        tessel_copy_to_host(ctx, got.data(), copies[i], outBytes[i]);
      EXPECT_EQ(got, want[i]) << describeCase(cases[i]) << " rank " << r;
      tessel_free(ctx, ins[i]);
      tessel_free(ctx, outs[i]);
      tessel_free(ctx, copies[i]);
    }
    EXPECT_EQ(tessel_comm_async_bytes(ctx, TESSEL_COLL_ALL_REDUCE, 1),
              tessel_comm_bytes(ctx, TESSEL_COLL_ALL_REDUCE, 1));
    EXPECT_GT(tessel_comm_async_bytes(ctx, TESSEL_COLL_ALL_REDUCE, 1), 0);
  });
  for (const std::string &e : errors)
    EXPECT_EQ(e, "");
}

TEST(CudaNccl, InPlaceAllReduceAndRepeatedCalls) {
  TESSEL_REQUIRE_TWO_GPUS();
  const int64_t n = 1 << 20;
  auto errors = runWorld("cuda", {2}, 60, [&](tessel_ctx *ctx, int r) {
    std::vector<float> host(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      host[size_t(i)] = float(i % 1000) * (r + 1);
    void *buf = tessel_alloc(ctx, n * 4);
    tessel_copy_to_device(ctx, buf, host.data(), n * 4);
    for (int k = 0; k < 3; ++k)
      tessel_all_reduce(ctx, 1, TESSEL_F32, buf, buf, n, TESSEL_REDUCE_SUM);
    tessel_synchronize(ctx);
    tessel_copy_to_host(ctx, host.data(), buf, n * 4);
    for (int64_t i = 0; i < n; i += 4099)
      EXPECT_EQ(host[size_t(i)], float(i % 1000) * 3 * 4) << i;
    EXPECT_EQ(tessel_comm_calls(ctx, TESSEL_COLL_ALL_REDUCE, 1), 3);
    tessel_free(ctx, buf);
  });
  for (const std::string &e : errors)
    EXPECT_EQ(e, "");
}

/// The tests that create no NCCL communicator run two ranks on one GPU when
/// there is only one.
int oneOrTwoGpus(int r) { return tessel::cuda::deviceCount() >= 2 ? r : 0; }

// Tests, on one GPU, the started paths that never reach NCCL: waits with
// nothing started return, a started call the members disagree on fails
// in the handshake naming the start, a group of one runs at once.
TEST(CudaNccl, StartedCallsWithoutNccl) {
  TESSEL_REQUIRE_CUDA();
  std::vector<std::string> seen(2);
  auto errors = runWorld(
      "cuda", {2}, 10,
      [&](tessel_ctx *ctx, int r) {
        const std::vector<float> host = {1, 2, 3, 4};
        void *in = tessel_alloc(ctx, 16), *out = tessel_alloc(ctx, 16);
        tessel_copy_to_device(ctx, in, host.data(), 16);
        tessel_comm_wait(ctx, out);
        tessel_comm_wait_all(ctx);
        tessel_all_reduce_start(ctx, 1, TESSEL_F32, in, out, 3 + r,
                                TESSEL_REDUCE_SUM);
        tessel_comm_wait(ctx, out);
        const char *err = tessel_error(ctx);
        seen[size_t(r)] = err ? err : "";
        tessel_clear_error(ctx);
        // Axes 0: a group of one, a copy on the compute stream.
        tessel_all_reduce_start(ctx, 0, TESSEL_F32, in, out, 4,
                                TESSEL_REDUCE_SUM);
        tessel_comm_wait(ctx, out);
        tessel_synchronize(ctx);
        std::vector<float> got(4);
        tessel_copy_to_host(ctx, got.data(), out, 16);
        EXPECT_EQ(got, host);
        EXPECT_EQ(tessel_comm_async_bytes(ctx, TESSEL_COLL_ALL_REDUCE, 0), 0);
        tessel_free(ctx, in);
        tessel_free(ctx, out);
      },
      oneOrTwoGpus);
  for (const std::string &e : errors)
    EXPECT_EQ(e, "");
  for (const std::string &e : seen)
    EXPECT_NE(e.find("tessel_all_reduce_start: the members of the group of "
                     "axes mask 0x1 made different calls"),
              std::string::npos)
        << e;
}

TEST(CudaNccl, SendRecvMatchByTagInAnyOrder) {
  TESSEL_REQUIRE_CUDA();
  auto errors = runWorld("cuda", {2}, 60, [&](tessel_ctx *ctx, int r) {
    const int peer = 1 - r;
    std::vector<int32_t> a(1000, 10 + r), b(10, 20 + r), got(1000);
    void *da = tessel_alloc(ctx, 4000), *db = tessel_alloc(ctx, 40);
    void *dr = tessel_alloc(ctx, 4000);
    tessel_copy_to_device(ctx, da, a.data(), 4000);
    tessel_copy_to_device(ctx, db, b.data(), 40);
    // Both ranks send first (the 1F1B exchange), then receive in the
    // reverse order.
    tessel_send(ctx, peer, 7, da, 4000);
    tessel_send(ctx, peer, 8, db, 40);
    tessel_recv(ctx, peer, 8, dr, 40);
    tessel_synchronize(ctx);
    tessel_copy_to_host(ctx, got.data(), dr, 40);
    EXPECT_EQ(got[9], 20 + peer);
    tessel_recv(ctx, peer, 7, dr, 4000);
    tessel_synchronize(ctx);
    tessel_copy_to_host(ctx, got.data(), dr, 4000);
    EXPECT_EQ(got[999], 10 + peer);
    // A message of another size is consumed and reported.
    tessel_send(ctx, peer, 9, db, 8);
    tessel_recv(ctx, peer, 9, dr, 4);
    const char *err = tessel_error(ctx);
    ASSERT_NE(err, nullptr);
    EXPECT_NE(std::string(err).find("has 8 bytes, the receive expects 4"),
              std::string::npos)
        << err;
    tessel_clear_error(ctx);
    tessel_free(ctx, da);
    tessel_free(ctx, db);
    tessel_free(ctx, dr);
  }, oneOrTwoGpus);
  for (const std::string &e : errors)
    EXPECT_EQ(e, "");
}

TEST(CudaNccl, MismatchedCallsAndAMissingMemberFail) {
  TESSEL_REQUIRE_CUDA();
  std::vector<std::string> seen(2);
  runWorld("cuda", {2}, 2, [&](tessel_ctx *ctx, int r) {
    void *buf = tessel_alloc(ctx, 64);
    // Different counts: both members must refuse before NCCL runs.
    tessel_all_reduce(ctx, 1, TESSEL_F32, buf, buf, 4 + r, TESSEL_REDUCE_SUM);
    const char *err = tessel_error(ctx);
    seen[size_t(r)] = err ? err : "";
    tessel_clear_error(ctx);
    // Rank 0 never joins: rank 1 times out.
    if (r == 1) {
      tessel_all_reduce(ctx, 1, TESSEL_F32, buf, buf, 4, TESSEL_REDUCE_SUM);
      const char *timeout = tessel_error(ctx);
      ASSERT_NE(timeout, nullptr);
      EXPECT_NE(std::string(timeout).find("timed out"), std::string::npos)
          << timeout;
      tessel_clear_error(ctx);
    }
    tessel_free(ctx, buf);
  }, oneOrTwoGpus);
  for (const std::string &e : seen)
    EXPECT_NE(e.find("made different calls"), std::string::npos) << e;
}

TEST(CudaNccl, AFailedNcclInitIsAnErrorNotAHang) {
  TESSEL_REQUIRE_CUDA();
  // Two ranks of one communicator on one device: NCCL refuses the init.
  std::vector<std::string> seen(2);
  runWorld(
      "cuda", {2}, 30,
      [&](tessel_ctx *ctx, int r) {
        void *buf = tessel_alloc(ctx, 64);
        tessel_all_reduce(ctx, 1, TESSEL_F32, buf, buf, 16,
                          TESSEL_REDUCE_SUM);
        const char *err = tessel_error(ctx);
        seen[size_t(r)] = err ? err : "";
        tessel_clear_error(ctx);
        // Later collectives fail at once, naming the first failure.
        tessel_all_reduce(ctx, 1, TESSEL_F32, buf, buf, 16,
                          TESSEL_REDUCE_SUM);
        err = tessel_error(ctx);
        EXPECT_NE(err ? std::string(err).find("aborted") : std::string::npos,
                  std::string::npos)
            << (err ? err : "no error");
        tessel_clear_error(ctx);
        tessel_free(ctx, buf);
      },
      [](int) { return 0; });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(seen[size_t(r)].find("tessel_all_reduce: NCCL"),
              std::string::npos)
        << seen[size_t(r)];
    EXPECT_NE(seen[size_t(r)].find("rank " + std::to_string(r)),
              std::string::npos)
        << seen[size_t(r)];
  }
}

} // namespace
