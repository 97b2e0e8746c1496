//===- ParallelRunTest.cpp - tessel-run on a mesh, with hand-written models
//===//
//
// FakeShardedModel partitions FakeTrainModel (batch 16) over dp and tp by
// hand, so the launcher's mesh support — ranks as threads or MPI
// processes, the data and parameter blocks, global checkpoints, the
// communication check — is tested against one device's run without the
// compiler's partitioning.
//
//===----------------------------------------------------------------------===//

#include "test/launcher/LauncherTestSupport.h"

#include <chrono>
#include <csignal>
#include <thread>
#include <unistd.h>

using namespace tessel::run::test;

namespace {

const std::string oneDevice = quote(FAKE_TRAIN_MODEL_BATCH_16);
const std::string dp2 = quote(FAKE_SHARDED_DP2);
const std::string tp2 = quote(FAKE_SHARDED_TP2);
const std::string dp2tp2 = quote(FAKE_SHARDED_DP2_TP2);
const std::string dp4 = quote(FAKE_SHARDED_DP4);
const std::string failing = quote(FAKE_SHARDED_FAIL);

class TesselRunParallelTest : public TesselRunTest {
protected:
  /// Runs `model` for `args` with --save into `name`; returns the losses of
  /// its metrics and expects no warning on stderr.
  std::vector<double> train(const std::string &model, const std::string &args,
                            const std::string &name) {
    fs::path metrics = dir / (name + ".jsonl");
    RunResult r = run(model + " " + args + " --quiet --metrics " +
                      quote(metrics.string()) + " --save " + path(name));
    EXPECT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(r.err, "") << model; // No counter warning either.
    std::vector<double> out;
    std::ifstream in(metrics);
    for (std::string line; std::getline(in, line);)
      out.push_back(json::parse(line).at("loss").get<double>());
    return out;
  }

