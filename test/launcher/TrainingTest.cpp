//===- TrainingTest.cpp - Model ABI v2 parsing and the training flags -----===//

#include "runtime/launcher/Arena.h"
#include "runtime/launcher/Args.h"
#include "runtime/launcher/Compile.h"
#include "runtime/launcher/Error.h"
#include "runtime/launcher/ModelDescription.h"
#include "test/launcher/LibraryTestSupport.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <functional>

using namespace tessel::run;
using namespace tessel::run::test;
using nlohmann::json;

namespace {

/// A v2 description of W [2, 3] trained by `optimizer`: one grad, its
/// states, an input, a label, the grad scale and the loss.
json v2Description(const std::string &optimizer = "adamw") {
  json tensors = json::array();
  auto add = [&](const std::string &name, const std::string &role,
                 const std::string &dtype, std::vector<int64_t> shape,
                 int64_t offset, int64_t bytes) -> json & {
    tensors.push_back({{"name", name},
                       {"role", role},
                       {"dtype", dtype},
                       {"shape", shape},
                       {"offset", offset},
                       {"bytes", bytes}});
    return tensors.back();
  };
  json &w = add("w", "param", "f32", {2, 3}, 0, 24);
  w["trainable"] = true;
  w["weight_decay"] = 0.1;
  w["init"] = {{"kind", "normal"}, {"args", {0.02, 0.0}}};
  add("frozen", "param", "f32", {2}, 64, 8)["trainable"] = false;
  add("w", "grad", "f32", {2, 3}, 128, 24);
  int64_t offset = 192;
  std::vector<std::string> suffixes = optimizer == "sgd"
                                          ? std::vector<std::string>{"momentum"}
                                          : std::vector<std::string>{"m", "v"};
  for (const std::string &suffix : suffixes) {
    add("w." + suffix, "state", "f32", {2, 3}, offset, 24);
    offset += 64;
  }
  add("input0", "input", "f32", {4, 2}, 320, 32)["axes"] = {"batch", "embed"};
  add("label0", "label", "i32", {4}, 384, 16)["limit"] = 3;
  add("grad_scale", "grad_scale", "f32", {}, 448, 4);
  add("loss", "loss", "f32", {}, 512, 4);
  return {{"abi_version", 2},
          {"source", "m.mlir"},
          {"function", "loss"},
          {"entry", "tessel_forward"},
          {"entries",
           {{"forward", "tessel_forward"},
            {"backward", "tessel_backward"},
            {"update", "tessel_update"}}},
          {"arena_bytes", 640},
          {"peak_bytes", 64},
          {"regions",
           {{"params", {{"offset", 0}, {"bytes", 128}}},
            {"grads", {{"offset", 128}, {"bytes", 64}}},
            {"states", {{"offset", 192}, {"bytes", 128}}}}},
          {"train",
           {{"optimizer", optimizer},
            {"lr", 3e-4},
            {"beta1", 0.9},
            {"beta2", 0.95},
            {"eps", 1e-8},
            {"weight_decay", 0.1},
            {"momentum", optimizer == "sgd" ? 0.9 : 0.0},
            {"nesterov", false},
            {"schedule", "warmup_cosine"},
            {"warmup", 10},
            {"min_lr", 3e-5},
            {"total_steps", 100},
            {"clip", 1.0},
            {"recompute", "selective"},
            {"no_decay", "*.bias,frozen"}}},
          {"tensors", tensors}};
}

ModelDesc parse(const json &j) {
  return parseModelDescription(j.dump(), "m.so");
}

json *tensorNamed(json &j, const std::string &role, const std::string &name) {
  for (json &t : j["tensors"])
    if (t["role"] == role && t["name"] == name)
      return &t;
  return nullptr;
}

/// Adds a loss_count beside `j`'s loss (a copy of it at `offset`); the
/// tensor added.
json &addLossCount(json &j, int64_t offset = 576) {
  json count = *tensorNamed(j, "loss", "loss");
  count["name"] = count["role"] = "loss_count";
  count["offset"] = offset;
  j["tensors"].push_back(count);
  return j["tensors"].back();
}

/// A step's loss: a plain loss counts one per microbatch (the mean of the
/// microbatches' means, the gradients scaled by 1/M); a counted one divides
/// the step's sum by the step's count, at least 1.
TEST(StepLoss, DividesTheSumByTheCount) {
  StepLoss plain{4.5, 3};
  EXPECT_DOUBLE_EQ(plain.mean(), 1.5);
  EXPECT_DOUBLE_EQ(plain.divisor(), 3);
  StepLoss counted{12.0, 8};
  EXPECT_DOUBLE_EQ(counted.mean(), 1.5);
  StepLoss nothingLabelled{0.0, 0};
  EXPECT_DOUBLE_EQ(nothingLabelled.mean(), 0);
  EXPECT_DOUBLE_EQ(nothingLabelled.divisor(), 1);
}

/// ABI 22: a loss that is a sum returns the count it sums over.
TEST(ModelAbiV2, ParsesTheLossCount) {
  json j = v2Description();
  EXPECT_EQ(parse(j).lossCount(), nullptr);
  j["abi_version"] = 22;
  addLossCount(j);
  ModelDesc m = parse(j);
  ASSERT_NE(m.lossCount(), nullptr);
  EXPECT_EQ(m.lossCount()->offset, 576);
  EXPECT_EQ(m.loss().offset, 512);
}

TEST(ModelAbiV2, ParsesEntriesRolesTrainAndRegions) {
  ModelDesc m = parse(v2Description());
  EXPECT_TRUE(m.trains());
  EXPECT_EQ(m.entries.at("forward"), "tessel_forward");
  EXPECT_EQ(m.entries.at("backward"), "tessel_backward");
  EXPECT_EQ(m.entries.at("update"), "tessel_update");
  ASSERT_TRUE(m.train);
  EXPECT_EQ(m.train->optimizer, "adamw");
  EXPECT_DOUBLE_EQ(m.train->lr, 3e-4);
  EXPECT_DOUBLE_EQ(m.train->beta2, 0.95);
  EXPECT_DOUBLE_EQ(m.train->weightDecay, 0.1);
  EXPECT_EQ(m.train->schedule, "warmup_cosine");
  EXPECT_EQ(m.train->warmup, 10);
  EXPECT_EQ(m.train->totalSteps, 100);
  EXPECT_DOUBLE_EQ(m.train->clip, 1.0);
  EXPECT_EQ(m.train->recompute, "selective");
  EXPECT_EQ(m.train->noDecay, "*.bias,frozen");
  EXPECT_EQ(m.find("param", "w")->weightDecay, 0.1);
  EXPECT_FALSE(m.find("param", "frozen")->weightDecay);
  EXPECT_EQ(m.regions.at("grads").offset, 128);
  EXPECT_EQ(m.regions.at("states").bytes, 128);
  ASSERT_NE(m.gradOf("w"), nullptr);
  EXPECT_EQ(m.gradOf("w")->offset, 128);
  EXPECT_EQ(m.gradOf("frozen"), nullptr);
  EXPECT_FALSE(m.find("param", "frozen")->trainable);
  EXPECT_TRUE(m.find("param", "w")->trainable);
  EXPECT_EQ(m.withRole("state").size(), 2u);
  EXPECT_EQ(m.withRole("grad_scale").size(), 1u);
  EXPECT_EQ(m.batchSize(), 4);
  // The schedule of the update entry: 0-based step s uses lr_at(s + 1).
  EXPECT_DOUBLE_EQ(lrAt(*m.train, 0), 3e-4 / 10);
  EXPECT_DOUBLE_EQ(lrAt(*m.train, 9), 3e-4);
}

// A label's ignore_index (ABI 21) is read; only an integer feed has one.
TEST(ModelAbiV2, LabelIgnoreIndexIsReadAndOnlyOnIntegerFeeds) {
  json j = v2Description();
  (*tensorNamed(j, "label", "label0"))["ignore_index"] = -100;
  ModelDesc m = parse(j);
  EXPECT_EQ(m.find("label", "label0")->ignoreIndex, -100);
  EXPECT_FALSE(parse(v2Description()).find("label", "label0")->ignoreIndex);
  json onInput = v2Description();
  (*tensorNamed(onInput, "input", "input0"))["ignore_index"] = -100;
  std::string error = errorOf([&] { parse(onInput); });
  EXPECT_NE(error.find("has \"ignore_index\" but its role is input and "
                       "its dtype f32 (only an integer input or label, a "
                       "loss's labels, has one)"),
            std::string::npos)
      << error;
}

TEST(ModelAbiV2, V1DescriptionLoadsEvalOnly) {
  json j = v2Description();
  j["abi_version"] = 1;
  j.erase("entries");
  j.erase("train");
  ModelDesc m = parse(j);
  EXPECT_FALSE(m.trains());
  EXPECT_EQ(m.entries.size(), 1u);
  EXPECT_EQ(m.entries.at("forward"), "tessel_forward");
  EXPECT_FALSE(m.train);
}

TEST(ModelAbiV2, ForwardOnlyEntriesAreEvalOnly) {
  json j = v2Description();
  j["entries"] = {{"forward", "f"}};
  j.erase("entry");
  ModelDesc m = parse(j);
  EXPECT_FALSE(m.trains());
  EXPECT_EQ(m.entries.at("forward"), "f");
}

// Tests that a parameter in the no-decay group says weight_decay 0, and that
// the field is optional.
TEST(ModelAbiV2, ParsesEachParameterWeightDecay) {
  json j = v2Description();
  j["train"]["no_decay"] = "?";
  (*tensorNamed(j, "param", "w"))["weight_decay"] = 0;
  ModelDesc m = parse(j);
  EXPECT_EQ(m.train->weightDecayOf("w"), 0.0);
  EXPECT_EQ(m.train->weightDecayOf("w2"), 0.1);
  EXPECT_EQ(m.find("param", "w")->weightDecay, 0.0);
  j["train"].erase("no_decay");
  tensorNamed(j, "param", "w")->erase("weight_decay");
  m = parse(j);
  EXPECT_EQ(m.train->noDecay, "");
  EXPECT_FALSE(m.find("param", "w")->weightDecay);
}

TEST(ModelAbiV2, SgdWithMomentumHasOneStatePerParameter) {
  ModelDesc m = parse(v2Description("sgd"));
  ASSERT_EQ(m.withRole("state").size(), 1u);
  EXPECT_EQ(m.withRole("state")[0]->name, "w.momentum");
}

// Tests that every malformed v2 description fails with one message naming
// the file and the problem.
TEST(ModelAbiV2, InvalidDescriptionsNameTheProblem) {
  struct Case {
    const char *what;
    std::function<void(json &)> edit;
    const char *message;
  };
  static const std::string futureAbiMessage =
      "model 'm.so' has ABI version " + std::to_string(TESSEL_ABI_VERSION + 1) +
      ", this tessel-run supports 1 to " + std::to_string(TESSEL_ABI_VERSION);
  std::vector<Case> cases = {
      {"future ABI", [](json &j) { j["abi_version"] = TESSEL_ABI_VERSION + 1; },
       futureAbiMessage.c_str()},
      {"unknown entry", [](json &j) { j["entries"]["eval"] = "e"; },
       "unknown entry kind 'eval'"},
      {"backward alone", [](json &j) { j["entries"].erase("update"); },
       "a backward entry without an update entry"},
      {"no forward",
       [](json &j) {
         j["entries"].erase("forward");
         j.erase("entry");
       },
       "no forward entry"},
      {"no train", [](json &j) { j.erase("train"); },
       "backward and update entries but no \"train\""},
      {"unknown optimizer", [](json &j) { j["train"]["optimizer"] = "lamb"; },
       "\"train\": unknown optimizer 'lamb'"},
      {"unknown schedule", [](json &j) { j["train"]["schedule"] = "linear"; },
       "\"train\": unknown schedule 'linear'"},
      {"unknown recompute", [](json &j) { j["train"]["recompute"] = "some"; },
       "\"train\": unknown recompute 'some'"},
      {"empty no_decay pattern",
       [](json &j) { j["train"]["no_decay"] = "w,,b"; },
       "\"train\": 'no_decay' must be comma-separated name patterns, none "
       "empty, without spaces, got w,,b"},
      {"no_decay not a string", [](json &j) { j["train"]["no_decay"] = 3; },
       "\"train\": 'no_decay' must be comma-separated name patterns, none "
       "empty, without spaces, got 3"},
      {"negative weight decay",
       [](json &j) { (*tensorNamed(j, "param", "w"))["weight_decay"] = -1; },
       "tensor 'w': \"weight_decay\" must be a number >= 0, got -1"},
      {"weight decay of a frozen parameter",
       [](json &j) {
         (*tensorNamed(j, "param", "frozen"))["weight_decay"] = 0;
       },
       "param 'frozen': \"weight_decay\" on a parameter that is not "
       "trainable"},
      {"weight decay of another group",
       [](json &j) { j["train"]["no_decay"] = "w"; },
       "param 'w': \"weight_decay\" 0.1 is not its group's 0 (\"train\": "
       "no_decay 'w', weight_decay 0.1)"},
      {"unknown role",
       [](json &j) { (*tensorNamed(j, "grad", "w"))["role"] = "gradient"; },
       "tensor 'w': unknown role 'gradient'"},
      {"grad of nothing",
       [](json &j) { (*tensorNamed(j, "grad", "w"))["name"] = "x"; },
       "grad 'x': no parameter of that name"},
      {"grad of a frozen parameter",
       [](json &j) {
         json g = *tensorNamed(j, "grad", "w");
         g["name"] = "frozen";
         g["shape"] = {2};
         g["bytes"] = 8;
         g["offset"] = 160;
         j["tensors"].push_back(g);
       },
       "grad 'frozen': its parameter is not trainable"},
      {"grad shape",
       [](json &j) {
         json &g = *tensorNamed(j, "grad", "w");
         g["shape"] = {3, 2};
       },
       "grad 'w': shape differs from its parameter's"},
      {"grad dtype",
       [](json &j) {
         json &g = *tensorNamed(j, "grad", "w");
         g["dtype"] = "f64";
         g["bytes"] = 48;
       },
       "grad 'w': dtype f64 is not its parameter's f32"},
      {"trainable without grad",
       [](json &j) { (*tensorNamed(j, "grad", "w"))["role"] = "output"; },
       "trainable parameter 'w' has no grad"},
      {"foreign state",
       [](json &j) {
         (*tensorNamed(j, "state", "w.v"))["name"] = "w.momentum";
       },
       "state 'w.momentum': not a state of optimizer adamw"},
      {"missing state",
       [](json &j) { (*tensorNamed(j, "state", "w.v"))["role"] = "output"; },
       "optimizer adamw needs state 'w.v', the description has none"},
      {"state dtype",
       [](json &j) {
         json &s = *tensorNamed(j, "state", "w.m");
         s["dtype"] = "f64";
         s["bytes"] = 48;
       },
       "state 'w.m': must be f32 with its parameter's shape"},
      {"f64 states before ABI 18",
       [](json &j) {
         for (json *t :
              {tensorNamed(j, "param", "w"), tensorNamed(j, "grad", "w"),
               tensorNamed(j, "state", "w.m"),
               tensorNamed(j, "state", "w.v")}) {
           (*t)["dtype"] = "f64";
           (*t)["bytes"] = 48;
         }
       },
       "state 'w.m': must be f32 with its parameter's shape"},
      {"f32 state of an f64 parameter from ABI 18 on",
       [](json &j) {
         j["abi_version"] = 18;
         for (json *t :
              {tensorNamed(j, "param", "w"), tensorNamed(j, "grad", "w"),
               tensorNamed(j, "state", "w.v")}) {
           (*t)["dtype"] = "f64";
           (*t)["bytes"] = 48;
         }
       },
       "state 'w.m': must be f64 with its parameter's shape"},
      {"loss_count before ABI 22",
       [](json &j) { addLossCount(j); },
       "a loss_count (ABI 22) is one f32 or f64 value of the loss's dtype "
       "beside one loss; found 1 beside 1 loss(es)"},
      {"loss_count of another dtype",
       [](json &j) {
         j["abi_version"] = 22;
         json &count = addLossCount(j);
         count["dtype"] = "f64";
         count["bytes"] = 8;
       },
       "a loss_count (ABI 22) is one f32 or f64 value of the loss's dtype "
       "beside one loss; found 1 beside 1 loss(es)"},
      {"two loss_counts",
       [](json &j) {
         j["abi_version"] = 22;
         addLossCount(j);
         addLossCount(j, 580);
       },
       "a loss_count (ABI 22) is one f32 or f64 value of the loss's dtype "
       "beside one loss; found 2 beside 1 loss(es)"},
      {"no grad scale",
       [](json &j) {
         (*tensorNamed(j, "grad_scale", "grad_scale"))["role"] = "output";
       },
       "expected one f32 (or f64) scalar grad_scale tensor, found 0"},
      {"grad_norm without its sum",
       [](json &j) { j["entries"]["grad_norm"] = "tessel_grad_norm"; },
       "a grad_norm entry and one f32 (or f64) scalar grad_sum_squares "
       "tensor come together (found 1 entries, 0 tensors)"},
      {"sum of squares without grad_norm",
       [](json &j) {
         (*tensorNamed(j, "grad_scale", "grad_scale"))["role"] =
             "grad_sum_squares";
         json scale = *tensorNamed(j, "grad_sum_squares", "grad_scale");
         scale["role"] = "grad_scale";
         scale["offset"] = 576;
         j["tensors"].push_back(scale);
       },
       "a grad_norm entry and one f32 (or f64) scalar grad_sum_squares "
       "tensor come together (found 0 entries, 1 tensors)"},
      {"backward_no_sync without reduce_grads",
       [](json &j) {
         j["entries"]["backward_no_sync"] = "tessel_backward_no_sync";
       },
       "backward_no_sync and reduce_grads entries come together, beside a "
       "backward entry"},
      {"reduce_grads without a backward",
       [](json &j) {
         j["entries"].erase("backward");
         j["entries"].erase("update");
         j["entries"]["backward_no_sync"] = "tessel_backward_no_sync";
         j["entries"]["reduce_grads"] = "tessel_reduce_grads";
       },
       "backward_no_sync and reduce_grads entries come together, beside a "
       "backward entry"},
      {"backward_weight without its no-sync twin",
       [](json &j) {
         j["entries"]["backward_no_sync"] = "tessel_backward_no_sync";
         j["entries"]["reduce_grads"] = "tessel_reduce_grads";
         j["entries"]["backward_input"] = "tessel_backward_input";
         j["entries"]["backward_weight"] = "tessel_backward_weight";
       },
       "(and backward_weight_no_sync beside a backward_weight)"},
      {"forward_keep without a backward",
       [](json &j) {
         j["entries"].erase("backward");
         j["entries"].erase("update");
         j["entries"]["forward_keep"] = "tessel_forward_keep";
       },
       "a forward_keep entry without a backward entry to read what it keeps"},
      {"kept tensors without forward_keep",
       [](json &j) {
         json kept = *tensorNamed(j, "param", "w");
         kept["name"] = "kept0";
         kept["role"] = "kept";
         j["tensors"].push_back(kept);
       },
       "kept tensors without a forward_keep entry to write them"},
      {"grad outside its region",
       [](json &j) { j["regions"]["grads"]["bytes"] = 16; },
       "grad 'w' lies outside the \"grads\" region"},
      {"region outside the arena",
       [](json &j) { j["regions"]["states"]["bytes"] = 4096; },
       "region 'states' lies outside the arena"},
  };
  for (const Case &c : cases) {
    json j = v2Description();
    c.edit(j);
    std::string error = errorOf([&] { parse(j); });
    EXPECT_NE(error.find(c.message), std::string::npos)
        << c.what << ": " << error;
    EXPECT_NE(error.find("m.so"), std::string::npos) << c.what;
    EXPECT_EQ(error.find('\n'), std::string::npos) << c.what;
  }
}

TEST(TrainingFlags, ParseAndNormalise) {
  Options o = parseFlags({"m.so",
                          "--optimizer",
                          "sgd",
                          "--lr=3e-4",
                          "--schedule",
                          "warmup_cosine",
                          "--warmup",
                          "10",
                          "--nesterov",
                          "--microbatches",
                          "4",
                          "--clip",
                          "1",
                          "--lr",
                          "1e-3",
                          "--check-grads",
                          "--grad-tol",
                          "1e-4",
                          "--grad-params",
                          "h.*,wte"});
  EXPECT_EQ(o.microbatches, 4);
  ASSERT_TRUE(o.gradTol);
  EXPECT_DOUBLE_EQ(*o.gradTol, 1e-4);
  EXPECT_EQ(o.gradParams, "h.*,wte");
  ASSERT_NE(o.trainingValue("--schedule"), nullptr);
  EXPECT_EQ(*o.trainingValue("--schedule"), "warmup-cosine");
  EXPECT_EQ(*o.trainingValue("--lr"), "1e-3"); // The last one wins.
  ASSERT_NE(o.trainingValue("--nesterov"), nullptr);
  EXPECT_EQ(o.trainingValue("--momentum"), nullptr);
  EXPECT_EQ(o.training.size(), 6u);
  EXPECT_FALSE(o.eval);
  EXPECT_TRUE(parseFlags({"m.so", "--eval"}).eval);
  EXPECT_TRUE(parseFlags({"m.so", "--check-grads"}).checkGrads);
}

TEST(TrainingFlags, BadValuesAreUsageErrors) {
  std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--optimizer", "lamb"},
       "unknown optimizer 'lamb' for --optimizer (expected sgd, adam or "
       "adamw)"},
      {{"--schedule", "linear"},
       "unknown schedule 'linear' for --schedule (expected constant or "
       "warmup-cosine)"},
      {{"--recompute", "some"}, "unknown recompute 'some'"},
      {{"--lr", "fast"}, "bad value 'fast' for --lr (expected a number)"},
      {{"--lr", "-1"}, "bad value '-1' for --lr (expected a number >= 0)"},
      {{"--beta1", "1"},
       "bad value '1' for --beta1 (expected a number in [0, 1))"},
      {{"--eps", "0"}, "bad value '0' for --eps (expected a number > 0)"},
      {{"--warmup", "-2"}, "bad value '-2' for --warmup"},
      {{"--total-steps", "0"}, "bad value '0' for --total-steps"},
      {{"--microbatches", "0"}, "bad value '0' for --microbatches"},
      {{"--grad-tol", "0"}, "bad value '0' for --grad-tol"},
      {{"--grad-tol", "1e-3"}, "--grad-tol only with --check-grads"},
      {{"--grad-params", "h.*"}, "--grad-params only with --check-grads"},
      {{"--check-grads", "--grad-params", "h.*,,wte"},
       "bad value 'h.*,,wte' for --grad-params (expected comma-separated "
       "name patterns"},
      {{"--nesterov=1"}, "--nesterov takes no value"},
      {{"--no-decay", "*.bias,,wte"},
       "bad value '*.bias,,wte' for --no-decay (expected comma-separated "
       "name patterns, none empty, without spaces)"},
      {{"--no-decay", "*.bias, wte"}, "bad value '*.bias, wte' for --no-decay"},
      {{"--eval", "--no-decay", "*"}, "--no-decay has no effect with --eval"},
      {{"--eval", "--check-grads"},
       "--eval and --check-grads exclude each other"},
      {{"--eval", "--clip", "1"}, "--clip has no effect with --eval"},
      {{"--optimizer", "adam", "--nesterov"},
       "--nesterov needs --optimizer sgd (got adam)"},
      {{"--warmup", "10", "--total-steps", "10"},
       "--total-steps 10 must be greater than --warmup 10"},
  };
  for (auto &[args, message] : cases) {
    std::vector<std::string> full = {"m.so"};
    full.insert(full.end(), args.begin(), args.end());
    std::string error = usageErrorOf(full);
    EXPECT_NE(error.find(message), std::string::npos)
        << args.front() << ": " << error;
  }
}

