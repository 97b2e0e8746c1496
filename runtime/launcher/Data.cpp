//===- Data.cpp - Synthetic batches and token-file batches ----------------===//

#include "runtime/launcher/Data.h"
#include "runtime/launcher/Error.h"
#include "runtime/launcher/Hash.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace tessel::run;

namespace {

//===--- Synthetic data ---------------------------------------------------===//

/// A counter-based stream: draw(i) depends only on the key and i, so values
/// do not depend on the order or number of tensors filled before.
struct CounterRng {
  uint64_t key;
  CounterRng(uint64_t seed, int64_t sample, const std::string &name)
      : key(splitmix64(splitmix64(seed) ^ splitmix64(sample + 0x5851F42Dull) ^
                       hashName(name))) {}
  uint64_t draw(uint64_t i) const { return splitmix64(key ^ splitmix64(i)); }
  // In (0, 1]: safe under log.
  double unitOpen(uint64_t i) const {
    return double((draw(i) >> 11) + 1) * 0x1.0p-53;
  }
};

std::vector<double> standardNormals(const CounterRng &rng, int64_t n) {
  std::vector<double> out(n);
  // Box-Muller: pair j gives elements 2j and 2j+1.
  for (int64_t j = 0; 2 * j < n; ++j) {
    double r = std::sqrt(-2.0 * std::log(rng.unitOpen(2 * j)));
    double theta = 2.0 * M_PI * rng.unitOpen(2 * j + 1);
    out[2 * j] = r * std::cos(theta);
    if (2 * j + 1 < n)
      out[2 * j + 1] = r * std::sin(theta);
  }
  return out;
}

void *at(void *arena, const TensorDesc &t) {
  return static_cast<char *>(arena) + t.offset;
}

/// Copies host f32 or f64 values into a float tensor of any float dtype;
/// 16-bit ones go through the runtime's cast so rounding matches kernels.
void storeFloats(const std::vector<double> &values, const TensorDesc &t,
                 tessel_ctx *ctx, void *arena) {
  int64_t n = values.size();
  if (t.dtypeCode == TESSEL_F64) {
    tessel_copy_to_device(ctx, at(arena, t), values.data(), n * 8);
    return;
  }
  std::vector<float> f32(values.begin(), values.end());
  if (t.dtypeCode == TESSEL_F32) {
    tessel_copy_to_device(ctx, at(arena, t), f32.data(), n * 4);
    return;
  }
  void *staging = tessel_alloc(ctx, n * 4);
  if (!staging)
    throw RunError("out of memory staging input '" + t.name + "'");
  tessel_copy_to_device(ctx, staging, f32.data(), n * 4);
  tessel_cast(ctx, TESSEL_F32, t.dtypeCode, staging, at(arena, t), n);
  tessel_synchronize(ctx);
  tessel_free(ctx, staging);
}

/// Copies integer values into an i32 or i64 tensor.
void storeIntegers(const std::vector<int64_t> &values, const TensorDesc &t,
                   tessel_ctx *ctx, void *arena) {
  if (t.dtypeCode == TESSEL_I64) {
    tessel_copy_to_device(ctx, at(arena, t), values.data(), values.size() * 8);
    return;
  }
  std::vector<int32_t> i32(values.begin(), values.end());
  tessel_copy_to_device(ctx, at(arena, t), i32.data(), i32.size() * 4);
}

/// A feed with a zero-size dimension holds no sample: the mean loss over it
/// is 0/0, a NaN that would otherwise "train" with exit 0.
void checkNotEmpty(const TensorDesc &t) {
  for (int64_t size : t.shape)
    if (size <= 0) {
      std::string shape;
      for (int64_t d : t.shape)
        shape += (shape.empty() ? "" : ", ") + std::to_string(d);
      throw RunError("the model's " + t.role + " '" + t.name + "' has shape [" +
                     shape + "]: a batch needs at least one sample");
    }
}

/// The features a classifier's synthetic label depends on.
constexpr int64_t teacherFeatures = 16;

class SyntheticData : public BatchSource {
public:
  SyntheticData(const ModelDesc &model, uint64_t seed, bool heldOut)
      : seed(seed), heldOut(heldOut) {
    feeds = model.feeds();
    for (const TensorDesc *t : feeds)
      checkNotEmpty(*t);
    for (const TensorDesc *t : feeds)
      if (t->isInteger() && (!t->limit || *t->limit <= 0))
        throw RunError("integer " + t->role + " '" + t->name +
                       "' has no limit: cannot draw synthetic values for it "
                       "(use --data)");
    findClassifier(model);
  }

