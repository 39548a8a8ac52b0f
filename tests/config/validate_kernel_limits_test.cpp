// Rule 16's kernel limits: the shapes the GPU kernels are built for, checked only for the layer kinds the stack
// has (every block kind of a GPT stack that cannot be listed), each mistake reported once, with a fix that names
// a concrete value.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/validate.h"
#include "validation_report_text.h"

namespace sg::config {
namespace {

using test::check_recipe;
using test::describe;
using test::names_key;

// Violations of rule 16 naming `key`.
std::vector<config::Violation> naming(const config::ValidationReport& r, const std::string& key) {
  std::vector<config::Violation> out;
  for (const auto& v : r.violations) {
    if (v.rule == 16 && names_key(v, key)) out.push_back(v);
  }
  return out;
}

TEST(Validate, KernelLimitsAreCheckedOnlyForTheLayerKindsPresent) {
  // No attention layer (Mamba and MLP only): the attention kernel's head_dim and seq_len limits do not apply.
  EXPECT_TRUE(check_recipe("llama/tiny", {"model.hybrid_override_pattern=M-M-", "model.kv_channels=12"}).ok());
  EXPECT_TRUE(check_recipe("llama/tiny", {"model.hybrid_override_pattern=M-M-", "model.kv_channels=300"}).ok());
  EXPECT_TRUE(
      check_recipe("llama/tiny", {"model.hybrid_override_pattern=M-M-", "model.num_attention_heads=64"})  // head_dim 4
          .ok());
  EXPECT_FALSE(check_recipe("llama/tiny", {"model.num_attention_heads=64"}).ok());
  // One attention layer is enough to bring them in.
  const config::ValidationReport with_attention =
      check_recipe("llama/tiny", {"model.hybrid_override_pattern=M*M-", "model.kv_channels=12"});
  ASSERT_EQ(naming(with_attention, "model.kv_channels").size(), 1u) << describe(with_attention);
  EXPECT_NE(naming(with_attention, "model.kv_channels")[0].fix.find("multiple of 8 at most 256"), std::string::npos);
  // No Mamba layer: the SSD scan's head and state sizes do not apply.
  EXPECT_TRUE(check_recipe("llama/tiny", {"model.mamba_state_dim=48", "model.mamba_head_dim=32"}).ok());
  EXPECT_TRUE(check_recipe("llama/tiny", {"model.hybrid_override_pattern=*-*-", "model.mamba_state_dim=48"}).ok());
  // No MoE layer: the grouped GEMMs' alignment does not apply (a moe_layer_freq of zeros has none either).
  EXPECT_TRUE(check_recipe("llama/tiny", {"model.moe_ffn_hidden_size=100"}).ok());
  const config::ValidationReport no_moe_layers =
      check_recipe("moe/tiny_moe", {"model.moe_layer_freq=[0,0,0,0]", "model.moe_ffn_hidden_size=100"});
  EXPECT_TRUE(naming(no_moe_layers, "model.moe_ffn_hidden_size").empty()) << describe(no_moe_layers);
}

// A GPT stack whose blocks cannot be listed (a malformed moe_layer_freq, or more layers than validation expands)
// is checked as if any block could be dense or MoE: the kinds of one of each, as the model composes GPT blocks.
TEST(Validate, KernelLimitsOfAnUnlistedGptStackCoverEveryBlockKind) {
  const config::ValidationReport bad_freq = check_recipe(
      "moe/tiny_moe", {"model.moe_layer_freq=[1,0]", "model.moe_ffn_hidden_size=100", "model.kv_channels=12"});
  EXPECT_EQ(naming(bad_freq, "model.moe_ffn_hidden_size").size(), 1u) << describe(bad_freq);
  EXPECT_EQ(naming(bad_freq, "model.kv_channels").size(), 1u) << describe(bad_freq);
  const config::ValidationReport dense_long =
      check_recipe("llama/tiny", {"model.num_layers=200000", "model.kv_channels=12", "model.moe_ffn_hidden_size=100"});
  EXPECT_EQ(naming(dense_long, "model.kv_channels").size(), 1u) << describe(dense_long);
  EXPECT_TRUE(naming(dense_long, "model.moe_ffn_hidden_size").empty()) << describe(dense_long);  // no experts
  EXPECT_TRUE(naming(dense_long, "model.mamba_head_dim").empty()) << describe(dense_long);
}

TEST(Validate, KernelLimitsReportOneMistakeOnce) {
  // hidden_size not divisible by the heads: that error alone, not a head_dim one after it.
  const config::ValidationReport indivisible =
      check_recipe("llama/tiny", {"model.hidden_size=264", "model.num_attention_heads=5", "model.num_query_groups=5"});
  ASSERT_EQ(naming(indivisible, "model.num_attention_heads").size(), 1u) << describe(indivisible);
  EXPECT_NE(naming(indivisible, "model.num_attention_heads")[0].message.find("divisible"), std::string::npos);
  // An unsupported mamba_head_dim: that error alone, not the head count computed from it.
  const config::ValidationReport head_dim = check_recipe("hybrid/tiny_hybrid", {"model.mamba_head_dim=48"});
  ASSERT_EQ(naming(head_dim, "model.mamba_head_dim").size(), 1u) << describe(head_dim);
  EXPECT_NE(naming(head_dim, "model.mamba_head_dim")[0].fix.find("mamba_head_dim=64"), std::string::npos);
  // An odd head_dim under RoPE is the attention kernel's multiple-of-8 error, once.
  const config::ValidationReport odd = check_recipe("llama/tiny", {"model.kv_channels=33"});
  ASSERT_EQ(odd.violations.size(), 1u) << describe(odd);
  EXPECT_NE(odd.violations[0].message.find("multiple of 8"), std::string::npos) << describe(odd);
}

TEST(Validate, KernelLimitFixesNameAConcreteValue) {
  const config::ValidationReport heads =
      check_recipe("llama/tiny", {"model.hidden_size=272", "model.num_attention_heads=8"});
  const std::vector<config::Violation> head_violations = naming(heads, "model.num_attention_heads");
  ASSERT_EQ(head_violations.size(), 1u) << describe(heads);
  const config::Violation& v = head_violations[0];
  EXPECT_NE(v.message.find("head_dim = hidden_size / num_attention_heads = 34"), std::string::npos) << v.message;
  EXPECT_NE(v.fix.find("num_attention_heads=2: head_dim 136"), std::string::npos) << v.fix;
  const config::ValidationReport state = check_recipe("hybrid/tiny_hybrid", {"model.mamba_state_dim=48"});
  ASSERT_EQ(naming(state, "model.mamba_state_dim").size(), 1u) << describe(state);
  EXPECT_NE(naming(state, "model.mamba_state_dim")[0].fix.find("16, 32, 64 or 128"), std::string::npos);
  const config::ValidationReport ffn = check_recipe("moe/tiny_moe", {"model.moe_ffn_hidden_size=100"});
  ASSERT_EQ(naming(ffn, "model.moe_ffn_hidden_size").size(), 1u) << describe(ffn);
  EXPECT_NE(naming(ffn, "model.moe_ffn_hidden_size")[0].fix.find("e.g. 104"), std::string::npos);
  const config::ValidationReport wide = check_recipe("llama/tiny", {"model.hidden_size=16392", "model.kv_channels=64"});
  ASSERT_EQ(naming(wide, "model.hidden_size").size(), 1u) << describe(wide);
  EXPECT_NE(naming(wide, "model.hidden_size")[0].fix.find("at most 16384"), std::string::npos);
}

// The Mamba2 gated RMSNorm's groups of d_inner / mamba_num_groups columns: past 58080 its backward asks for more
// shared memory than an sm_90 block may opt into, which failed at the first backward as "invalid argument".
TEST(Validate, GatedNormGroupsWiderThanTheSharedMemoryAreRefusedNamingTheKeys) {
  // d_inner = 4 x 16384 = 65536 (1024 heads of 64) in one group. Attention heads of 128 keep the rest valid.
  const std::vector<std::string> wide = {"model.hidden_size=16384", "model.num_attention_heads=128",
                                         "model.mamba_expand=4", "model.mamba_head_dim=64"};
  std::vector<std::string> one_group = wide;
  one_group.push_back("model.mamba_num_groups=1");
  const config::ValidationReport r = check_recipe("hybrid/tiny_hybrid", one_group);
  const std::vector<config::Violation> v = naming(r, "model.mamba_num_groups");
  ASSERT_EQ(v.size(), 1u) << describe(r);
  ASSERT_EQ(r.violations.size(), 1u) << describe(r);
  for (const char* key : {"model.mamba_expand", "model.hidden_size", "model.mamba_head_dim"}) {
    EXPECT_TRUE(names_key(v[0], key)) << key << ": " << describe(r);
  }
  EXPECT_NE(v[0].message.find("gated RMSNorm"), std::string::npos) << v[0].message;
  EXPECT_NE(v[0].message.find("65536 / 1 = 65536"), std::string::npos) << v[0].message;
  EXPECT_NE(v[0].message.find("232448"), std::string::npos) << v[0].message;  // the limit
  EXPECT_NE(v[0].message.find("at most 58080 columns"), std::string::npos) << v[0].message;
  EXPECT_NE(v[0].fix.find("model.mamba_num_groups=2 (groups of 32768 columns"), std::string::npos) << v[0].fix;
  // Two groups of 32768 fit; so does tiny_hybrid itself.
  std::vector<std::string> two_groups = wide;
  two_groups.push_back("model.mamba_num_groups=2");
  const config::ValidationReport fits = check_recipe("hybrid/tiny_hybrid", two_groups);
  EXPECT_TRUE(fits.ok()) << describe(fits);
  // With mamba_num_heads set, the heads are named instead of the keys they would be derived from.
  const config::ValidationReport heads =
      check_recipe("hybrid/tiny_hybrid", {"model.mamba_num_heads=1024", "model.mamba_num_groups=1"});
  ASSERT_EQ(naming(heads, "model.mamba_num_groups").size(), 1u) << describe(heads);
  EXPECT_TRUE(names_key(naming(heads, "model.mamba_num_groups")[0], "model.mamba_num_heads")) << describe(heads);
}

// Every RMSNorm's weight gradient (num_layers pre-norms and the final norm) is reduced in one launch of at most
// 65535 grid rows: 65534 layers at most, where 100000 passed and failed at the first backward.
TEST(Validate, NumLayersIsBoundedByTheBatchedNormGradientLaunch) {
  for (const char* layers : {"65535", "100000"}) {
    const config::ValidationReport r = check_recipe("llama/tiny", {std::string("model.num_layers=") + layers});
    const std::vector<config::Violation> v = naming(r, "model.num_layers");
    ASSERT_EQ(v.size(), 1u) << describe(r);
    EXPECT_NE(v[0].message.find("model.num_layers must be at most 65534"), std::string::npos) << v[0].message;
    EXPECT_NE(v[0].message.find("num_layers + 1 RMSNorms"), std::string::npos) << v[0].message;
  }
  const config::ValidationReport edge = check_recipe("llama/tiny", {"model.num_layers=65534"});
  EXPECT_TRUE(naming(edge, "model.num_layers").empty()) << describe(edge);
}

}  // namespace
}  // namespace sg::config