TEST(TrainingFlags, CompileArgsPassEveryFlagAndDefaultTheTotal) {
  Options o = parseFlags({"m.mlir", "--steps", "50", "--optimizer", "sgd",
                          "--momentum", "0.9", "--nesterov", "--schedule",
                          "warmup-cosine", "--warmup", "5"});
  EXPECT_EQ(compileArgs(o), (std::vector<std::string>{
                                "--optimizer", "sgd", "--momentum", "0.9",
                                "--nesterov", "--schedule", "warmup-cosine",
                                "--warmup", "5", "--total-steps", "50"}));
  o = parseFlags({"m.mlir", "--schedule", "warmup-cosine", "--total-steps",
                  "70", "--steps", "5"});
  EXPECT_EQ(compileArgs(o),
            (std::vector<std::string>{"--schedule", "warmup-cosine",
                                      "--total-steps", "70"}));
  o = parseFlags({"m.mlir", "--schedule", "warmup-cosine", "--warmup", "10",
                  "--steps", "10"});
  std::string error = errorOf([&] { compileArgs(o); });
  EXPECT_NE(error.find("--schedule warmup-cosine needs --total-steps (default "
                       "--steps 10) greater than --warmup 10"),
            std::string::npos)
      << error;
  EXPECT_TRUE(compileArgs(parseFlags({"m.mlir"})).empty());
  EXPECT_EQ(compileArgs(parseFlags({"m.mlir", "--eval"})),
            std::vector<std::string>{"--no-train"});
}

