//===- GradCheck.cpp - The backward entry against finite differences ------===//
//
// Finite differences in float arithmetic trade truncation error (large
// steps) against the loss's rounding noise (small steps). An f32 loss of
// a batch carries ~1e-7 relative noise while one weight of a large model
// moves it by ~1e-5 per unit, so no fixed step serves every parameter: the
// four-point stencil starts at h = 0.1·max(1, |x|) and halves h, up to 5
// times, until two successive estimates agree within the noise (f64: from
// 1e-2·max(1, |x|), up to 8 times, to the same smallest step of about
// 4e-5). f64 starts at the larger step for the same reason: its O(h⁴)
// truncation is far below a tolerance of 1e-6 at 1e-2 for a smooth loss,
// while at 1e-3 the rounding of llama's loss (about twice the 2-ulp model)
// already set successive estimates of a small gradient element apart by
// more than the resolution, and each halving only doubled it: wk's worst
// element settled at h ≈ 3e-5 with a relative error of 1.8e-6 and failed
// the check, where the first step of 1e-2 settles at once within 6e-8.
//
// On a mesh every rank runs the same check in lockstep: the gradients are
// the reduced ones, gathered whole; the loss is the mean over the ranks
// (each dp rank's batch slice, tp ranks alike); a perturbed element is
// written by every rank holding a copy of it (a replica, a tp shard's
// owner, a ZeRO chunk's), so the forward sees one model with one changed
// parameter, as one device would.
//
//===----------------------------------------------------------------------===//

#include "runtime/launcher/GradCheck.h"
#include "runtime/config/NamePattern.h"
#include "runtime/launcher/Arena.h"
#include "runtime/launcher/Distributed.h"
#include "runtime/launcher/Error.h"
#include "runtime/launcher/FloatFormats.h"
#include "runtime/launcher/Hash.h"
#include "runtime/launcher/PipelineStep.h"
#include "runtime/launcher/Ranks.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <set>

using namespace tessel::run;

namespace {

constexpr int64_t maxSamples = 32;
/// Elements tried at most per parameter: room for a few kinks among the
/// samples (ReLU after batch norm puts one within the smallest step of
/// ~1% of fc1.weight's elements in examples/bn_mlp.mlir).
constexpr int64_t maxCandidates = 4 * maxSamples;

/// Writes single elements of a float tensor of any dtype as f64, through
/// the runtime's cast (so f16/bf16 round as the kernels do), and restores
/// their bytes.
class ElementAccess {
public:
  explicit ElementAccess(tessel_ctx *ctx) : ctx(ctx) {
    staging = tessel_alloc(ctx, 16);
    if (!staging)
      throw RunError("out of memory for the gradient check");
  }
  ~ElementAccess() { tessel_free(ctx, staging); }
  ElementAccess(const ElementAccess &) = delete;
  ElementAccess &operator=(const ElementAccess &) = delete;

  void write(const TensorDesc &t, void *arena, int64_t i, double value) {
    char *dst = static_cast<char *>(arena) + t.offset +
                i * tessel_dtype_size(t.dtypeCode);
    tessel_copy_to_device(ctx, staging, &value, 8);
    tessel_cast(ctx, TESSEL_F64, t.dtypeCode, staging, dst, 1);
    tessel_synchronize(ctx);
  }

