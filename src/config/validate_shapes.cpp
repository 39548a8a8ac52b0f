// Rule 16: shapes and values are consistent (Megatron's own asserts, plus the shapes stepgraph's kernels
// are built for: kernels/shape_limits.h, the same functions the kernels check at plan time). Every failure
// names the keys, values and a fix.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "config/lr_decay.h"
#include "config/model_config.h"
#include "config/moment_dtype.h"
#include "config/tokenizer_vocab.h"
#include "config/validate.h"
#include "core/paths.h"
#include "core/strings.h"
#include "kernels/shape_limits.h"
#include "model/layer_kind.h"
#include "model/recompute.h"
#include "reference/moe_permute.h"

namespace sg::config::detail {
namespace {

constexpr int64_t kMaxSize = std::numeric_limits<int32_t>::max();
// The router kernel's limit (kernels/moe_router.cu: lane l of a warp owns experts l + 32 i, i < 32).
constexpr int64_t kMaxMoeExperts = 1024;

long long ll(int64_t v) { return static_cast<long long>(v); }

// The multiple of `step` nearest to `value` within [step, max] (a concrete value for a fix).
int64_t nearest_multiple(int64_t value, int64_t step, int64_t max = kMaxSize) {
  const int64_t down = value / step * step;
  const int64_t near = value - down < step - (value - down) ? down : down + step;
  return std::clamp(near, step, max / step * step);
}

class ShapeChecker {
 public:
  ShapeChecker(const Config& config, std::vector<Violation>& out, std::vector<Note>& notes)
      : c_(config), out_(out), notes_(notes) {}

  void run() {
    check_model();
    check_moe();
    check_hybrid();
    check_layers_and_recompute();
    check_kernel_limits();
    check_batch_and_optimizer();
    check_data_and_io();
  }

 private:
  void fail(const std::string& message, const std::vector<std::string>& keys,
            const std::string& fix) {
    Violation v{16, message, {}, fix};
    for (const auto& key : keys) v.values.push_back({key, format_value(c_, key)});
    out_.push_back(std::move(v));
  }
  void note(const std::string& message, const std::vector<std::string>& keys) {
    Note n{16, message, {}};
    for (const auto& key : keys) n.values.push_back({key, format_value(c_, key)});
    notes_.push_back(std::move(n));
  }

  // An integer in [min, max]; false (and reported) otherwise.
  bool in_range(const std::string& key, int64_t value, int64_t min, int64_t max) {
    if (value >= min && value <= max) return true;
    const std::string range = max == std::numeric_limits<int64_t>::max()
                                  ? strprintf(">= %lld", static_cast<long long>(min))
                                  : strprintf("between %lld and %lld", static_cast<long long>(min),
                                              static_cast<long long>(max));
    fail(key + " must be " + range, {key}, "set " + key + " to a value " + range);
    return false;
  }
  bool size(const std::string& key, int64_t value, int64_t max = kMaxSize) {
    return in_range(key, value, 1, max);
  }
  bool size(const std::string& key, const std::optional<int64_t>& value) {
    if (!value) {
      fail(key + " must be set", {key}, "set " + key + " to a positive integer");
      return false;
    }
    return size(key, *value);
  }
  void real(const std::string& key, double value, double min, bool min_inclusive, double max,
            bool max_inclusive) {
    const bool ok = std::isfinite(value) && (min_inclusive ? value >= min : value > min) &&
                    (max_inclusive ? value <= max : value < max);
    if (ok) return;
    const std::string range = strprintf("%s%g, %s%s", min_inclusive ? "[" : "(", min,
                                        std::isinf(max) ? "inf" : strprintf("%g", max).c_str(),
                                        max_inclusive ? "]" : ")");
    fail(key + " must be a finite number in " + range, {key}, "set " + key + " within " + range);
  }
  void positive(const std::string& key, double value) {
    real(key, value, 0.0, false, INFINITY, false);
  }
  void non_negative(const std::string& key, double value) {
    real(key, value, 0.0, true, INFINITY, false);
  }
  // Whether `value` is one of `valid`; reported when not: one of Megatron's values stepgraph does not implement
  // as such, anything else as unknown (with the closest valid one).
  bool one_of(const std::string& key, const std::string& value, const std::vector<std::string>& valid,
              const std::vector<std::string>& megatron_only = {}) {
    if (std::find(valid.begin(), valid.end(), value) != valid.end()) return true;
    const bool megatron = std::find(megatron_only.begin(), megatron_only.end(), value) != megatron_only.end();
    const std::string close = megatron ? "" : closest_match(value, valid);
    fail(megatron ? key + ": Megatron's '" + value + "' is not implemented in stepgraph"
                  : "unknown " + key + " '" + value + "'",
         {key}, "use one of: " + join(valid, ", ") + (close.empty() ? "" : "; did you mean '" + close + "'?"));
    return false;
  }
  bool one_of(const KeyValues& values, const std::string& value) {
    return one_of(values.key, value, values.implemented, values.megatron_only);
  }

