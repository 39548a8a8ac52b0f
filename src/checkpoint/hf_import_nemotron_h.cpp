// config.json of model_type "nemotron_h" (transformers' NemotronHConfig, as hf_config_nemotron_h.cpp writes it
// and as the Hub's Nemotron-H and Nemotron 3 folders hold it) into the ModelSpec stepgraph trains.
#include <cmath>
#include <limits>
#include <string>

#include "checkpoint/hf_config_reader.h"
#include "model/layer_kind.h"

namespace sg::checkpoint::detail {

namespace {

// The layer pattern: hybrid_override_pattern (older configs), or layers_block_type / layer_types (newer), whose
// names have two spellings across transformers versions.
std::string read_pattern(const ConfigReader& c) {
  if (c.has("hybrid_override_pattern")) return c.string("hybrid_override_pattern", "");
  for (const char* key : {"layers_block_type", "layer_types"}) {
    if (!c.has(key)) continue;
    const nlohmann::json& list = c.json()[key];
    if (!list.is_array() || list.empty()) {
      c.fail(key, "= " + list.dump() + ": expected a non-empty list of layer types");
    }
    std::string pattern;
    for (const auto& item : list) {
      const std::string type = item.is_string() ? item.get<std::string>() : "";
      if (type == "mamba" || type == "linear_attention") {
        pattern += 'M';
      } else if (type == "attention" || type == "full_attention") {
        pattern += '*';
      } else if (type == "mlp") {
        pattern += '-';
      } else if (type == "moe") {
        pattern += 'E';
      } else {
        c.fail(key, "holds " + item.dump() + ": stepgraph knows mamba (linear_attention), attention "
                    "(full_attention), mlp and moe layers");
      }
    }
    return pattern;
  }
  c.fail("hybrid_override_pattern", "is missing, and so are layers_block_type and layer_types: the layers are unknown");
}

void require_false(const ConfigReader& c, const char* key, bool fallback, const char* why) {
  if (c.boolean(key, fallback)) c.fail(key, std::string("= true: ") + why);
}

}  // namespace

void read_nemotron_h_config(const ConfigReader& c, HfModelConfig& out) {
  model::ModelSpec& s = out.spec;
  s.hybrid_layer_pattern = read_pattern(c);
  const std::vector<model::LayerKind> kinds = [&] {
    try {
      return model::parse_layer_pattern(s.hybrid_layer_pattern, "the layer pattern");
    } catch (const Error& e) {
      c.fail("hybrid_override_pattern", std::string("is not a pattern stepgraph reads: ") + e.what());
    }
  }();
  const auto has = [&](model::LayerKind k) {
    for (model::LayerKind x : kinds) {
      if (x == k) return true;
    }
    return false;
  };
  s.num_layers = static_cast<int64_t>(kinds.size());
  if (c.has("num_hidden_layers") && c.integer("num_hidden_layers") != s.num_layers) {
    c.fail("num_hidden_layers", strprintf("= %lld, but the layer pattern %s has %lld layers",
                                          static_cast<long long>(c.integer("num_hidden_layers")),
                                          s.hybrid_layer_pattern.c_str(), static_cast<long long>(s.num_layers)));
  }
  s.vocab_size = c.integer("vocab_size");
  if (s.vocab_size > std::numeric_limits<int32_t>::max()) {
    c.fail("vocab_size", strprintf("= %lld: token ids are 32-bit here", static_cast<long long>(s.vocab_size)));
  }
  s.hidden_size = c.integer("hidden_size");
  s.num_attention_heads = c.integer("num_attention_heads", 32);
  // Keys left out take NemotronHConfig's defaults (8 key/value heads, head_dim 128), as transformers reads them.
  s.num_query_groups = c.integer("num_key_value_heads", 8);
  if (s.num_attention_heads % s.num_query_groups != 0) {
    c.fail("num_key_value_heads",
           strprintf("= %lld%s does not divide num_attention_heads = %lld", static_cast<long long>(s.num_query_groups),
                     c.has("num_key_value_heads") ? "" : " (absent: NemotronHConfig's default)",
                     static_cast<long long>(s.num_attention_heads)));
  }
  // attention_head_dim: the name in the Hub's older (remote-code) NemotronH configs.
  const int64_t head_dim = c.integer("head_dim", c.integer("attention_head_dim", 128));
  if (s.hidden_size % s.num_attention_heads != 0 || head_dim != s.hidden_size / s.num_attention_heads) {
    s.kv_channels = head_dim;  // Megatron's kv_channels
  }
  s.position_embedding = model::PositionEmbedding::none;  // NemotronH's attention has no RoPE
  s.mlp_activation = model::MlpActivation::squared_relu;
  if (has(model::LayerKind::mlp) || has(model::LayerKind::moe)) {
    const std::string act = c.string("mlp_hidden_act", "relu2");
    if (act != "relu2") {
      c.fail("mlp_hidden_act", "= \"" + act + "\": stepgraph's NemotronH MLPs and experts are squared ReLU (relu2)");
    }
  }
  s.ffn_hidden_size = has(model::LayerKind::mlp) ? c.integer("intermediate_size") : c.integer("intermediate_size", 1);
  require_false(c, "use_bias", false, "stepgraph's NemotronH has no biases");
  require_false(c, "mlp_bias", false, "stepgraph's NemotronH has no biases");
  require_false(c, "attention_bias", false, "stepgraph's NemotronH has no biases");
  require_false(c, "mamba_proj_bias", false, "stepgraph's Mamba projections have no biases");
  s.layernorm_epsilon = c.number("layer_norm_epsilon", 1e-5);
  if (!(s.layernorm_epsilon > 0.0)) {
    c.fail("layer_norm_epsilon", strprintf("= %g: must be positive", s.layernorm_epsilon));
  }
  s.share_embeddings_and_output_weights = c.boolean("tie_word_embeddings", false);
  s.init_method_std = c.number("initializer_range", 0.02);
  if (!(s.init_method_std > 0.0)) c.fail("initializer_range", "must be positive");

  if (has(model::LayerKind::mamba)) {
    model::MambaSpec& m = s.mamba;
    const std::string act = c.string("mamba_hidden_act", "silu");
    if (act != "silu") c.fail("mamba_hidden_act", "= \"" + act + "\": stepgraph's Mamba2 mixer uses silu");
    if (!c.boolean("use_conv_bias", true)) c.fail("use_conv_bias", "= false: stepgraph's conv1d has a bias");
    m.state_dim = c.integer("ssm_state_size", 128);
    m.head_dim = c.integer("mamba_head_dim", 64);
    m.num_groups = c.integer("n_groups", 8);
    m.num_heads = c.integer("mamba_num_heads", 128);
    m.expand = c.integer("expand", 2);
    m.conv_kernel = c.integer("conv_kernel", 4);
    m.chunk_size = c.integer("chunk_size", 128);
    m.dt_min = c.number("time_step_min", 0.001);
    m.dt_max = c.number("time_step_max", 0.1);
    m.dt_init_floor = c.number("time_step_floor", 1e-4);
    if (c.has("time_step_limit")) {
      const nlohmann::json& limit = c.json()["time_step_limit"];
      const auto bound = [&](const nlohmann::json& v) {
        if (v.is_number()) return v.get<double>();
        // transformers 5 writes infinity as {"__float__": "Infinity"} (JSON has no infinity); Python's bare
        // Infinity, as earlier writers left it, is read in that form too (checkpoint/python_json.h).
        if (v.is_object() && v.contains("__float__") && v["__float__"] == "Infinity") {
          return std::numeric_limits<double>::infinity();
        }
        c.fail("time_step_limit", "= " + limit.dump() + ": expected [low, high] as numbers");
      };
      if (!limit.is_array() || limit.size() != 2) {
        c.fail("time_step_limit", "= " + limit.dump() + ": expected [low, high]");
      }
      m.dt_limit_min = bound(limit[0]);
      const double high = bound(limit[1]);
      // transformers' default is (0, inf); a very large finite bound (JSON has no infinity) is no limit.
      m.dt_limit_max = high >= 1e30 ? std::numeric_limits<double>::infinity() : high;
    }
  }

  if (has(model::LayerKind::moe)) {
    s.num_moe_experts = c.integer("n_routed_experts", 8);
    s.moe_router_topk = c.integer("num_experts_per_tok", 2);
    s.moe_ffn_hidden_size = c.integer("moe_intermediate_size", 7688);
    model::MoeSpec& moe = s.moe;
    moe.score_function = ref::MoeScoreFunction::sigmoid;  // NemotronHMoE's router
    moe.enable_expert_bias = true;  // which always chooses with gate.e_score_correction_bias (zero or not)
    moe.shared_expert_intermediate_size = c.integer("moe_shared_expert_intermediate_size", 7688);
    moe.topk_scaling_factor = c.number("routed_scaling_factor", 1.0);
    if (c.has("moe_latent_size")) {
      c.fail("moe_latent_size", "is set: stepgraph's experts read the hidden state, with no latent projection");
    }
    const int64_t groups = c.integer("n_group", 1), topk_groups = c.integer("topk_group", 1);
    if (topk_groups != groups) {
      c.fail("topk_group", strprintf("= %lld of n_group = %lld: group-limited routing is not implemented (every "
                                     "group must be eligible: topk_group = n_group)",
                                     static_cast<long long>(topk_groups), static_cast<long long>(groups)));
    }
    // Megatron's sigmoid router renormalises the top-k exactly when k > 1; so does stepgraph's.
    const bool renormalised = s.moe_router_topk > 1;
    if (c.boolean("norm_topk_prob", true) != renormalised) {
      c.fail("norm_topk_prob", strprintf("= %s with num_experts_per_tok = %lld: stepgraph's sigmoid router "
                                         "renormalises the top-k weights exactly when k > 1 (Megatron's rule)",
                                         renormalised ? "false" : "true",
                                         static_cast<long long>(s.moe_router_topk)));
    }
  }
  out.max_position_embeddings = c.integer("max_position_embeddings", 4096);
  s.seq_length = out.max_position_embeddings;
}

}  // namespace sg::checkpoint::detail
