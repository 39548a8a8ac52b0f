// forward, tile 128x256, cooperative, cluster 2x1, epilogue subtile 128x128: half production's store rounds
// again, with a staging buffer that takes shared memory from the mainloop. 0.89-1.00x of CUTLASS's 128x32
// subtile (ninth session), where 128x64 was 0.97-1.07x: not kept.
#include "register_variant.cuh"

namespace {
const sg::bench::RegisterVariant<sg::bench::GroupedGemmOp::kForward,
                                 sg::bench::KernelConfig<128, 256, 2, 1, sg::bench::Schedule::kCooperative, 128, 128>>
    registered;
}  // namespace
