// forward, tile 64x256, pingpong, no cluster: smaller M tiles waste nothing on short experts, wide N keeps the
// operand traffic per flop of production's 128x256.
#include "register_variant.cuh"

namespace {
const sg::bench::RegisterVariant<sg::bench::GroupedGemmOp::kForward,
                                 sg::bench::KernelConfig<64, 256, 1, 1, sg::bench::Schedule::kPingpong>>
    registered;
}  // namespace
