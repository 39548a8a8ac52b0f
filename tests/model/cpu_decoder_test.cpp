// The CPU decoder (`stepgraph generate --cpu`, and generate for MoE and Mamba models):
//   * greedy tokens equal the argmax of the logits recomputed from scratch over the whole sequence at
//     every step (tests/model/reference_forward.h: the training twins, no KV cache or kept state), for
//     untied and tied embeddings, GQA and Llama 3 RoPE scaling, Mixtral-style MoE blocks, a hybrid of
//     Mamba, attention without RoPE and squared-ReLU MLP, and Nemotron 3's MoE (sigmoid routing with the
//     expert bias, a shared expert, squared-ReLU experts); its logits match that recomputation;
//   * the state each kind keeps is per sequence: a batch of prompts gives each prompt's tokens alone,
//     also for the hybrid; and start() begins every sequence afresh;
//   * generation is deterministic (greedy, and sampling with a seed; another seed draws differently);
//   * a batch of prompts of different lengths gives each prompt's greedy tokens as it alone does;
//   * ids are drawn from the sampled vocabulary only (a tokenizer smaller than the padded model's);
//   * a request it cannot serve is refused naming the option.
#include "model/cpu_decoder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "model/init.h"
#include "model/reference_forward.h"
#include "test_util.h"
#include "tiny_model.h"

