// read_hf_config and the weights of Phi-3 folders (model_type "phi3", Phi3ForCausalLM): Llama's blocks with q, k and v
// in one self_attn.qkv_proj and gate and up in one mlp.gate_up_proj (checkpoint/hf_fused_tensors.h), read in place as
// the model's own tensors, element for element, from one file or shards; Phi3Config's defaults for absent keys (no
// sliding window, rms_norm_eps 1e-5, 4096 positions); a partial rotary factor as the share of each head RoPE rotates;
// a fused tensor that is not its parts stacked refused by name; LongRoPE's factor lists, original context and
// attention factor, in every spelling transformers reads, and the lists that do not fit refused by key.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "checkpoint/hf_import.h"
#include "checkpoint/safetensors.h"
#include "hf_test_folders.h"
#include "model/layer_registry.h"
#include "model/stack.h"
#include "test_util.h"

namespace sg::checkpoint {
namespace {

using test::make_hf_llama_folder;

TEST(HfImportPhi3, FusedTensorsLoadAsTheModelsOwn) {
  test::ScratchDir dir("hf_import_phi3");
  for (const char* layout_flags : {"--dtype bf16", "--dtype fp32 --shards 3"}) {
    SCOPED_TRACE(layout_flags);
    const std::string folder = make_hf_llama_folder(dir.str() + "/phi3_" + std::to_string(std::strlen(layout_flags)),
                                                    std::string(layout_flags) + " --phi3 128");
    const HfModelConfig config = read_hf_config(folder);
    EXPECT_EQ(config.architecture, "Phi3ForCausalLM");
    EXPECT_EQ(config.sliding_window, 128);
    EXPECT_EQ(config.spec.num_query_groups, 2);
    EXPECT_FALSE(config.spec.add_qkv_bias || config.spec.add_bias_linear || config.spec.qk_layernorm);
    test::expect_loaded_weights_equal_expected(folder, model::model_layout(config.spec));
  }
  const HfModelConfig open = read_hf_config(make_hf_llama_folder(dir.str() + "/absent_window", "--phi3 -1"));
  EXPECT_FALSE(open.sliding_window.has_value());  // Phi3Config's default: none
}

// A folder with one config.json edit, copied from a Phi-3 folder of head_dim 8.
class HfImportPhi3Edited : public ::testing::Test {
 protected:
  test::ScratchDir dir{"hf_import_phi3_edited"};
  std::string folder = make_hf_llama_folder(dir.str() + "/phi3", "--dtype bf16 --phi3 0");
  template <class Edit>
  std::string edited(const std::string& name, const Edit& edit) {
    const std::string copy = dir.str() + "/" + name;
    std::filesystem::copy(folder, copy);
    nlohmann::json config = nlohmann::json::parse(std::ifstream(copy + "/config.json"));
    edit(config);
    std::ofstream(copy + "/config.json") << config.dump(2);
    return copy;
  }
};

// Phi3's partial_rotary_factor (Phi-4-mini's 0.75), at the top level or in transformers 5's rope_parameters: RoPE
// rotates int(head_dim x factor) dimensions of each head (model.rotary_percent), which must be even.
TEST_F(HfImportPhi3Edited, APartialRotaryFactorRotatesThatShareOfEachHead) {
  const auto rotary_dim = [&](const std::string& name, const auto& edit) {
    return read_hf_config(edited(name, edit)).spec.rotary_dim;
  };
  EXPECT_EQ(read_hf_config(folder).spec.rotary_dim, 0);
  EXPECT_EQ(rotary_dim("top", [](nlohmann::json& c) { c["partial_rotary_factor"] = 0.75; }), 6);  // of 8
  EXPECT_EQ(rotary_dim("whole", [](nlohmann::json& c) { c["partial_rotary_factor"] = 1.0; }), 0);
  EXPECT_EQ(
      rotary_dim(
          "v5",
          [](nlohmann::json& c) {
            c.erase("partial_rotary_factor");
            c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 0.5}};
          }),
      4);
  EXPECT_EQ(
      rotary_dim(
          "both",
          [](nlohmann::json& c) {
            c["partial_rotary_factor"] = 0.3;  // int(2.4) = 2
            c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 0.3}};
          }),
      2);
  // Its checkpoints load as Phi-3 too (tests/checkpoint/hf_export_phi3_test.cpp).
  EXPECT_EQ(model::hf_architecture(read_hf_config(dir.str() + "/top").spec), "Phi3ForCausalLM");

  std::string error = test::thrown_message(
      [&] { read_hf_config(edited("odd", [](nlohmann::json& c) { c["partial_rotary_factor"] = 0.2; })); });
  EXPECT_NE(error.find("partial_rotary_factor = 0.2 rotates int(head_dim 8 x 0.2) = 1 dimensions"), std::string::npos)
      << error;
  error = test::thrown_message(
      [&] { read_hf_config(edited("over", [](nlohmann::json& c) { c["partial_rotary_factor"] = 1.5; })); });
  EXPECT_NE(error.find("it must be in (0, 1]"), std::string::npos) << error;
  error = test::thrown_message([&] {
    read_hf_config(edited("disagree", [](nlohmann::json& c) {
      c["partial_rotary_factor"] = 0.75;
      c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 0.5}};
    }));
  });
  EXPECT_NE(error.find("rope_parameters.partial_rotary_factor = 0.5: partial_rotary_factor says 0.75"),
            std::string::npos)
      << error;
}

