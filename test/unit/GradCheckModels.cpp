//===- GradCheckModels.cpp - GradCheckTest's random models ----------------===//
//
// A model per case: the op under test on random parameters, its result
// weighted by a random cotangent and summed (GradCheckTest.cpp's header).
// Shapes and attributes come from the mt19937 a case is given.
//
//===----------------------------------------------------------------------===//

#include "test/unit/GradCheckModels.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace tessel::gradcheck {
namespace {

using Shape = std::vector<int64_t>;

const char *const normalInit = "#nn.init<normal, 0.5>";
// For ops that need positive operands (log, sqrt, rsqrt, a divisor).
const char *const positiveInit = "#nn.init<uniform, 0.5, 2.0>";

//===----------------------------------------------------------------------===//
// Random choices. Taken straight from mt19937's output (whose sequence the
// standard fixes) rather than std::uniform_int_distribution (whose mapping
// it does not), so a seed gives the same model with every standard library.
//===----------------------------------------------------------------------===//

int64_t between(std::mt19937 &rng, int64_t lo, int64_t hi) {
  return lo + int64_t(rng() % uint64_t(hi - lo + 1));
}

bool coin(std::mt19937 &rng) { return rng() & 1; }

template <typename T>
const T &pick(std::mt19937 &rng, const std::vector<T> &v) {
  return v[between(rng, 0, int64_t(v.size()) - 1)];
}

Shape randomShape(std::mt19937 &rng, int minRank, int maxRank,
                  int64_t maxDim = 4) {
  Shape shape(between(rng, minRank, maxRank));
  for (int64_t &d : shape)
    d = between(rng, 1, maxDim);
  return shape;
}

/// The shape of an elementwise case: rank 1-3, now and then rank 0.
Shape elementwiseShape(std::mt19937 &rng) {
  return between(rng, 0, 7) == 0 ? Shape{} : randomShape(rng, 1, 3, 5);
}

void shuffle(std::mt19937 &rng, std::vector<int64_t> &v) {
  for (int64_t i = int64_t(v.size()) - 1; i > 0; --i)
    std::swap(v[i], v[between(rng, 0, i)]);
}

/// A sorted, non-empty random subset of [0, n).
std::vector<int64_t> randomSubset(std::mt19937 &rng, int64_t n) {
  std::vector<int64_t> out;
  while (out.empty())
    for (int64_t i = 0; i < n; ++i)
      if (coin(rng))
        out.push_back(i);
  return out;
}

//===----------------------------------------------------------------------===//
// MLIR text
//===----------------------------------------------------------------------===//

std::string tensorType(const Shape &shape, const std::string &element = "f64") {
  std::string out = "tensor<";
  for (int64_t d : shape)
    out += std::to_string(d) + "x";
  return out + element + ">";
}

std::string list(const std::vector<int64_t> &values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i)
    out += (i ? ", " : "") + std::to_string(values[i]);
  return out + "]";
}

std::string fnType(const std::vector<std::string> &operands,
                   const std::string &result) {
  std::string out = "(";
  for (size_t i = 0; i < operands.size(); ++i)
    out += (i ? ", " : "") + operands[i];
  return out + ") -> " + result;
}

/// One loss function (and any layer functions it calls) as MLIR text.
class ModelBuilder {
public:
  /// A trainable f64 (or `element`) parameter; returns its SSA name.
  std::string param(const Shape &shape, const std::string &init = normalInit,
                    const std::string &element = "f64") {
    std::string name = "%p" + std::to_string(numParams);
    args.push_back(name + ": " + tensorType(shape, element) +
                   " {nn.param = \"p" + std::to_string(numParams) +
                   "\", nn.init = " + init + "}");
    ++numParams;
    return name;
  }

  /// A stacked parameter of nn.repeat, with logical axes `axes` (the first
  /// "layers").
  std::string stackedParam(const Shape &shape, const std::string &axes) {
    std::string name = "%p" + std::to_string(numParams);
    args.push_back(name + ": " + tensorType(shape) + " {nn.param = \"p" +
                   std::to_string(numParams) + "\", nn.init = " + normalInit +
                   ", nn.axes = " + axes + "}");
    ++numParams;
    return name;
  }

