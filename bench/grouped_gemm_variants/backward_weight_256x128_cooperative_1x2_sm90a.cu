// backward_weight, tile 256x128, cooperative, cluster 1x2 (multicast of A across N tiles; N / 128 is even at every
// bench shape, N / 256 is odd at N = 768): half the tiles, less operand traffic per flop.
#include "register_variant.cuh"

namespace {
const sg::bench::RegisterVariant<sg::bench::GroupedGemmOp::kBackwardWeight,
                                 sg::bench::KernelConfig<256, 128, 1, 2, sg::bench::Schedule::kCooperative>>
    registered;
}  // namespace
