//===- ModelDescription.cpp - A compiled model's JSON description ---------===//

#include "runtime/launcher/ModelDescription.h"
#include "runtime/config/EntryKinds.h"
#include "runtime/launcher/Error.h"
#include "runtime/launcher/Pipeline.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <set>

using namespace tessel;
using namespace tessel::run;
using nlohmann::json;

int64_t TensorDesc::numElements() const { return product(shape); }

int64_t TensorDesc::globalNumElements() const { return product(globalShape); }

int64_t TensorDesc::globalBytes() const {
  return globalNumElements() * tessel_dtype_size(dtypeCode);
}

bool TensorDesc::isInteger() const {
  return dtypeCode == TESSEL_I32 || dtypeCode == TESSEL_I64;
}

std::vector<const TensorDesc *>
ModelDesc::withRole(const std::string &role) const {
  std::vector<const TensorDesc *> out;
  for (const TensorDesc &t : tensors)
    if (t.role == role)
      out.push_back(&t);
  return out;
}

std::vector<const TensorDesc *> ModelDesc::feeds() const {
  std::vector<const TensorDesc *> out = withRole("input");
  for (const TensorDesc *t : withRole("label"))
    out.push_back(t);
  return out;
}

const TensorDesc &ModelDesc::loss() const { return *withRole("loss").front(); }

const TensorDesc *ModelDesc::lossCount() const {
  std::vector<const TensorDesc *> counts = withRole("loss_count");
  return counts.empty() ? nullptr : counts.front();
}

const TensorDesc *ModelDesc::find(const std::string &role,
                                  const std::string &name) const {
  for (const TensorDesc &t : tensors)
    if (t.role == role && t.name == name)
      return &t;
  return nullptr;
}

const TensorDesc *ModelDesc::gradOf(const std::string &name) const {
  return find("grad", name);
}

const TensorDesc *ModelDesc::masterFor(const std::string &name) const {
  for (const TensorDesc &t : tensors)
    if (t.role == "state" && t.masterOf == name)
      return &t;
  return nullptr;
}

std::string tessel::run::masterKeyOf(const std::string &param) {
  return param + ".master";
}

bool ModelDesc::trains() const {
  return entries.count("backward") && entries.count("update");
}

bool ModelDesc::reducesGradientsOnce(int64_t microbatches) const {
  // parseEntries checks that the no-sync twins come with it.
  return microbatches > 1 && entries.count("reduce_grads");
}

int64_t ModelDesc::batchSize() const {
  std::vector<const TensorDesc *> inputs = withRole("input");
  if (inputs.empty() || inputs.front()->shape.empty())
    return 1;
  const TensorDesc &first = *inputs.front();
  for (size_t d = 0; d < first.axes.size() && d < first.shape.size(); ++d)
    if (first.axes[d] == "batch")
      return first.shape[d];
  return first.shape[0];
}

double tessel::run::lrAt(const TrainConfig &train, int64_t step) {
  int32_t kind = train.schedule == "warmup_cosine" ? TESSEL_LR_WARMUP_COSINE
                                                   : TESSEL_LR_CONSTANT;
  return tessel_lr_at(kind, train.lr, train.minLr, train.warmup,
                      train.totalSteps, step + 1);
}

int32_t tessel::run::dtypeCodeOf(const std::string &dtype) {
  static const std::pair<const char *, int32_t> codes[] = {
      {"f32", TESSEL_F32}, {"f16", TESSEL_F16}, {"bf16", TESSEL_BF16},
      {"f64", TESSEL_F64}, {"i32", TESSEL_I32}, {"i64", TESSEL_I64}};
  for (auto &[name, code] : codes)
    if (dtype == name)
      return code;
  return -1;
}

