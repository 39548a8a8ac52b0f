#include "train/pretrained.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/hf_import.h"
#include "config/model_config.h"
#include "core/error.h"
#include "core/log.h"
#include "core/strings.h"
#include "model/layer_registry.h"
#include "model/stack.h"

namespace sg::train {

namespace {

constexpr const char* kKey = "checkpoint.pretrained_checkpoint";

std::string num(double v) {
  return strprintf("%g", v);
}
std::string num(int64_t v) {
  return std::to_string(v);
}
const char* boolean(bool v) {
  return v ? "true" : "false";
}

struct Differences {
  std::vector<std::string> lines;  // "model.hidden_size: config.json hidden_size = 2048, configured 256"
  std::vector<std::string> fixes;  // "model.hidden_size=2048"
  std::vector<std::string> taken;  // "hidden_size 2048"

  // `folder` says what config.json holds; `fix` is the value of `key` that matches it.
  void differ_as(const std::string& key, const std::string& folder, const std::string& configured,
                 const std::string& fix) {
    lines.push_back(strprintf("%s: %s, configured %s", key.c_str(), folder.c_str(), configured.c_str()));
    fixes.push_back(key + "=" + fix);
  }
  void differ(const std::string& key, const std::string& folder_key, const std::string& folder_value,
              const std::string& configured) {
    differ_as(key, "config.json " + folder_key + " = " + folder_value, configured, folder_value);
  }
};

// A key that may be unset: take the folder's value, or compare with it.
template <class T>
void take_or_check(Differences& d, const char* key, const char* folder_key, T folder, T& configured, bool unset) {
  if (unset) {
    configured = folder;
    d.taken.push_back(strprintf("%s %s", key, num(folder).c_str()));
  } else if (configured != folder) {
    d.differ(std::string("model.") + key, folder_key, num(folder), num(configured));
  }
}

bool same(double a, double b) {
  return std::fabs(a - b) <= 1e-9 * std::max(std::fabs(a), std::fabs(b));
}

// A count the folder and the configured model must share.
void check_count(Differences& d, const char* key, const char* folder_key, int64_t folder, int64_t configured) {
  if (folder != configured) d.differ(std::string("model.") + key, folder_key, num(folder), num(configured));
}

// "[1,0,1]": the blocks' MoE flags as model.moe_layer_freq's list form.
std::string layer_freq_list(const std::vector<int>& freq, int64_t blocks) {
  std::string out = "[";
  for (int64_t b = 0; b < blocks; ++b) {
    out += (b > 0 ? "," : "") + std::string(freq.empty() || freq[static_cast<size_t>(b)] != 0 ? "1" : "0");
  }
  return out + "]";
}

// A Mixtral, Qwen3-MoE or Qwen2-MoE folder's experts, compared on the run's model as configured: their count, top-k
// and width, the MoE blocks (Mixtral: every block), the routing (a softmax, renormalised over the chosen unless the
// Qwen families' norm_topk_prob is false; unscaled, no bias), the shared expert (Qwen2-MoE's, gated; the others have
// none) and no token drop.
void check_experts(Differences& d, const config::Config& config, const model::ModelSpec& s,
                   const std::string& architecture) {
  const model::ModelSpec r = config::model_spec(config);
  const bool qwen2_moe = architecture == "Qwen2MoeForCausalLM";
  const bool qwen_moe = qwen2_moe || architecture == "Qwen3MoeForCausalLM";  // the Qwen MoE families' keys
  const std::string family = qwen2_moe ? "Qwen2-MoE" : qwen_moe ? "Qwen3-MoE" : "Mixtral";
  const auto differs = [&](const char* key, bool differ, const std::string& configured, const std::string& fix) {
    if (differ)
      d.differ_as(std::string("model.") + key, "config.json describes " + family + "'s router", configured, fix);
  };
  check_count(d, "num_moe_experts", qwen_moe ? "num_experts" : "num_local_experts", s.num_moe_experts,
              r.num_moe_experts);
  check_count(d, "moe_router_topk", "num_experts_per_tok", s.moe_router_topk, r.moe_router_topk);
  check_count(d, "moe_ffn_hidden_size", qwen_moe ? "moe_intermediate_size" : "intermediate_size", s.moe_ffn_hidden_size,
              r.moe_ffn_hidden_size);
  if (r.num_moe_experts <= 0) return;  // the router's options are moot without experts
  const model::MoeSpec& moe = r.moe;
  const std::string folder_blocks = layer_freq_list(s.moe.layer_freq, s.num_layers);
  if (layer_freq_list(moe.layer_freq, r.num_layers) != folder_blocks) {
    d.differ_as("model.moe_layer_freq",
                qwen_moe ? "config.json's mlp_only_layers and decoder_sparse_step make the MoE blocks " + folder_blocks
                         : "config.json describes every block MoE (MixtralForCausalLM)",
                layer_freq_list(moe.layer_freq, r.num_layers), s.moe.layer_freq.empty() ? "1" : folder_blocks);
  }
  differs("moe_router_score_function", moe.score_function != ref::MoeScoreFunction::softmax,
          config.model.moe_router_score_function, "softmax");
  if (moe.pre_softmax != s.moe.pre_softmax) {
    d.differ_as("model.moe_router_pre_softmax",
                qwen_moe ? std::string("config.json norm_topk_prob = ") + (s.moe.pre_softmax ? "false" : "true")
                         : "config.json describes Mixtral's router",
                moe.pre_softmax ? "true" : "false", s.moe.pre_softmax ? "true" : "false");
  }
  differs("moe_router_topk_scaling_factor", moe.topk_scaling_factor != 1.0, num(moe.topk_scaling_factor), "null");
  if (qwen2_moe) {
    check_count(d, "moe_shared_expert_intermediate_size", "shared_expert_intermediate_size",
                s.moe.shared_expert_intermediate_size, moe.shared_expert_intermediate_size);
    differs("moe_shared_expert_gate", !config.model.moe_shared_expert_gate, "false", "true");
  } else {
    differs("moe_shared_expert_intermediate_size", moe.shared_expert_intermediate_size > 0,
            num(moe.shared_expert_intermediate_size), "null");
  }
  differs("moe_router_enable_expert_bias", moe.enable_expert_bias, "true", "false");
  if (!moe.dropless()) {
    d.differ_as("model.moe_expert_capacity_factor", "config.json describes " + family + " (drops no tokens)",
                num(moe.capacity_factor), "null");
  }
}

// What a Llama, Qwen2, Qwen3, Qwen3-MoE or Mixtral folder is beyond its sizes: GPT blocks of attention and a dense MLP
// (Mixtral: every MLP its experts; Qwen3-MoE: its MoE blocks'), RoPE, SwiGLU (read_hf_config refuses any other
// hidden_act). A model configured otherwise would train other numbers from the same weights, or fail the weight load
// blaming the folder. (The query and key norms are compared by the caller.)
void check_architecture(Differences& d, const config::Config& config, const model::ModelSpec& s,
                        const std::string& architecture) {
  const config::ModelConfig& m = config.model;
  const bool mixtral = architecture == "MixtralForCausalLM";
  const bool qwen_moe = architecture == "Qwen3MoeForCausalLM" || architecture == "Qwen2MoeForCausalLM";
  const bool hybrid = m.hybrid_override_pattern && !m.hybrid_override_pattern->empty();
  if (hybrid) {
    d.differ_as("model.hybrid_override_pattern", "config.json describes GPT blocks (" + architecture + ")",
                *m.hybrid_override_pattern, "null");
  }
  if (!mixtral && !qwen_moe && m.num_moe_experts.value_or(0) > 0) {
    d.differ_as("model.num_moe_experts", "config.json describes a dense MLP (" + architecture + ")",
                num(*m.num_moe_experts), "null");
  }
  const std::string position = config::resolved_position_embedding_type(m);
  if (position != "rope") {
    d.differ_as("model.position_embedding_type",
                "config.json describes RoPE attention (" + architecture + ", rope_theta)",
                m.position_embedding_type ? position : "null (none with a hybrid pattern)", "rope");
  }
  if (config::resolved_activation_func(m) != "silu")
    d.differ("model.activation_func", "hidden_act", "silu", m.activation_func);
  if (!m.gated_linear_unit) {
    d.differ_as("model.gated_linear_unit",
                std::string("config.json hidden_act = silu in ") + (mixtral ? "Mixtral's experts" : "LlamaMLP") +
                    ", which is gated (SwiGLU)",
                "false", "true");
  }
  if ((mixtral || qwen_moe) && !hybrid) check_experts(d, config, s, architecture);
}

// What a NemotronH folder is beyond the shape keys: its pattern, the layers' options (no RoPE, squared ReLU), the
// Mamba2 mixers' and the MoE layers' shapes and routing, compared on the run's model as configured.
void check_nemotron_h(Differences& d, const config::Config& config, const model::ModelSpec& s) {
  const model::ModelSpec r = config::model_spec(config);
  if (r.hybrid_layer_pattern != s.hybrid_layer_pattern) {
    d.differ("model.hybrid_override_pattern", "layers", s.hybrid_layer_pattern,
             r.hybrid_layer_pattern.empty() ? "null (GPT blocks)" : r.hybrid_layer_pattern);
    return;  // the layers' options below are moot for another stack
  }
  const auto check = [&](const char* key, const char* folder_key, double folder, double configured) {
    if (!same(folder, configured)) d.differ(std::string("model.") + key, folder_key, num(folder), num(configured));
  };
  const config::ModelConfig& m = config.model;
  if (model::stack_has_kind(s, model::LayerKind::attention) && r.position_embedding != model::PositionEmbedding::none) {
    d.differ_as("model.position_embedding_type", "config.json describes NemotronH attention (no RoPE)",
                config::resolved_position_embedding_type(m), "none");
  }
  if (model::stack_has_kind(s, model::LayerKind::mlp) || model::stack_has_kind(s, model::LayerKind::moe)) {
    if (config::resolved_activation_func(m) != "squared_relu") {
      d.differ_as("model.activation_func", "config.json mlp_hidden_act = relu2", m.activation_func, "squared_relu");
    }
    if (m.gated_linear_unit) {
      d.differ_as("model.gated_linear_unit", "config.json mlp_hidden_act = relu2 (not gated)", "true", "false");
    }
  }
  if (model::stack_has_kind(s, model::LayerKind::mamba)) {
    check_count(d, "mamba_state_dim", "ssm_state_size", s.mamba.state_dim, r.mamba.state_dim);
    check_count(d, "mamba_head_dim", "mamba_head_dim", s.mamba.head_dim, r.mamba.head_dim);
    check_count(d, "mamba_num_groups", "n_groups", s.mamba.num_groups, r.mamba.num_groups);
    check_count(d, "mamba_num_heads", "mamba_num_heads", s.mamba_heads(), r.mamba_heads());
    check_count(d, "mamba_conv_kernel", "conv_kernel", s.mamba.conv_kernel, r.mamba.conv_kernel);
    check_count(d, "mamba_chunk_size", "chunk_size", s.mamba.chunk_size, r.mamba.chunk_size);
    check("mamba_dt_limit_min", "time_step_limit[0]", s.mamba.dt_limit_min, r.mamba.dt_limit_min);
    if (s.mamba.dt_limit_max != r.mamba.dt_limit_max) {
      const auto limit = [](double v) { return std::isfinite(v) ? num(v) : std::string("null"); };
      d.differ("model.mamba_dt_limit_max", "time_step_limit[1]", limit(s.mamba.dt_limit_max),
               limit(r.mamba.dt_limit_max));
    }
  }
  if (model::stack_has_kind(s, model::LayerKind::moe)) {
    check_count(d, "num_moe_experts", "n_routed_experts", s.num_moe_experts, r.num_moe_experts);
    check_count(d, "moe_router_topk", "num_experts_per_tok", s.moe_router_topk, r.moe_router_topk);
    check_count(d, "moe_ffn_hidden_size", "moe_intermediate_size", s.moe_ffn_hidden_size, r.moe_ffn_hidden_size);
    check_count(d, "moe_shared_expert_intermediate_size", "moe_shared_expert_intermediate_size",
              s.moe.shared_expert_intermediate_size, r.moe.shared_expert_intermediate_size);
    check("moe_router_topk_scaling_factor", "routed_scaling_factor", s.moe.topk_scaling_factor,
          r.moe.topk_scaling_factor);
    if (r.moe.score_function != ref::MoeScoreFunction::sigmoid) {
      d.differ_as("model.moe_router_score_function", "config.json describes NemotronHMoE (sigmoid router)",
                  m.moe_router_score_function, "sigmoid");
    }
    if (!r.moe.dropless()) {
      d.differ_as("model.moe_expert_capacity_factor", "config.json describes NemotronHMoE (drops no tokens)",
                  num(r.moe.capacity_factor), "null");
    }
  }
}

// "[1,1.05,2]": a factor list as an override's value (one shell word), each factor's shortest fp32 digits.
template <class T>
std::string factor_list(const std::vector<T>& list) {
  std::vector<std::string> items;
  for (const T v : list) items.push_back(strprintf("%.9g", static_cast<double>(static_cast<float>(v))));
  return "[" + join(items, ",") + "]";
}

// LongRoPE's keys: left unset (both lists empty) they take the folder's four values; set, they must be its values.
void check_longrope(Differences& d, config::ModelConfig& m, const model::LongRope& folder) {
  const bool unset = m.longrope_short_factor.empty() && m.longrope_long_factor.empty();
  if (unset && !folder.enabled()) return;
  if (unset) {
    m.longrope_short_factor.assign(folder.short_factor.begin(), folder.short_factor.end());
    m.longrope_long_factor.assign(folder.long_factor.begin(), folder.long_factor.end());
    m.longrope_original_max_position_embeddings = folder.original_max_position_embeddings;
    m.longrope_attention_factor = folder.attention_factor;
    d.taken.push_back(
        strprintf("LongRoPE (two lists of %zu factors, longrope_original_max_position_embeddings %lld, "
                  "longrope_attention_factor %.17g)",
                  folder.short_factor.size(), static_cast<long long>(folder.original_max_position_embeddings),
                  folder.attention_factor));
    return;
  }
  const auto same_list = [](const std::vector<double>& configured, const std::vector<float>& in_folder) {
    if (configured.size() != in_folder.size()) return false;
    for (size_t i = 0; i < configured.size(); ++i) {
      if (static_cast<float>(configured[i]) != in_folder[i]) return false;
    }
    return true;
  };
  if (!same_list(m.longrope_short_factor, folder.short_factor)) {
    d.differ("model.longrope_short_factor", "rope_scaling.short_factor", factor_list(folder.short_factor),
             factor_list(m.longrope_short_factor));
  }
  if (!same_list(m.longrope_long_factor, folder.long_factor)) {
    d.differ("model.longrope_long_factor", "rope_scaling.long_factor", factor_list(folder.long_factor),
             factor_list(m.longrope_long_factor));
  }
  if (!folder.enabled()) return;  // the lists' difference says it all
  check_count(d, "longrope_original_max_position_embeddings", "original_max_position_embeddings",
              folder.original_max_position_embeddings, m.longrope_original_max_position_embeddings);
  if (!same(m.longrope_attention_factor, folder.attention_factor)) {
    d.differ("model.longrope_attention_factor", "LongRoPE's attention factor",
             strprintf("%.17g", folder.attention_factor), num(m.longrope_attention_factor));
  }
}

}  // namespace

config::Config apply_pretrained_shapes(const config::Config& config) {
  // An empty path is left to validation's rule ("is an empty path"), not read as a missing folder.
  if (!config.checkpoint.pretrained_checkpoint || config.checkpoint.pretrained_checkpoint->empty()) return config;
  const std::string folder = checkpoint::resolve_model_folder(*config.checkpoint.pretrained_checkpoint, kKey);
  const checkpoint::HfModelConfig hf = checkpoint::read_hf_config(folder);
  const model::ModelSpec& s = hf.spec;
  const bool nemotron_h = hf.architecture == "NemotronHForCausalLM";
  const bool mixtral = hf.architecture == "MixtralForCausalLM";
  // The Qwen MoE families: a dense MLP of intermediate_size where not MoE.
  const bool qwen_moe = hf.architecture == "Qwen3MoeForCausalLM" || hf.architecture == "Qwen2MoeForCausalLM";
  config::Config out = config;
  config::ModelConfig& m = out.model;
  Differences d;
  if (nemotron_h && !m.hybrid_override_pattern) {  // unset: the folder's layers (GPT blocks never match)
    m.hybrid_override_pattern = s.hybrid_layer_pattern;
    d.taken.push_back("hybrid_override_pattern " + s.hybrid_layer_pattern);
  }
  take_or_check(d, "num_layers", "num_hidden_layers", s.num_layers, m.num_layers, m.num_layers == 0);
  take_or_check(d, "hidden_size", "hidden_size", s.hidden_size, m.hidden_size, m.hidden_size == 0);
  take_or_check(d, "num_attention_heads", "num_attention_heads", s.num_attention_heads, m.num_attention_heads,
                m.num_attention_heads == 0);
  int64_t groups = m.num_query_groups.value_or(0), ffn = m.ffn_hidden_size.value_or(0),
          vocab = m.vocab_size.value_or(0);
  take_or_check(d, "num_query_groups", "num_key_value_heads", s.num_query_groups, groups, !m.num_query_groups);
  if (mixtral || qwen_moe) {  // Mixtral: intermediate_size is the experts' width, and there is no dense MLP
    if (!m.num_moe_experts) {
      m.num_moe_experts = s.num_moe_experts;
      d.taken.push_back("num_moe_experts " + num(s.num_moe_experts));
    }
    if (!m.moe_ffn_hidden_size) {
      m.moe_ffn_hidden_size = s.moe_ffn_hidden_size;
      d.taken.push_back("moe_ffn_hidden_size " + num(s.moe_ffn_hidden_size));
    }
    if (s.moe.shared_expert_intermediate_size > 0 && !m.moe_shared_expert_intermediate_size) {  // Qwen2-MoE's
      m.moe_shared_expert_intermediate_size = s.moe.shared_expert_intermediate_size;
      d.taken.push_back("moe_shared_expert_intermediate_size " + num(s.moe.shared_expert_intermediate_size));
    }
  }
  // The dense MLPs' width, where the folder has dense MLPs (every block of a Llama, Qwen2 or Qwen3 folder).
  if (!mixtral && (!(nemotron_h || qwen_moe) || model::stack_has_kind(s, model::LayerKind::mlp))) {
    take_or_check(d, "ffn_hidden_size", "intermediate_size", s.ffn_hidden_size, ffn, !m.ffn_hidden_size);
  }
  take_or_check(d, "vocab_size", "vocab_size", s.vocab_size, vocab, !m.vocab_size);
  m.num_query_groups = groups;
  m.ffn_hidden_size = ffn;
  m.vocab_size = vocab;
  // head_dim is Megatron's kv_channels, whose null means hidden_size / num_attention_heads: a folder whose head_dim
  // is something else sets it like the other unset shape keys (s.kv_channels is 0 when head_dim is that quotient).
  if (!m.kv_channels) {
    if (s.kv_channels > 0) {
      m.kv_channels = s.kv_channels;
      d.taken.push_back("kv_channels " + num(s.kv_channels));
    }
  } else if (*m.kv_channels != s.head_dim()) {
    d.differ("model.kv_channels", "head_dim", num(s.head_dim()), num(*m.kv_channels));
  }
  if (nemotron_h || mixtral) m.ffn_hidden_size = ffn == 0 ? std::nullopt : std::optional<int64_t>(ffn);
  if (nemotron_h) {
    check_nemotron_h(d, out, s);
  } else {
    check_architecture(d, out, s, hf.architecture);
  }
  if (m.qk_layernorm != s.qk_layernorm) {  // a Qwen3 folder's q_norm and k_norm
    d.differ_as("model.qk_layernorm",
                s.qk_layernorm
                    ? "config.json describes Qwen3 (q_norm and k_norm in every attention)"
                    : "config.json describes attention without query and key norms (" + hf.architecture + ")",
                boolean(m.qk_layernorm), boolean(s.qk_layernorm));
  }
  if (m.add_bias_linear != s.add_bias_linear) {  // a Llama folder's attention_bias and mlp_bias
    d.differ_as("model.add_bias_linear",
                s.add_bias_linear
                    ? "config.json describes Llama with attention_bias and mlp_bias (a bias on every "
                      "linear of attention and the MLP)"
                    : "config.json describes o_proj and MLP linears without biases (" + hf.architecture + ")",
                boolean(m.add_bias_linear), boolean(s.add_bias_linear));
  } else if ((m.add_qkv_bias || m.add_bias_linear) !=
             s.has_qkv_bias()) {  // a Qwen2 folder's q_proj, k_proj and v_proj biases
    d.differ_as("model.add_qkv_bias",
                s.add_qkv_bias ? "config.json describes Qwen2 (a bias on q_proj, k_proj and v_proj)"
                               : "config.json describes attention without QKV biases (" + hf.architecture + ")",
                boolean(m.add_qkv_bias), boolean(s.add_qkv_bias));
  }
  if (!nemotron_h && !same(m.rotary_base, s.rotary_base))  // NemotronH has no RoPE
    d.differ("model.rotary_base", "rope_theta", num(s.rotary_base), num(m.rotary_base));
  if (!nemotron_h && config::resolved_rotary_dim(m) != s.rotary_dim) {
    // The folder's share as a percent that gives back its count (all 17 digits: int() truncates).
    d.differ("model.rotary_percent", "partial_rotary_factor", strprintf("%.17g", s.rotary_share()),
             num(m.rotary_percent));
  }
  if (!same(m.layernorm_epsilon, s.layernorm_epsilon)) {
    d.differ("model.layernorm_epsilon", nemotron_h ? "layer_norm_epsilon" : "rms_norm_eps", num(s.layernorm_epsilon),
             num(m.layernorm_epsilon));
  }
  if (m.share_embeddings_and_output_weights != s.share_embeddings_and_output_weights) {
    d.differ("model.share_embeddings_and_output_weights", "tie_word_embeddings",
             boolean(s.share_embeddings_and_output_weights), boolean(m.share_embeddings_and_output_weights));
  }
  const ref::RopeScaling& r = s.rope_scaling;  // none in a NemotronH folder
  if (m.rope_scaling != r.llama3()) {
    d.differ("model.rope_scaling", "rope_scaling", boolean(r.llama3()), boolean(m.rope_scaling));
  }
  if (r.llama3()) {
    // Listed whether or not model.rope_scaling is on: the fix must give both keys the folder's values.
    if (!same(m.rope_scaling_factor, r.factor)) {
      d.differ("model.rope_scaling_factor", "rope_scaling.factor", num(r.factor), num(m.rope_scaling_factor));
    }
    // The configuration expresses only the factor; the rest are Megatron's constants for Llama 3.x.
    const ref::RopeScaling megatron;
    if (!same(r.low_freq_factor, megatron.low_freq_factor) || !same(r.high_freq_factor, megatron.high_freq_factor) ||
        !same(r.original_max_position_embeddings, megatron.original_max_position_embeddings)) {
      throw Error(
          strprintf("%s %s: config.json rope_scaling has low_freq_factor %g, high_freq_factor %g, "
                    "original_max_position_embeddings %g; training supports Megatron's Llama 3.x values "
                    "(%g, %g, %g) only (`stepgraph generate` runs any of them)",
                    kKey, folder.c_str(), r.low_freq_factor, r.high_freq_factor, r.original_max_position_embeddings,
                    megatron.low_freq_factor, megatron.high_freq_factor, megatron.original_max_position_embeddings));
    }
  }
  check_longrope(d, m, s.longrope);
  if (!d.lines.empty()) {
    std::string msg =
        strprintf("%s %s: its config.json does not match the model configuration (%zu difference%s):", kKey,
                  folder.c_str(), d.lines.size(), d.lines.size() == 1 ? "" : "s");
    for (const auto& line : d.lines) msg += "\n  " + line;
    msg += "\nset them to the folder's values: " + join(d.fixes, " ") +
           "\n(shape keys left unset in the recipe - num_layers/hidden_size/num_attention_heads 0, vocab_size/"
           "ffn_hidden_size/num_query_groups/kv_channels null, a Mixtral or Qwen3-MoE folder's num_moe_experts/"
           "moe_ffn_hidden_size null, a NemotronH folder's hybrid_override_pattern null - are taken from config.json)";
    throw Error(msg);
  }
  if (!d.taken.empty()) log::info(strprintf("model shape from %s: %s", hf.path.c_str(), join(d.taken, ", ").c_str()));
  if (hf.sliding_window && m.seq_length > *hf.sliding_window) {
    throw Error(strprintf(
        "%s %s: model.seq_length = %lld is longer than the folder's sliding_window = %lld (%s): past that many "
        "tokens %s's attention sees only the last %lld, stepgraph's every earlier one, so the model trained would not "
        "be the folder's; set model.seq_length <= %lld (and dataset.seq_length with it)",
        kKey, folder.c_str(), static_cast<long long>(m.seq_length), static_cast<long long>(*hf.sliding_window),
        hf.path.c_str(), hf.architecture.c_str(), static_cast<long long>(*hf.sliding_window),
        static_cast<long long>(*hf.sliding_window)));
  }
  if (m.seq_length > hf.max_position_embeddings) {
    log::warn(strprintf(
        "model.seq_length = %lld is longer than the pretrained model's max_position_embeddings = %lld "
        "(%s): positions past it were never trained",
        static_cast<long long>(m.seq_length), static_cast<long long>(hf.max_position_embeddings), hf.path.c_str()));
  }
  return out;
}

bool has_checkpoint_to_resume(const config::Config& config) {
  if (!config.checkpoint.load) return false;
  const std::string& dir = *config.checkpoint.load;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return false;
  if (checkpoint::read_latest_iteration(dir)) return true;
  return std::filesystem::exists(dir + "/" + checkpoint::kTrainStateFile, ec);
}

PretrainedStart pretrained_state(const config::Config& config, const model::ModelLayout& layout) {
  SG_CHECK(config.checkpoint.pretrained_checkpoint.has_value(),
           "pretrained_state: checkpoint.pretrained_checkpoint is unset");
  const std::string folder = checkpoint::resolve_model_folder(*config.checkpoint.pretrained_checkpoint, kKey);
  auto weights = std::make_shared<checkpoint::MappedHfWeights>(
      checkpoint::map_hf_weights(folder, layout, checkpoint::WeightSource::main_params, kKey));
  const std::string unused_bias = model::unused_expert_bias(layout, weights->view);
  if (!unused_bias.empty()) throw Error(strprintf("%s %s: %s", kKey, folder.c_str(), unused_bias.c_str()));
  PretrainedStart start;
  start.state.main_weights = weights->view;
  // A fresh optimizer: zeros the backend sets itself, not 8 bytes a parameter here.
  start.state.exp_avg = model::FlatView::zeros(layout.total());
  start.state.exp_avg_sq = model::FlatView::zeros(layout.total());
  start.state.steps_done = 0;
  start.state.rng = rng::RngState{static_cast<uint64_t>(config.rng.seed), 0};
  log::info(strprintf("starting from pretrained weights %s: %s (step 0, fresh optimizer state)", folder.c_str(),
                      weights->description.c_str()));
  start.weights = std::move(weights);
  return start;
}

}  // namespace sg::train
