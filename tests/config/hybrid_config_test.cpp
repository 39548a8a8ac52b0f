// Hybrid Mamba models in the configuration: the shipped hybrid recipes, Megatron's mamba_* keys and
// their ModelSpec, position_embedding_type (none by default with a hybrid pattern), the MLP activation
// pair, and clear rule-16 errors for values the engine does not support.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/model_config.h"
#include "config/validate.h"
#include "model/stack.h"

namespace sg {
namespace {

config::ValidationReport validate_with(const std::string& recipe, const std::vector<std::string>& overrides) {
  return config::validate(config::load_config(recipe, overrides));
}

// The first violation naming `key`, or nullptr.
const config::Violation* violation_of(const config::ValidationReport& r, const std::string& key) {
  for (const auto& v : r.violations) {
    for (const auto& kv : v.values) {
      if (kv.key == key) return &v;
    }
  }
  return nullptr;
}

TEST(HybridConfig, ShippedRecipesHaveTheFixedShapes) {
  struct Shape {
    const char* name;
    const char* pattern;
    int64_t vocab, hidden, heads, groups, ffn, seq, mbs, mamba_heads;
    model::MlpActivation activation;
  };
  const Shape shapes[] = {
      {"hybrid/tiny_hybrid", "M*-M-M*-", 8192, 256, 4, 4, 704, 256, 4, 8, model::MlpActivation::squared_relu},
      {"hybrid/small_hybrid", "M-M*-M-M*-M-M*-M-M*-M-M-", 32768, 1024, 16, 16, 2816, 2048, 4, 32,
       model::MlpActivation::swiglu},
      {"hybrid/nemotronh_proxy", "M-M-M*-M-", 131072, 4096, 32, 8, 21504, 4096, 1, 128,
       model::MlpActivation::squared_relu},
  };
  for (const Shape& s : shapes) {
    SCOPED_TRACE(s.name);
    const config::ValidationReport r = validate_with(s.name, {});
    ASSERT_TRUE(r.ok()) << config::format_violation(r.violations[0]);
    const model::ModelSpec spec = config::model_spec(r.config);
    EXPECT_EQ(spec.hybrid_layer_pattern, s.pattern);
    EXPECT_EQ(spec.num_layers, static_cast<int64_t>(std::string(s.pattern).size()));
    EXPECT_EQ(spec.vocab_size, s.vocab);
    EXPECT_EQ(spec.hidden_size, s.hidden);
    EXPECT_EQ(spec.num_attention_heads, s.heads);
    EXPECT_EQ(spec.num_query_groups, s.groups);
    EXPECT_EQ(spec.ffn_hidden_size, s.ffn);
    EXPECT_EQ(spec.seq_length, s.seq);
    EXPECT_EQ(r.config.train.micro_batch_size, s.mbs);
    EXPECT_EQ(spec.mamba_heads(), s.mamba_heads);
    EXPECT_EQ(spec.mamba.state_dim, 128);
    EXPECT_EQ(spec.mamba.head_dim, 64);
    EXPECT_EQ(spec.mamba.num_groups, 8);
    EXPECT_EQ(spec.mamba.chunk_size, 128);
    EXPECT_EQ(spec.position_embedding, model::PositionEmbedding::none);
    EXPECT_EQ(spec.mlp_activation, s.activation);
    // As Megatron-Bridge's NemotronH recipes (and Megatron's training scripts for every layer pattern).
    EXPECT_TRUE(spec.is_hybrid_model);
    EXPECT_TRUE(config::unimplemented_features(r.config).empty());
  }
  EXPECT_TRUE(config::model_spec(config::load_config("hybrid/tiny_hybrid_moe")).is_hybrid_model);
  // Nemotron-H's style exports as NemotronHForCausalLM; small_hybrid's SwiGLU MLP has no transformers class.
  EXPECT_EQ(model::hf_architecture(config::model_spec(config::load_config("hybrid/tiny_hybrid"))),
            "NemotronHForCausalLM");
  EXPECT_EQ(model::hf_architecture(config::model_spec(config::load_config("hybrid/small_hybrid"))), "");
  // Nemotron 3's style: squared-ReLU experts routed by sigmoid scores with the expert bias, a shared expert.
  const model::ModelSpec moe = config::model_spec(config::load_config("hybrid/tiny_hybrid_moe"));
  EXPECT_EQ(moe.hybrid_layer_pattern, "MEM*EMEM");
  EXPECT_EQ(moe.mlp_activation, model::MlpActivation::squared_relu);
  EXPECT_EQ(model::hf_architecture(moe), "NemotronHForCausalLM");
  EXPECT_EQ(moe.num_moe_experts, 8);
  EXPECT_EQ(moe.moe_router_topk, 2);
  EXPECT_EQ(moe.moe_ffn_hidden_size, 128);
  EXPECT_EQ(moe.moe.shared_expert_intermediate_size, 256);
  EXPECT_EQ(moe.moe.score_function, ref::MoeScoreFunction::sigmoid);
  EXPECT_TRUE(moe.moe.enable_expert_bias);
  EXPECT_EQ(moe.moe.topk_scaling_factor, 2.5);
  EXPECT_TRUE(moe.moe.dropless());
}

// model.is_hybrid_model is a model key (it was one Bridge key accepted without effect): Megatron's default false,
// printed by `config show` and read back, carried into the ModelSpec the initial weights are drawn from, and no note.
TEST(HybridConfig, IsHybridModelIsAModelKeyThatRoundTrips) {
  const config::ValidationReport plain = validate_with("llama/tiny", {});
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain.config.model.is_hybrid_model);
  EXPECT_FALSE(config::model_spec(plain.config).is_hybrid_model);
  EXPECT_NE(config::emit_yaml(plain.config).find("  is_hybrid_model: false\n"), std::string::npos);