TEST(TrainingFlags, SoMustHaveBeenCompiledWithTheGivenValues) {
  ModelDesc m = parse(v2Description());
  auto check = [&](std::vector<std::string> args) {
    args.insert(args.begin(), "m.so");
    Options o = parseFlags(args);
    return errorOf([&] { checkTrainingFlags(o, m, "m.so", false); });
  };
  // Equal values, however written.
  EXPECT_EQ(check({"--optimizer",    "adamw",
                   "--lr",           "0.0003",
                   "--beta2",        "9.5e-1",
                   "--schedule",     "warmup_cosine",
                   "--warmup",       "10",
                   "--total-steps",  "100",
                   "--clip",         "1",
                   "--recompute",    "selective",
                   "--weight-decay", "0.1",
                   "--min-lr",       "3e-5",
                   "--no-decay",     "*.bias,frozen"}),
            "");
  std::string error = check({"--clip", "1", "--lr", "0.01"});
  EXPECT_EQ(error, "--lr 0.01 differs from the lr 0.0003 that model 'm.so' "
                   "was compiled with (training options are compiled in); "
                   "recompile with tessel-compile m.mlir --clip 1 --lr 0.01 "
                   "-o m.so");
  EXPECT_NE(check({"--optimizer", "sgd"})
                .find("--optimizer sgd differs from the optimizer adamw"),
            std::string::npos);
  EXPECT_NE(check({"--schedule", "constant"})
                .find("--schedule constant differs from the schedule "
                      "warmup-cosine"),
            std::string::npos);
  EXPECT_NE(
      check({"--warmup", "3"}).find("--warmup 3 differs from the warmup 10"),
      std::string::npos);
  EXPECT_NE(check({"--nesterov"})
                .find("--nesterov true differs from the "
                      "nesterov false"),
            std::string::npos);
  EXPECT_NE(check({"--recompute", "full"})
                .find("--recompute full differs from the recompute selective"),
            std::string::npos);
  // Patterns are compared as written, and quoted for a shell; an empty list
  // (no parameter exempt) is a value too.
  EXPECT_EQ(check({"--no-decay", "*.bias"}),
            "--no-decay '*.bias' differs from the no_decay '*.bias,frozen' "
            "that model 'm.so' was compiled with (training options are "
            "compiled in); recompile with tessel-compile m.mlir --no-decay "
            "'*.bias' -o m.so");
  EXPECT_NE(
      check({"--no-decay", ""})
          .find("--no-decay '' differs from the no_decay '*.bias,frozen'"),
      std::string::npos);

  // A model compiled without training takes no training flag.
  json j = v2Description();
  j.erase("entries");
  j.erase("train");
  ModelDesc eval = parse(j);
  Options o = parseFlags({"m.so", "--lr", "0.1"});
  error = errorOf([&] { checkTrainingFlags(o, eval, "m.so", false); });
  EXPECT_EQ(error, "--lr 0.1: model 'm.so' was compiled without training (no "
                   "\"train\" in its description); recompile with "
                   "tessel-compile m.mlir --lr 0.1 -o m.so");
  // Compiled by the launcher itself: the compiler ignored the flag.
  o = parseFlags({"m.mlir", "--lr", "0.1"});
  error = errorOf([&] { checkTrainingFlags(o, m, "/tmp/x/model.so", true); });
  EXPECT_EQ(error, "tessel-compile ignored --lr 0.1: 'm.mlir' was compiled "
                   "with lr 0.0003");
}

} // namespace