  void check_model() {
    const ModelConfig& m = c_.model;
    if (m.num_layers > kMaxLayers) {
      fail(strprintf("model.num_layers must be at most %lld: the training step sums the weight gradients of its "
                     "num_layers + 1 RMSNorms in one launch, one grid row each, at most %lld rows",
                     ll(kMaxLayers), ll(kernels::kMaxBatchedColumnSums)),
           {"model.num_layers"}, strprintf("set model.num_layers to a value between 1 and %lld", ll(kMaxLayers)));
    } else {
      size("model.num_layers", m.num_layers, kMaxLayers);
    }
    const bool hidden_ok = size("model.hidden_size", m.hidden_size);
    const bool heads_ok = size("model.num_attention_heads", m.num_attention_heads);
    // The head dimension's own limits (RoPE's even pairs included) are the attention kernel's:
    // check_attention_limits.
    if (m.kv_channels) {
      size("model.kv_channels", *m.kv_channels);
    } else if (hidden_ok && heads_ok && m.hidden_size % m.num_attention_heads != 0) {
      fail("hidden_size must be divisible by num_attention_heads", {"model.hidden_size", "model.num_attention_heads"},
           "choose num_attention_heads dividing hidden_size (head_dim = hidden_size / heads)");
    }
    if (heads_ok && size("model.num_query_groups", m.num_query_groups) &&
        m.num_attention_heads % *m.num_query_groups != 0) {
      fail("num_attention_heads must be divisible by num_query_groups",
           {"model.num_attention_heads", "model.num_query_groups"},
           "choose num_query_groups dividing num_attention_heads (null = one group per head)");
    }
    if (hidden_ok || m.ffn_hidden_size) size("model.ffn_hidden_size", m.ffn_hidden_size);
    size("model.seq_length", m.seq_length);
    // A named tokenizer that was not read leaves vocab_size null (resolve_tokenizer sets it when it reads one):
    // the tokenizer's own error says why, and "there is no tokenizer" would be false.
    if (m.vocab_size) {
      size("model.vocab_size", m.vocab_size);
    } else if (!tokenizer_configured(c_.tokenizer)) {
      fail("model.vocab_size must be set (there is no tokenizer to take it from)",
           {"model.vocab_size", "tokenizer.tokenizer_model"},
           "set model.vocab_size to a positive integer, or tokenizer.tokenizer_type=HuggingFaceTokenizer "
           "tokenizer.tokenizer_model=DIR to take it from the tokenizer (padded)");
    }
    positive("model.rotary_base", m.rotary_base);
    if (m.rope_scaling) positive("model.rope_scaling_factor", m.rope_scaling_factor);
    positive("model.layernorm_epsilon", m.layernorm_epsilon);
    positive("model.init_method_std", m.init_method_std);
    real("model.attention_dropout", m.attention_dropout, 0.0, true, 1.0, false);
    real("model.hidden_dropout", m.hidden_dropout, 0.0, true, 1.0, false);
    size("model.tensor_model_parallel_size", m.tensor_model_parallel_size);
    size("model.pipeline_model_parallel_size", m.pipeline_model_parallel_size);
    size("model.expert_model_parallel_size", m.expert_model_parallel_size);
  }

  void check_moe() {
    const ModelConfig& m = c_.model;
    const int64_t experts = m.num_moe_experts.value_or(0);
    if (m.num_moe_experts && (*m.num_moe_experts < 0 || *m.num_moe_experts > kMaxMoeExperts)) {
      const std::string range = strprintf("between 0 and %lld", static_cast<long long>(kMaxMoeExperts));
      fail("model.num_moe_experts must be " + range + " (the router's limit; 0 = dense)", {"model.num_moe_experts"},
           "set model.num_moe_experts to a value " + range);
      return;
    }
    if (experts > 0) {
      if (m.moe_router_topk < 1 || m.moe_router_topk > experts) {
        fail("moe_router_topk must be between 1 and num_moe_experts",
             {"model.moe_router_topk", "model.num_moe_experts"},
             "set model.moe_router_topk to at most model.num_moe_experts");
      }
      size("model.moe_ffn_hidden_size", m.moe_ffn_hidden_size);
    }
    const std::optional<double> factor = m.moe_expert_capacity_factor;
    if (factor && !(std::isfinite(*factor) && *factor > 0.0)) {
      fail("model.moe_expert_capacity_factor must be a finite number > 0 (token-drop)",
           {"model.moe_expert_capacity_factor"},
           "set model.moe_expert_capacity_factor > 0 (e.g. 1.0) to drop tokens over capacity, or null for "
           "token-dropless routing (Megatron reads a negative factor as null; here write null)");
    }
    if (m.moe_pad_expert_input_to_capacity && !m.moe_expert_capacity_factor) {
      fail("moe_pad_expert_input_to_capacity needs moe_expert_capacity_factor",
           {"model.moe_pad_expert_input_to_capacity", "model.moe_expert_capacity_factor"},
           "set model.moe_expert_capacity_factor (e.g. 1.0), or "
           "model.moe_pad_expert_input_to_capacity=false");
    }
    one_of(moe_token_dispatcher_type_values(), m.moe_token_dispatcher_type);
    non_negative("model.moe_aux_loss_coeff", m.moe_aux_loss_coeff);
    if (experts > 0) check_moe_routing();
  }