  // Sample i of microbatch `index` is global sample index · B + i; its
  // values are drawn from (seed, global sample, tensor name) alone, so M
  // microbatches of B see exactly the samples of one batch of M · B, and a
  // rank's block of a batch the samples one device draws there.
  void fill(int64_t index, tessel_ctx *ctx, void *arena) override {
    draw(index, std::nullopt, ctx, arena);
  }

  bool fillSamples(int64_t first, tessel_ctx *ctx, void *arena) override {
    draw(0, first, ctx, arena);
    return true;
  }

private:
  /// Where sample `i` is drawn: i itself, or held out, -2 - i (training
  /// draws samples >= 0, the teacher -1).
  int64_t drawnAs(int64_t i) const { return heldOut ? -2 - i : i; }

  /// Draws samples index · B + i, or first + i when `first` is given.
  void draw(int64_t index, std::optional<int64_t> first, tessel_ctx *ctx,
            void *arena) {
    std::vector<double> features; // The classifier input's, for its labels.
    for (const TensorDesc *t : feeds) {
      int dim = batchDimOf(*t);
      int64_t batch = dim < 0 ? 1 : t->shape[dim];
      int64_t outer = 1, inner = 1;
      for (int d = 0; d < dim; ++d)
        outer *= t->shape[d];
      for (size_t d = dim + 1; d < t->shape.size(); ++d)
        inner *= t->shape[d];
      int64_t perSample = outer * inner;
      std::vector<double> floats(t->isInteger() ? 0 : t->numElements());
      std::vector<int64_t> ints(t->isInteger() ? t->numElements() : 0);
      for (int64_t b = 0; b < batch; ++b) {
        CounterRng rng(seed, drawnAs(first ? *first + b : index * batch + b),
                       t->name);
        std::vector<double> normals;
        if (!t->isInteger())
          normals = standardNormals(rng, perSample);
        for (int64_t j = 0; j < perSample; ++j) {
          // Element j = (o, i) of the sample sits at [o, b, i].
          int64_t at = (j / inner * batch + b) * inner + j % inner;
          if (t->isInteger()) // Lemire's multiply-shift.
            ints[at] = int64_t(
                (unsigned __int128)rng.draw(j) * uint64_t(*t->limit) >> 64);
          else
            floats[at] = normals[j];
        }
        if (t == classifierInput)
          features.insert(features.end(), normals.begin(),
                          normals.begin() + teacherInputs);
      }
      if (t == classifierLabel)
        for (int64_t b = 0; b < batch; ++b)
          ints[b] = teacherClass(&features[b * teacherInputs]);
      if (t->ignoreIndex)
        for (int64_t b = 0; b < batch; ++b) {
          // Fine-tuning data: a prompt of k labels the loss ignores, k
          // uniform in [0, labels per sample] (all of them at the top: a
          // sample that teaches nothing).
          CounterRng rng(seed, drawnAs(first ? *first + b : index * batch + b),
                         t->name + ":prompt");
          int64_t prompt = int64_t(rng.draw(0) % uint64_t(perSample + 1));
          for (int64_t j = 0; j < prompt; ++j)
            ints[(j / inner * batch + b) * inner + j % inner] = *t->ignoreIndex;
        }
      if (t->isInteger())
        storeIntegers(ints, *t, ctx, arena);
      else
        storeFloats(floats, *t, ctx, arena);
    }
  }

  /// A classifier — one float input [B, ...] and one integer label [B] —
  /// gets labels it can learn: the class a fixed random linear teacher
  /// assigns to the first 16 features of each sample (inputs come first in
  /// feeds(), so they are drawn before the label is computed).
  void findClassifier(const ModelDesc &model) {
    std::vector<const TensorDesc *> inputs = model.withRole("input");
    std::vector<const TensorDesc *> labels = model.withRole("label");
    if (inputs.size() != 1 || labels.size() != 1 || inputs[0]->isInteger() ||
        !labels[0]->isInteger() || labels[0]->shape.size() != 1 ||
        batchDimOf(*inputs[0]) != 0 ||
        inputs[0]->shape[0] != labels[0]->shape[0])
      return;
    classifierInput = inputs[0];
    classifierLabel = labels[0];
    teacherInputs = std::min(teacherFeatures,
                             inputs[0]->numElements() /
                                 std::max<int64_t>(1, inputs[0]->shape[0]));
    classes = *labels[0]->limit;
    // The teacher's weights: a pure function of the seed.
    CounterRng rng(seed, -1, "teacher:" + classifierLabel->name);
    teacher = standardNormals(rng, teacherInputs * classes);
  }

