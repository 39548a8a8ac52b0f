// The parameter builder (placement, alignment, the weight-decay boundary, the grouped tensor list), the
// dense model's declarations through it (Hugging Face names, shapes, order, fused blocks, tied
// embeddings) and the host initialisation that fills them.
#include "model/param_builder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.h"
#include "model/init.h"
#include "model/layer_registry.h"
#include "test_util.h"
#include "tiny_model.h"

namespace sg::model {
namespace {

using test::thrown_message;

// ---- ParamBuilder on its own ----

TEST(ParamBuilder, DecayedBlocksFirstEachAlignedOneBoundary) {
  ParamBuilder b;
  b.begin_group();
  const ParamRef norm_a = b.vector("a.norm", {5});
  const ParamRef fused = b.matrix({{"a.q", {3, 7}}, {"a.k", {2, 7}}, {"a.v", {2, 7}}});  // 49 elements
  b.begin_group();
  const ParamRef conv = b.matrix("b.conv", {4, 1, 3}, ParamInit::zeros);  // decayed although not 2-D
  const ParamRef bias = b.vector("b.bias", {65}, ParamInit::zeros);
  const ParamRef out = b.matrix("b.out", {10, 10}, ParamInit::output_projection);
  const ParamLayout layout = b.build();

  // Decayed blocks in declaration order from 0, each aligned; then the others.
  EXPECT_EQ(layout.offset(fused), 0);
  EXPECT_EQ(layout.numel(fused), 49);
  EXPECT_EQ(layout.offset(conv), kParamAlignment);
  EXPECT_EQ(layout.offset(out), 2 * kParamAlignment);
  EXPECT_EQ(layout.num_decay(), 2 * kParamAlignment + 128);  // 100 elements -> two alignment units
  EXPECT_EQ(layout.offset(norm_a), layout.num_decay());
  EXPECT_EQ(layout.offset(bias), layout.num_decay() + kParamAlignment);
  EXPECT_EQ(layout.total(), layout.num_decay() + kParamAlignment + 128);
  EXPECT_EQ(layout.num_parameters(), 49 + 12 + 100 + 5 + 65);

  // Tensor list: per group, decayed tensors then the others; fused tensors are consecutive slices.
  std::vector<std::string> names;
  for (const ParamTensor& t : layout.tensors()) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"a.q", "a.k", "a.v", "a.norm", "b.conv", "b.out", "b.bias"}));
  EXPECT_EQ(layout.find("a.k").offset, 21);
  EXPECT_EQ(layout.find("a.v").offset, 35);
  EXPECT_TRUE(layout.find("b.conv").weight_decay);
  EXPECT_FALSE(layout.find("b.bias").weight_decay);
  EXPECT_EQ(layout.find("b.out").init, ParamInit::output_projection);
  EXPECT_EQ(layout.find("a.norm").init, ParamInit::ones);
  EXPECT_EQ(layout.find("b.conv").shape, (std::vector<int64_t>{4, 1, 3}));
  EXPECT_NE(layout.describe().find("weight decay on [0, 256)"), std::string::npos) << layout.describe();
}