  // The rest of the MoE keys, for an MoE model (Megatron's own asserts and what the kernels need).
  void check_moe_routing() {
    const ModelConfig& m = c_.model;
    if (m.moe_token_dispatcher_type == "flex") {
      note("moe_token_dispatcher_type flex: the DeepEP/HybridEP backends are not used; with "
           "expert_model_parallel_size 1 every dispatcher is the same local permutation",
           {"model.moe_token_dispatcher_type"});
    }
    one_of(moe_router_score_function_values(), m.moe_router_score_function);
    one_of(moe_router_load_balancing_type_values(), m.moe_router_load_balancing_type);
    one_of(moe_token_drop_policy_values(), m.moe_token_drop_policy);
    if (m.moe_router_pre_softmax && m.moe_router_score_function == "sigmoid") {
      note("moe_router_pre_softmax has no effect with the sigmoid score function (Megatron ignores it there too)",
           {"model.moe_router_pre_softmax", "model.moe_router_score_function"});
    }
    // Megatron's assert: a softmax over the one chosen logit is 1 for every token, so no gradient of the
    // language-model loss reaches the router.
    if (m.moe_router_topk == 1 && m.moe_router_score_function == "softmax" && !m.moe_router_pre_softmax) {
      fail("moe_router_topk 1 with the softmax after the top-k gives every token probability 1: the router learns "
           "nothing from the language-model loss (Megatron: \"Please use --moe-router-pre-softmax when topk is 1\")",
           {"model.moe_router_topk", "model.moe_router_score_function", "model.moe_router_pre_softmax"},
           "set model.moe_router_pre_softmax=true (the softmax over all experts, before the top-k), or "
           "model.moe_router_topk >= 2");
    }
    if (m.moe_router_topk_scaling_factor) {
      positive("model.moe_router_topk_scaling_factor", *m.moe_router_topk_scaling_factor);
    }
    // Keys that do nothing in this configuration (as Megatron ignores them): said, not silently dropped.
    if (m.moe_router_load_balancing_type == "none" && m.moe_aux_loss_coeff > 0.0) {
      note(strprintf("moe_aux_loss_coeff %g has no effect: moe_router_load_balancing_type none adds no auxiliary "
                     "loss",
                     m.moe_aux_loss_coeff),
           {"model.moe_aux_loss_coeff", "model.moe_router_load_balancing_type"});
    }
    if (!m.moe_expert_capacity_factor && m.moe_token_drop_policy != ModelConfig().moe_token_drop_policy) {
      note("moe_token_drop_policy " + m.moe_token_drop_policy +
               " has no effect: moe_expert_capacity_factor is null (dropless), so no token is dropped",
           {"model.moe_token_drop_policy", "model.moe_expert_capacity_factor"});
    }
    if (m.moe_z_loss_coeff) non_negative("model.moe_z_loss_coeff", *m.moe_z_loss_coeff);
    if (m.moe_router_enable_expert_bias) {
      if (m.moe_router_score_function != "sigmoid") {
        fail("moe_router_enable_expert_bias needs the sigmoid score function (as in Megatron)",
             {"model.moe_router_enable_expert_bias", "model.moe_router_score_function"},
             "set model.moe_router_score_function=sigmoid, or model.moe_router_enable_expert_bias=false");
      }
      positive("model.moe_router_bias_update_rate", m.moe_router_bias_update_rate);
    }
    if (m.moe_shared_expert_intermediate_size) {
      size("model.moe_shared_expert_intermediate_size", *m.moe_shared_expert_intermediate_size);
    }
  }