  int64_t teacherClass(const double *x) const {
    int64_t best = 0;
    double bestScore = -INFINITY;
    for (int64_t c = 0; c < classes; ++c) {
      double score = 0;
      for (int64_t j = 0; j < teacherInputs; ++j)
        score += x[j] * teacher[j * classes + c];
      if (score > bestScore) {
        best = c;
        bestScore = score;
      }
    }
    return best;
  }

  uint64_t seed;
  bool heldOut;
  std::vector<const TensorDesc *> feeds;
  const TensorDesc *classifierInput = nullptr;
  const TensorDesc *classifierLabel = nullptr;
  int64_t teacherInputs = 0, classes = 0;
  std::vector<double> teacher;
};

//===--- Token files ------------------------------------------------------===//

/// A read-only mapping of a token file: `count` little-endian integers of
/// `itemSize` bytes (signed unless u16) starting at byte `start`.
class TokenFile {
public:
  TokenFile(const std::string &path, TokenDtype binDtype) : path(path) {
    mapFile();
    if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".npy") == 0)
      parseNpyHeader();
    else
      describeRawFile(binDtype);
  }
  ~TokenFile() {
    if (data)
      ::munmap(const_cast<unsigned char *>(data), size);
  }
  TokenFile(const TokenFile &) = delete;
  TokenFile &operator=(const TokenFile &) = delete;

  int64_t at(uint64_t i) const {
    const unsigned char *p = data + start + i * itemSize;
    switch (itemSize) {
    case 1:
      return p[0];
    case 2:
      return uint16_t(p[0] | p[1] << 8);
    case 4: {
      uint32_t v = 0;
      for (int b = 3; b >= 0; --b)
        v = v << 8 | p[b];
      return int32_t(v);
    }
    default: {
      uint64_t v = 0;
      for (int b = 7; b >= 0; --b)
        v = v << 8 | p[b];
      return int64_t(v);
    }
    }
  }

  const std::string path;
  uint64_t count = 0;

