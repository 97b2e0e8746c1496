//===- TensorDescription.cpp - a tensor of the model description ----------===//

#include "passes/lowering/TensorDescription.h"

#include "passes/lowering/FunctionLowering.h"

#include "dialect/NN/NNOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
namespace json = llvm::json;

namespace tessel::lowering {
namespace {

StringRef dtypeName(Type type) {
  if (type.isF32())
    return "f32";
  if (type.isF16())
    return "f16";
  if (type.isBF16())
    return "bf16";
  if (type.isF64())
    return "f64";
  if (type.isSignlessInteger(32))
    return "i32";
  return "i64";
}

/// The global size of dimension `dim` of `value`: its local size times the
/// mesh axes that split it, when it is a function argument whose
/// nn.sharding says so (a vocabulary-parallel embedding's table).
int64_t globalDimSize(Value value, unsigned dim,
                      const std::optional<Mesh> &mesh) {
  int64_t size = tensorType(value).getDimSize(dim);
  // A cast (a parameter's bf16 copy) has its operand's shape and split.
  while (auto cast = value.getDefiningOp<nn::CastOp>())
    value = cast.getInput();
  auto arg = dyn_cast<BlockArgument>(value);
  auto func =
      arg ? dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()) : nullptr;
  if (!mesh || !func)
    return size;
  auto sharding = func.getArgAttrOfType<ArrayAttr>(
      arg.getArgNumber(), nn::NNDialect::kShardingAttrName);
  if (!sharding || dim >= sharding.size())
    return size;
  if (auto axes = dyn_cast<ArrayAttr>(sharding[dim]))
    for (auto name : axes.getAsValueRange<StringAttr>())
      if (std::optional<int16_t> axis = mesh->axisIndex(name))
        size *= mesh->shape[*axis];
  return size;
}

/// The axis names of one dimension's sharding `entry`; multiplies `size`
/// by their sizes. Each axis splits at most one dimension (`used`).
FailureOr<json::Array> splitAxes(func::FuncOp func, ArrayAttr sharding,
                                 Attribute entry, const Twine &what,
                                 const Mesh &mesh, llvm::StringSet<> &used,
                                 int64_t &size) {
  auto axes = dyn_cast<ArrayAttr>(entry);
  if (!axes)
    return func.emitOpError()
           << what << ": '" << nn::NNDialect::kShardingAttrName << "' "
           << sharding << " must hold one array of axis names per dimension";
  json::Array names;
  for (Attribute axis : axes) {
    auto name = dyn_cast<StringAttr>(axis);
    std::optional<int16_t> index =
        name ? mesh.axisIndex(name.getValue()) : std::nullopt;
    if (!index || !used.insert(name.getValue()).second)
      return func.emitOpError()
             << what << ": '" << nn::NNDialect::kShardingAttrName << "' "
             << sharding << " must name, per dimension, distinct axes of "
             << "the mesh (" << llvm::join(mesh.axes, ", ") << ")";
    size *= mesh.shape[*index];
    names.push_back(name.getValue().str());
  }
  return names;
}

/// Views and data movement, whose result holds the values of their input
/// (ids gathered along the sequence under sequence parallelism).
bool keepsValues(Operation *op) {
  return isa<nn::ReshapeOp, shard::AllGatherOp, shard::AllSliceOp,
             shard::AllToAllOp>(op);
}

} // namespace

std::optional<int64_t> valueLimit(Value arg, const std::optional<Mesh> &mesh) {
  for (OpOperand &use : arg.getUses()) {
    Operation *user = use.getOwner();
    if (auto embedding = dyn_cast<nn::EmbeddingOp>(user))
      if (use.get() == embedding.getIds()) {
        // A vocabulary-parallel table holds a block of rows (block_axes);
        // say so from the op, whatever the table's value comes from (a
        // ZeRO-3 gather of the parameter's chunk).
        auto axes = embedding->getAttrOfType<DenseI16ArrayAttr>("block_axes");
        if (!axes)
          return globalDimSize(embedding.getTable(), 0, mesh);
        int64_t rows = tensorType(embedding.getTable()).getDimSize(0);
        for (int16_t axis : axes.asArrayRef())
          if (mesh && axis >= 0 &&
              axis < static_cast<int16_t>(mesh->shape.size()))
            rows *= mesh->shape[axis];
        return rows;
      }
    // A loss's labels (operand 1 of each form) index its classes.
    if (isa<nn::CrossEntropyOp, nn::CrossEntropyGradOp,
            nn::CrossEntropyWithGradOp>(user) &&
        use.getOperandNumber() == 1)
      return tensorType(user->getOperand(0)).getShape().back();
    // A vocabulary-parallel cross-entropy's pieces: their class blocks.
    if (isa<nn::LabelLogitOp, nn::SubLabelOp, nn::VocabLossStatsOp,
            nn::VocabLossGradOp>(user) &&
        use.getOperandNumber() == 1) {
      int64_t classes = tensorType(user->getOperand(0)).getShape().back();
      if (auto axes = user->getAttrOfType<DenseI16ArrayAttr>("block_axes"))
        for (int16_t axis : axes.asArrayRef())
          if (mesh && axis >= 0 &&
              axis < static_cast<int16_t>(mesh->shape.size()))
            classes *= mesh->shape[axis];
      return classes;
    }
    // Masking keeps the classes.
    if (keepsValues(user) || isa<nn::MaskLabelsOp>(user))
      if (std::optional<int64_t> limit = valueLimit(user->getResult(0), mesh))
        return limit;
  }
  return std::nullopt;
}