// Phi-3.5's LongRoPE (rope_scaling {type: longrope, short_factor, long_factor}) as transformers reads it: one factor
// per rotated pair each, Phi3Config's top-level original_max_position_embeddings choosing between them, and the
// attention factor sqrt(1 + ln(max / original) / ln(original)); the spec holds the scaling for max_position_embeddings.
TEST(HfImportPhi3, ALongRopeFolderHasBothFactorListsAndItsAttentionFactor) {
  test::ScratchDir dir("hf_import_phi3_longrope");
  // head_dim 8 (4 pairs), max_position_embeddings 256, original 64: factor 4.
  const HfModelConfig config =
      read_hf_config(make_hf_llama_folder(dir.str() + "/whole", "--phi3 -1 --longrope --original-max-pos 64"));
  ASSERT_TRUE(config.spec.longrope.enabled());
  const model::LongRope& r = config.spec.longrope;
  EXPECT_EQ(r.short_factor, (std::vector<float>{1.0f, 1.05f, 1.1f, 1.15f}));
  EXPECT_EQ(r.long_factor, (std::vector<float>{1.0f, 2.5f, 4.0f, 5.5f}));
  EXPECT_EQ(r.original_max_position_embeddings, 64);
  EXPECT_DOUBLE_EQ(r.attention_factor, std::sqrt(1.0 + std::log(4.0) / std::log(64.0)));
  const ref::RopeScaling short_scaling = r.scaling_for(64), long_scaling = r.scaling_for(65);
  EXPECT_EQ(short_scaling.longrope_pairs, 4);
  EXPECT_EQ(short_scaling.longrope_factors[3], 1.15f);
  EXPECT_EQ(long_scaling.longrope_factors[3], 5.5f);
  EXPECT_EQ(long_scaling.attention_factor, r.attention_factor);
  EXPECT_TRUE(config.spec.rope_scaling.same_as(long_scaling)) << "the spec's length is max_position_embeddings, 256";
  EXPECT_FALSE(config.spec.rope_scaling.llama3());
  EXPECT_EQ(model::hf_architecture(config.spec), "Phi3ForCausalLM");  // its saves are Phi-3 folders with it
  // With partial rotary the lists are the rotated pairs': Phi-4-mini's 0.75 of 8 is 6 dimensions, 3 pairs.
  const HfModelConfig partial = read_hf_config(
      make_hf_llama_folder(dir.str() + "/partial", "--phi3 -1 --partial-rotary 0.75 --longrope --original-max-pos 32"));
  EXPECT_EQ(partial.spec.rotary_dim, 6);
  EXPECT_EQ(partial.spec.longrope.long_factor.size(), 3u);
  EXPECT_EQ(partial.spec.rope_scaling.longrope_pairs, 3);
  EXPECT_DOUBLE_EQ(partial.spec.longrope.attention_factor, std::sqrt(1.0 + std::log(8.0) / std::log(32.0)));
}