private:
  [[noreturn]] void fail(const std::string &problem) const {
    throw RunError("data file '" + path + "': " + problem);
  }

  void mapFile() {
    int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0)
      throw RunError("cannot open data file '" + path +
                     "': " + std::strerror(errno));
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      fail("not a regular file");
    }
    size = st.st_size;
    if (size > 0) {
      void *p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        ::close(fd);
        fail(std::string("cannot map: ") + std::strerror(errno));
      }
      data = static_cast<const unsigned char *>(p);
    }
    ::close(fd);
  }

  void describeRawFile(TokenDtype dtype) {
    itemSize = dtype == TokenDtype::U8 ? 1 : dtype == TokenDtype::U16 ? 2 : 4;
    if (size % itemSize != 0)
      fail("size " + std::to_string(size) + " is not a multiple of " +
           std::to_string(itemSize) + " bytes (" +
           (itemSize == 2 ? "u16" : "i32") + " tokens)");
    count = size / itemSize;
  }

  /// The .npy v1/v2/v3 header: magic, version, header length, then a Python
  /// dict literal with 'descr', 'fortran_order' and 'shape'.
  void parseNpyHeader() {
    if (size < 10 || std::memcmp(data, "\x93NUMPY", 6) != 0)
      fail("not a .npy file");
    int major = data[6];
    uint64_t headerLen =
        major == 1 ? (data[8] | data[9] << 8)
                   : (size < 12 ? 0
                                : (uint64_t(data[8]) | uint64_t(data[9]) << 8 |
                                   uint64_t(data[10]) << 16 |
                                   uint64_t(data[11]) << 24));
    start = (major == 1 ? 10 : 12) + headerLen;
    if (start > size)
      fail("truncated .npy header");
    std::string header(reinterpret_cast<const char *>(data) +
                           (major == 1 ? 10 : 12),
                       headerLen);
    std::string descr = npyField(header, "descr");
    if (descr == "<i4")
      itemSize = 4;
    else if (descr == "<u2")
      itemSize = 2;
    else if (descr == "<i8")
      itemSize = 8;
    else
      fail("unsupported .npy dtype '" + descr + "' (supported: <i4, <u2, <i8)");
    std::vector<uint64_t> shape = npyShape(header);
    if (shape.size() != 1)
      fail("expected a 1-D .npy array, got " + std::to_string(shape.size()) +
           " dimensions");
    count = shape[0];
    // A shape near 2^64 / itemSize would wrap the byte count and pass a
    // naive bound check, then read past the mapping.
    uint64_t bytes = 0, end = 0;
    if (__builtin_mul_overflow(count, uint64_t(itemSize), &bytes) ||
        __builtin_add_overflow(start, bytes, &end) || end != size)
      fail(".npy header says " + std::to_string(count) + " tokens of " +
           std::to_string(itemSize) + " bytes, the file holds " +
           std::to_string(size - start) + " data bytes");
  }

  std::string npyField(const std::string &header, const std::string &key) {
    size_t k = header.find("'" + key + "'");
    size_t open =
        k == std::string::npos ? k : header.find('\'', k + key.size() + 2);
    size_t close =
        open == std::string::npos ? open : header.find('\'', open + 1);
    if (close == std::string::npos)
      fail("malformed .npy header (no '" + key + "')");
    return header.substr(open + 1, close - open - 1);
  }

  std::vector<uint64_t> npyShape(const std::string &header) {
    size_t k = header.find("'shape'");
    size_t open = k == std::string::npos ? k : header.find('(', k);
    size_t close = open == std::string::npos ? open : header.find(')', open);
    if (close == std::string::npos)
      fail("malformed .npy header (no 'shape')");
    // Digits, commas and spaces only: stoull would read "-5" as 2^64 - 5.
    std::vector<uint64_t> shape;
    std::string dims = header.substr(open + 1, close - open - 1);
    for (size_t i = 0; i < dims.size();) {
      unsigned char c = static_cast<unsigned char>(dims[i]);
      if (c == ',' || std::isspace(c)) {
        ++i;
        continue;
      }
      if (!std::isdigit(c))
        fail("malformed .npy shape (" + dims + ")");
      uint64_t dim = 0;
      for (;
           i < dims.size() && std::isdigit(static_cast<unsigned char>(dims[i]));
           ++i)
        if (__builtin_mul_overflow(dim, uint64_t(10), &dim) ||
            __builtin_add_overflow(dim, uint64_t(dims[i] - '0'), &dim))
          fail(".npy shape (" + dims + ") does not fit in 64 bits");
      shape.push_back(dim);
    }
    return shape;
  }

  const unsigned char *data = nullptr;
  uint64_t size = 0;
  uint64_t start = 0;
  unsigned itemSize = 2;
};

class TokenFileData : public BatchSource {
public:
  TokenFileData(const ModelDesc &model, const std::string &path,
                const std::string &labelsPath, TokenDtype dtype)
      : file(path, dtype) {
    if (!labelsPath.empty()) {
      labelFile = std::make_unique<TokenFile>(labelsPath, dtype);
      if (labelFile->count != file.count)
        throw RunError("labels file " + labelsPath + " has " +
                       std::to_string(labelFile->count) +
                       " labels, the data file " + path + " " +
                       std::to_string(file.count) + " tokens (one each)");
    }
    std::vector<const TensorDesc *> inputs = model.withRole("input");
    std::vector<const TensorDesc *> labels = model.withRole("label");
    if (inputs.size() != 1 || labels.size() != 1 || !inputs[0]->isInteger() ||
        !labels[0]->isInteger() || inputs[0]->shape.size() != 2 ||
        inputs[0]->shape != labels[0]->shape)
      throw RunError("--data needs a language model (one integer input and "
                     "one integer label of the same shape [B, S]); this "
                     "model is not one");
    input = inputs[0];
    label = labels[0];
    batch = input->shape[0];
    seq = input->shape[1];
    // A zero sequence length would also divide by zero below.
    checkNotEmpty(*input);
    if (file.count < uint64_t(seq) + 1)
      throw RunError("data file " + path + " has " +
                     std::to_string(file.count) + " tokens, one batch needs " +
                     std::to_string(seq + 1));
    // Windows start at multiples of S and need S + 1 tokens.
    windows = (file.count - 1) / seq;
  }