  /// The raw bytes of element i, to restore it exactly.
  std::vector<char> save(const TensorDesc &t, const void *arena, int64_t i) {
    int64_t size = tessel_dtype_size(t.dtypeCode);
    std::vector<char> bytes(size);
    tessel_copy_to_host(ctx, bytes.data(),
                        static_cast<const char *>(arena) + t.offset + i * size,
                        size);
    return bytes;
  }
  void restore(const TensorDesc &t, void *arena, int64_t i,
               const std::vector<char> &bytes) {
    tessel_copy_to_device(
        ctx, static_cast<char *>(arena) + t.offset + i * int64_t(bytes.size()),
        bytes.data(), bytes.size());
  }

private:
  tessel_ctx *ctx;
  void *staging = nullptr;
};

/// The order in which elements are tried: the largest |gradient| first (a
/// wrong gradient shows there), then every other element of a parameter of
/// at most `maxCandidates`, or distinct uniformly drawn ones up to that
/// many. The check takes them in turn until maxSamples have been compared,
/// passing over elements whose finite differences do not settle.
std::vector<int64_t> candidateOrder(const std::vector<double> &grad,
                                    const std::string &name, uint64_t seed) {
  int64_t n = grad.size();
  if (n == 0)
    return {};
  int64_t largest = 0;
  for (int64_t i = 1; i < n; ++i)
    if (std::fabs(grad[i]) > std::fabs(grad[largest]))
      largest = i;
  std::vector<int64_t> out = {largest};
  if (n <= maxCandidates) {
    for (int64_t i = 0; i < n; ++i)
      if (i != largest)
        out.push_back(i);
    return out;
  }
  std::set<int64_t> chosen = {largest};
  uint64_t key = splitmix64(seed ^ hashName(name));
  for (uint64_t k = 0; int64_t(out.size()) < maxCandidates; ++k) {
    int64_t i = int64_t(splitmix64(key ^ splitmix64(k)) % uint64_t(n));
    if (chosen.insert(i).second)
      out.push_back(i);
  }
  return out;
}

/// The first (largest) step, relative to max(1, |x|), and how often it may
/// be halved.
double firstStep(int32_t dtype) { return dtype == TESSEL_F64 ? 1e-2 : 1e-1; }
int maxHalvings(int32_t dtype) { return dtype == TESSEL_F64 ? 8 : 5; }

/// A gathered global tensor's elements as f64 (f32 or f64 only: a 16-bit
/// parameter is refused before).
std::vector<double> decodeAll(const TensorDesc &t,
                              const std::vector<char> &bytes) {
  // A pipeline stage's gathered slice of a stacked tensor is its own
  // layers only, less than the tensor's global shape.
  std::vector<double> out(bytes.size() / tessel_dtype_size(t.dtypeCode));
  convertFloats(t.dtypeCode, bytes.data(), TESSEL_F64, out.data(),
                int64_t(out.size()));
  return out;
}

/// Where this rank stores global element `g` of `t`: its local element
/// index, or -1 where it holds no copy.
int64_t localIndexOf(const ModelDesc &desc, const TensorDesc &t,
                     const std::vector<int64_t> &coordinates, int64_t g) {
  if (!desc.mesh)
    return g;
  int64_t local = -1;
  forEachRun(blockOf(desc, t, coordinates),
             [&](int64_t localFirst, int64_t globalFirst, int64_t count) {
               if (g >= globalFirst && g < globalFirst + count)
                 local = localFirst + (g - globalFirst);
             });
  return local;
}

double defaultTolerance(int32_t dtype) {
  switch (dtype) {
  case TESSEL_F64:
    return 1e-6;
  case TESSEL_F32:
    return 2e-2;
  default:
    return 2e-1;
  }
}

} // namespace

std::optional<double>
tessel::run::adaptiveDifference(const std::function<double(double)> &f,
                                double h, double noise, double resolution,
                                int maxHalvings) {
  double fh = f(h), fmh = f(-h);
  double previous = (8 * (fh - fmh) - (f(2 * h) - f(-2 * h))) / (12 * h);
  for (int k = 0; k < maxHalvings; ++k) {
    double half = h / 2;
    double fhalf = f(half), fmhalf = f(-half);
    double current = (8 * (fhalf - fmhalf) - (fh - fmh)) / (12 * half);
    double noiseOfCurrent = noise / half;
    double difference = std::fabs(current - previous);
    if (difference <= std::max(noiseOfCurrent, resolution))
      // Settled. Well within noise, the larger step's estimate is the
      // better (less noise, truncation below `difference`); otherwise the
      // smaller step's (less truncation).
      return difference < noiseOfCurrent / 2 ? previous : current;
    h = half;
    fh = fhalf;
    fmh = fmhalf;
    previous = current;
  }
  return std::nullopt;
}

