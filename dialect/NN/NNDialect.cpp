//===- NNDialect.cpp - the nn dialect: registration and model interface -===//
//
// Besides registering ops and attributes, the dialect verifies the argument
// attributes that describe a model's interface (nn.param, nn.init, nn.input,
// nn.label, nn.axes) and the module's extra logical axes.
//
//===----------------------------------------------------------------------===//

#include "dialect/NN/NNDialect.h"
#include "dialect/NN/NNOps.h"
#include "runtime/config/EntryKinds.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Transforms/InliningUtils.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace tessel::nn;

#include "dialect/NN/NNDialect.cpp.inc"

namespace {
/// nn ops are pure functions of their operands: inlining a helper function
/// that uses them is always legal.
struct NNInlinerInterface : public DialectInlinerInterface {
  using DialectInlinerInterface::DialectInlinerInterface;
  bool isLegalToInline(Operation *, Region *, bool, IRMapping &) const final {
    return true;
  }
  bool isLegalToInline(Region *, Region *, bool, IRMapping &) const final {
    return true;
  }
};
} // namespace

void NNDialect::initialize() {
  registerAttributes();
  registerOps();
  addInterfaces<NNInlinerInterface>();
}

Operation *NNDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                          Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, type, elements);
}

ArrayRef<StringLiteral> NNDialect::getBuiltinLogicalAxes() {
  static const StringLiteral kAxes[] = {
      "batch",   "seq",      "embed",   "mlp",      "heads",
      "kv_heads", "head_dim", "vocab",  "layers",   "norm",
      "classes", "features", "channels", "height",  "width",
      "experts"};
  return kAxes;
}

//===----------------------------------------------------------------------===//
// Model interface attributes
//===----------------------------------------------------------------------===//

/// A name the model description and checkpoints carry as a JSON string
/// (parameter and axis names, the model function's name) must be valid
/// UTF-8: a string attribute's escapes (\FF) can make any bytes.
static bool isTextName(StringRef name) { return llvm::json::isUTF8(name); }

/// The logical axis names known where `op` lives: the built-in ones plus the
/// `nn.logical_axes` of every enclosing module.
static llvm::StringSet<> knownLogicalAxes(Operation *op) {
  llvm::StringSet<> names;
  for (StringLiteral name : NNDialect::getBuiltinLogicalAxes())
    names.insert(name);
  for (Operation *parent = op; parent; parent = parent->getParentOp())
    if (auto extra = parent->getAttrOfType<ArrayAttr>(
            NNDialect::kLogicalAxesAttrName))
      for (Attribute name : extra)
        if (auto str = dyn_cast<StringAttr>(name))
          names.insert(str.getValue());
  return names;
}

static std::string joinSorted(const llvm::StringSet<> &names) {
  SmallVector<StringRef> sorted;
  for (const auto &entry : names)
    sorted.push_back(entry.getKey());
  llvm::sort(sorted);
  return llvm::join(sorted, ", ");
}

static LogicalResult verifyAxes(FunctionOpInterface func, unsigned argIndex,
                                Attribute attr, RankedTensorType type) {
  auto axes = dyn_cast<ArrayAttr>(attr);
  if (!axes || !llvm::all_of(axes, llvm::IsaPred<StringAttr>))
    return func.emitOpError()
           << "argument #" << argIndex
           << ": 'nn.axes' must be an array of logical axis names, e.g. "
              "[\"batch\", \"embed\"]";
  if (static_cast<int64_t>(axes.size()) != type.getRank())
    return func.emitOpError()
           << "argument #" << argIndex << ": 'nn.axes' names " << axes.size()
           << " axes but the argument " << type << " has rank "
           << type.getRank();
  llvm::StringSet<> known = knownLogicalAxes(func);
  llvm::StringSet<> seen;
  for (auto [dim, name] : llvm::enumerate(axes.getAsValueRange<StringAttr>())) {
    if (!known.contains(name))
      return func.emitOpError()
             << "argument #" << argIndex << ": unknown logical axis '" << name
             << "' for dimension " << dim << " (known: " << joinSorted(known)
             << "; declare more with the module attribute '"
             << NNDialect::kLogicalAxesAttrName << "')";
    if (!seen.insert(name).second)
      return func.emitOpError()
             << "argument #" << argIndex << ": logical axis '" << name
             << "' names more than one dimension";
  }
  return success();
}

