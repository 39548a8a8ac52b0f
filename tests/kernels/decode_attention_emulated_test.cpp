// KV-cache attention (src/kernels/decode_attention.cuh: the append, the split attention and the merge), run on
// the CPU by tests/simt_emulator.h with the launchers' own checks and launch sequence, on
// decode_attention_case.h's scenario (small shapes: the emulator is slow), outputs and workspace poisoned
// before each run; splits of several tiles, and one split of several tiles; split_plan's and heads_per_block's
// rules over many shapes; a position outside the cache gives NaN through the merge; bad parameters (a missing
// workspace among them) are refused before any launch.
#define SG_SIMT_EMULATION 1
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "core/strings.h"
#include "gpu_test_util.h"  // bf16 conversions only: nothing here touches a GPU
#include "kernels/decode_attention.cuh"
#include "kernels/decode_attention_case.h"
#include "simt_emulator.h"

namespace sg {
namespace {

using kernels::decode_attention_workspace_bytes;
namespace da = kernels::decode_attention;

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// Appends the rows' k and v to the caches and attends, in the emulator, with the whole workspace filled with
// `fill` first; the output starts as `fill` too (NaN poisons: an element the kernels forget fails a comparison).
std::vector<float> append_and_attend(std::vector<bf16>& k, std::vector<bf16>& v, const std::vector<bf16>& qkv,
                                     const std::vector<int32_t>& positions, const ref::DecodeAttentionShape& s,
                                     float fill) {
  da::run_append(
      emu::Launch{},
      {.k_cache = k.data(), .v_cache = v.data(), .qkv = qkv.data(), .positions = positions.data(), .shape = s});
  std::vector<bf16> out = test::to_bf16(std::vector<float>(s.T * s.heads * s.head_dim, fill));
  const size_t workspace_bytes = decode_attention_workspace_bytes(s.head_dim);
  std::vector<float> workspace(workspace_bytes / sizeof(float), fill);
  da::run_attention(emu::Launch{}, {.out = out.data(),
                                    .qkv = qkv.data(),
                                    .k_cache = k.data(),
                                    .v_cache = v.data(),
                                    .positions = positions.data(),
                                    .shape = s,
                                    .workspace = workspace.data(),
                                    .workspace_bytes = workspace_bytes});
  return test::to_float(out);
}

// decode_attention_case.h's backend: caches of zeros, outputs and workspace poisoned.
class EmulatedBackend {
 public:
  explicit EmulatedBackend(const test::DecodeAttentionCase& c)
      : k_(test::to_bf16(std::vector<float>(c.slots * c.kv_heads * c.capacity * c.d, 0.0f))), v_(k_) {}
  std::vector<float> run(const std::vector<float>& qkv, const std::vector<int32_t>& positions,
                         const ref::DecodeAttentionShape& s) {
    return append_and_attend(k_, v_, test::to_bf16(qkv), positions, s, kNan);
  }
  std::pair<std::vector<float>, std::vector<float>> caches() const { return {test::to_float(k_), test::to_float(v_)}; }

