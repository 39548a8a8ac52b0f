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

}  // namespace