// fp32_vector() blocks are placed like vector() blocks (no decay, after the decayed ones) and also packed, each at a
// multiple of kParamAlignment in declaration order, for the step's replica of them (kernels/fp32_replica.h): the
// packing's flat offsets name each block's elements and -1 in the gaps.
TEST(ParamBuilder, Fp32VectorsArePackedAlignedInDeclarationOrder) {
  ParamBuilder b;
  const ParamRef norm = b.vector("a.norm", {5});
  const ParamRef dt = b.fp32_vector({{"a.dt_bias", {3}, ParamInit::zeros}});
  const ParamRef w = b.matrix("a.w", {4, 4});
  const ParamRef d = b.fp32_vector("a.D", {70});
  const ParamRef bias = b.fp32_vector("b.bias", {2}, ParamInit::zeros);
  const ParamLayout layout = b.build();

  EXPECT_FALSE(layout.find("a.dt_bias").weight_decay);
  EXPECT_EQ(layout.offset(dt), layout.num_decay() + kParamAlignment);  // placed as a vector() block
  EXPECT_FALSE(layout.is_fp32_block(norm));
  EXPECT_FALSE(layout.is_fp32_block(w));
  EXPECT_TRUE(layout.is_fp32_block(dt));
  EXPECT_EQ(layout.fp32_packed_offset(dt), 0);
  EXPECT_EQ(layout.fp32_packed_offset(d), kParamAlignment);
  EXPECT_EQ(layout.fp32_packed_offset(bias), 3 * kParamAlignment);  // 70 elements take two alignment units
  EXPECT_EQ(layout.fp32_packed_total(), 4 * kParamAlignment);
  EXPECT_NE(thrown_message([&] { (void)layout.fp32_packed_offset(norm); }).find("fp32_vector"), std::string::npos);

  const std::vector<int64_t> flat = layout.fp32_packed_flat_offsets();
  ASSERT_EQ(flat.size(), static_cast<size_t>(layout.fp32_packed_total()));
  std::vector<int64_t> expected(flat.size(), -1);
  for (const ParamRef block : {dt, d, bias}) {
    for (int64_t i = 0; i < layout.numel(block); ++i) {
      expected[static_cast<size_t>(layout.fp32_packed_offset(block) + i)] = layout.offset(block) + i;
    }
  }
  EXPECT_EQ(flat, expected);
  ASSERT_EQ(layout.fp32_blocks().size(), 3u);
  EXPECT_EQ(layout.fp32_blocks()[1].flat_offset, layout.offset(d));
  EXPECT_EQ(layout.fp32_blocks()[1].numel, 70);
  EXPECT_EQ(layout.fp32_blocks()[1].packed_offset, kParamAlignment);
}

TEST(ParamBuilder, RefusesDuplicatesBadShapesAndCustomInitWithoutFunction) {
  {
    ParamBuilder b;
    b.matrix("w", {2, 2});
    b.vector("w", {2});
    EXPECT_NE(thrown_message([&] { b.build(); }).find("'w' is declared twice"), std::string::npos);
  }
  ParamBuilder b;
  EXPECT_NE(thrown_message([&] { b.matrix("w", {2, 0}); }).find("every dimension must be positive"),
            std::string::npos);
  EXPECT_NE(thrown_message([&] { b.vector("v", {}); }).find("no shape"), std::string::npos);
  EXPECT_NE(thrown_message([&] { b.vector("c", {4}, ParamInit::custom); }).find("no init function"),
            std::string::npos);
  const ParamLayout empty = ParamBuilder().build();
  EXPECT_EQ(empty.total(), 0);
  EXPECT_THROW(empty.offset(ParamRef{}), Error);
}

// ---- the dense model's declarations ----

ModelSpec tiny_spec(bool tied) {
  ModelSpec s;
  s.vocab_size = 32;
  s.hidden_size = 16;
  s.num_layers = 2;
  s.num_attention_heads = 4;
  s.num_query_groups = 2;
  s.ffn_hidden_size = 24;
  s.seq_length = 8;
  s.share_embeddings_and_output_weights = tied;
  return s;
}

int64_t hf_parameter_count(const ModelSpec& s) {
  const int64_t V = s.vocab_size, H = s.hidden_size, F = s.ffn_hidden_size, KV = s.kv_dim();
  const int64_t per_layer = H * H + 2 * KV * H + H * H + 3 * F * H + 2 * H;
  return V * H + s.num_layers * per_layer + H + (s.share_embeddings_and_output_weights ? 0 : V * H);
}