bool NNDialect::isModelFunction(Operation *op) {
  auto func = dyn_cast<FunctionOpInterface>(op);
  if (!func || func.isExternal() || func->hasAttr(kEntryAttrName))
    return false;
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
    if (func.getArgAttr(i, kParamAttrName) || func.getArgAttr(i, kInputAttrName) ||
        func.getArgAttr(i, kLabelAttrName))
      return true;
  return false;
}

bool NNDialect::returnsStageOutputs(Operation *op) {
  auto func = dyn_cast<FunctionOpInterface>(op);
  return func && func->hasAttr(kStageAttrName) && func.getNumResults() > 0 &&
         func.getResultAttr(0, kStageOutputAttrName);
}

/// A function that declares parameters, inputs or labels is a model: its
/// first result is the scalar loss.
static LogicalResult verifyReturnsScalarLoss(FunctionOpInterface func) {
  // The optimizer update of a trained model takes the parameters and
  // returns them updated; it has no loss. Neither has a pipeline stage
  // before the last.
  if (auto entry = func->getAttrOfType<StringAttr>(NNDialect::kEntryAttrName))
    if (entry.getValue() == "update" ||
        entry.getValue().starts_with("backward_weight"))
      return success();
  if (NNDialect::returnsStageOutputs(func))
    return success();
  // Nor has a backward whose forward part ran before it, as forward_keep
  // (it reads that part's kept values).
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
    if (func.getArgAttr(i, NNDialect::kKeptAttrName))
      return success();
  ArrayRef<Type> results = func.getResultTypes();
  auto loss = results.empty() ? RankedTensorType()
                              : dyn_cast<RankedTensorType>(results.front());
  if (!loss || loss.getRank() != 0 || !isa<FloatType>(loss.getElementType()))
    return func.emitOpError()
           << "is a model (it has nn.param/nn.input/nn.label arguments) and "
              "must return its scalar loss first, as tensor<f32>; it returns ("
           << results << ")";
  return success();
}

static LogicalResult verifyParamName(FunctionOpInterface func,
                                     unsigned argIndex, Attribute attr) {
  auto name = dyn_cast<StringAttr>(attr);
  if (!name || name.getValue().empty())
    return func.emitOpError()
           << "argument #" << argIndex
           << ": 'nn.param' must be the parameter's checkpoint name, e.g. "
              "nn.param = \"fc1.weight\"";
  for (unsigned other = 0, e = func.getNumArguments(); other < e; ++other) {
    if (other == argIndex)
      continue;
    auto otherName = func.getArgAttrOfType<StringAttr>(
        other, NNDialect::kParamAttrName);
    if (otherName == name)
      return func.emitOpError()
             << "parameter name '" << name.getValue()
             << "' is used by arguments #" << std::min(argIndex, other)
             << " and #" << std::max(argIndex, other);
  }
  if (!isTextName(name.getValue()))
    return func.emitOpError() << "argument #" << argIndex
                              << ": parameter name is not valid UTF-8";
  if (!func.getArgAttr(argIndex, NNDialect::kInitAttrName))
    return func.emitOpError()
           << "parameter '" << name.getValue()
           << "' has no initialiser; add e.g. nn.init = #nn.init<normal, 0.02>";
  return success();
}

/// An array of arrays of mesh axis names, one per dimension (or loop).
static bool isShardingForm(Attribute attr) {
  auto dims = dyn_cast<ArrayAttr>(attr);
  return dims && llvm::all_of(dims, [](Attribute dim) {
           auto names = dyn_cast<ArrayAttr>(dim);
           return names && llvm::all_of(names, llvm::IsaPred<StringAttr>);
         });
}

static LogicalResult verifySharding(Operation *op, const std::string &what,
                                    Attribute attr, RankedTensorType type) {
  if (!isShardingForm(attr))
    return op->emitOpError()
           << what << ": 'nn.sharding' must list, per dimension, the mesh "
              "axes that split it, e.g. [[\"dp\"], []]";
  if (static_cast<int64_t>(cast<ArrayAttr>(attr).size()) != type.getRank())
    return op->emitOpError() << what << ": 'nn.sharding' has "
                             << cast<ArrayAttr>(attr).size()
                             << " dimensions but the type " << type
                             << " has rank " << type.getRank();
  return success();
}

