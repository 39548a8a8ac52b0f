// config.json's attention beyond Llama's for the Llama-block families (Qwen2, Qwen3, Mistral, Phi-3): what stepgraph's
// fully causal attention runs (Phi-3's partial rotary included), and the window within which it is Mistral's
// (checkpoint/hf_import.cpp reads the rest of these folders).
#include <optional>
#include <string>

#include "checkpoint/hf_config_reader.h"

namespace sg::checkpoint::detail {

// Qwen2's and Qwen3's attention beyond Llama's: full attention in every layer (use_sliding_window, or transformers 5's
// layer_types, would window some). Qwen3's has no biases (attention_bias is read with Llama's keys); Qwen2's has the
// QKV bias, always.
void read_qwen_attention(const ConfigReader& c) {
  if (c.boolean("use_sliding_window", false)) {
    c.fail("use_sliding_window",
           "= true: stepgraph's attention is fully causal; a folder with a window is another "
           "model");
  }
  const nlohmann::json& j = c.json();
  if (j.contains("layer_types") && j["layer_types"].is_array()) {
    for (const auto& type : j["layer_types"]) {
      if (!type.is_string() || type.get<std::string>() != "full_attention") {
        c.fail("layer_types", "lists " + type.dump() + ": stepgraph's attention is full_attention in every layer");
      }
    }
  }
}

// Mistral's and Phi3's attention sees the last sliding_window tokens; null is no window, and an absent key the config
// class's default (MistralConfig's 4096, Phi3Config's none). stepgraph's attention is fully causal: the same within
// the window, so the folder is read and the runs whose sequences are longer are refused where their length is known
// (train, generate).
std::optional<int64_t> read_sliding_window(const ConfigReader& c, std::optional<int64_t> absent) {
  if (c.json().contains("sliding_window") && c.json()["sliding_window"].is_null()) return std::nullopt;
  if (!c.json().contains("sliding_window")) return absent;
  return c.integer("sliding_window");
}

// Phi3's RoPE may rotate a share of each head (partial_rotary_factor, at the top level or in rope_parameters:
// Phi-4-mini's 0.75): int(head_dim x factor) dimensions, as transformers counts them, which must be even.
int64_t read_rotary_dim(const ConfigReader& c, int64_t head_dim) {
  const nlohmann::json& j = c.json();
  std::optional<double> factor;
  std::string key;
  const auto read = [&](const nlohmann::json& obj, const std::string& name) {
    if (!obj.is_object() || !obj.contains("partial_rotary_factor") || obj["partial_rotary_factor"].is_null()) return;
    const double f = c.number(obj, "partial_rotary_factor", std::nullopt);
    if (factor && *factor != f) {
      c.fail(name, "= " + obj["partial_rotary_factor"].dump() + ": " + key + " says " + strprintf("%g", *factor) +
                       "; the two must agree");
    }
    factor = f;
    key = name;
  };
  read(j, "partial_rotary_factor");
  if (j.contains("rope_parameters")) read(j["rope_parameters"], "rope_parameters.partial_rotary_factor");
  if (!factor || *factor == 1.0) return 0;
  const int64_t rotated = model::ModelSpec::rotary_dims_of_share(head_dim, *factor);
  if (!(*factor > 0.0 && *factor < 1.0) || rotated < 2 || rotated % 2 != 0) {
    c.fail(key, strprintf("= %g rotates int(head_dim %lld x %g) = %lld dimensions of each head: it must be in (0, 1] "
                          "and give an even count of at least 2",
                          *factor, static_cast<long long>(head_dim), *factor, static_cast<long long>(rotated)));
  }
  return rotated;
}

}  // namespace sg::checkpoint::detail
