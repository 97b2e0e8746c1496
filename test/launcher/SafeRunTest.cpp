//===- SafeRunTest.cpp - tessel-run never loses a run ---------------------===//
//
// Outputs that never clobber inputs, checkpoints written atomically (also
// every N steps), SIGINT and SIGTERM that stop at a step boundary and save,
// and kill -9 at random moments that always leaves a loadable checkpoint.
//
//===----------------------------------------------------------------------===//

#include "test/launcher/LauncherTestSupport.h"

#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <random>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <utime.h>

using namespace tessel::run::test;

namespace {

const std::string trainable = quote(FAKE_TRAIN_MODEL);
const std::string lm = quote(FAKE_LM_MODEL);
const std::string dp2tp2 = quote(FAKE_SHARDED_DP2_TP2);
const std::string dp2 = quote(FAKE_SHARDED_DP2);
// Far more steps than any test waits for: these runs end by a signal.
const std::string forever = " --steps 1000000000 --quiet";

using Clock = std::chrono::steady_clock;

class SafeRunTest : public TesselRunTest {
protected:
  /// Starts tessel-run with `args` (words, no shell) in the background,
  /// stdout and stderr to files of the test folder.
  pid_t spawn(const std::vector<std::string> &args) {
    fs::path err = dir / "spawn-stderr.txt";
    pid_t pid = ::fork();
    if (pid == 0) {
      int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, STDERR_FILENO);
      ::dup2(fd, STDOUT_FILENO);
      std::vector<char *> argv = {const_cast<char *>(TESSEL_RUN_PATH)};
      for (const std::string &a : args)
        argv.push_back(const_cast<char *>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(TESSEL_RUN_PATH, argv.data());
      ::_exit(127);
    }
    return pid;
  }

