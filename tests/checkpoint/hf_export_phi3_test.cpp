// What a save writes for a model whose RoPE rotates a share of each head (model.rotary_percent): Phi3Config
// (checkpoint/hf_config.h) with partial_rotary_factor (and LongRoPE's rope_scaling), and model.safetensors with Phi3's
// fused tensors (checkpoint/hf_fused_tensors.h's fuse_hf_tensors): q, k, v as one qkv_proj and gate, up as one
// gate_up_proj, written from the parameters in place. The folder such a run saves, read back, is the same model
// (tests/train/checkpoint_export_test.cpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint/hf_config.h"
#include "checkpoint/hf_fused_tensors.h"
#include "checkpoint/hf_import.h"
#include "checkpoint_test_util.h"
#include "model/layer_registry.h"
#include "model/stack.h"
#include "test_util.h"

namespace sg::checkpoint {
namespace {

// The tiny Llama (4 heads of 8) rotating 6 of each head's 8 dimensions.
model::ModelSpec partial_rotary_spec() {
  model::ModelSpec spec = test::tiny_llama_spec(false);
  spec.rotary_dim = 6;
  return spec;
}

TEST(HfExportPhi3, ConfigFields) {
  const model::ModelSpec spec = partial_rotary_spec();
  EXPECT_EQ(model::hf_architecture(spec), "Phi3ForCausalLM");
  const nlohmann::json c = hf_model_config(spec, "bfloat16");
  EXPECT_EQ(c["architectures"], nlohmann::json::array({"Phi3ForCausalLM"}));
  EXPECT_EQ(c["model_type"], "phi3");
  EXPECT_EQ(c["partial_rotary_factor"], 0.75);
  EXPECT_EQ(c["head_dim"], 8);
  EXPECT_EQ(c["num_key_value_heads"], 2);
  EXPECT_TRUE(c["pad_token_id"].is_null()) << "Phi3Config's default, 32000, is past this vocabulary";
  EXPECT_TRUE(c["sliding_window"].is_null());
  for (const char* llama_only : {"attention_bias", "mlp_bias", "pretraining_tp", "rope_scaling"}) {
    EXPECT_FALSE(c.contains(llama_only)) << llama_only;
  }
  std::string message = test::thrown_message([&] { hf_llama_config(spec, "bfloat16"); });
  EXPECT_NE(message.find("not a Llama model"), std::string::npos) << message;
  message = test::thrown_message([&] { hf_phi3_config(test::tiny_llama_spec(false), "bfloat16"); });
  EXPECT_NE(message.find("not a Phi-3 model (model.rotary_percent=1 and no LongRoPE lists)"), std::string::npos)
      << message;
  // A window of the source folder is Phi3Config's own key.
  nlohmann::json windowed = c;
  set_hf_mistral_sliding_window(windowed, 16);
  EXPECT_EQ(windowed["model_type"], "phi3");
  EXPECT_EQ(windowed["sliding_window"], 16);
}

// What Phi3 has not: each with the share of the head named, and no config.json written.
TEST(HfExportPhi3, WhatPhi3CannotExpressGetsNoConfig) {
  const auto why_none = [](const auto& change) {
    model::ModelSpec spec = partial_rotary_spec();
    change(spec);
    std::string why;
    EXPECT_EQ(model::hf_architecture(spec, &why), "");
    EXPECT_TRUE(hf_model_config(spec, "bfloat16").is_null());
    return why;
  };
  EXPECT_NE(why_none([](model::ModelSpec& s) { s.add_qkv_bias = true; })
                .find("Phi3ForCausalLM has no linear biases, and only it rotates a share of each head "
                      "(model.rotary_percent: 6 of 8)"),
            std::string::npos);
  EXPECT_NE(why_none([](model::ModelSpec& s) { s.qk_layernorm = true; }).find("no query and key norms"),
            std::string::npos);
  EXPECT_NE(why_none([](model::ModelSpec& s) { s.rope_scaling.factor = 8.0; }).find("no Llama 3 rope scaling"),
            std::string::npos);
  EXPECT_NE(why_none([](model::ModelSpec& s) {
              s.num_moe_experts = 4;
              s.moe_ffn_hidden_size = 16;
            }).find("Phi3ForCausalLM has no experts"),
            std::string::npos);
}

// LongRoPE (model.longrope_*), with the whole head or a share of it rotated: Phi3Config with rope_scaling {type
// longrope, both lists, attention_factor} and original_max_position_embeddings, which read back as the same lists,
// attention factor and list for every sequence length.
TEST(HfExportPhi3, LongRopeIsWrittenAndReadsBack) {
  test::ScratchDir dir("hf_export_phi3_longrope");
  for (const int64_t rotary_dim : {0, 6}) {
    SCOPED_TRACE(rotary_dim);
    model::ModelSpec spec = test::tiny_llama_spec(false);
    spec.rotary_dim = rotary_dim;
    const size_t pairs = rotary_dim == 0 ? 4 : 3;
    for (size_t i = 0; i < pairs; ++i) {
      spec.longrope.short_factor.push_back(1.0f + 0.05f * static_cast<float>(i));
      spec.longrope.long_factor.push_back(1.0f + 1.7f * static_cast<float>(i));
    }
    spec.longrope.original_max_position_embeddings = 24;
    spec.longrope.attention_factor = 1.1902380714238083;
    spec.rope_scaling = spec.longrope.scaling_for(spec.seq_length);
    ASSERT_EQ(model::hf_architecture(spec), "Phi3ForCausalLM");
    const nlohmann::json c = hf_model_config(spec, "bfloat16");
    EXPECT_EQ(c["model_type"], "phi3");
    EXPECT_EQ(c["original_max_position_embeddings"], 24);
    EXPECT_EQ(c["rope_scaling"]["type"], "longrope");
    EXPECT_EQ(c["rope_scaling"]["attention_factor"], 1.1902380714238083);
    EXPECT_EQ(c["rope_scaling"]["long_factor"].size(), pairs);
    const std::string folder = dir.str() + "/r" + std::to_string(rotary_dim);
    std::filesystem::create_directories(folder);
    std::ofstream(folder + "/config.json") << c.dump(2);
    const model::ModelSpec back = read_hf_config(folder).spec;
    EXPECT_EQ(back.rotary_dim, rotary_dim);
    EXPECT_EQ(back.longrope.short_factor, spec.longrope.short_factor);
    EXPECT_EQ(back.longrope.long_factor, spec.longrope.long_factor);
    EXPECT_EQ(back.longrope.original_max_position_embeddings, 24);
    EXPECT_EQ(back.longrope.attention_factor, spec.longrope.attention_factor);
    for (const int64_t length : {int64_t{24}, int64_t{25}}) {
      EXPECT_TRUE(back.longrope.scaling_for(length).same_as(spec.longrope.scaling_for(length))) << length;
    }
  }
}

// partial_rotary_factor is read back as int(head_dim x factor): the share written gives back every even count.
TEST(HfExportPhi3, TheShareWrittenGivesBackTheRotatedDimensions) {
  model::ModelSpec spec = test::tiny_llama_spec(false);
  for (const int64_t head_dim : {8, 64, 80, 96, 128, 200, 256}) {
    spec.kv_channels = head_dim;
    for (int64_t rotated = 2; rotated <= head_dim; rotated += 2) {
      spec.rotary_dim = rotated;
      const double share = spec.rotary_share();
      EXPECT_EQ(static_cast<int64_t>(static_cast<double>(head_dim) * share), rotated) << head_dim << " " << share;
      EXPECT_LE(share, 1.0);
    }
  }
}

// The model's tensors with data in one buffer, as a save makes them: each layer's q, k, v and gate, up become one
// tensor each, rows stacked, pointing at q's and gate's data; the others are unchanged.
TEST(HfExportPhi3, FusedTensorsAreThePartsInPlace) {
  const model::ModelLayout layout = model::model_layout(partial_rotary_spec());
  std::vector<uint16_t> buffer(static_cast<size_t>(layout.total()));
  std::vector<TensorRef> refs;
  for (const auto& t : layout.tensors()) {
    refs.push_back({.name = t.name, .dtype = TensorDtype::BF16, .shape = t.shape, .data = buffer.data() + t.offset});
  }
  const std::vector<TensorRef> fused = fuse_hf_tensors("phi3", refs, 2);
  const auto find = [&](const std::vector<TensorRef>& list, const std::string& name) -> const TensorRef* {
    for (const TensorRef& r : list) {
      if (r.name == name) return &r;
    }
    return nullptr;
  };
  const std::string p = "model.layers.1.";
  const TensorRef* qkv = find(fused, p + "self_attn.qkv_proj.weight");
  ASSERT_NE(qkv, nullptr);
  EXPECT_EQ(qkv->shape, (std::vector<int64_t>{32 + 16 + 16, 32}));
  EXPECT_EQ(qkv->data, find(refs, p + "self_attn.q_proj.weight")->data);
  const TensorRef* gate_up = find(fused, p + "mlp.gate_up_proj.weight");
  ASSERT_NE(gate_up, nullptr);
  EXPECT_EQ(gate_up->shape, (std::vector<int64_t>{128, 32}));
  EXPECT_EQ(find(fused, p + "self_attn.q_proj.weight"), nullptr);
  EXPECT_EQ(find(fused, p + "mlp.up_proj.weight"), nullptr);
  EXPECT_NE(find(fused, p + "self_attn.o_proj.weight"), nullptr);
  EXPECT_EQ(fused.size(), refs.size() - 2 * 3);                      // per layer: 3 parts into 1, 2 into 1
  EXPECT_EQ(fuse_hf_tensors("llama", refs, 2).size(), refs.size());  // no fused tensors

  // Parts out of order, or not adjacent, are an internal error naming them.
  std::vector<TensorRef> swapped = refs;
  for (size_t i = 0; i + 1 < swapped.size(); ++i) {
    if (swapped[i].name == p + "self_attn.q_proj.weight") std::swap(swapped[i + 1], swapped[i + 2]);
  }
  std::string message = test::thrown_message([&] { fuse_hf_tensors("phi3", swapped, 2); });
  EXPECT_NE(message.find("model.layers.1.self_attn.k_proj.weight does not follow"), std::string::npos) << message;
  std::vector<TensorRef> apart = refs;
  for (TensorRef& r : apart) {
    if (r.name == p + "mlp.up_proj.weight") r.data = buffer.data();
  }
  message = test::thrown_message([&] { fuse_hf_tensors("phi3", apart, 2); });
  EXPECT_NE(message.find("mlp.up_proj.weight does not follow"), std::string::npos) << message;
}

}  // namespace
}  // namespace sg::checkpoint