RankedTensorType NNDialect::blockTypeOf(FunctionOpInterface func,
                                        unsigned i) {
  auto type = dyn_cast<RankedTensorType>(func.getArgumentTypes()[i]);
  auto zero = func.getArgAttrOfType<DictionaryAttr>(i, kZeroAttrName);
  auto block =
      zero ? dyn_cast_or_null<DenseI64ArrayAttr>(zero.get("block")) : nullptr;
  if (!type || !block ||
      llvm::any_of(block.asArrayRef(), [](int64_t size) { return size < 0; }))
    return type;
  return RankedTensorType::get(block.asArrayRef(), type.getElementType());
}

/// `nn.zero = {block = array<i64: ...>, dims = k[, axes = ["dp", ...]]}` on
/// an argument of `type`: the block's leading k dimensions, then one chunk
/// of the rest, split over the named mesh axes (dp where none are named).
static LogicalResult verifyZero(FunctionOpInterface func, unsigned argIndex,
                                Attribute value, RankedTensorType type) {
  auto zero = dyn_cast<DictionaryAttr>(value);
  auto block =
      zero ? dyn_cast_or_null<DenseI64ArrayAttr>(zero.get("block")) : nullptr;
  auto dims = zero ? dyn_cast_or_null<IntegerAttr>(zero.get("dims")) : nullptr;
  Attribute axes = zero ? zero.get("axes") : nullptr;
  auto fail = [&]() {
    return func.emitOpError()
           << "argument #" << argIndex << ": 'nn.zero' must be {block = "
           << "array<i64: ...>, dims = k}: the block before the split, whose "
           << "first k dimensions the argument " << type
           << " keeps, then one chunk of the rest (and axes = [\"dp\", ...]"
           << ", the mesh axes it is a chunk over, where not dp alone)";
  };
  auto names = dyn_cast_or_null<ArrayAttr>(axes);
  if (axes && (!names || names.empty() || !llvm::all_of(names, [](Attribute a) {
        auto s = dyn_cast<StringAttr>(a);
        return s && !s.getValue().empty();
      })))
    return fail();
  if (!block || !dims || zero.size() != (axes ? 3u : 2u) || dims.getInt() < 0 ||
      dims.getInt() > static_cast<int64_t>(block.size()) ||
      type.getRank() != dims.getInt() + 1 ||
      llvm::any_of(block.asArrayRef(), [](int64_t size) { return size < 0; }))
    return fail();
  int64_t k = dims.getInt(), inner = 1;
  for (int64_t d = 0; d < k; ++d)
    if (block[d] != type.getDimSize(d))
      return fail();
  for (int64_t size : block.asArrayRef().drop_front(k))
    if (inner > 0 && size > std::numeric_limits<int64_t>::max() / inner)
      return fail();
    else
      inner *= size;
  int64_t chunk = type.getDimSize(k);
  if (chunk > inner || (inner > 0 && chunk == 0))
    return fail();
  return success();
}

/// nn.loss_count: a unit attribute on one result after a model's loss, a
/// scalar of the loss's type.
static LogicalResult verifyLossCount(Operation *op, unsigned resultIndex,
                                     Attribute value) {
  auto func = dyn_cast<FunctionOpInterface>(op);
  if (!func || !isa<UnitAttr>(value))
    return op->emitOpError() << "result #" << resultIndex << ": '"
                             << NNDialect::kLossCountAttrName
                             << "' is a unit attribute of a function result";
  ArrayRef<Type> results = func.getResultTypes();
  if (resultIndex == 0 || results[resultIndex] != results[0])
    return func.emitOpError()
           << "result #" << resultIndex << ": '"
           << NNDialect::kLossCountAttrName
           << "' marks the count the loss (result #0) sums over, a result "
              "after it of the loss's type "
           << results[0] << ", not " << results[resultIndex];
  for (unsigned i = 1; i < resultIndex; ++i)
    if (func.getResultAttr(i, NNDialect::kLossCountAttrName))
      return func.emitOpError()
             << "results #" << i << " and #" << resultIndex << " are both '"
             << NNDialect::kLossCountAttrName << "': a loss has one count";
  return success();
}

