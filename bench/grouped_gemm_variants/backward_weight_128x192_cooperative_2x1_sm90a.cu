// backward_weight, tile 128x192, cooperative, cluster 2x1: fewer, better-quantised tiles (small_moe fc1: 384 tiles
// = 2.9 waves on 132 SMs instead of 576 = 4.4).
#include "register_variant.cuh"

namespace {
const sg::bench::RegisterVariant<sg::bench::GroupedGemmOp::kBackwardWeight,
                                 sg::bench::KernelConfig<128, 192, 2, 1, sg::bench::Schedule::kCooperative>>
    registered;
}  // namespace
