#pragma once
// Include from the variant files only (sm_90a, -DNDEBUG): one `const RegisterVariant<Op, Config> r;`
// per file instantiates the grouped GEMM backend with that configuration and registers its factory.
#include "kernels/grouped_gemm_cutlass.cuh"
#include "variant_registry.h"

namespace sg::bench {

using kernels::GroupedGemmOp;
using kernels::detail::grouped_cutlass::KernelConfig;
using kernels::detail::grouped_cutlass::Schedule;

template <GroupedGemmOp Op, class Config>
struct RegisterVariant {
  RegisterVariant() { grouped_gemm_variants().push_back({Op, &make}); }
  static std::unique_ptr<kernels::detail::GroupedGemmBackend> make(const kernels::GroupedGemmDims& dims,
                                                                   int sm_count) {
    return std::make_unique<kernels::detail::grouped_cutlass::Backend<Op, Config>>(dims, sm_count);
  }
};

}  // namespace sg::bench
