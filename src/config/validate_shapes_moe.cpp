// Rule 16's MoE checks (validate_shapes_checker.h): the MoE keys (Megatron's own asserts, the settings without
// effect said as notes) and, where MoE layers run, the shapes the router, the experts' grouped GEMMs and the
// auxiliary losses are built for (kernels/shape_limits.h).
#include <cmath>

#include "config/validate_shapes_checker.h"
#include "core/strings.h"
#include "kernels/shape_limits.h"
#include "reference/moe_permute.h"

namespace sg::config::detail {
namespace {

// The router kernel's limit (kernels/moe_router.cu: lane l of a warp owns experts l + 32 i, i < 32).
constexpr int64_t kMaxMoeExperts = 1024;

}  // namespace

void ShapeChecker::check_moe() {
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
      fail("moe_router_topk must be between 1 and num_moe_experts", {"model.moe_router_topk", "model.num_moe_experts"},
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
void ShapeChecker::check_moe_routing() {
  const ModelConfig& m = c_.model;
  if (m.moe_token_dispatcher_type == "flex") {
    note(
        "moe_token_dispatcher_type flex: the DeepEP/HybridEP backends are not used; with "
        "expert_model_parallel_size 1 every dispatcher is the same local permutation",
        {"model.moe_token_dispatcher_type"});
  }
  one_of(moe_router_score_function_values(), m.moe_router_score_function);
  one_of(moe_router_load_balancing_type_values(), m.moe_router_load_balancing_type);
  one_of(moe_token_drop_policy_values(), m.moe_token_drop_policy);
  if (m.moe_router_pre_softmax &&
      (m.moe_router_score_function == "sigmoid" || m.moe_router_score_function == "sqrtsoftplus")) {
    note("moe_router_pre_softmax has no effect with the " + m.moe_router_score_function +
             " score function (Megatron ignores it there too)",
         {"model.moe_router_pre_softmax", "model.moe_router_score_function"});
  }
  // Megatron's assert: a softmax over the one chosen logit is 1 for every token, so no gradient of the
  // language-model loss reaches the router.
  if (m.moe_router_topk == 1 && m.moe_router_score_function == "softmax" && !m.moe_router_pre_softmax) {
    fail(
        "moe_router_topk 1 with the softmax after the top-k gives every token probability 1: the router learns "
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
    if (m.moe_router_score_function != "sigmoid" && m.moe_router_score_function != "sqrtsoftplus") {
      fail("moe_router_enable_expert_bias needs the sigmoid or sqrtsoftplus score function (as in Megatron)",
           {"model.moe_router_enable_expert_bias", "model.moe_router_score_function"},
           "set model.moe_router_score_function=sigmoid (or sqrtsoftplus), or "
           "model.moe_router_enable_expert_bias=false");
    }
    positive("model.moe_router_bias_update_rate", m.moe_router_bias_update_rate);
  }
  if (m.moe_shared_expert_intermediate_size) {
    size("model.moe_shared_expert_intermediate_size", *m.moe_shared_expert_intermediate_size);
    if (m.add_bias_linear && *m.moe_shared_expert_intermediate_size > 0) {
      fail(
          "shared experts have no biases: Megatron's SharedExpertMLP refuses add_bias_linear (the routed experts "
          "have theirs)",
          {"model.add_bias_linear", "model.moe_shared_expert_intermediate_size"},
          "set model.add_bias_linear=false, or model.moe_shared_expert_intermediate_size=null (no shared expert)");
    }
  }
}

void ShapeChecker::check_moe_limits() {
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
void ShapeChecker::check_padded_capacity(int64_t mbs) {
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

}  // namespace sg::config::detail