  /// An input tessel-run fills with synthetic data.
  std::string input(const Shape &shape, const std::string &element = "f64") {
    std::string name = "%x" + std::to_string(numInputs++);
    args.push_back(name + ": " + tensorType(shape, element) + " {nn.input}");
    return name;
  }

  /// Appends `%vN = <op>` to the loss function; returns %vN.
  std::string emit(const std::string &op) {
    std::string name = "%v" + std::to_string(numValues++);
    body += "  " + name + " = " + op + "\n";
    return name;
  }

  /// Text placed before the loss function (layer functions).
  void addFunction(const std::string &text) { prelude += text + "\n"; }

  /// The module: loss = reduce_sum(value * r), r a random cotangent input.
  std::string finish(const std::string &value, const Shape &shape) {
    std::string r = input(shape);
    std::string type = tensorType(shape);
    std::string product = emit("nn.mul " + value + ", " + r + " : " + type);
    std::string loss = product;
    if (!shape.empty()) {
      std::vector<int64_t> all(shape.size());
      std::iota(all.begin(), all.end(), 0);
      loss = emit("nn.reduce_sum " + product + " dims = " + list(all) + " : " +
                  type + " -> tensor<f64>");
    }
    std::string out = prelude + "func.func @loss(\n";
    for (size_t i = 0; i < args.size(); ++i)
      out += "    " + args[i] + (i + 1 < args.size() ? ",\n" : ")");
    out += " -> tensor<f64> {\n" + body + "  return " + loss +
           " : tensor<f64>\n}\n";
    return out;
  }

private:
  std::vector<std::string> args;
  std::string body, prelude;
  int numParams = 0, numInputs = 0, numValues = 0;
};


GradModel unary(std::mt19937 &rng, const std::string &op,
                const std::string &suffix = "", const char *init = normalInit) {
  ModelBuilder m;
  Shape shape = elementwiseShape(rng);
  std::string x = m.param(shape, init);
  std::string y = m.emit(op + " " + x + suffix + " : " + tensorType(shape));
  return {m.finish(y, shape)};
}

GradModel binary(std::mt19937 &rng, const std::string &op,
                 const char *rhsInit = normalInit) {
  ModelBuilder m;
  Shape shape = elementwiseShape(rng);
  std::string a = m.param(shape);
  std::string b = m.param(shape, rhsInit);
  std::string y = m.emit(op + " " + a + ", " + b + " : " + tensorType(shape));
  return {m.finish(y, shape)};
}

// One parameter as both operands: the two cotangents must accumulate.
GradModel mulSelf(std::mt19937 &rng) {
  ModelBuilder m;
  Shape shape = randomShape(rng, 1, 3);
  std::string a = m.param(shape);
  std::string y = m.emit("nn.mul " + a + ", " + a + " : " + tensorType(shape));
  return {m.finish(y, shape)};
}

GradModel dropout(std::mt19937 &rng) {
  ModelBuilder m;
  Shape shape = randomShape(rng, 1, 3, 5);
  std::string x = m.param(shape);
  std::string rate = pick<std::string>(rng, {"0.1", "0.25", "0.5"});
  std::string y = m.emit("nn.dropout " + x + " rate = " + rate +
                         " seed = " + std::to_string(between(rng, 0, 1000)) +
                         " : " + tensorType(shape));
  return {m.finish(y, shape)};
}

// An f32 parameter widened to f64: tessel-run checks it as f32 (four-point
// stencil, tolerance 2e-2), and the loss is linear in it, so the stencil is
// exact up to f32 rounding of x ± h.
GradModel castWiden(std::mt19937 &rng) {
  ModelBuilder m;
  Shape shape = randomShape(rng, 1, 3);
  std::string x = m.param(shape, normalInit, "f32");
  std::string y = m.emit("nn.cast " + x + " : " + tensorType(shape, "f32") +
                         " to " + tensorType(shape));
  return {m.finish(y, shape)};
}

// f64 -> f32 -> f64: the forward rounds x ± h to f32, so the f64 central
// difference (h = 1e-6·max(1, |x|)) carries up to ulp_f32(x) / 2h ≈ 6e-2
// relative error; the tolerance is 0.1.
GradModel castRoundTrip(std::mt19937 &rng) {
  ModelBuilder m;
  Shape shape = randomShape(rng, 1, 3);
  std::string x = m.param(shape);
  std::string narrow = m.emit("nn.cast " + x + " : " + tensorType(shape) +
                              " to " + tensorType(shape, "f32"));
  std::string y = m.emit("nn.cast " + narrow + " : " +
                         tensorType(shape, "f32") + " to " + tensorType(shape));
  return {m.finish(y, shape), "--grad-tol 0.1"};
}

