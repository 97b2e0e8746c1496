//===- Sharding.cpp - Mesh and per-dimension shardings shared by the passes ===//

#include "passes/Sharding.h"
#include "runtime/include/tessel/runtime.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;

namespace tessel {

FailureOr<std::optional<Mesh>> meshFromModule(ModuleOp module) {
  auto grid = module.lookupSymbol<shard::GridOp>(kMeshName);
  if (!grid)
    return std::optional<Mesh>();
  if (llvm::any_of(grid.getShape(), [](int64_t size) {
        return ShapedType::isDynamic(size) || size < 1;
      }))
    return grid.emitOpError()
           << "has a dynamic or empty axis; the runtime runs on a mesh of "
              "static sizes";
  if (grid.getRank() > TESSEL_MAX_MESH_AXES)
    return grid.emitOpError()
           << "has " << grid.getRank() << " axes; the runtime takes at most "
           << TESSEL_MAX_MESH_AXES;
  auto names = grid->getAttrOfType<ArrayAttr>(kAxisNamesAttr);
  Mesh mesh;
  if (names && static_cast<int64_t>(names.size()) == grid.getRank())
    for (auto [name, size] : llvm::zip(names, grid.getShape())) {
      auto text = dyn_cast<StringAttr>(name);
      if (!text || text.getValue().empty() || mesh.axisIndex(text.getValue()))
        break;
      mesh.axes.push_back(text.str());
      mesh.shape.push_back(size);
    }
  if (static_cast<int64_t>(mesh.axes.size()) != grid.getRank())
    return grid.emitOpError()
           << "needs '" << kAxisNamesAttr
           << "': one distinct name per axis, e.g. [\"dp\", \"tp\"]";
  return std::optional<Mesh>(mesh);
}

shard::GridOp materializeMesh(ModuleOp module, const Mesh &mesh) {
  if (auto grid = module.lookupSymbol<shard::GridOp>(kMeshName))
    return grid;
  OpBuilder builder(module.getBodyRegion());
  auto grid = shard::GridOp::create(builder, module.getLoc(), kMeshName, mesh.shape);
  SmallVector<Attribute> axisNames;
  for (const std::string &name : mesh.axes)
    axisNames.push_back(builder.getStringAttr(name));
  grid->setAttr(kAxisNamesAttr, builder.getArrayAttr(axisNames));
  return grid;
}

ArrayAttr shardingToAttr(MLIRContext *ctx, const Mesh &mesh,
                         const DimSharding &sharding) {
  Builder builder(ctx);
  SmallVector<Attribute> dims;
  for (const MeshAxes &axes : sharding) {
    SmallVector<Attribute> names;
    for (int16_t axis : axes)
      names.push_back(builder.getStringAttr(mesh.axes[axis]));
    dims.push_back(builder.getArrayAttr(names));
  }
  return builder.getArrayAttr(dims);
}

std::optional<SmallVector<MeshRule>>
meshRules(const Mesh &mesh, ArrayRef<std::pair<std::string, std::string>> rules,
          bool dropUnknown, std::string &error) {
  SmallVector<MeshRule> indexed;
  for (auto &[logical, axis] : rules) {
    std::optional<int16_t> index = mesh.axisIndex(axis);
    if (index) {
      indexed.push_back({logical, *index});
    } else if (!dropUnknown) {
      error = "rule '" + logical + "=" + axis + "' names unknown mesh axis '" +
              axis + "'";
      return std::nullopt;
    }
  }
  return indexed;
}

std::optional<DimSharding> shardingFromAttr(Attribute attr, const Mesh &mesh,
                                            std::string &error) {
  auto dims = dyn_cast_or_null<ArrayAttr>(attr);
  if (!dims) {
    error = "a sharding is an array of arrays of mesh axis names";
    return std::nullopt;
  }
  DimSharding sharding;
  MeshAxes seen;
  for (Attribute dim : dims) {
    auto names = dyn_cast<ArrayAttr>(dim);
    if (!names) {
      error = "a sharding is an array of arrays of mesh axis names";
      return std::nullopt;
    }
    MeshAxes axes;
    for (Attribute name : names) {
      auto text = dyn_cast<StringAttr>(name);
      std::optional<int16_t> axis =
          text ? mesh.axisIndex(text.getValue()) : std::nullopt;
      if (!axis) {
        error = text ? "unknown mesh axis '" + text.str() + "'"
                     : "a mesh axis is named by a string";
        return std::nullopt;
      }
      if (llvm::is_contained(seen, *axis)) {
        error = "mesh axis '" + text.str() + "' is used twice in one value";
        return std::nullopt;
      }
      seen.push_back(*axis);
      axes.push_back(*axis);
    }
    sharding.push_back(axes);
  }
  return sharding;
}

bool isReplicated(const DimSharding &sharding) {
  return llvm::all_of(sharding, [](const MeshAxes &axes) { return axes.empty(); });
}

MeshAxes usedAxes(const DimSharding &sharding) {
  MeshAxes all;
  for (const MeshAxes &axes : sharding)
    llvm::append_range(all, axes);
  return all;
}

RankedTensorType localType(RankedTensorType type, const DimSharding &sharding,
                           const Mesh &mesh) {
  SmallVector<int64_t> shape(type.getShape());
  for (auto [dim, axes] : llvm::enumerate(sharding))
    if (dim < shape.size() && !axes.empty())
      shape[dim] /= mesh.groupSize(axes);
  return RankedTensorType::get(shape, type.getElementType(),
                               type.getEncoding());
}

// Collects the terms of a sum of `loop` and `loop * constant`; false for
// anything else (constants, floordiv, mod).
static bool linearTerms(AffineExpr expr,
                        SmallVectorImpl<std::pair<unsigned, int64_t>> &terms) {
  if (auto dim = dyn_cast<AffineDimExpr>(expr)) {
    terms.push_back({dim.getPosition(), 1});
    return true;
  }
  auto binary = dyn_cast<AffineBinaryOpExpr>(expr);
  if (!binary)
    return false;
  if (binary.getKind() == AffineExprKind::Add)
    return linearTerms(binary.getLHS(), terms) &&
           linearTerms(binary.getRHS(), terms);
  if (binary.getKind() == AffineExprKind::Mul) {
    auto dim = dyn_cast<AffineDimExpr>(binary.getLHS());
    auto factor = dyn_cast<AffineConstantExpr>(binary.getRHS());
    if (!dim || !factor)
      return false;
    terms.push_back({dim.getPosition(), factor.getValue()});
    return true;
  }
  return false;
}

int64_t groupOfIndex(AffineExpr expr) {
  auto binary = dyn_cast<AffineBinaryOpExpr>(expr);
  if (!binary || binary.getKind() != AffineExprKind::FloorDiv ||
      !isa<AffineDimExpr>(binary.getLHS()))
    return 1;
  auto group = dyn_cast<AffineConstantExpr>(binary.getRHS());
  return group && group.getValue() > 0 ? group.getValue() : 1;
}

bool splitsIntoBlocks(AffineExpr expr, int64_t extent, int64_t blocks) {
  int64_t group = groupOfIndex(expr);
  return group == 1 ||
         (blocks > 0 && extent % blocks == 0 && (extent / blocks) % group == 0);
}

std::optional<unsigned> leadingLoop(AffineExpr expr) {
  if (groupOfIndex(expr) > 1)
    return cast<AffineDimExpr>(cast<AffineBinaryOpExpr>(expr).getLHS())
        .getPosition();
  SmallVector<std::pair<unsigned, int64_t>> terms;
  if (!linearTerms(expr, terms) || terms.empty())
    return std::nullopt;
  auto outer = llvm::max_element(
      terms, [](auto a, auto b) { return a.second < b.second; });
  return outer->first;
}

SmallVector<unsigned> loopsOf(AffineExpr expr) {
  SmallVector<unsigned> loops;
  expr.walk([&](AffineExpr sub) {
    if (auto dim = dyn_cast<AffineDimExpr>(sub))
      if (!llvm::is_contained(loops, dim.getPosition()))
        loops.push_back(dim.getPosition());
  });
  return loops;
}

SmallVector<int64_t> loopExtents(Operation *op, ArrayRef<AffineMap> maps) {
  unsigned numLoops = maps.empty() ? 0 : maps.front().getNumDims();
  SmallVector<int64_t> extents(numLoops, -1);
  SmallVector<Type> types(op->getOperandTypes());
  llvm::append_range(types, op->getResultTypes());
  for (auto [map, type] : llvm::zip(maps, types)) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor)
      continue;
    for (auto [dim, expr] : llvm::enumerate(map.getResults()))
      if (auto loop = dyn_cast<AffineDimExpr>(expr))
        if (extents[loop.getPosition()] < 0)
          extents[loop.getPosition()] = tensor.getDimSize(dim);
  }
  return extents;
}

DimSharding shardingOfValue(AffineMap map, const DimSharding &loops) {
  DimSharding sharding;
  for (AffineExpr expr : map.getResults()) {
    std::optional<unsigned> loop = leadingLoop(expr);
    sharding.push_back(loop && *loop < loops.size() ? loops[*loop] : MeshAxes{});
  }
  return sharding;
}

} // namespace tessel
