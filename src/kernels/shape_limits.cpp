#include "kernels/shape_limits.h"

#include "core/strings.h"

namespace sg::kernels {
namespace {
long long ll(int64_t v) { return static_cast<long long>(v); }
}  // namespace

std::string attention_head_dim_problem(int64_t head_dim) {
  if (head_dim > 0 && head_dim % kAttentionHeadDimMultiple == 0 && head_dim <= kAttentionMaxHeadDim) return {};
  return strprintf("cuDNN fused attention needs head_dim a multiple of %lld and at most %lld (bf16, sm_90), not %lld",
                   ll(kAttentionHeadDimMultiple), ll(kAttentionMaxHeadDim), ll(head_dim));
}

std::string attention_seq_len_problem(int64_t seq_len) {
  if (seq_len >= kAttentionMinSeqLen) return {};
  return strprintf("cuDNN's attention backward does not support seq_len %lld (s_q = s_kv < %lld)", ll(seq_len),
                   ll(kAttentionMinSeqLen));
}

std::string lm_head_hidden_problem(int64_t hidden_size) {
  if (hidden_size > 0 && hidden_size % kLmHeadHiddenMultiple == 0) return {};
  return strprintf("hidden_size %lld must be a multiple of %lld (16-byte rows for cuBLASLt)", ll(hidden_size),
                   ll(kLmHeadHiddenMultiple));
}

std::string rmsnorm_backward_width_problem(int64_t H, bool vector_path) {
  if (H > 0 && H <= rmsnorm_backward_max_width(vector_path)) return {};
  return strprintf("H = %lld is wider than the RMSNorm backward's row group (at most %lld columns with H %% 8 == 0 "
                   "and 16-byte aligned pointers, %lld otherwise)",
                   ll(H), ll(rmsnorm_backward_max_width(true)), ll(rmsnorm_backward_max_width(false)));
}

bool ssd_state_dim_supported(int64_t dstate) { return dstate == 16 || dstate == 32 || dstate == 64 || dstate == 128; }

std::string ssd_head_dim_problem(int64_t headdim) {
  if (headdim == kSsdHeadDim) return {};
  return strprintf("headdim %lld is not supported; the SSD kernels are built for mamba_head_dim %lld", ll(headdim),
                   ll(kSsdHeadDim));
}

std::string ssd_state_dim_problem(int64_t dstate) {
  if (ssd_state_dim_supported(dstate)) return {};
  return strprintf("dstate %lld is not supported; use mamba_state_dim 16, 32, 64 or 128", ll(dstate));
}

std::string ssd_size_problem(const SsdSizeLimitsInput& s) {
  // rows * nheads * headdim < 2^40, written so it cannot overflow for any headdim.
  constexpr int64_t kMaxElements = int64_t{1} << 40;
  const bool ok = s.batch < (1 << 16) && s.seqlen < (1 << 30) && s.nheads < (1 << 16) &&
                  (s.headdim <= 0 || s.batch * s.seqlen * s.nheads < (kMaxElements + s.headdim - 1) / s.headdim);
  if (ok) return {};
  return strprintf("shape too large (batch=%lld seqlen=%lld nheads=%lld; the scan needs batch < 65536, seqlen < 2^30, "
                   "nheads < 65536 and batch * seqlen * nheads * headdim < 2^40)",
                   ll(s.batch), ll(s.seqlen), ll(s.nheads));
}

std::string gated_rmsnorm_group_width_problem(int64_t group_width) {
  if (group_width > 0 && group_width <= kGatedRmsNormMaxGroupWidth) return {};
  return strprintf(
      "a group of %lld columns needs %lld bytes of shared memory in the backward, over the %lld a block "
      "may opt into on sm_90 (groups of at most %lld columns)",
      ll(group_width), ll(gated_rmsnorm_backward_smem_bytes(group_width)), ll(kMaxOptInSharedBytesPerBlock),
      ll(kGatedRmsNormMaxGroupWidth));
}

std::string grouped_gemm_dim_problem(int64_t size) {
  if (size >= kGroupedGemmDimMultiple && size <= INT32_MAX && size % kGroupedGemmDimMultiple == 0) return {};
  return strprintf("%lld is not a multiple of %lld in [%lld, 2^31): the TMA loads need 16-byte aligned rows and "
                   "segment starts",
                   ll(size), ll(kGroupedGemmDimMultiple), ll(kGroupedGemmDimMultiple));
}

std::string moe_loss_groups_problem(int64_t groups) {
  if (groups <= kMoeMaxLossGroups) return {};
  return strprintf("%lld load-balancing groups exceed the grid limit %lld", ll(groups), ll(kMoeMaxLossGroups));
}

}  // namespace sg::kernels
