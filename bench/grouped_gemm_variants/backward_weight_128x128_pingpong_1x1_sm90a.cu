// backward_weight, tile 128x128, pingpong, no cluster: with a short K (the expert's rows) per tile, one
// warpgroup's fp32 epilogue (load + store of dW) overlaps the other's mainloop.
#include "register_variant.cuh"

namespace {
const sg::bench::RegisterVariant<sg::bench::GroupedGemmOp::kBackwardWeight,
                                 sg::bench::KernelConfig<128, 128, 1, 1, sg::bench::Schedule::kPingpong>>
    registered;
}  // namespace