  /// Every tensor of checkpoint `a` within 1e-5 of `b`'s (scaledError).
  void expectSameTensors(const std::string &a, const std::string &b) {
    Checkpoint x = readCheckpoint(dir / a), y = readCheckpoint(dir / b);
    ASSERT_FALSE(y.tensors.empty()) << b;
    EXPECT_EQ(x.header["__metadata__"], y.header["__metadata__"]);
    ASSERT_EQ(x.tensors.size(), y.tensors.size());
    for (auto &[name, bytes] : y.tensors) {
      EXPECT_EQ(x.header[name]["shape"], y.header[name]["shape"]) << name;
      EXPECT_LE(scaledError(x.tensors[name], bytes), 1e-5)
          << a << " vs " << b << ": " << name;
    }
  }
};

void expectSameLosses(const std::vector<double> &a,
                      const std::vector<double> &b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_LE(std::fabs(a[i] - b[i]), 1e-5 * std::fabs(b[i])) << "step " << i;
}

// Tests that every mesh trains what one device trains: the losses, the
// parameters and Adam's moments after 3 steps (relative error <= 1e-5).
TEST_F(TesselRunParallelTest, ShardedFakesTrainAsOneDevice) {
  std::vector<double> reference = train(oneDevice, "--steps 3", "one");
  ASSERT_EQ(reference.size(), 3u);
  for (const auto &[model, name] :
       std::vector<std::pair<std::string, std::string>>{
           {dp2, "dp2"}, {tp2, "tp2"}, {dp2tp2, "dp2tp2"}, {dp4, "dp4"}}) {
    SCOPED_TRACE(name);
    expectSameLosses(train(model, "--steps 3", name), reference);
    expectSameTensors(name, "one");
  }
  // The checkpoint holds the global tensors under their names.
  Checkpoint c = readCheckpoint(dir / "dp2tp2");
  EXPECT_EQ(c.header["fc.weight"]["shape"], json({8, 5}));
  EXPECT_EQ(c.header["fc.weight.v"]["shape"], json({8, 5}));
  EXPECT_EQ(c.header["__metadata__"]["tessel.step"], "3");
}

// Tests that microbatches on a mesh see one device's microbatches (and that
// a step's counters are backward x M + update).
TEST_F(TesselRunParallelTest, MicrobatchesOnAMesh) {
  expectSameLosses(train(dp2tp2, "--steps 2 --microbatches 3", "mesh"),
                   train(oneDevice, "--steps 2 --microbatches 3", "one"));
  expectSameTensors("mesh", "one");
}

TEST_F(TesselRunParallelTest, SummaryAndMetricsReportTheCommunication) {
  RunResult r =
      run(dp2tp2 + " --steps 2 --log-every 1 --metrics " + path("m.jsonl"));
  ASSERT_EQ(r.exitCode, 0) << r.err;
  // Rank 0 alone reports.
  EXPECT_EQ(r.err.find("step 1/2 loss"), r.err.rfind("step 1/2 loss")) << r.err;
  EXPECT_NE(r.err.find("global batch 16 = 1 x 16, mesh dp=2,tp=2 (4 ranks, "
                       "threads)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(") per rank\n"), std::string::npos) << r.err;
  // dp: the loss and W's gradient (4 + 4·5·4 bytes); tp: the logits
  // (8·5·4) and the clipping norm (4).
  EXPECT_NE(r.err.find("communication per step: all_reduce over dp: 2 calls, "
                       "84 bytes; all_reduce over tp: 2 calls, 164 bytes\n"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
  std::ifstream in(dir / "m.jsonl");
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);)
    lines.push_back(json::parse(line));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["comm"],
            json::parse(R"({"all_reduce dp": {"calls": 2, "bytes": 84},
                            "all_reduce tp": {"calls": 2, "bytes": 164}})"));
  EXPECT_FALSE(lines[1].contains("comm"));

  // An evaluation runs the forward: one all-reduce of each.
  r = run(dp2tp2 + " --eval --steps 1 --microbatches 2");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.err.find("communication per step: all_reduce over dp: 2 calls, "
                       "8 bytes; all_reduce over tp: 2 calls, 320 bytes\n"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
  // One device has no communication to report.
  r = run(oneDevice + " --steps 1");
  EXPECT_EQ(r.err.find("communication"), std::string::npos) << r.err;
}

// Tests that checkpoints hold global tensors: saved on one mesh (or one
// device), they resume on another as if nothing had changed.
TEST_F(TesselRunParallelTest, CheckpointsMoveBetweenMeshes) {
  std::vector<double> whole = train(oneDevice, "--steps 3", "whole");
  train(tp2, "--steps 2", "tp2");
  std::vector<double> resumed =
      train(dp2, "--steps 1 --load " + path("tp2"), "dp2");
  ASSERT_EQ(resumed.size(), 1u);
  EXPECT_LE(std::fabs(resumed[0] - whole[2]), 1e-5 * whole[2]);
  expectSameTensors("dp2", "whole");

  train(oneDevice, "--steps 2", "one2");
  resumed = train(dp2tp2, "--steps 1 --load " + path("one2"), "mesh3");
  EXPECT_LE(std::fabs(resumed[0] - whole[2]), 1e-5 * whole[2]);
  expectSameTensors("mesh3", "whole");

  train(dp4, "--steps 2", "dp4");
  resumed = train(oneDevice, "--steps 1 --load " + path("dp4"), "one3");
  EXPECT_LE(std::fabs(resumed[0] - whole[2]), 1e-5 * whole[2]);
  expectSameTensors("one3", "whole");
}

TEST_F(TesselRunParallelTest, TheMeshMustMatchTheSo) {
  RunResult r = run(dp2 + " --mesh tp=2");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_TRUE(isOneLine(r.err)) << r.err;
  EXPECT_NE(r.err.find("--mesh tp=2 differs from the mesh dp=2 that model '" +
                       std::string(FAKE_SHARDED_DP2) +
                       "' was compiled for (the partitioning is compiled "
                       "in); recompile with tessel-compile "
                       "fake/sharded.mlir --mesh tp=2 -o"),
            std::string::npos)
      << r.err;
  r = run(oneDevice + " --mesh dp=2");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("--mesh dp=2 differs from the one device that model"),
            std::string::npos)
      << r.err;
  // The mesh it was compiled for is accepted, spelled either way.
  EXPECT_EQ(run(dp2tp2 + " --steps 1 --quiet --mesh dp=2,tp=2").exitCode, 0);

  r = run(dp2 + " --mesh dp=2 --rules rules.txt");
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_TRUE(isOneLine(r.err)) << r.err;
  EXPECT_NE(r.err.find("--rules only with a .mlir model"), std::string::npos)
      << r.err;
  // The gradient check runs on the mesh it was compiled for, every rank
  // taking part: the hand-partitioned fakes' gradients match finite
  // differences (f32, the default tolerance), printed once.
  for (const std::string &model : {dp2, dp2tp2}) {
    r = run(model + " --check-grads");
    EXPECT_EQ(r.exitCode, 0) << r.err;
    size_t at = r.out.find("grad-check fc.weight: ");
    EXPECT_NE(at, std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("grad-check", at + 1), std::string::npos) << r.out;
  }
}

TEST_F(TesselRunParallelTest, MlirGetsTheMeshAndThePartitioningFlags) {
  fs::copy_file(TESSEL_RUN_PATH, dir / "tessel-run");
  auto standIn = [&](const std::string &model) {
    writeFile(dir / "tessel-compile",
              "#!/bin/sh\necho \"$@\" >" + path("args.txt") +
                  "\n[ \"$2\" = -o ] && cp " + model + " \"$3\"\n");
    fs::permissions(dir / "tessel-compile", fs::perms::owner_all);
  };
  standIn(dp2);
  writeFile(dir / "m.mlir", "func.func @loss() { return }\n");
  RunResult r = run(path("m.mlir") +
                        " --steps 1 --quiet --mesh dp=2 --rules r.txt "
                        "--sequence-parallel --local-batchnorm --bucket-mb 25",
                    (dir / "tessel-run").string());
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(readFile(dir / "args.txt")
                .find("/model.so --mesh dp=2 --rules r.txt "
                      "--sequence-parallel --local-batchnorm --bucket-mb 25\n"),
            std::string::npos)
      << readFile(dir / "args.txt");
  // A compiler that does not partition is caught.
  standIn(oneDevice);
  r = run(path("m.mlir") + " --steps 1 --mesh dp=2",
          (dir / "tessel-run").string());
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_TRUE(isOneLine(r.err)) << r.err;
  EXPECT_NE(r.err.find("tessel-compile ignored --mesh dp=2: '" +
                       (dir / "m.mlir").string() +
                       "' was compiled for one device"),
            std::string::npos)
      << r.err;
}

// Tests that a rank failing outside a collective stops the run at once,
// named, instead of leaving the other ranks waiting.
TEST_F(TesselRunParallelTest, AFailingRankStopsEveryRank) {
  auto start = std::chrono::steady_clock::now();
  RunResult r = run(failing + " --steps 3");
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_LT(seconds, 60.0);
  EXPECT_EQ(r.err, "tessel-run: error: rank 1: step 2 (backward, microbatch "
                   "1): tessel_init_param: unknown init kind 99\n");
}

//===--- MPI: one process per rank ----------------------------------------===//

class TesselRunMpiTest : public TesselRunParallelTest {
protected:
  void SetUp() override {
    TesselRunParallelTest::SetUp();
    if (std::system("command -v mpirun >/dev/null 2>&1") != 0)
      GTEST_SKIP() << "mpirun not found";
    // A runtime built without MPI says so; skip rather than fail.
    RunResult r = mpirun(1, oneDevice + " --steps 1 --quiet --comm mpi");
    if (r.err.find("without MPI") != std::string::npos)
      GTEST_SKIP() << r.err;
    ASSERT_EQ(r.exitCode, 0) << r.err;
  }