  // position_embedding_type, the MLP activation, and the Mamba mixer's shapes and init (when the
  // pattern has M layers).
  void check_hybrid() {
    const ModelConfig& m = c_.model;
    if (m.position_embedding_type) one_of(position_embedding_type_values(), *m.position_embedding_type);
    const bool swiglu = m.activation_func == "silu" && m.gated_linear_unit;
    const bool squared_relu = m.activation_func == "squared_relu" && !m.gated_linear_unit;
    const std::string pair = strprintf("activation_func %s with gated_linear_unit %s", m.activation_func.c_str(),
                                       m.gated_linear_unit ? "true" : "false");
    // One activation for the dense MLP layers and the MoE experts (routed and shared), as Megatron's.
    if (!swiglu && !squared_relu) {
      fail(pair + " is not supported", {"model.activation_func", "model.gated_linear_unit"},
           "use activation_func=silu with gated_linear_unit=true (SwiGLU, Llama) or activation_func=squared_relu "
           "with gated_linear_unit=false (Nemotron-H)");
    }
    if (!has_layers(model::LayerKind::mamba)) return;
    if (size("model.mamba_state_dim", m.mamba_state_dim)) {
      const std::string problem = kernels::ssd_state_dim_problem(m.mamba_state_dim);
      if (!problem.empty()) {
        fail("the Mamba2 SSD scan refuses mamba_state_dim: " + problem, {"model.mamba_state_dim"},
             "set model.mamba_state_dim to 16, 32, 64 or 128 (Megatron's default: 128)");
      }
    }
    // An unsupported head_dim is reported alone: the head count it would give is moot.
    bool head_ok = size("model.mamba_head_dim", m.mamba_head_dim);
    if (head_ok) {
      const std::string problem = kernels::ssd_head_dim_problem(m.mamba_head_dim);
      if (!problem.empty()) {
        fail("the Mamba2 SSD scan refuses mamba_head_dim: " + problem, {"model.mamba_head_dim"},
             strprintf("set model.mamba_head_dim=%lld (Megatron's default)", ll(kernels::kSsdHeadDim)));
        head_ok = false;
      }
    }
    const bool groups_ok = size("model.mamba_num_groups", m.mamba_num_groups);
    int64_t heads = 0;
    if (m.mamba_num_heads) {
      if (size("model.mamba_num_heads", *m.mamba_num_heads)) heads = *m.mamba_num_heads;
    } else if (head_ok && size("model.mamba_expand", m.mamba_expand, 64) && m.hidden_size > 0) {
      if ((m.mamba_expand * m.hidden_size) % m.mamba_head_dim != 0) {
        fail(strprintf("mamba_expand * hidden_size = %lld is not a multiple of mamba_head_dim",
                       static_cast<long long>(m.mamba_expand * m.hidden_size)),
             {"model.mamba_expand", "model.hidden_size", "model.mamba_head_dim", "model.mamba_num_heads"},
             "set model.mamba_num_heads, or a mamba_head_dim dividing mamba_expand * hidden_size");
      } else {
        heads = m.mamba_expand * m.hidden_size / m.mamba_head_dim;
      }
    }
    // Where the head count comes from: the key, or the keys it is derived from.
    std::vector<std::string> head_keys = {"model.mamba_num_heads"};
    std::string heads_text = strprintf("the %lld Mamba heads", ll(heads));
    if (!m.mamba_num_heads) {
      head_keys.insert(head_keys.end(), {"model.mamba_expand", "model.hidden_size", "model.mamba_head_dim"});
      heads_text += strprintf(" (mamba_expand * hidden_size / mamba_head_dim = %lld * %lld / %lld)",
                              ll(m.mamba_expand), ll(m.hidden_size), ll(m.mamba_head_dim));
    }
    if (heads > 0 && groups_ok && heads % m.mamba_num_groups != 0) {
      std::vector<std::string> keys = head_keys;
      keys.push_back("model.mamba_num_groups");
      fail(heads_text + " are not a multiple of mamba_num_groups", keys,
           "choose mamba_num_groups dividing the number of Mamba heads, or set model.mamba_num_heads");
    }
    if (heads > 0 && head_ok && groups_ok && heads % m.mamba_num_groups == 0) {
      check_gated_norm_width(heads, head_keys, heads_text);
    }
    const int64_t mbs = c_.train.micro_batch_size.value_or(0);
    if (heads > 0 && head_ok && mbs >= 1 && m.seq_length >= 1) {
      const std::string problem = kernels::ssd_size_problem(
          {.batch = mbs, .seqlen = m.seq_length, .nheads = heads, .headdim = m.mamba_head_dim});
      if (!problem.empty()) {
        std::vector<std::string> keys = {"train.micro_batch_size", "model.seq_length"};
        keys.insert(keys.end(), head_keys.begin(), head_keys.end());
        fail("the Mamba2 SSD scan refuses the shape (" + heads_text + "): " + problem, keys,
             "lower train.micro_batch_size (more microbatches instead), model.seq_length or the Mamba head count");
      }
    }
    if (m.mamba_conv_kernel != kernels::kCausalConv1dWidth) {
      const long long width = ll(kernels::kCausalConv1dWidth);
      fail(strprintf("mamba_conv_kernel must be %lld (the causal conv1d kernel's width)", width),
           {"model.mamba_conv_kernel"}, strprintf("set model.mamba_conv_kernel=%lld", width));
    }
    if (m.mamba_chunk_size != kernels::kSsdChunk) {
      fail(strprintf("mamba_chunk_size must be %d (the SSD scan kernels' chunk)", kernels::kSsdChunk),
           {"model.mamba_chunk_size"}, strprintf("set model.mamba_chunk_size=%d", kernels::kSsdChunk));
    }
    positive_range("mamba_dt_min", m.mamba_dt_min, "mamba_dt_max", m.mamba_dt_max, "Megatron: 0.001, 0.1");
    non_negative("model.mamba_dt_init_floor", m.mamba_dt_init_floor);
    non_negative("model.mamba_dt_limit_min", m.mamba_dt_limit_min);
    if (m.mamba_dt_limit_max && !(*m.mamba_dt_limit_max > m.mamba_dt_limit_min)) {
      fail("mamba_dt_limit_max must exceed mamba_dt_limit_min",
           {"model.mamba_dt_limit_min", "model.mamba_dt_limit_max"},
           "raise model.mamba_dt_limit_max, or null for no upper limit");
    }
    positive_range("mamba_A_init_min", m.mamba_A_init_min, "mamba_A_init_max", m.mamba_A_init_max,
                   "Megatron's A_init_range: 1, 16");
  }
  // The gated RMSNorm's groups of d_inner / mamba_num_groups columns (heads divisible by the groups): their
  // backward's shared memory (kernels/shape_limits.h). The fix names the fewest groups that fit.
  void check_gated_norm_width(int64_t heads, const std::vector<std::string>& head_keys, const std::string& heads_text) {
    const ModelConfig& m = c_.model;
    const int64_t inner = heads * m.mamba_head_dim, width = inner / m.mamba_num_groups;
    const std::string problem = kernels::gated_rmsnorm_group_width_problem(width);
    if (problem.empty()) return;
    int64_t groups = heads;  // one head per group: head_dim columns, always within the limit
    for (int64_t g = m.mamba_num_groups + 1; g < heads; ++g) {
      if (heads % g == 0 && kernels::gated_rmsnorm_group_width_problem(inner / g).empty()) {
        groups = g;
        break;
      }
    }
    std::vector<std::string> keys = {"model.mamba_num_groups"};
    keys.insert(keys.end(), head_keys.begin(), head_keys.end());
    fail(strprintf("the Mamba2 gated RMSNorm refuses its group width d_inner / mamba_num_groups = %lld / %lld = %lld "
                   "(d_inner = heads x mamba_head_dim; %s): %s",
                   ll(inner), ll(m.mamba_num_groups), ll(width), heads_text.c_str(), problem.c_str()),
         keys,
         strprintf("use more groups: model.mamba_num_groups=%lld (groups of %lld columns, dividing the %lld heads) or "
                   "more, or a smaller d_inner (model.mamba_expand, model.hidden_size or model.mamba_num_heads)",
                   ll(groups), ll(inner / groups), ll(heads)));
  }