// Adds new dimensions and expands size-1 ones.
GradModel broadcast(std::mt19937 &rng) {
  for (;;) {
    Shape out = randomShape(rng, 1, 4);
    std::vector<int64_t> dims;
    Shape in;
    bool expands = false;
    for (int64_t d = 0; d < int64_t(out.size()); ++d) {
      if (coin(rng))
        continue; // a new dimension
      dims.push_back(d);
      bool unit = out[d] > 1 && coin(rng);
      in.push_back(unit ? 1 : out[d]);
      expands |= unit;
    }
    if (in.size() == out.size() && !expands)
      continue; // the identity: draw again
    ModelBuilder m;
    std::string x = m.param(in);
    std::string y = m.emit("nn.broadcast " + x + " dims = " + list(dims) +
                           " : " + tensorType(in) + " -> " + tensorType(out));
    return {m.finish(y, out)};
  }
}

GradModel reduce(std::mt19937 &rng, const std::string &op) {
  ModelBuilder m;
  Shape in = randomShape(rng, 1, 4);
  std::vector<int64_t> dims = randomSubset(rng, in.size());
  bool keep = coin(rng);
  Shape out;
  for (int64_t d = 0; d < int64_t(in.size()); ++d) {
    bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!reduced)
      out.push_back(in[d]);
    else if (keep)
      out.push_back(1);
  }
  std::string x = m.param(in);
  std::string y = m.emit(op + " " + x + " dims = " + list(dims) +
                         (keep ? " keep_dims" : "") + " : " + tensorType(in) +
                         " -> " + tensorType(out));
  return {m.finish(y, out)};
}

GradModel reshape(std::mt19937 &rng) {
  ModelBuilder m;
  Shape in = randomShape(rng, 1, 4);
  int64_t remaining =
      std::accumulate(in.begin(), in.end(), int64_t(1), std::multiplies<>());
  Shape out;
  for (int64_t i = between(rng, 1, 4); i > 1; --i) {
    std::vector<int64_t> divisors;
    for (int64_t d = 1; d <= remaining; ++d)
      if (remaining % d == 0)
        divisors.push_back(d);
    int64_t d = pick(rng, divisors);
    out.push_back(d);
    remaining /= d;
  }
  out.push_back(remaining);
  shuffle(rng, out);
  std::string x = m.param(in);
  std::string y = m.emit("nn.reshape " + x + " : " + tensorType(in) + " -> " +
                         tensorType(out));
  return {m.finish(y, out)};
}

GradModel transpose(std::mt19937 &rng) {
  ModelBuilder m;
  Shape in = randomShape(rng, 1, 4);
  std::vector<int64_t> perm(in.size());
  std::iota(perm.begin(), perm.end(), 0);
  shuffle(rng, perm);
  Shape out;
  for (int64_t p : perm)
    out.push_back(in[p]);
  std::string x = m.param(in);
  std::string y = m.emit("nn.transpose " + x + " perm = " + list(perm) + " : " +
                         tensorType(in) + " -> " + tensorType(out));
  return {m.finish(y, out)};
}

GradModel slice(std::mt19937 &rng) {
  ModelBuilder m;
  Shape in = randomShape(rng, 1, 3, 6);
  std::vector<int64_t> start, limit, strides;
  Shape out;
  bool strided = false;
  for (int64_t size : in) {
    int64_t s = between(rng, 0, size - 1);
    int64_t l = between(rng, s + 1, size);
    int64_t st = coin(rng) ? 1 : between(rng, 1, 3);
    strided |= st != 1;
    start.push_back(s);
    limit.push_back(l);
    strides.push_back(st);
    out.push_back((l - s + st - 1) / st);
  }
  std::string x = m.param(in);
  std::string y = m.emit("nn.slice " + x + " start = " + list(start) +
                         " limit = " + list(limit) +
                         (strided ? " strides = " + list(strides) : "") +
                         " : " + tensorType(in) + " -> " + tensorType(out));
  return {m.finish(y, out)};
}