namespace {

int32_t initKindOf(const std::string &kind) {
  static const std::pair<const char *, int32_t> kinds[] = {
      {"zeros", TESSEL_INIT_ZEROS},
      {"ones", TESSEL_INIT_ONES},
      {"constant", TESSEL_INIT_CONSTANT},
      {"normal", TESSEL_INIT_NORMAL},
      {"truncated_normal", TESSEL_INIT_TRUNCATED_NORMAL},
      {"uniform", TESSEL_INIT_UNIFORM}};
  for (auto &[name, code] : kinds)
    if (kind == name)
      return code;
  return -1;
}

// ABI v2 adds training (entries, grads, states, grad_scale, "train"); v1
// models load as eval-only. v3 adds the mesh; v4 bf16 parameters with f32
// master copies ("master_of") and gradients of another dtype.
constexpr int64_t newestModelAbi = TESSEL_ABI_VERSION;

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Every malformed description ends here, so all such errors read alike.
[[noreturn]] void failDescription(const std::string &file,
                                  const std::string &problem) {
  throw RunError("model '" + file + "': bad description: " + problem);
}

/// A tensor's "sharding" and "global_shape" against the model's mesh:
/// every split names mesh axes (each axis once per tensor) and the global
/// dimension is the block's times the product of their sizes (the block:
/// `shape`, or a ZeRO tensor's "block").
template <typename Fail>
void parseSharding(const json &j, TensorDesc &t, const ModelDesc &model,
                   Fail fail) {
  const std::vector<int64_t> &block = t.blockShape();
  if (j.contains("sharding")) {
    if (!model.mesh)
      fail("\"sharding\" but the model has no \"mesh\"");
    t.sharding = j.at("sharding").get<std::vector<std::vector<std::string>>>();
    if (t.sharding.size() != block.size())
      fail("\"sharding\" has " + std::to_string(t.sharding.size()) +
           " dimensions, its " + (t.zero ? "block " : "shape ") +
           std::to_string(block.size()));
    std::set<std::string> used;
    bool split = false;
    for (const std::vector<std::string> &axes : t.sharding)
      for (const std::string &axis : axes) {
        if (!model.mesh->axisIndex(axis))
          fail("\"sharding\" names axis '" + axis + "', not one of mesh " +
               model.mesh->toString());
        if (!used.insert(axis).second)
          fail("\"sharding\" splits over axis '" + axis + "' twice");
        split = true;
      }
    if (!split)
      t.sharding.clear();
  }
  if (t.zero)
    for (const std::vector<std::string> &axes : t.sharding)
      for (const std::string &axis : axes)
        if (std::find(t.zero->axes.begin(), t.zero->axes.end(), axis) !=
            t.zero->axes.end())
          fail("\"zero\" axis '" + axis + "' also splits it in \"sharding\"");
  std::vector<int64_t> expected = block;
  for (size_t d = 0; d < t.sharding.size(); ++d)
    for (const std::string &axis : t.sharding[d])
      expected[d] *= model.mesh->shape[axisOf(*model.mesh, axis)];
  // A pipeline stage's rows of a stacked tensor: "layers": [offset, total].
  if (j.contains("layers")) {
    std::vector<int64_t> rows = j.at("layers").get<std::vector<int64_t>>();
    if (rows.size() != 2 || block.empty() || rows[0] < 0 ||
        rows[1] < block[0] || rows[0] > rows[1] - block[0])
      fail("\"layers\" must be [offset, total] with its rows inside [0, "
           "total)");
    if (!t.sharding.empty() && !t.sharding[0].empty())
      fail("\"layers\" rows cannot also be split over the mesh");
    t.layers = TensorDesc::LayerRows{rows[0], rows[1]};
    expected[0] = rows[1];
  }
  t.globalShape = j.contains("global_shape")
                      ? j.at("global_shape").get<std::vector<int64_t>>()
                      : expected;
  if (t.globalShape != expected)
    fail("\"global_shape\" " + shapeText(t.globalShape) + " is not its " +
         (t.zero ? "block " : "shape ") + shapeText(block) +
         " times its splits " + shapeText(expected));
}

/// A ZeRO tensor's "zero": {"axes", "dims", "block"} against the mesh, and
/// its stored `shape` against the chunk the block and the axes make.
template <typename Fail>
void parseZero(const json &j, TensorDesc &t, const ModelDesc &model,
               Fail fail) {
  if (!j.is_object())
    fail("\"zero\" must be an object {\"axes\", \"dims\", \"block\"}");
  if (t.role != "param" && t.role != "grad" && t.role != "state")
    fail("\"zero\" on a " + t.role +
         " tensor (only parameters, gradients and states are ZeRO-sharded)");
  if (!model.mesh)
    fail("\"zero\" but the model has no \"mesh\"");
  ZeroShard zero;
  zero.axes = j.at("axes").get<std::vector<std::string>>();
  zero.dims = j.at("dims").get<int64_t>();
  zero.block = j.at("block").get<std::vector<int64_t>>();
  if (zero.axes.empty())
    fail("\"zero\" names no axis");
  std::set<std::string> used;
  int64_t groupSize = 1;
  for (const std::string &axis : zero.axes) {
    std::optional<int> a = model.mesh->axisIndex(axis);
    if (!a)
      fail("\"zero\" names axis '" + axis + "', not one of mesh " +
           model.mesh->toString());
    if (!used.insert(axis).second)
      fail("\"zero\" names axis '" + axis + "' twice");
    groupSize *= model.mesh->shape[*a];
  }
  for (int64_t d : zero.block)
    if (d < 0)
      fail("\"zero\": negative dimension in \"block\"");
  if (zero.dims < 0 || zero.dims > int64_t(zero.block.size()))
    fail("\"zero\": \"dims\" " + std::to_string(zero.dims) + " outside [0, " +
         std::to_string(zero.block.size()) + "] (the block's rank)");
  std::vector<int64_t> expected(zero.block.begin(),
                                zero.block.begin() + zero.dims);
  int64_t inner = 1;
  for (size_t d = size_t(zero.dims); d < zero.block.size(); ++d)
    if (__builtin_mul_overflow(inner, zero.block[d], &inner))
      fail("\"zero\": the block is too large");
  expected.push_back((inner + groupSize - 1) / groupSize);
  if (t.shape != expected)
    fail("shape " + shapeText(t.shape) + " is not the ZeRO chunk " +
         shapeText(expected) + " of block " + shapeText(zero.block) +
         " (dims " + std::to_string(zero.dims) + ": " + std::to_string(inner) +
         " elements per row over " + std::to_string(groupSize) + " ranks)");
  t.zero = std::move(zero);
}

TensorDesc parseTensor(const json &j, const ModelDesc &model,
                       const std::string &prefix) {
  TensorDesc t;
  t.name = j.at("name").get<std::string>();
  auto fail = [&](const std::string &problem) {
    throw RunError(prefix + "tensor '" + t.name + "': " + problem);
  };
  t.role = j.at("role").get<std::string>();
  static const std::set<std::string> roles = {
      "param",       "grad",       "state",  "input",       "label",
      "loss",        "grad_scale", "output", "stage_input", "stage_output",
      "output_grad", "input_grad", "stash",  "kept",        "grad_sum_squares",
      "loss_count"};
  if (!roles.count(t.role))
    fail("unknown role '" + t.role + "'");
  t.dtype = j.at("dtype").get<std::string>();
  t.dtypeCode = dtypeCodeOf(t.dtype);
  if (t.dtypeCode < 0)
    fail("unknown dtype '" + t.dtype + "'");
  t.shape = j.at("shape").get<std::vector<int64_t>>();
  for (int64_t d : t.shape)
    if (d < 0)
      fail("negative dimension");
  if (j.contains("axes"))
    t.axes = j.at("axes").get<std::vector<std::string>>();
  t.offset = j.at("offset").get<int64_t>();
  t.bytes = j.at("bytes").get<int64_t>();
  if (t.bytes != t.numElements() * tessel_dtype_size(t.dtypeCode))
    fail("bytes " + std::to_string(t.bytes) + " do not match its shape");
  if (t.offset < 0 || t.offset + t.bytes > model.arenaBytes)
    fail("lies outside the arena");
  if (t.role == "param")
    t.trainable = j.value("trainable", true);
  if (t.role == "param" && j.contains("weight_decay")) {
    const json &decay = j.at("weight_decay");
    if (!decay.is_number() || !(decay.get<double>() >= 0))
      fail("\"weight_decay\" must be a number >= 0, got " + decay.dump());
    t.weightDecay = decay.get<double>();
  }
  if (t.role == "param" && j.contains("init")) {
    const json &init = j.at("init");
    std::string kind = init.at("kind").get<std::string>();
    t.initKind = initKindOf(kind);
    if (t.initKind < 0)
      fail("unknown init kind '" + kind + "'");
    std::vector<double> args = init.value("args", std::vector<double>{});
    for (size_t i = 0; i < args.size() && i < 2; ++i)
      t.initArgs[i] = args[i];
  }
  if (j.contains("limit"))
    t.limit = j.at("limit").get<int64_t>();
  if (j.contains("ignore_index")) {
    if ((t.role != "label" && t.role != "input") || !t.isInteger())
      fail("has \"ignore_index\" but its role is " + t.role +
           " and its dtype " + t.dtype +
           " (only an integer input or label, a loss's labels, has one)");
    t.ignoreIndex = j.at("ignore_index").get<int64_t>();
  }
  if (j.contains("master_of")) {
    if (t.role != "state")
      fail("\"master_of\" on a " + t.role +
           " tensor (only an optimizer state is a master copy)");
    if (!j.at("master_of").is_string())
      fail("\"master_of\" must name a parameter, got " +
           j.at("master_of").dump());
    t.masterOf = j.at("master_of").get<std::string>();
  }
  if (j.contains("zero"))
    parseZero(j.at("zero"), t, model, fail);
  parseSharding(j, t, model, fail);
  return t;
}

/// "mesh": {"axes": [...], "shape": [...]}, the same rules as --mesh.
Mesh parseModelMesh(const json &j, const std::string &file) {
  Mesh mesh;
  mesh.axes = j.at("axes").get<std::vector<std::string>>();
  mesh.shape = j.at("shape").get<std::vector<int64_t>>();
  if (mesh.axes.size() != mesh.shape.size() || mesh.axes.empty())
    failDescription(file, "\"mesh\" needs one size per axis");
  try {
    return parseMesh(mesh.toString(), "\"mesh\"");
  } catch (const UsageError &e) {
    failDescription(file, e.what());
  }
}

/// "collectives": {"backward": [{"kind", "axes", "calls", "bytes",
/// "async_bytes"}, ...]} (async_bytes from ABI 5; absent, 0).
void parseCollectives(const json &j, ModelDesc &model,
                      const std::string &file) {
  static const std::set<std::string> kinds = {"all_reduce", "all_gather",
                                              "reduce_scatter", "all_to_all"};
  if (!model.mesh)
    failDescription(file, "\"collectives\" but the model has no \"mesh\"");
  for (auto &[entry, list] : j.items()) {
    if (!model.entries.count(entry))
      failDescription(file, "\"collectives\" of entry '" + entry +
                                "', which the model does not have");
    std::vector<CommCount> &counts = model.collectives[entry];
    for (const json &c : list) {
      CommCount count;
      count.kind = c.at("kind").get<std::string>();
      if (!kinds.count(count.kind))
        failDescription(file,
                        "\"collectives\": unknown kind '" + count.kind + "'");
      auto axes = c.at("axes").get<std::vector<std::string>>();
      for (const std::string &axis : axes)
        if (!model.mesh->axisIndex(axis))
          failDescription(file, "\"collectives\": axis '" + axis +
                                    "' is not one of mesh " +
                                    model.mesh->toString());
      count.axes = model.mesh->axesOf(axesMaskOf(*model.mesh, axes));
      count.calls = c.at("calls").get<int64_t>();
      count.bytes = c.at("bytes").get<int64_t>();
      count.asyncBytes = c.value("async_bytes", int64_t(0));
      count.overlappedBytes = c.value("overlapped_bytes", count.asyncBytes);
      if (count.calls < 0 || count.bytes < 0)
        failDescription(file, "\"collectives\": negative calls or bytes");
      if (count.asyncBytes < 0 || count.asyncBytes > count.bytes)
        failDescription(file, "\"collectives\": async_bytes outside 0 .. "
                              "bytes");
      if (count.overlappedBytes < 0 || count.overlappedBytes > count.asyncBytes)
        failDescription(file, "\"collectives\": overlapped_bytes outside 0 "
                              ".. async_bytes");
      counts.push_back(count);
    }
  }
}

/// The description's "train": every setting TrainSettings.def lists that it
/// has, checked as tessel-compile checks it (a missing one keeps its
/// default).
TrainConfig parseTrainConfig(const json &j, const std::string &file) {
  auto fail = [&](const std::string &problem) {
    failDescription(file, "\"train\": " + problem);
  };
  if (!j.is_object())
    fail("not an object");
  TrainConfig c;
  for (const TrainSetting &setting : trainSettings()) {
    if (!j.contains(setting.key))
      continue;
    const json &value = j.at(setting.key);
    std::string text;
    if (value.is_string() && setting.isText())
      text = value.get<std::string>();
    else if (value.is_boolean() && setting.kind == TrainSettingKind::Switch)
      text = value.get<bool>() ? "true" : "false";
    else if (value.is_number_integer() &&
             setting.kind == TrainSettingKind::Count)
      text = std::to_string(value.get<int64_t>());
    else if (value.is_number() && !setting.isText() &&
             setting.kind != TrainSettingKind::Switch &&
             setting.kind != TrainSettingKind::Count)
      text = formatNumber(value.get<double>());
    else
      fail("'" + std::string(setting.key) + "' must be " + setting.expected() +
           ", got " + value.dump());
    if (std::optional<TrainSettingProblem> problem = c.set(setting, text))
      fail(problem->unknownChoice
               ? "unknown " + std::string(setting.flag) + " '" + text +
                     "' (expected " + problem->expected + ")"
               : "'" + std::string(setting.key) + "' must be " +
                     problem->expected + ", got " + text);
  }
  c.resolveDefaults();
  return c;
}

/// Entry symbols: ABI v2's "entries", or v1's single "entry" (the forward).
void parseEntries(const json &j, ModelDesc &model, const std::string &file) {
  if (j.contains("entries")) {
    for (auto &[kind, symbol] : j.at("entries").items()) {
      if (!tessel::entries::isEntryKind(kind))
        failDescription(
            file, "unknown entry kind '" + kind + "' (expected " +
                      tessel::entries::kindList(/*withForward=*/true, "") +
                      ")");
      model.entries[kind] = symbol.get<std::string>();
    }
  }
  if (!model.entries.count("forward")) {
    if (!j.contains("entry"))
      failDescription(file, "no forward entry (neither \"entries\" nor "
                            "\"entry\" names one)");
    model.entries["forward"] = j.at("entry").get<std::string>();
  }
  // Each entry that accumulates gradients has its no-sync twin, or none.
  auto has = [&](const char *kind) { return model.entries.count(kind) != 0; };
  if (has("reduce_grads") !=
          (has("backward_no_sync") || has("backward_weight_no_sync")) ||
      (has("reduce_grads") &&
       (has("backward") != has("backward_no_sync") ||
        has("backward_weight") != has("backward_weight_no_sync"))))
    failDescription(file, "backward_no_sync and reduce_grads entries come "
                          "together, beside a backward entry (and "
                          "backward_weight_no_sync beside a backward_weight)");
  if (has("forward_keep") && !has("backward"))
    failDescription(file, "a forward_keep entry without a backward entry to "
                          "read what it keeps");
  if (model.entries.count("backward") != model.entries.count("update"))
    failDescription(
        file,
        std::string("a ") +
            (model.entries.count("backward") ? "backward" : "update") +
            " entry without " +
            (model.entries.count("backward") ? "an update" : "a backward") +
            " entry");
}

bool isHalfWidth(int32_t dtype) {
  return dtype == TESSEL_BF16 || dtype == TESSEL_F16;
}

/// A master copy ("master_of", ABI v4): the f32 copy, named
/// masterKeyOf(P), of a trainable bf16/f16 parameter P of the same global
/// shape, at most one per parameter. Its block, sharding and layers are
/// checked with the other states'.
template <typename Fail>
void validateMaster(const ModelDesc &model, const TensorDesc &t,
                    std::set<std::string> &mastered, Fail fail) {
  const std::string &name = *t.masterOf;
  const TensorDesc *p = model.find("param", name);
  if (!p)
    fail("\"master_of\" names '" + name + "', not a parameter of the model");
  if (!p->trainable)
    fail("\"master_of\" names parameter '" + name +
         "', which is not trainable");
  if (!isHalfWidth(p->dtypeCode))
    fail("\"master_of\" names parameter '" + name + "' of dtype " + p->dtype +
         " (only a bf16 or f16 parameter has a master copy)");
  if (t.dtypeCode != TESSEL_F32)
    fail("a master copy must be f32, not " + t.dtype);
  if (!mastered.insert(name).second)
    fail("a second master copy of parameter '" + name + "'");
  if (t.name != masterKeyOf(name))
    fail("the master copy of '" + name + "' must be named '" +
         masterKeyOf(name) + "' (its checkpoint key)");
  if (t.globalShape != p->globalShape)
    fail("global shape " + shapeText(t.globalShape) +
         " differs from its parameter's " + shapeText(p->globalShape));
}

/// The tensors a training step adds: a grad per trainable parameter, the
/// optimizer's states (and a bf16 parameter's master copy), one f32
/// grad_scale, all where the "regions" say.
void validateTraining(const ModelDesc &model, const std::string &file) {
  if (!model.train)
    failDescription(file, "backward and update entries but no \"train\"");
  std::set<std::string> seen;
  for (const TensorDesc *g : model.withRole("grad")) {
    auto fail = [&](const std::string &problem) {
      failDescription(file, "grad '" + g->name + "': " + problem);
    };
    const TensorDesc *p = model.find("param", g->name);
    if (!p)
      fail("no parameter of that name");
    if (!p->trainable)
      fail("its parameter is not trainable");
    // A ZeRO-sharded grad (or parameter) stores a chunk: the blocks match.
    if (g->blockShape() != p->blockShape())
      fail("shape differs from its parameter's");
    // A bf16/f16 parameter may accumulate its gradient in f32
    // (--grad-precision f32).
    if (g->dtypeCode != p->dtypeCode &&
        !(g->dtypeCode == TESSEL_F32 && isHalfWidth(p->dtypeCode)))
      fail("dtype " + g->dtype + " is not its parameter's " + p->dtype +
           " (only a bf16 or f16 parameter's gradient may be f32)");
    if (!seen.insert(g->name).second)
      fail("appears twice");
  }
  // A parameter's weight decay is its group's: 0 when a no_decay pattern
  // names it, else the configured one (allowing for a printer that rounds).
  for (const TensorDesc *p : model.withRole("param")) {
    if (!p->weightDecay)
      continue;
    auto fail = [&](const std::string &problem) {
      failDescription(file, "param '" + p->name + "': " + problem);
    };
    if (!p->trainable)
      fail("\"weight_decay\" on a parameter that is not trainable");
    double expected = model.train->weightDecayOf(p->name);
    if (std::fabs(*p->weightDecay - expected) >
        1e-9 * std::max(std::fabs(*p->weightDecay), std::fabs(expected)))
      fail("\"weight_decay\" " + formatNumber(*p->weightDecay) +
           " is not its group's " + formatNumber(expected) + " (\"train\": " +
           (model.train->noDecay.empty()
                ? std::string("no no_decay pattern")
                : "no_decay '" + model.train->noDecay + "'") +
           ", weight_decay " + formatNumber(model.train->weightDecay) + ")");
  }
  std::vector<std::string> suffixes = model.train->stateNames();
  std::set<std::string> expected;
  for (const TensorDesc *p : model.withRole("param")) {
    if (!p->trainable)
      continue;
    if (!model.gradOf(p->name))
      failDescription(file,
                      "trainable parameter '" + p->name + "' has no grad");
    for (const std::string &suffix : suffixes)
      expected.insert(p->name + "." + suffix);
  }
  std::set<std::string> states;
  for (const TensorDesc *t : model.withRole("state")) {
    auto fail = [&](const std::string &problem) {
      failDescription(file, "state '" + t->name + "': " + problem);
    };
    // A master copy is checked by validateRoles.
    if (!t->masterOf && !expected.count(t->name))
      fail("not a state of optimizer " + model.train->optimizer +
           " of a trainable parameter");
    if (!states.insert(t->name).second)
      fail("appears twice");
    const TensorDesc *p = model.find(
        "param", t->masterOf ? *t->masterOf
                             : t->name.substr(0, t->name.rfind('.')));
    // f32; an f64 parameter's own states are f64 from ABI 18 on.
    int32_t dtype =
        !t->masterOf && p->dtypeCode == TESSEL_F64 && model.abiVersion >= 18
            ? TESSEL_F64
            : TESSEL_F32;
    if (t->dtypeCode != dtype || t->blockShape() != p->blockShape())
      fail(std::string("must be ") + (dtype == TESSEL_F64 ? "f64" : "f32") +
           " with its parameter's shape");
    // A checkpoint holds states as global tensors, split as their
    // parameters.
    if (t->sharding != p->sharding)
      fail("sharding differs from its parameter's");
  }
  for (const std::string &name : expected)
    if (!states.count(name))
      failDescription(file, "optimizer " + model.train->optimizer +
                                " needs state '" + name +
                                "', the description has none");
  // The update's scalars: f32, or f64 in an f64 model (ABI 18).
  auto isUpdateScalar = [&](const TensorDesc *t) {
    return (t->dtypeCode == TESSEL_F32 ||
            (t->dtypeCode == TESSEL_F64 && model.abiVersion >= 18)) &&
           t->numElements() == 1;
  };
  std::vector<const TensorDesc *> scales = model.withRole("grad_scale");
  if (scales.size() != 1 || !isUpdateScalar(scales[0]))
    failDescription(file, "expected one f32 (or f64) scalar grad_scale "
                          "tensor, found " +
                              std::to_string(scales.size()));
  // A clipping pipeline stage: its grad_norm entry writes the stage's sum
  // of squares where its update reads the pipeline's.
  std::vector<const TensorDesc *> norms = model.withRole("grad_sum_squares");
  bool hasEntry = model.entries.count("grad_norm") != 0;
  bool oneScalar = norms.size() == 1 && isUpdateScalar(norms[0]);
  if (hasEntry ? !oneScalar : !norms.empty())
    failDescription(file, "a grad_norm entry and one f32 (or f64) scalar "
                          "grad_sum_squares tensor come together (found " +
                              std::to_string(hasEntry ? 1 : 0) + " entries, " +
                              std::to_string(norms.size()) + " tensors)");
  if (auto grads = model.regions.find("grads"); grads != model.regions.end())
    for (const TensorDesc *g : model.withRole("grad"))
      if (g->offset < grads->second.offset ||
          g->offset + g->bytes > grads->second.offset + grads->second.bytes)
        failDescription(file, "grad '" + g->name +
                                  "' lies outside the \"grads\" region");
}

void validateRoles(const ModelDesc &model, const std::string &file) {
  std::vector<const TensorDesc *> losses = model.withRole("loss");
  // A pipeline stage before the last returns activations, not a loss.
  bool stageBeforeLast =
      losses.empty() && !model.withRole("stage_output").empty();
  if (losses.size() != 1 && !stageBeforeLast)
    failDescription(file, "expected one loss tensor, found " +
                              std::to_string(losses.size()));
  if (!losses.empty() &&
      (losses.front()->numElements() != 1 || losses.front()->isInteger()))
    failDescription(file, "the loss must be one float value");
  // A count the launcher adds exactly: f32 or f64, as the loss is.
  std::vector<const TensorDesc *> counts = model.withRole("loss_count");
  if (!counts.empty() &&
      (model.abiVersion < 22 || counts.size() != 1 || losses.size() != 1 ||
       counts.front()->dtypeCode != losses.front()->dtypeCode ||
       (counts.front()->dtypeCode != TESSEL_F32 &&
        counts.front()->dtypeCode != TESSEL_F64) ||
       counts.front()->numElements() != 1))
    failDescription(file, "a loss_count (ABI 22) is one f32 or f64 value of "
                          "the loss's dtype beside one loss; found " +
                              std::to_string(counts.size()) + " beside " +
                              std::to_string(losses.size()) + " loss(es)");
  // Parameter names are the checkpoint's keys.
  std::set<std::string> names;
  for (const TensorDesc *p : model.withRole("param"))
    if (!names.insert(p->name).second)
      failDescription(file, "two parameters named '" + p->name + "'");
  // Master copies in any model: initParams and the checkpoint reader
  // follow "master_of" to its parameter.
  std::set<std::string> mastered;
  for (const TensorDesc *t : model.withRole("state"))
    if (t->masterOf)
      validateMaster(model, *t, mastered, [&](const std::string &problem) {
        failDescription(file, "state '" + t->name + "': " + problem);
      });
  // Kept activations are forward_keep's, for the backward.
  if (!model.withRole("kept").empty() && !model.entries.count("forward_keep"))
    failDescription(file, "kept tensors without a forward_keep entry to "
                          "write them");
  if (model.trains())
    validateTraining(model, file);
}

} // namespace