  // 0 < lo <= hi for the model keys lo_key, hi_key.
  void positive_range(const std::string& lo_key, double lo, const std::string& hi_key, double hi,
                      const std::string& defaults) {
    positive("model." + lo_key, lo);
    positive("model." + hi_key, hi);
    if (lo > hi) {
      fail(lo_key + " must not exceed " + hi_key, {"model." + lo_key, "model." + hi_key},
           "set 0 < " + lo_key + " <= " + hi_key + " (" + defaults + ")");
    }
  }

  void check_layers_and_recompute() {
    const ModelConfig& m = c_.model;
    if (m.hybrid_override_pattern) {
      const std::string& pattern = *m.hybrid_override_pattern;
      // Megatron's '|' (stage) and '/' (MTP) are no layers: the pattern's own error says what to remove.
      const bool separators = pattern.find_first_of("|/") != std::string::npos;
      if (!separators && static_cast<int64_t>(pattern.size()) != m.num_layers) {
        fail(strprintf("hybrid_override_pattern has %zu layers but num_layers is %lld",
                       pattern.size(), static_cast<long long>(m.num_layers)),
             {"model.hybrid_override_pattern", "model.num_layers"},
             strprintf("set model.num_layers=%zu (one layer per pattern character)",
                       pattern.size()));
      }
      if (pattern.find('E') != std::string::npos && m.num_moe_experts.value_or(0) <= 0) {
        fail("hybrid_override_pattern has MoE layers (E) but num_moe_experts is not set",
             {"model.hybrid_override_pattern", "model.num_moe_experts"},
             "set model.num_moe_experts > 0, or use - (dense MLP) instead of E");
      }
    }
    if (m.recompute_granularity) {
      one_of("model.recompute_granularity", *m.recompute_granularity, model::recompute_granularity_names());
    }
    for (const auto& module : m.recompute_modules)
      one_of("model.recompute_modules", module, model::recompute_module_names());
    if (m.recompute_method) one_of("model.recompute_method", *m.recompute_method, model::recompute_method_names());
    if (m.recompute_num_layers) {
      in_range("model.recompute_num_layers", *m.recompute_num_layers, 1,
               std::max<int64_t>(1, m.num_layers));
    }
  }

  // A kind's checks (its kernel limits, the experts' activation) apply only where its layers run.
  bool has_layers(model::LayerKind kind) const { return has_layer_kind(c_, kind, kMaxLayers); }

  // The shapes the GPU kernels are built for (kernels/shape_limits.h), per layer kind present. A key that
  // failed its own check above is skipped, so one mistake is reported once.
  void check_kernel_limits() {
    const ModelConfig& m = c_.model;
    if (m.hidden_size >= 1 && m.hidden_size <= kMaxSize) {
      // Every model has the LM head and the RMSNorms (each layer's pre-norm, the final norm).
      const std::string lm_head = kernels::lm_head_hidden_problem(m.hidden_size);
      if (!lm_head.empty()) {
        fail("the LM head refuses hidden_size: " + lm_head, {"model.hidden_size"},
             strprintf("set model.hidden_size to a multiple of 8 (e.g. %lld)", ll(nearest_multiple(m.hidden_size, 8))));
      }
      // The vector path's width: any other hidden_size is the LM head's error above.
      const std::string norm = kernels::rmsnorm_backward_width_problem(m.hidden_size, /*vector_path=*/true);
      if (!norm.empty()) {
        fail("the RMSNorm kernels refuse hidden_size: " + norm, {"model.hidden_size"},
             strprintf("set model.hidden_size to at most %lld", ll(kernels::rmsnorm_backward_max_width(true))));
      }
    }
    if (has_layers(model::LayerKind::attention)) check_attention_limits();
    if (has_layers(model::LayerKind::moe)) check_moe_limits();
  }

