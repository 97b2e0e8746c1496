//===- Safetensors.cpp - Writing and reading safetensors checkpoints ------===//
//
// The format: an 8-byte little-endian header length N, N bytes of JSON
// mapping each tensor name to {"dtype", "shape", "data_offsets": [begin,
// end]} (offsets into the data that follows the header), then the data.
// Reading one into a model's arena is CheckpointReader.cpp.
//
//===----------------------------------------------------------------------===//

#include "runtime/launcher/Safetensors.h"
#include "runtime/launcher/Error.h"
#include "runtime/launcher/OutputFiles.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <memory>
#include <set>
#include <sys/mman.h>
#include <sys/stat.h>
#include <tuple>
#include <unistd.h>

using namespace tessel::run;
using nlohmann::ordered_json;

const char *tessel::run::safetensorsDtype(int32_t code) {
  switch (code) {
  case TESSEL_F32:
    return "F32";
  case TESSEL_F16:
    return "F16";
  case TESSEL_BF16:
    return "BF16";
  case TESSEL_F64:
    return "F64";
  case TESSEL_I32:
    return "I32";
  case TESSEL_I64:
    return "I64";
  }
  return "?";
}

int32_t tessel::run::safetensorsDtypeCode(const std::string &name) {
  for (int32_t code : {TESSEL_F32, TESSEL_F16, TESSEL_BF16, TESSEL_F64,
                       TESSEL_I32, TESSEL_I64})
    if (name == safetensorsDtype(code))
      return code;
  return -1;
}

namespace {

/// The header JSON, padded with spaces to a multiple of 8 bytes so the data
/// that follows is aligned (as the reference implementation does).
std::string buildHeader(const std::vector<SafetensorsEntry> &entries,
                        const std::map<std::string, std::string> &metadata) {
  ordered_json header;
  header["__metadata__"] = metadata;
  int64_t offset = 0;
  for (const SafetensorsEntry &e : entries) {
    int64_t bytes = product(e.shape) * tessel_dtype_size(e.dtypeCode);
    header[e.name] = {{"dtype", safetensorsDtype(e.dtypeCode)},
                      {"shape", e.shape},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

void writeAll(std::FILE *f, const void *data, size_t size,
              const std::string &path) {
  if (size && std::fwrite(data, 1, size, f) != size)
    throw RunError("cannot write checkpoint '" + path +
                   "': " + std::strerror(errno));
}

} // namespace

void tessel::run::writeSafetensors(
    std::FILE *f, const std::string &path,
    const std::vector<SafetensorsEntry> &entries,
    const std::map<std::string, std::string> &metadata,
    const SafetensorsBytes &bytesOf) {
  std::string header = buildHeader(entries, metadata);
  uint64_t n = header.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i)
    len[i] = static_cast<unsigned char>(n >> (8 * i));
  writeAll(f, len, 8, path);
  writeAll(f, header.data(), header.size(), path);
  std::vector<char> host;
  for (size_t i = 0; i < entries.size(); ++i) {
    bytesOf(i, host);
    int64_t bytes =
        product(entries[i].shape) * tessel_dtype_size(entries[i].dtypeCode);
    if (int64_t(host.size()) != bytes)
      throw RunError("cannot write checkpoint '" + path + "': tensor '" +
                     entries[i].name + "' has " + std::to_string(host.size()) +
                     " bytes, its shape needs " + std::to_string(bytes));
    writeAll(f, host.data(), host.size(), path);
  }
}

namespace {

/// A read-only mapping of a whole file.
class MappedFile {
public:
  explicit MappedFile(const std::string &path) {
    int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0)
      throw RunError("cannot open checkpoint '" + path +
                     "': " + std::strerror(errno));
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      throw RunError("checkpoint '" + path + "' is not a regular file");
    }
    size_ = st.st_size;
    if (size_ > 0) {
      void *p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        ::close(fd);
        throw RunError("cannot map checkpoint '" + path +
                       "': " + std::strerror(errno));
      }
      data_ = static_cast<const char *>(p);
    }
    ::close(fd);
  }
  ~MappedFile() {
    if (data_)
      ::munmap(const_cast<char *>(data_), size_);
  }
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;
  const char *data() const { return data_; }
  uint64_t size() const { return size_; }

private:
  const char *data_ = nullptr;
  uint64_t size_ = 0;
};