GradModel concat(std::mt19937 &rng) {
  ModelBuilder m;
  Shape base = randomShape(rng, 1, 3);
  int64_t dim = between(rng, 0, int64_t(base.size()) - 1);
  int64_t n = between(rng, 2, 3);
  std::vector<std::string> operands, types;
  Shape out = base;
  out[dim] = 0;
  for (int64_t i = 0; i < n; ++i) {
    Shape shape = base;
    shape[dim] = between(rng, 1, 4);
    out[dim] += shape[dim];
    operands.push_back(m.param(shape));
    types.push_back(tensorType(shape));
  }
  std::string text = "nn.concat ";
  for (int64_t i = 0; i < n; ++i)
    text += (i ? ", " : "") + operands[i];
  std::string y = m.emit(text + " dim = " + std::to_string(dim) + " : " +
                         fnType(types, tensorType(out)));
  return {m.finish(y, out)};
}

enum class MatmulForm { TwoD, Batched, SharedRhs, SummedBatch };

GradModel matmul(std::mt19937 &rng, MatmulForm form, bool transposeLhs,
                 bool transposeRhs) {
  ModelBuilder m;
  int64_t M = between(rng, 1, 5), N = between(rng, 1, 5),
          K = between(rng, 1, 5);
  bool summed = form == MatmulForm::SummedBatch;
  Shape batch = form == MatmulForm::TwoD ? Shape{} : randomShape(rng, 1, 2, 3);
  Shape lhs = batch,
        rhs = form == MatmulForm::Batched || summed ? batch : Shape{},
        out = summed ? Shape{} : batch;
  Shape lhsMatrix = transposeLhs ? Shape{K, M} : Shape{M, K};
  Shape rhsMatrix = transposeRhs ? Shape{N, K} : Shape{K, N};
  lhs.insert(lhs.end(), lhsMatrix.begin(), lhsMatrix.end());
  rhs.insert(rhs.end(), rhsMatrix.begin(), rhsMatrix.end());
  out.insert(out.end(), {M, N});
  std::string a = m.param(lhs), b = m.param(rhs);
  std::string y = m.emit(
      "nn.matmul " + a + ", " + b + (transposeLhs ? " transpose_lhs" : "") +
      (transposeRhs ? " transpose_rhs" : "") + (summed ? " sum_batch" : "") +
      " : " + fnType({tensorType(lhs), tensorType(rhs)}, tensorType(out)));
  return {m.finish(y, out)};
}

GradModel embedding(std::mt19937 &rng) {
  ModelBuilder m;
  int64_t vocab = between(rng, 2, 8), hidden = between(rng, 1, 5);
  Shape idShape = randomShape(rng, 0, 2, 5);
  std::string idType = coin(rng) ? "i32" : "i64";
  std::string table = m.param({vocab, hidden});
  std::string ids = m.input(idShape, idType);
  Shape out = idShape;
  out.push_back(hidden);
  std::string y =
      m.emit("nn.embedding " + table + ", " + ids + " : " +
             fnType({tensorType({vocab, hidden}), tensorType(idShape, idType)},
                    tensorType(out)));
  return {m.finish(y, out)};
}

/// Attention of random shapes, scales and head groups; causal ones now and
/// then under a sliding window (of 1 key up to past the sequence); half
/// of them with soft-capped scores (caps that bend them, Gemma 2's).
GradModel attention(std::mt19937 &rng, bool causal, bool groupedQuery) {
  ModelBuilder m;
  int64_t B = between(rng, 1, 2), S = between(rng, 1, 5);
  int64_t T = causal ? S : between(rng, 1, 5);
  int64_t H = groupedQuery ? pick<int64_t>(rng, {2, 4, 6}) : between(rng, 1, 3);
  int64_t Hkv = H;
  if (groupedQuery) {
    std::vector<int64_t> divisors;
    for (int64_t d = 1; d < H; ++d)
      if (H % d == 0)
        divisors.push_back(d);
    Hkv = pick(rng, divisors);
  }
  int64_t D = between(rng, 1, 4), E = between(rng, 1, 4);
  Shape qs = {B, S, H, D}, ks = {B, T, Hkv, D}, vs = {B, T, Hkv, E},
        out = {B, S, H, E};
  std::string q = m.param(qs), k = m.param(ks), v = m.param(vs);
  std::string scale = coin(rng)
                          ? ""
                          : pick<std::string>(rng, {" {scale = 0.3 : f64}",
                                                    " {scale = 1.25 : f64}"});
  std::string mask =
      !causal     ? ""
      : coin(rng) ? " causal"
                  : " causal window " + std::to_string(between(rng, 1, S + 1));
  std::string cap =
      coin(rng) ? "" : pick<std::string>(rng, {" softcap 0.5", " softcap 2.0"});
  std::string y = m.emit(
      "nn.attention " + q + ", " + k + ", " + v + mask + cap + scale + " : " +
      fnType({tensorType(qs), tensorType(ks), tensorType(vs)},
             tensorType(out)));
  return {m.finish(y, out)};
}

