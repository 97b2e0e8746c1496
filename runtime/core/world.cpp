//===- world.cpp - Entry points of the local (threads) and MPI worlds -----===//
//
// The worlds exist before any context and outlive them, so these calls check
// their arguments here and go straight to the host communicators.
//
//===----------------------------------------------------------------------===//

#include "core/backend.h"

using namespace tessel;

extern "C" {

tessel_local_world *tessel_local_world_create(int32_t world_size) {
  if (world_size < 1)
    return nullptr;
  return cpu::createLocalWorld(world_size);
}

void tessel_local_world_destroy(tessel_local_world *world) {
  if (world)
    cpu::destroyLocalWorld(world);
}

void tessel_local_world_abort(tessel_local_world *world, int32_t rank,
                              const char *message) {
  if (world)
    cpu::abortLocalWorld(world, rank, message ? message : "(no message)");
}

int32_t tessel_mpi_init(int32_t *rank, int32_t *world_size) {
  return cpu::mpiInit(rank, world_size);
}

void tessel_mpi_finalize(void) { cpu::mpiFinalize(); }

void tessel_mpi_abort(int32_t code) { cpu::mpiAbort(code); }

} // extern "C"
