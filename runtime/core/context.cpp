//===- context.cpp - Contexts, backend selection, errors and counters -----===//

#include "core/async_comm.h"
#include "core/backend.h"
#include "core/graph.h"
#include "core/rng.h"

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <new>

using namespace tessel;

// Out of line: the backend and communicator types are complete here only.
tessel_ctx::tessel_ctx() = default;
tessel_ctx::~tessel_ctx() {
  // A capture in progress gives the backend, communicator and worker back.
  abandonCapture(this);
  // Started collectives still use the communicator, the counters and the
  // error: they complete (or fail) before any of those goes.
  waitForStartedCollectives(this);
  commWorker.reset();
}

namespace {
// Why the last context-less call on this thread failed; tessel_error(null)
// reports it since there is no context to hold it.
thread_local std::string createError;

/// The backends of this library, the default first. "cuda" is a plugin
/// loaded on first use; without it (or without a GPU) it is unavailable.
const BackendFactory kBackends[] = {
    {"cpu", &cpu::available, &cpu::createBackend},
    {"cuda", &cuda::available, &cuda::createBackend},
};

/// The mesh of `options` (one axis of world_size for mesh_rank 0), or false
/// with the reason.
bool meshOf(const tessel_ctx_options &options, std::vector<int64_t> &shape,
            std::string &error) {
  if (options.mesh_rank == 0) {
    shape.assign(1, options.world_size);
    return true;
  }
  if (options.mesh_rank < 0 || options.mesh_rank > TESSEL_MAX_MESH_AXES) {
    error = "tessel_ctx_create: mesh_rank " +
            std::to_string(options.mesh_rank) + " outside [0, " +
            std::to_string(TESSEL_MAX_MESH_AXES) + "]";
    return false;
  }
  shape.assign(options.mesh_shape, options.mesh_shape + options.mesh_rank);
  int64_t product = 1;
  std::string text;
  for (int64_t size : shape) {
    text += (text.empty() ? "" : "x") + std::to_string(size);
    if (size < 1 || __builtin_mul_overflow(product, size, &product)) {
      error = "tessel_ctx_create: bad mesh axis size " + std::to_string(size);
      return false;
    }
  }
  if (product != options.world_size) {
    error = "tessel_ctx_create: mesh " + text + " has " +
            std::to_string(product) + " ranks, world_size is " +
            std::to_string(options.world_size);
    return false;
  }
  return true;
}

/// The checks of the comm fields that need no backend; false with the
/// reason.
bool checkComm(const tessel_ctx_options &options, std::string &error) {
  const double timeout = options.comm_timeout_seconds;
  if (!(timeout >= 0) || std::isinf(timeout)) {
    error = "tessel_ctx_create: comm_timeout_seconds must be finite and >= 0";
    return false;
  }
  switch (options.comm) {
  case TESSEL_COMM_NONE:
    if (options.world_size == 1)
      return true;
    error = "tessel_ctx_create: TESSEL_COMM_NONE runs one rank, world_size "
            "is " +
            std::to_string(options.world_size) +
            " (use TESSEL_COMM_LOCAL or TESSEL_COMM_MPI)";
    return false;
  case TESSEL_COMM_LOCAL:
    if (options.local_world)
      return true;
    error = "tessel_ctx_create: TESSEL_COMM_LOCAL without a local_world";
    return false;
  case TESSEL_COMM_MPI:
    return true;
  case TESSEL_COMM_TCP:
    if (options.rendezvous_port >= 1 && options.rendezvous_port <= 65535)
      return true;
    error = "tessel_ctx_create: TESSEL_COMM_TCP needs a rendezvous_port in "
            "[1, 65535], got " +
            std::to_string(options.rendezvous_port);
    return false;
  default:
    error =
        "tessel_ctx_create: unknown comm kind " + std::to_string(options.comm);
    return false;
  }
}

/// The backend `options` ask for: backend_name when set, else the name of
/// the older tessel_backend code (so a zero-initialised struct is "cpu").
/// Both set must agree.
const BackendFactory *selectBackend(const tessel_ctx_options &options,
                                    std::string &error) {
  const char *byCode = nullptr;
  switch (options.backend) {
  case TESSEL_BACKEND_CPU:
    byCode = "cpu";
    break;
  case TESSEL_BACKEND_CUDA:
    byCode = "cuda";
    break;
  default:
    error = "tessel_ctx_create: unknown backend code " +
            std::to_string(options.backend);
    return nullptr;
  }
  const char *name = options.backend_name ? options.backend_name : byCode;
  // The code's default (CPU, 0) never contradicts a name.
  if (options.backend != TESSEL_BACKEND_CPU && std::strcmp(name, byCode) != 0) {
    error = std::string("tessel_ctx_create: backend_name '") + name +
            "' contradicts backend code " + std::to_string(options.backend) +
            " ('" + byCode + "')";
    return nullptr;
  }
  const BackendFactory *factory = findBackend(name);
  if (!factory)
    error = std::string("tessel_ctx_create: unknown backend '") + name +
            "' (available: " + backendNames() + ")";
  return factory;
}
} // namespace

