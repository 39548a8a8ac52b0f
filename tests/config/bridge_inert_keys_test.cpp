// Megatron-Bridge keys stepgraph accepts without implementing them (config/bridge_inert_keys.h), in every section
// that has them: they load from YAML and overrides, print only when set, in their section, and round-trip; a neutral
// value is one note, any other value a violation that names key, value and fix; the settings Bridge's recipes share
// load and change nothing; docs/configuration.md lists the table. And the unknown-key "did you mean" suggests only
// plausible typos.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "config/bridge_inert_keys.h"
#include "config/config.h"
#include "config/validate.h"
#include "core/strings.h"
#include "validation_report_text.h"

namespace sg::config {
namespace {

using test::describe;

constexpr const char* kNotePrefix = "accepted from Megatron-Bridge, no effect in stepgraph: ";

std::string dotted(const BridgeInertKey& k) { return std::string(k.section) + "." + k.key; }

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A value the key's row says changes nothing ("" when only unset does).
std::string neutral_example(const BridgeInertKey& k) {
  switch (k.accepts) {
    case InertValues::any: return "some_value";
    case InertValues::any_bool:
    case InertValues::copied: return "true";
    case InertValues::listed: return trim(split(k.neutral, ',')[0]);
  }
  return "";
}

// A model or optimizer key that a mixed_precision key of its name replaces (config/mixed_precision.h): set together
// with the section's keys, it is not there to print or note.
bool replaced_by_mixed_precision(const BridgeInertKey& k) {
  return std::string_view(k.section) != "mixed_precision" && find_bridge_inert_key("mixed_precision", k.key);
}

std::vector<Note> inert_notes(const ValidationReport& r) {
  std::vector<Note> out;
  for (const Note& n : r.notes) {
    if (n.message.rfind(kNotePrefix, 0) == 0) out.push_back(n);
  }
  return out;
}

// The violations whose values name `key`.
std::vector<Violation> violations_of(const ValidationReport& r, const std::string& key) {
  std::vector<Violation> out;
  for (const Violation& v : r.violations) {
    if (std::any_of(v.values.begin(), v.values.end(), [&](const KeyValue& kv) { return kv.key == key; })) {
      out.push_back(v);
    }
  }
  return out;
}

ValidationReport check(const std::vector<std::string>& overrides) {
  return validate(load_config("llama/tiny", overrides));
}

TEST(BridgeInertKeys, EachKeyIsKnownOnceAndPrintsOnlyWhenSet) {
  const std::vector<std::string> keys = config_keys();
  EXPECT_EQ(std::set<std::string>(keys.begin(), keys.end()).size(), keys.size());  // no key twice
  for (const BridgeInertKey& k : kBridgeInertKeys) {
    EXPECT_NE(std::find(keys.begin(), keys.end(), dotted(k)), keys.end()) << dotted(k);
    EXPECT_EQ(find_bridge_inert_key(k.section, k.key), &k);
    EXPECT_EQ(format_value(Config{}, dotted(k)), "null") << dotted(k);
  }
  for (const std::string& name : shipped_recipe_names()) {
    // By section: a name may be another section's key too (mixed_precision.grad_reduce_in_fp32 and ddp's).
    const YAML::Node yaml = YAML::Load(emit_yaml(validate(load_config(name)).config));
    for (const BridgeInertKey& k : kBridgeInertKeys) {
      const YAML::Node section = yaml[k.section];
      EXPECT_FALSE(section.IsDefined() && section[k.key].IsDefined()) << name << ": " << dotted(k);
    }
  }
  // null unsets: the YAML is the default's again.
  EXPECT_EQ(emit_yaml(load_config("llama/tiny", {"model.moe_grouped_gemm=true", "model.moe_grouped_gemm=null"})),
            emit_yaml(load_config("llama/tiny")));
}

TEST(BridgeInertKeys, NeutralValuesLoadAndAreOneNote) {
  std::vector<std::string> all;
  size_t copied = 0;
  for (const BridgeInertKey& k : kBridgeInertKeys) {
    const std::string value = neutral_example(k);
    if (value.empty()) continue;  // only unset is neutral
    const std::string key = dotted(k), setting = key + "=" + value;
    if (!replaced_by_mixed_precision(k)) all.push_back(setting);
    // From an override and from a recipe alike.
    EXPECT_EQ(format_value(load_config("llama/tiny", {setting}), key), value);
    const Config from_yaml =
        load_config_yaml(std::string(k.section) + ":\n  " + k.key + ": " + value + "\n", "bridge.yaml");
    EXPECT_EQ(format_value(from_yaml, key), value);

    const ValidationReport r = check({setting});
    EXPECT_TRUE(violations_of(r, key).empty()) << describe(r);
    if (k.accepts == InertValues::copied) {  // it has an effect (mixed_precision_test.cpp): in no such note
      EXPECT_TRUE(inert_notes(r).empty()) << describe(r);
      ++copied;
      continue;
    }
    const std::vector<Note> notes = inert_notes(r);
    ASSERT_EQ(notes.size(), 1u) << key << "\n" << describe(r);
    EXPECT_TRUE(contains(notes[0].message, key + ": " + k.effect)) << notes[0].message;
    ASSERT_EQ(notes[0].values.size(), 1u);
    EXPECT_EQ(notes[0].values[0].key, key);
    EXPECT_EQ(notes[0].values[0].value, value);
  }
  const ValidationReport every = check(all);
  EXPECT_TRUE(every.ok()) << describe(every);
  const std::vector<Note> notes = inert_notes(every);
  ASSERT_EQ(notes.size(), 1u) << describe(every);
  EXPECT_EQ(notes[0].values.size(), all.size() - copied);
  // Keys that change nothing for the same reason share it: "a kernel choice" is said once.
  const std::string& m = notes[0].message;
  EXPECT_EQ(m.find("a kernel choice"), m.rfind("a kernel choice")) << m;
  EXPECT_TRUE(contains(m, "model.moe_permute_fusion, model.moe_router_fusion")) << m;
}

TEST(BridgeInertKeys, EquivalentSpellingsOfANeutralValueAreNeutral) {
  for (const char* neutral : {"model.moe_input_jitter_eps=0.0",
                              "model.moe_input_jitter_eps=0e0",
                              "model.moe_grouped_gemm=yes",
                              "model.moe_grouped_gemm=False",
                              "model.moe_enable_deepep=off",
                              "model.expert_tensor_parallel_size=1",
                              "model.moe_router_dtype=fp32",
                              "model.moe_router_num_groups=1",
                              "model.mtp_num_layers=0",
                              "model.hybrid_mlp_ratio=0.0",
                              "model.context_parallel_size=1.0",
                              "optimizer.main_grads_dtype=torch.float32",
                              "optimizer.main_params_dtype=float32",
                              "optimizer.bf16=yes",
                              "optimizer.fp16=off",
                              "logger.timing_log_level=-1",
                              "checkpoint.save_optim=True",
                              "ddp.data_parallel_sharding_strategy=optim_grads_params",
                              "ddp.num_distributed_optimizer_instances=1",
                              "rerun_state_machine.check_for_spiky_loss=true"}) {
    const ValidationReport r = check({neutral});
    EXPECT_TRUE(r.ok()) << neutral << "\n" << describe(r);
    EXPECT_EQ(inert_notes(r).size(), 1u) << neutral << "\n" << describe(r);
  }
  for (const char* other :
       {"model.moe_input_jitter_eps=0.01", "model.moe_permute_fusion=maybe", "model.moe_router_dtype=fp64",
        "model.moe_router_num_groups=8", "model.mtp_num_layers=1", "model.hybrid_mlp_ratio=0.5",
        "model.normalization=LayerNorm", "optimizer.main_grads_dtype=torch.bfloat16",
        "optimizer.main_params_dtype=fp16", "optimizer.optimizer=sgd", "logger.timing_log_level=3",
        "ddp.data_parallel_sharding_strategy=fsdp", "dataset.dataloader_type=cyclic"}) {
    const ValidationReport r = check({other});
    EXPECT_FALSE(r.ok()) << other;
    EXPECT_TRUE(inert_notes(r).empty()) << other << "\n" << describe(r);
  }
}

TEST(BridgeInertKeys, OtherValuesAreViolationsNamingKeyValueAndFix) {
  for (const BridgeInertKey& k : kBridgeInertKeys) {
    if (k.accepts == InertValues::any) continue;
    const std::string key = dotted(k);
    const ValidationReport r = check({key + "=not_a_value"});
    const std::vector<Violation> found = violations_of(r, key);
    ASSERT_EQ(found.size(), 1u) << key << "\n" << describe(r);
    EXPECT_EQ(found[0].rule, 16);
    EXPECT_EQ(found[0].values[0].value, "not_a_value");
    EXPECT_TRUE(contains(found[0].message, "stepgraph does not implement " + key + " = not_a_value"))
        << found[0].message;
    EXPECT_TRUE(contains(found[0].message, k.what)) << found[0].message;
    EXPECT_TRUE(contains(found[0].fix, "remove " + key)) << found[0].fix;
    const std::string neutral = neutral_example(k);
    EXPECT_EQ(contains(found[0].fix, "set it to " + neutral), !neutral.empty()) << found[0].fix;
    EXPECT_TRUE(inert_notes(r).empty()) << describe(r);
  }
  // Values a Bridge recipe could really carry, each with the value that changes nothing.
  const struct {
    const char* override_text;
    const char* key;
    const char* shown;
    const char* fix;
  } cases[] = {
      {"model.moe_router_dtype=fp64", "model.moe_router_dtype", "fp64", "set it to fp32"},
      {"model.expert_tensor_parallel_size=2", "model.expert_tensor_parallel_size", "2", "set it to 1"},
      {"model.hybrid_attention_ratio=0.25", "model.hybrid_attention_ratio", "0.25", "set it to 0"},
      {"model.moe_latent_size=128", "model.moe_latent_size", "128", "remove model.moe_latent_size"},
      {"model.moe_layer_recompute=true", "model.moe_layer_recompute", "true", "set it to false"},
      {"model.context_parallel_size=2", "model.context_parallel_size", "2", "set it to 1"},
      {"model.sequence_parallel=true", "model.sequence_parallel", "true", "set it to false"},
      {"model.virtual_pipeline_model_parallel_size=5", "model.virtual_pipeline_model_parallel_size", "5",
       "remove model.virtual_pipeline_model_parallel_size"},
      {"model.normalization=LayerNorm", "model.normalization", "LayerNorm", "set it to RMSNorm"},
      {"optimizer.main_params_dtype=torch.float16", "optimizer.main_params_dtype", "torch.float16",
       "set it to fp32 or float32 or torch.float32"},
      {"optimizer.optimizer=dist_muon", "optimizer.optimizer", "dist_muon", "set it to adam"},
      {"optimizer.bf16=false", "optimizer.bf16", "false", "set it to true"},
      {"scheduler.use_checkpoint_opt_param_scheduler=true", "scheduler.use_checkpoint_opt_param_scheduler", "true",
       "set it to false"},
      {"dataset.reset_attention_mask=true", "dataset.reset_attention_mask", "true", "set it to false"},
      {"checkpoint.load_optim=false", "checkpoint.load_optim", "false", "set it to true"},
      {"rng.data_parallel_random_init=true", "rng.data_parallel_random_init", "true", "set it to false"},
      {"rerun_state_machine.rerun_mode=validate_results", "rerun_state_machine.rerun_mode", "validate_results",
       "set it to disabled"},
      {"ddp.use_megatron_fsdp=true", "ddp.use_megatron_fsdp", "true", "set it to false"},
      {"ddp.num_distributed_optimizer_instances=2", "ddp.num_distributed_optimizer_instances", "2", "set it to 1"},
  };
  for (const auto& c : cases) {
    const ValidationReport r = check({c.override_text});
    const std::vector<Violation> found = violations_of(r, c.key);
    ASSERT_EQ(found.size(), 1u) << c.override_text << "\n" << describe(r);
    EXPECT_EQ(found[0].values[0].value, c.shown);
    EXPECT_TRUE(contains(found[0].fix, c.fix)) << found[0].fix;
  }
  // moe_layer_recompute's message names what stepgraph has instead.
  EXPECT_TRUE(contains(format_violation(violations_of(check({"model.moe_layer_recompute=true"}),
                                                      "model.moe_layer_recompute")[0]),
                       "recompute_granularity selective"));
}

TEST(BridgeInertKeys, ShowValidateShowRoundTrips) {
  const std::vector<std::string> overrides = {
      "model.moe_grouped_gemm=true", "model.moe_input_jitter_eps=0.0", "model.moe_router_dtype=fp32",
      "model.moe_flex_dispatcher_backend=hybridep", "logger.wandb_exp_name='run: 1, \"quoted\"'",
      "model.moe_per_layer_logging=on"};
  const Config c = load_config("llama/tiny", overrides);
  const std::string shown = emit_yaml(validate(c).config);
  // Booleans and numbers print as written (not as the strings "true", "0.0"); other text quoted where needed.
  for (const char* line : {"  moe_grouped_gemm: true\n", "  moe_input_jitter_eps: 0.0\n", "  moe_router_dtype: fp32\n",
                           "  moe_per_layer_logging: on\n", "  wandb_exp_name: \"run: 1, \\\"quoted\\\"\"\n"}) {
    EXPECT_TRUE(contains(shown, line)) << line << shown;
  }
  // After the model section's own keys, before the next section.
  EXPECT_LT(shown.find("  use_te_rng_tracker:"), shown.find("  moe_grouped_gemm:"));
  EXPECT_LT(shown.find("  moe_grouped_gemm:"), shown.find("\ntrain:"));
  const Config again = load_config_yaml(shown, "shown.yaml");
  EXPECT_EQ(format_value(again, "logger.wandb_exp_name"), format_value(c, "logger.wandb_exp_name"));
  EXPECT_EQ(emit_yaml(validate(again).config), shown);
  // A quoted boolean is the same text.
  const Config quoted = load_config_yaml("model:\n  moe_grouped_gemm: \"true\"\n", "q.yaml");
  EXPECT_EQ(format_value(quoted, "model.moe_grouped_gemm"), "true");
}

// Every section's keys, all set at once: each prints in its own section, after that section's own keys, and
// `config show`'s output reads back to itself.
TEST(BridgeInertKeys, EachPrintsInItsSectionAndRoundTrips) {
  std::vector<std::string> overrides;
  for (const BridgeInertKey& k : kBridgeInertKeys) {
    if (!neutral_example(k).empty() && !replaced_by_mixed_precision(k)) {
      overrides.push_back(dotted(k) + "=" + neutral_example(k));
    }
  }
  const ValidationReport r = check(overrides);
  ASSERT_TRUE(r.ok()) << describe(r);
  const std::string shown = emit_yaml(r.config);
  const std::string text = "\n" + shown;  // each section's line starts after a newline
  std::set<std::string> with_keys;
  for (const BridgeInertKey& k : kBridgeInertKeys) {
    const std::string value = neutral_example(k);
    if (value.empty() || replaced_by_mixed_precision(k)) continue;
    with_keys.insert(k.section);
    const std::string header = std::string(k.section) + ":\n";
    const size_t begin = text.find("\n" + header);
    ASSERT_NE(begin, std::string::npos) << k.section;
    size_t end = begin + 1;  // the next section's line, or npos
    while ((end = text.find('\n', end)) != std::string::npos && text.compare(end + 1, 2, "  ") == 0) ++end;
    const size_t at = text.find("\n  " + std::string(k.key) + ": " + format_value(r.config, dotted(k)) + "\n", begin);
    EXPECT_TRUE(at != std::string::npos && at < end) << dotted(k) << "\n" << shown;
    // After every key of the section that is not one of these.
    for (const std::string& key : config_keys()) {
      if (key.rfind(std::string(k.section) + ".", 0) != 0) continue;
      const std::string leaf = key.substr(key.find('.') + 1);
      if (find_bridge_inert_key(k.section, leaf)) continue;
      EXPECT_LT(text.find("\n  " + leaf + ":", begin), at) << key << " after " << dotted(k);
    }
  }
  EXPECT_EQ(with_keys, (std::set<std::string>{"model", "train", "optimizer", "scheduler", "dataset", "checkpoint",
                                              "logger", "rng", "rerun_state_machine", "ddp",
                                              "mixed_precision"}));
  const Config again = load_config_yaml(shown, "shown.yaml");
  EXPECT_EQ(emit_yaml(validate(again).config), shown);
  for (const BridgeInertKey& k : kBridgeInertKeys) {
    EXPECT_EQ(format_value(again, dotted(k)), format_value(r.config, dotted(k))) << dotted(k);
  }
}

// What Bridge's recipes set in common (recipes/common.py's _pretrain_common, optimizer_utils.py's Adam with cosine
// annealing) and what its Llama 3 H100 recipes add (recipes/llama/h100/llama3.py), at those recipes' values: the
// config is valid, and one note names every key that changes nothing.
TEST(BridgeInertKeys, TheSettingsBridgesRecipesShareChangeNothing) {
  const std::vector<std::string> bridge = {"train.manual_gc=true",
                                           "train.manual_gc_interval=100",
                                           "train.manual_gc_eval=100",
                                           "optimizer.optimizer=adam",
                                           "optimizer.bf16=true",
                                           "optimizer.fp16=false",
                                           "optimizer.main_grads_dtype=torch.float32",
                                           "optimizer.main_params_dtype=torch.float32",
                                           "scheduler.override_opt_param_scheduler=true",
                                           "ddp.overlap_param_gather=true",
                                           "ddp.average_in_collective=true",
                                           "ddp.data_parallel_sharding_strategy=optim_grads_params",
                                           "ddp.use_megatron_fsdp=false",
                                           "dataset.reset_attention_mask=false",
                                           "dataset.reset_position_ids=false",
                                           "dataset.num_dataset_builder_threads=1",
                                           "dataset.data_sharding=true",
                                           "dataset.dataloader_type=single",
                                           "dataset.num_workers=8",
                                           "dataset.skip_getting_attention_mask_from_dataset=true",
                                           "logger.log_timers_to_tensorboard=true",
                                           "checkpoint.ckpt_format=torch_dist",
                                           "checkpoint.fully_parallel_save=true",
                                           "model.pipeline_model_parallel_layout=null",
                                           "model.pipeline_dtype=null",
                                           "model.virtual_pipeline_model_parallel_size=null",
                                           "model.context_parallel_size=1",
                                           "model.sequence_parallel=false",
                                           "model.transformer_impl=transformer_engine",
                                           "model.attention_backend=null",
                                           "model.cross_entropy_loss_fusion=true",
                                           "model.cross_entropy_fusion_impl=te",
                                           "model.fine_grained_activation_offloading=false",
                                           "model.offload_modules=null"};
  const ValidationReport r = check(bridge);
  ASSERT_TRUE(r.ok()) << describe(r);
  const std::vector<Note> notes = inert_notes(r);
  ASSERT_EQ(notes.size(), 1u) << describe(r);
  size_t set = 0;
  for (const std::string& o : bridge) set += o.substr(o.find('=') + 1) == "null" ? 0 : 1;
  EXPECT_EQ(notes[0].values.size(), set) << notes[0].message;
  // The training they describe is the one without them.
  std::string without = emit_yaml(check({}).config), with = emit_yaml(r.config);
  for (const BridgeInertKey& k : kBridgeInertKeys) {
    if (format_value(r.config, dotted(k)) == "null") continue;  // not printed; its name may be another key's
    const size_t at = with.find("\n  " + std::string(k.key) + ": ");
    if (at != std::string::npos) with.erase(at, with.find('\n', at + 1) - at);
  }
  EXPECT_EQ(with, without);
}

TEST(BridgeInertKeys, AListIsATypeError) {
  try {
    load_config_yaml("model:\n  moe_router_dtype: [fp32]\n", "l.yaml");
    FAIL() << "a list loaded";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "l.yaml:2:")) << e.what();
    EXPECT_TRUE(contains(e.what(), "model.moe_router_dtype: expected a single value")) << e.what();
  }
}