std::optional<int64_t> valueIgnoreIndex(Value arg) {
  for (Operation *user : arg.getUsers()) {
    if (auto mask = dyn_cast<nn::MaskLabelsOp>(user))
      return static_cast<int64_t>(mask.getIgnoreIndex());
    if (keepsValues(user))
      if (std::optional<int64_t> ignore = valueIgnoreIndex(user->getResult(0)))
        return ignore;
  }
  return std::nullopt;
}

json::Array describeAxes(func::FuncOp func, unsigned i) {
  json::Array axes;
  if (auto attr =
          func.getArgAttrOfType<ArrayAttr>(i, nn::NNDialect::kAxesAttrName))
    for (StringRef axis : attr.getAsValueRange<StringAttr>())
      axes.push_back(axis.str());
  return axes;
}

json::Object describeTensor(StringRef name, StringRef role, Type type,
                            int64_t offset) {
  auto tensor = cast<RankedTensorType>(type);
  return json::Object{// json::Value borrows a StringRef: copy the strings.
                      {"name", name.str()},
                      {"role", role.str()},
                      {"dtype", dtypeName(tensor.getElementType()).str()},
                      {"shape", json::Array(tensor.getShape())},
                      {"offset", offset},
                      {"bytes", nn::detail::tensorBytes(tensor)}};
}

// tessel_init_param takes two numbers; normal's mean defaults to 0.
json::Object describeInit(nn::InitAttr init) {
  ArrayRef<double> args = init.getArgs().asArrayRef();
  json::Array initArgs{args.size() > 0 ? args[0] : 0.0,
                       args.size() > 1 ? args[1] : 0.0};
  return json::Object{{"kind", nn::stringifyInitKind(init.getKind()).str()},
                      {"args", std::move(initArgs)}};
}

json::Object describeTrain(DictionaryAttr train) {
  json::Object config;
  for (NamedAttribute setting : train) {
    std::string key = setting.getName().getValue().str();
    Attribute value = setting.getValue();
    if (auto f = dyn_cast<FloatAttr>(value))
      config[key] = f.getValueAsDouble();
    else if (auto flag = dyn_cast<BoolAttr>(value))
      config[key] = flag.getValue();
    else if (auto i = dyn_cast<IntegerAttr>(value))
      config[key] = i.getInt();
    else if (auto str = dyn_cast<StringAttr>(value))
      config[key] = str.getValue().str();
  }
  return config;
}

LogicalResult describeSharding(json::Object &tensor, func::FuncOp func,
                               ArrayAttr sharding, Type type, const Twine &what,
                               const std::optional<Mesh> &mesh) {
  if (!mesh) {
    if (sharding) {
      func.emitOpError() << what << " has '" << nn::NNDialect::kShardingAttrName
                         << "', but the module has no shard.grid @"
                         << kMeshName;
      return failure();
    }
    return success();
  }
  SmallVector<int64_t> global(cast<RankedTensorType>(type).getShape());
  if (sharding && sharding.size() != global.size()) {
    func.emitOpError() << what << ": '" << nn::NNDialect::kShardingAttrName
                       << "' has " << sharding.size()
                       << " entries for a tensor of rank " << global.size();
    return failure();
  }
  json::Array dims;
  bool split = false;
  llvm::StringSet<> used;
  for (auto [dim, entry] : llvm::enumerate(sharding ? sharding.getValue()
                                                    : ArrayRef<Attribute>())) {
    FailureOr<json::Array> names =
        splitAxes(func, sharding, entry, what, *mesh, used, global[dim]);
    if (failed(names))
      return failure();
    split |= !names->empty();
    dims.push_back(std::move(*names));
  }
  tensor["global_shape"] = json::Array(global);
  if (split)
    tensor["sharding"] = std::move(dims);
  return success();
}

} // namespace tessel::lowering
