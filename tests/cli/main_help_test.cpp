// `stepgraph --help` and `stepgraph train --help` say what exists now: every shipped recipe (listed from
// the recipes embedded in the binary) and the layer kinds train builds.
#include <gtest/gtest.h>

#include <string>

#include "config/config.h"
#include "process_util.h"

namespace {

bool has(const sg::test::CommandResult& r, const std::string& text) { return r.output.find(text) != std::string::npos; }

TEST(MainHelp, ListsEveryShippedRecipeAndTheModelFamilies) {
  const sg::test::CommandResult r = sg::test::run_stepgraph({"--help"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r, "dense, Mixture-of-Experts and hybrid Mamba2")) << r.output;
  for (const std::string& name : sg::config::shipped_recipe_names()) EXPECT_TRUE(has(r, name)) << name << "\n" << r.output;
  EXPECT_FALSE(has(r, "not trained yet")) << r.output;
}

TEST(MainHelp, TrainHelpNamesEveryLayerKind) {
  const sg::test::CommandResult r = sg::test::run_stepgraph({"train", "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* text : {"attention (*)", "MLP (-)", "MoE (E)", "Mamba2 (M)", "model.num_moe_experts"})
    EXPECT_TRUE(has(r, text)) << text << "\n" << r.output;
  EXPECT_FALSE(has(r, "not trained yet")) << r.output;
}

// A mistyped command is named, with the closest one: not CLI11's "A subcommand is required".
TEST(MainHelp, AMistypedCommandIsNamedWithTheClosestOne) {
  sg::test::CommandResult r = sg::test::run_stepgraph({"trian", "llama/tiny"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(has(r, "unknown command 'trian' (did you mean 'train'?)")) << r.output;
  r = sg::test::run_stepgraph({"config", "shwo"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(has(r, "unknown command 'config shwo' (did you mean 'config show'?)")) << r.output;
  r = sg::test::run_stepgraph({"data", "foo"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(has(r, "unknown command 'data foo'; the commands: synth, inspect")) << r.output;
  EXPECT_EQ(sg::test::run_stepgraph({"config", "--help"}).exit_code, 0);  // help still answers
}

}  // namespace
