#pragma once
// Warp-level bf16 tensor-core tiles (mma.sync m16n8k16, fp32 accumulate) fed from shared memory by ldmatrix,
// plus the few device primitives the tiled kernels use. Include from .cu files (or .cuh included by them).
//
// Fragment layouts (PTX ISA, mma.m16n8k16 .bf16; lane = 4 * group + quad):
//   A 16x16: a[0] = A[group][2quad..+1]   a[1] = A[group+8][2quad..+1]
//            a[2] = A[group][2quad+8..+9] a[3] = A[group+8][2quad+8..+9]     (bf16 pairs, low half = lower col)
//   B 16x8:  b[0] = B[2quad..+1][group]   b[1] = B[2quad+8..+9][group]
//   C 16x8:  c[0..1] = C[group][2quad..+1] c[2..3] = C[group+8][2quad..+1]
// So the C fragments of two adjacent n8 tiles are, packed to bf16, the A fragment of a k16 step
// (pack_c_to_a): a product can feed the next one without leaving registers.
//
// Shared-memory tiles are row-major with a row pitch of (cols + 8) bf16: the 16-byte pad puts the 8 rows
// of every ldmatrix 8x8 matrix in distinct banks.
//
// Built with SG_SIMT_EMULATION (a host test), the primitives come from tests/simt_emulator.h instead, so the
// same kernel source runs on the CPU, thread by thread, for debugging without a GPU.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#if defined(SG_SIMT_EMULATION)
#include "simt_emulator.h"
#define SG_DEVICE inline
#define SG_KERNEL(max_threads) inline void
#define SG_UNROLL
#else
#define SG_UNROLL _Pragma("unroll")
#define SG_DEVICE __device__ __forceinline__
#define SG_KERNEL(max_threads) __global__ void __launch_bounds__(max_threads)
#endif

