#include "model/decoder.h"

#include <utility>

#include "core/error.h"
#include "core/strings.h"
#include "model/layers/attention_layer.h"
#include "model/layers/mlp_layer.h"

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

std::string gpu_decoder_refusal(const ModelSpec& m) {
  std::string why_not;
  const std::string architecture = hf_architecture(m, &why_not);
  if (architecture != "LlamaForCausalLM") {
    return "the GPU decoder runs Llama models (GPT blocks of attention and dense SwiGLU MLP) only: " +
           (why_not.empty() ? "this model is " + architecture + " (" + describe_stack(m) + ")" : why_not);
  }
  if (m.q_dim() != m.hidden_size) {
    return strprintf("the GPU decoder needs num_attention_heads x head_dim = hidden_size (model.kv_channels "
                     "unset); this model's is %lld x %lld for hidden_size %lld",
                     static_cast<long long>(m.num_attention_heads), static_cast<long long>(m.head_dim()),
                     static_cast<long long>(m.hidden_size));
  }
  return "";
}

DecoderOffsets decoder_offsets(const ModelSpec& m, const ModelLayout& layout) {
  const std::string refusal = gpu_decoder_refusal(m);
  SG_REQUIRE(refusal.empty(), "generate: " + refusal);
  // The blocks the kinds declare (q|k|v and gate|up are one block each: one weight per decoder GEMM),
  // declared again to hold their references; the layout given must be this model's.
  struct BlockDeclarations {  // one GPT block's two layers
    AttentionDeclarations attention;
    MlpDeclarations mlp;
    int attention_layer = 0, mlp_layer = 0;  // their places in the stack: their pre-norms
  };
  std::vector<BlockDeclarations> blocks(static_cast<size_t>(m.num_layers));
  const ModelLayout declared = declare_model(m, [&](size_t, LayerDeclarations& d) {
    BlockDeclarations& block = blocks[static_cast<size_t>(d.place.hf_layer)];
    if (d.place.kind == LayerKind::attention) {
      block.attention.declare(d);
      block.attention_layer = d.place.index;
    } else {
      block.mlp.declare(d);
      block.mlp_layer = d.place.index;
    }
  });
  SG_CHECK(declared.total() == layout.total() && declared.tensors().size() == layout.tensors().size(),
           "decoder_offsets: the parameter layout given is not this model's");
  std::vector<DecoderLayerOffsets> layers;
  for (const BlockDeclarations& block : blocks) {
    layers.push_back({.qkv = layout.offset(block.attention.qkv),
                      .o_proj = layout.offset(block.attention.o_proj),
                      .gate_up = layout.offset(block.mlp.gate_up),
                      .down_proj = layout.offset(block.mlp.down_proj),
                      .input_norm = layout.offset(layout.norm_before(block.attention_layer)),
                      .post_norm = layout.offset(layout.norm_before(block.mlp_layer))});
  }
  return {.embedding = layout.offset(layout.embedding),
          .lm_head = layout.offset(layout.lm_head),
          .final_norm = layout.offset(layout.final_norm),
          .layers = std::move(layers)};
}

}  // namespace sg::model