/// LongRoPE's attributes for heads of `dim`: a partial rope of an even
/// width now and then, a factor a pair turned, an attention factor.
std::string longrope(std::mt19937 &rng, int64_t dim) {
  int64_t rotary = 2 * between(rng, 1, dim / 2);
  std::string factors;
  for (int64_t i = 0; i < rotary / 2; ++i)
    factors += (i ? ", " : "") + std::to_string(1.0 + 0.75 * double(i));
  return " {theta = 50.0 : f64, rotary_dim = " + std::to_string(rotary) +
         " : i64, longrope = array<f64: " + factors +
         ">, attention_factor = 1.25 : f64}";
}

/// Rope over [..., S, H, D]: rank 3 to 5, an even D, either pair layout,
/// either direction, and theta now and then other than the default, or
/// with Llama 3.1's, YaRN's or LongRoPE's scaling (a partial rope).
GradModel rope(std::mt19937 &rng) {
  ModelBuilder m;
  Shape shape = randomShape(rng, 0, 2, 3);
  for (int64_t d :
       {between(rng, 1, 6), between(rng, 1, 3), 2 * between(rng, 1, 4)})
    shape.push_back(d);
  std::string attrs =
      std::string(coin(rng) ? " interleaved" : "") +
      (coin(rng) ? " inverse" : "") +
      pick<std::string>(rng, {"", " {theta = 3.5 : f64}",
                              " {theta = 50.0 : f64, scaling = array<f64: "
                              "4.0, 1.0, 4.0, 16.0>}",
                              " {theta = 50.0 : f64, yarn = array<f64: "
                              "4.0, 8.0, 1.0, 64.0, 1.0>}",
                              "longrope"});
  const std::string drawn = "longrope"; // drawn only when picked
  if (attrs.size() >= drawn.size() &&
      attrs.compare(attrs.size() - drawn.size(), drawn.size(), drawn) == 0)
    attrs.replace(attrs.size() - drawn.size(), drawn.size(),
                  longrope(rng, shape.back()));
  std::string x = m.param(shape);
  std::string y = m.emit("nn.rope " + x + attrs + " : " + tensorType(shape));
  return {m.finish(y, shape)};
}

GradModel softmax(std::mt19937 &rng) {
  ModelBuilder m;
  Shape shape = randomShape(rng, 1, 3, 5);
  int64_t rank = shape.size();
  int64_t dim = between(rng, -rank, rank - 1);
  std::string attr = dim == -1 && coin(rng)
                         ? ""
                         : " {dim = " + std::to_string(dim) + " : i64}";
  std::string x = m.param(shape);
  std::string y = m.emit("nn.softmax " + x + attr + " : " + tensorType(shape));
  return {m.finish(y, shape)};
}

std::string epsilonAttr(std::mt19937 &rng, const std::string &more = "") {
  if (coin(rng))
    return more.empty() ? "" : " {" + more + "}";
  return " {" + (more.empty() ? "" : more + ", ") +
         pick<std::string>(rng,
                           {"epsilon = 1.0e-03 : f64", "epsilon = 0.1 : f64"}) +
         "}";
}

GradModel layerNorm(std::mt19937 &rng) {
  ModelBuilder m;
  Shape shape = randomShape(rng, 0, 2);
  int64_t hidden = between(rng, 2, 6);
  shape.push_back(hidden);
  std::string x = m.param(shape), g = m.param({hidden}), b = m.param({hidden});
  std::string y = m.emit(
      "nn.layer_norm " + x + ", " + g + ", " + b + epsilonAttr(rng) + " : " +
      fnType({tensorType(shape), tensorType({hidden}), tensorType({hidden})},
             tensorType(shape)));
  return {m.finish(y, shape)};
}

