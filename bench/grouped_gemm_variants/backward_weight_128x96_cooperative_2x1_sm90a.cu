// backward_weight, tile 128x96, cooperative, cluster 2x1: production's narrow tile until the sixteenth session,
// which moved it to 1x2 (A multicast instead of B: 1.03x at small_moe fc2).
#include "register_variant.cuh"

namespace {
const sg::bench::RegisterVariant<sg::bench::GroupedGemmOp::kBackwardWeight,
                                 sg::bench::KernelConfig<128, 96, 2, 1, sg::bench::Schedule::kCooperative>>
    registered;
}  // namespace