  void check_attention_limits() {
    const ModelConfig& m = c_.model;
    if (m.seq_length >= 1 && m.seq_length <= kMaxSize) {
      const std::string problem = kernels::attention_seq_len_problem(m.seq_length);
      if (!problem.empty()) {
        fail("the attention layers refuse seq_length: " + problem, {"model.seq_length", "dataset.seq_length"},
             strprintf("set model.seq_length (and dataset.seq_length) to at least %lld",
                       ll(kernels::kAttentionMinSeqLen)));
      }
    }
    if (m.kv_channels) {
      const int64_t head_dim = *m.kv_channels;
      if (head_dim < 1 || head_dim > kMaxSize) return;  // reported by check_model
      const std::string problem = kernels::attention_head_dim_problem(head_dim);
      if (problem.empty()) return;
      const int64_t example =
          nearest_multiple(head_dim, kernels::kAttentionHeadDimMultiple, kernels::kAttentionMaxHeadDim);
      fail("the attention layers refuse kv_channels (the head dimension): " + problem, {"model.kv_channels"},
           strprintf("set model.kv_channels to a multiple of 8 at most %lld (e.g. %lld), or null for "
                     "hidden_size / num_attention_heads",
                     ll(kernels::kAttentionMaxHeadDim), ll(example)));
      return;
    }
    const int64_t hidden = m.hidden_size, heads = m.num_attention_heads;
    if (hidden < 1 || hidden > kMaxSize || heads < 1 || heads > kMaxSize || hidden % heads != 0) return;  // reported
    const std::string problem = kernels::attention_head_dim_problem(hidden / heads);
    if (problem.empty()) return;
    // A concrete head count: the nearest one whose head_dim the kernel takes (the larger on a tie).
    int64_t best = 0;
    const auto distance = [heads](int64_t h) { return h > heads ? h - heads : heads - h; };
    for (int64_t d = kernels::kAttentionHeadDimMultiple; d <= kernels::kAttentionMaxHeadDim;
         d += kernels::kAttentionHeadDimMultiple) {
      if (hidden % d != 0 || !kernels::attention_head_dim_problem(d).empty()) continue;
      const int64_t h = hidden / d;  // d grows, so h falls: a tie keeps the larger h found first
      if (best == 0 || distance(h) < distance(best)) best = h;
    }
    const std::string example =
        best > 0 ? strprintf(" (e.g. num_attention_heads=%lld: head_dim %lld, with num_query_groups dividing it)",
                             ll(best), ll(hidden / best))
                 : "";
    fail(strprintf("the attention layers refuse head_dim = hidden_size / num_attention_heads = %lld: %s",
                   ll(hidden / heads), problem.c_str()),
         {"model.hidden_size", "model.num_attention_heads"},
         strprintf("choose hidden_size and num_attention_heads so head_dim = hidden_size / num_attention_heads is a "
                   "multiple of 8 at most %lld%s, or set model.kv_channels",
                   ll(kernels::kAttentionMaxHeadDim), example.c_str()));
  }

  void check_moe_limits() {
    const ModelConfig& m = c_.model;
    if (m.num_moe_experts.value_or(0) < 1 || *m.num_moe_experts > kMaxMoeExperts) return;  // reported
    // The experts' grouped GEMMs: FC1 [2F, H] (gated) or [F, H], FC2 [H, F] (H is the LM head's check).
    if (m.moe_ffn_hidden_size && *m.moe_ffn_hidden_size >= 1 && *m.moe_ffn_hidden_size <= kMaxSize) {
      const std::string problem = kernels::grouped_gemm_dim_problem(*m.moe_ffn_hidden_size);
      if (!problem.empty()) {
        fail("the MoE experts' grouped GEMMs refuse moe_ffn_hidden_size (null: ffn_hidden_size): " + problem,
             {"model.moe_ffn_hidden_size"},
             strprintf("set model.moe_ffn_hidden_size to a multiple of 8 (e.g. %lld)",
                       ll(nearest_multiple(*m.moe_ffn_hidden_size, kernels::kGroupedGemmDimMultiple))));
      }
    }
    const int64_t mbs = c_.train.micro_batch_size.value_or(0);
    check_padded_capacity(mbs);
    // seq_aux_loss balances each sequence of a microbatch apart: one group per sequence.
    if (m.moe_router_load_balancing_type == "seq_aux_loss" && mbs >= 1) {
      const std::string problem = kernels::moe_loss_groups_problem(mbs);
      if (!problem.empty()) {
        fail("moe_router_load_balancing_type seq_aux_loss has one group per sequence of the microbatch: " + problem,
             {"model.moe_router_load_balancing_type", "train.micro_batch_size"},
             strprintf("set train.micro_batch_size to at most %lld (more microbatches instead), or "
                       "model.moe_router_load_balancing_type=aux_loss",
                       ll(kernels::kMoeMaxLossGroups)));
      }
    }
  }

