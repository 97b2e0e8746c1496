//===- Safetensors.cpp - Writing and reading safetensors checkpoints ------===//
//
// The format: an 8-byte little-endian header length N, N bytes of JSON
// mapping each tensor name to {"dtype", "shape", "data_offsets": [begin,
// end]} (offsets into the data that follows the header), then the data.
//
//===----------------------------------------------------------------------===//

#include "Safetensors.h"
#include "Error.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace tessel::run;
using nlohmann::ordered_json;

namespace {

const char *safetensorsDtype(int32_t code) {
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

/// The header JSON, padded with spaces to a multiple of 8 bytes so the data
/// that follows is aligned (as the reference implementation does).
std::string buildHeader(const ModelDesc &model,
                        const std::map<std::string, std::string> &metadata) {
  ordered_json header;
  header["__metadata__"] = metadata;
  int64_t offset = 0;
  for (const TensorDesc *p : model.withRole("param")) {
    header[p->name] = {{"dtype", safetensorsDtype(p->dtypeCode)},
                       {"shape", p->shape},
                       {"data_offsets", {offset, offset + p->bytes}}};
    offset += p->bytes;
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

void writeCheckpointFile(std::FILE *f, const std::string &path,
                         const ModelDesc &model, tessel_ctx *ctx,
                         const void *arena, const std::string &header) {
  uint64_t n = header.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i)
    len[i] = static_cast<unsigned char>(n >> (8 * i));
  writeAll(f, len, 8, path);
  writeAll(f, header.data(), header.size(), path);
  std::vector<char> host;
  for (const TensorDesc *p : model.withRole("param")) {
    host.resize(p->bytes);
    tessel_copy_to_host(ctx, host.data(),
                        static_cast<const char *>(arena) + p->offset, p->bytes);
    writeAll(f, host.data(), host.size(), path);
  }
  if (std::fflush(f) != 0 || ::fsync(::fileno(f)) != 0)
    throw RunError("cannot write checkpoint '" + path +
                   "': " + std::strerror(errno));
}

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

struct StoredTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

/// Parses and bounds-checks the header; the key is the tensor name.
std::map<std::string, StoredTensor> readHeader(const MappedFile &file,
                                               const std::string &path) {
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
    auto header = ordered_json::parse(file.data() + 8, file.data() + 8 + n);
    if (!header.is_object())
      throw fail("header is not a JSON object");
    for (auto &[name, entry] : header.items()) {
      if (name == "__metadata__")
        continue;
      StoredTensor t;
      t.dtype = entry.at("dtype").get<std::string>();
      t.shape = entry.at("shape").get<std::vector<int64_t>>();
      auto offsets = entry.at("data_offsets").get<std::vector<uint64_t>>();
      if (offsets.size() != 2 || offsets[0] > offsets[1])
        throw fail("tensor '" + name + "' has bad data_offsets");
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
  return tensors;
}

/// Exactly the model's parameter names: lists what is missing and extra.
void checkKeys(const std::map<std::string, StoredTensor> &stored,
               const ModelDesc &model, const std::string &path) {
  std::vector<std::string> missing, extra;
  std::map<std::string, bool> isParam;
  for (const TensorDesc *p : model.withRole("param")) {
    isParam[p->name] = true;
    if (!stored.count(p->name))
      missing.push_back(p->name);
  }
  for (auto &[name, t] : stored)
    if (!isParam.count(name))
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

void checkDtypesAndShapes(const std::map<std::string, StoredTensor> &stored,
                          const ModelDesc &model, const std::string &path) {
  for (const TensorDesc *p : model.withRole("param")) {
    const StoredTensor &t = stored.at(p->name);
    std::string want = safetensorsDtype(p->dtypeCode);
    if (t.dtype != want)
      throw RunError("checkpoint '" + path + "': parameter '" + p->name +
                     "' has dtype " + t.dtype + ", the model expects " + want);
    if (t.shape != p->shape)
      throw RunError("checkpoint '" + path + "': parameter '" + p->name +
                     "' has shape " + shapeString(t.shape) +
                     ", the model expects " + shapeString(p->shape));
    if (t.end - t.begin != uint64_t(p->bytes))
      throw RunError("checkpoint '" + path + "': parameter '" + p->name +
                     "' holds " + std::to_string(t.end - t.begin) +
                     " bytes, its shape needs " + std::to_string(p->bytes));
  }
}

} // namespace

void tessel::run::writeSafetensorsAtomically(
    const std::string &path, const ModelDesc &model, tessel_ctx *ctx,
    const void *arena, const std::map<std::string, std::string> &metadata) {
  std::string header = buildHeader(model, metadata);
  std::string tmp = path + ".tmp";
  std::FILE *f = std::fopen(tmp.c_str(), "wb");
  if (!f)
    throw RunError("cannot write checkpoint '" + tmp +
                   "': " + std::strerror(errno));
  try {
    writeCheckpointFile(f, tmp, model, ctx, arena, header);
  } catch (...) {
    std::fclose(f);
    std::remove(tmp.c_str());
    throw;
  }
  if (std::fclose(f) != 0) {
    std::remove(tmp.c_str());
    throw RunError("cannot write checkpoint '" + tmp +
                   "': " + std::strerror(errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    throw RunError("cannot rename '" + tmp + "' to '" + path +
                   "': " + std::strerror(err));
  }
}

void tessel::run::loadSafetensors(const std::string &path,
                                  const ModelDesc &model, tessel_ctx *ctx,
                                  void *arena) {
  MappedFile file(path);
  std::map<std::string, StoredTensor> stored = readHeader(file, path);
  checkKeys(stored, model, path);
  checkDtypesAndShapes(stored, model, path);
  const char *base = file.data() + 8 + headerLength(file);
  for (const TensorDesc *p : model.withRole("param")) {
    const StoredTensor &t = stored.at(p->name);
    tessel_copy_to_device(ctx, static_cast<char *>(arena) + p->offset,
                          base + t.begin, p->bytes);
  }
  tessel_synchronize(ctx);
}
