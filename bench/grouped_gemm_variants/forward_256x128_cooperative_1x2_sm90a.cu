// forward, tile 256x128, cooperative, cluster 1x2: one M tile per a3b expert (256 rows), A multicast across N tile
// pairs.
#include "register_variant.cuh"

namespace {
const sg::bench::RegisterVariant<sg::bench::GroupedGemmOp::kForward,
                                 sg::bench::KernelConfig<256, 128, 1, 2, sg::bench::Schedule::kCooperative>>
    registered;
}  // namespace
