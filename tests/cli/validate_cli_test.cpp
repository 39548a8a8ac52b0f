// `stepgraph validate` and `stepgraph config show` as a user runs them: exit codes 0 (valid), 1
// (rule violations), 2 (usage or parse error), and messages that name the rule and the key.
#include <gtest/gtest.h>

#include "process_util.h"
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/config.h"
#include "shipped_recipe_data.h"

namespace {

using Result = sg::test::CommandResult;

Result run(const std::vector<std::string>& args, bool merge_stderr = true, const std::string& cwd = "") {
  return sg::test::run_stepgraph(args, merge_stderr, cwd);
}

std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

struct CliRuleCase {
  int rule;
  std::string recipe;
  std::vector<std::string> breaks;
  std::string key;
  std::vector<std::string> passes;
};

const std::vector<CliRuleCase> kRuleCases = {
    {1,
     "llama/tiny",
     {"model.cuda_graph_impl=cuda"},
     "model.cuda_graph_impl",
     {"model.cuda_graph_impl=local"}},
    {3,
     "llama/tiny",
     {"model.cuda_graph_impl=local", "model.use_te_rng_tracker=false"},
     "rng.te_rng_tracker",
     {"model.cuda_graph_impl=local"}},
    {4,
     "llama/tiny",
     {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=full_iteration,attn"},
     "model.cuda_graph_scope",
     {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=attn"}},
    // Rule 5 is a note now (NaN checks run inside a whole-step graph): no violation to provoke.
    {6,
     "moe/tiny_moe",
     {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=moe_preprocess"},
     "model.cuda_graph_scope",
     {"model.cuda_graph_impl=transformer_engine",
      "model.cuda_graph_scope=moe_router,moe_preprocess"}},
    {7,
     "llama/tiny",
     {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=moe_router"},
     "model.num_moe_experts",
     {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=mlp"}},
    // Rule 8 is a note now (stepgraph graphs the whole dropless MoE layer): no violation to provoke.
    {9,
     "llama/tiny",
     {"model.cuda_graph_impl=local", "dataset.packed_sequence=true"},
     "dataset.pad_cu_seqlens",
     {"model.cuda_graph_impl=none", "dataset.packed_sequence=true"}},
    {10,
     "llama/tiny",
     {"model.cuda_graph_impl=local", "model.cpu_offloading=true"},
     "model.cpu_offloading",
     {"model.cpu_offloading=true"}},
    {11,
     "llama/tiny",
     {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=attn,mlp",
      "model.recompute_granularity=full"},
     "model.recompute_granularity",
     {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=attn,mlp",
      "model.recompute_granularity=selective", "model.recompute_modules=core_attn"}},
    {12,
     "moe/tiny_moe",
     {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=moe_router",
      "model.recompute_granularity=selective", "model.recompute_modules=[core_attn, moe]"},
     "model.recompute_modules",
     {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=moe_router",
      "model.recompute_granularity=selective", "model.recompute_modules=[core_attn]"}},
    {14,
     "llama/tiny",
     {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=attn",
      "model.delay_wgrad_compute=true", "model.add_qkv_bias=true"},
     "model.add_qkv_bias",
     {"model.delay_wgrad_compute=true", "model.add_qkv_bias=true"}},
    {15,
     "llama/tiny",
     {"model.cuda_graph_warmup_steps=-1"},
     "model.cuda_graph_warmup_steps",
     {"model.cuda_graph_warmup_steps=0"}},
    {16,
     "llama/tiny",
     {"model.num_attention_heads=5"},
     "model.num_attention_heads",
     {"model.num_attention_heads=8"}},
};

TEST(ValidateCli, EveryRuleExitsOneNamingTheKeyAndANearbyConfigPasses) {
  for (const auto& c : kRuleCases) {
    SCOPED_TRACE("rule " + std::to_string(c.rule));
    const Result broken = run(concat({"validate", c.recipe}, c.breaks));
    EXPECT_EQ(broken.exit_code, 1) << broken.output;
    EXPECT_NE(broken.output.find("[rule " + std::to_string(c.rule) + "]"), std::string::npos)
        << broken.output;
    EXPECT_NE(broken.output.find(c.key + " = "), std::string::npos) << broken.output;
    EXPECT_NE(broken.output.find("fix: "), std::string::npos) << broken.output;
    const Result passing = run(concat({"validate", c.recipe}, c.passes));
    EXPECT_EQ(passing.exit_code, 0) << passing.output;
  }
}

// A valid recipe is followed by its run plan, computed without a GPU: parameters, tokens per step, the
// GPU memory plan from the step's own buffer declarations, and the CUDA-graph plan.
TEST(ValidateCli, AValidRecipeShowsItsRunPlanWithoutAGpu) {
  const Result r = run({"validate", "llama/tiny", "model.cuda_graph_impl=local"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* text : {"7.41 M parameters", "1,024 tokens per step", "GPU memory plan", "parameters 14.13 MiB",
                           "main_weights 28.26 MiB", "CUDA graphs: local", "capture at step 4"}) {
    EXPECT_NE(r.output.find(text), std::string::npos) << text << "\n" << r.output;
  }
  const Result moe = run({"validate", "moe/tiny_moe"});
  EXPECT_EQ(moe.exit_code, 0) << moe.output;
  for (const char* text : {"8 layers: (*E)x4 as 4 GPT blocks", "checkpoints load as MixtralForCausalLM", "GPU memory plan"}) {
    EXPECT_NE(moe.output.find(text), std::string::npos) << text << "\n" << moe.output;
  }
}

TEST(ValidateCli, Rule2IsANoteNotAnError) {
  const Result r = run({"validate", "llama/tiny", "model.cuda_graph_scope=attn"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("note [rule 2]"), std::string::npos) << r.output;
  const Result shown = run({"config", "show", "llama/tiny", "model.cuda_graph_scope=attn"}, false);
  EXPECT_NE(shown.output.find("  cuda_graph_scope: []\n"), std::string::npos) << shown.output;
}

TEST(ValidateCli, ParseAndUsageErrorsExitTwo) {
  const auto dir = std::filesystem::temp_directory_path() / "sg_validate_cli_test";
  std::filesystem::create_directories(dir);
  const std::string bad_yaml = (dir / "bad.yaml").string();
  std::ofstream(bad_yaml) << "model:\n  hidden_size: [256\n";
  Result r = run({"validate", bad_yaml});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(bad_yaml + ":"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("invalid YAML"), std::string::npos) << r.output;

  const std::string unknown_key = (dir / "unknown.yaml").string();
  std::ofstream(unknown_key) << "# test\nmodel:\n  num_layers: 2\n  cuda_graph_scop: attn\n";
  r = run({"validate", unknown_key});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(unknown_key + ":4:3"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("did you mean 'model.cuda_graph_scope'"), std::string::npos) << r.output;

  const std::string wrong_type = (dir / "type.yaml").string();
  std::ofstream(wrong_type) << "train:\n  micro_batch_size: four\n";
  r = run({"validate", wrong_type});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(wrong_type + ":2:21: train.micro_batch_size: expected an integer"),
            std::string::npos)
      << r.output;

  r = run({"validate", "llama/tiny", "model.hidden_size=wide"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("model.hidden_size: expected an integer"), std::string::npos) << r.output;
  r = run({"validate", "llama/tiny", "model.num_layers"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("section.key=value"), std::string::npos) << r.output;
  r = run({"validate", "llama/tiny", "model.cuda_graph_imp=local"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("did you mean 'model.cuda_graph_impl'"), std::string::npos) << r.output;
  r = run({"validate", "llama/tiyn"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("did you mean 'llama/tiny'"), std::string::npos) << r.output;
  r = run({"validate", "--all", "llama/tiny"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  r = run({"validate", "--no-such-flag"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  r = run({"config", "show", "llama/tiny", "train.train_iters=1.5"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  std::filesystem::remove_all(dir);
}

TEST(ValidateCli, NoRecipeValidatesEveryShippedRecipeAsATable) {
  const sg::test::InShippedRecipeDataDir in_data_dir;  // llama/demo's dataset, as after `stepgraph data synth`
  const auto names = sg::config::shipped_recipe_names();
  for (const auto& args :
       {std::vector<std::string>{"validate"}, std::vector<std::string>{"validate", "--all"}}) {
    const Result r = run(args);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    for (const auto& name : names)
      EXPECT_NE(r.output.find(name), std::string::npos) << name << "\n" << r.output;
    EXPECT_NE(r.output.find("recipe"), std::string::npos);
    EXPECT_NE(r.output.find("cuda graphs"), std::string::npos);
    const std::string summary =
        std::to_string(names.size()) + " of " + std::to_string(names.size()) + " valid";
    EXPECT_NE(r.output.find(summary), std::string::npos) << r.output;
  }
  // Overrides apply to every recipe.
  Result r = run({"validate", "model.cuda_graph_impl=local"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("local [full_iteration]"), std::string::npos) << r.output;
  r = run({"validate", "--all", "model.cuda_graph_impl=transformer_engine",
           "model.cuda_graph_scope=mlp"});
  EXPECT_EQ(r.exit_code, 1) << r.output;  // tiny_moe has no dense MLP: rule 7
  EXPECT_NE(r.output.find("moe/tiny_moe"), std::string::npos);
  EXPECT_NE(r.output.find("INVALID"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[rule 7]"), std::string::npos) << r.output;
}

TEST(ValidateCli, JsonReport) {
  Result r = run({"validate", "llama/tiny", "model.cuda_graph_impl=transformer_engine",
                  "model.cuda_graph_scope=full_iteration,attn", "--json"},
                 false);
  EXPECT_EQ(r.exit_code, 1);
  nlohmann::json j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["recipe"], "llama/tiny");
  EXPECT_EQ(j["valid"], false);
  ASSERT_EQ(j["violations"].size(), 1u) << r.output;
  EXPECT_EQ(j["violations"][0]["rule"], 4);
  EXPECT_EQ(j["violations"][0]["values"][1]["key"], "model.cuda_graph_scope");
  EXPECT_EQ(j["violations"][0]["values"][1]["value"], "[full_iteration, attn]");
  EXPECT_FALSE(j["violations"][0]["fix"].get<std::string>().empty());

  r = run({"validate", "moe/tiny_moe", "--json"}, false);
  EXPECT_EQ(r.exit_code, 0);
  j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["valid"], true);
  EXPECT_TRUE(j["unimplemented"].empty()) << "MoE layers are built (issue 11): " << r.output;

  {
    const sg::test::InShippedRecipeDataDir in_data_dir;  // llama/demo's dataset
    r = run({"validate", "--json"}, false);
  }
  EXPECT_EQ(r.exit_code, 0) << r.output;
  j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["recipes"].size(), sg::config::shipped_recipe_names().size());
  EXPECT_EQ(j["valid"], true);

  r = run({"validate", "llama/tiny", "model.hidden_size=x", "--json"}, false);
  EXPECT_EQ(r.exit_code, 2);
  j = nlohmann::json::parse(r.output);
  EXPECT_NE(j["error"].get<std::string>().find("model.hidden_size"), std::string::npos);
}

// With --json every outcome is one JSON object on stdout with an `error` field, and the documented exit code.
TEST(ValidateCli, JsonReportsEveryFailureAsJson) {
  const auto json_of = [](const Result& r) {
    nlohmann::json j;
    EXPECT_NO_THROW(j = nlohmann::json::parse(r.output)) << r.output;
    return j;
  };
  Result r = run({"validate", "llama/tiny", "--json"}, false);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(json_of(r)["error"].is_null()) << r.output;

  // Not a parse error: the folder is missing (exit 1, as without --json).
  r = run({"validate", "llama/tiny", "checkpoint.pretrained_checkpoint=/nonexistent", "--json"}, false);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  nlohmann::json j = json_of(r);
  EXPECT_EQ(j["valid"], false);
  EXPECT_NE(j["error"].get<std::string>().find("/nonexistent"), std::string::npos) << r.output;

  // A malformed launcher variable.
  r = sg::test::run_command("WORLD_SIZE=abc " + sg::test::shell_quote(sg::test::stepgraph_binary()) +
                            " validate llama/tiny --json 2>/dev/null");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(json_of(r)["error"].get<std::string>().find("WORLD_SIZE = 'abc'"), std::string::npos) << r.output;
  r = sg::test::run_command("WORLD_SIZE=abc " + sg::test::shell_quote(sg::test::stepgraph_binary()) +
                            " validate --all --json 2>/dev/null");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(json_of(r)["error"].get<std::string>().find("WORLD_SIZE"), std::string::npos) << r.output;

  // Bytes that are not UTF-8 are echoed in the error: replaced, not a JSON library exception.
  r = run({"validate", "llama/tiny", "model.cuda_graph_impl=\xff\xfe", "--json"}, false);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(json_of(r)["error"].get<std::string>().find("model.cuda_graph_impl"), std::string::npos) << r.output;
  r = run({"validate", "model.cuda_graph_impl=\xff\xfe", "--json"}, false);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(json_of(r)["recipes"].size(), sg::config::shipped_recipe_names().size()) << r.output;

  // A usage error is JSON too.
  r = run({"validate", "llama/tiny", "--all", "--json"}, false);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(json_of(r)["error"].get<std::string>().find("--all"), std::string::npos) << r.output;
}

TEST(ValidateCli, HelpSaysWhichSlurmVariablesCountTheRanks) {
  const Result r = run({"validate", "--help"});
  EXPECT_NE(r.output.find("SLURM_PROCID"), std::string::npos) << r.output;
  // SLURM_NTASKS without SLURM_PROCID (a shell in an allocation) is one process, as the help says.
  const Result shell = sg::test::run_command("env -u WORLD_SIZE -u RANK -u LOCAL_RANK -u SLURM_PROCID SLURM_NTASKS=2 " +
                                             sg::test::shell_quote(sg::test::stepgraph_binary()) +
                                             " validate llama/tiny 2>&1");
  EXPECT_EQ(shell.exit_code, 0) << shell.output;
}

// Activation bytes per layer with and without recompute, computed without a GPU.
TEST(ValidateCli, JsonAndConfigShowPrintActivationBytesWithAndWithoutRecompute) {
  Result r = run({"validate", "llama/tiny", "--json"}, false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json plain = nlohmann::json::parse(r.output)["activations"];
  ASSERT_TRUE(plain.is_object()) << r.output;
  EXPECT_EQ(plain["recompute"], "off");
  EXPECT_EQ(plain["layers"].size(), 8u);  // 4 GPT blocks: 8 layers
  EXPECT_EQ(plain["bytes"], plain["with_recompute_bytes"]);

  r = run({"validate", "llama/tiny", "model.recompute_granularity=selective", "model.recompute_modules=core_attn,mlp",
           "--json"},
          false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json selective = nlohmann::json::parse(r.output)["activations"];
  EXPECT_EQ(selective["recompute"], "selective (core_attn, mlp)");
  EXPECT_EQ(selective["bytes"], plain["bytes"]);
  EXPECT_LT(selective["with_recompute_bytes"].get<size_t>(), plain["bytes"].get<size_t>());
  for (const auto& layer : selective["layers"]) {
    EXPECT_LT(layer["with_recompute_bytes"].get<size_t>(), layer["bytes"].get<size_t>()) << layer.dump();
  }

  r = run({"config", "show", "llama/tiny", "model.recompute_granularity=full", "model.recompute_method=uniform",
           "model.recompute_num_layers=1"},
          false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("# activations per microbatch: 8 stack layers"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("recompute full, uniform"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("recompute_method: uniform\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("with recompute"), std::string::npos) << r.output;
}

// The MoE and Mamba kinds' recompute modules: accepted where the stack has the kind, with fewer bytes kept
// for exactly those layers; refused with the missing kind named where it does not.
TEST(ValidateCli, MoeAndMambaRecomputeModulesFollowTheStack) {
  const auto kept_below_bytes = [](const nlohmann::json& activations, const std::string& kind) {
    int shrunk = 0, same = 0;
    for (const auto& layer : activations["layers"]) {
      const bool less = layer["with_recompute_bytes"].get<size_t>() < layer["bytes"].get<size_t>();
      if (layer["kind"] == kind) {
        EXPECT_TRUE(less) << layer.dump();
        ++shrunk;
      } else {
        EXPECT_FALSE(less) << layer.dump();
        ++same;
      }
    }
    EXPECT_GT(shrunk, 0) << kind;
    EXPECT_GT(same, 0) << kind;
    EXPECT_LT(activations["with_recompute_bytes"].get<size_t>(), activations["bytes"].get<size_t>());
  };
  for (const std::string modules : {"moe", "moe_act"}) {
    SCOPED_TRACE(modules);
    const Result r = run({"validate", "moe/tiny_moe", "model.recompute_granularity=selective",
                          "model.recompute_modules=" + modules, "--json"},
                         false);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    kept_below_bytes(nlohmann::json::parse(r.output)["activations"], "moe");
  }
  Result r = run({"validate", "hybrid/tiny_hybrid", "model.recompute_granularity=selective",
                  "model.recompute_modules=mamba", "--json"},
                 false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  kept_below_bytes(nlohmann::json::parse(r.output)["activations"], "mamba");

  r = run({"validate", "llama/tiny", "model.recompute_granularity=selective", "model.recompute_modules=mamba"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("no Mamba layers (M in the pattern"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("remove mamba from model.recompute_modules"), std::string::npos) << r.output;
  r = run({"validate", "hybrid/tiny_hybrid", "model.recompute_granularity=selective",
           "model.recompute_modules=[mamba, moe_act]"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("no MoE layers (E in the pattern"), std::string::npos) << r.output;
}

TEST(ConfigShowCli, PrintsResolvedYamlThatValidates) {
  const auto dir = std::filesystem::temp_directory_path() / "sg_config_show_test";
  std::filesystem::create_directories(dir);
  // From an unrelated working directory: shipped recipes are built into the binary.
  Result r =
      run({"config", "show", "llama/tiny", "model.cuda_graph_impl=local", "train.train_iters=50"},
          false, dir.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("# stepgraph config show", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("  cuda_graph_impl: local\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  cuda_graph_scope: [full_iteration]\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  cuda_graph_warmup_steps: 3\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  train_iters: 50\n"), std::string::npos) << r.output;
  const std::string resolved = (dir / "resolved.yaml").string();
  std::ofstream(resolved) << r.output;
  r = run({"validate", resolved});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = run({"config", "show", resolved}, false);
  std::ifstream in(resolved);
  const std::string first((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(r.output.substr(r.output.find("model:")), first.substr(first.find("model:")))
      << "showing a resolved config again changes nothing";

  r = run({"config", "show"}, false);  // the default recipe: llama/demo
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("  vocab_size: 256\n"), std::string::npos) << r.output;
  r = run({"config", "show", "no/such"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  r = run({"config", "show", "tiny", "model.cuda_graph_impl=local", "rng.te_rng_tracker=false"});
  EXPECT_EQ(r.exit_code, 0) << "show prints even an invalid config";
  EXPECT_NE(r.output.find("warning: this configuration breaks 1 rule"), std::string::npos)
      << r.output;
  std::filesystem::remove_all(dir);
}

}  // namespace