TEST_F(HfImportPhi3Edited, LongRopeSpellingsDefaultsAndRefusals) {
  const nlohmann::json short_factor = {1.0, 1.0, 1.25, 1.5}, long_factor = {1.0, 2.0, 3.0, 4.0};
  const auto longrope = [&](nlohmann::json& c, nlohmann::json scaling) {
    scaling["short_factor"] = short_factor;
    scaling["long_factor"] = long_factor;
    c["rope_scaling"] = scaling;
    c["max_position_embeddings"] = 1024;
    c["original_max_position_embeddings"] = 128;
  };
  // Phi3Config's legacy type names, transformers 5's rope_parameters, an explicit attention_factor or factor.
  const auto read = [&](const std::string& name, const auto& edit) { return read_hf_config(edited(name, edit)); };
  const double default_factor = std::sqrt(1.0 + std::log(8.0) / std::log(128.0));
  EXPECT_DOUBLE_EQ(read("su",
                        [&](nlohmann::json& c) {
                          longrope(c, {{"type", "su"}});
                        })
                       .spec.longrope.attention_factor,
                   default_factor);
  const HfModelConfig v5 = read("v5", [&](nlohmann::json& c) {
    longrope(c, {});
    c.erase("rope_scaling");
    c["rope_parameters"] = {
        {"rope_type", "longrope"}, {"rope_theta", 500.0}, {"short_factor", short_factor}, {"long_factor", long_factor}};
  });
  EXPECT_EQ(v5.spec.rotary_base, 500.0);
  EXPECT_EQ(v5.spec.longrope.long_factor[3], 4.0f);
  EXPECT_EQ(v5.spec.longrope.original_max_position_embeddings, 128);
  EXPECT_EQ(read("af",
                 [&](nlohmann::json& c) {
                   longrope(c, {{"type", "longrope"}, {"attention_factor", 1.5}});
                 })
                .spec.longrope.attention_factor,
            1.5);
  EXPECT_DOUBLE_EQ(read("factor",
                        [&](nlohmann::json& c) {
                          longrope(c, {{"type", "longrope"}, {"factor", 2.0}});
                        })
                       .spec.longrope.attention_factor,
                   std::sqrt(1.0 + std::log(2.0) / std::log(128.0)));
  EXPECT_EQ(read("one",
                 [&](nlohmann::json& c) {
                   longrope(c, {{"type", "longrope"}});
                   c["max_position_embeddings"] = 128;  // factor 1: no attention scaling
                 })
                .spec.longrope.attention_factor,
            1.0);
  const auto refused = [&](const std::string& name, const auto& edit) {
    return test::thrown_message([&] { read_hf_config(edited(name, edit)); });
  };
  std::string error = refused("short", [&](nlohmann::json& c) {
    longrope(c, {{"type", "longrope"}});
    c["rope_scaling"]["short_factor"] = {1.0, 1.0, 1.0};
  });
  EXPECT_NE(error.find("rope_scaling.short_factor = a list of 3: expected a list of 4 numbers, one per pair of the 8 "
                       "dimensions RoPE rotates"),
            std::string::npos)
      << error;
  error = refused("zero", [&](nlohmann::json& c) {
    longrope(c, {{"type", "longrope"}});
    c["rope_scaling"]["long_factor"][2] = 0.0;
  });
  EXPECT_NE(error.find("rope_scaling.long_factor[2] = 0.0: each factor must be a positive finite number"),
            std::string::npos)
      << error;
  error = refused("missing", [&](nlohmann::json& c) {
    longrope(c, {{"type", "longrope"}});
    c["rope_scaling"].erase("long_factor");
  });
  EXPECT_NE(error.find("rope_scaling.long_factor is missing"), std::string::npos) << error;
  error = refused("negative_af", [&](nlohmann::json& c) {
    longrope(c, {{"type", "longrope"}, {"attention_factor", -1}});
  });
  EXPECT_NE(error.find("rope_scaling.attention_factor = -1: must be positive"), std::string::npos) << error;
  // Only Phi3Config reads "su" as longrope; a Llama folder's is refused naming the types there are.
  error = refused("llama_su", [&](nlohmann::json& c) {
    longrope(c, {{"type", "su"}});
    c["model_type"] = "llama";
  });
  EXPECT_NE(error.find("rope_scaling.type = \"su\": stepgraph implements the default, llama3 and longrope RoPE"),
            std::string::npos)
      << error;
}

// A Llama folder's LongRoPE: original_max_position_embeddings from the object, else max_position_embeddings (no factor
// past it: no attention scaling).
TEST_F(HfImportPhi3Edited, ALlamaFoldersLongRopeTakesItsOriginalContextFromTheObject) {
  const auto llama = [&](const std::string& name, bool with_original) {
    return read_hf_config(edited(name, [&](nlohmann::json& c) {
      c["model_type"] = "llama";
      c.erase("original_max_position_embeddings");
      c["max_position_embeddings"] = 512;
      c["rope_scaling"] = {
          {"rope_type", "longrope"}, {"short_factor", {1.0, 1.0, 1.0, 1.0}}, {"long_factor", {1.0, 2.0, 3.0, 4.0}}};
      if (with_original) c["rope_scaling"]["original_max_position_embeddings"] = 64;
    }));
  };
  const HfModelConfig with = llama("with", true), without = llama("without", false);
  EXPECT_EQ(with.architecture, "LlamaForCausalLM");
  EXPECT_EQ(with.spec.longrope.original_max_position_embeddings, 64);
  EXPECT_DOUBLE_EQ(with.spec.longrope.attention_factor, std::sqrt(1.0 + std::log(8.0) / std::log(64.0)));
  EXPECT_EQ(without.spec.longrope.original_max_position_embeddings, 512);
  EXPECT_EQ(without.spec.longrope.attention_factor, 1.0);
  EXPECT_EQ(without.spec.rope_scaling.longrope_factors[3], 1.0f) << "512 positions are not past 512: the short ones";
}

TEST_F(HfImportPhi3Edited, AFusedTensorOfAnotherShapeIsRefused) {
  // 4 key/value heads where the files hold 2: qkv_proj is not the model's q, k and v stacked.
  const std::string heads = edited("heads", [](nlohmann::json& c) { c["num_key_value_heads"] = 4; });
  const HfModelConfig config = read_hf_config(heads);
  std::vector<float> weights;
  const std::string error = test::thrown_message(
      [&] { load_hf_weights(heads, model::model_layout(config.spec), weights, WeightSource::model, "test"); });
  EXPECT_NE(error.find("different  model.layers.0.self_attn.qkv_proj.weight: checkpoint [64, 32], expected [96, 32] "
                       "(its parts stacked)"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("missing    model.layers.0.self_attn.q_proj.weight"), std::string::npos) << error;
}

}  // namespace
}  // namespace sg::checkpoint