TEST(DenseLayout, NamesShapesAndOrderFollowHuggingFace) {
  const ModelSpec s = tiny_spec(false);
  const ModelLayout model = model_layout(s);
  const ParamLayout& layout = model.params;
  const auto& t = layout.tensors();
  ASSERT_EQ(t.size(), static_cast<size_t>(1 + 9 * s.num_layers + 2));
  EXPECT_EQ(t.front().name, "model.embed_tokens.weight");
  EXPECT_EQ(t.front().shape, (std::vector<int64_t>{32, 16}));
  EXPECT_EQ(t[1].name, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(t[1].shape, (std::vector<int64_t>{16, 16}));
  EXPECT_EQ(t[2].name, "model.layers.0.self_attn.k_proj.weight");
  EXPECT_EQ(t[2].shape, (std::vector<int64_t>{8, 16}));  // kv_dim = 2 groups * head_dim 4
  EXPECT_EQ(t[3].name, "model.layers.0.self_attn.v_proj.weight");
  EXPECT_EQ(t[4].name, "model.layers.0.self_attn.o_proj.weight");
  EXPECT_EQ(t[5].name, "model.layers.0.mlp.gate_proj.weight");
  EXPECT_EQ(t[5].shape, (std::vector<int64_t>{24, 16}));
  EXPECT_EQ(t[6].name, "model.layers.0.mlp.up_proj.weight");
  EXPECT_EQ(t[7].name, "model.layers.0.mlp.down_proj.weight");
  EXPECT_EQ(t[7].shape, (std::vector<int64_t>{16, 24}));
  EXPECT_EQ(t[8].name, "model.layers.0.input_layernorm.weight");
  EXPECT_EQ(t[8].shape, (std::vector<int64_t>{16}));
  EXPECT_EQ(t[9].name, "model.layers.0.post_attention_layernorm.weight");
  EXPECT_EQ(t[10].name, "model.layers.1.self_attn.q_proj.weight");
  EXPECT_EQ(t[t.size() - 2].name, "model.norm.weight");
  EXPECT_EQ(t.back().name, "lm_head.weight");
  EXPECT_EQ(t.back().shape, (std::vector<int64_t>{32, 16}));
  EXPECT_EQ(layout.num_parameters(), hf_parameter_count(s));
  for (const auto& p : t) {
    int64_t n = 1;
    for (int64_t d : p.shape) n *= d;
    EXPECT_EQ(p.numel, n) << p.name;
    const bool output = p.name.find("o_proj") != std::string::npos || p.name.find("down_proj") != std::string::npos;
    EXPECT_EQ(p.init, output ? ParamInit::output_projection : p.shape.size() == 1 ? ParamInit::ones : ParamInit::normal)
        << p.name;
  }
}

TEST(DenseLayout, FusedBlocksAreContiguousAndMatchTheStepsReferences) {
  const ModelSpec s = tiny_spec(false);
  const ModelLayout model = model_layout(s);
  const ParamLayout& layout = model.params;
  ASSERT_EQ(model.num_layers(), 2 * s.num_layers);  // attention, MLP per block
  for (int64_t l = 0; l < s.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const auto& q = layout.find(p + "self_attn.q_proj.weight");
    const auto& k = layout.find(p + "self_attn.k_proj.weight");
    const auto& v = layout.find(p + "self_attn.v_proj.weight");
    EXPECT_EQ(q.offset % kParamAlignment, 0);
    EXPECT_EQ(k.offset, q.offset + q.numel);  // rows of one [qkv_dim, H] block
    EXPECT_EQ(v.offset, k.offset + k.numel);
    const auto& gate = layout.find(p + "mlp.gate_proj.weight");
    const auto& up = layout.find(p + "mlp.up_proj.weight");
    EXPECT_EQ(up.offset, gate.offset + gate.numel);
    // The attention layer carries input_layernorm, the MLP layer post_attention_layernorm.
    EXPECT_EQ(layout.find(p + "input_layernorm.weight").offset, model.offset(model.pre_norms[size_t(2 * l)]));
    EXPECT_EQ(layout.find(p + "post_attention_layernorm.weight").offset,
              model.offset(model.pre_norms[size_t(2 * l + 1)]));
  }
  EXPECT_EQ(layout.find("model.embed_tokens.weight").offset, model.offset(model.embedding));
  EXPECT_EQ(layout.find("lm_head.weight").offset, model.offset(model.lm_head));
  EXPECT_EQ(layout.find("model.norm.weight").offset, model.offset(model.final_norm));
  EXPECT_EQ(model.norm_before(model.num_layers()).index, model.final_norm.index);
}

TEST(DenseLayout, AlignedNonOverlappingWithOneDecayBoundary) {
  for (bool tied : {false, true}) {
    ModelSpec s = tiny_spec(tied);
    s.hidden_size = 24;  // head_dim 6: sizes that are not multiples of the alignment
    s.ffn_hidden_size = 40;
    s.vocab_size = 37;
    const ModelLayout model = model_layout(s);
    const ParamLayout& layout = model.params;
    // Fused blocks start aligned (q, gate, and every unfused tensor).
    std::vector<std::pair<int64_t, int64_t>> ranges;
    for (const auto& t : layout.tensors()) {
      const bool inner = t.name.find("k_proj") != std::string::npos || t.name.find("v_proj") != std::string::npos ||
                         t.name.find("up_proj") != std::string::npos;
      if (!inner) {
        EXPECT_EQ(t.offset % kParamAlignment, 0) << t.name;
      }
      ranges.emplace_back(t.offset, t.offset + t.numel);
      EXPECT_LE(t.offset + t.numel, layout.total()) << t.name;
      if (t.weight_decay) {
        EXPECT_LE(t.offset + t.numel, layout.num_decay()) << t.name;
        EXPECT_EQ(t.shape.size(), 2u) << t.name;
      } else {
        EXPECT_GE(t.offset, layout.num_decay()) << t.name;
        EXPECT_EQ(t.shape.size(), 1u) << t.name;
      }
    }
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 1; i < ranges.size(); ++i) EXPECT_LE(ranges[i - 1].second, ranges[i].first) << "overlap at " << i;
    EXPECT_EQ(layout.num_decay() % kParamAlignment, 0);
    EXPECT_EQ(layout.total() % kParamAlignment, 0);
    // Gaps are small: less than one alignment unit per block.
    const int64_t blocks = 1 + 4 * s.num_layers + (tied ? 0 : 1) + 2 * s.num_layers + 1;
    EXPECT_LT(layout.total() - layout.num_parameters(), blocks * kParamAlignment);
    EXPECT_EQ(layout.num_parameters(), hf_parameter_count(s));
  }
}

