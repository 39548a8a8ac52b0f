#pragma once
// The compute dtype. Host code may include this (cuda_bf16.h has host conversions).
#include <cuda_bf16.h>

#include <cstdint>

#include "core/bf16_bits.h"  // float_to_bf16_bits, bf16_bits_to_float on the host

namespace sg {

using bf16 = __nv_bfloat16;

}  // namespace sg
