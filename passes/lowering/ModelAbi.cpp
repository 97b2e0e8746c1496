//===- ModelAbi.cpp - the model's arena, entries and description ----------===//
//
// The arena is [params | grads | states | inputs and labels | control |
// outputs | scratch]; every entry is a `void (ctx, arena)` that passes its
// function pointers into it; tessel_model_json() returns the description
// (docs/model-abi.md).
//
//===----------------------------------------------------------------------===//

#include "passes/lowering/ModelAbi.h"

#include "passes/Communication.h"
#include "passes/MemoryPlan.h"
#include "passes/lowering/FunctionLowering.h"
#include "passes/lowering/TensorDescription.h"

#include "dialect/NN/NNOps.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/JSON.h"

using namespace mlir;
namespace json = llvm::json;
using tessel::memory_plan::alignUp;

namespace tessel::lowering {
namespace {

/// The name a function's argument `i` carries in `attrName`, or "".
StringRef nameOf(func::FuncOp func, unsigned i, StringRef attrName) {
  auto name = func.getArgAttrOfType<StringAttr>(i, attrName);
  return name ? name.getValue() : StringRef();
}

/// The name a function's result `i` carries in `attrName`, or "".
StringRef resultNameOf(func::FuncOp func, unsigned i, StringRef attrName) {
  auto name = func.getResultAttrOfType<StringAttr>(i, attrName);
  return name ? name.getValue() : StringRef();
}

/// The nn.sharding of a function's argument `i`, if any.
ArrayAttr argSharding(func::FuncOp func, unsigned i) {
  return func.getArgAttrOfType<ArrayAttr>(i, nn::NNDialect::kShardingAttrName);
}

/// Lays out the arena, emits the entries and the description.
class ModelAbiEmitter {
public:
  ModelAbiEmitter(ModuleOp module, func::FuncOp model, TrainingEntries entries,
                  const std::optional<Mesh> &mesh, RuntimeEmitter &emit,
                  OpBuilder &b)
      : module(module), model(model), entries(entries),
        trained(static_cast<bool>(entries.backward)), mesh(mesh), emit(emit),
        b(b), loc(model.getLoc()) {}

  LogicalResult run(StringRef sourceName);

private:
  // The arena's regions, in order; each returns its {offset, bytes}.
  json::Object placeParams();
  json::Object placeNamed(func::FuncOp func, StringRef attrName, StringRef role,
                          llvm::StringMap<int64_t> &at);
  json::Object placeFeeds();
  json::Object placeControl();
  json::Object placeOutputs();
  json::Object region(int64_t begin) const {
    return json::Object{{"offset", begin}, {"bytes", cursor - begin}};
  }
  /// Appends `tensor` to the description at the cursor, then moves the
  /// cursor past its `bytes`.
  void place(json::Object tensor, int64_t bytes);
  int64_t peakScratchBytes() const;
  /// "f64" when the model's parameters are all f64 (a model written in
  /// f64), else "f32".
  StringRef writtenPrecision();

  /// describeSharding, recording a bad sharding (diagnosed) so that every
  /// one is reported before the lowering fails.
  void addSharding(json::Object &tensor, func::FuncOp func, ArrayAttr sharding,
                   Type type, const Twine &what);

  // Where each argument and result of an entry lives in the arena.
  FailureOr<int64_t> lookup(func::FuncOp func,
                            const llvm::StringMap<int64_t> &at, StringRef name,
                            StringRef what);
  FailureOr<int64_t> argumentAt(func::FuncOp func, unsigned i, unsigned &feed);
  FailureOr<int64_t> resultAt(func::FuncOp func, unsigned i);

  LogicalResult emitEntries();
  LogicalResult emitEntry(func::FuncOp func, StringRef symbol, StringRef role);
  json::Object describeCollectives();
  void emitDescriptionFunction(json::Object description);

  ModuleOp module;
  func::FuncOp model;
  TrainingEntries entries;
  bool trained;
  const std::optional<Mesh> &mesh;
  RuntimeEmitter &emit;
  OpBuilder &b;
  Location loc;