TEST(DenseLayout, TiedEmbeddingsShareOneTensor) {
  const ModelLayout untied = model_layout(tiny_spec(false));
  const ModelLayout tied = model_layout(tiny_spec(true));
  EXPECT_EQ(tied.offset(tied.lm_head), tied.offset(tied.embedding));
  EXPECT_NE(untied.offset(untied.lm_head), untied.offset(untied.embedding));
  EXPECT_EQ(tied.tensors().size() + 1, untied.tensors().size());
  for (const auto& t : tied.tensors()) EXPECT_NE(t.name, "lm_head.weight");
  EXPECT_THROW(tied.params.find("lm_head.weight"), Error);
  EXPECT_EQ(untied.total() - tied.total(), 32 * 16);  // V*H = 512, a multiple of the alignment
}

TEST(DenseLayout, UnknownNameSuggestsTheClosest) {
  const ModelLayout model = model_layout(tiny_spec(false));
  try {
    model.params.find("model.layers.0.self_attn.q_prj.weight");
    FAIL() << "expected sg::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.0.self_attn.q_proj.weight"), std::string::npos) << e.what();
  }
}

TEST(DenseLayout, RejectsShapesTheStepCannotRun) {
  const auto message = [](ModelSpec s) { return thrown_message([&] { model_layout(s); }); };
  ModelSpec s = tiny_spec(false);
  s.num_query_groups = 3;  // 4 heads are not whole groups of 3
  EXPECT_NE(message(s).find("model.num_query_groups = 3"), std::string::npos);
  s = tiny_spec(false);
  s.hidden_size = 20;  // 4 heads of 5: odd head_dim
  EXPECT_NE(message(s).find("even head_dim"), std::string::npos);
  s = tiny_spec(false);
  s.hidden_size = 18;  // not a multiple of the heads
  EXPECT_NE(message(s).find("not a multiple of model.num_attention_heads"), std::string::npos);
  s = tiny_spec(false);
  s.num_moe_experts = 4;  // GPT blocks with MoE layers: the MoE kind checks its own shapes
  s.moe_ffn_hidden_size = 0;
  EXPECT_NE(message(s).find("model.moe_ffn_hidden_size = 0"), std::string::npos);
  s = tiny_spec(false);
  s.ffn_hidden_size = 0;
  EXPECT_NE(message(s).find("model.ffn_hidden_size = 0"), std::string::npos);
}

