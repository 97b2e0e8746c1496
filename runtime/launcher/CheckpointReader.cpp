//===- CheckpointReader.cpp - A checkpoint read into a model's arena ------===//
//
// A checkpoint (one safetensors file, or a sharded directory) is checked
// against the model as a whole before anything is written: its keys, its
// optimizer state against the run's, and for every tensor the run loads
// the key it comes from, that entry's shape and whether its dtype converts.
// A checkpoint of another precision loads too (Safetensors.h says how):
// the tensor a model's parameter or master copy comes from is chosen here
// once, by key, and load() converts on the host where the dtypes differ.
//
//===----------------------------------------------------------------------===//

#include "runtime/launcher/Error.h"
#include "runtime/launcher/FloatFormats.h"
#include "runtime/launcher/Safetensors.h"
#include "runtime/launcher/ShardedCheckpoint.h"

#include <cerrno>
#include <cstdlib>
#include <set>
#include <sys/stat.h>
#include <utility>

using namespace tessel::run;

namespace {

using StoredTensor = SafetensorsFile::Entry;
using StoredTensors = std::map<std::string, StoredTensor>;

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string joinNames(const std::vector<std::string> &names) {
  std::string s;
  for (const std::string &n : names)
    s += (s.empty() ? "" : ", ") + n;
  return s;
}

/// The "<param>" of a key "<param>.<suffix>" (the key itself without a
/// dot).
std::string parameterOf(const std::string &key) {
  return key.substr(0, key.rfind('.'));
}

/// A key "<param>.<suffix>" of one of the model's parameters: optimizer
/// state (of this model's optimizer or another's), or a master copy.
bool looksLikeState(const std::string &name, const ModelDesc &model) {
  return name.find('.') != std::string::npos && !model.find("param", name) &&
         model.find("param", parameterOf(name));
}

/// A master copy's key ("P.master") of a parameter P of which the model
/// keeps none (a bf16 run's checkpoint in an f32 run): P's values.
bool isForeignMaster(const std::string &name, const ModelDesc &model) {
  size_t dot = name.rfind('.');
  if (dot == std::string::npos)
    return false;
  std::string param = name.substr(0, dot);
  return name == masterKeyOf(param) && model.find("param", param) &&
         !model.masterFor(param);
}

/// Exactly the model's parameter names, plus optimizer-state keys: lists
/// what is missing and extra.
void checkKeys(const StoredTensors &stored, const ModelDesc &model,
               const std::string &path) {
  std::vector<std::string> missing, extra;
  for (const TensorDesc *p : model.withRole("param"))
    if (!stored.count(p->name))
      missing.push_back(p->name);
  for (auto &[name, t] : stored)
    if (!model.find("param", name) && !looksLikeState(name, model))
      extra.push_back(name);
  if (missing.empty() && extra.empty())
    return;
  std::string problem;
  if (!missing.empty())
    problem = "missing parameters " + joinNames(missing);
  if (!extra.empty())
    problem += (problem.empty() ? "" : "; ") + std::string("unexpected keys ") +
               joinNames(extra);
  throw RunError("checkpoint '" + path + "': " + problem);
}

/// A state key of a parameter the model does not train (--freeze): a run
/// that trained it saved it, and a frozen parameter has no state to take it.
bool ofFrozenParameter(const std::string &name, const ModelDesc &model) {
  const TensorDesc *param = model.find("param", parameterOf(name));
  return param && !param->trainable;
}

/// A training run takes the checkpoint's optimizer state only if it is
/// exactly its own optimizer's: resuming Adam moments into SGD (or the
/// reverse) would silently change the run. Master copies are not part of
/// that match: a missing one is its parameter's values (every parameter is
/// in the file), and one the model does not keep gives its parameter. The
/// states of a parameter this run freezes are left unread (`ignored`
/// counts them); a parameter it trains that the checkpoint froze has none,
/// which is missing state.
void checkStateKeys(const StoredTensors &stored, const ModelDesc &model,
                    const std::string &path, int &ignored) {
  std::vector<std::string> missing, extra;
  for (const TensorDesc *t : model.withRole("state"))
    if (!stored.count(t->name) && !t->isMaster())
      missing.push_back(t->name);
  for (auto &[name, t] : stored) {
    if (!looksLikeState(name, model) || model.find("state", name) ||
        isForeignMaster(name, model))
      continue;
    if (ofFrozenParameter(name, model))
      ++ignored;
    else
      extra.push_back(name);
  }
  if (missing.empty() && extra.empty())
    return;
  std::string problem = "optimizer state does not match the model's "
                        "optimizer " +
                        model.train->optimizer;
  if (!missing.empty())
    problem += ": missing " + joinNames(missing);
  if (!extra.empty())
    problem += std::string(missing.empty() ? ": " : "; ") + "unexpected " +
               joinNames(extra);
  // Every missing state is of a parameter without any in the file, while
  // others have theirs: the checkpoint's run froze it (--freeze).
  std::set<std::string> withState;
  for (auto &[name, t] : stored)
    if (looksLikeState(name, model))
      withState.insert(parameterOf(name));
  bool frozenThere = !withState.empty() && extra.empty() &&
                     std::none_of(missing.begin(), missing.end(),
                                  [&](const std::string &state) {
                                    return withState.count(parameterOf(state));
                                  });
  if (frozenThere)
    problem += " (the checkpoint's run froze those parameters: start from "
               "its parameters alone, which an --eval run with --load and "
               "--save writes)";
  throw RunError("checkpoint '" + path + "': " + problem);
}

/// The key tensor `t` of `model` is read from.
std::string sourceKeyOf(const TensorDesc &t, const ModelDesc &model,
                        const StoredTensors &stored, bool withStates) {
  if (t.role == "param")
    return isForeignMaster(masterKeyOf(t.name), model) &&
                   stored.count(masterKeyOf(t.name))
               ? masterKeyOf(t.name)
               : t.name;
  // A master copy the file lacks (or that a run from parameters only does
  // not read) starts as its parameter, as stored.
  if (t.isMaster() && !(withStates && stored.count(t.name)))
    return *t.masterOf;
  return t.name;
}

/// The entry of `key` holds `t`'s global tensor in a dtype the load
/// converts from: the same, or (a parameter or master copy) one
/// canConvertFloats accepts, or (an f64 model's optimizer state, f32 before
/// ABI 18) f32, widened exactly.
void checkSource(const StoredTensor &stored, const std::string &key,
                 const TensorDesc &t, const std::string &path) {
  std::string what =
      (t.role == "param" ? "parameter '" : "state '") + t.name + "'" +
      (key == t.name ? std::string() : " (read from '" + key + "')");
  int32_t code = safetensorsDtypeCode(stored.dtype);
  bool converts = t.role == "param" || t.isMaster() ||
                  (code == TESSEL_F32 && t.dtypeCode == TESSEL_F64);
  if (code != t.dtypeCode &&
      !(converts && code >= 0 && canConvertFloats(code, t.dtypeCode)))
    throw RunError("checkpoint '" + path + "': " + what + " has dtype " +
                   stored.dtype + ", the model expects " +
                   safetensorsDtype(t.dtypeCode));
  if (stored.shape != t.globalShape)
    throw RunError("checkpoint '" + path + "': " + what + " has shape " +
                   shapeString(stored.shape) + ", the model expects " +
                   shapeString(t.globalShape));
  uint64_t bytes = uint64_t(t.globalNumElements() * tessel_dtype_size(code));
  if (stored.end - stored.begin != bytes)
    throw RunError("checkpoint '" + path + "': " + what + " holds " +
                   std::to_string(stored.end - stored.begin) +
                   " bytes, its shape needs " + std::to_string(bytes));
}

int64_t parseStep(const std::map<std::string, std::string> &metadata,
                  const std::string &path) {
  auto it = metadata.find("tessel.step");
  if (it == metadata.end())
    throw RunError("checkpoint '" + path +
                   "': optimizer state without a step count (metadata "
                   "tessel.step)");
  errno = 0;
  char *end = nullptr;
  long long step = std::strtoll(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end != '\0' || errno == ERANGE || step < 0)
    throw RunError("checkpoint '" + path + "': bad tessel.step '" + it->second +
                   "'");
  return step;
}

/// "converted 2 parameters from F32 to BF16; set 2 master copies from the
/// parameters (BF16)": what differed from reading every tensor as stored.
std::string describeConversions(
    const std::vector<const TensorDesc *> &tensors, const StoredTensors &stored,
    const std::map<std::pair<std::string, std::string>, std::string>
        &sources) {
  std::map<std::string, int> counts;
  for (const TensorDesc *t : tensors) {
    const std::string &key = sources.at({t->role, t->name});
    std::string from = stored.at(key).dtype;
    std::string to = safetensorsDtype(t->dtypeCode);
    if (t->isMaster() && key != t->name)
      ++counts["set %d master copies from the parameters (" + from + ")"];
    else if (t->role == "param" && key != t->name)
      ++counts["read %d parameters from their master copies (" + from + ")"];
    else if (from != to)
      ++counts["converted %d " +
               std::string(t->role == "param" ? "parameters" : "states") +
               " from " + from + " to " + to];
  }
  std::string text;
  for (auto &[format, n] : counts) {
    std::string line = format;
    line.replace(line.find("%d"), 2, std::to_string(n));
    text += (text.empty() ? "" : "; ") + line;
  }
  return text;
}

} // namespace

