// backward_weight, tile 128x192, cooperative, cluster 2x2: production's wide tile with A multicast too (four
// CTAs per cluster). 0.83-1.01x production at every weight-gradient row (sixteenth session): not kept.
#include "register_variant.cuh"

namespace {
const sg::bench::RegisterVariant<sg::bench::GroupedGemmOp::kBackwardWeight,
                                 sg::bench::KernelConfig<128, 192, 2, 2, sg::bench::Schedule::kCooperative>>
    registered;
}  // namespace
