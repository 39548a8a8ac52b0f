#pragma once
// The weight-gradient grouped GEMM's tile, chosen per shape at plan time (kernels/grouped_gemm.h).
//
// backward_weight computes experts x [N, K] fp32 outputs, so its tile count is fixed by the shape (not by
// the routing) and, with few experts, small: at small_moe fc2 (8 x 768 x 768) the 128x192 tile gives 192
// tiles, 1.45 waves on 132 SMs, and the second wave runs half empty. A 128x96 tile gives 384 tiles (2.9
// waves) but each costs more than half a 128x192 one (less operand reuse). The plan picks the tile with
// the smaller estimated time: whole waves (ceil(tiles / SMs)) x the tile's relative cost. The costs are
// measured on the H200 (bench/grouped_gemm_variants, docs/performance.md, eighth session): where both
// tiles quantise alike (small_moe fc1: 384 vs 768 tiles, 2.9 vs 5.8 waves) a 128x96 tile costs 0.58-0.60
// of a 128x192 one.
namespace sg::kernels {

struct GroupedGemmDims;  // kernels/grouped_gemm.h, which includes this header

enum class WeightGradTile {
  kAuto,    // the plan picks by choose_weight_grad_tile()
  kWide,    // 128x192x64, cooperative, cluster 2x1
  kNarrow,  // 128x96x64, cooperative, cluster 1x2
};
const char* weight_grad_tile_name(WeightGradTile tile);  // "auto", "128x192", "128x96"

// Estimated relative time of one backward_weight launch with `tile` (kWide or kNarrow) over all experts
// (every expert non-empty: the most tiles the routing can give). Plain arithmetic, no device.
double weight_grad_tile_cost(const GroupedGemmDims& dims, WeightGradTile tile, int sm_count);

// kWide or kNarrow: dims.weight_grad_tile when it is not kAuto, else the cheaper estimate (kWide on ties).
WeightGradTile choose_weight_grad_tile(const GroupedGemmDims& dims, int sm_count);

}  // namespace sg::kernels
