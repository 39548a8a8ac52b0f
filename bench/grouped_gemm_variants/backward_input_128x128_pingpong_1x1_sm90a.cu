// backward_input, tile 128x128, pingpong, no cluster: forward's short-M candidate for the N-major B of
// backward_input.
#include "register_variant.cuh"

namespace {
const sg::bench::RegisterVariant<sg::bench::GroupedGemmOp::kBackwardInput,
                                 sg::bench::KernelConfig<128, 128, 1, 1, sg::bench::Schedule::kPingpong>>
    registered;
}  // namespace