 private:
  std::vector<bf16> k_, v_;
};

// Splits (split_plan) of each run, prefill / decoding step; blocks take heads_per_block query heads:
//   slots2_cap200_d64_P100: 7 of 32 keys, the later ones past the first rows' positions (empty) / the same
//   slots1_cap100_d36_P70: 4 / 4; head_dim 36 (element-by-element tile loads)
//   slots3_cap70_d100_P20: 3 / 3; head_dim 100 (4 values a lane, the last lanes idle)
//   slots1_cap130_d256_P65: 5 / 5, the last two past every position; the largest head_dim
//   slots2_cap80_h12_kv1_d32_P40: 3 / 3; 12 query heads a KV head: two blocks of 6 (8 at most)
//   slots1_cap50_h9_kv1_d16_P30: 2 / 2; 9 query heads a KV head: three blocks of 3
const test::DecodeAttentionCase kCases[] = {{2, 200, 4, 2, 64, 100}, {1, 100, 2, 1, 36, 70}, {3, 70, 6, 3, 100, 20},
                                            {1, 130, 2, 2, 256, 65}, {2, 80, 12, 1, 32, 40}, {1, 50, 9, 1, 16, 30}};

class DecodeAttentionEmulated : public ::testing::TestWithParam<test::DecodeAttentionCase> {};

TEST_P(DecodeAttentionEmulated, PrefillThenDecodeMatchReference) {
  EmulatedBackend backend(GetParam());
  test::check_decode_attention_case(GetParam(), backend);
}

INSTANTIATE_TEST_SUITE_P(Shapes, DecodeAttentionEmulated, ::testing::ValuesIn(kCases), [](const auto& info) {
  const test::DecodeAttentionCase& c = info.param;
  return strprintf("slots%lld_cap%lld_h%lld_kv%lld_d%lld_P%lld", static_cast<long long>(c.slots),
                   static_cast<long long>(c.capacity), static_cast<long long>(c.heads),
                   static_cast<long long>(c.kv_heads), static_cast<long long>(c.d), static_cast<long long>(c.prompt));
});

// Runs one decoding row per sequence (heads 4, KV heads 2, head_dim 32) over caches filled at random up to the
// rows' positions, against the reference.
void check_over_random_caches(int64_t slots, int64_t capacity, const std::vector<int32_t>& positions) {
  const ref::DecodeAttentionShape s{
      .T = slots, .rows_per_slot = 1, .slots = slots, .capacity = capacity, .heads = 4, .kv_heads = 2, .head_dim = 32};
  const int64_t cache = slots * s.kv_heads * capacity * s.head_dim;
  const auto k = test::round_bf16(test::random_normal(cache, 31)), v = test::round_bf16(test::random_normal(cache, 32));
  const auto qkv = test::round_bf16(test::random_normal(slots * s.qkv_width(), 33));
  // The row's own k and v go to its position first, as in a decoding step.
  std::vector<float> k_ref = k, v_ref = v;
  ref::kv_cache_append(k_ref.data(), v_ref.data(), qkv.data(), positions.data(), s);
  std::vector<float> out_ref(slots * s.heads * s.head_dim);
  ref::decode_attention_forward(out_ref.data(), qkv.data(), k_ref.data(), v_ref.data(), positions.data(), s);

  std::vector<bf16> k_cache = test::to_bf16(k), v_cache = test::to_bf16(v);
  const std::vector<float> out = append_and_attend(k_cache, v_cache, test::to_bf16(qkv), positions, s, kNan);
  EXPECT_EQ(test::to_float(k_cache), k_ref);
  EXPECT_LT(test::relative_error(out, out_ref), test::kBf16RelTol);
}

// 64 sequences x 4 heads = 256 pairs over a 1100-position cache: 12 splits of 96 keys, so each block's online
// softmax rescales across 3 tiles before the merge; rows at positions 1040 to 1099.
TEST(DecodeAttentionEmulatedMisc, SplitsOfSeveralTiles) {
  const ref::DecodeAttentionShape s{.T = 64, .slots = 64, .capacity = 1100, .heads = 4, .kv_heads = 2, .head_dim = 32};
  ASSERT_EQ(da::split_plan(s).splits, 12);
  ASSERT_EQ(da::split_plan(s).split_keys, 96);
  std::vector<int32_t> positions(64);
  for (int64_t t = 0; t < 64; ++t) positions[t] = static_cast<int32_t>(1040 + t % 60);
  check_over_random_caches(64, 1100, positions);
}

// 520 rows x 4 heads = 2080 pairs, over half of kDecodeAttentionMaxPartials: one split, whose block runs three
// tiles (the last one partial) and writes the output itself.
TEST(DecodeAttentionEmulatedMisc, OneSplitOfSeveralTiles) {
  const ref::DecodeAttentionShape s{.T = 520, .slots = 520, .capacity = 80, .heads = 4, .kv_heads = 2, .head_dim = 32};
  ASSERT_EQ(da::split_plan(s).splits, 1);
  std::vector<int32_t> positions(520);
  for (int64_t t = 0; t < 520; ++t) positions[t] = static_cast<int32_t>(66 + t % 14);
  check_over_random_caches(520, 80, positions);
}

TEST(DecodeAttentionSplitPlan, CoversTheCacheWithinTheWorkspace) {
  for (const int64_t T : {1, 2, 3, 8, 17, 64, 255, 256, 600, 2049}) {
    for (const int64_t heads : {1, 2, 4, 16, 32, 64}) {
      for (const int64_t capacity : {1, 31, 32, 33, 64, 65, 200, 1000, 4096, 100000}) {
        const ref::DecodeAttentionShape s{
            .T = T, .slots = T, .capacity = capacity, .heads = heads, .kv_heads = 1, .head_dim = 256};
        const da::SplitPlan plan = da::split_plan(s);
        const std::string where =
            strprintf("T %lld heads %lld capacity %lld: %lld splits of %lld keys", static_cast<long long>(T),
                      static_cast<long long>(heads), static_cast<long long>(capacity),
                      static_cast<long long>(plan.splits), static_cast<long long>(plan.split_keys));
        ASSERT_GE(plan.splits, 1) << where;
        EXPECT_GE(plan.splits * plan.split_keys, capacity) << where << ": keys left out";
        EXPECT_LT((plan.splits - 1) * plan.split_keys, capacity) << where << ": a split empty even at a full cache";
        EXPECT_LE(static_cast<size_t>(da::workspace_floats(s, plan)) * sizeof(float),
                  decode_attention_workspace_bytes(s.head_dim))
            << where;
        if (plan.splits > 1) {
          EXPECT_EQ(plan.split_keys % da::kTileKeys, 0) << where;
          EXPECT_LE(T * heads * plan.splits, kernels::kDecodeAttentionMaxPartials) << where;
        }
        const int64_t tiles = (capacity + da::kTileKeys - 1) / da::kTileKeys;
        if (T * heads * tiles <= kernels::kDecodeAttentionMaxPartials) {
          EXPECT_EQ(plan.splits, tiles) << where << ": the workspace allows a split per tile";
        }
        if (2 * T * heads > kernels::kDecodeAttentionMaxPartials) {
          EXPECT_EQ(plan.splits, 1) << where;
        }
      }
    }
  }
  // A decoding step of Llama 1b (16 heads), a 256-position cache: 8 splits of one tile.
  const da::SplitPlan plan =
      da::split_plan({.T = 1, .slots = 1, .capacity = 256, .heads = 16, .kv_heads = 16, .head_dim = 128});
  EXPECT_EQ(plan.splits, 8);
  EXPECT_EQ(plan.split_keys, 32);
}

TEST(DecodeAttentionSplitPlan, HeadsPerBlockDivideTheGroupUpToEight) {
  const std::pair<int64_t, int64_t> group_and_heads_per_block[] = {{1, 1}, {2, 2},  {3, 3},  {4, 4},  {8, 8},
                                                                   {9, 3}, {11, 1}, {12, 6}, {16, 8}, {64, 8}};
  for (const auto& [group, expected] : group_and_heads_per_block) {
    EXPECT_EQ(
        da::heads_per_block({.T = 1, .slots = 1, .capacity = 8, .heads = 2 * group, .kv_heads = 2, .head_dim = 8}),
        expected)
        << "query heads per KV head: " << group;
  }
}

TEST(DecodeAttentionEmulatedMisc, PositionOutsideTheCacheGivesNanThroughTheMerge) {
  const ref::DecodeAttentionShape s{.T = 3, .slots = 3, .capacity = 256, .heads = 4, .kv_heads = 2, .head_dim = 64};
  ASSERT_GT(da::split_plan(s).splits, 1);
  const int64_t cache = 3 * 2 * 256 * 64;
  std::vector<bf16> k = test::to_bf16(std::vector<float>(cache, 0.0f)), v = k;
  const auto qkv = test::to_bf16(test::random_normal(3 * s.qkv_width(), 5));
  const std::vector<int32_t> positions = {-1, 256, 1 << 30};
  // Output and workspace start as zeros, so every NaN is one the kernels wrote.
  const std::vector<float> out = append_and_attend(k, v, qkv, positions, s, 0.0f);
  for (float x : test::to_float(k)) ASSERT_EQ(x, 0.0f);
  for (float x : out) ASSERT_TRUE(std::isnan(x));
}

TEST(DecodeAttentionEmulatedMisc, RejectsBadParams) {
  ref::DecodeAttentionShape s{.T = 1, .slots = 1, .capacity = 256, .heads = 2, .kv_heads = 1, .head_dim = 512};
  std::vector<bf16> b(1 << 16);
  std::vector<float> workspace(decode_attention_workspace_bytes(256) / sizeof(float));
  const std::vector<int32_t> pos = {0};
  const auto run = [&](const int32_t* positions, void* ws, size_t ws_bytes) {
    da::run_attention(emu::Launch{}, {.out = b.data(),
                                      .qkv = b.data(),
                                      .k_cache = b.data(),
                                      .v_cache = b.data(),
                                      .positions = positions,
                                      .shape = s,
                                      .workspace = ws,
                                      .workspace_bytes = ws_bytes});
  };
  const auto message = [&](const int32_t* positions, void* ws, size_t ws_bytes) -> std::string {
    try {
      run(positions, ws, ws_bytes);
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_NE(message(pos.data(), workspace.data(), workspace.size() * 4).find("head_dim = 512 exceeds"),
            std::string::npos);
  s.head_dim = 64;
  EXPECT_NE(message(nullptr, workspace.data(), workspace.size() * 4).find("null positions"), std::string::npos);
  // One row of 2 heads over 256 positions: 8 splits, which need the workspace.
  EXPECT_NE(message(pos.data(), nullptr, 0).find("need a workspace of"), std::string::npos);
  EXPECT_NE(message(pos.data(), workspace.data(), 64).find("reserve decode_attention_workspace_bytes(head_dim)"),
            std::string::npos);
  s.T = 0;  // nothing to do: no workspace needed, nothing launched
  EXPECT_EQ(message(pos.data(), nullptr, 0), "(no error)");
}

}  // namespace
}  // namespace sg