namespace {

/// Where this rank holds a copy of one element of a parameter.
struct ElementCopy {
  const TensorDesc *tensor;
  void *arena;
  int64_t local;
};

/// The partitioned program under check, as every rank sees it: its
/// backward has run on the checked batch.
struct CheckedProgram {
  explicit CheckedProgram(const ModelDesc &desc) : desc(desc) {}
  /// The whole model's description: its parameters and gradients.
  const ModelDesc &desc;
  /// The whole tensor `t` (a parameter or gradient of `desc`) as f64, on
  /// every rank.
  std::function<std::vector<double>(const TensorDesc &t)> global;
  /// The forward's loss with the parameters as they are now: the mean over
  /// the ranks.
  std::function<double()> loss;
  /// This rank's copies of element `i` of parameter `p` (none, one, or a
  /// tied parameter's several).
  std::function<std::vector<ElementCopy>(const TensorDesc &p, int64_t i)>
      copies;
  /// Turns the gradients read into those of `loss`: 1/M where they are the
  /// sum of M microbatches' (a pipeline's step).
  double gradientScale = 1;
};

/// The trainable parameters a gradient reaches that match `patterns` (all
/// when ""); refuses a model without any, none matching, or a 16-bit one.
std::vector<const TensorDesc *> checkedParameters(const ModelDesc &desc,
                                                  const std::string &patterns) {
  std::vector<const TensorDesc *> params;
  std::string trainable;
  for (const TensorDesc *p : desc.withRole("param"))
    if (p->trainable && desc.gradOf(p->name)) {
      trainable += (trainable.empty() ? "" : ", ") + p->name;
      if (patterns.empty() || tessel::matchesAny(patterns, p->name))
        params.push_back(p);
    }
  if (trainable.empty())
    throw RunError("--check-grads: the model has no trainable parameter");
  if (params.empty())
    throw RunError(
        "--grad-params '" + patterns +
        "' matches no trainable parameter (the model's: " + trainable + ")");
  // A perturbation written to a 16-bit parameter rounds to its grid (2^-8
  // relative for bf16), so the finite difference would measure the
  // rounding, not the gradient.
  for (const TensorDesc *p : params)
    if (p->dtypeCode == TESSEL_BF16 || p->dtypeCode == TESSEL_F16)
      throw RunError("--check-grads: parameter '" + p->name + "' is stored in " +
                     p->dtype +
                     ", too coarse for finite differences; check the model "
                     "compiled with --precision f32");
  return params;
}

/// `value` (this rank's) averaged over every rank of `desc`'s mesh.
double meanOverRanks(const ModelDesc &desc, tessel_ctx *ctx, double value) {
  if (!desc.mesh)
    return value;
  std::vector<double> sum = {value};
  allReduceOnHost(ctx, (1u << desc.mesh->axes.size()) - 1, sum,
                  TESSEL_REDUCE_SUM, "averaging the loss over the mesh");
  return sum[0] / double(desc.worldSize());
}

/// Compares the gradients of `params` (checkedParameters') with finite
/// differences of the program's loss (GradCheck.h), every rank in
/// lockstep; the rank given `out` reports.
void compareWithFiniteDifferences(CheckedProgram &program,
                                  const std::vector<const TensorDesc *> &params,
                                  tessel_ctx *ctx,
                                  const GradCheckSettings &settings,
                                  std::FILE *out) {
  const ModelDesc &desc = program.desc;
  // The checked gradients before any forward call overwrites scratch, and
  // their scale: the largest |element| over every trainable parameter,
  // checked or not, so that a parameter's verdict does not depend on which
  // others --grad-params picks.
  std::vector<std::vector<double>> grads;
  double scale = 0;
  for (const TensorDesc *p : checkedParameters(desc, "")) {
    std::vector<double> grad = program.global(*desc.gradOf(p->name));
    for (double &g : grad) {
      g *= program.gradientScale;
      scale = std::max(scale, std::fabs(g));
    }
    if (std::find(params.begin(), params.end(), p) != params.end())
      grads.push_back(std::move(grad));
  }

  // The rounding noise of one loss evaluation: a few units in the last
  // place of the loss's dtype.
  double loss0 = program.loss();
  double unit = desc.loss().dtypeCode == TESSEL_F64 ? 0x1p-53 : 0x1p-24;
  double lossNoise = 2 * unit * std::max(1.0, std::fabs(loss0));

  ElementAccess access(ctx);
  std::string worst, unchecked;
  double worstRel = 0, worstTol = 0;
  bool worstInF64 = false;
  for (size_t k = 0; k < params.size(); ++k) {
    const TensorDesc *p = params[k];
    const std::vector<double> &grad = grads[k];
    std::vector<double> values = program.global(*p);
    double tol = settings.tolerance ? *settings.tolerance
                                    : defaultTolerance(p->dtypeCode);
    double floor = std::max(1e-3 * scale, 1e-300);
    double maxAbs = 0, maxRel = 0;
    int64_t compared = 0, atKinks = 0;
    for (int64_t i : candidateOrder(grad, p->name, settings.seed)) {
      if (compared == maxSamples)
        break;
      // Every rank holding a copy of element i perturbs it; every rank
      // runs the forward.
      std::vector<ElementCopy> copies = program.copies(*p, i);
      std::vector<std::vector<char>> originals;
      for (const ElementCopy &c : copies)
        originals.push_back(access.save(*c.tensor, c.arena, c.local));
      double x = values[i];
      double a = grad[i];
      double h = firstStep(p->dtypeCode) * std::max(1.0, std::fabs(x));
      // Estimates agreeing to a quarter of the tolerance are settled.
      double resolution = tol / 4 * std::max(std::fabs(a), floor);
      std::optional<double> fd = adaptiveDifference(
          [&](double offset) {
            for (const ElementCopy &c : copies)
              access.write(*c.tensor, c.arena, c.local, x + offset);
            return program.loss();
          },
          h, lossNoise, resolution, maxHalvings(p->dtypeCode));
      for (size_t c = 0; c < copies.size(); ++c)
        access.restore(*copies[c].tensor, copies[c].arena, copies[c].local,
                       originals[c]);
      if (!fd) {
        ++atKinks;
        continue;
      }
      ++compared;
      double abs = std::fabs(a - *fd);
      double rel =
          abs == 0 ? 0 : abs / std::max({std::fabs(a), std::fabs(*fd), floor});
      maxAbs = std::max(maxAbs, abs);
      maxRel = std::max(maxRel, rel);
    }
    if (out) {
      std::string kinks;
      if (atKinks)
        kinks = ", " + std::to_string(atKinks) +
                " passed over: finite differences did not settle";
      std::fprintf(out,
                   "grad-check %s: max abs err %.3g, max rel err %.3g (%lld "
                   "elements%s)\n",
                   p->name.c_str(), maxAbs, maxRel, (long long)compared,
                   kinks.c_str());
      std::fflush(out);
    }
    // Fewer than half the samples wanted (maxSamples, or every element of
    // a smaller parameter) is more than a ReLU's scattered kinks: the loss
    // is not differentiable at the step's scale for this parameter (kinks
    // denser than the smallest step, or f32 noise the stencil cannot beat).
    int64_t wanted = std::min<int64_t>(maxSamples, int64_t(grad.size()));
    if (2 * compared < wanted && unchecked.empty())
      unchecked =
          p->name + "': " + std::to_string(atKinks) + " of " +
          std::to_string(atKinks + compared) +
          " sampled elements are not differentiable at the "
          "finite-difference step (check it " +
          (p->dtypeCode == TESSEL_F64 ? "" : "in f64 (--precision f64), or ") +
          "with a smooth activation in place of ReLU or max)";
    if (maxRel > tol && (worst.empty() || maxRel / tol > worstRel / worstTol)) {
      worst = p->name;
      worstInF64 = p->dtypeCode == TESSEL_F64;
      worstRel = maxRel;
      worstTol = tol;
    }
  }
  // Every rank reaches the same verdict; the reporting rank gives it.
  if (!worst.empty() && out) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.3g > tolerance %.3g", worstRel,
                  worstTol);
    throw RunError("gradient check failed: parameter '" + worst +
                   "' has max rel err " + buf +
                   (worstInF64 ? ""
                               : " (in f32 a check is indicative only: "
                                 "--precision f64 checks the model in "
                                 "f64)"));
  }
  if (!unchecked.empty() && out)
    throw RunError("gradient check inconclusive: parameter '" + unchecked);
}

} // namespace

