#pragma once
// Reading a Hugging Face config.json (checkpoint/hf_import.cpp): a value with its key for the messages, and
// the readers of the model types other than Llama. Internal to src/checkpoint.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "checkpoint/hf_import.h"
#include "core/error.h"
#include "core/strings.h"

namespace sg::checkpoint::detail {

// A config.json value with its key for messages.
class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& json, std::string path) : json_(json), path_(std::move(path)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    throw Error(strprintf("%s: %s %s", path_.c_str(), key.c_str(), why.c_str()));
  }
  bool has(const char* key) const { return json_.contains(key) && !json_[key].is_null(); }
  int64_t integer(const char* key, std::optional<int64_t> fallback = std::nullopt) const {
    if (!has(key)) {
      if (fallback) return *fallback;
      fail(key, "is missing (this model's config.json needs it)");
    }
    const auto& v = json_[key];
    if (!v.is_number_integer() || v.get<int64_t>() <= 0) fail(key, "= " + v.dump() + ": expected a positive integer");
    return v.get<int64_t>();
  }
  double number(const nlohmann::json& obj, const std::string& key, std::optional<double> fallback) const {
    if (!obj.contains(key) || obj[key].is_null()) {
      if (fallback) return *fallback;
      fail(key, "is missing");
    }
    if (!obj[key].is_number()) fail(key, "= " + obj[key].dump() + ": expected a number");
    return obj[key].get<double>();
  }
  double number(const char* key, double fallback) const { return number(json_, key, fallback); }
  bool boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!json_[key].is_boolean()) fail(key, "= " + json_[key].dump() + ": expected true or false");
    return json_[key].get<bool>();
  }
  std::string string(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!json_[key].is_string()) fail(key, "= " + json_[key].dump() + ": expected a string");
    return json_[key].get<std::string>();
  }
  const nlohmann::json& json() const { return json_; }

 private:
  const nlohmann::json& json_;
  std::string path_;
};

// MixtralForCausalLM's experts into s (hf_import_experts.cpp): num_local_experts of intermediate_size in every block.
void read_mixtral_experts(const ConfigReader& c, model::ModelSpec& s);
// Qwen3MoeForCausalLM's, or with `qwen2` Qwen2MoeForCausalLM's (with its gated shared expert), experts into s.
void read_qwen_moe_experts(const ConfigReader& c, model::ModelSpec& s, bool qwen2);

// The attention of the Llama-block families beyond Llama's (hf_import_attention.cpp). Qwen2's and Qwen3's: full
// attention in every layer, else sg::Error naming the key.
void read_qwen_attention(const ConfigReader& c);
// Mistral's and Phi-3's sliding_window: null none, an absent key `absent` (the config class's default), else a
// positive integer.
std::optional<int64_t> read_sliding_window(const ConfigReader& c, std::optional<int64_t> absent);
// Phi-3's partial_rotary_factor (top level or in rope_parameters, the two agreeing where both are set) as the
// dimensions RoPE rotates at the start of a head of head_dim (ModelSpec::rotary_dim): 0 where absent or 1; else
// int(head_dim x factor), which must be even, or sg::Error naming the key.
int64_t read_rotary_dim(const ConfigReader& c, int64_t head_dim);

// A longrope RoPE object (`scaling`, read under `key`: rope_scaling or rope_parameters) of a model rotating
// `rotated_dims` dimensions of each head (hf_import_longrope.cpp). Phi-3 (`phi3`) takes
// original_max_position_embeddings from the top level (Phi3Config's, default 4096), as transformers does; the others
// from the object, else max_position_embeddings. sg::Error naming the key for factor lists that are not one positive
// number per rotated pair, more pairs than the kernels take (ref::kMaxLongRopePairs), or a factor or attention_factor
// that is not positive.
model::LongRope read_longrope(const ConfigReader& c, const nlohmann::json& scaling, const std::string& key,
                              int64_t rotated_dims, int64_t max_position_embeddings, bool phi3);

// model_type "nemotron_h" (NemotronHForCausalLM: Mamba2, attention without RoPE, squared-ReLU MLPs and, with
// "moe" layers, NemotronHMoE) into out.spec and out.max_position_embeddings (hf_import_nemotron_h.cpp).
void read_nemotron_h_config(const ConfigReader& c, HfModelConfig& out);

}  // namespace sg::checkpoint::detail
