//===- Args.h - tessel-run's command line ---------------------------------===//

#ifndef TESSEL_RUN_ARGS_H
#define TESSEL_RUN_ARGS_H

#include "runtime/config/TrainConfig.h"
#include "runtime/launcher/MeshBlocks.h"
#include "tessel/runtime.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessel::run {

/// Why --graph refuses a pipeline (on the command line's mesh, or a .so
/// compiled with one).
inline constexpr const char *kGraphPipelineRefusal =
    "--graph: a pipeline's stages exchange activations through host memory "
    "(tessel_send, tessel_recv), which a captured step cannot hold; drop "
    "--graph";

enum class TokenDtype { U8, U16, I32 };

/// How the ranks of a mesh talk: threads of this process (shared memory),
/// one process per rank under mpirun, or one per rank joined over TCP
/// (torchrun; Torchrun.h).
enum class CommBackend { Local, Mpi, Tcp };

/// A training flag as given (one per setting of
/// runtime/config/TrainSettings.def: compiled into the .so, so a .mlir
/// model passes it to tessel-compile and a .so must have been compiled with
/// it), its value validated and normalised ("" for a switch; schedule names
/// spelled with '-').
struct TrainingFlag {
  const TrainSetting *setting;
  std::string value;

  /// "--weight-decay".
  std::string flag() const { return std::string("--") + setting->flag; }
  bool isSwitch() const { return setting->kind == TrainSettingKind::Switch; }
};

struct Options {
  std::string model; // MODEL.so or MODEL.mlir
  int64_t steps = 10;
  uint64_t seed = 0;
  std::string data;
  TokenDtype dataDtype = TokenDtype::U16;
  // --labels FILE: the label of each token of --data (a loss's
  // ignore_index where it teaches nothing), instead of the next token.
  std::string labels;
  std::string metrics;
  std::string trace; // --trace FILE: one step's timeline (TraceFile.h)
  std::string save;
  // --save-sharded DIR: each rank's own tensors, one file per rank, plus
  // an index (ShardedCheckpoint.h).
  std::string saveSharded;
  int64_t saveEvery = 0; // --save-every N: also after every N-th step
  std::string load;
  int64_t logEvery = 10;
  bool quiet = false;
  bool help = false;
  // Training: microbatches per step; --eval runs the forward entry only;
  // --check-grads compares the backward entry with finite differences.
  int64_t microbatches = 1;
  // --microbatches was given (a pipeline's count is compiled in).
  bool microbatchesGiven = false;
  bool eval = false;
  bool checkGrads = false;
  // --eval-every N: a held-out loss after every N-th training step (0:
  // never) over --eval-steps batches of --eval-data (and --eval-labels),
  // or of a held-out synthetic stream.
  int64_t evalEvery = 0;
  int64_t evalSteps = 10;
  bool evalStepsGiven = false;
  std::string evalData, evalLabels;
  // --graph: the training step captured once (tessel_graph_*) after the
  // first, and launched every step after (CUDA graphs on a GPU).
  bool graph = false;
  std::optional<double> gradTol;
  // --grad-params: the name patterns of the parameters --check-grads checks
  // ("" all).
  std::string gradParams;
  std::vector<TrainingFlag> training; // in the order given, each flag once
  // Parallelism: the mesh to partition for (a .mlir) or to check a .so
  // against, and the communication backend. The partitioning flags go to
  // tessel-compile (a .mlir model only).
  std::optional<Mesh> mesh;
  // --mesh auto: a .mlir compiled for the split tessel-compile --mesh auto
  // picks over `planDevices` devices of model `planDevice` ("": its
  // default); the run then takes the compiled mesh.
  bool meshAuto = false;
  int64_t planDevices = 0;
  int64_t planNodes = 0; // --nodes (0: not given)
  std::string planDevice;
  CommBackend comm = CommBackend::Local;
  bool commGiven = false; // --comm given (else torchrun's env picks tcp)
  // The runtime backend (tessel_ctx_options): cuda when the runtime has it
  // and a GPU is visible, else cpu, unless --backend names one.
  std::string backend = tessel_backend_available("cuda") ? "cuda" : "cpu";
  double commTimeoutSeconds = 0; // 0: the runtime's default (600 s)
  std::string precision; // --precision, as given ("": the model's)
  std::string gradPrecision; // --grad-precision, as given ("": the model's)
  std::string rules;    // --rules, as given
  std::string bucketMb; // --bucket-mb, as given
  std::string overlap;  // --overlap, as given (collectives in flight)
  bool sequenceParallel = false;
  bool localBatchnorm = false;
  std::string zero;                   // --zero, as given
  bool noReshardAfterForward = false; // --no-reshard-after-forward
  // Pipeline flags for tessel-compile, as given (a pp mesh only).
  std::string pipelineSchedule, stageLayers, virtualStages;
  bool stageRecompute = false; // --stage-recompute

  /// The partitioning flags given besides --mesh, as the user wrote them
  /// ("--rules", "--sequence-parallel", ...).
  std::vector<std::string> partitioningFlags() const;
  /// Whether partitioning flag `flag` sets the pipeline (needs pp > 1).
  static bool isPipelineFlag(const std::string &flag);

  /// The value of training flag `flag` ("--lr") if given.
  const std::string *trainingValue(const std::string &flag) const;
};

/// Parses argv; throws UsageError on an unknown flag, a missing or bad value
/// or a missing model path (unless --help).
Options parseArgs(int argc, char **argv);

/// The full --help text.
std::string usageText();

} // namespace tessel::run

#endif // TESSEL_RUN_ARGS_H
