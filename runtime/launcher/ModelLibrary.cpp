//===- ModelLibrary.cpp - Opening a model .so and its entry points --------===//

#include "runtime/launcher/ModelLibrary.h"
#include "runtime/launcher/Pipeline.h"
#include "runtime/launcher/Error.h"

#include <cerrno>
#include <cstring>
#include <dlfcn.h>
#include <elf.h>
#include <fstream>
#include <sys/stat.h>

using namespace tessel::run;
namespace pipeline = tessel::pipeline;

namespace {

/// dlopen maps segments without checking them against the file size, so a
/// truncated .so dies of SIGBUS inside it. Checks first that the file is a
/// 64-bit ELF shared object whose headers and segments lie inside it.
void checkElfSharedObject(const std::string &path, uint64_t fileSize) {
  auto fail = [&](const std::string &problem) {
    throw RunError("model '" + path + "' cannot be loaded: " + problem);
  };
  std::ifstream in(path, std::ios::binary);
  Elf64_Ehdr eh;
  if (!in.read(reinterpret_cast<char *>(&eh), sizeof(eh)) ||
      std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
    fail("not an ELF shared object");
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_type != ET_DYN)
    fail("not a 64-bit ELF shared object");
  auto truncated = [&](uint64_t needed) {
    fail("truncated (" + std::to_string(fileSize) + " bytes, needs " +
         std::to_string(needed) + ")");
  };
  uint64_t phEnd = eh.e_phoff + uint64_t(eh.e_phnum) * eh.e_phentsize;
  if (phEnd > fileSize)
    truncated(phEnd);
  uint64_t shEnd = eh.e_shoff + uint64_t(eh.e_shnum) * eh.e_shentsize;
  if (eh.e_shoff && shEnd > fileSize)
    truncated(shEnd);
  if (eh.e_phentsize != sizeof(Elf64_Phdr))
    fail("bad ELF program header size");
  in.seekg(eh.e_phoff);
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    if (!in.read(reinterpret_cast<char *>(&ph), sizeof(ph)))
      truncated(phEnd);
    if (ph.p_type == PT_LOAD && ph.p_offset + ph.p_filesz > fileSize)
      truncated(ph.p_offset + ph.p_filesz);
  }
}

} // namespace

LoadedModel tessel::run::loadModel(const std::string &path, int dlopenFlags) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    throw RunError("cannot open model '" + path + "': " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    throw RunError("model '" + path + "' is not a regular file");
  checkElfSharedObject(path, st.st_size);
  // Without a slash dlopen would search the library path, not the file.
  std::string dlPath = path.find('/') == std::string::npos ? "./" + path : path;
  LoadedModel model;
  model.handle = ::dlopen(dlPath.c_str(),
                          dlopenFlags ? dlopenFlags : RTLD_NOW | RTLD_LOCAL);
  if (!model.handle)
    throw RunError("model '" + path + "' cannot be loaded: " + ::dlerror());
  using JsonFn = const char *(*)();
  auto jsonFn =
      reinterpret_cast<JsonFn>(::dlsym(model.handle, "tessel_model_json"));
  if (!jsonFn)
    throw RunError("model '" + path +
                   "' is not a Tessel model (no tessel_model_json symbol)");
  const char *text = jsonFn();
  if (!text)
    throw RunError("model '" + path + "': tessel_model_json returned null");
  model.desc = parseModelDescription(text, path);
  // A stage's entry "tessel_forward" is "tessel_s<s>_forward" in the
  // pipeline's shared object (tessel-link-stages).
  auto resolve = [&](const ModelDesc &desc, const std::string &kind,
                     std::optional<int> stage) -> EntryFn {
    auto entry = desc.entries.find(kind);
    if (entry == desc.entries.end())
      return nullptr;
    std::string symbol = stage
                             ? pipeline::stageEntrySymbol(*stage, entry->second)
                             : entry->second;
    auto fn = reinterpret_cast<EntryFn>(::dlsym(model.handle, symbol.c_str()));
    if (!fn)
      throw RunError("model '" + path + "' has no " + kind + " entry symbol '" +
                     symbol + "'");
    return fn;
  };
  if (model.desc.pipeline) {
    for (int s = 0; s < model.desc.pipeline->numStages(); ++s) {
      const ModelDesc &stage = model.desc.pipeline->stages[s];
      model.stages.push_back(
          {resolve(stage, "forward", s), resolve(stage, "backward", s),
           resolve(stage, "update", s), resolve(stage, "backward_input", s),
           resolve(stage, "backward_weight", s), resolve(stage, "grad_norm", s),
           resolve(stage, "backward_no_sync", s),
           resolve(stage, "reduce_grads", s),
           resolve(stage, "backward_weight_no_sync", s),
           resolve(stage, "forward_keep", s)});
    }
    return model;
  }
  // The norm of a whole model is its update's own; only a pipeline's
  // actions keep a forward's activations between calls.
  for (const char *kind : {"grad_norm", "forward_keep"})
    if (model.desc.entries.count(kind))
      throw RunError("model '" + path + "' has a " + kind +
                     " entry but no pipeline: only a pipeline stage's " +
                     (std::string(kind) == "grad_norm"
                          ? "update reads a norm from the launcher"
                          : "actions keep a forward's activations for "
                            "its backward"));
  model.forward = resolve(model.desc, "forward", std::nullopt);
  model.backward = resolve(model.desc, "backward", std::nullopt);
  model.update = resolve(model.desc, "update", std::nullopt);
  model.backwardNoSync = resolve(model.desc, "backward_no_sync", std::nullopt);
  model.reduceGrads = resolve(model.desc, "reduce_grads", std::nullopt);
  return model;
}
