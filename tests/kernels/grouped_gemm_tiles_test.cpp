// backward_weight's plan-time tile choice (kernels/grouped_gemm_tiles.h): the estimate is whole waves of
// tiles on the SMs times the tile's relative cost, and the choice follows it at the MoE recipes' shapes
// (132 SMs, the H200) and at the GPU tests' small shapes. Plain arithmetic: runs without a GPU.
#include "kernels/grouped_gemm_tiles.h"

#include <gtest/gtest.h>

#include <string>

#include "kernels/grouped_gemm.h"
#include "test_util.h"

namespace sg {
namespace {

using kernels::GroupedGemmDims;
using kernels::WeightGradTile;

constexpr int kH200Sms = 132;

GroupedGemmDims dims(int groups, int64_t n, int64_t k) {
  return {.num_groups = groups, .max_total_rows = 4096, .N = n, .K = k};
}

TEST(WeightGradTile, CostIsWholeWavesTimesTheTileCost) {
  // small_moe fc2, 8 x 768 x 768: 128x192 -> 8 * 6 * 4 = 192 tiles = 2 waves; 128x96 -> 384 = 3 waves at 0.6.
  EXPECT_DOUBLE_EQ(kernels::weight_grad_tile_cost(dims(8, 768, 768), WeightGradTile::kWide, kH200Sms), 2.0);
  EXPECT_DOUBLE_EQ(kernels::weight_grad_tile_cost(dims(8, 768, 768), WeightGradTile::kNarrow, kH200Sms), 1.8);
  // The wide tile's rows round up to its 2x1 cluster: N = 136 is 2 row tiles, N = 72 one rounded up to 2.
  EXPECT_DOUBLE_EQ(kernels::weight_grad_tile_cost(dims(66, 72, 192), WeightGradTile::kWide, kH200Sms), 1.0);
  EXPECT_DOUBLE_EQ(kernels::weight_grad_tile_cost(dims(67, 72, 192), WeightGradTile::kWide, kH200Sms), 2.0);
  // K = 200 needs 2 wide column tiles and 3 narrow ones, which round up to the narrow tile's 1x2 cluster: 4.
  EXPECT_DOUBLE_EQ(kernels::weight_grad_tile_cost(dims(33, 136, 200), WeightGradTile::kWide, kH200Sms), 1.0);
  EXPECT_DOUBLE_EQ(kernels::weight_grad_tile_cost(dims(34, 136, 200), WeightGradTile::kWide, kH200Sms), 2.0);
  EXPECT_DOUBLE_EQ(kernels::weight_grad_tile_cost(dims(16, 136, 200), WeightGradTile::kNarrow, kH200Sms), 0.6);
  EXPECT_DOUBLE_EQ(kernels::weight_grad_tile_cost(dims(17, 136, 200), WeightGradTile::kNarrow, kH200Sms), 1.2);
  // The narrow tile's rows do not round: N = 72 is one row tile (wide: 2), 66 x 1 x 2 = 132 tiles.
  EXPECT_DOUBLE_EQ(kernels::weight_grad_tile_cost(dims(66, 72, 192), WeightGradTile::kNarrow, kH200Sms), 0.6);
}

TEST(WeightGradTile, ChoiceAtTheMoeRecipesShapes) {
  // small_moe (8 experts, hidden 768, moe_ffn 768): fc1 [1536, 768] quantises well with 128x192 (384
  // tiles, 2.9 waves), fc2 [768, 768] does not (192 tiles, 1.45 waves).
  EXPECT_EQ(kernels::choose_weight_grad_tile(dims(8, 1536, 768), kH200Sms), WeightGradTile::kWide);
  EXPECT_EQ(kernels::choose_weight_grad_tile(dims(8, 768, 768), kH200Sms), WeightGradTile::kNarrow);
  // a3b_proxy (128 experts): thousands of tiles, the wide tile's lower cost wins.
  EXPECT_EQ(kernels::choose_weight_grad_tile(dims(128, 1536, 2048), kH200Sms), WeightGradTile::kWide);
  EXPECT_EQ(kernels::choose_weight_grad_tile(dims(128, 2048, 768), kH200Sms), WeightGradTile::kWide);
  // Fewer tiles than SMs either way: the smaller tile finishes first.
  EXPECT_EQ(kernels::choose_weight_grad_tile(dims(1, 136, 200), kH200Sms), WeightGradTile::kNarrow);
  // One wide wave against two narrow ones (96 SMs: 96 wide tiles, 192 narrow): the wide tile.
  EXPECT_EQ(kernels::choose_weight_grad_tile(dims(8, 768, 256), 96), WeightGradTile::kWide);
}

TEST(WeightGradTile, ForcedTileOverridesTheEstimate) {
  GroupedGemmDims d = dims(8, 768, 768);
  d.weight_grad_tile = WeightGradTile::kWide;
  EXPECT_EQ(kernels::choose_weight_grad_tile(d, kH200Sms), WeightGradTile::kWide);
  d = dims(8, 1536, 768);
  d.weight_grad_tile = WeightGradTile::kNarrow;
  EXPECT_EQ(kernels::choose_weight_grad_tile(d, kH200Sms), WeightGradTile::kNarrow);
  EXPECT_STREQ(kernels::weight_grad_tile_name(WeightGradTile::kNarrow), "128x96");
  EXPECT_NE(test::thrown_message([] {
              kernels::weight_grad_tile_cost(dims(8, 768, 768), WeightGradTile::kAuto, kH200Sms);
            }).find("kWide or kNarrow"),
            std::string::npos);
}

}  // namespace
}  // namespace sg
