// forward, tile 128x256, cooperative, cluster 1x1: production's tile without the TMA multicast of B
// (a3b_proxy fc2 forward: 1.05-1.06x, but a3b_proxy fc1 forward 0.89-1.00x; eighth session).
#include "register_variant.cuh"

namespace {
const sg::bench::RegisterVariant<sg::bench::GroupedGemmOp::kForward,
                                 sg::bench::KernelConfig<128, 256, 1, 1, sg::bench::Schedule::kCooperative>>
    registered;
}  // namespace