  // Padded to capacity, every expert's group has `capacity` rows (the model's capacity: ref::moe_expert_capacity),
  // and the E * capacity permuted rows must fit the kernels' int32 row ids. (Unpadded, a capacity above the
  // tokens of a microbatch is clamped to them: it drops nothing, as in Megatron.)
  void check_padded_capacity(int64_t mbs) {
    const ModelConfig& m = c_.model;
    const std::optional<double> factor = m.moe_expert_capacity_factor;
    const int64_t E = m.num_moe_experts.value_or(0), k = m.moe_router_topk;
    if (!m.moe_pad_expert_input_to_capacity || !factor || !(std::isfinite(*factor) && *factor > 0.0)) return;
    if (E < 1 || k < 1 || k > E || mbs < 1 || mbs > kMaxSize || m.seq_length < 1 || m.seq_length > kMaxSize) return;
    const int64_t T = mbs * m.seq_length;
    const int64_t capacity = ref::moe_expert_capacity(T, k, E, *factor, /*pad_to_capacity=*/true);
    if (capacity <= kMaxSize / E) return;
    // The largest factor that fits, rounded down to 3 significant digits.
    const double max_factor =
        static_cast<double>(kMaxSize / E) * static_cast<double>(E) / (static_cast<double>(T) * static_cast<double>(k));
    const double unit = std::pow(10.0, std::floor(std::log10(max_factor)) - 2);
    fail(strprintf("moe_pad_expert_input_to_capacity pads each of the %lld experts to its capacity "
                   "ceil(T k / E x moe_expert_capacity_factor) = %.6g rows (T = micro_batch_size x seq_length = %lld "
                   "tokens, k = %lld): %.6g padded rows in all exceed the kernels' int32 row ids (2^31 - 1)",
                   ll(E), ref::moe_expert_capacity_exact(T, k, E, *factor), ll(T), ll(k),
                   static_cast<double>(E) * ref::moe_expert_capacity_exact(T, k, E, *factor)),
         {"model.moe_expert_capacity_factor", "model.moe_pad_expert_input_to_capacity", "model.num_moe_experts",
          "model.moe_router_topk", "train.micro_batch_size", "model.seq_length"},
         strprintf("lower model.moe_expert_capacity_factor to at most %g, or set "
                   "model.moe_pad_expert_input_to_capacity=false (unpadded, a capacity above the %lld tokens of a "
                   "microbatch drops nothing and adds no padding rows)",
                   std::floor(max_factor / unit) * unit, ll(T)));
  }

  void check_batch_and_optimizer() {
    const auto& t = c_.train;
    const bool mbs_ok = size("train.micro_batch_size", t.micro_batch_size);
    const bool gbs_ok = size("train.global_batch_size", t.global_batch_size);
    const int64_t dp = c_.data_parallel_size;
    if (dp < 1) {
      fail(strprintf("the data-parallel size %lld must be at least 1", static_cast<long long>(dp)), {},
           "start at least one rank");
    } else if (mbs_ok && gbs_ok && *t.global_batch_size % (*t.micro_batch_size * dp) != 0) {
      // Megatron's rule: every data-parallel rank runs the same number of whole microbatches.
      const int64_t unit = *t.micro_batch_size * dp;
      const int64_t suggestion = unit * std::max<int64_t>(1, *t.global_batch_size / unit);
      if (dp == 1) {
        fail("global_batch_size must be a multiple of micro_batch_size",
             {"train.global_batch_size", "train.micro_batch_size"},
             strprintf("set train.global_batch_size to a multiple of %lld (e.g. %lld)",
                       static_cast<long long>(*t.micro_batch_size), static_cast<long long>(suggestion)));
      } else {
        fail(strprintf("global_batch_size must be a multiple of micro_batch_size x data_parallel_size = %lld x %lld "
                       "(data_parallel_size is the number of ranks: WORLD_SIZE, SLURM_NTASKS, launch -n or "
                       "bench -ng)",
                       static_cast<long long>(*t.micro_batch_size), static_cast<long long>(dp)),
             {"train.global_batch_size", "train.micro_batch_size"},
             strprintf("set train.global_batch_size to a multiple of %lld (e.g. %lld), or change the number of "
                       "ranks or train.micro_batch_size",
                       static_cast<long long>(unit), static_cast<long long>(suggestion)));
      }
    }
    if (c_.ddp.bucket_size) size("ddp.bucket_size", *c_.ddp.bucket_size, std::numeric_limits<int64_t>::max());
    size("train.train_iters", t.train_iters);

    const auto& o = c_.optimizer;
    if (!o.lr) {
      fail("optimizer.lr must be set", {"optimizer.lr"}, "set optimizer.lr (e.g. 3e-4)");
    } else {
      non_negative("optimizer.lr", *o.lr);
    }
    non_negative("optimizer.min_lr", o.min_lr);
    if (o.lr && std::isfinite(*o.lr) && o.min_lr > *o.lr) {
      fail("min_lr must not exceed lr", {"optimizer.min_lr", "optimizer.lr"},
           "set optimizer.min_lr <= optimizer.lr");
    }
    non_negative("optimizer.weight_decay", o.weight_decay);
    real("optimizer.adam_beta1", o.adam_beta1, 0.0, true, 1.0, false);
    real("optimizer.adam_beta2", o.adam_beta2, 0.0, true, 1.0, false);
    positive("optimizer.adam_eps", o.adam_eps);
    non_negative("optimizer.clip_grad", o.clip_grad);
    for (const auto& [key, dtype] : {std::pair<std::string, std::string>{"optimizer.exp_avg_dtype", o.exp_avg_dtype},
                                     {"optimizer.exp_avg_sq_dtype", o.exp_avg_sq_dtype}}) {
      one_of(key, dtype, moment_dtype_names());
      const auto known = moment_dtype_named(dtype);
      if (known && *known != kernels::FloatDtype::fp32 && !o.use_precision_aware_optimizer) {
        fail(key + " = " + dtype + " needs the precision-aware optimizer", {key, "optimizer.use_precision_aware_optimizer"},
             "set optimizer.use_precision_aware_optimizer=true, or " + key + "=fp32");
      }
    }

    const auto& s = c_.scheduler;
    in_range("scheduler.lr_warmup_iters", s.lr_warmup_iters, 0,
             std::numeric_limits<int64_t>::max());
    if (s.lr_decay_iters &&
        size("scheduler.lr_decay_iters", *s.lr_decay_iters, std::numeric_limits<int64_t>::max()) &&
        s.lr_warmup_iters >= *s.lr_decay_iters) {
      fail("lr_warmup_iters must be less than lr_decay_iters",
           {"scheduler.lr_warmup_iters", "scheduler.lr_decay_iters"},
           "shorten the warmup or lengthen the decay (lr_decay_iters null = train.train_iters)");
    }
    one_of("scheduler.lr_decay_style", s.lr_decay_style, lr_decay_style_names());
  }

