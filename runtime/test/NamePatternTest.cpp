//===- NamePatternTest.cpp - Parameter name patterns and no_decay ---------===//

#include "runtime/config/NamePattern.h"
#include "runtime/config/TrainConfig.h"

#include <gtest/gtest.h>

using namespace tessel;

namespace {

// Tests that '*' spans any run of characters, dots included, '?' exactly
// one, and that a pattern matches the whole name.
TEST(NamePattern, GlobOverWholeNames) {
  EXPECT_TRUE(matchesNamePattern("*.bias", "fc1.bias"));
  EXPECT_TRUE(matchesNamePattern("*.bias", "h.attn.c_proj.bias"));
  EXPECT_FALSE(matchesNamePattern("*.bias", "fc1.bias.m"));
  EXPECT_FALSE(matchesNamePattern("*.bias", "bias"));
  EXPECT_TRUE(matchesNamePattern("*ln*", "h.ln_1.weight"));
  EXPECT_TRUE(matchesNamePattern("*ln*", "ln"));
  EXPECT_TRUE(matchesNamePattern("wte", "wte"));
  EXPECT_FALSE(matchesNamePattern("wte", "wte2"));
  EXPECT_FALSE(matchesNamePattern("wte", "wt"));
  EXPECT_TRUE(matchesNamePattern("fc?.weight", "fc2.weight"));
  EXPECT_FALSE(matchesNamePattern("fc?.weight", "fc12.weight"));
  EXPECT_TRUE(matchesNamePattern("*", ""));
  EXPECT_TRUE(matchesNamePattern("**", "a.b"));
  EXPECT_TRUE(matchesNamePattern("a*b*c", "a.x.b.y.b.c"));
  EXPECT_FALSE(matchesNamePattern("a*b*c", "a.x.b.y.c.b"));
  EXPECT_FALSE(matchesNamePattern("?", ""));
}

TEST(NamePattern, ListsSplitOnCommas) {
  EXPECT_TRUE(splitNamePatterns("").empty());
  EXPECT_EQ(splitNamePatterns("*.bias,*ln*,wte"),
            (std::vector<std::string>{"*.bias", "*ln*", "wte"}));
  EXPECT_TRUE(matchesAny("*.bias,*ln*,wte", "wte"));
  EXPECT_TRUE(matchesAny("*.bias,*ln*,wte", "h.ln_2.weight"));
  EXPECT_FALSE(matchesAny("*.bias,*ln*,wte", "h.mlp.c_fc.weight"));
  EXPECT_FALSE(matchesAny("", "w"));
}

// Tests that an empty pattern, a space or a control character is refused.
TEST(NamePattern, ChecksEachPattern) {
  EXPECT_FALSE(checkNamePatterns(""));
  EXPECT_FALSE(checkNamePatterns("*.bias,wte"));
  for (const char *bad : {",", ",wte", "wte,", "a,,b", "a b", "a,\tb", "a\x7f"})
    EXPECT_TRUE(checkNamePatterns(bad)) << bad;
}

// Tests the no_decay setting: its text, its checks and the weight decay of
// each parameter.
TEST(NamePattern, NoDecaySetting) {
  const TrainSetting *setting = findTrainSetting("no-decay");
  ASSERT_NE(setting, nullptr);
  EXPECT_EQ(setting->kind, TrainSettingKind::Patterns);
  EXPECT_TRUE(setting->isText());
  TrainConfig config;
  EXPECT_EQ(config.text(*setting), "");
  EXPECT_FALSE(config.set(*setting, "*.bias,wte"));
  EXPECT_EQ(config.text(*setting), "*.bias,wte");
  std::optional<TrainSettingProblem> problem = config.set(*setting, "a,,b");
  ASSERT_TRUE(problem);
  EXPECT_FALSE(problem->unknownChoice);
  EXPECT_EQ(config.noDecay, "*.bias,wte"); // Unchanged on a problem.
  config.resolveDefaults();                // AdamW: 0.01.
  EXPECT_EQ(config.weightDecayOf("fc.bias"), 0.0);
  EXPECT_EQ(config.weightDecayOf("wte"), 0.0);
  EXPECT_EQ(config.weightDecayOf("fc.weight"), 0.01);
  EXPECT_FALSE(config.set(*setting, ""));
  EXPECT_EQ(config.weightDecayOf("fc.bias"), 0.01);
}

} // namespace
