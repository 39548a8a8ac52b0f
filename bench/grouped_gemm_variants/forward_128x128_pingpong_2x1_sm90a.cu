// forward, tile 128x128, pingpong, cluster 2x1: the pingpong schedule's epilogue overlap (one warpgroup
// stores while the other computes) with the weights multicast to the two CTAs of an expert's M tiles, which
// the 1x1 pingpong variant reads twice from L2. For a3b_proxy fc2 (K = 768: 12 k-blocks a tile).
#include "register_variant.cuh"

namespace {
const sg::bench::RegisterVariant<sg::bench::GroupedGemmOp::kForward,
                                 sg::bench::KernelConfig<128, 128, 2, 1, sg::bench::Schedule::kPingpong>>
    registered;
}  // namespace