  const config::ValidationReport set = validate_with("llama/tiny", {"model.is_hybrid_model=true"});
  ASSERT_TRUE(set.ok());
  for (const config::Note& n : set.notes) {
    EXPECT_EQ(n.message.find("is_hybrid_model"), std::string::npos) << n.message;
  }
  const std::string shown = config::emit_yaml(set.config);
  EXPECT_NE(shown.find("  is_hybrid_model: true\n"), std::string::npos) << shown;
  const config::Config back = config::load_config_yaml(shown, "shown.yaml");
  EXPECT_TRUE(back.model.is_hybrid_model);
  EXPECT_TRUE(config::model_spec(back).is_hybrid_model);
  EXPECT_EQ(config::emit_yaml(config::validate(back).config), shown);
  EXPECT_EQ(config::format_value(back, "model.is_hybrid_model"), "true");
}

TEST(HybridConfig, MambaKeysReachTheModelSpec) {
  const config::Config c = config::load_config(
      "llama/tiny", {"model.hybrid_override_pattern=M*-M", "model.num_layers=4", "model.mamba_state_dim=64",
                     "model.mamba_num_groups=2", "model.mamba_num_heads=6", "model.mamba_dt_min=0.01",
                     "model.mamba_dt_max=0.2", "model.mamba_dt_init_floor=0.001", "model.mamba_dt_limit_min=0.0001",
                     "model.mamba_dt_limit_max=5", "model.mamba_A_init_min=2", "model.mamba_A_init_max=8"});
  ASSERT_TRUE(config::validate(c).ok());
  const model::ModelSpec s = config::model_spec(c);
  EXPECT_EQ(s.mamba.state_dim, 64);
  EXPECT_EQ(s.mamba.num_groups, 2);
  EXPECT_EQ(s.mamba_heads(), 6);
  EXPECT_EQ(s.mamba_inner(), 6 * 64);
  EXPECT_EQ(s.mamba_conv_dim(), 6 * 64 + 2 * 2 * 64);
  EXPECT_EQ(s.mamba_in_proj_dim(), 2 * 6 * 64 + 2 * 2 * 64 + 6);
  EXPECT_DOUBLE_EQ(s.mamba.dt_min, 0.01);
  EXPECT_DOUBLE_EQ(s.mamba.dt_max, 0.2);
  EXPECT_DOUBLE_EQ(s.mamba.dt_init_floor, 0.001);
  EXPECT_DOUBLE_EQ(s.mamba.dt_limit_min, 0.0001);
  EXPECT_DOUBLE_EQ(s.mamba.dt_limit_max, 5.0);
  EXPECT_DOUBLE_EQ(s.mamba.A_init_min, 2.0);
  EXPECT_DOUBLE_EQ(s.mamba.A_init_max, 8.0);
  // Defaults: Megatron's MambaMixer (heads derived from expand 2 x hidden / head_dim, no dt upper limit).
  const model::ModelSpec d =
      config::model_spec(config::load_config("llama/tiny", {"model.hybrid_override_pattern=M*-M", "model.num_layers=4"}));
  EXPECT_EQ(d.mamba_heads(), 2 * 256 / 64);
  EXPECT_TRUE(std::isinf(d.mamba.dt_limit_max));
  EXPECT_DOUBLE_EQ(d.mamba.dt_min, 0.001);
  EXPECT_DOUBLE_EQ(d.mamba.A_init_max, 16.0);
}

TEST(HybridConfig, PositionEmbeddingDefaultsByLayoutAndActivationPairs) {
  using model::PositionEmbedding;
  EXPECT_EQ(config::model_spec(config::load_config("llama/tiny")).position_embedding, PositionEmbedding::rope);
  EXPECT_EQ(config::model_spec(config::load_config("llama/tiny", {"model.hybrid_override_pattern=*-*-",
                                                                   "model.num_layers=4"}))
                .position_embedding,
            PositionEmbedding::none);  // Megatron's hybrid default
  EXPECT_EQ(config::model_spec(config::load_config("llama/tiny", {"model.hybrid_override_pattern=*-*-",
                                                                   "model.num_layers=4",
                                                                   "model.position_embedding_type=rope"}))
                .position_embedding,
            PositionEmbedding::rope);
  const config::ValidationReport bad_pe = validate_with("llama/tiny", {"model.position_embedding_type=learned_absolute"});
  ASSERT_NE(violation_of(bad_pe, "model.position_embedding_type"), nullptr);
  // Without RoPE the head dim is still cuDNN attention's (a multiple of 8): head_dim 1 is refused either way,
  // head_dim 8 passes either way.
  for (const char* pe : {"model.position_embedding_type=none", "model.position_embedding_type=rope"}) {
    SCOPED_TRACE(pe);
    EXPECT_FALSE(validate_with("llama/tiny", {"model.num_attention_heads=256", "model.num_query_groups=256", pe}).ok());
    EXPECT_TRUE(validate_with("llama/tiny", {"model.num_attention_heads=32", "model.num_query_groups=32", pe}).ok());
  }

  EXPECT_EQ(config::model_spec(config::load_config("llama/tiny")).mlp_activation, model::MlpActivation::swiglu);
  EXPECT_TRUE(validate_with("llama/tiny", {"model.activation_func=squared_relu", "model.gated_linear_unit=false"}).ok());
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"model.activation_func=squared_relu"},  // gated squared ReLU
        std::vector<std::string>{"model.gated_linear_unit=false"},      // plain SiLU
        std::vector<std::string>{"model.activation_func=gelu"}}) {
    const config::ValidationReport r = validate_with("llama/tiny", bad);
    const config::Violation* v = violation_of(r, "model.activation_func");
    ASSERT_NE(v, nullptr) << bad[0];
    EXPECT_EQ(v->rule, 16);
    EXPECT_NE(v->fix.find("squared_relu with gated_linear_unit=false"), std::string::npos) << v->fix;
  }
}

