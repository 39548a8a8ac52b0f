// backward_weight, tile 128x192, cooperative, cluster 2x1, epilogue subtile 128x64 (CUTLASS's own choice is 128x32):
// fewer, larger store rounds per tile. 0.84-1.02x at every weight-gradient row (ninth session): not kept.
#include "register_variant.cuh"

namespace {
const sg::bench::RegisterVariant<sg::bench::GroupedGemmOp::kBackwardWeight,
                                 sg::bench::KernelConfig<128, 192, 2, 1, sg::bench::Schedule::kCooperative, 128, 64>>
    registered;
}  // namespace
