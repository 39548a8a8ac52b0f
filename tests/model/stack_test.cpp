// The stack of layers (model/stack.h): Megatron's pattern letters, the GPT and hybrid layouts with
// their Hugging Face names, the dropout sites handed out in stack order, the regions the scope planner
// derives from the layers, and the registry that refuses kinds not built yet.
#include "model/stack.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "graph/scope_plan.h"
#include "model/layer_registry.h"
#include "test_util.h"
#include "tiny_model.h"

namespace sg::model {
namespace {

using graph::Module;
using test::thrown_message;

ModelSpec hybrid_spec(const std::string& pattern) {
  ModelSpec s = test::tiny_model_spec();
  s.hybrid_layer_pattern = pattern;
  s.num_layers = static_cast<int64_t>(pattern.size());
  return s;
}

TEST(LayerPattern, ParsesEveryLetterAndNamesTheBadOne) {
  EXPECT_EQ(parse_layer_pattern("M*-E"),
            (std::vector<LayerKind>{LayerKind::mamba, LayerKind::attention, LayerKind::mlp, LayerKind::moe}));
  EXPECT_EQ(layer_pattern_string(parse_layer_pattern("*-M-")), "*-M-");
  std::string msg = thrown_message([] { parse_layer_pattern("M*x-"); });
  EXPECT_NE(msg.find("model.hybrid_override_pattern = M*x-: character 3 'x'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("* (attention)"), std::string::npos) << msg;  // the valid letters
  msg = thrown_message([] { parse_layer_pattern("", "model.hybrid_layer_pattern"); });
  EXPECT_NE(msg.find("model.hybrid_layer_pattern is empty"), std::string::npos) << msg;
  EXPECT_NE(thrown_message([] { parse_layer_pattern("*- "); }).find("character 3 ' '"), std::string::npos);
}

// Megatron's '|' (pipeline stages) and '/' (its MTP layers after the main pattern) are named for what they are, with
// the pattern that remains without them.
TEST(LayerPattern, MegatronsSeparatorsSayWhatTheyAreAndThePatternWithoutThem) {
  std::string msg = thrown_message([] { parse_layer_pattern("M*-|M*-"); });
  EXPECT_NE(msg.find("model.hybrid_override_pattern = M*-|M*-: '|' (character 4) is Megatron's pipeline-stage "
                     "separator and stepgraph trains on one pipeline stage: remove the '|' characters"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("write model.hybrid_override_pattern = M*-M*-"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("not a layer kind"), std::string::npos) << msg;

  msg = thrown_message([] { parse_layer_pattern("M*-M*-/*-/*-", "model.hybrid_layer_pattern"); });
  EXPECT_NE(msg.find("model.hybrid_layer_pattern = M*-M*-/*-/*-: the part after '/' (character 7), \"*-/*-\", is "
                     "Megatron's multi-token-prediction (MTP) layers, which stepgraph does not implement: remove '/' "
                     "and what follows"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("write model.hybrid_layer_pattern = M*-M*-"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("pipeline"), std::string::npos) << msg;

  // Both: each is said, and the pattern shown has neither.
  msg = thrown_message([] { parse_layer_pattern("M*|M*/M"); });
  EXPECT_NE(msg.find("remove the '|' characters; the part after '/'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("write model.hybrid_override_pattern = M*M*"), std::string::npos) << msg;
  // Nothing before the '/': no pattern to suggest.
  msg = thrown_message([] { parse_layer_pattern("/M"); });
  EXPECT_NE(msg.find("(MTP) layers"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("write"), std::string::npos) << msg;
}

TEST(LayerPattern, CompactFormFindsTheRepeatingUnit) {
  EXPECT_EQ(compact_layer_pattern(parse_layer_pattern("*-*-*-*-")), "(*-)x4");
  EXPECT_EQ(compact_layer_pattern(parse_layer_pattern("M*-M*-")), "(M*-)x2");
  EXPECT_EQ(compact_layer_pattern(parse_layer_pattern("M*-E")), "M*-E");
  EXPECT_EQ(compact_layer_pattern(parse_layer_pattern("MMM")), "(M)x3");
  EXPECT_EQ(compact_layer_pattern(parse_layer_pattern("*")), "*");
}

TEST(Stack, GptLayoutIsAttentionThenMlpPerBlockWithLlamaNames) {
  const ModelSpec s = test::tiny_model_spec();  // 2 blocks
  EXPECT_EQ(stack_layout(s), StackLayout::gpt);
  const std::vector<LayerPlace> places = stack_places(s);
  ASSERT_EQ(places.size(), 4u);
  EXPECT_EQ(layer_pattern_string(stack_layer_kinds(s)), "*-*-");
  EXPECT_EQ(places[2].index, 2);
  EXPECT_EQ(places[2].hf_layer, 1);
  EXPECT_TRUE(places[2].first_in_hf_layer);
  EXPECT_FALSE(places[3].first_in_hf_layer);
  EXPECT_EQ(places[2].param_prefix, "model.layers.1.self_attn.");
  EXPECT_EQ(places[2].norm_name, "model.layers.1.input_layernorm.weight");
  EXPECT_EQ(places[3].param_prefix, "model.layers.1.mlp.");
  EXPECT_EQ(places[3].norm_name, "model.layers.1.post_attention_layernorm.weight");
  EXPECT_EQ(describe_stack(s), "4 layers: (*-)x2 as 2 GPT blocks");
  EXPECT_EQ(hf_architecture(s), "LlamaForCausalLM");
  ModelSpec moe = s;
  moe.num_moe_experts = 4;
  EXPECT_EQ(layer_pattern_string(stack_layer_kinds(moe)), "*E*E");
  EXPECT_EQ(hf_architecture(moe), "MixtralForCausalLM");
  EXPECT_EQ(places[3].param_prefix, "model.layers.1.mlp.");
  EXPECT_EQ(stack_places(moe)[3].param_prefix, "model.layers.1.block_sparse_moe.");
  std::string why;
  ModelSpec shared = moe;
  shared.moe.shared_expert_intermediate_size = 8;
  EXPECT_EQ(hf_architecture(shared, &why), "");
  EXPECT_NE(why.find("shared expert"), std::string::npos) << why;
  ModelSpec sigmoid = moe;
  sigmoid.moe.score_function = ref::MoeScoreFunction::sigmoid;
  EXPECT_EQ(hf_architecture(sigmoid, &why), "");
  EXPECT_NE(why.find("softmax"), std::string::npos) << why;
  // Token drop and Llama 3 RoPE scaling: MixtralConfig has neither, so its config.json would describe another model.
  ModelSpec capacity = moe;
  capacity.moe.capacity_factor = 1.0;
  EXPECT_EQ(hf_architecture(capacity, &why), "");
  EXPECT_NE(why.find("model.moe_expert_capacity_factor"), std::string::npos) << why;
  ModelSpec scaled = moe;
  scaled.rope_scaling.factor = 8.0;
  EXPECT_EQ(hf_architecture(scaled, &why), "");
  EXPECT_NE(why.find("rope scaling"), std::string::npos) << why;
  // moe_layer_freq: MoE in blocks 0 and 2 only.
  ModelSpec every_other = moe;
  every_other.num_layers = 4;
  every_other.moe.layer_freq = {1, 0, 1, 0};
  EXPECT_EQ(layer_pattern_string(stack_layer_kinds(every_other)), "*E*-*E*-");
  EXPECT_EQ(hf_architecture(every_other, &why), "");
  every_other.moe.layer_freq = {1, 0, 1};
  EXPECT_NE(thrown_message([&] { stack_layer_kinds(every_other); }).find("model.moe_layer_freq lists 3 blocks"),
            std::string::npos);
}

TEST(Stack, HybridLayoutIsOneLayerPerLetterWithNemotronHNames) {
  const ModelSpec s = hybrid_spec("M*-E-");
  EXPECT_EQ(stack_layout(s), StackLayout::hybrid);
  const std::vector<LayerPlace> places = stack_places(s);
  ASSERT_EQ(places.size(), 5u);
  for (size_t i = 0; i < places.size(); ++i) {
    EXPECT_EQ(places[i].index, static_cast<int>(i));
    EXPECT_EQ(places[i].hf_layer, static_cast<int64_t>(i));
    EXPECT_TRUE(places[i].first_in_hf_layer);
  }
  EXPECT_EQ(places[1].param_prefix, "backbone.layers.1.mixer.");
  EXPECT_EQ(places[4].norm_name, "backbone.layers.4.norm.weight");
  EXPECT_EQ(describe_stack(s), "5 layers: M*-E- (hybrid pattern)");
  std::string why;
  EXPECT_EQ(hf_architecture(hybrid_spec("*-"), &why), "");
  EXPECT_NE(why.find("hybrid"), std::string::npos) << why;
  // num_layers must equal the pattern's length.
  ModelSpec wrong = s;
  wrong.num_layers = 4;
  const std::string msg = thrown_message([&] { stack_places(wrong); });
  EXPECT_NE(msg.find("has 5 layers but model.num_layers is 4"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model.num_layers=5"), std::string::npos) << msg;
}

TEST(Stack, HybridStarDashRepeatedHasTheGptFlatLayoutAndDropoutSites) {
  const ModelLayout gpt = model_layout(test::tiny_model_spec());
  const ModelLayout hybrid = model_layout(hybrid_spec("*-*-"));
  EXPECT_EQ(gpt.total(), hybrid.total());
  EXPECT_EQ(gpt.num_decay(), hybrid.num_decay());
  ASSERT_EQ(gpt.tensors().size(), hybrid.tensors().size());
  // Same slices (offset, shape, class), other names: the two spellings train the same flat buffer.
  std::vector<std::tuple<int64_t, std::vector<int64_t>, bool>> a, b;
  for (const ParamTensor& t : gpt.tensors()) a.emplace_back(t.offset, t.shape, t.weight_decay);
  for (const ParamTensor& t : hybrid.tensors()) b.emplace_back(t.offset, t.shape, t.weight_decay);
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  EXPECT_EQ(a, b);
  EXPECT_EQ(hybrid.params.find("backbone.layers.2.mixer.q_proj.weight").offset,
            gpt.params.find("model.layers.1.self_attn.q_proj.weight").offset);
  EXPECT_EQ(hybrid.params.find("backbone.layers.3.norm.weight").offset,
            gpt.params.find("model.layers.1.post_attention_layernorm.weight").offset);
  EXPECT_EQ(hybrid.params.find("backbone.embeddings.weight").offset,
            gpt.params.find("model.embed_tokens.weight").offset);
  EXPECT_EQ(hybrid.params.find("backbone.norm_f.weight").offset, gpt.params.find("model.norm.weight").offset);
  // Dropout sites in stack order: per block attention probabilities 3b, attention output 3b + 1,
  // MLP output 3b + 2 — the dense model's numbers — for both spellings.
  EXPECT_EQ(gpt.output_sites, (std::vector<uint32_t>{1, 2, 4, 5}));
  EXPECT_EQ(hybrid.output_sites, gpt.output_sites);
  EXPECT_EQ(gpt.num_dropout_sites, 6u);
  EXPECT_EQ(hybrid.num_dropout_sites, 6u);
}

TEST(Stack, RegionsAndScopePlanningComeFromTheLayers) {
  const ModelSpec s = hybrid_spec("*-*-");
  const std::vector<graph::LayerRegions> regions = stack_regions(s);
  ASSERT_EQ(regions.size(), 4u);
  EXPECT_EQ(regions[0].modules, std::vector<Module>{Module::attn});
  EXPECT_EQ(regions[3].layer, 3);
  EXPECT_EQ(regions[3].modules, std::vector<Module>{Module::mlp});
  const graph::ScopePlan attn =
      graph::plan_graph_scopes(graph::GraphImpl::transformer_engine, {graph::GraphScope::attn}, regions, 1);
  const std::vector<graph::RegionKey> expected = {{0, Module::attn, graph::Phase::forward},
                                                  {2, Module::attn, graph::Phase::forward},
                                                  {2, Module::attn, graph::Phase::backward},
                                                  {0, Module::attn, graph::Phase::backward}};
  EXPECT_EQ(attn.graphed_regions, expected);
  EXPECT_EQ(attn.graphable_layers, 2);
  EXPECT_EQ(attn.total_layers, 4);
  const graph::ScopePlan all = graph::plan_graph_scopes(graph::GraphImpl::transformer_engine, {}, regions, 1);
  EXPECT_EQ(all.num_graphs(), 8);
  EXPECT_EQ(all.graphable_layers, 4);
  // The GPT spelling marks the same regions.
  const std::vector<graph::LayerRegions> gpt = stack_regions(test::tiny_model_spec());
  ASSERT_EQ(gpt.size(), regions.size());
  for (size_t i = 0; i < gpt.size(); ++i) {
    EXPECT_EQ(gpt[i].layer, regions[i].layer);
    EXPECT_EQ(gpt[i].modules, regions[i].modules);
  }
  // MoE and Mamba layers mark their own modules (whether or not their kinds are built yet).
  const std::vector<graph::LayerRegions> mixed = stack_regions(hybrid_spec("M*-E"));
  EXPECT_EQ(mixed[0].modules, std::vector<Module>{Module::mamba});
  EXPECT_EQ(mixed[3].modules, (std::vector<Module>{Module::moe_router, Module::moe_preprocess, Module::moe}));
}

TEST(LayerRegistry, SavedActivationsArePlannedPerLayerAndModuleWithoutAGpu) {
  const ModelSpec s = test::tiny_model_spec();  // T = 2 x 8, H 16, qkv_dim 32, F 24, 4 heads
  BatchSpec b;
  b.micro_batch_size = 2;
  const int64_t T = 16;
  const std::vector<SavedActivationBytes> saved = saved_activation_bytes(s, b);
  ASSERT_EQ(saved.size(), 4u);
  for (size_t i = 0; i < saved.size(); ++i) {
    EXPECT_EQ(saved[i].layer, static_cast<int>(i));
    if (i % 2 == 0) {  // attention: qkv (bf16), attention output (bf16), softmax statistics (fp32)
      EXPECT_EQ(saved[i].module, Module::attn);
      EXPECT_EQ(saved[i].bytes, static_cast<size_t>(T * 32 * 2 + T * 16 * 2 + 2 * 4 * 8 * 4));
    } else {  // MLP: gate_up and the SwiGLU output (bf16)
      EXPECT_EQ(saved[i].module, Module::mlp);
      EXPECT_EQ(saved[i].bytes, static_cast<size_t>(T * 48 * 2 + T * 24 * 2));
    }
  }
}

TEST(LayerRegistry, RegistersEveryKindOfThePatternLanguage) {
  for (const LayerKindInfo& info : layer_kinds()) {
    SCOPED_TRACE(info.name);
    EXPECT_TRUE(layer_kind_implemented(info.kind));
  }
  EXPECT_TRUE(missing_layer_kinds(hybrid_spec("M*-E")).empty());
  // What a letter added before its kind is built would be refused with (validation, make_layers).
  EXPECT_EQ(layer_kind_missing_message(LayerKind::mamba), "not implemented yet: Mamba layer kind (M in the pattern)");
}

}  // namespace
}  // namespace sg::model