LogicalResult NNDialect::verifyRegionResultAttribute(Operation *op,
                                                     unsigned regionIndex,
                                                     unsigned resultIndex,
                                                     NamedAttribute attr) {
  // The other result attributes (nn.param, nn.grad, nn.state, nn.sharding,
  // ...) are checked by the passes that read them.
  if (attr.getName().getValue() == kLossCountAttrName)
    return verifyLossCount(op, resultIndex, attr.getValue());
  if (attr.getName().getValue() != kInFlightAttrName)
    return success();
  if (!isa<FunctionOpInterface>(op) || !isa<UnitAttr>(attr.getValue()))
    return op->emitOpError()
           << "result #" << resultIndex << ": '" << kInFlightAttrName
           << "' is a unit attribute of a function result";
  return success();
}

LogicalResult NNDialect::verifyRegionArgAttribute(Operation *op,
                                                  unsigned regionIndex,
                                                  unsigned argIndex,
                                                  NamedAttribute attr) {
  auto func = dyn_cast<FunctionOpInterface>(op);
  if (!func)
    return op->emitOpError() << "'" << attr.getName().getValue()
                             << "' is only meaningful on function arguments";
  StringRef attrName = attr.getName().getValue();
  auto type = dyn_cast<RankedTensorType>(func.getArgumentTypes()[argIndex]);
  if (!type)
    return func.emitOpError() << "argument #" << argIndex << " with '"
                              << attrName << "' must be a ranked tensor";
  bool isParam = func.getArgAttr(argIndex, kParamAttrName) != nullptr;
  bool isInput = func.getArgAttr(argIndex, kInputAttrName) != nullptr;
  bool isLabel = func.getArgAttr(argIndex, kLabelAttrName) != nullptr;

  if (attrName == kAxesAttrName)
    return verifyAxes(func, argIndex, attr.getValue(),
                      blockTypeOf(func, argIndex));
  if (attrName == kInitAttrName) {
    if (!isa<InitAttr>(attr.getValue()))
      return func.emitOpError() << "argument #" << argIndex
                                << ": 'nn.init' must be an #nn.init<...>";
    if (!isParam)
      return func.emitOpError() << "argument #" << argIndex
                                << " has 'nn.init' but is not an nn.param";
    return success();
  }
  if (attrName == kParamAttrName || attrName == kInputAttrName ||
      attrName == kLabelAttrName) {
    if (isParam + isInput + isLabel > 1)
      return func.emitOpError()
             << "argument #" << argIndex
             << " can be only one of nn.param, nn.input and nn.label";
    if (attrName == kParamAttrName) {
      if (!isa<FloatType>(type.getElementType()))
        return func.emitOpError() << "parameter argument #" << argIndex
                                  << " must be a float tensor, not " << type;
      if (failed(verifyParamName(func, argIndex, attr.getValue())))
        return failure();
    } else if (!isa<UnitAttr>(attr.getValue())) {
      return func.emitOpError() << "argument #" << argIndex << ": '"
                                << attrName << "' takes no value";
    }
    if (!isTextName(func.getName()))
      return func.emitOpError()
             << "is a model and its name is not valid UTF-8 (the model "
                "description carries it)";
    return verifyReturnsScalarLoss(func);
  }
  if (attrName == kGradAttrName || attrName == kStateAttrName) {
    auto name = dyn_cast<StringAttr>(attr.getValue());
    if (!name || name.getValue().empty() || !isTextName(name.getValue()))
      return func.emitOpError() << "argument #" << argIndex << ": '"
                                << attrName
                                << "' must name a parameter (UTF-8 text)";
    if (!isa<FloatType>(type.getElementType()))
      return func.emitOpError() << "argument #" << argIndex << " with '"
                                << attrName << "' must be a float tensor";
    return success();
  }
  if (attrName == kShardingAttrName)
    return verifySharding(func, "argument #" + std::to_string(argIndex),
                          attr.getValue(), blockTypeOf(func, argIndex));
  if (attrName == kZeroAttrName)
    return verifyZero(func, argIndex, attr.getValue(), type);
  if (attrName == kStageInputAttrName || attrName == kOutputGradAttrName) {
    if (!isa<UnitAttr>(attr.getValue()) || !isa<FloatType>(type.getElementType()))
      return func.emitOpError() << "argument #" << argIndex << ": '" << attrName
                                << "' takes no value and needs a float tensor";
    return success();
  }
  if (attrName == kStashAttrName || attrName == kKeptAttrName) {
    if (!isa<IntegerAttr>(attr.getValue()))
      return func.emitOpError()
             << "argument #" << argIndex << ": '" << attrName << "' must be "
             << (attrName == kStashAttrName ? "the stash index"
                                            : "the kept value's index");
    return success();
  }
  if (attrName == kLayersAttrName) {
    auto range = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    type = blockTypeOf(func, argIndex);
    if (!range || range.size() != 2 || type.getRank() == 0 ||
        range[0] < 0 || range[1] < 1 ||
        range[0] > range[1] - type.getDimSize(0))
      return func.emitOpError()
             << "argument #" << argIndex << ": '" << attrName
             << "' must be [offset, total] with the argument's leading "
                "dimension's rows inside [0, total)";
    return success();
  }
  if (attrName == kPrefetchedAttrName) {
    if (!isa<UnitAttr>(attr.getValue()))
      return func.emitOpError() << "argument #" << argIndex << ": '"
                                << attrName << "' takes no value";
    return success();
  }
  if (attrName == kTiedCopyAttrName) {
    if (!isa<UnitAttr>(attr.getValue()) || !isParam)
      return func.emitOpError() << "argument #" << argIndex << ": '" << attrName
                                << "' takes no value and marks an nn.param";
    // Outside a pipeline nothing else holds the parameter, and the norm
    // would miss its gradient.
    auto module = op->getParentOfType<ModuleOp>();
    if (!module || !module->hasAttr(kStageAttrName))
      return func.emitOpError()
             << "argument #" << argIndex << ": '" << attrName
             << "' marks a pipeline stage's copy of a tied parameter; it "
                "belongs in a stage module (nn.stage)";
    return success();
  }
  if (attrName == kGradScaleAttrName || attrName == kGradSumSquaresAttrName) {
    if (type.getRank() != 0 ||
        !isa<Float32Type, Float64Type>(type.getElementType()))
      return func.emitOpError()
             << "argument #" << argIndex << ": '" << attrName
             << "' must be a tensor<f32> (or tensor<f64> in an f64 model)";
    return success();
  }
  return func.emitOpError()
         << "argument #" << argIndex << ": unknown nn argument attribute '"
         << attrName
         << "' (known: nn.param, nn.init, nn.input, nn.label, nn.axes, "
            "nn.grad, nn.state, nn.grad_scale, nn.grad_sum_squares, "
            "nn.sharding, nn.stage_input, nn.output_grad, nn.layers, "
            "nn.tied_copy, nn.zero, nn.prefetched)";
}

