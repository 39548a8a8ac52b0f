// backward_weight, tile 128x96, cooperative, cluster 2x2: both operands multicast, each A tile to the two CTAs
// of adjacent N tiles and each B tile to the two of adjacent M tiles. 0.92-0.93x the 2x1 cluster at small_moe
// fc2 and 0.75-0.86x at the other weight-gradient rows (sixteenth session): not kept.
#include "register_variant.cuh"

namespace {
const sg::bench::RegisterVariant<sg::bench::GroupedGemmOp::kBackwardWeight,
                                 sg::bench::KernelConfig<128, 96, 2, 2, sg::bench::Schedule::kCooperative>>
    registered;
}  // namespace