namespace sg {
namespace {

model::DecodeSpec decode_spec(int64_t batch, int64_t max_prompt, int64_t max_new, float temperature = 0.0f,
                              uint64_t seed = 1) {
  return test::decode_request(batch, max_prompt, max_new, temperature, 0, seed);
}

std::vector<std::vector<int32_t>> generate(const model::ModelSpec& m, const std::vector<float>& w,
                                           const model::DecodeSpec& d, const std::vector<std::vector<int32_t>>& prompts,
                                           std::vector<float>* last_logits = nullptr) {
  model::CpuDecoder decoder(m, w, d);
  decoder.start(prompts);
  decoder.decode(d.max_new_tokens - 1);
  if (last_logits) *last_logits = decoder.last_logits();
  return decoder.generated();
}

void expect_greedy_equals_full_recompute(const model::ModelSpec& m, const std::vector<float>& w) {
  const std::vector<int32_t> prompt = {3, 17, 42, 8, 60};
  const int64_t max_new = 12;
  std::vector<float> last;
  const auto out = generate(m, w, decode_spec(1, 5, max_new), {prompt}, &last);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(static_cast<int64_t>(out[0].size()), max_new);
  std::vector<int32_t> seq = prompt;
  std::vector<float> logits;
  for (int64_t i = 0; i < max_new; ++i) {
    logits = test::full_sequence_logits(m, w, seq);
    ASSERT_EQ(out[0][i], test::argmax_last_row(logits, m.vocab_size)) << "token " << i;
    seq.push_back(out[0][i]);
  }
  // The logits of the last step (sequence without its last token) agree with the recomputation.
  seq.pop_back();
  logits = test::full_sequence_logits(m, w, seq);
  const std::vector<float> want(logits.end() - m.vocab_size, logits.end());
  EXPECT_LT(test::relative_error(last, want), 1e-5);
}

void expect_greedy_equals_full_recompute(const model::ModelSpec& m, uint64_t seed) {
  expect_greedy_equals_full_recompute(m, model::initial_parameters(model::model_layout(m), seed));
}

TEST(CpuDecoder, GreedyEqualsArgmaxOfFullRecompute) {
  expect_greedy_equals_full_recompute(test::decoder_test_spec(), 7);
}

TEST(CpuDecoder, GreedyEqualsFullRecomputeTiedGqaRopeScaling) {
  auto m = test::decoder_test_spec();
  m.share_embeddings_and_output_weights = true;
  m.num_query_groups = 1;
  m.rope_scaling.factor = 8.0;
  m.rope_scaling.original_max_position_embeddings = 64.0;  // head_dim 8, base 1e4: pairs in every regime
  expect_greedy_equals_full_recompute(m, 8);
}

// Partial rotary (Phi-4-mini's share of each head): the decoding twin rotates the first dimensions at each row's
// position as the training twin does at t % S.
TEST(CpuDecoder, GreedyEqualsFullRecomputePartialRotary) {
  auto m = test::decoder_test_spec();
  m.rotary_dim = 6;  // of head_dim 8
  expect_greedy_equals_full_recompute(m, 9);
}

// LongRoPE (Phi-3.5's and Phi-4-mini's): a factor per rotated pair and cos and sin times the attention factor, in the
// decoding twin as in the training twin.
TEST(CpuDecoder, GreedyEqualsFullRecomputeLongRope) {
  auto m = test::decoder_test_spec();
  m.rotary_dim = 6;  // of head_dim 8: 3 pairs
  m.rope_scaling.longrope_pairs = 3;
  m.rope_scaling.longrope_factors[0] = 1.0f;
  m.rope_scaling.longrope_factors[1] = 2.5f;
  m.rope_scaling.longrope_factors[2] = 4.0f;
  m.rope_scaling.attention_factor = 1.25;
  expect_greedy_equals_full_recompute(m, 10);
}

// Sets element i of every tensor of `layout` whose name contains `part` to value(i, n) (n: that tensor's place among
// them, from 1); returns how many it set.
template <class Value>
int set_named_tensors(const model::ModelLayout& layout, std::vector<float>& w, const char* part, const Value& value) {
  int n = 0;
  for (const auto& t : layout.tensors()) {
    if (t.name.find(part) == std::string::npos) continue;
    ++n;
    for (int64_t i = 0; i < t.numel; ++i) w[t.offset + i] = value(i, n);
  }
  return n;
}

// Qwen3's query and key norms, their weights away from the ones of the init so that a norm that read another
// head's weights, or the keys' weights for the queries, would differ.
TEST(CpuDecoder, GreedyEqualsFullRecomputeQwen3QueryKeyNorms) {
  auto m = test::decoder_test_spec();
  m.qk_layernorm = true;
  const model::ModelLayout layout = model::model_layout(m);
  std::vector<float> w = model::initial_parameters(layout, 9);
  const auto around = [](float center) {
    return [center](int64_t i, int) { return center + 0.05f * static_cast<float>(i % 7); };
  };
  ASSERT_EQ(set_named_tensors(layout, w, "q_norm.weight", around(1.4f)), m.num_layers);
  ASSERT_EQ(set_named_tensors(layout, w, "k_norm.weight", around(0.6f)), m.num_layers);
  expect_greedy_equals_full_recompute(m, w);
}

// Qwen2's QKV bias, drawn away from the zeros of the init (a decoder that left it out, or added the query's bias to
// the keys, would differ).
TEST(CpuDecoder, GreedyEqualsFullRecomputeQwen2QkvBias) {
  auto m = test::decoder_test_spec();
  m.add_qkv_bias = true;
  const model::ModelLayout layout = model::model_layout(m);
  std::vector<float> w = model::initial_parameters(layout, 10);
  const int biases = set_named_tensors(
      layout, w, "_proj.bias", [](int64_t i, int n) { return 0.4f * std::sin(0.7f * static_cast<float>(i + n)); });
  ASSERT_EQ(biases, 3 * m.num_layers);  // q, k and v of every attention
  expect_greedy_equals_full_recompute(m, w);
}

// Llama's biases on every linear (model.add_bias_linear), drawn away from the zeros of the init: q, k, v and o_proj's,
// and the MLP's (fc1's before SwiGLU, fc2's).
TEST(CpuDecoder, GreedyEqualsFullRecomputeLlamaLinearBiases) {
  auto m = test::decoder_test_spec();
  m.add_bias_linear = true;
  const model::ModelLayout layout = model::model_layout(m);
  std::vector<float> w = model::initial_parameters(layout, 11);
  const int biases = set_named_tensors(
      layout, w, "_proj.bias", [](int64_t i, int n) { return 0.3f * std::cos(0.9f * static_cast<float>(i + 2 * n)); });
  ASSERT_EQ(biases, 7 * m.num_layers);  // q, k, v, o; gate, up, down of every block
  expect_greedy_equals_full_recompute(m, w);
}

// decoder_test_spec's sizes with a hybrid pattern in Nemotron-H's style: Mamba (4 heads of 4, 2 groups,
// state 4), attention without RoPE, squared-ReLU MLP.
model::ModelSpec hybrid_decoder_spec(const std::string& pattern) {
  model::ModelSpec m = test::tiny_hybrid_spec(pattern);
  const model::ModelSpec dense = test::decoder_test_spec();
  m.vocab_size = dense.vocab_size;
  m.hidden_size = dense.hidden_size;
  m.ffn_hidden_size = dense.ffn_hidden_size;
  m.seq_length = dense.seq_length;
  m.init_method_std = dense.init_method_std;
  return m;
}

model::ModelSpec mixtral_decoder_spec() { return test::with_mixtral_experts(test::decoder_test_spec()); }

// Nemotron 3's MoE (recipes/hybrid/tiny_hybrid_moe.yaml) on the hybrid: 6 squared-ReLU experts top-2 and a shared
// expert, sigmoid routing with an expert bias that changes the choice, scaled by 2.5.
model::ModelSpec nemotron3_decoder_spec() {
  model::ModelSpec m = hybrid_decoder_spec("ME*EM-");
  m.num_moe_experts = 6;
  m.moe_router_topk = 2;
  m.moe_ffn_hidden_size = 20;
  m.moe.shared_expert_intermediate_size = 28;
  m.moe.score_function = ref::MoeScoreFunction::sigmoid;
  m.moe.enable_expert_bias = true;
  m.moe.topk_scaling_factor = 2.5;
  return m;
}

// Initial weights with each MoE layer's expert bias set to distinct values, so that it steers the choice.
std::vector<float> weights_with_expert_bias(const model::ModelSpec& m, uint64_t seed) {
  const model::ModelLayout layout = model::model_layout(m);
  auto w = model::initial_parameters(layout, seed);
  for (const auto& t : layout.tensors()) {
    if (t.name.find("e_score_correction_bias") == std::string::npos) continue;
    for (int64_t e = 0; e < t.numel; ++e)
      w[static_cast<size_t>(t.offset + e)] = 0.3f * static_cast<float>((e * 5) % 7 - 3);
  }
  return w;
}

TEST(CpuDecoder, GreedyEqualsFullRecomputeMixtralMoe) {
  expect_greedy_equals_full_recompute(mixtral_decoder_spec(), 13);
}

// Megatron's expert biases (add_bias_linear with Mixtral's experts): each expert's w1, w3 and w2 bias, and the
// attention's, drawn away from the zeros of the init.
TEST(CpuDecoder, GreedyEqualsFullRecomputeMixtralExpertBiases) {
  model::ModelSpec m = mixtral_decoder_spec();
  m.add_bias_linear = true;
  const model::ModelLayout layout = model::model_layout(m);
  std::vector<float> w = model::initial_parameters(layout, 13);
  const int biases = set_named_tensors(
      layout, w, ".bias", [](int64_t i, int n) { return 0.3f * std::sin(0.7f * static_cast<float>(i + 3 * n)); });
  ASSERT_EQ(biases, (4 + 3 * m.num_moe_experts) * m.num_layers);  // q, k, v, o; w1, w3, w2 of every expert
  expect_greedy_equals_full_recompute(m, w);
}

// Qwen2-MoE: Mixtral's experts plus a gated shared expert (moe_shared_expert_gate) and the QKV bias.
TEST(CpuDecoder, GreedyEqualsFullRecomputeQwen2MoeGatedSharedExpert) {
  model::ModelSpec m = mixtral_decoder_spec();
  m.moe.shared_expert_intermediate_size = 24;
  m.moe.shared_expert_gate = true;
  m.add_qkv_bias = true;
  expect_greedy_equals_full_recompute(m, 17);
}

TEST(CpuDecoder, GreedyEqualsFullRecomputeHybridMamba) {
  expect_greedy_equals_full_recompute(hybrid_decoder_spec("M*-M-"), 14);
}

TEST(CpuDecoder, GreedyEqualsFullRecomputeNemotron3Moe) {
  const model::ModelSpec m = nemotron3_decoder_spec();
  expect_greedy_equals_full_recompute(m, weights_with_expert_bias(m, 15));
}

// The hybrid's kept states are per sequence and start afresh: prompts of different lengths in one batch give
// each prompt's tokens alone, and the same decoder started again gives them again.
TEST(CpuDecoder, HybridBatchEqualsEachPromptAloneAndRestarts) {
  const model::ModelSpec m = nemotron3_decoder_spec();
  const auto w = weights_with_expert_bias(m, 16);
  const std::vector<std::vector<int32_t>> prompts = {{5, 6, 7}, {9, 1, 1, 2, 33, 4, 0}, {63}};
  model::CpuDecoder decoder(m, w, decode_spec(3, 7, 9));
  std::vector<std::vector<int32_t>> first;
  for (int run = 0; run < 2; ++run) {
    decoder.start(prompts);
    decoder.decode(8);
    if (run == 0) first = decoder.generated();
    EXPECT_EQ(decoder.generated(), first) << "run " << run;
  }
  for (size_t b = 0; b < prompts.size(); ++b) {
    const auto p = static_cast<int64_t>(prompts[b].size());
    EXPECT_EQ(first[b], generate(m, w, decode_spec(1, p, 9), {prompts[b]})[0]) << "prompt " << b;
  }
}

// What the decoder keeps per sequence: each attention layer's K and V, each Mamba layer's last 3 conv inputs
// and SSM state; MLP and MoE layers keep nothing.
TEST(CpuDecoder, StateBytesCountEachKindsState) {
  const model::ModelSpec m = nemotron3_decoder_spec();  // ME*EM-: 1 attention, 2 Mamba layers
  const model::DecodeSpec d = decode_spec(3, 7, 9);
  const double kv = 2.0 * 3 * m.num_query_groups * 16 * m.head_dim() * 4;
  const double mamba = 2.0 * 3 * (m.mamba_conv_dim() * 3 + m.mamba_heads() * m.mamba.head_dim * m.mamba.state_dim) * 4;
  EXPECT_EQ(model::CpuDecoder::state_bytes(m, d), kv + mamba);
  const model::ModelSpec mixtral = mixtral_decoder_spec();  // 2 blocks: 2 attention layers
  EXPECT_EQ(model::CpuDecoder::state_bytes(mixtral, d),
            2.0 * 2 * 3 * mixtral.num_query_groups * 16 * mixtral.head_dim() * 4);
}

TEST(CpuDecoder, DeterministicAndSeeded) {
  const auto m = test::decoder_test_spec();
  const auto w = model::initial_parameters(model::model_layout(m), 9);
  const std::vector<std::vector<int32_t>> prompt = {{1, 2, 3}};
  EXPECT_EQ(generate(m, w, decode_spec(1, 3, 10), prompt), generate(m, w, decode_spec(1, 3, 10), prompt));
  const auto a = generate(m, w, decode_spec(1, 3, 16, 1.5f, 1), prompt);
  EXPECT_EQ(a, generate(m, w, decode_spec(1, 3, 16, 1.5f, 1), prompt));
  EXPECT_NE(a, generate(m, w, decode_spec(1, 3, 16, 1.5f, 2), prompt));
  // The same decoder restarted gives the same tokens (start() resets the cache and the history).
  model::CpuDecoder decoder(m, w, decode_spec(1, 3, 16, 1.5f, 1));
  for (int run = 0; run < 2; ++run) {
    decoder.start(prompt);
    decoder.decode(15);
    EXPECT_EQ(decoder.generated(), a) << "run " << run;
  }
}

// A tokenizer smaller than the model's (padded) vocabulary: greedy is the argmax of its ids alone, and a hot
// temperature draws widely but never an id past it.
TEST(CpuDecoder, DrawsOnlyFromTheSampledVocabulary) {
  const auto m = test::decoder_test_spec();
  const auto w = model::initial_parameters(model::model_layout(m), 12);
  const int64_t sample_vocab = 13;
  auto greedy = decode_spec(1, 3, 1);
  greedy.sample_vocab = sample_vocab;
  std::vector<float> logits;
  const auto first = generate(m, w, greedy, {{1, 2, 3}}, &logits);
  EXPECT_EQ(first[0][0],
            test::argmax_last_row(std::vector<float>(logits.begin(), logits.begin() + sample_vocab), sample_vocab));
  auto hot = decode_spec(1, 3, 200, 5.0f);
  hot.sample_vocab = sample_vocab;
  const auto drawn = generate(m, w, hot, {{1, 2, 3}})[0];
  EXPECT_LT(*std::max_element(drawn.begin(), drawn.end()), sample_vocab);
  EXPECT_GT(std::set<int32_t>(drawn.begin(), drawn.end()).size(), 6u);
  auto too_many = decode_spec(1, 3, 2);
  too_many.sample_vocab = m.vocab_size + 1;
  EXPECT_NE(test::thrown_message([&] { model::CpuDecoder(m, w, too_many); }).find("sample_vocab"), std::string::npos);
}

TEST(CpuDecoder, BatchEqualsEachPromptAlone) {
  const auto m = test::decoder_test_spec();
  const auto w = model::initial_parameters(model::model_layout(m), 10);
  const std::vector<std::vector<int32_t>> prompts = {{5, 6, 7}, {9, 1, 1, 2, 33, 4, 0}, {63}};
  const auto batch = generate(m, w, decode_spec(3, 7, 9), prompts);
  for (size_t b = 0; b < prompts.size(); ++b) {
    const auto p = static_cast<int64_t>(prompts[b].size());
    EXPECT_EQ(batch[b], generate(m, w, decode_spec(1, p, 9), {prompts[b]})[0]) << "prompt " << b;
  }
}

TEST(CpuDecoder, RefusesWhatItCannotServe) {
  const auto m = test::decoder_test_spec();
  const auto w = model::initial_parameters(model::model_layout(m), 11);
  model::CpuDecoder decoder(m, w, decode_spec(1, 4, 3));
  EXPECT_NE(test::thrown_message([&] {
              decoder.start({{1, 2, 3, 4, 5}});
            }).find("more than the 4 planned"),
            std::string::npos);
  EXPECT_NE(test::thrown_message([&] {
              decoder.start({{1, 64}});
            }).find("outside the model's vocabulary"),
            std::string::npos);
  EXPECT_NE(test::thrown_message([&] { decoder.start({{}}); }).find("no tokens"), std::string::npos);
  decoder.start({{1, 2}});
  EXPECT_NE(test::thrown_message([&] { decoder.decode(3); }).find("exceed max_new_tokens"), std::string::npos);
  auto bad = decode_spec(1, 4, 3, -1.0f);
  EXPECT_NE(test::thrown_message([&] { model::CpuDecoder(m, w, bad); }).find("--temperature"), std::string::npos);
}

}  // namespace
}  // namespace sg
