// Every validation rule: a config that breaks it (the violation names the rule and the key) and a
// nearby config that passes; normalization; reporting everything at once.
#include "config/validate.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "config/config.h"
#include "config/model_config.h"
#include "model/layer_kind.h"
#include "model/layer_registry.h"
#include "shipped_recipe_data.h"
#include "test_util.h"
#include "validation_report_text.h"

namespace sg::config {
namespace {

using test::check_recipe;
using test::describe;
using test::names_key;

struct RuleCase {
  int rule;
  const char* recipe;
  std::vector<std::string> breaks;  // overrides that break the rule
  const char* key;                  // a key the violation must name
  std::vector<std::string> passes;  // a nearby config with no violation at all
};

// Base recipes are graph-ready (RNG trackers on; NaN checks on, which every graph mode allows), so
// one override switches graphs on.
// A LongRoPE factor list of n ones, as an override's value.
std::string ones(int n) {
  std::string list = "1";
  for (int i = 1; i < n; ++i) list += ",1";
  return list;
}

const std::vector<RuleCase> kCases = {
    {1,
     "llama/tiny",
     {"model.cuda_graph_impl=cuda"},
     "model.cuda_graph_impl",
     {"model.cuda_graph_impl=local"}},
    {1,
     "llama/tiny",
     {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=attn,mlpp"},
     "model.cuda_graph_scope",
     {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=attn,mlp"}},
    {3,
     "llama/tiny",
     {"model.cuda_graph_impl=local", "model.use_te_rng_tracker=false"},
     "model.use_te_rng_tracker",
     {"model.cuda_graph_impl=local"}},
    {3,
     "llama/tiny",
     {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=attn",
      "rng.te_rng_tracker=false"},
     "rng.te_rng_tracker",
     {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=attn"}},
    {4,
     "llama/tiny",
     {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=full_iteration,attn"},
     "model.cuda_graph_scope",
     {"model.cuda_graph_impl=local", "model.cuda_graph_scope=full_iteration"}},
    {4,
     "llama/tiny",
     {"model.cuda_graph_impl=local", "model.cuda_graph_scope=attn"},
     "model.cuda_graph_impl",
     {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=attn"}},
    {4,
     "llama/tiny",
     {"model.cuda_graph_impl=local", "model.cuda_graph_scope=full_iteration,mlp"},
     "model.cuda_graph_scope",
     {"model.cuda_graph_impl=local", "model.cuda_graph_scope=[]"}},
    // Rule 5 is a note (NaN checks run inside a whole-step graph): tests/config/config_hostile_input_test.cpp.
    {6,
     "moe/tiny_moe",
     {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=moe_router,moe"},
     "model.cuda_graph_scope",
     {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=moe_router"}},
    {6,
     "moe/tiny_moe",
     {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=attn,moe_preprocess"},
     "model.cuda_graph_scope",
     {"model.cuda_graph_impl=transformer_engine",
      "model.cuda_graph_scope=attn,moe_router,moe_preprocess"}},
    {7,
     "llama/tiny",
     {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=moe_router"},
     "model.num_moe_experts",
     {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=mlp"}},
    {7,
     "moe/tiny_moe",
     {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=mlp"},
     "model.num_moe_experts",
     {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=moe_router"}},
    {7,
     "llama/tiny",
     {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=mamba"},
     "model.hybrid_override_pattern",
     {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=attn"}},
    {7,
     "llama/tiny",
     {"model.hybrid_override_pattern=-M-M", "model.cuda_graph_impl=transformer_engine",
      "model.cuda_graph_scope=attn"},
     "model.hybrid_override_pattern",
     {"model.hybrid_override_pattern=-M-M", "model.cuda_graph_impl=transformer_engine",
      "model.cuda_graph_scope=mamba"}},
    // Rule 8 is a note (stepgraph graphs the whole dropless MoE layer): Validate.Rule8DroplessMoeScopeIsANote.
    {9,
     "llama/tiny",
     {"model.cuda_graph_impl=local", "dataset.packed_sequence=true"},
     "dataset.pad_to_max_length",
     {"model.cuda_graph_impl=local", "dataset.packed_sequence=true",
      "dataset.pad_to_max_length=true", "dataset.pad_cu_seqlens=true"}},
    {10,
     "llama/tiny",
     {"model.cuda_graph_impl=local", "model.cpu_offloading=true"},
     "model.cpu_offloading",
     {"model.cuda_graph_impl=none", "model.cpu_offloading=true"}},
    {11,
     "llama/tiny",
     {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=attn",
      "model.recompute_granularity=full"},
     "model.recompute_granularity",
     {"model.cuda_graph_impl=local", "model.recompute_granularity=full", "model.recompute_method=uniform",
      "model.recompute_num_layers=1"}},
    {12,
     "moe/tiny_moe",
     {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=moe_router",
      "model.recompute_granularity=selective", "model.recompute_modules=moe"},
     "model.recompute_modules",
     {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=moe_router",
      "model.recompute_granularity=selective", "model.recompute_modules=core_attn"}},
    {14,
     "llama/tiny",
     {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=attn",
      "model.delay_wgrad_compute=true", "model.add_bias_linear=true"},
     "model.add_bias_linear",
     {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=attn",
      "model.delay_wgrad_compute=true"}},
    {14,
     "llama/tiny",
     {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=attn",
      "model.delay_wgrad_compute=true", "model.gradient_accumulation_fusion=false"},
     "model.gradient_accumulation_fusion",
     {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=mlp",
      "model.delay_wgrad_compute=true", "model.gradient_accumulation_fusion=false"}},
    {15,
     "llama/tiny",
     {"model.cuda_graph_warmup_steps=-1"},
     "model.cuda_graph_warmup_steps",
     {"model.cuda_graph_warmup_steps=0"}},
    {16,
     "llama/tiny",
     {"model.num_attention_heads=3"},
     "model.num_attention_heads",
     {"model.num_attention_heads=8"}},
    {16,
     "llama/tiny",
     {"model.num_query_groups=3"},
     "model.num_query_groups",
     {"model.num_query_groups=2"}},
    {16,
     "llama/tiny",
     {"train.global_batch_size=6"},
     "train.global_batch_size",
     {"train.global_batch_size=8"}},
    {16,
     "llama/tiny",
     {"model.hidden_size=264", "model.num_attention_heads=8"},
     "model.hidden_size",
     {"model.hidden_size=320", "model.num_attention_heads=8"}},
    // The kernels' shape limits (kernels/shape_limits.h): each refused as the kernel would at plan time,
    // each passing at its edge.
    {16,
     "llama/tiny",
     {"model.hidden_size=272", "model.num_attention_heads=8"},  // head_dim 34: even, not a multiple of 8
     "model.num_attention_heads",
     {"model.hidden_size=272", "model.num_attention_heads=2", "model.num_query_groups=2"}},  // head_dim 136
    {16, "llama/tiny", {"model.kv_channels=12"}, "model.kv_channels", {"model.kv_channels=16"}},
    // Partial rotary: a share in (0, 1] of a head of 64 giving an even count, with RoPE.
    {16, "llama/tiny", {"model.rotary_percent=0.3"}, "model.rotary_percent", {"model.rotary_percent=0.3125"}},
    {16, "llama/tiny", {"model.rotary_percent=0.01"}, "model.rotary_percent", {"model.rotary_percent=0.03125"}},
    {16, "llama/tiny", {"model.rotary_percent=0"}, "model.rotary_percent", {"model.rotary_percent=0.5"}},
    {16, "llama/tiny", {"model.rotary_percent=1.5"}, "model.rotary_percent", {"model.rotary_percent=1"}},
    {16,
     "llama/tiny",
     {"model.rotary_percent=0.5", "model.position_embedding_type=none"},
     "model.rotary_percent",
     {"model.rotary_percent=1", "model.position_embedding_type=none"}},
    // LongRoPE: both lists, one factor per rotated pair (llama/tiny's heads of 64: 32), positive, with RoPE, not with
    // Llama 3 scaling.
    {16,
     "llama/tiny",
     {"model.longrope_short_factor=" + ones(31), "model.longrope_long_factor=" + ones(32)},
     "model.longrope_short_factor",
     {"model.longrope_short_factor=" + ones(32), "model.longrope_long_factor=" + ones(32)}},
    {16,
     "llama/tiny",
     {"model.longrope_short_factor=" + ones(32)},
     "model.longrope_long_factor",
     {"model.longrope_short_factor=" + ones(32), "model.longrope_long_factor=" + ones(32)}},
    {16,
     "llama/tiny",
     {"model.longrope_short_factor=" + ones(31) + ",0", "model.longrope_long_factor=" + ones(32)},
     "model.longrope_short_factor",
     {"model.longrope_short_factor=" + ones(31) + ",0.5", "model.longrope_long_factor=" + ones(32)}},
    {16,
     "llama/tiny",
     {"model.longrope_short_factor=" + ones(24), "model.longrope_long_factor=" + ones(24)},
     "model.longrope_long_factor",
     {"model.longrope_short_factor=" + ones(24), "model.longrope_long_factor=" + ones(24),
      "model.rotary_percent=0.75"}},
    {16,
     "llama/tiny",
     {"model.longrope_short_factor=" + ones(32), "model.longrope_long_factor=" + ones(32), "model.rope_scaling=true"},
     "model.rope_scaling",
     {"model.longrope_short_factor=" + ones(32), "model.longrope_long_factor=" + ones(32)}},
    {16,
     "llama/tiny",
     {"model.longrope_short_factor=" + ones(32), "model.longrope_long_factor=" + ones(32),
      "model.longrope_attention_factor=0"},
     "model.longrope_attention_factor",
     {"model.longrope_short_factor=" + ones(32), "model.longrope_long_factor=" + ones(32),
      "model.longrope_attention_factor=1.19"}},
    {16,  // no attention layers: the pattern is named, not RoPE
     "hybrid/tiny_hybrid",
     {"model.rotary_percent=0.5", "model.hybrid_override_pattern=M-M-M-M-"},
     "model.hybrid_override_pattern",
     {"model.rotary_percent=1", "model.hybrid_override_pattern=M-M-M-M-"}},
    {16, "llama/tiny", {"model.kv_channels=264"}, "model.kv_channels", {"model.kv_channels=256"}},
    {16,
     "llama/tiny",
     {"model.hidden_size=1056", "model.num_attention_heads=4"},  // head_dim 264: a multiple of 8 over 256
     "model.num_attention_heads",
     {"model.hidden_size=1024", "model.num_attention_heads=4"}},  // head_dim 256
    {16,
     "llama/tiny",
     {"model.seq_length=1", "dataset.seq_length=1"},
     "model.seq_length",
     {"model.seq_length=2", "dataset.seq_length=2"}},
    {16,
     "llama/tiny",
     {"model.hidden_size=260", "model.kv_channels=64"},  // the LM head: 16-byte rows
     "model.hidden_size",
     {"model.hidden_size=264", "model.kv_channels=64"}},
    {16,
     "llama/tiny",
     {"model.hidden_size=16392", "model.kv_channels=64"},  // wider than the RMSNorm backward's row group
     "model.hidden_size",
     {"model.hidden_size=16384", "model.kv_channels=64"}},
    {16, "hybrid/tiny_hybrid", {"model.mamba_state_dim=96"}, "model.mamba_state_dim", {"model.mamba_state_dim=16"}},
    {16, "hybrid/tiny_hybrid", {"model.mamba_head_dim=32"}, "model.mamba_head_dim", {"model.mamba_head_dim=64"}},
    {16,
     "hybrid/tiny_hybrid",
     {"train.micro_batch_size=65536", "train.global_batch_size=65536"},  // the SSD scan's grid
     "train.micro_batch_size",
     {"train.micro_batch_size=65535", "train.global_batch_size=65535"}},
    {16,
     "moe/tiny_moe",
     {"model.moe_ffn_hidden_size=100"},  // the experts' grouped GEMMs: 16-byte rows
     "model.moe_ffn_hidden_size",
     {"model.moe_ffn_hidden_size=104"}},
    {16,
     "moe/tiny_moe",
     {"model.moe_router_load_balancing_type=seq_aux_loss", "train.micro_batch_size=65536",
      "train.global_batch_size=65536"},
     "train.micro_batch_size",
     {"model.moe_router_load_balancing_type=seq_aux_loss", "train.micro_batch_size=65535",
      "train.global_batch_size=65535"}},
    {16,
     "llama/tiny",
     {"dataset.seq_length=512"},
     "dataset.seq_length",
     {"dataset.seq_length=null"}},
    {16, "llama/tiny", {"model.vocab_size=null"}, "model.vocab_size", {"model.vocab_size=32000"}},
    {16, "llama/tiny", {"optimizer.min_lr=1.0"}, "optimizer.min_lr", {"optimizer.min_lr=1e-5"}},
    {16,
     "llama/tiny",
     {"scheduler.lr_decay_style=exponential"},
     "scheduler.lr_decay_style",
     {"scheduler.lr_decay_style=constant"}},
    {16,
     "llama/tiny",
     {"model.hybrid_override_pattern=M*-"},
     "model.num_layers",
     {"model.hybrid_override_pattern=M*-*"}},
    {16,
     "llama/tiny",
     {"model.hybrid_override_pattern=M*-x"},
     "model.hybrid_override_pattern",
     {"model.hybrid_override_pattern=M*-E", "model.num_moe_experts=4",
                     "model.moe_token_dispatcher_type=alltoall"}},
    {16,
     "moe/tiny_moe",
     {"model.moe_router_topk=9"},
     "model.moe_router_topk",
     {"model.moe_router_topk=8"}},
    {16,
     "llama/tiny",
     {"dataset.mock=false"},
     "dataset.data_path",
     {"dataset.mock=true"}},  // the fix's other half, data_path naming a dataset: validate_data_files_test.cpp
    {16,
     "llama/tiny",
     {"optimizer.exp_avg_dtype=bf16"},
     "optimizer.use_precision_aware_optimizer",
     {"optimizer.exp_avg_dtype=bf16", "optimizer.use_precision_aware_optimizer=true"}},
    {16,
     "llama/tiny",
     {"optimizer.use_precision_aware_optimizer=true", "optimizer.exp_avg_sq_dtype=fp16"},
     "optimizer.exp_avg_sq_dtype",
     {"optimizer.use_precision_aware_optimizer=true", "optimizer.exp_avg_sq_dtype=bf16"}},
    {16,
     "llama/tiny",
     {"model.tensor_model_parallel_size=0"},
     "model.tensor_model_parallel_size",
     {"model.tensor_model_parallel_size=2"}},
};

TEST(Validate, EveryRuleHasABreakingAndAPassingConfig) {
  std::vector<bool> covered(config::kNumRules + 1, false);
  for (const auto& c : kCases) {
    std::string trace = std::string(c.recipe) + " rule " + std::to_string(c.rule) + ":";
    for (const auto& o : c.breaks) trace += " " + o;
    SCOPED_TRACE(trace);
    const config::ValidationReport broken = check_recipe(c.recipe, c.breaks);
    const auto it =
        std::find_if(broken.violations.begin(), broken.violations.end(),
                     [&](const config::Violation& v) { return v.rule == c.rule && names_key(v, c.key); });
    EXPECT_NE(it, broken.violations.end())
        << "expected rule " << c.rule << " naming " << c.key << ", got:\n"
        << describe(broken);
    if (it != broken.violations.end()) {
      EXPECT_FALSE(it->message.empty());
      EXPECT_FALSE(it->fix.empty());
      EXPECT_NE(config::format_violation(*it).find("[rule " + std::to_string(c.rule) + "]"),
                std::string::npos);
      EXPECT_NE(config::format_violation(*it).find(c.key), std::string::npos);
    }
    const config::ValidationReport passing = check_recipe(c.recipe, c.passes);
    EXPECT_TRUE(passing.ok()) << "the nearby config should pass:\n" << describe(passing);
    covered[c.rule] = true;
  }
  for (int rule = 1; rule <= config::kNumRules; ++rule) {
    // Rule 2 is a normalization, rules 5, 8 and 13 statements (NaN checks work in every mode; dropless
    // MoE graphs whole; recompute inside a graph draws the forward's masks), each with a note: none of
    // them can be broken.
    if (rule == 2 || rule == 5 || rule == 8 || rule == 13) continue;
    EXPECT_TRUE(covered[rule]) << "no case breaks rule " << rule;
  }
}

// Where their data exists (llama/demo reads data/synth/corpus; without it train would stop at once).
TEST(Validate, ShippedRecipesAreValid) {
  const sg::test::InShippedRecipeDataDir in_data_dir;
  for (const auto& name : config::shipped_recipe_names()) {
    const config::ValidationReport r = check_recipe(name.c_str(), {});
    EXPECT_TRUE(r.ok()) << name << ":\n" << describe(r);
  }
}

TEST(Validate, Rule2ImplNoneClearsTheScopeWithANote) {
  const config::ValidationReport r = check_recipe("llama/tiny", {"model.cuda_graph_scope=attn,mlp"});
  EXPECT_TRUE(r.ok()) << describe(r);
  EXPECT_TRUE(r.config.model.cuda_graph_scope.empty());
  ASSERT_FALSE(r.notes.empty());
  EXPECT_EQ(r.notes[0].rule, 2);
  EXPECT_NE(config::format_note(r.notes[0]).find("model.cuda_graph_scope = [attn, mlp]"),
            std::string::npos);
}

TEST(Validate, Rule3KeepsTheTrackersInSync) {
  config::ValidationReport r = check_recipe("llama/tiny", {"model.use_te_rng_tracker=false"});  // impl none: sync, note
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(r.config.model.use_te_rng_tracker);
  EXPECT_TRUE(r.config.rng.te_rng_tracker);
  EXPECT_TRUE(
      std::any_of(r.notes.begin(), r.notes.end(), [](const config::Note& n) { return n.rule == 3; }));
  // With graphs on, either false is an error naming both keys.
  r = check_recipe("llama/tiny", {"model.cuda_graph_impl=local", "rng.te_rng_tracker=false"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.violations[0].rule, 3);
  EXPECT_TRUE(names_key(r.violations[0], "model.use_te_rng_tracker"));
  EXPECT_TRUE(names_key(r.violations[0], "rng.te_rng_tracker"));
  // Bridge defaults (both false) with graphs: rule 3 only; the default NaN check is fine (rule 5 note).
  config::Config bare =
      config::load_config("llama/tiny", {"model.use_te_rng_tracker=false", "rng.te_rng_tracker=false"});
  bare.model.cuda_graph_impl = "local";
  bare.rerun_state_machine.check_for_nan_in_loss = true;
  r = config::validate(bare);
  ASSERT_EQ(r.violations.size(), 1u) << describe(r);
  EXPECT_EQ(r.violations[0].rule, 3);
  EXPECT_TRUE(std::any_of(r.notes.begin(), r.notes.end(), [](const config::Note& n) { return n.rule == 5; }));
}

TEST(Validate, Rule4NormalizesEmptyScopes) {
  config::ValidationReport r = check_recipe("llama/tiny", {"model.cuda_graph_impl=local"});
  EXPECT_TRUE(r.ok()) << describe(r);
  EXPECT_EQ(r.config.model.cuda_graph_scope, std::vector<std::string>{"full_iteration"});
  // transformer_engine without a scope graphs whole layers: every module scope the model has.
  r = check_recipe("llama/tiny", {"model.cuda_graph_impl=transformer_engine"});
  EXPECT_TRUE(r.ok()) << describe(r);
  EXPECT_EQ(r.config.model.cuda_graph_scope, (std::vector<std::string>{"attn", "mlp"}));
  r = check_recipe("moe/tiny_moe", {"model.cuda_graph_impl=transformer_engine"});
  EXPECT_TRUE(r.ok()) << describe(r);
  EXPECT_EQ(r.config.model.cuda_graph_scope,
            (std::vector<std::string>{"attn", "moe_router", "moe_preprocess"}));
  // The note says that a dropless MoE layer is not graphed whole, and how to have it: a scope that validates.
  const std::string suggested = "model.cuda_graph_scope=attn,moe";
  EXPECT_TRUE(std::any_of(r.notes.begin(), r.notes.end(), [&](const config::Note& n) {
    return n.rule == 4 && n.message.find(suggested + " graphs the whole layer") != std::string::npos;
  })) << describe(r);
  const config::ValidationReport followed =
      check_recipe("moe/tiny_moe", {"model.cuda_graph_impl=transformer_engine", suggested});
  EXPECT_TRUE(followed.ok()) << describe(followed);
  EXPECT_EQ(followed.config.model.cuda_graph_scope, (std::vector<std::string>{"attn", "moe"}));
  r = check_recipe("moe/tiny_moe", {"model.cuda_graph_impl=transformer_engine", "model.moe_expert_capacity_factor=1",
                                    "model.moe_pad_expert_input_to_capacity=true"});
  EXPECT_TRUE(r.ok()) << describe(r);
  EXPECT_EQ(r.config.model.cuda_graph_scope, (std::vector<std::string>{"attn", "moe"}));
  // The exact message of the brief's example.
  r = check_recipe("llama/tiny",
                   {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=full_iteration,attn"});
  ASSERT_EQ(r.violations.size(), 1u) << describe(r);
  EXPECT_EQ(config::format_violation(r.violations[0])
                .rfind("[rule 4] full_iteration is only valid with cuda_graph_impl local\n"
                       "  model.cuda_graph_impl = transformer_engine, model.cuda_graph_scope = "
                       "[full_iteration, attn]\n"
                       "  fix: ",
                       0),
            0u)
      << config::format_violation(r.violations[0]);
}

TEST(Validate, ReportsEveryViolationAtOnceInRuleOrder) {
  const config::ValidationReport r = check_recipe(
      "llama/tiny", {"model.cuda_graph_impl=local", "model.cuda_graph_scope=attn", "model.cpu_offloading=true",
                     "model.cuda_graph_warmup_steps=-2", "model.num_attention_heads=3", "model.num_query_groups=null",
                     "train.global_batch_size=5"});
  std::vector<int> rules;
  for (const auto& v : r.violations) rules.push_back(v.rule);
  EXPECT_EQ(rules, (std::vector<int>{4, 10, 15, 16, 16})) << describe(r);
}

TEST(Validate, UnknownValuesListTheValidOnes) {
  const config::ValidationReport r =
      check_recipe("llama/tiny", {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=atn"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.violations[0].rule, 1);
  EXPECT_NE(
      r.violations[0].fix.find("full_iteration, attn, mlp, moe, moe_router, moe_preprocess, mamba"),
      std::string::npos);
  EXPECT_NE(r.violations[0].fix.find("did you mean 'attn'"), std::string::npos);
  const config::ValidationReport impl = check_recipe("llama/tiny", {"model.cuda_graph_impl=TE"});
  EXPECT_NE(impl.violations.at(0).fix.find("none, local, transformer_engine"), std::string::npos);
}

TEST(Validate, Rule16NotesUnimplementedFeaturesAndTrainCanRefuseThem) {
  EXPECT_TRUE(config::unimplemented_features(config::load_config("llama/tiny")).empty());
  const config::Config c = config::load_config(
      "llama/tiny", {"model.tensor_model_parallel_size=2", "model.pipeline_model_parallel_size=2",
                     "model.expert_model_parallel_size=2",
                     "model.cpu_offloading=true", "model.delay_wgrad_compute=true",
                     "model.hybrid_override_pattern=M*-E", "model.num_moe_experts=4",
                     "model.moe_token_dispatcher_type=alltoall"});
  const auto features = config::unimplemented_features(c);
  const std::string all = [&] {
    std::string s;
    for (const auto& f : features) s += f + "\n";
    return s;
  }();
  for (const char* expected :
       {"tensor parallelism (model.tensor_model_parallel_size = 2)", "pipeline parallelism",
        "expert parallelism", "CPU offloading", "delayed weight-gradient"}) {
    EXPECT_NE(all.find(expected), std::string::npos) << expected << " in\n" << all;
  }
  EXPECT_EQ(all.find("Mamba layer kind"), std::string::npos) << "the Mamba kind is built (issue 12)\n" << all;
  EXPECT_EQ(all.find("MoE layer kind"), std::string::npos) << "the MoE kind is built (issue 11)\n" << all;
  const config::ValidationReport r = config::validate(c);
  EXPECT_TRUE(r.ok()) << describe(r);  // notes, not errors
  const auto unimplemented_notes = std::count_if(r.notes.begin(), r.notes.end(), [](const config::Note& n) {
    return n.rule == 16 && n.message.find("not implemented yet") != std::string::npos;
  });
  EXPECT_EQ(static_cast<size_t>(unimplemented_notes), features.size());
  EXPECT_TRUE(config::unimplemented_features(config::load_config("moe/tiny_moe")).empty());
}

// Linear biases (add_qkv_bias, add_bias_linear) are built on every layer kind, the experts' included: nothing is
// reported as not built, and the MoE layer declares [E, 2F] and [E, H] bias blocks beside its experts' weights. A
// shared expert with add_bias_linear is refused by rule, naming both keys, as Megatron's SharedExpertMLP refuses it.
TEST(Validate, LinearBiasesAreBuiltOnEveryLayerKindButTheSharedExpert) {
  for (const char* recipe : {"llama/tiny", "moe/tiny_moe", "hybrid/tiny_hybrid"}) {
    SCOPED_TRACE(recipe);
    const config::Config c = config::load_config(recipe, {"model.add_qkv_bias=true", "model.qk_layernorm=true"});
    EXPECT_TRUE(config::unimplemented_features(c).empty());
    EXPECT_TRUE(check_recipe(recipe, {"model.add_qkv_bias=true"}).ok());
    EXPECT_TRUE(config::model_spec(c).add_qkv_bias);
  }
  for (const char* recipe : {"llama/tiny", "hybrid/tiny_hybrid", "moe/tiny_moe"}) {
    SCOPED_TRACE(recipe);
    const config::Config c = config::load_config(recipe, {"model.add_bias_linear=true"});
    EXPECT_TRUE(config::unimplemented_features(c).empty());
    EXPECT_TRUE(check_recipe(recipe, {"model.add_bias_linear=true"}).ok());
    const model::ModelSpec spec = config::model_spec(c);
    EXPECT_TRUE(spec.add_bias_linear);
    EXPECT_TRUE(spec.has_qkv_bias());
    EXPECT_FALSE(spec.add_qkv_bias);
  }
  const model::ModelSpec moe = config::model_spec(config::load_config("moe/tiny_moe", {"model.add_bias_linear=true"}));
  const model::ModelLayout layout = model::model_layout(moe);
  const int64_t E = moe.num_moe_experts, F = moe.moe_ffn_hidden_size, H = moe.hidden_size;
  int64_t fc1_biases = 0, fc2_biases = 0;
  for (const auto& t : layout.tensors()) {
    if (t.name.find(".experts.") == std::string::npos || t.name.find(".bias") == std::string::npos) continue;
    const bool fc2 = t.name.find("w2.bias") != std::string::npos;
    EXPECT_EQ(t.numel, fc2 ? H : F) << t.name;
    (fc2 ? fc2_biases : fc1_biases) += 1;
  }
  EXPECT_EQ(fc1_biases, 2 * E * moe.num_layers);  // w1 and w3 per expert
  EXPECT_EQ(fc2_biases, E * moe.num_layers);
  const config::ValidationReport shared =
      check_recipe("moe/tiny_moe", {"model.add_bias_linear=true", "model.moe_shared_expert_intermediate_size=64"});
  ASSERT_FALSE(shared.ok());
  const auto refusal = std::find_if(shared.violations.begin(), shared.violations.end(), [](const auto& v) {
    return v.message.find("shared experts have no biases") != std::string::npos;
  });
  ASSERT_NE(refusal, shared.violations.end()) << describe(shared);
  EXPECT_TRUE(names_key(*refusal, "model.add_bias_linear") &&
              names_key(*refusal, "model.moe_shared_expert_intermediate_size"))
      << describe(shared);
}

// moe_shared_expert_gate is built with a shared expert (valid, nothing refused, the spec's gate on, the layer declares
// shared_expert_gate.weight [1, H]); without one it has no effect, as in Megatron, and a note says so.
TEST(Validate, SharedExpertGateIsBuiltAndNotedWithoutASharedExpert) {
  const std::vector<std::string> gated = {"model.moe_shared_expert_intermediate_size=64",
                                          "model.moe_shared_expert_gate=true"};
  const config::ValidationReport r = check_recipe("moe/tiny_moe", gated);
  EXPECT_TRUE(r.ok());
  const config::Config c = config::load_config("moe/tiny_moe", gated);
  EXPECT_TRUE(config::unimplemented_features(c).empty());
  const model::ModelSpec spec = config::model_spec(c);
  EXPECT_TRUE(spec.moe.shared_expert_gate);
  const model::ModelLayout layout = model::model_layout(spec);
  // The gate makes a Qwen2-MoE: its MoE layers take the Qwen families' names (model/stack.h qwen_moe_names).
  EXPECT_EQ(layout.find("model.layers.0.mlp.shared_expert_gate.weight").numel, spec.hidden_size);

  const config::ValidationReport alone = check_recipe("moe/tiny_moe", {"model.moe_shared_expert_gate=true"});
  EXPECT_TRUE(alone.ok());
  EXPECT_TRUE(std::any_of(alone.notes.begin(), alone.notes.end(), [](const config::Note& n) {
    return n.rule == 16 &&
           n.message.find("moe_shared_expert_gate has no effect without a shared expert") != std::string::npos;
  })) << describe(alone);
  EXPECT_FALSE(config::model_spec(config::load_config("moe/tiny_moe", {"model.moe_shared_expert_gate=true"}))
                   .moe.shared_expert_gate);
}

// bf16 main gradients (ddp.grad_reduce_in_fp32=false) are built for every layer kind: valid and nothing refused for
// the dense, MoE and hybrid recipes; the value must be a boolean.
TEST(Validate, Bf16MainGradientsAreValidForEveryLayerKind) {
  for (const char* recipe : {"llama/tiny", "moe/tiny_moe", "hybrid/tiny_hybrid", "hybrid/nemotronh_proxy"}) {
    SCOPED_TRACE(recipe);
    const config::Config c = config::load_config(recipe, {"ddp.grad_reduce_in_fp32=false"});
    EXPECT_FALSE(c.ddp.grad_reduce_in_fp32);
    EXPECT_TRUE(config::unimplemented_features(c).empty());
    EXPECT_TRUE(check_recipe(recipe, {"ddp.grad_reduce_in_fp32=false"}).ok());
  }
  EXPECT_THROW(config::load_config("llama/tiny", {"ddp.grad_reduce_in_fp32=bf16"}), Error);
}

// A bf16 second moment with beta2 above 1 - 2^-8 cannot follow the gradients: valid, with a note.
TEST(Validate, Bf16SecondMomentWithBeta2NearOneIsANote) {
  const auto bf16_note = [](const config::ValidationReport& r) {
    return std::count_if(r.notes.begin(), r.notes.end(), [](const config::Note& n) {
      return n.rule == 16 && n.message.find("exp_avg_sq_dtype bf16") != std::string::npos;
    });
  };
  const std::vector<std::string> bf16 = {"optimizer.use_precision_aware_optimizer=true",
                                         "optimizer.exp_avg_sq_dtype=bf16"};
  std::vector<std::string> near_one = bf16, lower = bf16;
  near_one.push_back("optimizer.adam_beta2=0.999");
  lower.push_back("optimizer.adam_beta2=0.95");
  const config::ValidationReport r = check_recipe("llama/tiny", near_one);
  EXPECT_TRUE(r.ok()) << describe(r);
  EXPECT_EQ(bf16_note(r), 1);
  EXPECT_EQ(bf16_note(check_recipe("llama/tiny", lower)), 0);
  EXPECT_EQ(bf16_note(check_recipe("llama/tiny", {"optimizer.adam_beta2=0.999"})), 0);
}

TEST(Validate, Rule8DroplessMoeScopeIsANote) {
  const config::ValidationReport r =
      config::validate(config::load_config("moe/tiny_moe", {"model.cuda_graph_impl=transformer_engine",
                                                            "model.cuda_graph_scope=attn,moe"}));
  EXPECT_TRUE(r.ok()) << describe(r);
  const auto notes = std::count_if(r.notes.begin(), r.notes.end(), [](const config::Note& n) {
    return n.rule == 8 && n.message.find("Megatron refuses it") != std::string::npos;
  });
  EXPECT_EQ(notes, 1) << describe(r);
  // Token-drop MoE in the moe scope is Megatron's own setting: no note.
  const config::ValidationReport drop = config::validate(config::load_config(
      "moe/tiny_moe", {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=attn,moe",
                       "model.moe_expert_capacity_factor=1.0", "model.moe_pad_expert_input_to_capacity=true"}));
  EXPECT_TRUE(drop.ok()) << describe(drop);
  EXPECT_TRUE(std::none_of(drop.notes.begin(), drop.notes.end(), [](const config::Note& n) { return n.rule == 8; }));
}

TEST(Validate, MoeKeysWithUnsupportedValuesAreClearErrors) {
  struct Bad {
    std::string override_, key;
  };
  for (const Bad& bad : std::vector<Bad>{
           {"model.moe_token_dispatcher_type=alltoal", "model.moe_token_dispatcher_type"},
           {"model.moe_router_topk=1", "model.moe_router_pre_softmax"},
           {"model.moe_router_score_function=relu", "model.moe_router_score_function"},
           {"model.moe_router_load_balancing_type=sinkhorn", "model.moe_router_load_balancing_type"},
           {"model.moe_router_load_balancing_type=quantile_balancing", "model.moe_router_load_balancing_type"},
           {"model.moe_token_drop_policy=random", "model.moe_token_drop_policy"},
           {"model.moe_router_enable_expert_bias=true", "model.moe_router_enable_expert_bias"},
           {"model.moe_layer_freq=[1,0,1]", "model.moe_layer_freq"},
           {"model.kv_channels=127", "model.kv_channels"},
       }) {
    SCOPED_TRACE(bad.override_);
    const config::ValidationReport r = config::validate(config::load_config("moe/tiny_moe", {bad.override_}));
    ASSERT_FALSE(r.ok()) << bad.override_ << " was accepted";
    bool named = false;
    for (const auto& v : r.violations) {
      for (const auto& kv : v.values) named = named || kv.key == bad.key;
    }
    EXPECT_TRUE(named) << describe(r);
  }
}

TEST(Validate, MoeLayerFreqForms) {
  const auto kinds = [](const std::vector<std::string>& overrides) {
    const config::ValidationReport r = config::validate(config::load_config("moe/tiny_moe", overrides));
    EXPECT_TRUE(r.ok()) << describe(r);
    return model::layer_pattern_string(config::layer_pattern(r.config));
  };
  EXPECT_EQ(kinds({}), "*E*E*E*E");
  EXPECT_EQ(kinds({"model.moe_layer_freq=2"}), "*E*-*E*-");
  EXPECT_EQ(kinds({"model.moe_layer_freq=[0,1,1,0]"}), "*-*E*E*-");
  EXPECT_EQ(kinds({"model.moe_layer_freq=([1]*1+[0])*2"}), "*E*-*E*-");
  EXPECT_EQ(kinds({"model.num_layers=6", "model.moe_layer_freq=([0]+[1]*2)*2"}), "*-*E*E*-*E*E");
  EXPECT_EQ(kinds({"model.moe_layer_freq=\"([1,0]*2)\""}), "*E*-*E*-");
}

TEST(Validate, ResolvesBridgeDefaults) {
  config::Config c = config::load_config("llama/tiny", {"model.ffn_hidden_size=null", "model.num_query_groups=null",
                                        "train.global_batch_size=null"});
  const config::ValidationReport r = config::validate(c);
  EXPECT_TRUE(r.ok()) << describe(r);
  EXPECT_EQ(r.config.model.ffn_hidden_size, 1024);
  EXPECT_EQ(r.config.model.num_query_groups, 4);
  EXPECT_EQ(r.config.train.global_batch_size, 4);
  EXPECT_EQ(r.config.scheduler.lr_decay_iters, r.config.train.train_iters);
  EXPECT_EQ(r.config.dataset.seq_length, 256);
  // Validating the normalized config changes nothing more.
  const config::ValidationReport again = config::validate(r.config);
  EXPECT_EQ(config::emit_yaml(again.config), config::emit_yaml(r.config));
}

TEST(Validate, ReportsABadTrainItersOnceUnderItsOwnKey) {
  // lr_decay_iters defaults to train_iters: a bad train_iters must not come back as a second violation of a
  // key the user never set.
  const config::ValidationReport r = check_recipe("llama/tiny", {"train.train_iters=-5"});
  ASSERT_EQ(r.violations.size(), 1u) << describe(r);
  EXPECT_TRUE(names_key(r.violations[0], "train.train_iters")) << describe(r);
  EXPECT_FALSE(names_key(r.violations[0], "scheduler.lr_decay_iters")) << describe(r);
}

}  // namespace
}  // namespace sg::config
