// Rule 16's Mamba checks (validate_shapes_checker.h), for a pattern with M layers: the mixer's shapes the SSD scan,
// the causal conv1d and the gated RMSNorm are built for (kernels/shape_limits.h), its init ranges, and a note where
// its gated RMSNorm's epsilon is not Megatron's.
#include "config/validate_shapes_checker.h"
#include "core/strings.h"
#include "kernels/shape_limits.h"

namespace sg::config::detail {

namespace {
// MambaMixer's ExtendedRMSNorm(eps=1e-5): its gated norm's epsilon, not read from the config.
constexpr double kMegatronGatedNormEpsilon = 1e-5;
}  // namespace

void ShapeChecker::check_mamba() {
  const ModelConfig& m = c_.model;
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
    heads_text += strprintf(" (mamba_expand * hidden_size / mamba_head_dim = %lld * %lld / %lld)", ll(m.mamba_expand),
                            ll(m.hidden_size), ll(m.mamba_head_dim));
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
    const std::string problem =
        kernels::ssd_size_problem({.batch = mbs, .seqlen = m.seq_length, .nheads = heads, .headdim = m.mamba_head_dim});
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
    fail("mamba_dt_limit_max must exceed mamba_dt_limit_min", {"model.mamba_dt_limit_min", "model.mamba_dt_limit_max"},
         "raise model.mamba_dt_limit_max, or null for no upper limit");
  }
  positive_range("mamba_A_init_min", m.mamba_A_init_min, "mamba_A_init_max", m.mamba_A_init_max,
                 "Megatron's A_init_range: 1, 16");
  // The gated RMSNorm inside each mixer takes layernorm_epsilon, as transformers' NemotronH does (its gated norm
  // reads layer_norm_epsilon), so a saved checkpoint computes there what stepgraph trained. Megatron's MambaMixer
  // (and mamba_ssm's Mamba2) build that norm with eps 1e-5 whatever layernorm_epsilon is: the two agree at the
  // default only, and one config.json cannot say both, so the difference is said rather than removed.
  if (m.layernorm_epsilon != kMegatronGatedNormEpsilon) {
    note(strprintf("layernorm_epsilon %g is also the epsilon of the gated RMSNorm inside every Mamba mixer, as in "
                   "transformers' NemotronH; Megatron's MambaMixer keeps 1e-5 there whatever layernorm_epsilon is",
                   m.layernorm_epsilon),
         {"model.layernorm_epsilon"});
  }
}

// The gated RMSNorm's groups of d_inner / mamba_num_groups columns (heads divisible by the groups): their
// backward's shared memory (kernels/shape_limits.h). The fix names the fewest groups that fit.
void ShapeChecker::check_gated_norm_width(int64_t heads, const std::vector<std::string>& head_keys,
                                          const std::string& heads_text) {
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
                 "a larger divisor of the heads, or a smaller d_inner (model.mamba_expand, model.hidden_size or "
                 "model.mamba_num_heads)",
                 ll(groups), ll(inner / groups), ll(heads)));
}

}  // namespace sg::config::detail