uint64_t headerLength(const MappedFile &file) {
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= uint64_t(static_cast<unsigned char>(file.data()[i])) << (8 * i);
  return n;
}

using StoredTensor = SafetensorsFile::Entry;

/// A JSON parser callback refusing a key repeated in one object: nlohmann
/// would silently keep the last one, the format forbids them.
template <typename Fail>
ordered_json::parser_callback_t duplicateKeyCheck(const Fail &fail) {
  auto open = std::make_shared<std::vector<std::set<std::string>>>();
  return [open, fail](int, nlohmann::json::parse_event_t event,
                      ordered_json &parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start)
      open->emplace_back();
    else if (event == Event::object_end && !open->empty())
      open->pop_back();
    else if (event == Event::key && !open->empty() &&
             !open->back().insert(parsed.get<std::string>()).second)
      throw fail("duplicate key '" + parsed.get<std::string>() +
                 "' in the header");
    return true;
  };
}

/// A list of non-negative integers: nlohmann would convert 1.5 to 1 and -1
/// to 2^64 - 1 without a word.
template <typename Fail>
std::vector<int64_t> naturals(const ordered_json &list, const char *field,
                              const std::string &name, const Fail &fail) {
  std::vector<int64_t> out;
  bool ok = list.is_array();
  for (size_t i = 0; ok && i < list.size(); ++i) {
    ok = list[i].is_number_unsigned() &&
         list[i].get<uint64_t>() <= uint64_t(INT64_MAX);
    if (ok)
      out.push_back(list[i].get<int64_t>());
  }
  if (!ok)
    throw fail("tensor '" + name + "' has " + field + " " + list.dump() +
               ", not a list of non-negative integers");
  return out;
}

/// The tensors' byte ranges must tile the data exactly, as the format (and
/// its reference reader) requires: no overlap, no hole, nothing after.
template <typename Fail>
void checkTiling(const std::map<std::string, StoredTensor> &tensors,
                 uint64_t dataSize, const Fail &fail) {
  std::vector<std::pair<const std::string *, const StoredTensor *>> order;
  for (auto &[name, t] : tensors)
    order.push_back({&name, &t});
  std::sort(order.begin(), order.end(), [](auto &a, auto &b) {
    return std::tie(a.second->begin, a.second->end) <
           std::tie(b.second->begin, b.second->end);
  });
  uint64_t next = 0;
  const std::string *previous = nullptr;
  for (auto &[name, t] : order) {
    if (t->begin < next)
      throw fail("tensor '" + *name + "' (data_offsets [" +
                 std::to_string(t->begin) + ", " + std::to_string(t->end) +
                 "]) overlaps tensor '" + *previous + "'");
    if (t->begin > next)
      throw fail("bytes [" + std::to_string(next) + ", " +
                 std::to_string(t->begin) +
                 ") of the data belong to no "
                 "tensor (a hole before '" +
                 *name + "')");
    next = t->end;
    previous = name;
  }
  if (next != dataSize)
    throw fail("the data has " + std::to_string(dataSize) +
               " bytes, its tensors end at byte " + std::to_string(next));
}