GradModel rmsNorm(std::mt19937 &rng) {
  ModelBuilder m;
  Shape shape = randomShape(rng, 0, 2);
  int64_t hidden = between(rng, 1, 6);
  shape.push_back(hidden);
  std::string x = m.param(shape), g = m.param({hidden});
  std::string y = m.emit(
      "nn.rms_norm " + x + ", " + g + epsilonAttr(rng) + " : " +
      fnType({tensorType(shape), tensorType({hidden})}, tensorType(shape)));
  return {m.finish(y, shape)};
}

/// A residual add, the norm of its sum and the sum used again (n ⊙ s):
/// what tessel-fuse-epilogues folds into nn.add_norm and, in the backward,
/// nn.norm_grad_add (the sum's gradient is the mul's plus the norm's).
GradModel residualNorm(std::mt19937 &rng, bool rms) {
  ModelBuilder m;
  Shape shape = randomShape(rng, 0, 2);
  int64_t hidden = between(rng, 2, 6);
  shape.push_back(hidden);
  std::string t = tensorType(shape), v = tensorType({hidden});
  std::string x = m.param(shape), r = m.param(shape), g = m.param({hidden});
  std::string s = m.emit("nn.add " + x + ", " + r + " : " + t);
  std::string n =
      rms ? m.emit("nn.rms_norm " + s + ", " + g + epsilonAttr(rng) + " : " +
                   fnType({t, v}, t))
          : m.emit("nn.layer_norm " + s + ", " + g + ", " +
                   m.param({hidden}) + epsilonAttr(rng) + " : " +
                   fnType({t, v, v}, t));
  std::string y = m.emit("nn.mul " + n + ", " + s + " : " + t);
  return {m.finish(y, shape)};
}

GradModel batchNorm(std::mt19937 &rng) {
  ModelBuilder m;
  Shape shape;
  int64_t featureDim, statistics;
  do { // at least two elements per feature for a variance
    shape = randomShape(rng, 2, 4);
    featureDim = between(rng, 0, int64_t(shape.size()) - 1);
    statistics = 1;
    for (int64_t d = 0; d < int64_t(shape.size()); ++d)
      if (d != featureDim)
        statistics *= shape[d];
  } while (statistics < 2);
  int64_t C = shape[featureDim];
  std::string featureAttr =
      featureDim == 1 && coin(rng)
          ? ""
          : "feature_dim = " + std::to_string(featureDim) + " : i64";
  std::string x = m.param(shape), g = m.param({C}), b = m.param({C});
  std::string y =
      m.emit("nn.batch_norm " + x + ", " + g + ", " + b +
             epsilonAttr(rng, featureAttr) + " : " +
             fnType({tensorType(shape), tensorType({C}), tensorType({C})},
                    tensorType(shape)));
  return {m.finish(y, shape)};
}

GradModel crossEntropy(std::mt19937 &rng, const std::string &reduction) {
  ModelBuilder m;
  Shape labelShape = randomShape(rng, 0, 2);
  int64_t classes = between(rng, 2, 6);
  Shape logitShape = labelShape;
  logitShape.push_back(classes);
  std::string labelType = coin(rng) ? "i32" : "i64";
  std::string attr = reduction == "mean" && coin(rng)
                         ? ""
                         : "reduction = #nn.reduction<" + reduction + ">";
  // Half the losses ignore the label -100 (fine-tuning's), which the
  // synthetic labels then hold over a prompt of each sample: the gradient
  // of the masked mean (tessel-mask-ignored-labels).
  if (coin(rng))
    attr +=
        (attr.empty() ? "" : ", ") + std::string("ignore_index = -100 : i64");
  // Half smooth the labels (inside the loss and its gradient's kernels).
  if (coin(rng))
    attr += (attr.empty() ? "" : ", ") +
            pick<std::string>(rng, {"label_smoothing = 0.1 : f64",
                                    "label_smoothing = 0.7 : f64"});
  // Half cap the logits inside the loss (Gemma 2's, fused).
  if (coin(rng))
    attr += (attr.empty() ? "" : ", ") +
            pick<std::string>(rng, {"logit_softcap = 0.8 : f64",
                                    "logit_softcap = 3.0 : f64"});
  if (!attr.empty())
    attr = " {" + attr + "}";
  Shape out = reduction == "none" ? labelShape : Shape{};
  std::string logits = m.param(logitShape);
  std::string labels = m.input(labelShape, labelType);
  std::string y =
      m.emit("nn.cross_entropy " + logits + ", " + labels + attr + " : " +
             fnType({tensorType(logitShape), tensorType(labelShape, labelType)},
                    tensorType(out)));
  return {m.finish(y, out)};
}