ModelDesc tessel::run::parseModelDescription(const std::string &text,
                                             const std::string &file) {
  ModelDesc model;
  try {
    json j = json::parse(text);
    // The version first: a newer description may change everything else.
    model.abiVersion = j.at("abi_version").get<int64_t>();
    if (model.abiVersion < 1 || model.abiVersion > newestModelAbi)
      throw RunError("model '" + file + "' has ABI version " +
                     std::to_string(model.abiVersion) +
                     ", this tessel-run supports 1 to " +
                     std::to_string(newestModelAbi));
    if (j.contains("pipeline"))
      return parsePipelineDescription(j, file);
    model.source = j.value("source", "");
    model.function = j.value("function", "");
    model.precision = j.value("precision", "f32");
    parseEntries(j, model, file);
    model.arenaBytes = j.at("arena_bytes").get<int64_t>();
    model.peakBytes = j.value("peak_bytes", int64_t(0));
    if (j.contains("regions"))
      for (auto &[name, r] : j.at("regions").items()) {
        Region region{r.at("offset").get<int64_t>(),
                      r.at("bytes").get<int64_t>()};
        if (region.offset < 0 || region.bytes < 0 ||
            region.offset + region.bytes > model.arenaBytes)
          failDescription(file, "region '" + name + "' lies outside the arena");
        model.regions[name] = region;
      }
    if (j.contains("train"))
      model.train = parseTrainConfig(j.at("train"), file);
    if (j.contains("mesh"))
      model.mesh = parseModelMesh(j.at("mesh"), file);
    for (const json &t : j.at("tensors"))
      model.tensors.push_back(
          parseTensor(t, model, "model '" + file + "': bad description: "));
    if (j.contains("collectives"))
      parseCollectives(j.at("collectives"), model, file);
  } catch (const json::exception &e) {
    failDescription(file, e.what());
  }
  validateRoles(model, file);
  return model;
}

