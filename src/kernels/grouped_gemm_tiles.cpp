#include "kernels/grouped_gemm_tiles.h"

#include <cstdint>

#include "core/error.h"
#include "kernels/grouped_gemm.h"

namespace sg::kernels {
namespace {

// Both tiles are 128 rows of dW (the GEMM's M = N). The wide tile runs on a 2x1 cluster, so its row tiles
// round up to an even count (the GroupScheduler gives a cluster's two CTAs adjacent tiles of one expert);
// the narrow one on a 1x2 cluster, so its column tiles do.
constexpr int64_t kTileRows = 128, kClusterTiles = 2;
constexpr int64_t kWideColumns = 192, kNarrowColumns = 96;
// One 128x96 tile's time over one 128x192 tile's (measured, see the header).
constexpr double kNarrowTileRelativeCost = 0.6;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

const char* weight_grad_tile_name(WeightGradTile tile) {
  switch (tile) {
    case WeightGradTile::kAuto:
      return "auto";
    case WeightGradTile::kWide:
      return "128x192";
    case WeightGradTile::kNarrow:
      return "128x96";
  }
  return "?";
}

double weight_grad_tile_cost(const GroupedGemmDims& dims, WeightGradTile tile, int sm_count) {
  SG_CHECK(tile != WeightGradTile::kAuto, "weight_grad_tile_cost: pass kWide or kNarrow");
  SG_CHECK(sm_count >= 1 && dims.num_groups >= 1 && dims.N >= 1 && dims.K >= 1,
           "weight_grad_tile_cost: sm_count, num_groups, N and K must be positive");
  const bool narrow = tile == WeightGradTile::kNarrow;
  auto cluster_multiple = [](int64_t tiles) { return ceil_div(tiles, kClusterTiles) * kClusterTiles; };
  const int64_t row_tiles = ceil_div(dims.N, kTileRows);
  const int64_t column_tiles = ceil_div(dims.K, narrow ? kNarrowColumns : kWideColumns);
  const int64_t tiles_per_group =
      narrow ? row_tiles * cluster_multiple(column_tiles) : cluster_multiple(row_tiles) * column_tiles;
  const int64_t waves = ceil_div(dims.num_groups * tiles_per_group, sm_count);
  return static_cast<double>(waves) * (narrow ? kNarrowTileRelativeCost : 1.0);
}

WeightGradTile choose_weight_grad_tile(const GroupedGemmDims& dims, int sm_count) {
  if (dims.weight_grad_tile != WeightGradTile::kAuto) return dims.weight_grad_tile;
  return weight_grad_tile_cost(dims, WeightGradTile::kNarrow, sm_count) <
                 weight_grad_tile_cost(dims, WeightGradTile::kWide, sm_count)
             ? WeightGradTile::kNarrow
             : WeightGradTile::kWide;
}

}  // namespace sg::kernels