struct CheckpointReader::File {
  // A .safetensors file, mapped; or a sharded checkpoint's tensors
  // assembled on the host.
  std::unique_ptr<SafetensorsFile> single;
  std::vector<char> assembled;
  StoredTensors stored;
  const char *data = nullptr; // where the tensors' data_offsets start
  // (role, name) of each tensor the run loads -> the key it is read from.
  std::map<std::pair<std::string, std::string>, std::string> sources;
};

CheckpointReader::CheckpointReader(const std::string &path,
                                   const ModelDesc &model, bool training)
    : file(std::make_unique<File>()), model(model), training(training) {
  std::map<std::string, std::string> metadata;
  std::unique_ptr<ShardedCheckpoint> sharded;
  // What the errors about the checkpoint's contents name: the file, or a
  // sharded checkpoint's index.
  std::string label = path;
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    sharded = std::make_unique<ShardedCheckpoint>(path);
    label = sharded->indexPath();
    file->stored = sharded->globalEntries();
    metadata = sharded->metadata();
  } else {
    file->single = std::make_unique<SafetensorsFile>(path);
    file->stored = file->single->entries();
    metadata = file->single->metadata();
    file->data = file->single->data();
  }
  checkKeys(file->stored, model, label);
  int ignoredStates = 0;
  bool anyState = false;
  for (auto &[name, t] : file->stored)
    anyState |= looksLikeState(name, model);
  // A checkpoint of a training run has "tessel.step" (even when its
  // optimizer keeps no state); one with neither holds parameters only.
  if (training && (anyState || metadata.count("tessel.step"))) {
    checkStateKeys(file->stored, model, label, ignoredStates);
    loaded.paramsOnly = false;
    loaded.step = parseStep(metadata, label);
  }
  std::vector<const TensorDesc *> needed = tensorsToLoad(model);
  for (const TensorDesc *t : needed) {
    std::string key =
        sourceKeyOf(*t, model, file->stored, !loaded.paramsOnly);
    checkSource(file->stored.at(key), key, *t, label);
    file->sources[{t->role, t->name}] = key;
  }
  loaded.conversions = describeConversions(needed, file->stored, file->sources);
  if (ignoredStates)
    loaded.conversions += (loaded.conversions.empty() ? "" : "; ") +
                          std::string("left ") + std::to_string(ignoredStates) +
                          " optimizer states of frozen parameters unread";
  if (!sharded)
    return;
  // Everything is valid: the global tensors this run reads, each once, one
  // after another on the host.
  std::set<std::string> keys;
  for (auto &[tensor, key] : file->sources)
    keys.insert(key);
  uint64_t total = 0;
  for (const std::string &key : keys) {
    StoredTensor &entry = file->stored.at(key);
    uint64_t bytes = entry.end - entry.begin;
    entry.begin = total;
    total += bytes;
    entry.end = total;
  }
  file->assembled.resize(total);
  for (const std::string &key : keys)
    sharded->assemble(key,
                      file->assembled.data() + file->stored.at(key).begin);
  file->data = file->assembled.data();
}