void tessel::run::checkGradients(const LoadedModel &model, tessel_ctx *ctx,
                                 void *arena, BatchSource &batches,
                                 int64_t step, int64_t microbatch,
                                 const GradCheckSettings &settings,
                                 std::FILE *out,
                                 const std::vector<int64_t> &coordinates) {
  const ModelDesc &desc = model.desc;
  if (desc.pipeline)
    throw RunError("--check-grads: '" + desc.source +
                   "' is a pipeline (checkPipelineGradients checks it)");
  if (!model.backward)
    throw RunError("--check-grads needs a model compiled for training; '" +
                   desc.source + "' has no backward entry");
  std::vector<const TensorDesc *> params =
      checkedParameters(desc, settings.params);

  // One backward call on one microbatch: the gradients of its loss.
  tessel_set_step(ctx, uint64_t(step));
  batches.fill(microbatch, ctx, arena);
  zeroGrads(desc, ctx, arena);
  model.backward(ctx, arena);
  tessel_synchronize(ctx);
  checkKernelError(ctx, "the backward entry");

  CheckedProgram program(desc);
  // A counted loss (loss_count) is checked as the launcher trains it: the
  // sum over the count, which depends on no parameter.
  StepLoss backwardLoss;
  backwardLoss.add(desc, ctx, arena);
  program.gradientScale = 1.0 / backwardLoss.divisor();
  // Global values, every rank alike: on a mesh, gathered from the blocks
  // (on one device, the tensor's own bytes).
  program.global = [&](const TensorDesc &t) {
    return decodeAll(t, gatherGlobalTensor(desc, t, ctx, arena, true));
  };
  program.loss = [&] {
    model.forward(ctx, arena);
    tessel_synchronize(ctx);
    checkKernelError(ctx, "the forward entry");
    StepLoss loss;
    loss.add(desc, ctx, arena);
    return meanOverRanks(desc, ctx, loss.mean());
  };
  program.copies = [&](const TensorDesc &p, int64_t i) {
    int64_t local = localIndexOf(desc, p, coordinates, i);
    return local < 0 ? std::vector<ElementCopy>{}
                     : std::vector<ElementCopy>{{&p, arena, local}};
  };
  compareWithFiniteDifferences(program, params, ctx, settings, out);
}

