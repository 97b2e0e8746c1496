//===- Communication.h - what a partitioned step communicates -*- C++ -*-===//
//
// One definition of what a partitioned program communicates, shared by the
// lowering (which calls the runtime's collectives and writes the model
// description's "mesh" and "collectives"), the memory plan and
// tessel-compile's report, so that the numbers the compiler prints are the
// numbers the runtime's counters (tessel_comm_bytes, tessel_comm_calls)
// show after a step. Implemented in ReportCost.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_PASSES_COMMUNICATION_H
#define TESSEL_PASSES_COMMUNICATION_H

#include "passes/Sharding.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>

namespace tessel::communication {

using tessel::Mesh;

/// The collectives the runtime counts, in the order of tessel_collective
/// (runtime.h). shard.all_slice moves no data and is not one of them.
enum class Collective : int32_t {
  AllReduce = 0,
  AllGather = 1,
  ReduceScatter = 2,
  AllToAll = 3,
};

/// "all_reduce", "all_gather", "reduce_scatter" or "all_to_all".
llvm::StringRef collectiveName(Collective kind);

/// Whether `op` does work a started collective can hide behind: not a view
/// (nn.reshape, nn.slice, an nn.broadcast only binary ops read), a wait, a
/// terminator or a shard op.
bool isOverlapCover(mlir::Operation &op);
std::optional<Collective> parseCollective(llvm::StringRef name);

/// The mesh axes of a runtime axes mask, in axis order.
llvm::SmallVector<int16_t> axesOfMask(uint32_t mask);

/// Whether `op` is one of the upstream shard ops that lower to the runtime:
/// all_reduce, all_gather, reduce_scatter, all_to_all and all_slice.
bool isLowerableCollective(mlir::Operation *op);

/// Checks that `op` (a lowerable collective) can run on the runtime: on
/// @mesh, static ranked tensors of f32, f16, bf16 or f64 with one element
/// type in and out, a sum, average or max reduction, and (where the order
/// of a group matters) increasing grid axes. Emits the diagnostic on `op`.
mlir::LogicalResult verifyLowerableCollective(mlir::Operation *op);

/// The runtime's axes mask of a collective: bit i for each grid axis i.
uint32_t axesMask(mlir::Operation *op);

/// The calls and payload bytes of one kind of collective over one group.
struct Traffic {
  Collective kind;
  uint32_t axes;
  int64_t calls = 0;
  int64_t bytes = 0;
  /// Of `bytes`, those of asynchronous collectives (nn.async), as the
  /// runtime's tessel_comm_async_bytes counts them: started early.
  int64_t asyncBytes = 0;
  /// Of asyncBytes, those with a kernel issued between the start and the
  /// wait (what the runtime's trace witnesses): the communication that
  /// overlaps compute. A layer's prefetch that runs before the loop and
  /// is waited for before the layer's first kernel is started, not
  /// overlapped.
  int64_t overlappedBytes = 0;
};

/// What one call of `func` communicates, per (kind, axes) in that order:
/// each collective of its body, a repeated layer's as many times as it
/// repeats (nested repeats multiply). Bytes as the runtime's counters
/// define them: all_reduce and reduce_scatter and all_to_all their input,
/// all_gather its output. Collectives over a group of one (and all_slice)
/// move nothing and are left out, as the counters leave them out.
llvm::SmallVector<Traffic> countCollectives(mlir::func::FuncOp func,
                                            const Mesh &mesh);

/// The bytes one rank sends for `payload` bytes of `kind` over a group of
/// `groupSize` with the ring algorithms: 2(G-1)/G of the payload for an
/// all-reduce (a reduce-scatter then an all-gather), (G-1)/G for the
/// others.
int64_t ringWireBytes(Collective kind, int64_t payload, int64_t groupSize);

} // namespace tessel::communication

#endif // TESSEL_PASSES_COMMUNICATION_H
