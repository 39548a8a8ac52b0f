// forward, tile 128x128, pingpong, no cluster: short M per expert (a3b: 256 rows), the epilogue of one tile
// overlaps the mainloop of the next.
#include "register_variant.cuh"

namespace {
const sg::bench::RegisterVariant<sg::bench::GroupedGemmOp::kForward,
                                 sg::bench::KernelConfig<128, 128, 1, 1, sg::bench::Schedule::kPingpong>>
    registered;
}  // namespace
