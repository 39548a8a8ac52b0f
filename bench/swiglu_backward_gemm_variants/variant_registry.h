#pragma once
// bench/swiglu_backward_gemm_variants: the registry each *_sm90a.cu variant file adds itself to.
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/swiglu_backward_gemm.h"

namespace sg::bench {

using SwiGluGemmLaunch = std::function<void(cudaStream_t, const kernels::SwiGluBackwardGemmParams&)>;
struct SwiGluGemmVariant {
  std::string name;
  std::function<SwiGluGemmLaunch(int64_t T, int64_t H, int64_t F, int sm_count)> make;
};
inline std::vector<SwiGluGemmVariant>& swiglu_gemm_variants() {
  static std::vector<SwiGluGemmVariant> variants;
  return variants;
}

}  // namespace sg::bench
