// Megatron's CUDA-graph spellings since its refactor (e41b370): cuda_graph_impl full_iteration, cuda_graph_modules
// (the scope's new name) and the scope "full" validate to stepgraph's own spelling of the same graphs, with a note
// each; the combinations Megatron refuses are refused, each once.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/validate.h"
#include "validation_report_text.h"

namespace sg::config {
namespace {

using test::check_recipe;
using test::describe;

bool has_note(const ValidationReport& r, int rule, const std::string& text) {
  return std::any_of(r.notes.begin(), r.notes.end(),
                     [&](const Note& n) { return n.rule == rule && n.message.find(text) != std::string::npos; });
}

TEST(GraphSpellings, ImplFullIterationIsLocalWithTheFullIterationScope) {
  const ValidationReport newer = check_recipe("llama/tiny", {"model.cuda_graph_impl=full_iteration"});
  ASSERT_TRUE(newer.ok()) << describe(newer);
  EXPECT_TRUE(has_note(newer, 4, "cuda_graph_impl full_iteration (Megatron's spelling")) << describe(newer);
  const ValidationReport older =
      check_recipe("llama/tiny", {"model.cuda_graph_impl=local", "model.cuda_graph_scope=full_iteration"});
  EXPECT_EQ(emit_yaml(newer.config), emit_yaml(older.config));
  // With the deprecated scope spelling too, as Bridge's run_script.py still writes it.
  EXPECT_TRUE(
      check_recipe("llama/tiny", {"model.cuda_graph_impl=full_iteration", "model.cuda_graph_scope=full_iteration"})
          .ok());
  // Megatron requires no modules with it: one violation, not also an unknown impl.
  const ValidationReport scoped =
      check_recipe("llama/tiny", {"model.cuda_graph_impl=full_iteration", "model.cuda_graph_modules=attn"});
  ASSERT_EQ(scoped.violations.size(), 1u) << describe(scoped);
  EXPECT_EQ(scoped.violations[0].rule, 4);
  EXPECT_NE(scoped.violations[0].message.find("cuda_graph_scope must be empty"), std::string::npos);
}

TEST(GraphSpellings, TheScopeFullIsTheWholeLayer) {
  const ValidationReport full =
      check_recipe("llama/tiny", {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=full"});
  ASSERT_TRUE(full.ok()) << describe(full);
  EXPECT_TRUE(has_note(full, 1, "cuda_graph_scope full")) << describe(full);
  EXPECT_EQ(full.config.model.cuda_graph_scope, (std::vector<std::string>{"attn", "mlp"}));
  const ValidationReport mixed =
      check_recipe("llama/tiny", {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=full,attn"});
  ASSERT_EQ(mixed.violations.size(), 1u) << describe(mixed);  // not also an unknown scope 'full'
  EXPECT_NE(describe(mixed).find("cuda_graph_scope full (the whole layer) is given with other entries"),
            std::string::npos)
      << describe(mixed);
}

TEST(GraphSpellings, CudaGraphModulesIsTheScopesNewName) {
  const Config c = load_config_yaml(
      "model:\n  cuda_graph_impl: transformer_engine\n  cuda_graph_modules: [attn, mlp]\n", "new.yaml");
  EXPECT_EQ(c.model.cuda_graph_scope, (std::vector<std::string>{"attn", "mlp"}));
  EXPECT_NE(emit_yaml(c).find("  cuda_graph_scope: [attn, mlp]\n"), std::string::npos);  // stepgraph's name
  EXPECT_EQ(emit_yaml(c).find("cuda_graph_modules"), std::string::npos);
  // Both names with a value are refused, as Megatron refuses them; an empty one under the other name is no value.
  try {
    load_config_yaml("model:\n  cuda_graph_scope: [attn]\n  cuda_graph_modules: [attn]\n", "both.yaml");
    FAIL() << "both names set must be refused";
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("both.yaml:3:23: model.cuda_graph_modules = [attn], but model.cuda_graph_scope = [attn] "
                           "is set too (at both.yaml:2:21)"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("Megatron's name is cuda_graph_modules"), std::string::npos) << message;
  }
  EXPECT_NO_THROW(load_config_yaml("model:\n  cuda_graph_scope: []\n  cuda_graph_modules: [mlp]\n", "one.yaml"));
}

}  // namespace
}  // namespace sg::config
