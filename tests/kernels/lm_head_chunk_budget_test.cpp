// kernels/lm_head.h's chunk budget on any machine: the default, the environment variable that replaces it for
// measurements (a whole number of MiB), an error naming the variable for anything else, and the chunking each
// budget gives llama/1b's and llama/small's heads (8192 rows of a 32768 vocabulary: two chunks by default, one at
// 1024 MiB).
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "kernels/lm_head.h"
#include "test_util.h"

namespace {

using namespace sg;
using sg::test::ScopedEnv;

TEST(LmHeadChunkBudget, DefaultUnlessTheVariableSaysOtherwise) {
  {
    const ScopedEnv env(kernels::kLmHeadChunkBudgetVariable, nullptr);
    EXPECT_EQ(kernels::lm_head_chunk_budget_bytes(), kernels::kLmHeadDefaultChunkBudgetBytes);
  }
  {
    const ScopedEnv env(kernels::kLmHeadChunkBudgetVariable, "1024");
    EXPECT_EQ(kernels::lm_head_chunk_budget_bytes(), size_t{1} << 30);
  }
  for (const char* bad : {"", "0", "-5", "1.5", "12x", " 64", "65537", "99999999999999999999"}) {
    const ScopedEnv env(kernels::kLmHeadChunkBudgetVariable, bad);
    const std::string msg = test::thrown_message([] { kernels::lm_head_chunk_budget_bytes(); });
    EXPECT_NE(msg.find(std::string("STEPGRAPH_LM_HEAD_CHUNK_MIB='") + bad + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("whole number of MiB"), std::string::npos) << msg;
  }
}

TEST(LmHeadChunkBudget, ChunksOfThe8192RowHeads) {
  for (const int64_t H : {768, 2048}) {  // llama/small, llama/1b
    const kernels::LmHeadShape shape{.T = 8192, .H = H, .V = 32768};
    const kernels::LmHeadLayout by_default = kernels::lm_head_layout(shape);
    EXPECT_EQ(by_default.num_chunks, 2);
    EXPECT_EQ(by_default.chunk_rows, 4096);
    const kernels::LmHeadLayout one = kernels::lm_head_layout(shape, size_t{1} << 30);
    EXPECT_EQ(one.num_chunks, 1);
    EXPECT_EQ(one.chunk_rows, 8192);
    EXPECT_GT(one.workspace_bytes, by_default.workspace_bytes + (size_t{500} << 20));
  }
}

}  // namespace
