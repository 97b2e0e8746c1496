//===- ModelGemms.h - The GEMMs a compiled model runs, read from its IR ---===//
//
// tessel-bench-step times a model's step against the same GEMMs called
// directly; this is where it finds them: the nn.matmul ops of the planned
// module (what tessel-compile lowers), each as the tessel_matmul call it
// becomes, in execution order (a repeated layer's once per layer).
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_BENCH_MODELGEMMS_H
#define TESSEL_BENCH_MODELGEMMS_H

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Operation.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessel::bench {

/// One nn.matmul as tessel_matmul sees it.
struct Gemm {
  mlir::Operation *op;
  int32_t dtype;
  int64_t batch, m, n, k;
  bool ta, tb, shared;
  int64_t flops() const { return 2 * batch * m * n * k; }
};

/// The tessel_matmul calls of one or more entry functions.
struct GemmList {
  std::vector<Gemm> gemms;      // one per distinct nn.matmul op
  std::vector<size_t> schedule; // indices into gemms, in execution order
  int64_t totalFlops = 0;       // every op of the entries
  int64_t gemmFlops = 0;        // the nn.matmuls (repeat bodies L times)

  double gemmShare() const {
    return totalFlops > 0 ? double(gemmFlops) / double(totalFlops) : 0;
  }
};

struct ModelInfo {
  std::string name;
  GemmList forward;              // the model function (tessel_forward)
  std::optional<GemmList> train; // backward + update entries (a step)
  int64_t backwardFlops = 0;     // the backward entry alone
};

/// "f32", "bf16", ...: a runtime dtype code's name.
const char *dtypeName(int32_t code);

/// Parses `path`, runs the plan pipeline (with the training step when
/// `train`) and lists the GEMMs of the forward and of a training step.
/// Throws BenchError.
ModelInfo analyse(const std::string &path, bool train,
                  mlir::MLIRContext &context);

} // namespace tessel::bench

#endif // TESSEL_BENCH_MODELGEMMS_H