void tessel::run::checkPipelineGradients(
    const LoadedModel &model, tessel_ctx *ctx, PipelineRank &pipelined,
    int64_t step, const GradCheckSettings &settings, std::FILE *out,
    const std::vector<int64_t> &coordinates) {
  const ModelDesc &desc = model.desc;
  const PipelineDesc &pipe = *desc.pipeline;
  for (const LoadedModel::StageEntries &stage : model.stages)
    if (!stage.update)
      throw RunError("--check-grads needs a model compiled for training; '" +
                     desc.source + "' has no update entry");
  std::vector<const TensorDesc *> params =
      checkedParameters(desc, settings.params);
  int64_t ppRank = coordinates.at(pipe.axis);

  // The step's schedule without its update: every stage's gradients,
  // summed over the step's microbatches.
  StepLoss accumulated = pipelined.accumulateGradients(step);

  CheckedProgram program(desc);
  program.gradientScale = 1.0 / accumulated.divisor();
  // Each stage's slice gathered over its dp/tp group, then summed over pp
  // with zeros from the ranks not holding it: every rank has the tensor.
  program.global = [&](const TensorDesc &w) {
    std::vector<double> whole(w.numElements());
    int64_t rowsTotal = w.globalShape.empty() ? 1 : w.globalShape[0];
    int64_t rowElements = rowsTotal ? w.numElements() / rowsTotal : 0;
    for (const PipelineDesc::Slice &slice : pipe.slicesOf(w, false)) {
      int64_t count = rowElements * slice.rows;
      std::vector<double> part(count, 0.0);
      if (pipe.rankOf(slice.stage) == ppRank)
        part = decodeAll(
            *slice.tensor,
            gatherGlobalTensor(pipe.stages[slice.stage], *slice.tensor, ctx,
                               pipelined.stageArena(slice.stage), true));
      if (int64_t(part.size()) != count)
        throw RunError("--check-grads: gathered " +
                       std::to_string(part.size()) + " elements of '" + w.name +
                       "' from stage " + std::to_string(slice.stage) +
                       ", expected " + std::to_string(count));
      allReduceOnHost(ctx, 1u << pipe.axis, part, TESSEL_REDUCE_SUM,
                      "sharing '" + w.name + "' over the pipeline");
      std::copy(part.begin(), part.end(),
                whole.begin() + slice.firstRow * rowElements);
    }
    return whole;
  };
  program.loss = [&] {
    return meanOverRanks(desc, ctx, pipelined.evalStep(step));
  };
  // Every stage of this rank holding element i: a stacked parameter's
  // layers are split between stages (blockOf places a stage's rows in the
  // whole tensor), a tied one is whole on each holder.
  program.copies = [&](const TensorDesc &p, int64_t i) {
    std::vector<ElementCopy> copies;
    for (const PipelineDesc::Slice &slice : pipe.slicesOf(p, true)) {
      if (pipe.rankOf(slice.stage) != ppRank)
        continue;
      int64_t local =
          localIndexOf(pipe.stages[slice.stage], *slice.tensor, coordinates, i);
      if (local >= 0)
        copies.push_back(
            {slice.tensor, pipelined.stageArena(slice.stage), local});
    }
    return copies;
  };
  compareWithFiniteDifferences(program, params, ctx, settings, out);
}