/// Parses and bounds-checks the header; the key is the tensor name. The
/// string entries of "__metadata__" go to `metadata`.
std::map<std::string, StoredTensor>
readHeader(const MappedFile &file, const std::string &path,
           std::map<std::string, std::string> &metadata) {
  auto fail = [&](const std::string &problem) -> RunError {
    return RunError("checkpoint '" + path + "': " + problem);
  };
  if (file.size() < 8)
    throw fail("truncated (" + std::to_string(file.size()) +
               " bytes, no room for the header length)");
  uint64_t n = headerLength(file);
  if (n > file.size() - 8)
    throw fail("truncated (header of " + std::to_string(n) +
               " bytes, file has " + std::to_string(file.size()) + ")");
  uint64_t dataSize = file.size() - 8 - n;
  std::map<std::string, StoredTensor> tensors;
  try {
    auto header = ordered_json::parse(file.data() + 8, file.data() + 8 + n,
                                      duplicateKeyCheck(fail));
    if (!header.is_object())
      throw fail("header is not a JSON object");
    for (auto &[name, entry] : header.items()) {
      if (name == "__metadata__") {
        if (entry.is_object())
          for (auto &[key, value] : entry.items())
            if (value.is_string())
              metadata[key] = value.get<std::string>();
        continue;
      }
      StoredTensor t;
      t.dtype = entry.at("dtype").get<std::string>();
      t.shape = naturals(entry.at("shape"), "shape", name, fail);
      std::vector<int64_t> offsets =
          naturals(entry.at("data_offsets"), "data_offsets", name, fail);
      if (offsets.size() != 2 || offsets[0] > offsets[1])
        throw fail("tensor '" + name + "' has bad data_offsets " +
                   entry.at("data_offsets").dump());
      t.begin = offsets[0];
      t.end = offsets[1];
      if (t.end > dataSize)
        throw fail("truncated (tensor '" + name + "' ends at byte " +
                   std::to_string(t.end) + " of " + std::to_string(dataSize) +
                   " data bytes)");
      tensors[name] = t;
    }
  } catch (const nlohmann::json::exception &e) {
    throw fail(std::string("corrupt header: ") + e.what());
  }
  checkTiling(tensors, dataSize, fail);
  return tensors;
}

} // namespace

/// Writes `tensors` (their global shapes; `bytesOf` gives each one's global
/// bytes) to a temporary beside `path`, then renames it over `path`
/// (OutputFiles.h).
static void writeAtomically(
    const std::string &path, const std::vector<const TensorDesc *> &tensors,
    const std::function<void(const TensorDesc &, std::vector<char> &)> &bytesOf,
    const std::map<std::string, std::string> &metadata) {
  std::vector<SafetensorsEntry> entries;
  for (const TensorDesc *t : tensors)
    entries.push_back({t->name, t->dtypeCode, t->globalShape});
  writeFileAtomically(
      path, "checkpoint", [&](std::FILE *f, const std::string &tmp) {
        writeSafetensors(f, tmp, entries, metadata,
                         [&](size_t i, std::vector<char> &host) {
                           bytesOf(*tensors[i], host);
                         });
      });
}

std::vector<const TensorDesc *>
tessel::run::checkpointTensors(const ModelDesc &model, bool withStates) {
  std::vector<const TensorDesc *> out = model.withRole("param");
  if (withStates)
    for (const TensorDesc *t : model.withRole("state"))
      out.push_back(t);
  return out;
}

void tessel::run::writeSafetensorsAtomically(
    const std::string &path, const ModelDesc &model, tessel_ctx *ctx,
    const void *arena, const std::map<std::string, std::string> &metadata,
    bool withStates) {
  writeAtomically(
      path, checkpointTensors(model, withStates),
      [&](const TensorDesc &p, std::vector<char> &host) {
        host.resize(p.bytes);
        tessel_copy_to_host(ctx, host.data(),
                            static_cast<const char *>(arena) + p.offset,
                            p.bytes);
      },
      metadata);
}

void tessel::run::writeSafetensorsAtomically(
    const std::string &path, const ModelDesc &model,
    const std::map<std::string, std::vector<char>> &globalTensors,
    const std::map<std::string, std::string> &metadata, bool withStates) {
  writeAtomically(
      path, checkpointTensors(model, withStates),
      [&](const TensorDesc &p, std::vector<char> &host) {
        auto it = globalTensors.find(p.name);
        if (it == globalTensors.end() ||
            int64_t(it->second.size()) != p.globalBytes())
          throw RunError("cannot write checkpoint '" + path + "': tensor '" +
                         p.name + "' was not gathered");
        host = it->second;
      },
      metadata);
}

struct SafetensorsFile::Mapping {
  explicit Mapping(const std::string &path) : mapped(path) {}
  MappedFile mapped;
};

SafetensorsFile::SafetensorsFile(const std::string &path)
    : mapping(std::make_unique<Mapping>(path)) {
  entries_ = readHeader(mapping->mapped, path, metadata_);
  data_ = mapping->mapped.data() + 8 + headerLength(mapping->mapped);
}

SafetensorsFile::~SafetensorsFile() = default;
