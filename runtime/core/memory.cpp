//===- memory.cpp - Allocation, copies and their counters -----------------===//
//
// The front of the memory calls: size checks and the allocation and copy
// counters, then the backend's memory. The launcher and generated code reach
// device memory only through these calls (an offset into the arena is
// pointer arithmetic, never a dereference), so they run unchanged on a
// backend whose memory the host cannot read.
//
//===----------------------------------------------------------------------===//

#include "core/backend.h"

#include <algorithm>
#include <cstdint>

using namespace tessel;

namespace {
/// The checks and counting every copy shares; false when there is nothing
/// to move.
bool startCopy(tessel_ctx *ctx, int64_t bytes) {
  if (!ctx || bytes <= 0)
    return false;
  ctx->counters.bytes_copied += bytes;
  return true;
}
} // namespace

extern "C" {

void *tessel_alloc(tessel_ctx *ctx, int64_t bytes) {
  if (!ctx || refuseWhileCapturing(ctx, "tessel_alloc"))
    return nullptr;
  if (bytes < 0) {
    setError(ctx, "tessel_alloc: negative size %lld", (long long)bytes);
    return nullptr;
  }
  // Backends round up to their alignment; refuse sizes whose rounding would
  // overflow before any backend sees them.
  if (bytes > INT64_MAX - 63) {
    setError(ctx, "tessel_alloc: size %lld overflows", (long long)bytes);
    return nullptr;
  }
  void *p = ctx->backend->alloc(bytes);
  if (!p) {
    setError(ctx, "tessel_alloc: out of memory (%lld bytes)", (long long)bytes);
    return nullptr;
  }
  ctx->allocations[p] = bytes;
  ctx->counters.bytes_allocated += bytes;
  ctx->counters.peak_bytes_allocated = std::max(
      ctx->counters.peak_bytes_allocated, ctx->counters.bytes_allocated);
  return p;
}

void tessel_free(tessel_ctx *ctx, void *ptr) {
  if (!ctx || !ptr || refuseWhileCapturing(ctx, "tessel_free"))
    return;
  auto it = ctx->allocations.find(ptr);
  if (it != ctx->allocations.end()) {
    ctx->counters.bytes_allocated -= it->second;
    ctx->allocations.erase(it);
  }
  ctx->backend->free(ptr);
}

void tessel_copy_to_device(tessel_ctx *ctx, void *dst, const void *src,
                           int64_t bytes) {
  if (startCopy(ctx, bytes))
    ctx->backend->copyToDevice(dst, src, bytes);
}

void tessel_copy_to_host(tessel_ctx *ctx, void *dst, const void *src,
                         int64_t bytes) {
  if (ctx && refuseWhileCapturing(ctx, "tessel_copy_to_host"))
    return;
  if (startCopy(ctx, bytes))
    ctx->backend->copyToHost(dst, src, bytes);
}

void tessel_copy(tessel_ctx *ctx, void *dst, const void *src, int64_t bytes) {
  // In place: nothing to move and nothing to count.
  if (dst == src)
    return;
  if (startCopy(ctx, bytes))
    ctx->backend->copy(dst, src, bytes);
}

void tessel_zero(tessel_ctx *ctx, void *dst, int64_t bytes) {
  if (ctx && bytes > 0)
    ctx->backend->zero(dst, bytes);
}

void tessel_synchronize(tessel_ctx *ctx) {
  if (ctx && !refuseWhileCapturing(ctx, "tessel_synchronize"))
    ctx->backend->synchronize(ctx);
}

} // extern "C"
