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

/// Mesh axes splitting one dimension (or loop), outer first.
using MeshAxes = llvm::SmallVector<int16_t, 2>;
/// One MeshAxes per dimension (or per loop).
using DimSharding = llvm::SmallVector<MeshAxes>;

/// A device mesh: named axes, row-major (last axis fastest).
struct Mesh {
  llvm::SmallVector<std::string> names;
  llvm::SmallVector<int64_t> sizes;

  /// Parses "dp=2,tp=2": names [a-z_][a-z0-9_]*, each once, positive sizes,
  /// at most TESSEL_MAX_MESH_AXES axes and 2^31 - 1 devices (what the
  /// runtime takes). On failure returns nullopt and sets `error`.
  static std::optional<Mesh> parse(llvm::StringRef text, std::string &error);
  /// The module's mesh: its shard.grid @mesh, checked for what the runtime
  /// and the description need (static positive sizes, at most
  /// TESSEL_MAX_MESH_AXES axes, one distinct name per axis in
  /// nn.axis_names). nullopt for a module without one; a diagnostic on the
  /// grid when it is malformed.
  static mlir::FailureOr<std::optional<Mesh>> fromModule(mlir::ModuleOp module);

  std::optional<int16_t> axisIndex(llvm::StringRef name) const;
  int64_t worldSize() const;
  /// Product of the sizes of `axes`.
  int64_t groupSize(llvm::ArrayRef<int16_t> axes) const;
  std::string describe(llvm::ArrayRef<int16_t> axes) const;
  /// Creates (or checks) `shard.grid @mesh` at the start of `module`.
  mlir::shard::GridOp materialize(mlir::ModuleOp module) const;
};

/// Logical-axis rules "batch=dp,mlp=tp" as (logical, mesh axis) pairs, in
/// order; on a malformed rule returns nullopt and sets `error` to
/// "'rule': expected logical=mesh, e.g. batch=dp".
std::optional<llvm::SmallVector<std::pair<std::string, std::string>>>
parseRules(llvm::StringRef text, std::string &error);

/// The attribute form `[["dp"], []]` and back (nullopt, with `error`, on an
/// unknown axis name or a malformed attribute).
mlir::ArrayAttr shardingToAttr(mlir::MLIRContext *ctx, const Mesh &mesh,
                               const DimSharding &sharding);
std::optional<DimSharding> shardingFromAttr(mlir::Attribute attr,
                                            const Mesh &mesh,
                                            std::string &error);

bool isReplicated(const DimSharding &sharding);
/// Every mesh axis used by `sharding`.
MeshAxes usedAxes(const DimSharding &sharding);

/// `type` with each dimension divided by the group size of its axes.
mlir::RankedTensorType localType(mlir::RankedTensorType type,
                                 const DimSharding &sharding,
                                 const Mesh &mesh);

/// The loop a tensor dimension's indexing expression is split by: the loop
/// itself (`d3`), or the outermost loop of a linearised group
/// (`d2 * 32 + d3`: splitting the dimension in g blocks splits d2 in g).
/// Null for constants, slices' offsets and floordiv/mod groups.
std::optional<unsigned> leadingLoop(mlir::AffineExpr expr);

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
