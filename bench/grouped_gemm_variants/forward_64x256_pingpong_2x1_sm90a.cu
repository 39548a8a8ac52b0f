// forward, tile 64x256, pingpong, cluster 2x1: as the 1x1 pingpong variant, with the weights multicast to
// the two CTAs of adjacent M tiles of an expert.
#include "register_variant.cuh"

namespace {
const sg::bench::RegisterVariant<sg::bench::GroupedGemmOp::kForward,
                                 sg::bench::KernelConfig<64, 256, 2, 1, sg::bench::Schedule::kPingpong>>
    registered;
}  // namespace