  /// Waits (at most 20 s) until `file` holds `lines` complete lines.
  bool waitForLines(const fs::path &file, size_t lines) {
    for (auto start = Clock::now();
         Clock::now() - start < std::chrono::seconds(20);) {
      std::string text = readFile(file);
      if (size_t(std::count(text.begin(), text.end(), '\n')) >= lines)
        return true;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return false;
  }

  /// The exit status of `pid` (waited for at most 20 s, then killed: -1).
  int waitExit(pid_t pid, bool *signalled = nullptr) {
    int status = 0;
    for (auto start = Clock::now();
         Clock::now() - start < std::chrono::seconds(20);) {
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        if (signalled)
          *signalled = WIFSIGNALED(status);
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    return -1;
  }

  /// The last complete metrics line of `file`.
  json lastLine(const fs::path &file) {
    std::string text = readFile(file);
    size_t end = text.rfind('\n');
    if (end == std::string::npos)
      return json();
    size_t begin = text.rfind('\n', end - 1);
    begin = begin == std::string::npos ? 0 : begin + 1;
    return json::parse(text.substr(begin, end - begin));
  }

  int64_t checkpointStep(const fs::path &file) {
    Checkpoint c = readCheckpoint(file);
    return std::stoll(
        c.header["__metadata__"]["tessel.step"].get<std::string>());
  }

  /// Expects that `checkpoint` (saved after `step` steps of `model`)
  /// resumes as an uninterrupted run: the next step's loss is the one an
  /// uninterrupted run of step + 1 steps ends with.
  void expectResumesAt(const std::string &model, const fs::path &checkpoint,
                       int64_t step) {
    std::vector<json> resumed =
        metricLines(model + " --steps 1 --load " + quote(checkpoint.string()));
    ASSERT_EQ(resumed.size(), 1u);
    EXPECT_EQ(resumed[0].at("step").get<int64_t>(), step + 1);
    std::vector<double> whole =
        losses(model + " --steps " + std::to_string(step + 1));
    ASSERT_EQ(whole.size(), size_t(step + 1));
    EXPECT_EQ(resumed[0].at("loss").get<double>(), whole.back());
  }

  /// Sends `signal` to a long run of `model` once its metrics file has a
  /// line; expects exit 128 + signal, a one-line message, and a checkpoint
  /// of the last metrics line's step that resumes the run.
  void expectSignalStopsAndSaves(const std::string &model,
                                 const std::string &modelPath, int signal) {
    fs::path metrics = dir / "m.jsonl", saved = dir / "stop.safetensors";
    fs::remove(metrics);
    fs::remove(saved);
    pid_t pid =
        spawn({modelPath, "--steps", "1000000000", "--quiet", "--metrics",
               metrics.string(), "--save", saved.string()});
    ASSERT_TRUE(waitForLines(metrics, 1));
    ::kill(pid, signal);
    EXPECT_EQ(waitExit(pid), 128 + signal);
    std::string err = readFile(dir / "spawn-stderr.txt");
    EXPECT_TRUE(isOneLine(err)) << err;
    std::string name = signal == SIGINT ? "SIGINT" : "SIGTERM";
    EXPECT_NE(err.find("stopped by " + name + " after step "),
              std::string::npos)
        << err;
    int64_t step = lastLine(metrics).at("step").get<int64_t>();
    EXPECT_EQ(checkpointStep(saved), step);
    EXPECT_NE(err.find("after step " + std::to_string(step) + ";"),
              std::string::npos)
        << err;
    expectResumesAt(model, saved, step);
  }
};

// Tests that an output path naming an input (directly, through a symlink or
// a hard link) is a usage error before anything is written: the input is
// left as it was.
TEST_F(SafeRunTest, OutputsNeverClobberInputs) {
  ASSERT_EQ(
      run(trainable + " --steps 2 --quiet --save " + path("ck.st")).exitCode,
      0);
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 41; ++i)
    tokens.push_back(uint16_t(i * 7 % 16));
  writeFile(dir / "tokens.bin",
            std::string(reinterpret_cast<const char *>(tokens.data()), 82));
  fs::copy_file(FAKE_TRAIN_MODEL, dir / "model.so");
  fs::create_symlink(dir / "ck.st", dir / "ck-link.st");
  fs::create_symlink(dir / "model.so", dir / "model-link.so");
  fs::create_hard_link(dir / "tokens.bin", dir / "tokens-hard.bin");
  std::map<std::string, std::string> before;
  for (const char *name : {"ck.st", "tokens.bin", "model.so"})
    before[name] = readFile(dir / name);

  const std::string model = path("model.so");
  struct Case {
    std::string args, message;
  };
  std::vector<Case> cases = {
      {model + " --load " + path("ck.st") + " --metrics " + path("ck.st"),
       "--metrics '" + (dir / "ck.st").string() + "' is the --load checkpoint"},
      {model + " --load " + path("ck.st") + " --metrics " + path("ck-link.st"),
       "is the --load checkpoint"},
      {lm + " --data " + path("tokens.bin") + " --metrics " +
           path("tokens.bin"),
       "is the --data file"},
      {lm + " --data " + path("tokens.bin") + " --metrics " +
           path("tokens-hard.bin"),
       "is the --data file"},
      {model + " --metrics " + model,
       "--metrics '" + (dir / "model.so").string() + "' is the model"},
      {model + " --save " + model, "is the model"},
      {model + " --save " + path("model-link.so"), "is the model"},
      {lm + " --data " + path("tokens.bin") + " --save " + path("tokens.bin"),
       "is the --data file"},
      {model + " --metrics " + path("out") + " --save " + path("out"),
       "--save '" + (dir / "out").string() + "' is also the --metrics file"},
  };
  for (const Case &c : cases) {
    RunResult r = run(c.args + " --steps 2 --quiet");
    EXPECT_EQ(r.exitCode, 2) << c.args;
    EXPECT_TRUE(isOneLine(r.err)) << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
    if (c.message.find("also") == std::string::npos) {
      EXPECT_NE(r.err.find("refusing to overwrite it"), std::string::npos)
          << r.err;
    }
    for (auto &[name, bytes] : before)
      EXPECT_EQ(readFile(dir / name), bytes) << name << " after " << c.args;
  }
  EXPECT_FALSE(fs::exists(dir / "out"));
}

// Tests that --save over the --load checkpoint (a resume that keeps one
// file) is allowed: the write is atomic and the load is done by then.
TEST_F(SafeRunTest, SaveOverTheLoadedCheckpointResumes) {
  ASSERT_EQ(
      run(trainable + " --steps 2 --quiet --save " + path("ck.st")).exitCode,
      0);
  RunResult r = run(trainable + " --steps 2 --quiet --load " + path("ck.st") +
                    " --save " + path("ck.st"));
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(checkpointStep(dir / "ck.st"), 4);
}

// Tests that a --save path that cannot be written fails at once, before
// the first step (a run of a billion steps would not end otherwise) and
// before the metrics file is created.
TEST_F(SafeRunTest, UnwritableSaveFailsBeforeTraining) {
  for (std::string save :
       {(dir / "missing" / "ck.st").string(), dir.string()}) {
    auto start = Clock::now();
    RunResult r = run(trainable + forever + " --metrics " + path("m.jsonl") +
                      " --save " + quote(save));
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
    EXPECT_EQ(r.exitCode, 1) << save;
    EXPECT_TRUE(isOneLine(r.err)) << r.err;
    EXPECT_NE(r.err.find("cannot write --save file '" + save + "'"),
              std::string::npos)
        << r.err;
    EXPECT_FALSE(fs::exists(dir / "m.jsonl"));
  }
}

// Tests that a checkpoint is written through a temporary of its own (no
// temporary left after a save, the mode a plain create gives) and that a
// stale temporary of a dead writer is removed, while a live writer's, an
// unrelated file and a fresh one are kept.
TEST_F(SafeRunTest, CheckpointTemporariesAreUniqueAndStaleOnesRemoved) {
  pid_t dead = ::fork();
  if (dead == 0)
    ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  std::string deadName = "ck.st.tmp." + std::to_string(dead) + ".abcdef";
  std::string liveName = "ck.st.tmp." + std::to_string(::getpid()) + ".abcdef";
  for (const std::string &name : {deadName, liveName, std::string("ck.st.tmp"),
                                  std::string("other.st.tmp.1.abcdef")})
    writeFile(dir / name, "partial");
  // An hour old: written before the run that finds it.
  struct utimbuf old = {::time(nullptr) - 3600, ::time(nullptr) - 3600};
  for (const std::string &name : {deadName, liveName})
    ASSERT_EQ(::utime((dir / name).c_str(), &old), 0);

  RunResult r = run(trainable + " --steps 2 --quiet --save " + path("ck.st"));
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_FALSE(fs::exists(dir / deadName));
  EXPECT_TRUE(fs::exists(dir / liveName));
  EXPECT_TRUE(fs::exists(dir / "ck.st.tmp")); // Not this writer's pattern.
  EXPECT_TRUE(fs::exists(dir / "other.st.tmp.1.abcdef"));
  size_t files = 0;
  for (const auto &entry : fs::directory_iterator(dir))
    files += entry.path().filename().string().rfind("ck.st.tmp.", 0) == 0;
  EXPECT_EQ(files, 1u); // The live writer's only.

  mode_t mask = ::umask(0);
  ::umask(mask);
  struct stat st;
  ASSERT_EQ(::stat((dir / "ck.st").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666 & ~mask);
}

// Tests that two runs saving to one path at once each leave a whole
// checkpoint of one run (the other's temporary never takes its name).
TEST_F(SafeRunTest, ConcurrentSavesNeverMix) {
  std::string a = trainable +
                  " --steps 300 --seed 1 --save-every 1 --quiet "
                  "--save " +
                  path("ck.st");
  std::string b = trainable +
                  " --steps 300 --seed 2 --save-every 1 --quiet "
                  "--save " +
                  path("ck.st");
  RunResult r = runShell(quote(TESSEL_RUN_PATH) + " " + a + " & " +
                         quote(TESSEL_RUN_PATH) + " " + b + "; wait");
  EXPECT_EQ(r.exitCode, 0) << r.err;
  ASSERT_EQ(
      run(trainable + " --steps 300 --seed 1 --quiet --save " + path("one.st"))
          .exitCode,
      0);
  ASSERT_EQ(
      run(trainable + " --steps 300 --seed 2 --quiet --save " + path("two.st"))
          .exitCode,
      0);
  Checkpoint c = readCheckpoint(dir / "ck.st");
  Checkpoint one = readCheckpoint(dir / "one.st");
  Checkpoint two = readCheckpoint(dir / "two.st");
  EXPECT_TRUE(c.tensors == one.tensors || c.tensors == two.tensors);
  for (const auto &entry : fs::directory_iterator(dir))
    EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos)
        << entry.path();
}

// Tests that --save-every N writes a checkpoint every N steps that resumes
// as an uninterrupted run (killed after a few saves), on one device and on
// a mesh of threads; and that it needs --save.
TEST_F(SafeRunTest, SaveEveryWritesResumableCheckpoints) {
  for (auto [model, modelPath] :
       {std::pair{trainable, std::string(FAKE_TRAIN_MODEL)},
        std::pair{dp2tp2, std::string(FAKE_SHARDED_DP2_TP2)}}) {
    fs::path metrics = dir / "m.jsonl", saved = dir / "every.st";
    fs::remove(metrics);
    fs::remove(saved);
    pid_t pid = spawn({modelPath, "--steps", "1000000000", "--quiet",
                       "--metrics", metrics.string(), "--save", saved.string(),
                       "--save-every", "3"});
    // Step 7's line is written after step 6's save.
    ASSERT_TRUE(waitForLines(metrics, 7));
    ::kill(pid, SIGKILL);
    bool signalled = false;
    waitExit(pid, &signalled);
    EXPECT_TRUE(signalled);
    int64_t step = checkpointStep(saved);
    EXPECT_GE(step, 6);
    EXPECT_EQ(step % 3, 0);
    expectResumesAt(model, saved, step);
  }
  // The file at the end is the one a plain --save writes.
  ASSERT_EQ(
      run(dp2 + " --steps 5 --quiet --save-every 2 --save " + path("a.st"))
          .exitCode,
      0);
  ASSERT_EQ(run(dp2 + " --steps 5 --quiet --save " + path("b.st")).exitCode, 0);
  EXPECT_EQ(readFile(dir / "a.st"), readFile(dir / "b.st"));

  RunResult r = run(trainable + " --save-every 2");
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("--save-every needs --save"), std::string::npos)
      << r.err;
}

// Tests that SIGINT and SIGTERM end a run after the current step with 130
// and 143, the step's metrics line and a checkpoint of that step.
TEST_F(SafeRunTest, SignalsStopAfterAStepAndSave) {
  expectSignalStopsAndSaves(trainable, FAKE_TRAIN_MODEL, SIGINT);
  expectSignalStopsAndSaves(trainable, FAKE_TRAIN_MODEL, SIGTERM);
}

// Tests that on a mesh of threads every rank stops after the same step: the
// gathered checkpoint is that step's and resumes the run.
TEST_F(SafeRunTest, SignalsStopEveryRankOfAMeshAtOneStep) {
  expectSignalStopsAndSaves(dp2tp2, FAKE_SHARDED_DP2_TP2, SIGTERM);
  expectSignalStopsAndSaves(dp2, FAKE_SHARDED_DP2, SIGINT);
}

// Tests that kill -9 at random moments of a --save-every 1 run always
// leaves a checkpoint that loads (a whole one, of some step already run).
TEST_F(SafeRunTest, KillNineAlwaysLeavesALoadableCheckpoint) {
  std::mt19937 random(12345);
  fs::path metrics = dir / "m.jsonl", saved = dir / "ck.st";
  for (int trial = 0; trial < 20; ++trial) {
    fs::remove(metrics);
    pid_t pid = spawn({FAKE_TRAIN_MODEL, "--steps", "1000000000", "--quiet",
                       "--metrics", metrics.string(), "--save", saved.string(),
                       "--save-every", "1"});
    ASSERT_TRUE(waitForLines(metrics, 1));
    std::this_thread::sleep_for(std::chrono::microseconds(random() % 20000));
    ::kill(pid, SIGKILL);
    waitExit(pid);
    if (!fs::exists(saved))
      continue; // Killed before the first save completed.
    int64_t step = checkpointStep(saved);
    EXPECT_GE(step, 1) << "trial " << trial;
    RunResult r =
        run(trainable + " --steps 1 --quiet --load " + quote(saved.string()));
    EXPECT_EQ(r.exitCode, 0) << "trial " << trial << ": " << r.err;
  }
}

} // namespace
