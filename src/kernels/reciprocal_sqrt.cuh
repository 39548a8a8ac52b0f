#pragma once
// 1 / sqrt(x) for the norm kernels: the hardware rsqrtf on the GPU, 1 / std::sqrt in the CPU emulator of
// the tests (SG_SIMT_EMULATION), where rsqrtf does not exist. Include from .cu/.cuh files only.
#include <cmath>

#include "kernels/warp_mma.cuh"

namespace sg::kernels::detail {

SG_DEVICE float reciprocal_sqrt(float x) {
#if defined(SG_SIMT_EMULATION)
  return 1.0f / std::sqrt(x);
#else
  return rsqrtf(x);
#endif
}

}  // namespace sg::kernels::detail