CheckpointReader::~CheckpointReader() = default;

std::vector<const TensorDesc *>
CheckpointReader::tensorsToLoad(const ModelDesc &layout) const {
  std::vector<const TensorDesc *> out =
      checkpointTensors(layout, !loaded.paramsOnly);
  // Training from parameters only: the states start at zero (zeroStates),
  // the master copies as the parameters.
  if (loaded.paramsOnly && training)
    for (const TensorDesc *t : layout.withRole("state"))
      if (t->isMaster())
        out.push_back(t);
  return out;
}

void CheckpointReader::load(tessel_ctx *ctx, void *arena,
                            const std::vector<int64_t> &coordinates,
                            const ModelDesc *target) const {
  const ModelDesc &layout = target ? *target : model;
  std::vector<char> converted;
  for (const TensorDesc *t : tensorsToLoad(layout)) {
    const StoredTensor &entry =
        file->stored.at(file->sources.at({t->role, t->name}));
    int32_t from = safetensorsDtypeCode(entry.dtype);
    const char *src = file->data + entry.begin;
    char *dst = static_cast<char *>(arena) + t->offset;
    int64_t size = tessel_dtype_size(t->dtypeCode);
    int64_t fromSize = tessel_dtype_size(from);
    forEachRun(blockOf(layout, *t, coordinates),
               [&](int64_t local, int64_t global, int64_t count) {
                 if (from == t->dtypeCode) {
                   tessel_copy_to_device(ctx, dst + local * size,
                                         src + global * size, count * size);
                   return;
                 }
                 // tessel_copy_to_device has read the buffer when it
                 // returns: one buffer serves every run.
                 converted.resize(size_t(count * size));
                 convertFloats(from, src + global * fromSize, t->dtypeCode,
                               converted.data(), count);
                 tessel_copy_to_device(ctx, dst + local * size,
                                       converted.data(), count * size);
               });
  }
  tessel_synchronize(ctx);
}

LoadedCheckpoint tessel::run::loadSafetensors(const std::string &path,
                                              const ModelDesc &model,
                                              tessel_ctx *ctx, void *arena,
                                              bool training) {
  CheckpointReader reader(path, model, training);
  reader.load(ctx, arena);
  return reader.info();
}
