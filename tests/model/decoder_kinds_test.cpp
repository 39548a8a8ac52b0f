// The weights of the GPU decoder's every-kind test (tests/model/decoder_kinds.h), on the CPU: for each model, the
// seed search finds weights whose routing of the test's prompts (and, for the single prompt, of the CPU decoder's
// greedy continuation, and of the decode-gemv modes' 6 and 8 prompts) is kRoutingMargin from every tie, within its
// 200 seeds; and the margin it measures is a
// real one: the expert bias, which the search draws to change the choice, does change the sigmoid routing's margins.
#include "model/decoder_kinds.h"

#include <gtest/gtest.h>

#include <string>

namespace sg::test::decoder_kinds {
namespace {

TEST(DecoderKindsWeights, TheSeedSearchFindsClearRoutingForEveryModel) {
  for (const KindsCase& c : kDecoderKindsCases) {
    SCOPED_TRACE(c.name);
    const model::ModelSpec m = c.spec();
    const auto single = weights_for(m, kSingleSeed, {kSinglePrompt}, kSingleNewTokens);
    ASSERT_FALSE(single.empty());
    EXPECT_GE(routing_margin(m, single, kSinglePrompt), kRoutingMargin);
    const auto batch = weights_for(m, kBatchSeed, kBatchPrompts);
    ASSERT_FALSE(batch.empty());
    for (const auto& prompt : kBatchPrompts) {
      EXPECT_GE(routing_margin(m, batch, prompt), m.num_moe_experts > 0 ? kRoutingMargin : INFINITY);
    }
    for (const int64_t B : {6, 8}) {
      SCOPED_TRACE("the decode-gemv modes' prompts, B=" + std::to_string(B));
      const auto prompts = gemv_mode_prompts(B);
      ASSERT_EQ(static_cast<int64_t>(prompts.size()), B);
      EXPECT_EQ(prompts[0].size(), 8u);  // the longest prompt: the prefill's calls are of up to 8 rows
      const auto w = weights_for(m, kGemvModesSeed, prompts);
      ASSERT_FALSE(w.empty());
      for (const auto& prompt : prompts) {
        ASSERT_LE(prompt.size(), 8u);
        EXPECT_GE(routing_margin(m, w, prompt), m.num_moe_experts > 0 ? kRoutingMargin : INFINITY);
      }
    }
  }
}

TEST(DecoderKindsWeights, TheMarginSeesTheExpertBias) {
  const model::ModelSpec m = nemotron3_spec();
  std::vector<float> w = weights_for(m, kSingleSeed, {kSinglePrompt});
  const double with_bias = routing_margin(m, w, kSinglePrompt);
  const model::ModelLayout layout = model::model_layout(m);
  for (const auto& t : layout.tensors()) {
    if (t.name.find("e_score_correction_bias") != std::string::npos) {
      for (int64_t i = 0; i < t.numel; ++i) w[t.offset + i] = 0.0f;
    }
  }
  EXPECT_NE(routing_margin(m, w, kSinglePrompt), with_bias);
}

}  // namespace
}  // namespace sg::test::decoder_kinds
