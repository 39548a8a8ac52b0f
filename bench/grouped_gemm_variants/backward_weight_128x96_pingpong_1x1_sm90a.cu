// backward_weight, tile 128x96, pingpong, cluster 1x1: the narrow weight-gradient tile (production's
// kNarrow is the cooperative 2x1 one) with one warpgroup's epilogue under the other's mainloop.
#include "register_variant.cuh"

namespace {
const sg::bench::RegisterVariant<sg::bench::GroupedGemmOp::kBackwardWeight,
                                 sg::bench::KernelConfig<128, 96, 1, 1, sg::bench::Schedule::kPingpong>>
    registered;
}  // namespace
