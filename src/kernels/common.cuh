#pragma once
// Device helpers shared by the kernels (include from .cu/.cuh files only): bf16 vector load/store through
// fp32 registers, a deterministic block reduction, alignment tests and launch arithmetic. Written over the
// SIMT primitives of warp_mma.cuh, so a kernel built on them also runs in the CPU emulator of the tests
// (tests/simt_emulator.h, with SG_SIMT_EMULATION defined).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "cuda/bf16.h"
#include "kernels/float_buffer.h"
#include "kernels/warp_mma.cuh"

// Functions that host launchers and device kernels both call (launch arithmetic shared by the two sides).
#if defined(SG_SIMT_EMULATION)
#define SG_HOST_DEVICE inline
#else
#define SG_HOST_DEVICE __host__ __device__ __forceinline__
#endif

// Kernel headers (*.cuh with a launch sequence) put their definitions between SG_EMULATED_NAMESPACE_BEGIN
// and SG_EMULATED_NAMESPACE_END: under emulation an inline namespace, so a test's host-compiled kernels
// never share a mangled name with the CUDA build's in sg_kernels, which the test links too (the linker
// would silently keep one of the two).
#if defined(SG_SIMT_EMULATION)
#define SG_EMULATED_NAMESPACE_BEGIN inline namespace simt_emulated {
#define SG_EMULATED_NAMESPACE_END }
#else
#define SG_EMULATED_NAMESPACE_BEGIN
#define SG_EMULATED_NAMESPACE_END
#endif