  json::Array tensors;
  int64_t cursor = 0;
  bool badSharding = false;
  llvm::StringMap<int64_t> paramAt, gradAt, stateAt;
  SmallVector<int64_t> feedAt, outputAt, outputGradAt;
  /// A zero-bubble stage: the stash the backward's input part leaves for
  /// its weight part, by index.
  llvm::DenseMap<int64_t, int64_t> stashAt;
  json::Object placeStash();
  /// A stage that keeps its forward's activations: what forward_keep
  /// returns for the backward, by index.
  llvm::DenseMap<int64_t, int64_t> keptAt;
  json::Object placeKept();
  /// Places of `func`'s results marked `attrName` (nn.stash or nn.kept),
  /// described as role `role`, recorded by index in `at`.
  void placeIndexed(func::FuncOp func, StringRef attrName, StringRef role,
                    llvm::DenseMap<int64_t, int64_t> &at);
  /// A value an entry reads or writes by index (nn.stash, nn.kept), if
  /// `index` names one that was placed.
  static std::optional<int64_t>
  indexedAt(IntegerAttr index, const llvm::DenseMap<int64_t, int64_t> &at);
  void addLayers(json::Object &tensor, func::FuncOp func, unsigned i);
  void addZero(json::Object &tensor, func::FuncOp func, unsigned i);
  int64_t gradScaleAt = -1, gradSumSquaresAt = -1, scratchBegin = 0;
  json::Object entryNames;
};

StringRef ModelAbiEmitter::writtenPrecision() {
  bool any = false;
  for (unsigned i = 0, e = model.getNumArguments(); i < e; ++i) {
    if (nameOf(model, i, nn::NNDialect::kParamAttrName).empty())
      continue;
    auto type = dyn_cast<RankedTensorType>(model.getArgumentTypes()[i]);
    if (!type || !type.getElementType().isF64())
      return "f32";
    any = true;
  }
  return any ? "f64" : "f32";
}

LogicalResult ModelAbiEmitter::run(StringRef sourceName) {
  json::Object params = placeParams();
  json::Object grads = placeNamed(entries.backward,
                                  nn::NNDialect::kGradAttrName, "grad", gradAt);
  json::Object states = placeNamed(
      entries.update, nn::NNDialect::kStateAttrName, "state", stateAt);
  json::Object inputs = placeFeeds();
  json::Object control = placeControl();
  json::Object outputs = placeOutputs();
  json::Object stash = placeStash();
  json::Object kept = placeKept();
  if (badSharding)
    return failure();
  int64_t scratchBytes = peakScratchBytes();
  scratchBegin = cursor;
  cursor = memory_plan::addBytes(cursor, scratchBytes);
  // Arguments are placed here, not by the memory plan: their sum is checked
  // here too.
  if (cursor >= memory_plan::kBytesOverflow)
    return model.emitOpError()
           << "needs an arena (arguments, outputs and scratch) that does not "
              "fit in int64 bytes";
  json::Object scratch = region(scratchBegin);
  if (failed(emitEntries()))
    return failure();

  json::Object regions{
      {"params", std::move(params)},   {"grads", std::move(grads)},
      {"states", std::move(states)},   {"inputs", std::move(inputs)},
      {"control", std::move(control)}, {"outputs", std::move(outputs)},
      {"stash", std::move(stash)},     {"kept", std::move(kept)},
      {"scratch", std::move(scratch)}};
  json::Object description{
      {"abi_version", TESSEL_ABI_VERSION},
      // A path may be any bytes; the JSON string must be UTF-8.
      {"source", json::fixUTF8(sourceName)},
      {"function", model.getSymName().str()}, {"entry", "tessel_forward"},
      {"entries", std::move(entryNames)},     {"arena_bytes", cursor},
      {"peak_bytes", scratchBytes},           {"regions", std::move(regions)},
      {"tensors", std::move(tensors)}};
  if (mesh) {
    description["mesh"] = json::Object{{"axes", json::Array(mesh->axes)},
                                       {"shape", json::Array(mesh->shape)}};
    description["collectives"] = describeCollectives();
  }
  // A pipeline stage's module inherits its pipeline's precision; without
  // one, the model computes in the type it was written in.
  description["precision"] = writtenPrecision();
  for (Operation *op = module; op; op = op->getParentOp())
    if (auto precision =
            op->getAttrOfType<StringAttr>(nn::NNDialect::kPrecisionAttrName)) {
      description["precision"] = precision.str();
      break;
    }
  // The ZeRO stage the training state was sharded with (tessel-zero).
  if (auto stage = module->getAttrOfType<IntegerAttr>(
          nn::NNDialect::kZeroStageAttrName))
    description["zero_stage"] = stage.getInt();
  if (auto train =
          module->getAttrOfType<DictionaryAttr>(nn::NNDialect::kTrainAttrName);
      train && trained)
    description["train"] = describeTrain(train);
  emitDescriptionFunction(std::move(description));
  return success();
}

void ModelAbiEmitter::place(json::Object tensor, int64_t bytes) {
  tensors.push_back(std::move(tensor));
  cursor = memory_plan::addBytes(cursor, alignUp(bytes));
}

int64_t ModelAbiEmitter::peakScratchBytes() const {
  SmallVector<func::FuncOp> functions{model};
  if (trained)
    functions.append({entries.backward, entries.update});
  if (trained)
    for (auto [part, kind] : entries.optionalParts())
      functions.push_back(part);
  int64_t bytes = 0;
  for (func::FuncOp func : functions)
    bytes = std::max(
        bytes, func->getAttrOfType<IntegerAttr>(memory_plan::kScratchBytesAttr)
                   .getInt());
  return bytes;
}

/// The weight decay each parameter's optimizer step applies (its group), by
/// parameter name: the steps of the update entry that update an argument.
llvm::StringMap<double> weightDecayByParam(func::FuncOp update) {
  llvm::StringMap<double> decay;
  update.walk([&](nn::OptimizerStepOp step) {
    auto param = dyn_cast<BlockArgument>(step.getParam());
    if (!param || param.getOwner()->getParentOp() != update)
      return;
    StringRef name =
        nameOf(update, param.getArgNumber(), nn::NNDialect::kParamAttrName);
    if (!name.empty())
      decay[name] = step.getWeightDecay().convertToDouble();
  });
  return decay;
}

/// The master-weight states of the update entry's optimizer steps (mixed
/// precision), by state name: the parameter each is the master copy of. A
/// state is named after its parameter ("w.master"); under ZeRO the step
/// updates a chunk of the parameter, so the name, not the operand, says
/// which.
llvm::StringMap<std::string> masterOfByState(func::FuncOp update) {
  llvm::StringMap<std::string> masterOf;
  update.walk([&](nn::OptimizerStepOp step) {
    auto master = dyn_cast_or_null<BlockArgument>(step.getMasterWeights());
    if (!master || master.getOwner()->getParentOp() != update)
      return;
    StringRef state =
        nameOf(update, master.getArgNumber(), nn::NNDialect::kStateAttrName);
    if (state.contains('.'))
      masterOf[state] = state.rsplit('.').first.str();
  });
  return masterOf;
}

/// Parameters, by name; a trained model says which have a gradient, and
/// the weight decay of each one's step.
json::Object ModelAbiEmitter::placeParams() {
  llvm::StringSet<> trainedNames;
  llvm::StringMap<double> weightDecay;
  if (trained) {
    for (unsigned i = 0, e = entries.backward.getNumArguments(); i < e; ++i)
      if (StringRef name =
              nameOf(entries.backward, i, nn::NNDialect::kGradAttrName);
          !name.empty())
        trainedNames.insert(name);
    weightDecay = weightDecayByParam(entries.update);
  }
  int64_t begin = cursor;
  for (unsigned i = 0, e = model.getNumArguments(); i < e; ++i) {
    StringRef name = nameOf(model, i, nn::NNDialect::kParamAttrName);
    if (name.empty())
      continue;
    Type type = model.getArgumentTypes()[i];
    json::Object tensor = describeTensor(name, "param", type, cursor);
    tensor["init"] = describeInit(
        model.getArgAttrOfType<nn::InitAttr>(i, nn::NNDialect::kInitAttrName));
    tensor["axes"] = describeAxes(model, i);
    if (trained)
      tensor["trainable"] = trainedNames.contains(name);
    if (auto decay = weightDecay.find(name);
        decay != weightDecay.end() && trainedNames.contains(name))
      tensor["weight_decay"] = decay->second;
    addSharding(tensor, model, argSharding(model, i),
                nn::NNDialect::blockTypeOf(model, i), "argument #" + Twine(i));
    addZero(tensor, model, i);
    addLayers(tensor, model, i);
    paramAt[name] = cursor;
    place(std::move(tensor), bytesOf(model.getArgument(i)));
  }
  return region(begin);
}

/// The arguments of `func` named by `attrName` (the gradients, the
/// optimizer's states), by name.
json::Object ModelAbiEmitter::placeNamed(func::FuncOp func, StringRef attrName,
                                         StringRef role,
                                         llvm::StringMap<int64_t> &at) {
  int64_t begin = cursor;
  llvm::StringMap<std::string> masterOf;
  if (func && role == "state")
    masterOf = masterOfByState(func);
  if (func)
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
      StringRef name = nameOf(func, i, attrName);
      if (name.empty())
        continue;
      Type type = func.getArgumentTypes()[i];
      json::Object tensor = describeTensor(name, role, type, cursor);
      tensor["axes"] = describeAxes(func, i);
      if (auto master = masterOf.find(name); master != masterOf.end())
        tensor["master_of"] = master->second;
      addSharding(tensor, func, argSharding(func, i),
                  nn::NNDialect::blockTypeOf(func, i), "argument #" + Twine(i));
      addZero(tensor, func, i);
      addLayers(tensor, func, i);
      at[name] = cursor;
      place(std::move(tensor), bytesOf(func.getArgument(i)));
    }
  return region(begin);
}

/// Inputs and labels, in the model's order (every entry that reads them
/// lists them in that order).
json::Object ModelAbiEmitter::placeFeeds() {
  int64_t begin = cursor, numInputs = 0, numLabels = 0, numStage = 0;
  for (unsigned i = 0, e = model.getNumArguments(); i < e; ++i) {
    if (model.getArgAttr(i, nn::NNDialect::kParamAttrName))
      continue;
    bool isLabel =
        model.getArgAttr(i, nn::NNDialect::kLabelAttrName) != nullptr;
    bool isStageInput =
        model.getArgAttr(i, nn::NNDialect::kStageInputAttrName) != nullptr;
    std::string name = isStageInput ? "stage_input" + std::to_string(numStage++)
                       : isLabel    ? "label" + std::to_string(numLabels++)
                                    : "input" + std::to_string(numInputs++);
    Type type = model.getArgumentTypes()[i];
    json::Object tensor = describeTensor(
        name, isStageInput ? "stage_input" : isLabel ? "label" : "input", type,
        cursor);
    tensor["axes"] = describeAxes(model, i);
    if (std::optional<int64_t> limit = valueLimit(model.getArgument(i), mesh))
      tensor["limit"] = *limit;
    if (std::optional<int64_t> ignore = valueIgnoreIndex(model.getArgument(i)))
      tensor["ignore_index"] = *ignore;
    addSharding(tensor, model, argSharding(model, i), type,
                "argument #" + Twine(i));
    feedAt.push_back(cursor);
    place(std::move(tensor), bytesOf(model.getArgument(i)));
  }
  // A pipeline stage's backward receives the gradient of its outputs.
  if (trained)
    for (unsigned i = 0, e = entries.backward.getNumArguments(); i < e; ++i) {
      if (!entries.backward.getArgAttr(i, nn::NNDialect::kOutputGradAttrName))
        continue;
      Type type = entries.backward.getArgumentTypes()[i];
      json::Object tensor = describeTensor(
          "output_grad" + std::to_string(outputGradAt.size()), "output_grad",
          type, cursor);
      addSharding(tensor, entries.backward, argSharding(entries.backward, i),
                  type, "argument #" + Twine(i));
      outputGradAt.push_back(cursor);
      place(std::move(tensor), bytesOf(entries.backward.getArgument(i)));
    }
  return region(begin);
}

/// A stage's slice of a stacked parameter (or of its gradient or state,
/// which carry its nn.layers): the global tensor has `total` rows, the
/// slice starts at `offset`.
void ModelAbiEmitter::addLayers(json::Object &tensor, func::FuncOp func,
                                unsigned i) {
  auto rows =
      func.getArgAttrOfType<DenseI64ArrayAttr>(i, nn::NNDialect::kLayersAttrName);
  if (!rows)
    return;
  tensor["layers"] = json::Array{rows[0], rows[1]};
  if (json::Array *global = tensor.getArray("global_shape"))
    if (!global->empty())
      (*global)[0] = rows[1];
}

/// A ZeRO chunk (tessel-zero): the block it is cut from, the leading
/// dimensions kept whole, and the axes that split the rest (dp, where the
/// attribute names none).
void ModelAbiEmitter::addZero(json::Object &tensor, func::FuncOp func,
                              unsigned i) {
  auto zero =
      func.getArgAttrOfType<DictionaryAttr>(i, nn::NNDialect::kZeroAttrName);
  if (!zero)
    return;
  auto block = cast<DenseI64ArrayAttr>(zero.get("block"));
  json::Array axes;
  if (auto named = dyn_cast_or_null<ArrayAttr>(zero.get("axes")))
    for (auto axis : named.getAsValueRange<StringAttr>())
      axes.push_back(axis.str());
  else
    axes.push_back(kDataAxisName.str());
  tensor["zero"] =
      json::Object{{"axes", std::move(axes)},
                   {"dims", cast<IntegerAttr>(zero.get("dims")).getInt()},
                   {"block", json::Array(block.asArrayRef())}};
}

/// Control scalars the launcher writes: the gradient scale, and on a
/// clipping pipeline stage the pipeline's gradient sum of squares (its
/// grad_norm entry writes the stage's there; the launcher the sum). Each
/// of the update argument's type: f32, or f64 in an f64 model.
json::Object ModelAbiEmitter::placeControl() {
  int64_t begin = cursor;
  auto placeScalar = [&](StringRef name, StringRef attr, StringRef what) {
    Type scalar = RankedTensorType::get({}, b.getF32Type());
    for (unsigned i = 0, e = entries.update.getNumArguments(); i < e; ++i)
      if (entries.update.getArgAttr(i, attr))
        scalar = entries.update.getArgumentTypes()[i];
    json::Object tensor = describeTensor(name, name, scalar, cursor);
    addSharding(tensor, model, ArrayAttr(), scalar, what);
    int64_t at = cursor;
    place(std::move(tensor), nn::detail::tensorBytes(scalar));
    return at;
  };
  if (trained)
    gradScaleAt = placeScalar("grad_scale", nn::NNDialect::kGradScaleAttrName,
                              "the gradient scale");
  if (trained && entries.gradNorm)
    gradSumSquaresAt =
        placeScalar("grad_sum_squares", nn::NNDialect::kGradSumSquaresAttrName,
                    "the gradient sum of squares");
  return region(begin);
}

/// The model's results, the loss first.
json::Object ModelAbiEmitter::placeOutputs() {
  int64_t begin = cursor;
  bool stage = nn::NNDialect::returnsStageOutputs(model);
  for (auto [i, type] : llvm::enumerate(model.getResultTypes())) {
    StringRef role = stage    ? "stage_output"
                     : i == 0 ? "loss"
                     : model.getResultAttr(i, nn::NNDialect::kLossCountAttrName)
                         ? "loss_count"
                         : "output";
    std::string name = role.str();
    if (role == "stage_output" || role == "output")
      name += std::to_string(i);
    json::Object tensor = describeTensor(name, role, type, cursor);
    addSharding(tensor, model,
                model.getResultAttrOfType<ArrayAttr>(
                    i, nn::NNDialect::kShardingAttrName),
                type, "result #" + Twine(i));
    outputAt.push_back(cursor);
    place(std::move(tensor), nn::detail::tensorBytes(type));
  }
  // A pipeline stage's backward returns the gradient of its inputs next.
  if (trained)
    for (unsigned i = 0, e = entries.backward.getNumResults(); i < e; ++i) {
      if (!entries.backward.getResultAttr(i, nn::NNDialect::kInputGradAttrName))
        continue;
      Type type = entries.backward.getResultTypes()[i];
      unsigned k = outputAt.size() - model.getNumResults();
      json::Object tensor = describeTensor("input_grad" + std::to_string(k),
                                           "input_grad", type, cursor);
      addSharding(tensor, entries.backward,
                  entries.backward.getResultAttrOfType<ArrayAttr>(
                      i, nn::NNDialect::kShardingAttrName),
                  type, "result #" + Twine(i));
      outputAt.push_back(cursor);
      place(std::move(tensor), nn::detail::tensorBytes(type));
    }
  return region(begin);
}

void ModelAbiEmitter::placeIndexed(func::FuncOp func, StringRef attrName,
                                   StringRef role,
                                   llvm::DenseMap<int64_t, int64_t> &at) {
  if (!func)
    return;
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
    auto index = func.getResultAttrOfType<IntegerAttr>(i, attrName);
    if (!index)
      continue;
    Type type = func.getResultTypes()[i];
    json::Object tensor = describeTensor((role + Twine(index.getInt())).str(),
                                         role, type, cursor);
    addSharding(tensor, func, ArrayAttr(), type, "result #" + Twine(i));
    at[index.getInt()] = cursor;
    place(std::move(tensor), nn::detail::tensorBytes(type));
  }
}

