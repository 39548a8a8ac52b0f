// When the step's backward finishes each gradient (model/gradient_readiness.h), for the layouts the
// stack builds: dense Llama blocks with the LM head tied or not, and a hybrid Mamba/attention/MLP
// pattern; and the data-parallel buckets planned from it.
#include "model/gradient_readiness.h"

#include <gtest/gtest.h>

#include "dist/sharding.h"
#include "model/layer_registry.h"
#include "tiny_model.h"

namespace sg::model {
namespace {

// The ready point of the tensor named `name`.
int point_of(const ModelLayout& layout, const dist::GradientReadiness& r, const std::string& name) {
  const ParamTensor& t = layout.find(name);
  for (const dist::GradientSegment& s : r.segments) {
    if (s.range.begin == t.offset) {
      EXPECT_EQ(s.range.size, t.numel) << name;
      return s.ready_point;
    }
  }
  ADD_FAILURE() << name << " has no segment";
  return -1;
}

void expect_every_tensor_once(const ModelLayout& layout, const dist::GradientReadiness& r) {
  ASSERT_EQ(r.segments.size(), layout.tensors().size());
  std::vector<int> covered(static_cast<size_t>(layout.total()), 0);
  for (const dist::GradientSegment& s : r.segments) {
    for (int64_t i = s.range.begin; i < s.range.end(); ++i) ++covered[static_cast<size_t>(i)];
  }
  for (const ParamTensor& t : layout.tensors()) {
    for (int64_t i = t.offset; i < t.offset + t.numel; ++i) ASSERT_EQ(covered[static_cast<size_t>(i)], 1) << t.name;
  }
}

TEST(GradientReadiness, DenseBlocksInTheStepsBackwardOrder) {
  for (const bool tied : {false, true}) {
    ModelSpec spec = test::tiny_model_spec();  // 2 blocks: layers 0 attn, 1 mlp, 2 attn, 3 mlp
    spec.share_embeddings_and_output_weights = tied;
    const ModelLayout layout = model_layout(spec);
    const dist::GradientReadiness r = gradient_readiness(layout);
    ASSERT_EQ(r.points, 6);  // the LM head, 4 layers, the end
    expect_every_tensor_once(layout, r);
    if (!tied) {
      EXPECT_EQ(point_of(layout, r, "lm_head.weight"), 0) << "the LM head's backward runs first";
    }
    EXPECT_EQ(point_of(layout, r, "model.embed_tokens.weight"), 5) << "the embedding's last (tied: written twice)";
    // Every norm at the end: one launch sums their weight gradients after layer 0's pre-norm backward.
    EXPECT_EQ(point_of(layout, r, "model.norm.weight"), 5);
    EXPECT_EQ(point_of(layout, r, "model.layers.1.mlp.down_proj.weight"), 1);
    EXPECT_EQ(point_of(layout, r, "model.layers.1.post_attention_layernorm.weight"), 5);
    EXPECT_EQ(point_of(layout, r, "model.layers.1.self_attn.q_proj.weight"), 2);
    EXPECT_EQ(point_of(layout, r, "model.layers.1.input_layernorm.weight"), 5);
    EXPECT_EQ(point_of(layout, r, "model.layers.0.mlp.gate_proj.weight"), 3);
    EXPECT_EQ(point_of(layout, r, "model.layers.0.self_attn.o_proj.weight"), 4);
    EXPECT_EQ(point_of(layout, r, "model.layers.0.post_attention_layernorm.weight"), 5);
    EXPECT_EQ(point_of(layout, r, "model.layers.0.input_layernorm.weight"), 5);
  }
}

TEST(GradientReadiness, HybridPattern) {
  const ModelLayout layout = model_layout(test::tiny_hybrid_spec("M*-"));
  const dist::GradientReadiness r = gradient_readiness(layout);
  ASSERT_EQ(r.points, 5);
  expect_every_tensor_once(layout, r);
  for (const ParamTensor& t : layout.tensors()) {
    if (t.name.rfind("backbone.layers.0.mixer.", 0) == 0) {
      EXPECT_EQ(point_of(layout, r, t.name), 3) << t.name;
    }
    if (t.name.rfind("backbone.layers.2.mixer.", 0) == 0) {
      EXPECT_EQ(point_of(layout, r, t.name), 1) << t.name;
    }
  }
  EXPECT_EQ(point_of(layout, r, "backbone.layers.1.norm.weight"), 4);  // every norm at the end
  EXPECT_EQ(point_of(layout, r, "backbone.norm_f.weight"), 4);
}

TEST(GradientReadiness, SmallBucketsAreReducedAtEveryPointOfTheBackward) {
  const ModelLayout layout = model_layout(test::tiny_model_spec());
  const dist::GradientReadiness r = gradient_readiness(layout);
  for (const bool sharded : {false, true}) {
    const dist::DataParallelLayout dp = dist::plan_data_parallel(layout.total(), 2, 0, sharded, 300, r, true);
    std::vector<int> buckets_at(static_cast<size_t>(r.points), 0);
    for (const dist::GradientBucket& b : dp.buckets) ++buckets_at[static_cast<size_t>(b.ready_point)];
    for (int p = 0; p < r.points; ++p) EXPECT_GT(buckets_at[static_cast<size_t>(p)], 0) << "point " << p;
    EXPECT_NE(dp.describe().find("overlapped with the backward"), std::string::npos) << dp.describe();
  }
}

}  // namespace
}  // namespace sg::model