namespace sg::kernels::detail {

#if !defined(SG_SIMT_EMULATION)
SG_DEVICE void ldmatrix_x4(uint32_t (&r)[4], const __nv_bfloat16* row_address) {
  const auto a = static_cast<uint32_t>(__cvta_generic_to_shared(row_address));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
SG_DEVICE void ldmatrix_x4_trans(uint32_t (&r)[4], const __nv_bfloat16* row_address) {
  const auto a = static_cast<uint32_t>(__cvta_generic_to_shared(row_address));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
// d += A * B for one m16n8k16 tile.
SG_DEVICE void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
SG_DEVICE float shfl_xor(float v, int lane_mask) { return __shfl_xor_sync(0xffffffffu, v, lane_mask); }
SG_DEVICE float shfl_up(float v, int delta) { return __shfl_up_sync(0xffffffffu, v, delta); }
SG_DEVICE float shfl_down(float v, int delta) { return __shfl_down_sync(0xffffffffu, v, delta); }
SG_DEVICE float fast_exp(float x) { return __expf(x); }
SG_DEVICE void block_sync() { __syncthreads(); }
SG_DEVICE unsigned lane_id() { return threadIdx.x & 31u; }
SG_DEVICE unsigned warp_id() { return threadIdx.x >> 5; }
SG_DEVICE int thread_index() { return static_cast<int>(threadIdx.x); }
SG_DEVICE int block_index_x() { return static_cast<int>(blockIdx.x); }
SG_DEVICE int block_index_y() { return static_cast<int>(blockIdx.y); }
SG_DEVICE int block_index_z() { return static_cast<int>(blockIdx.z); }
// The block's dynamic shared memory (16-byte aligned).
SG_DEVICE unsigned char* dynamic_smem() {
  extern __shared__ __align__(16) unsigned char sg_dynamic_smem[];
  return sg_dynamic_smem;
}
#else
using sg::emu::block_index_x;
using sg::emu::block_index_y;
using sg::emu::block_index_z;
using sg::emu::dynamic_smem;
using sg::emu::shfl_down;
using sg::emu::shfl_up;
using sg::emu::thread_index;
using sg::emu::block_sync;
using sg::emu::fast_exp;
using sg::emu::lane_id;
using sg::emu::ldmatrix_x4;
using sg::emu::ldmatrix_x4_trans;
using sg::emu::mma_bf16;
using sg::emu::shfl_xor;
using sg::emu::warp_id;
#endif

SG_DEVICE uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  uint32_t r;
  static_assert(sizeof(r) == sizeof(v));
  __builtin_memcpy(&r, &v, 4);
  return r;
}
SG_DEVICE float2 unpack_bf16(uint32_t r) {
  __nv_bfloat162 v;
  __builtin_memcpy(static_cast<void*>(&v), &r, 4);
  return __bfloat1622float2(v);
}

// Row pitch (in bf16) of a shared-memory tile with `cols` columns.
constexpr int smem_pitch(int cols) { return cols + 8; }

// A fragment of the 16x16 block at (row0, k0) of a matrix stored [M][pitch] (K contiguous).
SG_DEVICE void load_a(uint32_t (&a)[4], const __nv_bfloat16* tile, int pitch, int row0, int k0) {
  const int l = static_cast<int>(lane_id());
  ldmatrix_x4(a, tile + (row0 + (l & 15)) * pitch + k0 + (l >> 4) * 8);
}
// A fragment of the 16x16 block at (row0, k0) of a matrix stored transposed, [K][pitch] (M contiguous).
SG_DEVICE void load_a_trans(uint32_t (&a)[4], const __nv_bfloat16* tile, int pitch, int row0, int k0) {
  const int l = static_cast<int>(lane_id());
  ldmatrix_x4_trans(a, tile + (k0 + (l & 7) + (l >> 4) * 8) * pitch + row0 + ((l >> 3) & 1) * 8);
}
// B fragments of two n8 tiles (n0 and n0 + 8) for the k16 step at k0, B stored [N][pitch] (K contiguous,
// i.e. the matrix whose product with A^T-rows is wanted). b[0..1]: tile n0, b[2..3]: tile n0 + 8.
SG_DEVICE void load_b_pair(uint32_t (&b)[4], const __nv_bfloat16* tile, int pitch, int n0, int k0) {
  const int l = static_cast<int>(lane_id());
  ldmatrix_x4(b, tile + (n0 + (l & 7) + (l >> 4) * 8) * pitch + k0 + ((l >> 3) & 1) * 8);
}
// The same from B stored [K][pitch] (N contiguous).
SG_DEVICE void load_b_pair_trans(uint32_t (&b)[4], const __nv_bfloat16* tile, int pitch, int n0, int k0) {
  const int l = static_cast<int>(lane_id());
  ldmatrix_x4_trans(b, tile + (k0 + (l & 7) + ((l >> 3) & 1) * 8) * pitch + n0 + (l >> 4) * 8);
}

// The A fragment (k16 step kk) made of the C fragments of n8 tiles 2kk and 2kk + 1.
SG_DEVICE void pack_c_to_a(uint32_t (&a)[4], const float (&c0)[4], const float (&c1)[4]) {
  a[0] = pack_bf16(c0[0], c0[1]);
  a[1] = pack_bf16(c0[2], c0[3]);
  a[2] = pack_bf16(c1[0], c1[1]);
  a[3] = pack_bf16(c1[2], c1[3]);
}

// acc (2 NP n8 tiles from column n0) += a (one 16x16 A fragment at k step k0) * B[k0 .. k0+16][n0 .. n0+16 NP],
// B read from a shared tile stored [N][pitch] (kBTrans false) or [K][pitch] (kBTrans true).
template <int NP, bool kBTrans>
SG_DEVICE void mma_k_step(float (&acc)[2 * NP][4], const uint32_t (&a)[4], const __nv_bfloat16* b_tile, int pitch,
                          int n0, int k0) {
SG_UNROLL
  for (int np = 0; np < NP; ++np) {
    uint32_t b[4];
    if constexpr (kBTrans) {
      load_b_pair_trans(b, b_tile, pitch, n0 + np * 16, k0);
    } else {
      load_b_pair(b, b_tile, pitch, n0 + np * 16, k0);
    }
    mma_bf16(acc[2 * np], a, b[0], b[1]);
    mma_bf16(acc[2 * np + 1], a, b[2], b[3]);
  }
}

// Multiplies the two rows an A fragment holds (group, group + 8) by s_lo and s_hi.
SG_DEVICE void scale_a_rows(uint32_t (&a)[4], float s_lo, float s_hi) {
  float2 v;
  v = unpack_bf16(a[0]), a[0] = pack_bf16(v.x * s_lo, v.y * s_lo);
  v = unpack_bf16(a[1]), a[1] = pack_bf16(v.x * s_hi, v.y * s_hi);
  v = unpack_bf16(a[2]), a[2] = pack_bf16(v.x * s_lo, v.y * s_lo);
  v = unpack_bf16(a[3]), a[3] = pack_bf16(v.x * s_hi, v.y * s_hi);
}

// Row / column (within the 16x8 tile) of element i of a C fragment, for epilogues.
SG_DEVICE int c_row(int i) { return static_cast<int>(lane_id() >> 2) + ((i >> 1) << 3); }
SG_DEVICE int c_col(int i) { return static_cast<int>(lane_id() & 3) * 2 + (i & 1); }

}  // namespace sg::kernels::detail