std::optional<int64_t>
ModelAbiEmitter::indexedAt(IntegerAttr index,
                           const llvm::DenseMap<int64_t, int64_t> &at) {
  if (!index)
    return std::nullopt;
  auto it = at.find(index.getInt());
  if (it == at.end())
    return std::nullopt;
  return it->second;
}

/// The values a zero-bubble stage's backward input part returns for its
/// weight part (nn.stash = k), in index order.
json::Object ModelAbiEmitter::placeStash() {
  int64_t begin = cursor;
  placeIndexed(entries.backwardInput, nn::NNDialect::kStashAttrName, "stash",
               stashAt);
  return region(begin);
}

/// The values a stage's forward_keep returns for its backward (nn.kept =
/// k), in index order.
json::Object ModelAbiEmitter::placeKept() {
  int64_t begin = cursor;
  placeIndexed(entries.forwardKeep, nn::NNDialect::kKeptAttrName, "kept",
               keptAt);
  return region(begin);
}

void ModelAbiEmitter::addSharding(json::Object &tensor, func::FuncOp func,
                                  ArrayAttr sharding, Type type,
                                  const Twine &what) {
  if (failed(describeSharding(tensor, func, sharding, type, what, mesh)))
    badSharding = true;
}

FailureOr<int64_t> ModelAbiEmitter::lookup(func::FuncOp func,
                                           const llvm::StringMap<int64_t> &at,
                                           StringRef name, StringRef what) {
  auto it = at.find(name);
  if (it == at.end())
    return func.emitOpError() << "names " << what << " '" << name
                              << "', which the model does not have";
  return it->second;
}

