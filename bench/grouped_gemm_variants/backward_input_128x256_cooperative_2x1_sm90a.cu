// backward_input, tile 128x256, cooperative, cluster 2x1, CUTLASS's own epilogue subtile (128x32): production's
// configuration before the ninth session, which moved forward and backward_input to a 128x64 subtile.
#include "register_variant.cuh"

namespace {
const sg::bench::RegisterVariant<sg::bench::GroupedGemmOp::kBackwardInput,
                                 sg::bench::KernelConfig<128, 256, 2, 1, sg::bench::Schedule::kCooperative>>
    registered;
}  // namespace
