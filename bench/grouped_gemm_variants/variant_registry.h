#pragma once
// The tuning target's registry of alternative grouped GEMM configurations: each <op>_<config>_sm90a.cu
// instantiates kernels/grouped_gemm_cutlass.cuh's Backend<Op, KernelConfig<...>> once and registers its
// factory here at static initialisation (register_variant.cuh), so adding a variant is adding one file.
#include <memory>
#include <vector>

#include "kernels/grouped_gemm_backend.h"

namespace sg::bench {

using MakeGroupedGemmBackend = std::unique_ptr<kernels::detail::GroupedGemmBackend> (*)(
    const kernels::GroupedGemmDims& dims, int sm_count);

struct GroupedGemmVariant {
  kernels::GroupedGemmOp op;
  MakeGroupedGemmBackend make;
};

// Every registered variant (defined in grouped_gemm_variants.cu; the order is the link order).
std::vector<GroupedGemmVariant>& grouped_gemm_variants();

}  // namespace sg::bench