/// Argument `i` of an entry function: a named parameter, gradient or state,
/// the gradient scale, or the next input or label (`feed` counts them).
FailureOr<int64_t> ModelAbiEmitter::argumentAt(func::FuncOp func, unsigned i,
                                               unsigned &feed) {
  if (StringRef name = nameOf(func, i, nn::NNDialect::kParamAttrName);
      !name.empty())
    return lookup(func, paramAt, name, "parameter");
  if (StringRef name = nameOf(func, i, nn::NNDialect::kGradAttrName);
      !name.empty())
    return lookup(func, gradAt, name, "gradient");
  if (StringRef name = nameOf(func, i, nn::NNDialect::kStateAttrName);
      !name.empty())
    return lookup(func, stateAt, name, "optimizer state");
  if (func.getArgAttr(i, nn::NNDialect::kGradScaleAttrName))
    return gradScaleAt;
  if (func.getArgAttr(i, nn::NNDialect::kGradSumSquaresAttrName) &&
      gradSumSquaresAt >= 0)
    return gradSumSquaresAt;
  if (std::optional<int64_t> at = indexedAt(
          func.getArgAttrOfType<IntegerAttr>(i, nn::NNDialect::kStashAttrName),
          stashAt))
    return *at;
  if (std::optional<int64_t> at = indexedAt(
          func.getArgAttrOfType<IntegerAttr>(i, nn::NNDialect::kKeptAttrName),
          keptAt))
    return *at;
  if ((func.getArgAttr(i, nn::NNDialect::kInputAttrName) ||
       func.getArgAttr(i, nn::NNDialect::kLabelAttrName) ||
       func.getArgAttr(i, nn::NNDialect::kStageInputAttrName)) &&
      feed < feedAt.size())
    return feedAt[feed++];
  if (func.getArgAttr(i, nn::NNDialect::kOutputGradAttrName)) {
    unsigned k = 0;
    for (unsigned j = 0; j < i; ++j)
      k += func.getArgAttr(j, nn::NNDialect::kOutputGradAttrName) != nullptr;
    if (k < outputGradAt.size())
      return outputGradAt[k];
  }
  return func.emitOpError()
         << "argument #" << i << " has no place in the model's arena";
}