// Bridge's other names of the two activations (activation_map.py): the same MLP, with a note naming the canonical one.
TEST(HybridConfig, BridgesActivationAliasesAreTheSameActivation) {
  const struct {
    std::vector<std::string> alias;
    model::MlpActivation activation;
  } cases[] = {{{"model.activation_func=relu2", "model.gated_linear_unit=false"}, model::MlpActivation::squared_relu},
               {{"model.activation_func=torch.nn.functional.silu"}, model::MlpActivation::swiglu}};
  for (const auto& c : cases) {
    const config::ValidationReport r = validate_with("llama/tiny", c.alias);
    ASSERT_TRUE(r.ok()) << c.alias[0];
    EXPECT_EQ(config::model_spec(r.config).mlp_activation, c.activation) << c.alias[0];
    // Rewritten to the canonical name: the config (and a checkpoint's configuration hash) is the canonical one's.
    EXPECT_EQ(r.config.model.activation_func,
              c.activation == model::MlpActivation::squared_relu ? "squared_relu" : "silu");
    EXPECT_TRUE(std::any_of(r.notes.begin(), r.notes.end(), [](const config::Note& n) {
      return n.message.find("Megatron-Bridge's other name of") != std::string::npos;
    })) << c.alias[0];
  }
  // An alias is still held to the gating rule.
  EXPECT_NE(violation_of(validate_with("llama/tiny", {"model.activation_func=relu2"}), "model.activation_func"),
            nullptr);
}