  void check_data_and_io() {
    const auto& d = c_.dataset;
    if (!d.mock && d.data_path.empty()) {
      fail("dataset.data_path is empty and dataset.mock is false",
           {"dataset.data_path", "dataset.mock"},
           "set dataset.data_path=[prefix] (a Megatron .bin/.idx prefix), or dataset.mock=true");
    }
    // A path the mock loader would not read is refused rather than trained past on random tokens.
    if (d.mock && !d.data_path.empty()) {
      fail("dataset.data_path is set but dataset.mock is true, so the data would not be read (random tokens instead)",
           {"dataset.mock", "dataset.data_path"},
           "add dataset.mock=false to train on data_path (the benchmark recipes are mock), or drop dataset.data_path");
    }
    if (d.seq_length && *d.seq_length != c_.model.seq_length) {
      fail("dataset.seq_length must equal model.seq_length",
           {"dataset.seq_length", "model.seq_length"},
           "set dataset.seq_length to model.seq_length (or null)");
    }
    if (d.pad_cu_seqlens && !d.pad_to_max_length) {
      fail("pad_cu_seqlens needs pad_to_max_length",
           {"dataset.pad_cu_seqlens", "dataset.pad_to_max_length"},
           "set dataset.pad_to_max_length=true, or dataset.pad_cu_seqlens=false");
    }
    const auto& ck = c_.checkpoint;
    if (ck.save_interval)
      size("checkpoint.save_interval", *ck.save_interval, std::numeric_limits<int64_t>::max());
    if (ck.save && ck.save->empty()) {
      fail("checkpoint.save is an empty path", {"checkpoint.save"}, "set a directory, or null");
    }
    if (ck.load && ck.load->empty()) {
      fail("checkpoint.load is an empty path", {"checkpoint.load"}, "set a directory, or null");
    } else if (ck.load && !(ck.save && same_directory(*ck.load, *ck.save))) {
      // load = save is Bridge's resume idiom, where a missing folder is a fresh start; any other load must exist
      // (train refuses it, and validate is its pre-flight check).
      std::error_code ec;
      if (!std::filesystem::exists(*ck.load, ec)) {
        fail("checkpoint.load " + *ck.load + ": no such directory", {"checkpoint.load"},
             "point it at a checkpoint directory (an earlier run's checkpoint.save) or one of its iter_N folders, "
             "or null to start fresh");
      }
    }
    if (ck.pretrained_checkpoint && ck.pretrained_checkpoint->empty()) {
      fail("checkpoint.pretrained_checkpoint is an empty path", {"checkpoint.pretrained_checkpoint"},
           "set a Hugging Face Llama, Mixtral or NemotronH folder or a checkpoint directory, or null");
    }
    const bool resumes_from_save = ck.load && ck.save && same_directory(*ck.load, *ck.save);
    if (ck.overwrite && (ck.auto_resume || resumes_from_save)) {
      fail("checkpoint.overwrite deletes the checkpoints in checkpoint.save, but the run is asked to resume "
           "from them",
           {"checkpoint.overwrite", "checkpoint.auto_resume", "checkpoint.load", "checkpoint.save"},
           "choose one: checkpoint.overwrite=true to start over, or checkpoint.auto_resume=true (or "
           "checkpoint.load=<checkpoint.save>) to continue");
    }
    size("logger.log_interval", c_.logger.log_interval, std::numeric_limits<int64_t>::max());
    in_range("rng.seed", c_.rng.seed, 0, std::numeric_limits<int64_t>::max());
  }

  const Config& c_;
  std::vector<Violation>& out_;
  std::vector<Note>& notes_;
};

}  // namespace

void check_shapes(const Config& config, std::vector<Violation>& violations, std::vector<Note>& notes) {
  ShapeChecker(config, violations, notes).run();
}

}  // namespace sg::config::detail
