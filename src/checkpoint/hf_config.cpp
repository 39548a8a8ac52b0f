#include "checkpoint/hf_config.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "core/error.h"
#include "core/strings.h"
#include "model/stack.h"

namespace sg::checkpoint {

namespace detail {
void require_hf_architecture(const model::ModelSpec& spec, const std::string& architecture,
                             const std::string& otherwise) {
  std::string why_not;
  if (model::hf_architecture(spec, &why_not) != architecture) {
    throw Error("config.json: " + (why_not.empty() ? otherwise : why_not));
  }
}
}  // namespace detail

nlohmann::json hf_model_config(const model::ModelSpec& spec, const std::string& torch_dtype) {
  const std::string architecture = model::hf_architecture(spec);
  if (architecture == "LlamaForCausalLM") return hf_llama_config(spec, torch_dtype);
  if (architecture == "Qwen2ForCausalLM") return hf_qwen2_config(spec, torch_dtype);
  if (architecture == "Qwen3ForCausalLM") return hf_qwen3_config(spec, torch_dtype);
  if (architecture == "Qwen3MoeForCausalLM") return hf_qwen3_moe_config(spec, torch_dtype);
  if (architecture == "Qwen2MoeForCausalLM") return hf_qwen2_moe_config(spec, torch_dtype);
  if (architecture == "Phi3ForCausalLM") return hf_phi3_config(spec, torch_dtype);
  if (architecture == "MixtralForCausalLM") return hf_mixtral_config(spec, torch_dtype);
  if (architecture == "NemotronHForCausalLM") return hf_nemotron_h_config(spec, torch_dtype);
  return nullptr;
}

bool is_hf_token_id_value(const nlohmann::json& value) {
  const auto is_id = [](const nlohmann::json& v) { return v.is_number_integer() && v.get<int64_t>() >= 0; };
  if (value.is_null() || is_id(value)) return true;
  return value.is_array() && !value.empty() && std::all_of(value.begin(), value.end(), is_id);
}

void set_hf_special_token_ids(nlohmann::json& config, const nlohmann::json& bos_token_id,
                              const nlohmann::json& eos_token_id) {
  if (config.is_null()) return;
  SG_CHECK(is_hf_token_id_value(bos_token_id) && is_hf_token_id_value(eos_token_id),
           "set_hf_special_token_ids: bos " + bos_token_id.dump() + ", eos " + eos_token_id.dump() +
               " are not null, an id or a list of ids");
  config["bos_token_id"] = bos_token_id;
  config["eos_token_id"] = eos_token_id;
}

void set_hf_max_position_embeddings(nlohmann::json& config, int64_t max_position_embeddings) {
  if (config.is_null()) return;
  SG_CHECK(max_position_embeddings > 0, strprintf("set_hf_max_position_embeddings: %lld is not positive",
                                                  static_cast<long long>(max_position_embeddings)));
  config["max_position_embeddings"] = max_position_embeddings;
}

void set_hf_mistral_sliding_window(nlohmann::json& config, int64_t sliding_window) {
  if (config.is_null()) return;
  SG_CHECK(sliding_window > 0,
           strprintf("set_hf_mistral_sliding_window: %lld is not positive", static_cast<long long>(sliding_window)));
  if (config.value("model_type", "") == "phi3") {  // Phi3Config has the key itself
    config["sliding_window"] = sliding_window;
    return;
  }
  SG_CHECK(config.value("model_type", "") == "llama" && !config.value("attention_bias", false) &&
               !config.value("mlp_bias", false),
           "set_hf_mistral_sliding_window: not a Llama config.json without biases: " + config.dump());
  config["architectures"] = nlohmann::json::array({"MistralForCausalLM"});
  config["model_type"] = "mistral";
  config["sliding_window"] = sliding_window;
  config.erase("attention_bias");  // MistralConfig has neither
  config.erase("mlp_bias");
}

namespace {

// transformers requires rope_scaling's original_max_position_embeddings to be an integer (it warns at 8192.0).
int64_t original_max_position_embeddings(const ref::RopeScaling& scaling) {
  const double v = scaling.original_max_position_embeddings;
  if (!(v > 0.0 && v <= 9.0e15 && std::floor(v) == v)) {
    throw Error(
        strprintf("config.json: rope_scaling original_max_position_embeddings = %g is not a positive "
                  "integer, which transformers requires; train with Megatron's Llama 3 value 8192",
                  v));
  }
  return static_cast<int64_t>(v);
}

// Llama's config of `llama` (the model without what `architecture` always has) as that class, without the keys
// only LlamaConfig has.
nlohmann::json llama_config_as(const model::ModelSpec& llama, const std::string& torch_dtype, const char* architecture,
                               const char* model_type) {
  nlohmann::json c = hf_llama_config(llama, torch_dtype);
  for (const char* key : {"rope_scaling", "mlp_bias", "attention_bias", "pretraining_tp"}) c.erase(key);
  c["architectures"] = {architecture};
  c["model_type"] = model_type;
  return c;
}

}  // namespace

nlohmann::json hf_phi3_config(const model::ModelSpec& spec, const std::string& torch_dtype) {
  detail::require_hf_architecture(spec, "Phi3ForCausalLM",
                                  "not a Phi-3 model (model.rotary_percent=1 and no LongRoPE lists)");
  // Llama's config (head_dim included: Phi3's attention and RoPE read it where set) with Phi3's keys.
  model::ModelSpec llama = spec;
  llama.rotary_dim = 0;
  llama.longrope = {};
  llama.rope_scaling = {};
  nlohmann::json c = llama_config_as(llama, torch_dtype, "Phi3ForCausalLM", "phi3");
  c["partial_rotary_factor"] = spec.rotary_share();
  // hidden_dropout is Phi3's dropout of each layer's output before the residual add; the embedding has none.
  c["resid_pdrop"] = std::stod(strprintf("%g", spec.hidden_dropout));
  c["embd_pdrop"] = 0.0;
  c["pad_token_id"] = nullptr;  // Phi3Config's default, 32000, may be outside the vocabulary
  c["sliding_window"] = nullptr;
  const model::LongRope& longrope = spec.longrope;
  if (longrope.enabled()) {
    // transformers picks the list by a sequence's length against Phi3Config's top-level original context, as the
    // training did (model/longrope.h); the attention factor is written, not left to its default, which depends on
    // max_position_embeddings.
    c["original_max_position_embeddings"] = longrope.original_max_position_embeddings;
    c["rope_scaling"] = {{"type", "longrope"},
                         {"short_factor", longrope.short_factor},
                         {"long_factor", longrope.long_factor},
                         {"attention_factor", longrope.attention_factor}};
  }
  return c;
}

nlohmann::json hf_mixtral_config(const model::ModelSpec& spec, const std::string& torch_dtype) {
  detail::require_hf_architecture(spec, "MixtralForCausalLM", "not a Mixtral model");
  // Llama's config without the dense MLP, plus the experts. The aux loss is Megatron's (reported apart);
  // transformers computes its own only with output_router_logits.
  model::ModelSpec dense = spec;
  dense.num_moe_experts = 0;
  nlohmann::json c = llama_config_as(dense, torch_dtype, "MixtralForCausalLM", "mixtral");
  c["intermediate_size"] = spec.moe_ffn_hidden_size;
  c["num_local_experts"] = spec.num_moe_experts;
  c["num_experts_per_tok"] = spec.moe_router_topk;
  c["router_aux_loss_coef"] = spec.moe.aux_loss_coeff;
  c["output_router_logits"] = false;
  c["sliding_window"] = nullptr;
  return c;
}

namespace {

// A dense Qwen family's config.json: Llama's (of `llama`, the model without what the family always has) as
// `architecture` and `model_type`, without `dropped` keys, with full attention in every layer (no sliding window).
nlohmann::json qwen_dense_config(const model::ModelSpec& llama, const std::string& torch_dtype,
                                 const char* architecture, const char* model_type,
                                 std::initializer_list<const char*> dropped) {
  nlohmann::json c = hf_llama_config(llama, torch_dtype);
  for (const char* key : dropped) c.erase(key);
  c["architectures"] = {architecture};
  c["model_type"] = model_type;
  c["use_sliding_window"] = false;
  c["sliding_window"] = nullptr;
  c["max_window_layers"] = llama.num_layers;
  return c;
}

}  // namespace

nlohmann::json hf_qwen3_config(const model::ModelSpec& spec, const std::string& torch_dtype) {
  detail::require_hf_architecture(spec, "Qwen3ForCausalLM", "not a Qwen3 model (model.qk_layernorm=false)");
  // Llama plus the norms, which Qwen3 always has (its attention_bias, false, is Llama's key).
  model::ModelSpec llama = spec;
  llama.qk_layernorm = false;
  return qwen_dense_config(llama, torch_dtype, "Qwen3ForCausalLM", "qwen3", {"mlp_bias", "pretraining_tp"});
}

nlohmann::json hf_qwen2_config(const model::ModelSpec& spec, const std::string& torch_dtype) {
  detail::require_hf_architecture(spec, "Qwen2ForCausalLM", "not a Qwen2 model (model.add_qkv_bias=false)");
  // Llama plus the QKV bias, which Qwen2 always has (no attention_bias key: o_proj never has one).
  model::ModelSpec llama = spec;
  llama.add_qkv_bias = false;
  return qwen_dense_config(llama, torch_dtype, "Qwen2ForCausalLM", "qwen2",
                           {"attention_bias", "mlp_bias", "pretraining_tp"});
}

namespace {

// The Qwen MoE families' expert keys on their dense config `c`: softmax routing, the top-k renormalised unless the
// softmax came before the top-k, the dense blocks listed in mlp_only_layers.
void set_qwen_moe_keys(nlohmann::json& c, const model::ModelSpec& spec, const char* architecture,
                       const char* model_type) {
  c["architectures"] = {architecture};
  c["model_type"] = model_type;
  c["num_experts"] = spec.num_moe_experts;
  c["num_experts_per_tok"] = spec.moe_router_topk;
  c["moe_intermediate_size"] = spec.moe_ffn_hidden_size;
  c["norm_topk_prob"] = !spec.moe.pre_softmax;
  c["decoder_sparse_step"] = 1;
  nlohmann::json dense_blocks = nlohmann::json::array();
  for (int64_t b = 0; b < spec.num_layers; ++b) {
    if (!spec.moe.is_moe_block(b)) dense_blocks.push_back(b);
  }
  c["mlp_only_layers"] = dense_blocks;
  c["router_aux_loss_coef"] = spec.moe.aux_loss_coeff;
  c["output_router_logits"] = false;
}

}  // namespace

nlohmann::json hf_qwen3_moe_config(const model::ModelSpec& spec, const std::string& torch_dtype) {
  detail::require_hf_architecture(spec, "Qwen3MoeForCausalLM", "not a Qwen3-MoE model");
  // Qwen3's config (the dense blocks' MLP is intermediate_size wide), plus the experts.
  model::ModelSpec dense = spec;
  dense.num_moe_experts = 0;
  nlohmann::json c = hf_qwen3_config(dense, torch_dtype);
  set_qwen_moe_keys(c, spec, "Qwen3MoeForCausalLM", "qwen3_moe");
  return c;
}

nlohmann::json hf_qwen2_moe_config(const model::ModelSpec& spec, const std::string& torch_dtype) {
  detail::require_hf_architecture(spec, "Qwen2MoeForCausalLM", "not a Qwen2-MoE model");
  // Llama's config (the dense blocks' MLP is intermediate_size wide) as Qwen2's, plus the experts and the gated shared
  // expert (always there); qkv_bias says whether q, k and v have biases (o_proj never has).
  model::ModelSpec llama = spec;
  llama.num_moe_experts = 0;
  llama.add_qkv_bias = false;
  nlohmann::json c = qwen_dense_config(llama, torch_dtype, "Qwen2MoeForCausalLM", "qwen2_moe",
                                       {"attention_bias", "mlp_bias", "pretraining_tp"});
  set_qwen_moe_keys(c, spec, "Qwen2MoeForCausalLM", "qwen2_moe");
  c["shared_expert_intermediate_size"] = spec.moe.shared_expert_intermediate_size;
  c["qkv_bias"] = spec.has_qkv_bias();
  return c;
}

nlohmann::json hf_llama_config(const model::ModelSpec& spec, const std::string& torch_dtype) {
  detail::require_hf_architecture(spec, "LlamaForCausalLM", "not a Llama model");
  if (spec.num_moe_experts > 0) {
    throw Error(
        strprintf("config.json: model.num_moe_experts = %lld; LlamaForCausalLM is dense, so a "
                  "Hugging Face config for MoE models is not written",
                  static_cast<long long>(spec.num_moe_experts)));
  }
  // head_dim is written, so the heads need not divide hidden_size (model.kv_channels; transformers reads head_dim).
  if (spec.num_attention_heads <= 0 || spec.num_query_groups <= 0 ||
      spec.num_attention_heads % spec.num_query_groups != 0) {
    throw Error(
        strprintf("config.json: num_attention_heads %lld, num_query_groups %lld do not describe a Llama "
                  "attention (the groups must divide the heads)",
                  static_cast<long long>(spec.num_attention_heads), static_cast<long long>(spec.num_query_groups)));
  }
  if (torch_dtype != "bfloat16" && torch_dtype != "float32") {
    throw Error("config.json: torch_dtype must be \"bfloat16\" or \"float32\", got \"" +
                torch_dtype + "\"");
  }
  // Built before the list below, with what may throw (a fractional original context): GCC 12's stack-use-after-scope
  // check reports the cleanup of a ?: of braced json temporaries when an element throws inside the outer list.
  nlohmann::json rope_scaling = nullptr;
  if (spec.rope_scaling.llama3()) {
    const int64_t original_context = original_max_position_embeddings(spec.rope_scaling);
    rope_scaling = {{"rope_type", "llama3"},
                    {"factor", spec.rope_scaling.factor},
                    {"low_freq_factor", spec.rope_scaling.low_freq_factor},
                    {"high_freq_factor", spec.rope_scaling.high_freq_factor},
                    {"original_max_position_embeddings", original_context}};
  }
  return nlohmann::json{
      {"architectures", {"LlamaForCausalLM"}},
      {"model_type", "llama"},
      {"vocab_size", spec.vocab_size},
      {"hidden_size", spec.hidden_size},
      {"intermediate_size", spec.ffn_hidden_size},
      {"num_hidden_layers", spec.num_layers},
      {"num_attention_heads", spec.num_attention_heads},
      {"num_key_value_heads", spec.num_query_groups},
      {"head_dim", spec.head_dim()},
      {"hidden_act", "silu"},
      // The context this run trained: a model trained from scratch has seen no position past seq_length, so
      // claiming more would be untested. A run from pretrained weights, or resumed, keeps the (larger) context of
      // the folder its weights came from through set_hf_max_position_embeddings (train/checkpointing.cpp).
      {"max_position_embeddings", spec.seq_length},
      {"rms_norm_eps", spec.layernorm_epsilon},
      {"rope_theta", spec.rotary_base},
      {"rope_scaling", rope_scaling},
      {"tie_word_embeddings", spec.share_embeddings_and_output_weights},
      // model.add_bias_linear: q, k, v and o_proj's biases, and the MLP's (model.add_qkv_bias alone is Qwen2's).
      {"attention_bias", spec.add_bias_linear},
      {"mlp_bias", spec.add_bias_linear},
      {"attention_dropout", std::stod(strprintf("%g", spec.attention_dropout))},  // 0.1, not 0.100000001
      {"initializer_range", spec.init_method_std},
      {"pretraining_tp", 1},
      {"use_cache", true},
      {"torch_dtype", torch_dtype},
  };
}

}  // namespace sg::checkpoint