  RunResult mpirun(int processes, const std::string &args) {
    return runShell("mpirun --allow-run-as-root --oversubscribe -np " +
                    std::to_string(processes) + " " + quote(TESSEL_RUN_PATH) +
                    " " + args);
  }
};

// Tests that MPI processes compute what threads compute: the collectives
// reduce in the same order on both, so the runs agree bit for bit.
TEST_F(TesselRunMpiTest, MpiRanksTrainAsThreads) {
  std::vector<double> threads = train(dp2tp2, "--steps 3", "threads");
  RunResult r =
      mpirun(4, dp2tp2 + " --comm mpi --steps 3 --log-every 1 --metrics " +
                    path("mpi.jsonl") + " --save " + path("mpi"));
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("mesh dp=2,tp=2 (4 ranks, MPI)"), std::string::npos)
      << r.err;
  // Rank 0 alone reports.
  EXPECT_EQ(r.err.find("step 3/3"), r.err.rfind("step 3/3")) << r.err;
  std::vector<double> mpi;
  std::ifstream in(dir / "mpi.jsonl");
  for (std::string line; std::getline(in, line);)
    mpi.push_back(json::parse(line).at("loss").get<double>());
  EXPECT_EQ(mpi, threads);
  EXPECT_EQ(readCheckpoint(dir / "mpi").tensors,
            readCheckpoint(dir / "threads").tensors);
}

