//===- TorchrunTest.cpp - tessel-run under torchrun's environment ---------===//
//
// torchrun's variables parsed and checked, and tessel-run processes started
// as torchrun starts them (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT set by hand: no torchrun binary is needed)
// training the hand-partitioned fakes over TCP to what threads train, bit
// for bit.
//
//===----------------------------------------------------------------------===//

#include "test/launcher/LauncherTestSupport.h"

#include "runtime/launcher/Args.h"
#include "runtime/launcher/Error.h"
#include "runtime/launcher/Torchrun.h"

#include <chrono>
#include <map>
#include <unistd.h>

using namespace tessel::run;
using namespace tessel::run::test;

namespace {

using Env = std::map<std::string, std::string>;

EnvLookup lookupIn(const Env &env) {
  return [&env](const char *name) -> const char * {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

Env torchrunEnv() {
  return {{"RANK", "3"},
          {"WORLD_SIZE", "4"},
          {"LOCAL_RANK", "1"},
          {"LOCAL_WORLD_SIZE", "2"},
          {"MASTER_ADDR", "node0"},
          {"MASTER_PORT", "29500"},
          {"TORCHELASTIC_RUN_ID", "job7"}};
}

/// The UsageError parseTorchrunEnv throws for `env` ("" if none).
std::string envError(const Env &env) {
  try {
    parseTorchrunEnv(lookupIn(env));
  } catch (const UsageError &e) {
    return e.what();
  }
  return "";
}

// Tests that torchrun's variables are read as torchrun means them.
TEST(TorchrunEnvTest, ReadsTorchrunsVariables) {
  Env env = torchrunEnv();
  EXPECT_TRUE(torchrunDetected(lookupIn(env)));
  TorchrunEnv t = parseTorchrunEnv(lookupIn(env));
  EXPECT_EQ(t.rank, 3);
  EXPECT_EQ(t.worldSize, 4);
  EXPECT_EQ(t.localRank, 1);
  EXPECT_EQ(t.localWorldSize, 2);
  EXPECT_EQ(t.masterAddr, "node0");
  EXPECT_EQ(t.masterPort, 29500);
  EXPECT_FALSE(t.agentStore);
  EXPECT_EQ(t.rendezvousPort, 29500);
  EXPECT_EQ(t.key, "tessel:job7:4:node0:29500");

  // torchrun's own store listens on MASTER_PORT: the next one is ours.
  env["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  t = parseTorchrunEnv(lookupIn(env));
  EXPECT_TRUE(t.agentStore);
  EXPECT_EQ(t.rendezvousPort, 29501);
  env["TORCHELASTIC_USE_AGENT_STORE"] = "False";
  EXPECT_EQ(parseTorchrunEnv(lookupIn(env)).rendezvousPort, 29500);

  env["TESSEL_RENDEZVOUS_KEY"] = "secret";
  EXPECT_EQ(parseTorchrunEnv(lookupIn(env)).key, "secret");

  // LOCAL_RANK alone (no LOCAL_WORLD_SIZE) is accepted as given.
  env.erase("LOCAL_WORLD_SIZE");
  EXPECT_EQ(parseTorchrunEnv(lookupIn(env)).localRank, 1);
  EXPECT_FALSE(torchrunDetected(lookupIn(Env{{"WORLD_SIZE", "4"}})));
}

// Tests that a missing or bad variable is named with what is wrong.
TEST(TorchrunEnvTest, BadVariablesAreNamed) {
  auto without = [](const std::string &name) {
    Env env = torchrunEnv();
    env.erase(name);
    return env;
  };
  auto with = [](const std::string &name, const std::string &value) {
    Env env = torchrunEnv();
    env[name] = value;
    return env;
  };
  const std::string needs = " is not set (--comm tcp needs RANK, WORLD_SIZE, "
                            "MASTER_ADDR and MASTER_PORT, as torchrun sets "
                            "them)";
  for (const char *name : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"})
    EXPECT_EQ(envError(without(name)),
              std::string("torchrun environment: ") + name + needs);
  EXPECT_EQ(envError(with("RANK", "")), "torchrun environment: RANK" + needs);
  EXPECT_EQ(envError(with("RANK", "4")),
            "torchrun environment: RANK=4 is out of range [0, 3]");
  EXPECT_EQ(envError(with("RANK", "-1")),
            "torchrun environment: RANK=-1 is out of range [0, 3]");
  EXPECT_EQ(envError(with("RANK", "1x")),
            "torchrun environment: RANK='1x' is not an integer");
  EXPECT_EQ(envError(with("WORLD_SIZE", "0")),
            "torchrun environment: WORLD_SIZE=0 is out of range [1, 1048576]");
  EXPECT_EQ(envError(with("WORLD_SIZE", "99999999999999999999")),
            "torchrun environment: WORLD_SIZE='99999999999999999999' is not "
            "an integer");
  EXPECT_EQ(envError(with("MASTER_PORT", "0")),
            "torchrun environment: MASTER_PORT=0 is out of range [1, 65535]");
  EXPECT_EQ(envError(with("MASTER_PORT", "70000")),
            "torchrun environment: MASTER_PORT=70000 is out of range [1, "
            "65535]");
  EXPECT_EQ(envError(with("LOCAL_RANK", "2")),
            "torchrun environment: LOCAL_RANK=2 is out of range [0, 1]");
  EXPECT_EQ(envError(with("LOCAL_WORLD_SIZE", "5")),
            "torchrun environment: LOCAL_WORLD_SIZE=5 is out of range [1, 4]");
  Env store = with("MASTER_PORT", "65535");
  store["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  EXPECT_NE(envError(store).find("needs MASTER_PORT + 1"), std::string::npos);
  EXPECT_NE(envError(with("TESSEL_RENDEZVOUS_KEY", std::string(5000, 'k')))
                .find("longer than 4096"),
            std::string::npos);
}

TEST(TorchrunArgsTest, CommTcpIsAFlagValue) {
  std::vector<std::string> words = {"tessel-run", "m.so", "--comm", "tcp"};
  std::vector<char *> argv;
  for (std::string &w : words)
    argv.push_back(w.data());
  Options o = parseArgs(int(argv.size()), argv.data());
  EXPECT_EQ(o.comm, CommBackend::Tcp);
  EXPECT_TRUE(o.commGiven);
}

//===--- Processes as torchrun starts them --------------------------------===//

const std::string dp2tp2 = quote(FAKE_SHARDED_DP2_TP2);
const std::string failing = quote(FAKE_SHARDED_FAIL);

using tessel::test::freeLoopbackPort;

class TesselRunTorchrunTest : public TesselRunTest {
protected:
  /// `processes` tessel-run processes with `args`, started as torchrun
  /// starts them (torchrunCommand).
  RunResult torchrun(int processes, const std::string &args, int port,
                     const std::string &extraEnv = "") {
    return runShell(torchrunCommand(dir, processes, port, extraEnv) + " " +
                    quote(TESSEL_RUN_PATH) + " " + args);
  }

  std::vector<double> lossesOf(const std::string &name) {
    std::vector<double> out;
    std::ifstream in(dir / name);
    for (std::string line; std::getline(in, line);)
      out.push_back(json::parse(line).at("loss").get<double>());
    return out;
  }
};

// Tests that torchrun's processes compute what threads compute, bit for bit
// (the TCP collectives reduce in the threads' order), that --comm tcp is
// picked from the environment, and that rank 0 alone reports.
TEST_F(TesselRunTorchrunTest, TorchrunRanksTrainAsThreads) {
  RunResult t = run(dp2tp2 + " --steps 3 --quiet --metrics " +
                    path("threads.jsonl") + " --save " + path("threads"));
  ASSERT_EQ(t.exitCode, 0) << t.err;
  RunResult r = torchrun(4,
                         dp2tp2 + " --steps 3 --log-every 1 --metrics " +
                             path("tcp.jsonl") + " --save " + path("tcp"),
                         freeLoopbackPort());
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("mesh dp=2,tp=2 (4 ranks, TCP)"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("step 3/3"), r.err.rfind("step 3/3")) << r.err;
  EXPECT_EQ(lossesOf("tcp.jsonl"), lossesOf("threads.jsonl"));
  EXPECT_EQ(readCheckpoint(dir / "tcp").tensors,
            readCheckpoint(dir / "threads").tensors);
}

// Tests that with torchrun's agent store on MASTER_PORT the ranks meet on
// MASTER_PORT + 1 (the store's port stays taken throughout).
TEST_F(TesselRunTorchrunTest, AgentStoreMovesTheRendezvousUpOnePort) {
  int store = -1;
  const int port = tessel::test::listeningLoopbackPort(store);
  ASSERT_GT(port, 0);
  RunResult r = torchrun(4, dp2tp2 + " --steps 1 --quiet --comm tcp", port,
                         "TORCHELASTIC_USE_AGENT_STORE=True");
  close(store);
  EXPECT_EQ(r.exitCode, 0) << r.err;
}

// Tests that a wrong process count, a missing variable and a failing rank
// end every process with the reason, named, and never hang.
TEST_F(TesselRunTorchrunTest, FailuresNameTheRankAndEndEveryProcess) {
  RunResult r = torchrun(2, dp2tp2 + " --steps 1", freeLoopbackPort());
  EXPECT_NE(r.exitCode, 0);
  EXPECT_NE(r.err.find("torchrun started 2 processes; model '" +
                       std::string(FAKE_SHARDED_DP2_TP2) +
                       "' runs on mesh dp=2,tp=2: 4 ranks, one process each "
                       "(torchrun --nproc-per-node 4)"),
            std::string::npos)
      << r.err;

  r = run(dp2tp2 + " --steps 1 --comm tcp");
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("torchrun environment: WORLD_SIZE is not set"),
            std::string::npos)
      << r.err;

  auto start = std::chrono::steady_clock::now();
  r = torchrun(4, failing + " --steps 3", freeLoopbackPort());
  EXPECT_NE(r.exitCode, 0);
  EXPECT_LT(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count(),
      120.0);
  EXPECT_NE(r.err.find("tessel-run: error: rank 1: step 2 (backward, "
                       "microbatch 1): tessel_init_param: unknown init kind "
                       "99"),
            std::string::npos)
      << r.err;
}

} // namespace
