#include "model/decoder.h"

#include <algorithm>

#include "core/error.h"
#include "core/strings.h"
#include "kernels/decode_attention.h"
#include "kernels/mamba_decode.h"
#include "kernels/shape_limits.h"

namespace sg::model {

void check_decode_request(const ModelSpec& model, const DecodeSpec& decode,
                          const std::vector<std::vector<int32_t>>& prompts) {
  ref::check_sampling_config(decode.sampling);
  SG_REQUIRE(decode.batch > 0, "generate: at least one prompt is needed");
  SG_REQUIRE(decode.max_new_tokens > 0,
             strprintf("--max-new-tokens %lld: must be positive", static_cast<long long>(decode.max_new_tokens)));
  SG_CHECK(static_cast<int64_t>(prompts.size()) == decode.batch,
           strprintf("generate: %zu prompts for a decoder planned for %lld", prompts.size(),
                     static_cast<long long>(decode.batch)));
  for (size_t b = 0; b < prompts.size(); ++b) {
    const auto& p = prompts[b];
    SG_REQUIRE(!p.empty(), strprintf("generate: prompt %zu encodes to no tokens; give some text", b + 1));
    SG_REQUIRE(static_cast<int64_t>(p.size()) <= decode.max_prompt_tokens,
               strprintf("generate: prompt %zu has %zu tokens, more than the %lld planned", b + 1, p.size(),
                         static_cast<long long>(decode.max_prompt_tokens)));
    for (size_t i = 0; i < p.size(); ++i) {
      SG_REQUIRE(p[i] >= 0 && p[i] < model.vocab_size,
                 strprintf("generate: prompt %zu token %zu is id %d, outside the model's vocabulary [0, %lld): a "
                           "tokenizer of another model, or a wrong id",
                           b + 1, i + 1, p[i], static_cast<long long>(model.vocab_size)));
    }
  }
  SG_CHECK(decode.sample_vocab >= 0 && decode.sample_vocab <= model.vocab_size,
           strprintf("generate: sample_vocab %lld outside [0, %lld]", static_cast<long long>(decode.sample_vocab),
                     static_cast<long long>(model.vocab_size)));
  SG_REQUIRE(decode.capacity() <= INT32_MAX, "generate: prompt + --max-new-tokens exceeds 2^31 positions");
}

std::string gpu_decoder_refusal(const ModelSpec& m) {
  // Every layer kind has a GPU decoding twin; what is left are the shapes its kernels take.
  const auto ll = [](int64_t v) { return static_cast<long long>(v); };
  if (m.hidden_size % 8 != 0) {
    return strprintf("the GPU decoder needs hidden_size to be a multiple of 8 (16-byte rows); this model's is %lld",
                     ll(m.hidden_size));
  }
  const std::vector<LayerKind> kinds = stack_layer_kinds(m);
  const auto has = [&](LayerKind k) { return std::find(kinds.begin(), kinds.end(), k) != kinds.end(); };
  if (has(LayerKind::attention) && m.head_dim() > kernels::kDecodeAttentionMaxHeadDim) {
    return strprintf("the GPU decoder's attention takes head_dim up to %lld; this model's is %lld",
                     ll(kernels::kDecodeAttentionMaxHeadDim), ll(m.head_dim()));
  }
  if (has(LayerKind::moe)) {
    // The experts' grouped GEMMs and the shared expert's GEMMs: 16-byte rows.
    const std::pair<const char*, int64_t> widths[] = {{"moe_ffn_hidden_size", m.moe_ffn_hidden_size},
                                                      {"shared expert width", m.moe.shared_expert_intermediate_size}};
    for (const auto& [name, width] : widths) {
      const std::string problem = width > 0 ? kernels::grouped_gemm_dim_problem(width) : "";
      if (!problem.empty()) return strprintf("the GPU decoder's MoE layers refuse the %s: ", name) + problem;
    }
  }
  if (has(LayerKind::mamba)) {
    const MambaSpec& s = m.mamba;
    const int64_t heads = m.mamba_heads(), inner = m.mamba_inner(), in_proj = m.mamba_in_proj_dim();
    if (s.head_dim > kernels::kSsdDecodeMaxHeadDim || !kernels::ssd_state_dim_problem(s.state_dim).empty()) {
      return strprintf(
          "the GPU decoder's Mamba scan takes mamba_head_dim up to %lld and mamba_state_dim 16, 32, 64 "
          "or 128; this model's are %lld and %lld",
          ll(kernels::kSsdDecodeMaxHeadDim), ll(s.head_dim), ll(s.state_dim));
    }
    if (in_proj % 8 != 0) {
      return strprintf(
          "the GPU decoder's Mamba in_proj needs a width (2 x %lld + 2 x %lld groups x %lld + %lld heads "
          "= %lld) that is a multiple of 8 (16-byte rows)",
          ll(inner), ll(s.num_groups), ll(s.state_dim), ll(heads), ll(in_proj));
    }
  }
  return "";
}

}  // namespace sg::model