/// Result `i` of an entry function: a named parameter, gradient or state
/// (updated in place), a stash or kept value, the gradient of the stage's
/// input k (the k-th so marked), or the model's output `i`.
FailureOr<int64_t> ModelAbiEmitter::resultAt(func::FuncOp func, unsigned i) {
  if (std::optional<int64_t> at =
          indexedAt(func.getResultAttrOfType<IntegerAttr>(
                        i, nn::NNDialect::kStashAttrName),
                    stashAt))
    return *at;
  if (std::optional<int64_t> at =
          indexedAt(func.getResultAttrOfType<IntegerAttr>(
                        i, nn::NNDialect::kKeptAttrName),
                    keptAt))
    return *at;
  // A backward that keeps its forward returns no loss or outputs before
  // its input gradients.
  if (func.getResultAttr(i, nn::NNDialect::kInputGradAttrName)) {
    unsigned k = 0;
    for (unsigned j = 0; j < i; ++j)
      k += func.getResultAttr(j, nn::NNDialect::kInputGradAttrName) != nullptr;
    if (model.getNumResults() + k < outputAt.size())
      return outputAt[model.getNumResults() + k];
  }
  if (StringRef name = resultNameOf(func, i, nn::NNDialect::kParamAttrName);
      !name.empty())
    return lookup(func, paramAt, name, "parameter");
  if (StringRef name = resultNameOf(func, i, nn::NNDialect::kGradAttrName);
      !name.empty())
    return lookup(func, gradAt, name, "gradient");
  if (StringRef name = resultNameOf(func, i, nn::NNDialect::kStateAttrName);
      !name.empty())
    return lookup(func, stateAt, name, "optimizer state");
  if (func.getResultAttr(i, nn::NNDialect::kGradSumSquaresAttrName) &&
      gradSumSquaresAt >= 0)
    return gradSumSquaresAt;
  if (i < outputAt.size())
    return outputAt[i];
  return func.emitOpError()
         << "result #" << i << " has no place in the model's arena";
}

