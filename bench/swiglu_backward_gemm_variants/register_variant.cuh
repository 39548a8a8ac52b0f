#pragma once
// Include from the variant files only (sm_90a, -DNDEBUG): one `const RegisterVariant<TileM, TileN, EpiM, EpiN,
// ClusterM> r;` per file instantiates the kernel in that configuration (kernels/swiglu_gemm_cutlass.cuh) and
// registers it.
#include <memory>

#include "kernels/swiglu_gemm_cutlass.cuh"
#include "variant_registry.h"

namespace sg::bench {

template <int TileM, int TileN, int EpiM, int EpiN, int ClusterM>
struct RegisterVariant {
  using Cfg = kernels::detail::swiglu_gemm::Config<TileM, TileN, EpiM, EpiN, ClusterM>;
  using Runner = kernels::detail::swiglu_gemm::Runner<kernels::detail::swiglu_gemm::Backward<Cfg>>;
  RegisterVariant() {
    swiglu_gemm_variants().push_back({Cfg::name(), [](int64_t T, int64_t H, int64_t F, int sm_count) {
                                        auto runner = std::make_shared<Runner>(T, H, F, sm_count, Cfg::name());
                                        return SwiGluGemmLaunch([runner](cudaStream_t s, const auto& p) {
                                          runner->run(s, p);
                                        });
                                      }});
  }
};

}  // namespace sg::bench