/// The recompute policies of repeated layers (Megatron's full and
/// selective activation recomputation).
static bool isRecomputePolicy(StringRef policy) {
  return policy == "none" || policy == "selective" || policy == "full";
}

LogicalResult NNDialect::verifyOperationAttribute(Operation *op,
                                                  NamedAttribute attr) {
  StringRef attrName = attr.getName().getValue();
  if (attrName == kTrainAttrName) {
    if (!isa<ModuleOp>(op) || !isa<DictionaryAttr>(attr.getValue()))
      return op->emitOpError() << "'" << kTrainAttrName
                               << "' must be a dictionary on a module, e.g. "
                                  "{optimizer = \"adamw\", lr = 3.0e-4}";
    return success();
  }
  if (attrName == kPrecisionAttrName || attrName == kGradPrecisionAttrName) {
    auto precision = dyn_cast<StringAttr>(attr.getValue());
    // The compute type may be f64 (tessel-promote-f64); the gradients'
    // type, recorded only beside bf16, is f32 or bf16.
    bool compute = attrName == kPrecisionAttrName;
    SmallVector<StringRef, 3> allowed = {"f32", "bf16"};
    if (compute)
      allowed.push_back("f64");
    if (!isa<ModuleOp>(op) || !precision ||
        !llvm::is_contained(allowed, precision.getValue()))
      return op->emitOpError() << "'" << attrName << "' must be "
                               << (compute ? "\"f32\", \"bf16\" or \"f64\""
                                           : "\"f32\" or \"bf16\"")
                               << " on a module";
    return success();
  }
  if (attrName == kRecomputeAttrName) {
    auto policy = dyn_cast<StringAttr>(attr.getValue());
    if (!isa<FunctionOpInterface>(op) || !policy ||
        !isRecomputePolicy(policy.getValue()))
      return op->emitOpError() << "'" << kRecomputeAttrName
                               << "' must be \"none\", \"selective\" or "
                                  "\"full\" on a layer function";
    return success();
  }
  if (attrName == kEntryAttrName) {
    auto entry = dyn_cast<StringAttr>(attr.getValue());
    if (!isa<FunctionOpInterface>(op) || !entry ||
        !tessel::entries::isTrainingKind(entry.getValue()))
      return op->emitOpError()
             << "'" << kEntryAttrName << "' must be "
             << tessel::entries::kindList(/*withForward=*/false, "\"")
             << " on a function";
    return success();
  }
  if (attrName == kZeroStageAttrName) {
    auto stage = dyn_cast<IntegerAttr>(attr.getValue());
    if (!isa<ModuleOp>(op) || !stage || stage.getInt() < 0 ||
        stage.getInt() > 3)
      return op->emitOpError() << "'" << kZeroStageAttrName
                               << "' must be a ZeRO stage 0-3 on a module";
    return success();
  }
  if (attrName == kAsyncAttrName) {
    if (!isa<UnitAttr>(attr.getValue()) ||
        !isa<shard::AllReduceOp, shard::AllGatherOp, shard::ReduceScatterOp,
             shard::AllToAllOp>(op))
      return op->emitOpError()
             << "'" << kAsyncAttrName
             << "' is a unit attribute of a shard all_reduce, all_gather, "
                "reduce_scatter or all_to_all";
    return success();
  }
  if (attrName == kPrefetchAttrName || attrName == kFinishAttrName) {
    if (!isa<UnitAttr>(attr.getValue()) || !isa<FunctionOpInterface>(op))
      return op->emitOpError()
             << "'" << attrName << "' is a unit attribute of a function";
    return success();
  }
  if (attrName == kLoopShardingAttrName) {
    if (!isShardingForm(attr.getValue()))
      return op->emitOpError() << "'" << kLoopShardingAttrName
                               << "' must list, per loop, the mesh axes that "
                                  "split it";
    return success();
  }
  if (attrName == kAxisNamesAttrName) {
    auto names = dyn_cast<ArrayAttr>(attr.getValue());
    if (!names || !llvm::all_of(names, llvm::IsaPred<StringAttr>))
      return op->emitOpError() << "'" << kAxisNamesAttrName
                               << "' must be an array of mesh axis names";
    return success();
  }
  if (attrName == kPipelineAttrName || attrName == kStageAttrName ||
      attrName == kSplitBackwardAttrName || attrName == kFirstLayerAttrName ||
      attrName == kKeepActivationsAttrName) {
    if (!isa<ModuleOp, FunctionOpInterface>(op))
      return op->emitOpError() << "'" << attrName
                               << "' belongs on a module or a function";
    return success();
  }
  if (attrName != kLogicalAxesAttrName)
    return op->emitOpError() << "unknown nn attribute '" << attrName
                             << "' on an operation";
  if (!isa<ModuleOp>(op))
    return op->emitOpError() << "'" << kLogicalAxesAttrName
                             << "' belongs on a module";
  auto names = dyn_cast<ArrayAttr>(attr.getValue());
  if (!names || !llvm::all_of(names, [](Attribute name) {
        auto str = dyn_cast<StringAttr>(name);
        return str && !str.getValue().empty() && isTextName(str.getValue());
      }))
    return op->emitOpError() << "'" << kLogicalAxesAttrName
                             << "' must be an array of non-empty UTF-8 "
                                "strings";
  return success();
}