TEST(Init, DeterministicPerSeedAndIndependentOfThreads) {
  const ModelLayout layout = model_layout(tiny_spec(false));
  const auto a = initial_parameters(layout, 1234, 1);
  const auto b = initial_parameters(layout, 1234, 3);
  const auto c = initial_parameters(layout, 1235, 1);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(Init, NormsOneGapsZeroMatricesNormalWithScaledOutputs) {
  ModelSpec s = tiny_spec(false);
  s.hidden_size = 64;
  s.num_attention_heads = 4;
  s.ffn_hidden_size = 192;
  s.num_layers = 8;
  s.num_query_groups = 4;
  s.vocab_size = 128;
  s.init_method_std = 0.05;
  const ModelLayout layout = model_layout(s);
  const auto w = initial_parameters(layout, 7);
  std::vector<bool> covered(w.size(), false);
  for (const auto& t : layout.tensors()) {
    double sum = 0.0, sq = 0.0;
    for (int64_t i = 0; i < t.numel; ++i) {
      const double x = w[static_cast<size_t>(t.offset + i)];
      sum += x;
      sq += x * x;
      covered[static_cast<size_t>(t.offset + i)] = true;
    }
    if (t.shape.size() == 1) {
      EXPECT_EQ(sum, static_cast<double>(t.numel)) << t.name;  // all ones
      continue;
    }
    const double n = static_cast<double>(t.numel);
    const double mean = sum / n, stddev = std::sqrt(sq / n - mean * mean);
    const double expected =
        s.init_method_std * (t.init == ParamInit::output_projection ? 1.0 / std::sqrt(2.0 * s.num_layers) : 1.0);
    // n >= 4096 samples: the sample std is within a few % of the truth, the mean within 4 sigma/sqrt(n).
    EXPECT_NEAR(stddev / expected, 1.0, 0.05) << t.name;
    EXPECT_LT(std::abs(mean), 4.0 * expected / std::sqrt(n)) << t.name;
  }
  for (size_t i = 0; i < w.size(); ++i) {
    if (!covered[i]) {
      ASSERT_EQ(w[i], 0.0f) << "alignment gap at " << i;
    }
  }
}

// Megatron's is_hybrid_model (output_layer_init_method with multiplier 1 instead of 2): every output projection of
// every layer kind (attention o_proj, the MLP's down_proj, each expert's and the shared expert's down_proj, the Mamba
// mixer's out_proj) starts with std init_method_std / sqrt(num_layers) instead of / sqrt(2 num_layers): the sample
// std of each is that, on 4096 to 16384 draws, and so a ratio of sqrt(2) between the two; nothing else changes.
TEST(Init, IsHybridModelDrawsOutputProjectionsWithStdOverSqrtNumLayers) {
  ModelSpec s = test::tiny_hybrid_spec("M*-E");
  s.vocab_size = 128;
  s.hidden_size = 64;
  s.num_attention_heads = 4;
  s.num_query_groups = 4;
  s.ffn_hidden_size = 256;
  s.mamba.head_dim = 16;
  s.mamba.num_heads = 16;  // out_proj [64, 256]
  s.num_moe_experts = 4;
  s.moe_router_topk = 2;
  s.moe_ffn_hidden_size = 64;
  s.moe.shared_expert_intermediate_size = 128;
  s.init_method_std = 0.05;
  ModelSpec hybrid = s;
  hybrid.is_hybrid_model = true;
  const ModelLayout layout = model_layout(s);
  ASSERT_EQ(model_layout(hybrid).total(), layout.total());
  const std::vector<float> megatron = initial_parameters(layout, 11),
                           scaled = initial_parameters(model_layout(hybrid), 11);
  const auto sample_std = [&](const std::vector<float>& w, const ParamTensor& t) {
    double sq = 0.0;
    for (int64_t i = 0; i < t.numel; ++i)
      sq += static_cast<double>(w[static_cast<size_t>(t.offset + i)]) * w[static_cast<size_t>(t.offset + i)];
    return std::sqrt(sq / static_cast<double>(t.numel));
  };
  std::set<std::string> outputs;
  for (const ParamTensor& t : layout.tensors()) {
    SCOPED_TRACE(t.name);
    const auto begin = static_cast<ptrdiff_t>(t.offset), end = begin + static_cast<ptrdiff_t>(t.numel);
    if (t.init != ParamInit::output_projection) {
      EXPECT_TRUE(std::equal(megatron.begin() + begin, megatron.begin() + end, scaled.begin() + begin));
      continue;
    }
    outputs.insert(t.name);
    ASSERT_GE(t.numel, 4096);
    const double without = sample_std(megatron, t), with = sample_std(scaled, t);
    EXPECT_NEAR(without / (0.05 / std::sqrt(2.0 * 4)), 1.0, 0.05);  // 4 layers: the pattern's letters
    EXPECT_NEAR(with / (0.05 / std::sqrt(4.0)), 1.0, 0.05);
    EXPECT_NEAR(with / without, std::sqrt(2.0), 0.05);
  }
  EXPECT_EQ(
      outputs,
      (std::set<std::string>{
          "backbone.layers.0.mixer.out_proj.weight", "backbone.layers.1.mixer.o_proj.weight",
          "backbone.layers.2.mixer.down_proj.weight", "backbone.layers.3.mixer.experts.0.down_proj.weight",
          "backbone.layers.3.mixer.experts.1.down_proj.weight", "backbone.layers.3.mixer.experts.2.down_proj.weight",
          "backbone.layers.3.mixer.experts.3.down_proj.weight",
          "backbone.layers.3.mixer.shared_experts.down_proj.weight"}));
}

TEST(Init, ZerosAndCustomInitDrawFromTheTensorsOwnStreams) {
  ModelSpec spec = tiny_spec(false);
  ModelLayout model;
  model.spec = spec;
  ParamBuilder b;
  b.vector("zeros", {70}, ParamInit::zeros);
  // A Mamba-style hook: values from the tensor's uniform stream, shifted.
  b.vector({ParamDecl("custom", {100}, ParamInit::custom,
                      [](const ParamTensor& t, float* dst, int64_t begin, int64_t end, const InitStreams& s) {
                        EXPECT_EQ(t.name, "custom");
                        for (int64_t i = begin; i < end; ++i) dst[i] = 1.0f + s.uniform(static_cast<uint64_t>(i));
                      })});
  model.params = b.build();
  const std::vector<float> w = initial_parameters(model, 3);
  const ParamTensor& zeros = model.params.find("zeros");
  const ParamTensor& custom = model.params.find("custom");
  for (int64_t i = 0; i < zeros.numel; ++i) EXPECT_EQ(w[static_cast<size_t>(zeros.offset + i)], 0.0f);
  std::set<float> distinct;
  for (int64_t i = 0; i < custom.numel; ++i) {
    const float x = w[static_cast<size_t>(custom.offset + i)];
    EXPECT_EQ(x, 1.0f + init_uniform(3, 1, static_cast<uint64_t>(i)));  // tensor index 1: its stream
    EXPECT_GE(x, 1.0f);
    EXPECT_LT(x, 2.0f);
    distinct.insert(x);
  }
  EXPECT_GT(distinct.size(), 90u);
}

TEST(Init, StandardNormalMoments) {
  double sum = 0.0, sq = 0.0, fourth = 0.0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double x = init_normal(99, 5, static_cast<uint64_t>(i));
    sum += x;
    sq += x * x;
    fourth += x * x * x * x;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sq / n, 1.0, 0.01);
  EXPECT_NEAR(fourth / n, 3.0, 0.06);  // kurtosis of a normal
}

}  // namespace
}  // namespace sg::model