int64_t tessel::run::tokensPerStep(const ModelDesc &desc) {
  std::vector<const TensorDesc *> inputs = desc.withRole("input");
  if (inputs.empty() || inputs.front()->shape.empty())
    return 1;
  const TensorDesc &first = *inputs.front();
  // Token ids [B, S], or any input whose second axis is the sequence.
  bool sequence = first.shape.size() >= 2 &&
                  ((first.isInteger() && first.shape.size() == 2) ||
                   (first.axes.size() >= 2 && first.axes[1] == "seq"));
  return sequence ? first.shape[0] * first.shape[1] : first.shape[0];
}

TensorDesc tessel::run::parseTensorDescription(const std::string &entry,
                                               const ModelDesc &model,
                                               const std::string &prefix) {
  try {
    return parseTensor(json::parse(entry), model, prefix);
  } catch (const json::exception &e) {
    throw RunError(prefix + e.what());
  }
}

TensorBlock tessel::run::blockOf(const ModelDesc &model, const TensorDesc &t,
                                 const std::vector<int64_t> &coordinates) {
  TensorBlock block;
  bool needsCoordinates = model.mesh && (t.isSharded() || t.zero);
  if (needsCoordinates && coordinates.size() != model.mesh->axes.size())
    throw RunError("tensor '" + t.name + "' is split over mesh " +
                   model.mesh->toString() +
                   ": its block needs the rank's coordinates");
  if (!model.mesh || !t.isSharded())
    block = blockOf(t.blockShape(), {}, Mesh{}, {});
  else
    block = blockOf(t.blockShape(), t.sharding, *model.mesh, coordinates);
  // A pipeline stage holds rows [offset, offset + block[0]) of the layers.
  if (t.layers) {
    block.globalShape[0] = t.layers->total;
    block.start[0] += t.layers->offset;
  }
  if (model.mesh && t.zero)
    setZeroChunk(block, t.zero->dims,
                 blockIndex(t.zero->axes, *model.mesh, coordinates),
                 groupSizeOf(t.zero->axes, *model.mesh));
  return block;
}

ModelDesc tessel::run::globalFeedView(const ModelDesc &model) {
  ModelDesc view;
  view.abiVersion = model.abiVersion;
  view.source = model.source;
  view.function = model.function;
  int64_t offset = 0;
  for (const TensorDesc *t : model.feeds()) {
    TensorDesc g = *t;
    g.shape = t->globalShape;
    g.sharding.clear();
    g.zero.reset();
    g.bytes = t->globalBytes();
    g.offset = offset;
    offset += (g.bytes + 63) / 64 * 64;
    view.tensors.push_back(g);
  }
  view.arenaBytes = offset;
  return view;
}
