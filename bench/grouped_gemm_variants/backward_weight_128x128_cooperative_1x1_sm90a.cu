// backward_weight, tile 128x128, cooperative, no cluster: production without the 2x1 multicast (does the cluster's
// M-tile pairing cost more than the halved B traffic saves?).
#include "register_variant.cuh"

namespace {
const sg::bench::RegisterVariant<sg::bench::GroupedGemmOp::kBackwardWeight,
                                 sg::bench::KernelConfig<128, 128, 1, 1, sg::bench::Schedule::kCooperative>>
    registered;
}  // namespace