TEST(HybridConfig, UnsupportedMambaValuesAreRule16Errors) {
  const std::vector<std::string> base = {"model.hybrid_override_pattern=M*-M", "model.num_layers=4"};
  struct Bad {
    std::string override_text, key, message;
  };
  const Bad cases[] = {
      {"model.mamba_conv_kernel=3", "model.mamba_conv_kernel", "must be 4"},
      {"model.mamba_chunk_size=64", "model.mamba_chunk_size", "must be 128"},
      {"model.mamba_num_groups=3", "model.mamba_num_groups", "not a multiple of mamba_num_groups"},
      {"model.mamba_head_dim=48", "model.mamba_head_dim", "headdim 48 is not supported"},
      {"model.mamba_state_dim=48", "model.mamba_state_dim", "dstate 48 is not supported"},
      {"model.hidden_size=264", "model.mamba_expand", "not a multiple of mamba_head_dim"},
      {"model.mamba_dt_min=0.5", "model.mamba_dt_min", "must not exceed mamba_dt_max"},
      {"model.mamba_A_init_min=32", "model.mamba_A_init_min", "must not exceed mamba_A_init_max"},
      {"model.mamba_dt_limit_max=0", "model.mamba_dt_limit_max", "must exceed mamba_dt_limit_min"},
      {"model.mamba_state_dim=0", "model.mamba_state_dim", "must be"},
  };
  for (const Bad& b : cases) {
    SCOPED_TRACE(b.override_text);
    std::vector<std::string> overrides = base;
    overrides.push_back(b.override_text);
    const config::ValidationReport r = validate_with("llama/tiny", overrides);
    const config::Violation* v = violation_of(r, b.key);
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(v->rule, 16);
    EXPECT_NE(v->message.find(b.message), std::string::npos) << v->message;
  }
  // Without M layers the mamba keys are not checked (they describe no layer).
  EXPECT_TRUE(validate_with("llama/tiny", {"model.mamba_conv_kernel=3"}).ok());
}

// The notes naming `key`.
std::vector<config::Note> notes_of(const config::ValidationReport& r, const std::string& key) {
  std::vector<config::Note> out;
  for (const auto& n : r.notes) {
    for (const auto& kv : n.values) {
      if (kv.key == key) out.push_back(n);
    }
  }
  return out;
}

// The mixer's gated RMSNorm reads layernorm_epsilon (as transformers' NemotronH); Megatron's MambaMixer fixes
// it at 1e-5. Away from 1e-5 a Mamba model says so; the default, and a model without M layers, say nothing.
TEST(HybridConfig, GatedNormEpsilonAwayFromMegatronsIsNoted) {
  const std::vector<std::string> hybrid = {"model.hybrid_override_pattern=M*-M", "model.num_layers=4"};
  std::vector<std::string> overrides = hybrid;
  overrides.push_back("model.layernorm_epsilon=1e-6");
  const config::ValidationReport r = validate_with("llama/tiny", overrides);
  EXPECT_TRUE(r.ok());
  const std::vector<config::Note> notes = notes_of(r, "model.layernorm_epsilon");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0].rule, 16);
  EXPECT_NE(notes[0].message.find("gated RMSNorm inside every Mamba mixer"), std::string::npos) << notes[0].message;
  EXPECT_NE(notes[0].message.find("Megatron's MambaMixer keeps 1e-5"), std::string::npos) << notes[0].message;

  EXPECT_TRUE(notes_of(validate_with("llama/tiny", hybrid), "model.layernorm_epsilon").empty());
  overrides = hybrid;
  overrides.push_back("model.layernorm_epsilon=1e-5");
  EXPECT_TRUE(notes_of(validate_with("llama/tiny", overrides), "model.layernorm_epsilon").empty());
  EXPECT_TRUE(notes_of(validate_with("llama/tiny", {"model.hybrid_override_pattern=*-*-", "model.num_layers=4",
                                                    "model.layernorm_epsilon=1e-6"}),
                       "model.layernorm_epsilon")
                  .empty());
}

}  // namespace
}  // namespace sg