const BackendFactory *tessel::findBackend(const char *name) {
  for (const BackendFactory &factory : kBackends)
    if (std::strcmp(factory.name, name) == 0)
      return &factory;
  return nullptr;
}

std::string tessel::backendNames() {
  std::string names;
  for (const BackendFactory &factory : kBackends)
    names += (names.empty() ? "" : ", ") + std::string(factory.name);
  return names;
}

void tessel::setCreateError(std::string message) {
  createError = std::move(message);
}

void tessel::setError(tessel_ctx *ctx, const char *fmt, ...) {
  if (!ctx)
    return;
  char buf[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, args);
  va_end(args);
  std::lock_guard<std::mutex> lock(ctx->stateMutex);
  if (ctx->hasError)
    return;
  ctx->hasError = true;
  ctx->error = buf;
}

extern "C" {

int64_t tessel_dtype_size(int32_t dtype) {
  switch (dtype) {
  case TESSEL_F32:
  case TESSEL_I32:
    return 4;
  case TESSEL_F16:
  case TESSEL_BF16:
    return 2;
  case TESSEL_F64:
  case TESSEL_I64:
    return 8;
  default:
    return 0;
  }
}

int32_t tessel_backend_available(const char *name) {
  const BackendFactory *factory = findBackend(name ? name : "cpu");
  return factory && factory->available() ? 1 : 0;
}

tessel_ctx *tessel_ctx_create(const tessel_ctx_options *options) {
  if (!options) {
    createError = "tessel_ctx_create: null options";
    return nullptr;
  }
  std::string error;
  const BackendFactory *factory = selectBackend(*options, error);
  if (!factory) {
    createError = error;
    return nullptr;
  }
  if (options->world_size < 1 || options->rank < 0 ||
      options->rank >= options->world_size) {
    createError = "tessel_ctx_create: rank " + std::to_string(options->rank) +
                  " outside world of size " +
                  std::to_string(options->world_size);
    return nullptr;
  }
  std::vector<int64_t> mesh;
  if (!meshOf(*options, mesh, error) || !checkComm(*options, error)) {
    createError = error;
    return nullptr;
  }
  std::unique_ptr<tessel_ctx> ctx(new (std::nothrow) tessel_ctx);
  if (!ctx) {
    createError = "tessel_ctx_create: out of memory";
    return nullptr;
  }
  ctx->rank = options->rank;
  ctx->worldSize = options->world_size;
  ctx->comm = options->comm;
  ctx->meshShape = mesh;
  ctx->meshCoord.assign(mesh.size(), 0);
  // Row-major: the last axis is the fastest digit of the rank.
  int64_t rest = options->rank;
  for (size_t a = mesh.size(); a-- > 0;) {
    ctx->meshCoord[a] = rest % mesh[a];
    rest /= mesh[a];
  }
  if (options->comm_timeout_seconds > 0)
    ctx->commTimeoutSeconds = options->comm_timeout_seconds;
  ctx->backend = factory->create(*options, error);
  if (!ctx->backend) {
    createError = error;
    return nullptr;
  }
  ctx->communicator =
      ctx->backend->createCommunicator(ctx.get(), *options, error);
  if (!ctx->communicator && options->comm != TESSEL_COMM_NONE) {
    createError = error;
    return nullptr;
  }
  createError.clear();
  return ctx.release();
}

void tessel_ctx_destroy(tessel_ctx *ctx) { delete ctx; }

const char *tessel_ctx_backend(const tessel_ctx *ctx) {
  return ctx ? ctx->backend->name() : nullptr;
}

int32_t tessel_ctx_rank(const tessel_ctx *ctx) { return ctx ? ctx->rank : -1; }

int32_t tessel_ctx_world_size(const tessel_ctx *ctx) {
  return ctx ? ctx->worldSize : 0;
}

void tessel_set_step(tessel_ctx *ctx, uint64_t step) {
  if (!ctx || refuseWhileCapturing(ctx, "tessel_set_step"))
    return;
  ctx->step = step;
  ctx->backend->setStep(ctx, step);
}

uint64_t tessel_get_step(const tessel_ctx *ctx) { return ctx ? ctx->step : 0; }

void tessel_set_microbatch(tessel_ctx *ctx, uint64_t microbatch) {
  if (ctx)
    ctx->microbatch = microbatch;
}

uint64_t tessel_get_microbatch(const tessel_ctx *ctx) {
  return ctx ? ctx->microbatch : 0;
}

void tessel_set_dropout(tessel_ctx *ctx, int32_t enabled) {
  if (!ctx || refuseWhileCapturing(ctx, "tessel_set_dropout"))
    return;
  ctx->dropoutEnabled = enabled != 0;
}

int32_t tessel_get_dropout(const tessel_ctx *ctx) {
  return ctx ? int32_t(ctx->dropoutEnabled) : 1;
}

void tessel_set_layer(tessel_ctx *ctx, int64_t layer) {
  if (ctx)
    ctx->layer = layer;
}

int64_t tessel_get_layer(const tessel_ctx *ctx) { return ctx ? ctx->layer : 0; }

void tessel_set_rng_stream(tessel_ctx *ctx, uint64_t stream) {
  if (ctx)
    ctx->rngStream = stream;
}

uint64_t tessel_get_rng_stream(const tessel_ctx *ctx) {
  return ctx ? ctx->rngStream : 0;
}

uint64_t tessel_fold_in(uint64_t stream, int64_t data) {
  return hash4(kStreamDomain, stream, uint64_t(data), 0);
}

const char *tessel_error(const tessel_ctx *ctx) {
  if (!ctx)
    return createError.empty() ? nullptr : createError.c_str();
  // The string stays put until tessel_clear_error: once set, an error is
  // never overwritten.
  std::lock_guard<std::mutex> lock(ctx->stateMutex);
  return ctx->hasError ? ctx->error.c_str() : nullptr;
}

void tessel_clear_error(tessel_ctx *ctx) {
  if (!ctx) {
    createError.clear();
    return;
  }
  std::lock_guard<std::mutex> lock(ctx->stateMutex);
  ctx->hasError = false;
  ctx->error.clear();
}

void tessel_get_counters(const tessel_ctx *ctx, tessel_counters *out) {
  if (!out)
    return;
  *out = ctx ? ctx->counters : tessel_counters{};
}

void tessel_reset_counters(tessel_ctx *ctx) {
  if (!ctx || refuseWhileCapturing(ctx, "tessel_reset_counters"))
    return;
  tessel_counters held{};
  held.bytes_allocated = ctx->counters.bytes_allocated;
  held.peak_bytes_allocated = ctx->counters.peak_bytes_allocated;
  ctx->counters = held;
  std::lock_guard<std::mutex> lock(ctx->stateMutex);
  for (auto &perMask : ctx->commCounters)
    perMask.clear();
  for (auto &perPeer : ctx->p2pCounters)
    perPeer.clear();
}

} // extern "C"
