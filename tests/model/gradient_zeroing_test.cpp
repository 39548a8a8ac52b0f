// The step's gradient zeroing plan (model/gradient_zeroing.h): the ranges it zeroes and the blocks the
// first writers overwrite cover the whole gradient buffer exactly once, for dense, tied, MoE and hybrid
// Mamba stacks and with data-parallel padding; the blocks each kind overwrites are its GEMM-written ones.
#include "model/gradient_zeroing.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "dist/sharding.h"
#include "model/layer_registry.h"
#include "tiny_model.h"

namespace sg::model {
namespace {

struct Planned {
  ModelLayout layout;
  std::vector<ParamRef> first_written;
  std::vector<dist::FlatRange> zero;
  int64_t padded = 0;
};

Planned plan(const ModelSpec& spec, int world_size = 1) {
  std::vector<std::unique_ptr<Layer>> layers = make_layers(spec);
  Planned p{declare_model(spec, [&](size_t i, LayerDeclarations& d) { layers[i]->declare(d); }), {}, {}, 0};
  p.first_written = first_written_gradients(p.layout, layers);
  p.padded = dist::padded_size(p.layout.total(), world_size);
  p.zero = gradient_zero_ranges(p.layout, p.first_written, p.padded);
  return p;
}

// How often each float of the padded buffer is zeroed or first-written: 1 everywhere, or the test fails.
void expect_covered_exactly_once(const Planned& p) {
  std::vector<int> times(static_cast<size_t>(p.padded), 0);
  for (const dist::FlatRange& r : p.zero) {
    ASSERT_GT(r.size, 0);
    ASSERT_GE(r.begin, 0);
    ASSERT_LE(r.end(), p.padded);
    for (int64_t i = r.begin; i < r.end(); ++i) ++times[static_cast<size_t>(i)];
  }
  for (const ParamRef ref : p.first_written) {
    const int64_t begin = p.layout.offset(ref), n = p.layout.params.numel(ref);
    for (int64_t i = begin; i < begin + n; ++i) ++times[static_cast<size_t>(i)];
  }
  for (size_t i = 0; i < times.size(); ++i) ASSERT_EQ(times[i], 1) << "float " << i << " of " << p.padded;
  // Merged: no two ranges touch.
  for (size_t k = 1; k < p.zero.size(); ++k) EXPECT_LT(p.zero[k - 1].end(), p.zero[k].begin);
}

// Whether tensor `name` lies inside the zeroed ranges (else inside a first-written block).
bool zeroed(const Planned& p, const std::string& name) {
  const ParamTensor& t = p.layout.find(name);
  for (const dist::FlatRange& r : p.zero) {
    if (t.offset >= r.begin && t.offset + t.numel <= r.end()) return true;
  }
  return false;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// GEMM-written (first-written) tensors by name; everything else must be zeroed.
void expect_gemm_weights_first_written(const Planned& p, const std::vector<std::string>& gemm_leaves) {
  for (const ParamTensor& t : p.layout.tensors()) {
    bool gemm = false;
    for (const std::string& leaf : gemm_leaves) gemm = gemm || ends_with(t.name, leaf);
    EXPECT_EQ(zeroed(p, t.name), !gemm) << t.name;
  }
}

const std::vector<std::string> kDenseGemms = {"q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight",
                                              "gate_proj.weight", "up_proj.weight", "down_proj.weight",
                                              "lm_head.weight"};

TEST(GradientZeroing, DenseUntiedZeroesEmbeddingNormsAndGapsOnly) {
  const Planned p = plan(test::tiny_model_spec());
  expect_covered_exactly_once(p);
  expect_gemm_weights_first_written(p, kDenseGemms);
  EXPECT_TRUE(zeroed(p, "model.embed_tokens.weight"));  // its backward writes only the batch's rows
  EXPECT_EQ(p.first_written.size(), 1u + 2u * 2u * 2u);  // LM head; per block qkv, o, gate_up, down
  // Two memsets: the embedding (first in the flat buffer), then every non-decayed block (norms) to the end.
  ASSERT_EQ(p.zero.size(), 2u);
  EXPECT_EQ(p.zero[0], (dist::FlatRange{0, p.layout.params.numel(p.layout.embedding)}));
  EXPECT_EQ(p.zero[1].begin, p.layout.num_decay());
}

TEST(GradientZeroing, TiedEmbeddingIsFirstWrittenByTheLmHead) {
  ModelSpec spec = test::tiny_model_spec();
  spec.share_embeddings_and_output_weights = true;
  const Planned p = plan(spec);
  expect_covered_exactly_once(p);
  EXPECT_FALSE(zeroed(p, "model.embed_tokens.weight"));
  EXPECT_EQ(p.first_written.front().index, p.layout.embedding.index);
  ASSERT_EQ(p.zero.size(), 1u);  // one memset: the non-decayed blocks
  EXPECT_EQ(p.zero[0], (dist::FlatRange{p.layout.num_decay(), p.padded - p.layout.num_decay()}));
  expect_gemm_weights_first_written(p, {"q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight",
                                        "gate_proj.weight", "up_proj.weight", "down_proj.weight",
                                        "embed_tokens.weight"});
}

TEST(GradientZeroing, DataParallelPaddingIsZeroed) {
  const Planned one = plan(test::tiny_model_spec(), 1);
  const Planned four = plan(test::tiny_model_spec(), 4);
  expect_covered_exactly_once(four);
  ASSERT_GT(four.padded, four.layout.total());
  EXPECT_EQ(four.zero.back().end(), four.padded);
  EXPECT_LE(four.zero.back().begin, four.layout.total());
  EXPECT_EQ(one.zero.size(), four.zero.size());  // the padding joins the last range (the norms)
}

// SwiGLU experts (Mixtral's names) and squared-ReLU experts (Nemotron-H's): the same blocks, other names.
TEST(GradientZeroing, MoeExpertsAndSharedExpertAreFirstWrittenRouterIsZeroed) {
  for (const MlpActivation activation : {MlpActivation::swiglu, MlpActivation::squared_relu}) {
    const bool gated = activation == MlpActivation::swiglu;
    SCOPED_TRACE(gated ? "swiglu" : "squared_relu");
    ModelSpec spec = test::tiny_hybrid_spec("*E*E");
    spec.mlp_activation = activation;
    spec.num_moe_experts = 4;
    spec.moe_router_topk = 2;
    spec.moe_ffn_hidden_size = 12;
    spec.moe.shared_expert_intermediate_size = 8;
    spec.moe.enable_expert_bias = true;
    spec.moe.score_function = ref::MoeScoreFunction::sigmoid;
    const std::vector<std::string> attention = {"q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight",
                                                "lm_head.weight"};
    // Squared ReLU: experts.j.up_proj / down_proj and shared_experts.up_proj / down_proj.
    const std::vector<std::string> experts =
        gated ? std::vector<std::string>{"w1.weight", "w2.weight", "w3.weight"}
              : std::vector<std::string>{"up_proj.weight", "down_proj.weight"};
    const std::vector<std::string> shared =
        gated ? std::vector<std::string>{"shared_expert.gate_proj.weight", "shared_expert.up_proj.weight",
                                         "shared_expert.down_proj.weight"}
              : std::vector<std::string>{};
    const auto leaves = [](std::vector<std::string> a, const std::vector<std::string>& b,
                           const std::vector<std::string>& c) {
      a.insert(a.end(), b.begin(), b.end());
      a.insert(a.end(), c.begin(), c.end());
      return a;
    };
    const Planned p = plan(spec);
    expect_covered_exactly_once(p);
    expect_gemm_weights_first_written(p, leaves(attention, experts, shared));
    EXPECT_TRUE(zeroed(p, "backbone.layers.1.mixer.gate.weight"));
    EXPECT_FALSE(zeroed(p, gated ? "backbone.layers.1.mixer.experts.0.w1.weight"
                                 : "backbone.layers.1.mixer.experts.0.up_proj.weight"));
    EXPECT_FALSE(zeroed(p, gated ? "backbone.layers.3.mixer.experts.3.w2.weight"
                                 : "backbone.layers.3.mixer.experts.3.down_proj.weight"));
    EXPECT_FALSE(zeroed(p, gated ? "backbone.layers.3.mixer.shared_expert.up_proj.weight"
                                 : "backbone.layers.3.mixer.shared_experts.up_proj.weight"));
    EXPECT_TRUE(zeroed(p, "backbone.layers.1.mixer.gate.e_score_correction_bias"));

    spec.moe.shared_expert_intermediate_size = 0;
    const Planned no_shared = plan(spec);
    expect_covered_exactly_once(no_shared);
    expect_gemm_weights_first_written(no_shared, leaves(attention, experts, {}));
  }
}

TEST(GradientZeroing, MambaProjectionsAreFirstWrittenItsSmallParametersZeroed) {
  for (const bool tied : {false, true}) {
    ModelSpec spec = test::tiny_hybrid_spec("M*-M");
    spec.share_embeddings_and_output_weights = tied;
    const Planned p = plan(spec, 2);
    expect_covered_exactly_once(p);
    expect_gemm_weights_first_written(p, {"in_proj.weight", "out_proj.weight", "q_proj.weight", "k_proj.weight",
                                          "v_proj.weight", "o_proj.weight", "up_proj.weight", "down_proj.weight",
                                          tied ? "embeddings.weight" : "lm_head.weight"});
    for (const char* leaf : {"conv1d.weight", "conv1d.bias", "dt_bias", "A_log", "D", "norm.weight"}) {
      EXPECT_TRUE(zeroed(p, std::string("backbone.layers.0.mixer.") + leaf)) << leaf;
    }
    // [embedding unless tied], each Mamba layer's conv weight (decayed, between its projections), the rest.
    EXPECT_EQ(p.zero.size(), tied ? 3u : 4u);
  }
}

TEST(GradientZeroing, NothingFirstWrittenZeroesEverything) {
  const ModelLayout layout = model_layout(test::tiny_model_spec());
  const std::vector<dist::FlatRange> zero = gradient_zero_ranges(layout, {}, layout.total() + 64);
  ASSERT_EQ(zero.size(), 1u);
  EXPECT_EQ(zero[0], (dist::FlatRange{0, layout.total() + 64}));
}

TEST(GradientZeroing, OverlappingClaimsAndAShortBufferAreRefused) {
  const ModelLayout layout = model_layout(test::tiny_model_spec());
  EXPECT_THROW(gradient_zero_ranges(layout, {layout.lm_head, layout.lm_head}, layout.total()), Error);
  EXPECT_THROW(gradient_zero_ranges(layout, {}, layout.total() - 1), Error);
}

}  // namespace
}  // namespace sg::model