// A GPT-style tied table: the embedding's scatter-add and the LM head's
// matmul cotangents accumulate into one parameter.
GradModel tiedEmbedding(std::mt19937 &rng) {
  ModelBuilder m;
  int64_t vocab = between(rng, 2, 6), hidden = between(rng, 1, 4);
  Shape idShape = randomShape(rng, 1, 2);
  Shape embedded = idShape, logits = idShape;
  embedded.push_back(hidden);
  logits.push_back(vocab);
  Shape tableShape = {vocab, hidden};
  std::string table = m.param(tableShape);
  std::string ids = m.input(idShape, "i32");
  std::string labels = m.input(idShape, "i32");
  std::string e =
      m.emit("nn.embedding " + table + ", " + ids + " : " +
             fnType({tensorType(tableShape), tensorType(idShape, "i32")},
                    tensorType(embedded)));
  std::string z = m.emit("nn.matmul " + e + ", " + table + " transpose_rhs : " +
                         fnType({tensorType(embedded), tensorType(tableShape)},
                                tensorType(logits)));
  std::string l = m.emit(
      "nn.cross_entropy " + z + ", " + labels + " : " +
      fnType({tensorType(logits), tensorType(idShape, "i32")}, "tensor<f64>"));
  return {m.finish(l, {})};
}

// L layers of h + gelu(h·W + b) through nn.repeat, under a recompute policy.
GradModel repeat(std::mt19937 &rng, const std::string &recompute) {
  ModelBuilder m;
  int64_t L = between(rng, 2, 3), N = between(rng, 1, 3),
          D = between(rng, 2, 4);
  std::string h = tensorType({N, D}), w = tensorType({D, D}),
              b = tensorType({D});
  std::string gelu = coin(rng) ? " approximate" : "";
  m.addFunction(
      "func.func private @block(%h: " + h + ", %w: " + w + ", %b: " + b +
      ") -> " + h + " {\n" + "  %y = nn.matmul %h, %w : (" + h + ", " + w +
      ") -> " + h + "\n" + "  %bb = nn.broadcast %b dims = [1] : " + b +
      " -> " + h + "\n" + "  %z = nn.add %y, %bb : " + h + "\n" +
      "  %g = nn.gelu %z" + gelu + " : " + h + "\n" +
      "  %o = nn.add %h, %g : " + h + "\n" + "  return %o : " + h + "\n}");
  std::string x = m.param({N, D});
  std::string ws = m.stackedParam({L, D, D}, R"(["layers", "embed", "mlp"])");
  std::string bs = m.stackedParam({L, D}, R"(["layers", "mlp"])");
  std::string y =
      m.emit("nn.repeat @block(" + x + ") params(" + ws + ", " + bs + ") : " +
             fnType({h, tensorType({L, D, D}), tensorType({L, D})}, h));
  return {m.finish(y, {N, D}), "--recompute " + recompute};
}

/// The same model in f32: every f64 tensor type becomes f32 (f64
/// attributes such as epsilon stay). tessel-run then checks with the
/// four-point stencil, h = 1e-2·max(1, |x|), and tolerance 2e-2: a smoke test
/// of the f32 backward kernels, for smooth ops only (a relu kink or a
/// reduce_max tie within 2h of a sample is likely at that step).
Generator inF32(Generator generate) {
  return [generate](std::mt19937 &rng) {
    GradModel model = generate(rng);
    static const std::regex f64Tensor(R"((tensor<(?:[0-9]+x)*)f64>)");
    model.text = std::regex_replace(model.text, f64Tensor, "$1f32>");
    return model;
  };
}

