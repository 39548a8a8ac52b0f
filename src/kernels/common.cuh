#pragma once
// Device helpers shared by the kernels (include from .cu files only): bf16 vector load/store through
// fp32 registers, a deterministic block reduction, alignment tests and launch arithmetic.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/bf16.h"

namespace sg::kernels::detail {

// 16 bytes = 8 bf16: the natural vector width of global loads.
inline constexpr int kBf16PerVec = 8;

__host__ __device__ constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
__host__ __device__ constexpr int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

inline bool is_aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// Threads for a block that walks a row of `width` elements in chunks of `vec`: one per chunk, a multiple
// of 32, at most max_threads (longer rows loop).
inline int row_block_threads(int64_t width, int vec, int max_threads) {
  const int64_t want = round_up(ceil_div(width, vec), 32);
  return static_cast<int>(want < max_threads ? want : max_threads);
}

// Loads VEC (8 or 1) consecutive bf16 into fp32 registers. VEC == 8 needs a 16-byte aligned address.
template <int VEC>
__device__ __forceinline__ void load_bf16(const bf16* src, float (&dst)[VEC]) {
  static_assert(VEC == 8 || VEC == 1, "VEC must be 8 or 1");
  if constexpr (VEC == 8) {
    const uint4 raw = *reinterpret_cast<const uint4*>(src);
    const __nv_bfloat162* pairs = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 f = __bfloat1622float2(pairs[k]);
      dst[2 * k] = f.x;
      dst[2 * k + 1] = f.y;
    }
  } else {
    dst[0] = __bfloat162float(*src);
  }
}

// Stores VEC fp32 values as bf16 (round to nearest even). VEC == 8 needs a 16-byte aligned address.
template <int VEC>
__device__ __forceinline__ void store_bf16(bf16* dst, const float (&src)[VEC]) {
  static_assert(VEC == 8 || VEC == 1, "VEC must be 8 or 1");
  if constexpr (VEC == 8) {
    uint4 raw;
    __nv_bfloat162* pairs = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
    for (int k = 0; k < 4; ++k) pairs[k] = __floats2bfloat162_rn(src[2 * k], src[2 * k + 1]);
    *reinterpret_cast<uint4*>(dst) = raw;
  } else {
    *dst = __float2bfloat16_rn(src[0]);
  }
}

// Loads / stores VEC fp32 values (VEC == 8: two float4, 16-byte aligned address).
template <int VEC>
__device__ __forceinline__ void load_f32(const float* src, float (&dst)[VEC]) {
  if constexpr (VEC == 8) {
    const float4 a = reinterpret_cast<const float4*>(src)[0];
    const float4 b = reinterpret_cast<const float4*>(src)[1];
    dst[0] = a.x, dst[1] = a.y, dst[2] = a.z, dst[3] = a.w;
    dst[4] = b.x, dst[5] = b.y, dst[6] = b.z, dst[7] = b.w;
  } else {
#pragma unroll
    for (int k = 0; k < VEC; ++k) dst[k] = src[k];
  }
}
template <int VEC>
__device__ __forceinline__ void store_f32(float* dst, const float (&src)[VEC]) {
  if constexpr (VEC == 8) {
    reinterpret_cast<float4*>(dst)[0] = make_float4(src[0], src[1], src[2], src[3]);
    reinterpret_cast<float4*>(dst)[1] = make_float4(src[4], src[5], src[6], src[7]);
  } else {
#pragma unroll
    for (int k = 0; k < VEC; ++k) dst[k] = src[k];
  }
}

// Butterfly sum over the warp: every lane ends with the same, run-to-run identical value.
__device__ __forceinline__ float warp_reduce_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Sum over the block in a fixed order (warps, then warp sums), broadcast to every thread.
// blockDim.x must be a multiple of 32 (<= 1024) and every thread must call it (it synchronises).
// `scratch` is __shared__ float[32]; it may be reused by consecutive calls.
__device__ __forceinline__ float block_reduce_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int num_warps = blockDim.x >> 5;
  v = warp_reduce_sum(v);
  __syncthreads();  // a previous call's readers are done with scratch
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < num_warps ? scratch[lane] : 0.0f;
  return warp_reduce_sum(v);
}

}  // namespace sg::kernels::detail
