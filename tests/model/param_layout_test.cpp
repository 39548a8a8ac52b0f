// The flat parameter layout (names, shapes, offsets, decay boundary, tied embeddings) and the host
// initialisation that fills it.
#include "model/param_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.h"
#include "model/init.h"

namespace sg::model {
namespace {

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

TEST(ParamLayout, NamesShapesAndOrderFollowHuggingFace) {
  const ModelSpec s = tiny_spec(false);
  const ParamLayout layout(s);
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
    EXPECT_EQ(p.is_output_projection,
              p.name.find("o_proj") != std::string::npos || p.name.find("down_proj") != std::string::npos)
        << p.name;
  }
}

TEST(ParamLayout, FusedBlocksAreContiguousAndMatchLayerOffsets) {
  const ModelSpec s = tiny_spec(false);
  const ParamLayout layout(s);
  for (int64_t l = 0; l < s.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const auto& o = layout.layer(l);
    const auto& q = layout.find(p + "self_attn.q_proj.weight");
    const auto& k = layout.find(p + "self_attn.k_proj.weight");
    const auto& v = layout.find(p + "self_attn.v_proj.weight");
    EXPECT_EQ(q.offset, o.qkv);
    EXPECT_EQ(k.offset, q.offset + q.numel);  // rows of one [qkv_dim, H] block
    EXPECT_EQ(v.offset, k.offset + k.numel);
    EXPECT_EQ(v.offset + v.numel, o.qkv + s.qkv_dim() * s.hidden_size);
    const auto& gate = layout.find(p + "mlp.gate_proj.weight");
    const auto& up = layout.find(p + "mlp.up_proj.weight");
    EXPECT_EQ(gate.offset, o.gate_up);
    EXPECT_EQ(up.offset, gate.offset + gate.numel);
    EXPECT_EQ(layout.find(p + "self_attn.o_proj.weight").offset, o.o_proj);
    EXPECT_EQ(layout.find(p + "mlp.down_proj.weight").offset, o.down_proj);
    EXPECT_EQ(layout.find(p + "input_layernorm.weight").offset, o.input_norm);
    EXPECT_EQ(layout.find(p + "post_attention_layernorm.weight").offset, o.post_norm);
  }
  EXPECT_EQ(layout.find("model.embed_tokens.weight").offset, layout.embedding());
  EXPECT_EQ(layout.find("lm_head.weight").offset, layout.lm_head());
  EXPECT_EQ(layout.find("model.norm.weight").offset, layout.final_norm());
}

TEST(ParamLayout, AlignedNonOverlappingWithOneDecayBoundary) {
  for (bool tied : {false, true}) {
    ModelSpec s = tiny_spec(tied);
    s.hidden_size = 24;  // head_dim 6: sizes that are not multiples of the alignment
    s.ffn_hidden_size = 40;
    s.vocab_size = 37;
    const ParamLayout layout(s);
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

TEST(ParamLayout, TiedEmbeddingsShareOneTensor) {
  const ParamLayout untied(tiny_spec(false));
  const ParamLayout tied(tiny_spec(true));
  EXPECT_TRUE(tied.tied());
  EXPECT_EQ(tied.lm_head(), tied.embedding());
  EXPECT_NE(untied.lm_head(), untied.embedding());
  EXPECT_EQ(tied.tensors().size() + 1, untied.tensors().size());
  for (const auto& t : tied.tensors()) EXPECT_NE(t.name, "lm_head.weight");
  EXPECT_THROW(tied.find("lm_head.weight"), Error);
  EXPECT_EQ(untied.total() - tied.total(), 32 * 16);  // V*H = 512, a multiple of the alignment
}

TEST(ParamLayout, UnknownNameSuggestsTheClosest) {
  const ParamLayout layout(tiny_spec(false));
  try {
    layout.find("model.layers.0.self_attn.q_prj.weight");
    FAIL() << "expected sg::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.0.self_attn.q_proj.weight"), std::string::npos) << e.what();
  }
}

TEST(ParamLayout, RejectsShapesTheStepCannotRun) {
  ModelSpec s = tiny_spec(false);
  s.num_query_groups = 3;  // 4 heads are not whole groups of 3
  EXPECT_THROW(ParamLayout{s}, Error);
  s = tiny_spec(false);
  s.hidden_size = 20;  // 4 heads of 5: odd head_dim
  EXPECT_THROW(ParamLayout{s}, Error);
  s = tiny_spec(false);
  s.hidden_size = 18;  // not a multiple of the heads
  EXPECT_THROW(ParamLayout{s}, Error);
  s = tiny_spec(false);
  s.num_moe_experts = 4;
  EXPECT_THROW(ParamLayout{s}, Error);
}

TEST(Init, DeterministicPerSeedAndIndependentOfThreads) {
  const ParamLayout layout(tiny_spec(false));
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
  const ParamLayout layout(s);
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
    const double expected = s.init_method_std * (t.is_output_projection ? 1.0 / std::sqrt(2.0 * s.num_layers) : 1.0);
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
