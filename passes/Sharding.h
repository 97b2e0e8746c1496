//===- Sharding.h - Mesh and per-dimension shardings shared by the passes -===//
//
// tessel-propagate-sharding writes, and tessel-partition reads, two
// attributes in one form: per tensor dimension (`nn.sharding` on function
// arguments and results) or per loop of an op's sharding rule
// (`nn.loop_sharding` on ops), the names of the mesh axes that split it,
// outer axis first: `[["dp"], [], ["tp"]]`.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_PASSES_SHARDING_H
#define TESSEL_PASSES_SHARDING_H

#include "runtime/config/Mesh.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/AffineExpr.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>

namespace tessel {

inline constexpr llvm::StringLiteral kMeshName = "mesh";
inline constexpr llvm::StringLiteral kAxisNamesAttr = "nn.axis_names";
inline constexpr llvm::StringLiteral kShardingAttr = "nn.sharding";
inline constexpr llvm::StringLiteral kLoopShardingAttr = "nn.loop_sharding";
/// The mesh axis pipeline stages split (tessel-pipeline-split).
inline constexpr llvm::StringLiteral kPipelineAxisName = "pp";
/// The mesh axes ZeRO shards the training state over (tessel-zero): data
/// parallelism's, and context parallelism's, whose ranks hold the same
/// parameters and sum their gradients as dp's do.
inline constexpr llvm::StringLiteral kDataAxisName = "dp";
inline constexpr llvm::StringLiteral kContextAxisName = "cp";

/// Mesh axes splitting one dimension (or loop), outer first.
using MeshAxes = llvm::SmallVector<int16_t, 2>;
/// One MeshAxes per dimension (or per loop).
using DimSharding = llvm::SmallVector<MeshAxes>;

/// The module's mesh: its shard.grid @mesh, checked for what the runtime
/// and the description need (static positive sizes, at most
/// TESSEL_MAX_MESH_AXES axes, one distinct name per axis in
/// nn.axis_names). nullopt for a module without one; a diagnostic on the
/// grid when it is malformed.
mlir::FailureOr<std::optional<Mesh>> meshFromModule(mlir::ModuleOp module);
/// Creates (or returns the existing) `shard.grid @mesh` of `mesh` at the
/// start of `module`.
mlir::shard::GridOp materializeMesh(mlir::ModuleOp module, const Mesh &mesh);

/// The attribute form `[["dp"], []]` and back (nullopt, with `error`, on an
/// unknown axis name or a malformed attribute).
mlir::ArrayAttr shardingToAttr(mlir::MLIRContext *ctx, const Mesh &mesh,
                               const DimSharding &sharding);
std::optional<DimSharding> shardingFromAttr(mlir::Attribute attr,
                                            const Mesh &mesh,
                                            std::string &error);

/// A logical-axis rule with its mesh axis's index.
using MeshRule = std::pair<std::string, int16_t>;
/// `rules` (parseRules's pairs) with each mesh axis's index in `mesh`. A
/// rule naming an axis the mesh lacks is dropped where `dropUnknown` (the
/// default rules serve any mesh); otherwise nullopt, with "rule 'L=A'
/// names unknown mesh axis 'A'" in `error`.
std::optional<llvm::SmallVector<MeshRule>>
meshRules(const Mesh &mesh,
          llvm::ArrayRef<std::pair<std::string, std::string>> rules,
          bool dropUnknown, std::string &error);

bool isReplicated(const DimSharding &sharding);
/// Every mesh axis used by `sharding`.
MeshAxes usedAxes(const DimSharding &sharding);

/// `type` with each dimension divided by the group size of its axes.
mlir::RankedTensorType localType(mlir::RankedTensorType type,
                                 const DimSharding &sharding,
                                 const Mesh &mesh);

/// The loop a tensor dimension's indexing expression is split by: the loop
/// itself (`d3`), the outermost loop of a linearised group (`d2 * 32 + d3`:
/// splitting the dimension in g blocks splits d2 in g), or the loop of a
/// group index (`d2 floordiv 4`: grouped-query attention's key/value head
/// of query head d2, split alike where splitsIntoBlocks says so). Null for
/// constants, slices' offsets and reshapes' floordiv/mod groups.
std::optional<unsigned> leadingLoop(mlir::AffineExpr expr);

/// Whether `blocks` equal blocks of the loop leadingLoop(expr), of `extent`,
/// index `blocks` equal blocks of the dimension `expr` indexes, block r in
/// block r: always for a loop or a linearised group; for a group index
/// (`d floordiv g`) when each block holds whole groups.
bool splitsIntoBlocks(mlir::AffineExpr expr, int64_t extent, int64_t blocks);

/// The group size g of a group index `d floordiv g`, else 1.
int64_t groupOfIndex(mlir::AffineExpr expr);

/// Every loop an expression reads.
llvm::SmallVector<unsigned> loopsOf(mlir::AffineExpr expr);

/// The extent of each loop of a sharding rule, from the operand and result
/// types (-1 where no dimension is exactly that loop).
llvm::SmallVector<int64_t> loopExtents(mlir::Operation *op,
                                       llvm::ArrayRef<mlir::AffineMap> maps);

/// The sharding of operand or result `map` under loop sharding `loops`.
DimSharding shardingOfValue(mlir::AffineMap map, const DimSharding &loops);

} // namespace tessel

#endif // TESSEL_PASSES_SHARDING_H