std::vector<GradCase> allCases() {
  std::vector<GradCase> cases;
  auto add = [&](std::string name, int repetitions, Generator generate) {
    cases.push_back({std::move(name), repetitions, std::move(generate)});
  };
  for (const char *op : {"add", "sub", "mul"})
    add(op, 2, [op](std::mt19937 &rng) {
      return binary(rng, std::string("nn.") + op);
    });
  add("div", 2,
      [](std::mt19937 &rng) { return binary(rng, "nn.div", positiveInit); });
  add("mul_self", 1, mulSelf);
  for (const char *op : {"neg", "exp", "tanh", "sigmoid", "relu", "silu"})
    add(op, 2, [op](std::mt19937 &rng) {
      return unary(rng, std::string("nn.") + op);
    });
  for (const char *op : {"log", "sqrt", "rsqrt"})
    add(op, 2, [op](std::mt19937 &rng) {
      return unary(rng, std::string("nn.") + op, "", positiveInit);
    });
  add("gelu_exact", 2, [](std::mt19937 &rng) { return unary(rng, "nn.gelu"); });
  add("gelu_approximate", 2,
      [](std::mt19937 &rng) { return unary(rng, "nn.gelu", " approximate"); });
  add("dropout", 2, dropout);
  add("cast_f32_to_f64", 1, castWiden);
  add("cast_f64_f32_f64", 1, castRoundTrip);
  add("broadcast", 3, broadcast);
  for (const char *op : {"reduce_sum", "reduce_mean", "reduce_max"})
    add(op, 3, [op](std::mt19937 &rng) {
      return reduce(rng, std::string("nn.") + op);
    });
  add("reshape", 2, reshape);
  add("transpose", 3, transpose);
  add("slice", 3, slice);
  add("concat", 3, concat);
  for (auto [formName, form] : {std::pair{"2d", MatmulForm::TwoD},
                                std::pair{"batched", MatmulForm::Batched},
                                std::pair{"shared_rhs", MatmulForm::SharedRhs}})
    for (bool tl : {false, true})
      for (bool tr : {false, true})
        add(std::string("matmul_") + formName + (tl ? "_tl" : "") +
                (tr ? "_tr" : ""),
            1, [form = form, tl, tr](std::mt19937 &rng) {
              return matmul(rng, form, tl, tr);
            });
  // A weight gradient over rows [B, S]: the one form sum_batch takes.
  add("matmul_summed_batch_tl", 2, [](std::mt19937 &rng) {
    return matmul(rng, MatmulForm::SummedBatch, true, false);
  });
  add("embedding", 3, embedding);
  add("tied_embedding", 2, tiedEmbedding);
  add("attention", 2,
      [](std::mt19937 &rng) { return attention(rng, false, false); });
  add("attention_causal", 2,
      [](std::mt19937 &rng) { return attention(rng, true, false); });
  add("attention_grouped_query", 2,
      [](std::mt19937 &rng) { return attention(rng, coin(rng), true); });
  add("rope", 3, rope);
  add("softmax", 3, softmax);
  add("layer_norm", 2, layerNorm);
  add("rms_norm", 2, rmsNorm);
  add("residual_layer_norm", 2,
      [](std::mt19937 &rng) { return residualNorm(rng, false); });
  add("residual_rms_norm", 2,
      [](std::mt19937 &rng) { return residualNorm(rng, true); });
  add("batch_norm", 3, batchNorm);
  for (const char *reduction : {"mean", "sum", "none"})
    add(std::string("cross_entropy_") + reduction, 2,
        [reduction](std::mt19937 &rng) {
          return crossEntropy(rng, reduction);
        });
  for (const char *policy : {"none", "selective", "full"})
    add(std::string("repeat_recompute_") + policy, 1,
        [policy](std::mt19937 &rng) { return repeat(rng, policy); });

  // f32 variants of the ops whose backward has a kernel of its own.
  std::vector<GradCase> f32;
  for (const char *name :
       {"gelu_exact", "gelu_approximate", "silu", "softmax", "layer_norm",
        "rms_norm", "residual_layer_norm", "residual_rms_norm", "batch_norm",
        "cross_entropy_mean", "cross_entropy_none", "embedding",
        "attention_causal", "attention_grouped_query", "rope",
        "matmul_batched_tl_tr", "repeat_recompute_selective"})
    for (const GradCase &c : cases)
      if (c.name == name)
        f32.push_back({"f32_" + c.name, 1, inF32(c.generate)});
  cases.insert(cases.end(), f32.begin(), f32.end());
  return cases;
}

} // namespace

const std::vector<GradCase> &cases() {
  static const std::vector<GradCase> all = allCases();
  return all;
}

} // namespace tessel::gradcheck