LogicalResult ModelAbiEmitter::emitEntries() {
  if (failed(emitEntry(model, "tessel_forward", "forward")))
    return failure();
  if (trained &&
      (failed(emitEntry(entries.backward, "tessel_backward", "backward")) ||
       failed(emitEntry(entries.update, "tessel_update", "update"))))
    return failure();
  if (trained)
    for (auto [part, kind] : entries.optionalParts())
      if (failed(emitEntry(part, ("tessel_" + kind).str(), kind)))
        return failure();
  return success();
}

/// `void symbol(ctx, arena)`: calls the lowered `func` on its places in the
/// arena.
LogicalResult ModelAbiEmitter::emitEntry(func::FuncOp func, StringRef symbol,
                                         StringRef role) {
  Type ptr = emit.ptr();
  b.setInsertionPointToEnd(module.getBody());
  auto wrapper = LLVM::LLVMFuncOp::create(
      b, loc, symbol,
      LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(b.getContext()),
                                  {ptr, ptr}));
  Block *entry = wrapper.addEntryBlock(b);
  b.setInsertionPointToStart(entry);
  Value arena = entry->getArgument(1);
  SmallVector<Value> args{entry->getArgument(0),
                          emit.offset(b, loc, arena, scratchBegin)};
  unsigned feed = 0;
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
    FailureOr<int64_t> offset = argumentAt(func, i, feed);
    if (failed(offset))
      return failure();
    args.push_back(emit.offset(b, loc, arena, *offset));
  }
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
    FailureOr<int64_t> offset = resultAt(func, i);
    if (failed(offset))
      return failure();
    args.push_back(emit.offset(b, loc, arena, *offset));
  }
  LLVM::CallOp::create(b, loc, TypeRange{},
                       FlatSymbolRefAttr::get(b.getStringAttr(
                           (kFunctionPrefix + func.getSymName()).str())),
                       args);
  LLVM::ReturnOp::create(b, loc, ValueRange{});
  entryNames[role.str()] = symbol.str();
  return success();
}