  void fill(int64_t index, tessel_ctx *ctx, void *arena) override {
    int64_t firstWindow = 0;
    if (index < 0 || __builtin_mul_overflow(index, batch, &firstWindow))
      throw RunError("data file " + file.path + ": batch " +
                     std::to_string(index) + " of " + std::to_string(batch) +
                     " samples is past the 64-bit sample index");
    fillSamples(firstWindow, ctx, arena);
  }

  // Row r of the samples from `firstWindow` is window firstWindow + r; the
  // window index is reduced first so the sum cannot wrap.
  bool fillSamples(int64_t firstWindow, tessel_ctx *ctx,
                   void *arena) override {
    if (firstWindow < 0)
      throw RunError("data file " + file.path + ": negative sample index " +
                     std::to_string(firstWindow));
    std::vector<int64_t> ids(batch * seq), targets(batch * seq);
    uint64_t base = uint64_t(firstWindow) % windows;
    for (int64_t r = 0; r < batch; ++r) {
      uint64_t first = (base + uint64_t(r) % windows) % windows * seq;
      for (int64_t i = 0; i < seq; ++i) {
        ids[r * seq + i] = token(first + i, *input);
        targets[r * seq + i] =
            labelFile ? labelAt(first + i + 1) : token(first + i + 1, *label);
      }
    }
    storeIntegers(ids, *input, ctx, arena);
    storeIntegers(targets, *label, ctx, arena);
    return true;
  }

private:
  /// The exclusive bound of `t`'s values: its limit, else its dtype's.
  static int64_t limitOf(const TensorDesc &t) {
    return t.limit ? *t.limit
                   : (t.dtypeCode == TESSEL_I32 ? INT32_MAX : INT64_MAX);
  }

  int64_t token(uint64_t position, const TensorDesc &t) const {
    int64_t v = file.at(position);
    int64_t limit = limitOf(t);
    if (v < 0 || v >= limit)
      throw RunError("data file " + file.path + ": token " + std::to_string(v) +
                     " at position " + std::to_string(position) +
                     " is outside [0, " + std::to_string(limit) + ") of " +
                     t.role + " '" + t.name + "'");
    return v;
  }

  /// The labels file's element: a class of the label, or the value its
  /// loss ignores.
  int64_t labelAt(uint64_t position) const {
    int64_t v = labelFile->at(position);
    if (label->ignoreIndex && v == *label->ignoreIndex)
      return v;
    int64_t limit = limitOf(*label);
    if (v < 0 || v >= limit)
      throw RunError(
          "labels file " + labelFile->path + ": label " + std::to_string(v) +
          " at position " + std::to_string(position) + " is outside [0, " +
          std::to_string(limit) + ")" +
          (label->ignoreIndex
               ? " and is not the ignored " +
                     std::to_string(*label->ignoreIndex)
               : std::string(" (the model's loss ignores no label: give "
                             "nn.cross_entropy an ignore_index)")));
    return v;
  }

  TokenFile file;
  std::unique_ptr<TokenFile> labelFile;
  const TensorDesc *input = nullptr;
  const TensorDesc *label = nullptr;
  int64_t batch = 0, seq = 0;
  uint64_t windows = 0;
};

} // namespace

int tessel::run::batchDimOf(const TensorDesc &t) {
  for (size_t d = 0; d < t.axes.size() && d < t.shape.size(); ++d)
    if (t.axes[d] == "batch")
      return int(d);
  return t.shape.empty() ? -1 : 0;
}

std::unique_ptr<BatchSource>
tessel::run::makeSyntheticData(const ModelDesc &model, uint64_t seed,
                               bool heldOut) {
  return std::make_unique<SyntheticData>(model, seed, heldOut);
}

std::unique_ptr<BatchSource>
tessel::run::makeTokenFileData(const ModelDesc &model, const std::string &path,
                               const std::string &labelsPath,
                               TokenDtype dtype) {
  return std::make_unique<TokenFileData>(model, path, labelsPath, dtype);
}
