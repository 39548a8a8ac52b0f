// The decoders' flat-buffer offsets (model/decoder.h) come from the blocks the layer kinds declare and the
// step's own: they name the Hugging Face tensors of a Llama checkpoint (checked here by name, the one place
// outside the kinds that spells them), for untied and tied embeddings and GQA; and a layout of another
// model is refused.
#include "model/decoder.h"

#include <gtest/gtest.h>

#include <string>

#include "core/strings.h"
#include "model/layer_registry.h"
#include "test_util.h"
#include "tiny_model.h"

namespace sg::model {
namespace {

TEST(DecoderOffsets, AreTheLlamaTensorsOfTheLayout) {
  for (const bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    ModelSpec m = test::tiny_model_spec();  // GQA: 4 heads in 2 groups
    m.num_layers = 3;
    m.share_embeddings_and_output_weights = tied;
    const ModelLayout layout = model_layout(m);
    const auto at = [&](const std::string& name) { return layout.find(name).offset; };
    const DecoderOffsets o = decoder_offsets(m, layout);
    EXPECT_EQ(o.embedding, at("model.embed_tokens.weight"));
    EXPECT_EQ(o.lm_head, tied ? o.embedding : at("lm_head.weight"));
    EXPECT_EQ(o.final_norm, at("model.norm.weight"));
    ASSERT_EQ(o.layers.size(), 3u);
    for (size_t l = 0; l < o.layers.size(); ++l) {
      const std::string p = strprintf("model.layers.%zu.", l);
      const DecoderLayerOffsets& d = o.layers[l];
      EXPECT_EQ(d.qkv, at(p + "self_attn.q_proj.weight"));
      // q|k|v and gate|up are one block each: what the decoder reads as one weight.
      EXPECT_EQ(at(p + "self_attn.k_proj.weight"), d.qkv + m.q_dim() * m.hidden_size);
      EXPECT_EQ(at(p + "self_attn.v_proj.weight"), d.qkv + (m.q_dim() + m.kv_dim()) * m.hidden_size);
      EXPECT_EQ(d.o_proj, at(p + "self_attn.o_proj.weight"));
      EXPECT_EQ(d.gate_up, at(p + "mlp.gate_proj.weight"));
      EXPECT_EQ(at(p + "mlp.up_proj.weight"), d.gate_up + m.ffn_hidden_size * m.hidden_size);
      EXPECT_EQ(d.down_proj, at(p + "mlp.down_proj.weight"));
      EXPECT_EQ(d.input_norm, at(p + "input_layernorm.weight"));
      EXPECT_EQ(d.post_norm, at(p + "post_attention_layernorm.weight"));
    }
  }
}

TEST(DecoderOffsets, RefuseALayoutOfAnotherModel) {
  ModelSpec m = test::tiny_model_spec();
  ModelSpec deeper = m;
  deeper.num_layers = m.num_layers + 1;
  EXPECT_NE(test::thrown_message([&] { decoder_offsets(m, model_layout(deeper)); }).find("not this model's"),
            std::string::npos);
}

}  // namespace
}  // namespace sg::model
