#pragma once
// config.json for Hugging Face transformers (LlamaConfig), so a checkpoint folder loads with
// LlamaForCausalLM.from_pretrained(folder).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "model/spec.h"

namespace sg::checkpoint {

// `torch_dtype` names the dtype of the saved model weights ("bfloat16" or "float32").
// sg::Error for specs LlamaForCausalLM cannot express (MoE, hidden_size not divisible by heads).
nlohmann::json hf_llama_config(const model::ModelSpec& spec,
                               const std::string& torch_dtype = "bfloat16");

// NemotronHConfig for hybrid patterns (hf_config_nemotron_h.cpp). sg::Error for specs
// NemotronHForCausalLM cannot express (model::hf_architecture says why).
nlohmann::json hf_nemotron_h_config(const model::ModelSpec& spec, const std::string& torch_dtype = "bfloat16");

// Qwen2Config (Qwen2ForCausalLM): a Llama with model.add_qkv_bias (a bias on q_proj, k_proj and v_proj).
nlohmann::json hf_qwen2_config(const model::ModelSpec& spec, const std::string& torch_dtype = "bfloat16");

// Qwen3Config (Qwen3ForCausalLM): a Llama with model.qk_layernorm (q_norm and k_norm per head).
nlohmann::json hf_qwen3_config(const model::ModelSpec& spec, const std::string& torch_dtype = "bfloat16");

// Qwen3MoeConfig (Qwen3MoeForCausalLM): Qwen3 with softmax-routed SwiGLU experts in the MoE blocks (model::hf_architecture
// says why not otherwise).
nlohmann::json hf_qwen3_moe_config(const model::ModelSpec& spec, const std::string& torch_dtype = "bfloat16");
// Qwen2MoeConfig (Qwen2MoeForCausalLM): SwiGLU experts with a gated shared expert (model.moe_shared_expert_gate),
// softmax routing, q, k and v biased or not (qkv_bias), dense blocks in mlp_only_layers.
nlohmann::json hf_qwen2_moe_config(const model::ModelSpec& spec, const std::string& torch_dtype = "bfloat16");

// Phi3Config (Phi3ForCausalLM): a Llama whose RoPE rotates a share of each head (model.rotary_percent, written as
// partial_rotary_factor) or has LongRoPE (model.longrope_*, written as rope_scaling {type longrope, short_factor,
// long_factor, attention_factor} and original_max_position_embeddings); its files fuse q, k, v and gate, up
// (checkpoint/hf_fused_tensors.h).
nlohmann::json hf_phi3_config(const model::ModelSpec& spec, const std::string& torch_dtype = "bfloat16");

// MixtralConfig (MixtralForCausalLM) for GPT blocks whose MLPs are all softmax-routed MoE without a
// shared expert or expert bias (model::hf_architecture says why not otherwise).
nlohmann::json hf_mixtral_config(const model::ModelSpec& spec, const std::string& torch_dtype = "bfloat16");

// config.json for the architecture the model picks (model::hf_architecture): LlamaConfig for GPT blocks
// of attention and dense MLP, Qwen2Config, Qwen3Config, Qwen3MoeConfig, Phi3Config, MixtralConfig, NemotronHConfig
// for hybrid patterns; null when no
// transformers class loads this model yet (the checkpoint folder then has no config.json; it still
// resumes training).
nlohmann::json hf_model_config(const model::ModelSpec& spec, const std::string& torch_dtype = "bfloat16");

// Writes config.json's bos_token_id and eos_token_id, so that transformers' generate stops where `stepgraph
// generate` does and starts an empty prompt with the tokenizer's BOS: null, an id, or a list of ids (Llama 3.1
// Instruct stops at any of three). train/checkpointing.cpp decides which: the tokenizer's, else those of the folder
// the weights came from. Set null rather than left unset, since the classes' defaults (bos 1, eos 2) would name
// ordinary tokens of the vocabulary. A null config (no class loads the model) stays null. sg::Error (an internal
// check: the callers validate them) for any other value.
void set_hf_special_token_ids(nlohmann::json& config, const nlohmann::json& bos_token_id,
                              const nlohmann::json& eos_token_id);

// Whether `value` is what config.json may hold as bos_token_id or eos_token_id: null, a non-negative integer, or
// a non-empty list of them.
bool is_hf_token_id_value(const nlohmann::json& value);

// Sets max_position_embeddings (the hf_*_config functions write model.seq_length). A null config stays null.
void set_hf_max_position_embeddings(nlohmann::json& config, int64_t max_position_embeddings);

// Makes a Llama config.json (hf_llama_config's, without biases) a Mistral one with this sliding_window, or sets a
// Phi-3 one's: the model started from a Mistral or Phi-3 folder with a window keeps it, so transformers runs it as
// the folder's model beyond the window too. A null config stays null; sg::Error (an internal check) for another
// class or a window not positive.
void set_hf_mistral_sliding_window(nlohmann::json& config, int64_t sliding_window);

namespace detail {
// The hf_*_config functions' precondition: sg::Error "config.json: " + why model::hf_architecture gives another class
// than `architecture` (or `otherwise` where it names none).
void require_hf_architecture(const model::ModelSpec& spec, const std::string& architecture,
                             const std::string& otherwise);
}  // namespace detail

}  // namespace sg::checkpoint