namespace sg::kernels::detail {

// 16 bytes = 8 bf16: the natural vector width of global loads.
inline constexpr int kBf16PerVec = 8;

SG_HOST_DEVICE constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
SG_HOST_DEVICE constexpr int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

inline bool is_aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// Threads for a block that walks a row of `width` elements in chunks of `vec`: one per chunk, a multiple
// of 32, at most max_threads (longer rows loop).
inline int row_block_threads(int64_t width, int vec, int max_threads) {
  const int64_t want = round_up(ceil_div(width, vec), 32);
  return static_cast<int>(want < max_threads ? want : max_threads);
}

// 16 bytes between global memory and registers. On the GPU one vector access (the address must be 16-byte
// aligned); in the CPU emulator a memcpy, since the host compiler's strict aliasing rules would let it drop
// a bf16 buffer read through a uint4 lvalue.
SG_DEVICE uint4 load_16_bytes(const void* src) {
#if defined(SG_SIMT_EMULATION)
  uint4 v;
  __builtin_memcpy(&v, src, 16);
  return v;
#else
  return *reinterpret_cast<const uint4*>(src);
#endif
}
SG_DEVICE void store_16_bytes(void* dst, const uint4& v) {
#if defined(SG_SIMT_EMULATION)
  __builtin_memcpy(dst, &v, 16);
#else
  *reinterpret_cast<uint4*>(dst) = v;
#endif
}

// Loads VEC (8 or 1) consecutive bf16 into fp32 registers. VEC == 8 needs a 16-byte aligned address.
template <int VEC>
SG_DEVICE void load_bf16(const bf16* src, float (&dst)[VEC]) {
  static_assert(VEC == 8 || VEC == 1, "VEC must be 8 or 1");
  if constexpr (VEC == 8) {
    const uint4 raw = load_16_bytes(src);
    __nv_bfloat162 pairs[4];
    __builtin_memcpy(static_cast<void*>(pairs), &raw, 16);
SG_UNROLL
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
SG_DEVICE void store_bf16(bf16* dst, const float (&src)[VEC]) {
  static_assert(VEC == 8 || VEC == 1, "VEC must be 8 or 1");
  if constexpr (VEC == 8) {
    __nv_bfloat162 pairs[4];
SG_UNROLL
    for (int k = 0; k < 4; ++k) pairs[k] = __floats2bfloat162_rn(src[2 * k], src[2 * k + 1]);
    uint4 raw;
    __builtin_memcpy(&raw, static_cast<const void*>(pairs), 16);
    store_16_bytes(dst, raw);
  } else {
    *dst = __float2bfloat16_rn(src[0]);
  }
}

// Loads / stores VEC fp32 values (VEC == 8: two 16-byte accesses, 16-byte aligned address).
template <int VEC>
SG_DEVICE void load_f32(const float* src, float (&dst)[VEC]) {
  if constexpr (VEC == 8) {
    const uint4 a = load_16_bytes(src), b = load_16_bytes(src + 4);
    __builtin_memcpy(dst, &a, 16);
    __builtin_memcpy(dst + 4, &b, 16);
  } else {
SG_UNROLL
    for (int k = 0; k < VEC; ++k) dst[k] = src[k];
  }
}
template <int VEC>
SG_DEVICE void store_f32(float* dst, const float (&src)[VEC]) {
  if constexpr (VEC == 8) {
    uint4 a, b;
    __builtin_memcpy(&a, src, 16);
    __builtin_memcpy(&b, src + 4, 16);
    store_16_bytes(dst, a);
    store_16_bytes(dst + 4, b);
  } else {
SG_UNROLL
    for (int k = 0; k < VEC; ++k) dst[k] = src[k];
  }
}

// A sum added into one element of a bf16 main gradient: the widened value plus the fp32 sum, rounded to nearest
// even once (what every gradient writer does with ddp.grad_reduce_in_fp32=false).
SG_HOST_DEVICE void add_rounded(bf16& d, float sum) { d = __float2bfloat16_rn(__bfloat162float(d) + sum); }
// dst[i] += sum in a main gradient of either dtype.
SG_HOST_DEVICE void add_into(FloatBuffer dst, int64_t i, float sum) {
  if (dst.dtype == FloatDtype::bf16) {
    add_rounded(static_cast<bf16*>(dst.data)[i], sum);
  } else {
    static_cast<float*>(dst.data)[i] += sum;
  }
}

// VEC values of a buffer stored in fp32 or bf16 (a main_grad of either dtype, kernels/float_buffer.h), in fp32
// registers; a bf16 store rounds to nearest even.
template <int VEC>
SG_DEVICE void load_floats(const float* src, float (&dst)[VEC]) {
  load_f32<VEC>(src, dst);
}
template <int VEC>
SG_DEVICE void load_floats(const bf16* src, float (&dst)[VEC]) {
  load_bf16<VEC>(src, dst);
}
template <int VEC>
SG_DEVICE void store_floats(float* dst, const float (&src)[VEC]) {
  store_f32<VEC>(dst, src);
}
template <int VEC>
SG_DEVICE void store_floats(bf16* dst, const float (&src)[VEC]) {
  store_bf16<VEC>(dst, src);
}

// Single-rounding fp32 primitives: fused multiply-add and a product the compiler may not fuse into a sum.
#if defined(SG_SIMT_EMULATION)
inline float fma_rn(float a, float b, float c) {
  return std::fma(a, b, c);
}
inline float mul_rn(float a, float b) {
  return a * b;
}
#else
SG_DEVICE float fma_rn(float a, float b, float c) {
  return __fmaf_rn(a, b, c);
}
SG_DEVICE float mul_rn(float a, float b) {
  return __fmul_rn(a, b);
}
#endif

// Threads in the running block (blockDim.x; the emulator's block size).
#if defined(SG_SIMT_EMULATION)
inline int block_threads() { return sg::emu::current_block()->nthreads; }
#else
SG_DEVICE int block_threads() { return static_cast<int>(blockDim.x); }
#endif

// Butterfly sum over the warp: every lane ends with the same, run-to-run identical value.
SG_DEVICE float warp_reduce_sum(float v) {
SG_UNROLL
  for (int offset = 16; offset > 0; offset >>= 1) v += shfl_xor(v, offset);
  return v;
}

// Butterfly max over the warp (exact: every lane ends with the warp's max).
SG_DEVICE float warp_reduce_max(float v) {
  SG_UNROLL
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, shfl_xor(v, offset));
  return v;
}

// Sum over the block in a fixed order (warps, then warp sums), broadcast to every thread.
// The block (1-D) must be a multiple of 32 threads (<= 1024) and every thread must call it (it
// synchronises). `scratch` is 32 floats of shared memory; it may be reused by consecutive calls.
SG_DEVICE float block_reduce_sum(float v, float* scratch) {
  const int lane = static_cast<int>(lane_id());
  const int warp = static_cast<int>(warp_id());
  const int num_warps = block_threads() >> 5;
  v = warp_reduce_sum(v);
  block_sync();  // a previous call's readers are done with scratch
  if (lane == 0) scratch[warp] = v;
  block_sync();
  v = lane < num_warps ? scratch[lane] : 0.0f;
  return warp_reduce_sum(v);
}

}  // namespace sg::kernels::detail
