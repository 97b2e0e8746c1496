//===- SafeRunTest.cpp - tessel-run never loses a run ---------------------===//
//
// Outputs that never clobber inputs, and checkpoints written atomically.
//
//===----------------------------------------------------------------------===//

#include "test/launcher/LauncherTestSupport.h"

#include <chrono>
#include <sys/stat.h>
#include <unistd.h>
#include <utime.h>

using namespace tessel::run::test;

namespace {

const std::string trainable = quote(FAKE_TRAIN_MODEL);
const std::string lm = quote(FAKE_LM_MODEL);
// Far more steps than any test waits for: these runs must fail first.
const std::string forever = " --steps 1000000000 --quiet";

using Clock = std::chrono::steady_clock;

class SafeRunTest : public TesselRunTest {
protected:
  int64_t checkpointStep(const fs::path &file) {
    Checkpoint c = readCheckpoint(file);
    return std::stoll(
        c.header["__metadata__"]["tessel.step"].get<std::string>());
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

} // namespace