/// What one call of each entry communicates: the launcher's counters after
/// a step equal backward × microbatches + update.
json::Object ModelAbiEmitter::describeCollectives() {
  json::Object collectives;
  auto count = [&](StringRef role, func::FuncOp func) {
    json::Array list;
    for (const communication::Traffic &traffic :
         communication::countCollectives(func, *mesh)) {
      json::Array axes;
      for (int16_t axis : communication::axesOfMask(traffic.axes))
        axes.push_back(mesh->axes[axis]);
      json::Object entry{
          {"kind", communication::collectiveName(traffic.kind).str()},
          {"axes", std::move(axes)},
          {"calls", traffic.calls},
          {"bytes", traffic.bytes}};
      // Only where some of it overlaps compute (absent: 0, as before ABI 5).
      if (traffic.asyncBytes > 0)
        entry["async_bytes"] = traffic.asyncBytes;
      if (traffic.overlappedBytes > 0)
        entry["overlapped_bytes"] = traffic.overlappedBytes;
      list.push_back(std::move(entry));
    }
    collectives[role.str()] = std::move(list);
  };
  count("forward", model);
  if (trained) {
    count("backward", entries.backward);
    count("update", entries.update);
  }
  if (trained)
    for (auto [part, kind] : entries.optionalParts())
      count(kind, part);
  return collectives;
}