// docs/configuration.md's section lists exactly the table, each key with its neutral values.
TEST(BridgeInertKeys, DocsSectionListsTheTable) {
  std::ifstream in(std::filesystem::path(STEPGRAPH_SOURCE_DIR) / "docs" / "configuration.md");
  std::stringstream text;
  text << in.rdbuf();
  const std::string docs = text.str();
  const std::string heading = "\n## Megatron-Bridge keys accepted without effect\n";
  const size_t begin = docs.find(heading);
  ASSERT_NE(begin, std::string::npos);
  const std::string section = docs.substr(begin, docs.find("\n## ", begin + 1) - begin);
  size_t rows = 0;
  for (const std::string& line : split(section, '\n')) rows += line.rfind("| `", 0) == 0 ? 1 : 0;
  EXPECT_EQ(rows, std::size(kBridgeInertKeys)) << section;
  for (const BridgeInertKey& k : kBridgeInertKeys) {
    const std::string row = "| `" + dotted(k) + "` | " + bridge_inert_neutral_text(k) + " |";
    EXPECT_TRUE(contains(section, "\n" + row)) << row;
  }
}

// The message of an unknown key given as an override.
std::string unknown(const std::string& override_text) {
  Config c;
  try {
    apply_override(c, override_text);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(UnknownKeySuggestions, OnlyPlausibleTyposAreSuggested) {
  const struct {
    const char* override_text;
    const char* suggestion;
  } good[] = {
      {"model.hiden_size=1", "model.hidden_size"},
      {"model.hidden_szie=1", "model.hidden_size"},
      {"model.hiddensize=1", "model.hidden_size"},
      {"model.cuda_graph_scop=attn", "model.cuda_graph_scope"},
      {"model.layernorm_eps=1e-6", "model.layernorm_epsilon"},
      {"model.moe_layer_frequency=2", "model.moe_layer_freq"},
      {"model.tensor_parallel_size=2", "model.tensor_model_parallel_size"},
      {"model.moe_router_load_balancing=none", "model.moe_router_load_balancing_type"},
      {"model.moe_grouped_gem=true", "model.moe_grouped_gemm"},
      {"model.moe_router_dtypes=fp32", "model.moe_router_dtype"},
      {"train.lr=0.1", "optimizer.lr"},
      {"logger.moe_grouped_gemm=true", "model.moe_grouped_gemm"},
  };
  for (const auto& g : good) {
    EXPECT_TRUE(contains(unknown(g.override_text), std::string("did you mean '") + g.suggestion + "'"))
        << g.override_text << ": " << unknown(g.override_text);
  }
  // Real Megatron keys stepgraph does not know: a word added or replaced is another key, however close the spelling.
  for (const char* other : {"model.moe_deepep_num_sms=20", "model.mtp_loss_scaling_factor=0.1",
                            "model.moe_shared_expert_size=128", "model.rotary_interleaved=false"}) {
    const std::string message = unknown(other);
    EXPECT_TRUE(contains(message, "unknown key")) << other << ": " << message;
    EXPECT_FALSE(contains(message, "did you mean")) << other << ": " << message;
    EXPECT_TRUE(contains(message, "docs/configuration.md")) << other << ": " << message;
  }
}

}  // namespace
}  // namespace sg::config
