// The kernels' shape limits (kernels/shape_limits.h), the one definition both the kernels' plan-time checks
// and `stepgraph validate` read: each limit passes at its edge, refuses just past it, and says why in words
// the kernel's own error keeps. Host code only: no GPU.
#include "kernels/shape_limits.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace sg {
namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(ShapeLimits, AttentionHeadDimIsAMultipleOf8UpTo256) {
  for (const int64_t d : {8, 64, 128, 136, 256}) EXPECT_EQ(kernels::attention_head_dim_problem(d), "") << d;
  for (const int64_t d : {0, 2, 12, 34, 100, 264, 4096}) {
    const std::string p = kernels::attention_head_dim_problem(d);
    EXPECT_TRUE(has(p, "multiple of 8 and at most 256")) << d << ": " << p;
    EXPECT_TRUE(has(p, "not " + std::to_string(d))) << p;
  }
}

TEST(ShapeLimits, AttentionNeedsTwoTokens) {
  EXPECT_EQ(kernels::attention_seq_len_problem(2), "");
  EXPECT_EQ(kernels::attention_seq_len_problem(8192), "");
  EXPECT_TRUE(has(kernels::attention_seq_len_problem(1), "does not support seq_len 1"));
}

TEST(ShapeLimits, LmHeadHiddenIsAMultipleOf8) {
  EXPECT_EQ(kernels::lm_head_hidden_problem(8), "");
  EXPECT_EQ(kernels::lm_head_hidden_problem(2048), "");
  const std::string p = kernels::lm_head_hidden_problem(260);
  EXPECT_TRUE(has(p, "hidden_size 260 must be a multiple of 8")) << p;
}

TEST(ShapeLimits, RmsNormBackwardWidthPerPath) {
  EXPECT_EQ(kernels::rmsnorm_backward_max_width(true), 16384);
  EXPECT_EQ(kernels::rmsnorm_backward_max_width(false), 8192);
  EXPECT_EQ(kernels::rmsnorm_backward_width_problem(16384, true), "");
  EXPECT_EQ(kernels::rmsnorm_backward_width_problem(8192, false), "");
  EXPECT_TRUE(has(kernels::rmsnorm_backward_width_problem(16392, true), "H = 16392 is wider than"));
  EXPECT_TRUE(has(kernels::rmsnorm_backward_width_problem(8193, false), "wider than"));
  EXPECT_TRUE(has(kernels::rmsnorm_backward_width_problem(8200, false), "16384 columns with H % 8 == 0"));
}

TEST(ShapeLimits, SsdScanHeadDimStateDimAndSize) {
  EXPECT_EQ(kernels::ssd_head_dim_problem(64), "");
  EXPECT_TRUE(has(kernels::ssd_head_dim_problem(32), "headdim 32 is not supported"));
  for (const int64_t n : {16, 32, 64, 128}) EXPECT_EQ(kernels::ssd_state_dim_problem(n), "") << n;
  for (const int64_t n : {0, 8, 48, 96, 256}) {
    EXPECT_TRUE(has(kernels::ssd_state_dim_problem(n), "dstate " + std::to_string(n) + " is not supported")) << n;
  }
  EXPECT_EQ(kernels::ssd_size_problem({.batch = 65535, .seqlen = 256, .nheads = 16, .headdim = 64}), "");
  EXPECT_TRUE(has(kernels::ssd_size_problem({.batch = 65536, .seqlen = 256, .nheads = 16, .headdim = 64}),
                  "shape too large (batch=65536"));
  EXPECT_TRUE(has(kernels::ssd_size_problem({.batch = 1, .seqlen = 1 << 30, .nheads = 1, .headdim = 64}),
                  "too large"));
  EXPECT_FALSE(kernels::ssd_size_problem({.batch = 1, .seqlen = 1, .nheads = 1 << 16, .headdim = 64}).empty());
  // Elements: 2^40 is the bound (4096 x 2^20 x 4 x 64 = 2^40 is one too many).
  EXPECT_FALSE(kernels::ssd_size_problem({.batch = 4096, .seqlen = 1 << 20, .nheads = 4, .headdim = 64}).empty());
  EXPECT_EQ(kernels::ssd_size_problem({.batch = 4096, .seqlen = (1 << 20) - 1, .nheads = 4, .headdim = 64}), "");
}

// The gated RMSNorm backward's group in shared memory: 4 (32 + gs) bytes within sm_90's 232448 (227 KiB) a block
// may opt into; past it cudaFuncSetAttribute failed at the first backward with "invalid argument".
TEST(ShapeLimits, GatedRmsNormGroupWidthFitsTheOptInSharedMemory) {
  EXPECT_EQ(kernels::kGatedRmsNormMaxGroupWidth, 58080);
  EXPECT_EQ(kernels::gated_rmsnorm_backward_smem_bytes(58080), 232448);
  for (const int64_t gs : {1, 64, 12256, 32768, 58080}) EXPECT_EQ(kernels::gated_rmsnorm_group_width_problem(gs), "");
  const std::string p = kernels::gated_rmsnorm_group_width_problem(58081);
  EXPECT_TRUE(has(p, "a group of 58081 columns needs 232452 bytes of shared memory")) << p;
  EXPECT_TRUE(has(p, "232448")) << p;
  EXPECT_TRUE(has(p, "at most 58080 columns")) << p;
  EXPECT_FALSE(kernels::gated_rmsnorm_group_width_problem(65536).empty());
  EXPECT_FALSE(kernels::gated_rmsnorm_group_width_problem(0).empty());
}

TEST(ShapeLimits, GroupedGemmDimsAndRouterGroups) {
  for (const int64_t n : {8, 96, 1408, 4096}) EXPECT_EQ(kernels::grouped_gemm_dim_problem(n), "") << n;
  for (const int64_t n : {0, 4, 100, 130}) {
    EXPECT_TRUE(has(kernels::grouped_gemm_dim_problem(n), "is not a multiple of 8")) << n;
  }
  EXPECT_FALSE(kernels::grouped_gemm_dim_problem(int64_t{1} << 31).empty());
  EXPECT_EQ(kernels::moe_loss_groups_problem(65535), "");
  EXPECT_TRUE(has(kernels::moe_loss_groups_problem(65536), "exceed the grid limit 65535"));
}

}  // namespace
}  // namespace sg
