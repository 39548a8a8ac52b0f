// Config loading, overrides, emission and recipe resolution (the model/batch/layer views: model_config_test.cpp).
#include "config/config.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "config/model_config.h"
#include "config/validate.h"
#include "config_test_util.h"
#include "model/layer_registry.h"

namespace sg::config {
namespace {

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(Config, DefaultsAreBridgeDefaults) {
  const config::Config c;
  EXPECT_EQ(c.model.cuda_graph_impl, "none");
  EXPECT_TRUE(c.model.cuda_graph_scope.empty());
  EXPECT_EQ(c.model.cuda_graph_warmup_steps, 3);
  EXPECT_FALSE(c.model.use_te_rng_tracker);
  EXPECT_FALSE(c.rng.te_rng_tracker);
  EXPECT_EQ(c.rng.seed, 1234);
  EXPECT_TRUE(c.rerun_state_machine.check_for_nan_in_loss);
  EXPECT_FALSE(c.ddp.check_for_nan_in_grad);
  EXPECT_FALSE(c.ddp.overlap_grad_reduce);  // Megatron's DistributedDataParallelConfig default
  EXPECT_EQ(c.scheduler.lr_decay_style, "linear");
  EXPECT_EQ(c.logger.log_interval, 100);
  EXPECT_FALSE(c.model.moe_expert_capacity_factor.has_value());
  EXPECT_EQ(c.model.recompute_modules, std::vector<std::string>{"core_attn"});
  EXPECT_EQ(c.model.tensor_model_parallel_size, 1);
  EXPECT_EQ(c.checkpoint.most_recent_k, -1);  // CheckpointConfig.most_recent_k: keep every checkpoint
}

TEST(Config, KeyTableCoversEverySection) {
  const auto sections = config::config_sections();
  EXPECT_EQ(sections,
            (std::vector<std::string>{"model", "train", "validation", "optimizer", "scheduler", "dataset", "tokenizer",
                                      "checkpoint", "logger", "rng", "rerun_state_machine", "ddp", "mixed_precision"}));
  const auto keys = config::config_keys();
  for (const char* key : {"model.cuda_graph_impl",
                          "model.cuda_graph_scope",
                          "model.cuda_graph_warmup_steps",
                          "model.use_te_rng_tracker",
                          "rng.te_rng_tracker",
                          "rerun_state_machine.check_for_nan_in_loss",
                          "ddp.check_for_nan_in_grad",
                          "model.hybrid_override_pattern",
                          "model.recompute_method",
                          "dataset.pad_cu_seqlens",
                          "checkpoint.save_interval",
                          "tokenizer.tokenizer_type",
                          "tokenizer.tokenizer_model",
                          "dataset.split",
                          "dataset.valid_data_path",
                          "dataset.eod_mask_loss",
                          "validation.eval_interval",
                          "validation.eval_iters",
                          "validation.skip_train",
                          "validation.start_eval_at_iter",
                          "logger.tensorboard_dir",
                          "optimizer.use_precision_aware_optimizer",
                          "optimizer.exp_avg_dtype",
                          "optimizer.exp_avg_sq_dtype",
                          "ddp.grad_reduce_in_fp32"}) {
    EXPECT_NE(std::find(keys.begin(), keys.end(), key), keys.end()) << key;
  }
  // main's 94 + 11 MoE keys + model.recompute_method + 5 data-parallel keys + 3 precision-aware optimizer keys
  // + checkpoint.most_recent_k + model.is_hybrid_model + the validation section's 8 keys beyond the 2 that were
  // train's + the 3 weight-decay schedule keys + tokenizer.use_tokenizer_vocab_size + Bridge's keys accepted without
  // effect (config/bridge_inert_keys.h)
  EXPECT_EQ(keys.size(), 145u + std::size(config::kBridgeInertKeys));  // + the 3 sample-based lengths
  // + scheduler.max_steps and lr_warmup_fraction + train.num_epochs + the 4 lr-shape keys (lr_warmup_init and WSD's
  // three, which were Bridge keys accepted without effect before) + model.moe_shared_expert_gate and
  // model.rotary_percent (likewise) + LongRoPE's 4 keys (model.longrope_*)
}

TEST(Config, ShippedRecipesHaveTheFixedShapes) {
  struct Shape {
    const char* name;
    int64_t vocab, layers, hidden, heads, groups, ffn, seq, mbs, gbs;
  };
  const Shape shapes[] = {
      {"llama/tiny", 8192, 4, 256, 4, 4, 704, 256, 4, 4},
      {"llama/small", 32768, 12, 768, 12, 12, 2048, 1024, 8, 8},
      {"llama/1b", 32768, 16, 2048, 16, 16, 5632, 2048, 4, 4},
      {"moe/tiny_moe", 8192, 4, 256, 4, 4, 704, 256, 4, 4},
      {"llama/demo", 256, 4, 256, 4, 4, 704, 256, 4, 4},
  };
  for (const auto& s : shapes) {
    SCOPED_TRACE(s.name);
    const config::Config c = config::load_config(s.name);
    EXPECT_EQ(c.model.vocab_size, s.vocab);
    EXPECT_EQ(c.model.num_layers, s.layers);
    EXPECT_EQ(c.model.hidden_size, s.hidden);
    EXPECT_EQ(c.model.num_attention_heads, s.heads);
    EXPECT_EQ(c.model.num_query_groups, s.groups);
    EXPECT_EQ(c.model.ffn_hidden_size, s.ffn);
    EXPECT_EQ(c.model.seq_length, s.seq);
    EXPECT_EQ(c.train.micro_batch_size, s.mbs);
    EXPECT_EQ(c.train.global_batch_size, s.gbs);
    EXPECT_EQ(c.dataset.mock, std::string(s.name) != "llama/demo");
  }
  const config::Config moe = config::load_config("moe/tiny_moe");
  EXPECT_EQ(moe.model.num_moe_experts, 8);
  EXPECT_EQ(moe.model.moe_router_topk, 2);
  EXPECT_EQ(moe.model.moe_ffn_hidden_size, 256);
  EXPECT_FALSE(moe.model.moe_expert_capacity_factor.has_value());  // token-dropless
  EXPECT_FALSE(moe.model.moe_pad_expert_input_to_capacity);

  const config::Config demo = config::load_config("llama/demo");
  EXPECT_EQ(demo.dataset.data_path, std::vector<std::string>{"data/synth/corpus"});
  EXPECT_EQ(demo.train.train_iters, 300);
  EXPECT_DOUBLE_EQ(*demo.optimizer.lr, 3e-3);
  EXPECT_DOUBLE_EQ(demo.optimizer.min_lr, 3e-4);
  EXPECT_EQ(demo.scheduler.lr_warmup_iters, 30);
  EXPECT_EQ(demo.scheduler.lr_decay_style, "cosine");
  EXPECT_EQ(demo.logger.log_interval, 10);
  EXPECT_EQ(demo.checkpoint.save, "runs/demo/checkpoints");
  EXPECT_EQ(demo.checkpoint.save_interval, 100);
  EXPECT_EQ(demo.model.cuda_graph_impl, "local");
}

TEST(Config, EmbeddedRecipesMatchTheFilesAndStartWithAComment) {
  const std::filesystem::path root = std::filesystem::path(STEPGRAPH_SOURCE_DIR) / "recipes";
  std::vector<std::string> on_disk;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
    if (entry.path().extension() != ".yaml") continue;
    std::string name =
        std::filesystem::relative(entry.path(), root).replace_extension("").generic_string();
    on_disk.push_back(name);
  }
  std::sort(on_disk.begin(), on_disk.end());
  EXPECT_EQ(on_disk, config::shipped_recipe_names()) << "rebuild: the embedded recipes are stale";
  for (const auto& r : config::embedded_recipes()) {
    SCOPED_TRACE(r.name);
    EXPECT_EQ(std::string(r.text), read_text(root / (std::string(r.name) + ".yaml")));
    EXPECT_EQ(r.text[0], '#') << "every recipe starts with a comment saying what it is for";
  }
}

TEST(Config, RecipeResolution) {
  EXPECT_EQ(config::find_recipe("llama/tiny").name, "llama/tiny");
  EXPECT_EQ(config::find_recipe("tiny").name, "llama/tiny");
  EXPECT_EQ(config::find_recipe("tiny_moe").name, "moe/tiny_moe");
  // A recipe path that names no file (here: under an empty folder) falls back to the embedded recipe of its name.
  const std::string missing =
      (std::filesystem::temp_directory_path() / "sg_config_test_no_recipes" / "recipes/moe/tiny_moe.yaml").string();
  ASSERT_FALSE(std::filesystem::exists(missing));
  EXPECT_TRUE(config::find_recipe(missing).embedded);
  EXPECT_EQ(config::find_recipe(missing).name, "moe/tiny_moe");
  EXPECT_EQ(config::find_recipe("/nonexistent/recipes/llama/1b.yaml").name, "llama/1b");
  // A file on disk wins over the embedded recipe of the same name.
  const auto dir = std::filesystem::temp_directory_path() / "sg_config_test_recipes";
  std::filesystem::create_directories(dir / "recipes" / "llama");
  const auto path = dir / "recipes" / "llama" / "tiny.yaml";
  std::ofstream(path) << "model:\n  vocab_size: 1234\n";
  const config::RecipeText on_disk = config::find_recipe(path.string());
  EXPECT_FALSE(on_disk.embedded);
  EXPECT_EQ(config::load_config(path.string()).model.vocab_size, 1234);
  EXPECT_EQ(config::load_config("llama/tiny").model.vocab_size, 8192);

  const std::string unknown = config_error([] { config::find_recipe("llama/tinny"); });
  EXPECT_NE(unknown.find("did you mean 'llama/tiny'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("llama/small"), std::string::npos)
      << "lists the shipped recipes: " << unknown;
  EXPECT_NE(config_error([] { config::find_recipe(""); }), "");
  EXPECT_NE(config_error([&] { config::find_recipe(dir.string()); }).find("directory"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(Config, ScopeAcceptsListOrCommaString) {
  const config::Config a = config::load_config_yaml("model:\n  cuda_graph_scope: [attn, mlp]\n", "a.yaml");
  const config::Config b = config::load_config_yaml("model:\n  cuda_graph_scope: attn,mlp\n", "b.yaml");
  const config::Config c =
      config::load_config_yaml("model:\n  cuda_graph_scope:\n    - attn\n    - mlp\n", "c.yaml");
  const std::vector<std::string> expected = {"attn", "mlp"};
  EXPECT_EQ(a.model.cuda_graph_scope, expected);
  EXPECT_EQ(b.model.cuda_graph_scope, expected);
  EXPECT_EQ(c.model.cuda_graph_scope, expected);
  EXPECT_TRUE(
      config::load_config_yaml("model:\n  cuda_graph_scope: []\n", "d").model.cuda_graph_scope.empty());
  EXPECT_TRUE(
      config::load_config_yaml("model:\n  cuda_graph_scope:\n", "e").model.cuda_graph_scope.empty());
}

// Megatron's None for recompute_modules is its default list, ["core_attn"]; an empty list recomputes nothing, which
// validation notes.
TEST(Config, ANullRecomputeModulesIsMegatronsDefaultList) {
  const std::vector<std::string> core_attn = {"core_attn"};
  EXPECT_EQ(config::load_config_yaml("model:\n  recompute_modules: null\n", "a").model.recompute_modules, core_attn);
  EXPECT_EQ(config::load_config("tiny", {"model.recompute_modules=null"}).model.recompute_modules, core_attn);
  EXPECT_EQ(config::load_config("tiny", {"model.recompute_modules=mlp", "model.recompute_modules=null"})
                .model.recompute_modules,
            core_attn);
  const config::Config empty =
      config::load_config("tiny", {"model.recompute_granularity=selective", "model.recompute_modules=[]"});
  EXPECT_TRUE(empty.model.recompute_modules.empty());
  const config::ValidationReport r = config::validate(empty);
  EXPECT_TRUE(std::any_of(r.notes.begin(), r.notes.end(), [](const config::Note& n) {
    return config::format_note(n).find("recomputes nothing") != std::string::npos;
  }));
}

TEST(Config, ParseErrorsNameFileLineColumnAndKey) {
  // Bad YAML: position of the problem.
  std::string e =
      config_error([] { config::load_config_yaml("model:\n  hidden_size: [256\n", "bad.yaml"); });
  EXPECT_NE(e.find("bad.yaml:"), std::string::npos) << e;
  EXPECT_NE(e.find("invalid YAML"), std::string::npos) << e;
  EXPECT_EQ(e.find("quote it"), std::string::npos) << e;
  // An unquoted hybrid pattern starting with '*' is a YAML alias: the error says to quote it.
  e = config_error(
      [] { config::load_config_yaml("model:\n  num_layers: 4\n  hybrid_override_pattern: *-M-\n", "p.yaml"); });
  EXPECT_NE(e.find("p.yaml:3:"), std::string::npos) << e;
  EXPECT_NE(e.find("quote it: hybrid_override_pattern: \"*-M-\""), std::string::npos) << e;
  // Unknown key with a suggestion and its position.
  e = config_error(
      [] { config::load_config_yaml("model:\n  num_layers: 2\n  hiden_size: 256\n", "r.yaml"); });
  EXPECT_NE(e.find("r.yaml:3:3"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'model.hidden_size'"), std::string::npos) << e;
  // A key under the wrong section points at the right one.
  e = config_error([] { config::load_config_yaml("train:\n  lr: 0.1\n", "r.yaml"); });
  EXPECT_NE(e.find("did you mean 'optimizer.lr'"), std::string::npos) << e;
  // Unknown section.
  e = config_error([] { config::load_config_yaml("modle:\n  num_layers: 2\n", "r.yaml"); });
  EXPECT_NE(e.find("did you mean 'model'"), std::string::npos) << e;
  e = config_error([] { config::load_config_yaml("hidden_size: 2\n", "r.yaml"); });
  EXPECT_NE(e.find("model.hidden_size"), std::string::npos) << e;
  // Wrong types, with position, key and expectation.
  e = config_error([] { config::load_config_yaml("model:\n  hidden_size: abc\n", "t.yaml"); });
  EXPECT_NE(e.find("t.yaml:2:16: model.hidden_size: expected an integer, got 'abc'"),
            std::string::npos)
      << e;
  e = config_error([] { config::load_config_yaml("model:\n  hidden_size: 2.5\n", "t.yaml"); });
  EXPECT_NE(e.find("expected an integer"), std::string::npos) << e;
  e = config_error([] { config::load_config_yaml("model:\n  hidden_size: '256'\n", "t.yaml"); });
  EXPECT_NE(e.find("expected an integer"), std::string::npos)
      << "quoted numbers are strings: " << e;
  e = config_error([] { config::load_config_yaml("model:\n  cpu_offloading: maybe\n", "t.yaml"); });
  EXPECT_NE(e.find("expected true or false"), std::string::npos) << e;
  e = config_error([] { config::load_config_yaml("optimizer:\n  lr: fast\n", "t.yaml"); });
  EXPECT_NE(e.find("optimizer.lr: expected a number"), std::string::npos) << e;
  e = config_error([] { config::load_config_yaml("model:\n  cuda_graph_impl: [local]\n", "t.yaml"); });
  EXPECT_NE(e.find("expected a string"), std::string::npos) << e;
  e = config_error([] { config::load_config_yaml("model:\n  cuda_graph_scope: {a: 1}\n", "t.yaml"); });
  EXPECT_NE(e.find("model.cuda_graph_scope"), std::string::npos) << e;
  e = config_error([] { config::load_config_yaml("model:\n  cuda_graph_impl:\n", "t.yaml"); });
  EXPECT_NE(e.find("expected a string, got null"), std::string::npos) << e;
  e = config_error([] { config::load_config_yaml("model:\n  cuda_graph_scope: attn,,mlp\n", "t.yaml"); });
  EXPECT_NE(e.find("item 2 of the list is empty"), std::string::npos) << e;
  e = config_error(
      [] { config::load_config_yaml("model:\n  hidden_size: 99999999999999999999\n", "t.yaml"); });
  EXPECT_NE(e.find("int64"), std::string::npos) << e;
  // Structure.
  EXPECT_NE(config_error([] { config::load_config_yaml("- a\n- b\n", "s.yaml"); }).find("map of sections"),
            std::string::npos);
  EXPECT_NE(config_error([] { config::load_config_yaml("model: 3\n", "s.yaml"); }).find("must be a map"),
            std::string::npos);
  EXPECT_NE(config_error([] {
              config::load_config_yaml("model:\n  num_layers: 1\n  num_layers: 2\n", "s");
            }).find("twice"),
            std::string::npos);
  EXPECT_NE(config_error([] {
              config::load_config_yaml("model: {}\n---\nmodel: {}\n", "s");
            }).find("s:2: a second YAML document"),
            std::string::npos);
  EXPECT_NE(config_error([] {
              config::load_config_yaml(",m\nmodel:\n  num_layers: 2\n", "s");
            }).find("invalid YAML"),
            std::string::npos)
      << "yaml-cpp reads a leading ',' as an empty document; that must not pass as all defaults";
  EXPECT_EQ(config::load_config_yaml("# only a comment\n---\n", "c").model.cuda_graph_impl, "none");
  // Empty text and nulls are fine: defaults (and null unsets an optional key).
  EXPECT_EQ(config::load_config_yaml("", "empty").model.cuda_graph_warmup_steps, 3);
  EXPECT_FALSE(config::load_config_yaml("train:\n  micro_batch_size: null\n", "n")
                   .train.micro_batch_size.has_value());
}

// The shape of an override's key, as bench's many-valued flags tell a trailing override from a value holding '='.
TEST(Config, ADottedOverrideHasAKeyOfTheFormSectionKey) {
  EXPECT_TRUE(config::looks_like_dotted_override("optimizer.lr=1e-3"));
  EXPECT_TRUE(config::looks_like_dotted_override(" model.cuda_graph_scope = attn"));
  EXPECT_FALSE(config::looks_like_dotted_override("export NCCL_DEBUG=INFO"));
  EXPECT_FALSE(config::looks_like_dotted_override("A=1 echo x"));
  EXPECT_FALSE(config::looks_like_dotted_override("model.a.b=1"));
  EXPECT_FALSE(config::looks_like_dotted_override(".lr=1"));
  EXPECT_FALSE(config::looks_like_dotted_override("optimizer.lr"));
}

TEST(Config, Overrides) {
  config::Config c = config::load_config("llama/tiny");
  config::apply_overrides(
      c, {"model.cuda_graph_scope=attn,mlp", "train.train_iters=50", "optimizer.lr=1e-3",
          "model.cpu_offloading=true", "checkpoint.save=runs/x", "model.num_query_groups=null",
          "model.moe_expert_capacity_factor=1.5", "dataset.data_path=[a/b, c/d]"});
  EXPECT_EQ(c.model.cuda_graph_scope, (std::vector<std::string>{"attn", "mlp"}));
  EXPECT_EQ(c.train.train_iters, 50);
  EXPECT_DOUBLE_EQ(*c.optimizer.lr, 1e-3);
  EXPECT_TRUE(c.model.cpu_offloading);
  EXPECT_EQ(c.checkpoint.save, "runs/x");
  EXPECT_FALSE(c.model.num_query_groups.has_value());
  EXPECT_DOUBLE_EQ(*c.model.moe_expert_capacity_factor, 1.5);
  EXPECT_EQ(c.dataset.data_path, (std::vector<std::string>{"a/b", "c/d"}));
  config::apply_override(c, "model.cuda_graph_scope=[moe_router, moe_preprocess]");
  EXPECT_EQ(c.model.cuda_graph_scope, (std::vector<std::string>{"moe_router", "moe_preprocess"}));
  config::apply_override(c, "model.cuda_graph_scope=");
  EXPECT_TRUE(c.model.cuda_graph_scope.empty());
  config::apply_override(c, " model.num_layers = 6 ");
  EXPECT_EQ(c.model.num_layers, 6);
}

TEST(Config, MalformedOverridesAreClearErrors) {
  config::Config c;
  const auto error = [&](const char* text) {
    return config_error([&] { config::apply_override(c, text); });
  };
  EXPECT_NE(error("model.num_layers").find("no '='"), std::string::npos);
  EXPECT_NE(error("=3").find("no key"), std::string::npos);
  EXPECT_NE(error("num_layers=3").find("section.key"), std::string::npos);
  EXPECT_NE(error("model.a.b=3").find("section.key"), std::string::npos);
  EXPECT_NE(error("model.hiden_size=3").find("did you mean 'model.hidden_size'"),
            std::string::npos);
  EXPECT_NE(error("modle.hidden_size=3").find("did you mean 'model'"), std::string::npos);
  EXPECT_NE(
      error("model.hidden_size=abc").find("model.hidden_size: expected an integer, got 'abc'"),
      std::string::npos);
  EXPECT_NE(error("model.cuda_graph_scope=[attn").find("not a YAML value"), std::string::npos);
  EXPECT_NE(error("model.cuda_graph_impl={a: b}").find("expected a string"), std::string::npos);
  EXPECT_NE(error("model.num_layers=[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]").find("nests"),
            std::string::npos);
  EXPECT_NE(error("model.x y=1").find("characters"), std::string::npos);
  // yaml-cpp silently drops text after the first value; the override parser does not.
  EXPECT_NE(error("model.cuda_graph_scope=[attn] mlp").find("not one YAML value"),
            std::string::npos);
  EXPECT_NE(error("checkpoint.save=dir #x").find("not one YAML value"), std::string::npos);
  EXPECT_NE(error("checkpoint.save='a' b").find("not one YAML value"), std::string::npos);
  EXPECT_NE(error("model.cuda_graph_scope=,attn").find("not one YAML value"), std::string::npos);
  EXPECT_NE(error("model.cuda_graph_impl=local\nx").find("several lines"), std::string::npos);
  config::apply_override(c, "checkpoint.save='it''s #1'");
  EXPECT_EQ(c.checkpoint.save, "it's #1");
  config::apply_override(c, "checkpoint.save=\"a\\\"b\"");
  EXPECT_EQ(c.checkpoint.save, "a\"b");
  EXPECT_TRUE(config::looks_like_override("a.b=c"));
  EXPECT_FALSE(config::looks_like_override("llama/tiny"));
}

TEST(Config, EmitRoundTripsAndListsEveryKey) {
  for (const auto& name : config::shipped_recipe_names()) {
    SCOPED_TRACE(name);
    const config::Config resolved = config::validate(config::load_config(name)).config;
    const std::string yaml = config::emit_yaml(resolved, "header line\nsecond");
    EXPECT_EQ(yaml.rfind("# header line\n# second\n", 0), 0u);
    const YAML::Node parsed = YAML::Load(yaml);
    for (const auto& key : config::config_keys()) {
      const std::string section = key.substr(0, key.find('.')), leaf = key.substr(key.find('.') + 1);
      // Bridge's keys without effect print only when set (bridge_inert_keys_test.cpp).
      const bool inert = config::find_bridge_inert_key(section, leaf) != nullptr;
      const YAML::Node in_section = parsed[section];
      EXPECT_NE(in_section.IsDefined() && in_section[leaf].IsDefined(), inert) << key;
    }
    const config::Config again = config::load_config_yaml(yaml, "emitted");
    EXPECT_EQ(config::emit_yaml(again), config::emit_yaml(resolved));
  }
  EXPECT_NE(config::emit_yaml(config::Config{}).find("  cuda_graph_warmup_steps: 3\n"), std::string::npos);
  // Awkward values survive the round trip.
  config::Config odd;
  odd.checkpoint.save = "dir with: colon, comma \"quote\" \\ and\ttab";
  odd.checkpoint.load = "yes";
  odd.dataset.data_path = {"1b", "-x", "a,b", "null", ".5"};
  odd.optimizer.lr = 3e-4;
  odd.optimizer.min_lr = 0.1;
  odd.model.rotary_base = 500000.0;
  odd.model.attention_dropout = 1.0 / 3.0;
  const config::Config back = config::load_config_yaml(config::emit_yaml(odd), "odd");
  EXPECT_EQ(back.checkpoint.save, odd.checkpoint.save);
  EXPECT_EQ(back.checkpoint.load, odd.checkpoint.load);
  EXPECT_EQ(back.dataset.data_path, odd.dataset.data_path);
  EXPECT_EQ(back.optimizer.lr, odd.optimizer.lr);
  EXPECT_EQ(back.optimizer.min_lr, odd.optimizer.min_lr);
  EXPECT_EQ(back.model.rotary_base, odd.model.rotary_base);
  EXPECT_EQ(back.model.attention_dropout,
            odd.model.attention_dropout);  // shortest round-trip digits
  EXPECT_NE(config::emit_yaml(odd).find("lr: 0.0003\n"), std::string::npos);
}

TEST(Config, FormatValue) {
  config::Config c = config::load_config("llama/tiny", {"model.cuda_graph_scope=attn,mlp"});
  EXPECT_EQ(config::format_value(c, "model.cuda_graph_scope"), "[attn, mlp]");
  EXPECT_EQ(config::format_value(c, "model.hidden_size"), "256");
  EXPECT_EQ(config::format_value(c, "checkpoint.save"), "null");
  EXPECT_EQ(config::format_value(c, "model.use_te_rng_tracker"), "true");
  EXPECT_NE(config_error([&] { config::format_value(c, "model.nope"); }), "");
}

TEST(Config, DocsListEveryKey) {
  const std::string docs =
      read_text(std::filesystem::path(STEPGRAPH_SOURCE_DIR) / "docs" / "configuration.md");
  ASSERT_FALSE(docs.empty());
  for (const auto& key : config::config_keys())
    EXPECT_NE(docs.find("`" + key + "`"), std::string::npos) << key;
  for (int rule = 1; rule <= config::kNumRules; ++rule) {
    EXPECT_NE(docs.find("| " + std::to_string(rule) + " |"), std::string::npos) << "rule " << rule;
  }
}

TEST(ConfigFuzz, RandomOverridesOnlyEverThrowSgErrors) {
  std::mt19937_64 rng(20240601);
  const auto keys = config::config_keys();
  const std::string alphabet =
      "abcdefgmnoprstxyz_.=,:-[]{}'\"#&*!|>%@`?~ \t\n0123456789eE+\\/\x01\x7f\xc3\xa9\xff";
  const std::vector<std::string> fragments = {
      "null", "true", "[",    "]", "{",  "}", "- ", ": ", "---",   "...",  "1e999",          "-1",
      "0x10", ".inf", ".nan", "'", "\"", ",", "&a", "*a", "!!str", "attn", "full_iteration", "[[",
      "\\x00"};
  int applied = 0, rejected = 0;
  for (int i = 0; i < 6000; ++i) {
    std::string text;
    const int shape = static_cast<int>(rng() % 3);
    if (shape > 0) text = keys[rng() % keys.size()] + "=";  // valid key: exercise the value parser
    const int pieces = static_cast<int>(rng() % 12);
    for (int p = 0; p < pieces; ++p) {
      if (rng() % 3 == 0) {
        text += fragments[rng() % fragments.size()];
      } else {
        text += alphabet[rng() % alphabet.size()];
      }
    }
    config::Config c = config::load_config("llama/tiny");
    try {
      config::apply_override(c, text);
      ++applied;
      const config::ValidationReport report = config::validate(c);  // validation never throws either
      (void)config::emit_yaml(report.config);
    } catch (const sg::Error&) {
      ++rejected;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "override '" << text << "' threw a non-sg exception: " << e.what();
    }
  }
  EXPECT_GT(applied, 100);
  EXPECT_GT(rejected, 100);
}

// Random edits of a recipe's text give a config or a ConfigError, never a crash.
TEST(ConfigFuzz, MutatedRecipesOnlyEverThrowConfigErrors) {
  std::mt19937_64 rng(7);
  const std::string base = config::find_recipe("moe/tiny_moe").text;
  const std::string alphabet = ":-[]{}#'\"\n \t,&*!|>?%abc019.";
  for (int i = 0; i < 1500; ++i) {
    std::string text = base;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % text.size();
      switch (rng() % 3) {
        case 0:
          text[at] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          text.insert(at, 1, alphabet[rng() % alphabet.size()]);
          break;
        default:
          text.erase(at, 1 + rng() % 8);
          break;
      }
    }
    try {
      (void)config::validate(config::load_config_yaml(text, "mutated.yaml"));
    } catch (const config::ConfigError&) {
    } catch (const std::exception& e) {
      ADD_FAILURE() << "mutation threw a non-ConfigError: " << e.what() << "\n" << text;
    }
  }
}

// An empty value for a path key was read as null: `checkpoint.pretrained_checkpoint=$DIR` with DIR unset trained
// from a random init, `checkpoint.load=$DIR` resumed nothing. Path keys refuse it and name null; other keys keep it.
TEST(Config, AnEmptyValueForAPathKeyIsRefusedAndNamesNull) {
  for (const char* key :
       {"checkpoint.pretrained_checkpoint", "checkpoint.load", "checkpoint.save", "tokenizer.tokenizer_model",
        "logger.tensorboard_dir", "dataset.data_path", "dataset.valid_data_path"}) {
    SCOPED_TRACE(key);
    config::Config c = config::load_config("llama/tiny");
    const std::string e = config_error([&] { config::apply_override(c, std::string(key) + "= "); });
    EXPECT_NE(e.find("is a path and the value is empty"), std::string::npos) << e;
    EXPECT_NE(e.find(std::string(key) + "=null to unset it"), std::string::npos) << e;
    config::apply_override(c, std::string(key) + "=null");  // null still unsets (or empties) it
  }
  config::Config c = config::load_config("llama/tiny", {"checkpoint.save=/tmp/x"});
  config::apply_override(c, "checkpoint.save=null");
  EXPECT_FALSE(c.checkpoint.save.has_value());
  // Keys that are no paths still read an empty value as null.
  config::apply_override(c, "model.hybrid_override_pattern=");
  EXPECT_FALSE(c.model.hybrid_override_pattern.has_value());
  config::apply_override(c, "model.cuda_graph_scope=");
  EXPECT_TRUE(c.model.cuda_graph_scope.empty());
}

}  // namespace
}  // namespace sg::config
