#include "model/decoder.h"

#include "core/error.h"
#include "core/strings.h"

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
                 strprintf("generate: prompt %zu token %zu is id %d, outside the model's vocabulary [0, %lld): the "
                           "tokenizer does not belong to this checkpoint",
                           b + 1, i + 1, p[i], static_cast<long long>(model.vocab_size)));
    }
  }
  SG_CHECK(decode.sample_vocab >= 0 && decode.sample_vocab <= model.vocab_size,
           strprintf("generate: sample_vocab %lld outside [0, %lld]", static_cast<long long>(decode.sample_vocab),
                     static_cast<long long>(model.vocab_size)));
  SG_REQUIRE(decode.capacity() <= INT32_MAX, "generate: prompt + --max-new-tokens exceeds 2^31 positions");
}

DecoderOffsets decoder_offsets(const ModelSpec& m, const ModelLayout& layout) {
  std::string why_not;
  const std::string architecture = hf_architecture(m, &why_not);
  SG_REQUIRE(architecture == "LlamaForCausalLM",
             "generate: the decoders run GPT blocks of attention and dense MLP (Llama) only: " +
                 (why_not.empty() ? "this model is " + architecture + " (" + describe_stack(m) + ")" : why_not));
  SG_REQUIRE(m.q_dim() == m.hidden_size,
             "generate: the decoders need num_attention_heads x head_dim = hidden_size (model.kv_channels unset)");
  const int64_t H = m.hidden_size, KV = m.kv_dim(), F = m.ffn_hidden_size;
  auto at = [&](const std::string& name) { return layout.find(name).offset; };
  // The fused blocks the GEMMs read as one weight must be contiguous in the flat buffer.
  auto follows = [&](const std::string& first, int64_t first_numel, const std::string& second) {
    SG_CHECK(at(first) + first_numel == at(second),
             strprintf("parameter layout: %s does not directly follow %s; the decoder reads them as one block",
                       second.c_str(), first.c_str()));
  };
  DecoderOffsets o;
  o.embedding = at("model.embed_tokens.weight");
  o.lm_head = m.share_embeddings_and_output_weights ? o.embedding : at("lm_head.weight");
  o.final_norm = at("model.norm.weight");
  for (int64_t l = 0; l < m.num_layers; ++l) {
    const std::string p = strprintf("model.layers.%lld.", static_cast<long long>(l));
    follows(p + "self_attn.q_proj.weight", H * H, p + "self_attn.k_proj.weight");
    follows(p + "self_attn.k_proj.weight", KV * H, p + "self_attn.v_proj.weight");
    follows(p + "mlp.gate_proj.weight", F * H, p + "mlp.up_proj.weight");
    DecoderLayerOffsets d;
    d.qkv = at(p + "self_attn.q_proj.weight");
    d.o_proj = at(p + "self_attn.o_proj.weight");
    d.gate_up = at(p + "mlp.gate_proj.weight");
    d.down_proj = at(p + "mlp.down_proj.weight");
    d.input_norm = at(p + "input_layernorm.weight");
    d.post_norm = at(p + "post_attention_layernorm.weight");
    o.layers.push_back(d);
  }
  return o;
}

}  // namespace sg::model
