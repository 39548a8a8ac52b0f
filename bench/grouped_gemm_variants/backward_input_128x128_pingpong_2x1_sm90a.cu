// backward_input, tile 128x128, pingpong, cluster 2x1: the pingpong schedule's epilogue overlap with the
// weights multicast to the two CTAs of an expert's adjacent M tiles (the 1x1 variant reads them twice).
#include "register_variant.cuh"

namespace {
const sg::bench::RegisterVariant<sg::bench::GroupedGemmOp::kBackwardInput,
                                 sg::bench::KernelConfig<128, 128, 2, 1, sg::bench::Schedule::kPingpong>>
    registered;
}  // namespace