TEST_F(TesselRunMpiTest, MpiFailuresNameTheRankAndEndEveryProcess) {
  RunResult r = mpirun(2, dp2tp2 + " --comm mpi --steps 1");
  EXPECT_NE(r.exitCode, 0);
  EXPECT_NE(r.err.find("mpirun started 2 processes; model '" +
                       std::string(FAKE_SHARDED_DP2_TP2) +
                       "' runs on mesh dp=2,tp=2: 4 ranks, one process each "
                       "(mpirun -np 4)"),
            std::string::npos)
      << r.err;
  auto start = std::chrono::steady_clock::now();
  r = mpirun(4, failing + " --comm mpi --steps 3");
  EXPECT_NE(r.exitCode, 0);
  EXPECT_LT(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count(),
      120.0);
  EXPECT_NE(r.err.find("tessel-run: error: rank 1: step 2 (backward, "
                       "microbatch 1): tessel_init_param: unknown init kind "
                       "99\n"),
            std::string::npos)
      << r.err;
}

// Tests that SIGTERM sent to one MPI process (rank 1) stops every process
// after the same step: the flag is all-reduced between steps, rank 0 saves
// that step's checkpoint before any process exits, and reports once.
TEST_F(TesselRunMpiTest, SignalToOneProcessStopsEveryRankAtOneStep) {
  fs::path metrics = dir / "m.jsonl", saved = dir / "stop.st";
  std::string command =
      "exec mpirun --allow-run-as-root --oversubscribe -np 4 " +
      quote(TESSEL_RUN_PATH) + " " + dp2tp2 +
      " --comm mpi --steps 1000000000 --quiet --metrics " +
      quote(metrics.string()) + " --save " + quote(saved.string()) + " >" +
      path("out.txt") + " 2>" + path("err.txt");
  pid_t mpirunPid = ::fork();
  if (mpirunPid == 0) {
    ::execl("/bin/sh", "sh", "-c", command.c_str(), nullptr);
    ::_exit(127);
  }
  using Clock = std::chrono::steady_clock;
  auto deadline = Clock::now() + std::chrono::seconds(60);
  while (readFile(metrics).find('\n') == std::string::npos &&
         Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // Rank 1: the process whose environment says so and whose command line
  // names this test's metrics file.
  pid_t rank1 = 0;
  for (const auto &entry : fs::directory_iterator("/proc")) {
    std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos)
      continue;
    std::string cmdline = readFile(entry.path() / "cmdline");
    std::string environ = readFile(entry.path() / "environ");
    if (cmdline.find(metrics.string()) != std::string::npos &&
        cmdline.find("mpirun") == std::string::npos &&
        environ.find(std::string("OMPI_COMM_WORLD_RANK=1") + '\0') !=
            std::string::npos)
      rank1 = std::stoi(name);
  }
  ASSERT_NE(rank1, 0) << "rank 1's process not found";
  ::kill(rank1, SIGTERM);
  int status = 0;
  while (::waitpid(mpirunPid, &status, WNOHANG) == 0 &&
         Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (Clock::now() >= deadline) {
    ::kill(mpirunPid, SIGKILL);
    ::waitpid(mpirunPid, &status, 0);
    FAIL() << "mpirun did not end";
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0);
  std::string err = readFile(dir / "err.txt");
  std::string text = readFile(metrics);
  size_t last = text.rfind('\n', text.size() - 2);
  int64_t step = json::parse(text.substr(last == std::string::npos ? 0
                                                                   : last + 1))
                     .at("step")
                     .get<int64_t>();
  std::string stopped =
      "tessel-run: stopped by SIGTERM after step " + std::to_string(step) +
      "; saved '" + saved.string() + "'";
  EXPECT_NE(err.find(stopped), std::string::npos) << err;
  EXPECT_EQ(err.find("stopped by"), err.rfind("stopped by")) << err;
  Checkpoint c = readCheckpoint(saved);
  EXPECT_EQ(c.header["__metadata__"]["tessel.step"], std::to_string(step));
  // The same parameters a run of that many steps on threads ends with.
  train(dp2tp2, "--steps " + std::to_string(step), "threads");
  EXPECT_EQ(c.tensors, readCheckpoint(dir / "threads").tensors);
}

} // namespace
