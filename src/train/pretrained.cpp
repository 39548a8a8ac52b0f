#include "train/pretrained.h"

#include <cmath>
#include <filesystem>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/hf_import.h"
#include "core/error.h"
#include "core/log.h"
#include "core/strings.h"

namespace sg::train {

namespace {

constexpr const char* kKey = "checkpoint.pretrained_checkpoint";

std::string num(double v) {
  return strprintf("%g", v);
}
std::string num(int64_t v) {
  return std::to_string(v);
}

struct Differences {
  std::vector<std::string> lines;  // "model.hidden_size: config.json hidden_size = 2048, configured 256"
  std::vector<std::string> fixes;  // "model.hidden_size=2048"
  std::vector<std::string> taken;  // "hidden_size 2048"

  void differ(const std::string& key, const std::string& folder_key, const std::string& folder_value,
              const std::string& configured) {
    lines.push_back(strprintf("%s: config.json %s = %s, configured %s", key.c_str(), folder_key.c_str(),
                              folder_value.c_str(), configured.c_str()));
    fixes.push_back(key + "=" + folder_value);
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

}  // namespace

config::Config apply_pretrained_shapes(const config::Config& config) {
  if (!config.checkpoint.pretrained_checkpoint) return config;
  const std::string folder = checkpoint::resolve_model_folder(*config.checkpoint.pretrained_checkpoint, kKey);
  const checkpoint::HfModelConfig hf = checkpoint::read_hf_config(folder);
  const model::ModelSpec& s = hf.spec;
  config::Config out = config;
  config::ModelConfig& m = out.model;
  Differences d;
  take_or_check(d, "num_layers", "num_hidden_layers", s.num_layers, m.num_layers, m.num_layers == 0);
  take_or_check(d, "hidden_size", "hidden_size", s.hidden_size, m.hidden_size, m.hidden_size == 0);
  take_or_check(d, "num_attention_heads", "num_attention_heads", s.num_attention_heads, m.num_attention_heads,
                m.num_attention_heads == 0);
  int64_t groups = m.num_query_groups.value_or(0), ffn = m.ffn_hidden_size.value_or(0),
          vocab = m.vocab_size.value_or(0);
  take_or_check(d, "num_query_groups", "num_key_value_heads", s.num_query_groups, groups, !m.num_query_groups);
  take_or_check(d, "ffn_hidden_size", "intermediate_size", s.ffn_hidden_size, ffn, !m.ffn_hidden_size);
  take_or_check(d, "vocab_size", "vocab_size", s.vocab_size, vocab, !m.vocab_size);
  m.num_query_groups = groups;
  m.ffn_hidden_size = ffn;
  m.vocab_size = vocab;
  if (!same(m.rotary_base, s.rotary_base))
    d.differ("model.rotary_base", "rope_theta", num(s.rotary_base), num(m.rotary_base));
  if (!same(m.layernorm_epsilon, s.layernorm_epsilon)) {
    d.differ("model.layernorm_epsilon", "rms_norm_eps", num(s.layernorm_epsilon), num(m.layernorm_epsilon));
  }
  if (m.share_embeddings_and_output_weights != s.share_embeddings_and_output_weights) {
    d.differ("model.share_embeddings_and_output_weights", "tie_word_embeddings",
             s.share_embeddings_and_output_weights ? "true" : "false",
             m.share_embeddings_and_output_weights ? "true" : "false");
  }
  const ref::RopeScaling& r = s.rope_scaling;
  if (m.rope_scaling != r.enabled()) {
    d.differ("model.rope_scaling", "rope_scaling", r.enabled() ? "true" : "false", m.rope_scaling ? "true" : "false");
  }
  if (r.enabled()) {
    if (!m.rope_scaling || !same(m.rope_scaling_factor, r.factor)) {
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
  if (!d.lines.empty()) {
    std::string msg =
        strprintf("%s %s: its config.json does not match the model configuration (%zu difference%s):", kKey,
                  folder.c_str(), d.lines.size(), d.lines.size() == 1 ? "" : "s");
    for (const auto& line : d.lines) msg += "\n  " + line;
    msg += "\nset them to the folder's values: " + join(d.fixes, " ") +
           "\n(shape keys left unset in the recipe - num_layers/hidden_size/num_attention_heads 0, vocab_size/"
           "ffn_hidden_size/num_query_groups null - are taken from config.json)";
    throw Error(msg);
  }
  if (!d.taken.empty()) log::info(strprintf("model shape from %s: %s", hf.path.c_str(), join(d.taken, ", ").c_str()));
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

TrainingState pretrained_state(const config::Config& config, const model::ModelLayout& layout) {
  SG_CHECK(config.checkpoint.pretrained_checkpoint.has_value(),
           "pretrained_state: checkpoint.pretrained_checkpoint is unset");
  const std::string folder = checkpoint::resolve_model_folder(*config.checkpoint.pretrained_checkpoint, kKey);
  TrainingState state;
  const std::string what =
      checkpoint::load_hf_weights(folder, layout, state.main_weights, checkpoint::WeightSource::main_params);
  state.exp_avg.assign(state.main_weights.size(), 0.0f);
  state.exp_avg_sq.assign(state.main_weights.size(), 0.0f);
  state.steps_done = 0;
  state.rng = rng::RngState{static_cast<uint64_t>(config.rng.seed), 0};
  log::info(strprintf("starting from pretrained weights %s: %s (step 0, fresh optimizer state)", folder.c_str(),
                      what.c_str()));
  return state;
}

}  // namespace sg::train