/// tessel_model_json(): the description, NUL-terminated.
void ModelAbiEmitter::emitDescriptionFunction(json::Object description) {
  std::string text;
  llvm::raw_string_ostream(text) << json::Value(std::move(description));
  text.push_back('\0');
  b.setInsertionPointToEnd(module.getBody());
  auto describeFn = LLVM::LLVMFuncOp::create(
      b, loc, "tessel_model_json", LLVM::LLVMFunctionType::get(emit.ptr(), {}));
  Block *entry = describeFn.addEntryBlock(b);
  b.setInsertionPointToStart(entry);
  Value global = LLVM::createGlobalString(loc, b, "__tessel_model_json", text,
                                          LLVM::Linkage::Private);
  LLVM::ReturnOp::create(b, loc, global);
}

} // namespace

LogicalResult emitModelAbi(ModuleOp module, func::FuncOp model,
                           TrainingEntries entries, StringRef sourceName,
                           RuntimeEmitter &emit, OpBuilder &b) {
  // A partitioned model: its mesh, and per tensor the global shape and the
  // axes that split it (the arena holds the local shard).
  FailureOr<std::optional<Mesh>> mesh = meshFromModule(module);
  if (failed(mesh))
    return failure();
  return ModelAbiEmitter(module, model, entries, *mesh, emit, b)
      .run(sourceName);
}

} // namespace tessel::lowering
