#pragma once
// Kernel and launch sequence of RoPE (kernels/rope.h), written over a launch policy so the CPU emulator of
// the tests runs the same code as the launchers (detail::CudaLaunch).
//
// Memory-bound: the work is one read and one write of every rotated element. A block takes a tile of rows:
//   1. every thread issues the loads of its chunks (a chunk: VEC pairs of one head, x1 = x[i..i+VEC) and
//      x2 = x[i+d/2..]; VEC = 8 is one 16-byte access each), all independent, before any store;
//   2. meanwhile the block computes inv_freq once per pair (fp64 pow, into shared memory) and cos/sin once
//      per (row, pair) of the tile (fp64 sincos, rounded to fp32, into shared memory): less fp64 work than
//      the per-element algorithm, which took a pow and a sincos per (row, pair), and its latency overlaps
//      the loads;
//   3. after a barrier every thread rotates its chunks with the tile's cos/sin and stores them.
// Per element this is exactly the per-element algorithm (same fp64 angle and sincos, the same fp32
// products and fused sums: rotate() below, same bf16 rounding), so the output is bit for bit that of one
// thread per (row, pair) looping over the heads (tests/kernels/rope_per_element.cuh keeps that algorithm
// and the tests compare bits). VEC = 1 (one pair per chunk) serves head_dim not a multiple of 16, row
// strides not a multiple of 8 and x not 16-byte aligned.
#include <cuda_runtime.h>

#include <cmath>
#include <type_traits>

#include "core/error.h"
#include "core/strings.h"
#include "kernels/common.cuh"
#include "kernels/rope.h"
#include "reference/rope_frequencies.h"

namespace sg::kernels::rope {
SG_EMULATED_NAMESPACE_BEGIN

inline constexpr int kThreads = 256;
// Chunks a thread holds in registers at once: a tile has at most kThreads * kChunksPerThread chunks per pass
// (rows wider than that take several passes).
inline constexpr int kChunksPerThread = 2;
// cos/sin entries (row, pair) of one tile: 16 KiB of shared memory at most (plus inv_freq, 8 bytes a pair).
inline constexpr int64_t kMaxTableEntries = 2048;
inline constexpr int64_t kMaxHeadDim = 4096;     // inv_freq table: 16 KiB of shared memory at most
inline constexpr int64_t kMaxBlocks = 1 << 16;  // tile-stride beyond this

struct Args {
  RopeParams p;
  int64_t rows_per_tile = 0;  // R: rows sharing one cos/sin table
  int64_t num_tiles = 0;      // ceil(T / R)
  int64_t grid_blocks = 0;    // blocks launched (tiles beyond stride by this)
};

// Shape of the tile for a chunk width of VEC pairs.
inline int64_t chunks_per_row(const RopeParams& p, int vec) { return p.num_heads * (p.head_dim / 2 / vec); }
inline int64_t rows_per_tile(const RopeParams& p, int vec) {
  const int64_t by_chunks = static_cast<int64_t>(kThreads) * kChunksPerThread / chunks_per_row(p, vec);
  const int64_t by_table = kMaxTableEntries / (p.head_dim / 2);
  const int64_t rows = by_chunks < by_table ? by_chunks : by_table;
  return rows < 1 ? 1 : rows;
}
inline size_t shared_bytes(const RopeParams& p, int64_t rows) {
  const auto half = static_cast<size_t>(p.head_dim / 2);
  return half * sizeof(double) + 2 * static_cast<size_t>(rows) * half * sizeof(float);
}

// Where pair i of a tile row sits in the cos (and sin) table. VEC = 8: pairs 8g..8g+3 of every chunk g
// first, then pairs 8g+4..8g+7, so the 16-byte reads of consecutive chunks hit consecutive banks.
template <int VEC>
SG_DEVICE int table_slot(int i, int groups) {
  if constexpr (VEC == 1) {
    return i;
  } else {
    const int g = i / VEC, k = i % VEC;
    return ((k / 4) * groups + g) * 4 + (k % 4);
  }
}

// VEC bf16 as loaded: kept packed while the loads are in flight (half the registers of fp32 values).
template <int VEC>
using Packed = std::conditional_t<VEC == 8, uint4, bf16>;
template <int VEC>
SG_DEVICE Packed<VEC> load_packed(const bf16* src) {
  if constexpr (VEC == 8) {
    return detail::load_16_bytes(src);
  } else {
    return *src;
  }
}
template <int VEC>
SG_DEVICE void unpack(const Packed<VEC>& v, float (&x)[VEC]) {
  detail::load_bf16<VEC>(reinterpret_cast<const bf16*>(&v), x);
}

// Single-rounding fp32 primitives: fused multiply-add and a product the compiler may not fuse into a sum.
#if defined(SG_SIMT_EMULATION)
inline float fma_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float mul_rn(float a, float b) { return a * b; }
#else
SG_DEVICE float fma_rn(float a, float b, float c) { return __fmaf_rn(a, b, c); }
SG_DEVICE float mul_rn(float a, float b) { return __fmul_rn(a, b); }
#endif

// out1 = x1 cos - x2 sin and out2 = x2 cos + x1 sin, with the contraction nvcc gave the per-element
// kernel's plain expressions (its SASS: FFMA(x1, cos, -FMUL(x2, sin)) and FFMA(x1, sin, FMUL(x2, cos)), in
// forward and backward alike). Spelled out, because which product nvcc fuses depends on the surrounding
// code: left to the compiler, the tiled kernel fused x2 cos instead, and would differ in the last bit.
SG_DEVICE void rotate(float x1, float x2, float c, float s, float& out1, float& out2) {
  out1 = fma_rn(x1, c, -mul_rn(x2, s));
  out2 = fma_rn(x1, s, mul_rn(x2, c));
}

// The VEC cos (or sin) values of chunk g of a tile row (`row_table` = the row's first entry).
template <int VEC>
SG_DEVICE void load_table(const float* row_table, int g, int groups, float (&v)[VEC]) {
  if constexpr (VEC == 1) {
    v[0] = row_table[g];
  } else {
    static_assert(VEC == 8, "VEC must be 8 or 1");
    const uint4 lo = detail::load_16_bytes(row_table + 4 * g);
    const uint4 hi = detail::load_16_bytes(row_table + 4 * (groups + g));
    __builtin_memcpy(v, &lo, 16);
    __builtin_memcpy(v + 4, &hi, 16);
  }
}

template <int VEC, bool kInverse>
SG_KERNEL(kThreads) rope_kernel(Args a) {
  const RopeParams& p = a.p;
  // In-tile arithmetic in 32 bits: the launcher checks num_heads * head_dim < 2^31, so a tile's chunk count
  // (at most max(kThreads * kChunksPerThread, one row's chunks)) fits.
  const int half = static_cast<int>(p.head_dim / 2);
  const int groups = half / VEC;                                  // chunks per head
  const int row_chunks = static_cast<int>(p.num_heads) * groups;  // chunks per row
  const int rows = static_cast<int>(a.rows_per_tile);
  const int tid = detail::thread_index();
  auto* inv_freq = reinterpret_cast<double*>(detail::dynamic_smem());
  float* cos_table = reinterpret_cast<float*>(inv_freq + half);
  float* sin_table = cos_table + rows * half;
  bool have_freq = false;

  for (int64_t tile = detail::block_index_x(); tile < a.num_tiles; tile += a.grid_blocks) {
    const int64_t row0 = tile * rows;
    const int tile_rows = static_cast<int>(p.T - row0 < rows ? p.T - row0 : rows);
    const int tile_chunks = tile_rows * row_chunks;
    for (int pass = 0; pass < tile_chunks; pass += kThreads * kChunksPerThread) {
      // 1. Loads first: independent of each other and of the angles.
      Packed<VEC> x1[kChunksPerThread], x2[kChunksPerThread];
      bf16* first[kChunksPerThread];
      int chunk_row[kChunksPerThread], chunk_group[kChunksPerThread];
SG_UNROLL
      for (int k = 0; k < kChunksPerThread; ++k) {
        const int c = pass + k * kThreads + tid;
        first[k] = nullptr;
        if (c < tile_chunks) {
          const int r = c / row_chunks;
          const int rem = c - r * row_chunks;
          const int h = rem / groups;
          const int g = rem - h * groups;
          chunk_row[k] = r;
          chunk_group[k] = g;
          first[k] = p.x + (row0 + r) * p.row_stride + static_cast<int64_t>(h) * p.head_dim + g * VEC;
          x1[k] = load_packed<VEC>(first[k]);
          x2[k] = load_packed<VEC>(first[k] + half);
        }
      }
      // 2. The tile's cos/sin, on its first pass (the condition is the block's, so the barriers are uniform).
      if (pass == 0) {
        if (!have_freq) {
          for (int i = tid; i < half; i += kThreads) inv_freq[i] = ref::rope_inv_freq(i, p.head_dim, p.base, p.scaling);
          have_freq = true;
        }
        detail::block_sync();  // inv_freq written; the previous tile's readers are done with the table
        for (int j = tid; j < tile_rows * half; j += kThreads) {
          const int r = j / half;
          const int i = j - r * half;
          const int64_t t = row0 + r;
          const int64_t pos = p.positions != nullptr ? static_cast<int64_t>(p.positions[t]) : t % p.S;
          const double angle = static_cast<double>(pos) * inv_freq[i];
          double s, c;
          sincos(angle, &s, &c);
          const int slot = r * half + table_slot<VEC>(i, groups);
          cos_table[slot] = static_cast<float>(c);
          sin_table[slot] = kInverse ? -static_cast<float>(s) : static_cast<float>(s);
        }
        detail::block_sync();
      }
      // 3. Rotate and store.
SG_UNROLL
      for (int k = 0; k < kChunksPerThread; ++k) {
        if (first[k] == nullptr) continue;
        float a[VEC], b[VEC], cf[VEC], sf[VEC], out1[VEC], out2[VEC];
        unpack<VEC>(x1[k], a);
        unpack<VEC>(x2[k], b);
        load_table<VEC>(cos_table + chunk_row[k] * half, chunk_group[k], groups, cf);
        load_table<VEC>(sin_table + chunk_row[k] * half, chunk_group[k], groups, sf);
SG_UNROLL
        for (int e = 0; e < VEC; ++e) rotate(a[e], b[e], cf[e], sf[e], out1[e], out2[e]);
        detail::store_bf16<VEC>(first[k], out1);
        detail::store_bf16<VEC>(first[k] + half, out2);
      }
    }
    detail::block_sync();  // the table's readers are done before the next tile rewrites it
  }
}

template <bool kInverse, class Launch>
void run(const Launch& launch, const RopeParams& p) {
  const char* op = kInverse ? "rope_backward" : "rope_forward";
  SG_CHECK(p.x != nullptr, strprintf("%s: null x", op));
  SG_CHECK(p.T >= 0 && (p.S > 0 || p.positions != nullptr) && p.num_heads > 0 && p.head_dim > 0 &&
               p.head_dim % 2 == 0 && p.row_stride >= p.num_heads * p.head_dim && p.base > 0.0,
           strprintf("%s: bad shape T=%lld S=%lld num_heads=%lld head_dim=%lld row_stride=%lld base=%g (need "
                     "S > 0 or positions, even head_dim, row_stride >= num_heads * head_dim, base > 0)",
                     op, static_cast<long long>(p.T), static_cast<long long>(p.S), static_cast<long long>(p.num_heads),
                     static_cast<long long>(p.head_dim), static_cast<long long>(p.row_stride), p.base));
  SG_CHECK(p.head_dim <= kMaxHeadDim && p.num_heads * p.head_dim < (int64_t{1} << 31),
           strprintf("%s: num_heads=%lld head_dim=%lld is over the kernel's limits (head_dim <= %lld: its "
                     "inv_freq table lives in shared memory; num_heads * head_dim < 2^31: 32-bit row offsets)",
                     op, static_cast<long long>(p.num_heads), static_cast<long long>(p.head_dim),
                     static_cast<long long>(kMaxHeadDim)));
  const ref::RopeScaling& sc = p.scaling;
  SG_CHECK(sc.valid(),
           strprintf("%s: Llama 3 RoPE scaling needs 0 < low_freq_factor < high_freq_factor and "
                     "original_max_position_embeddings > 0 (got %g, %g, %g)",
                     op, sc.low_freq_factor, sc.high_freq_factor, sc.original_max_position_embeddings));
  if (p.T == 0) return;
  // 16-byte chunks need 8 | d/2 (x2 = x1 + d/2 and every head start aligned), 8 | row_stride and x aligned.
  const bool vec = (p.head_dim / 2) % detail::kBf16PerVec == 0 && p.row_stride % detail::kBf16PerVec == 0 &&
                   detail::is_aligned(p.x, 16);
  const int vec_width = vec ? detail::kBf16PerVec : 1;
  Args a{.p = p, .rows_per_tile = rows_per_tile(p, vec_width)};
  a.num_tiles = detail::ceil_div(p.T, a.rows_per_tile);
  a.grid_blocks = a.num_tiles < kMaxBlocks ? a.num_tiles : kMaxBlocks;
  const dim3 grid(static_cast<unsigned>(a.grid_blocks));
  const size_t smem = shared_bytes(p, a.rows_per_tile);
  const char* name = kInverse ? "rope_kernel<inverse>" : "rope_kernel";
  if (vec) {
    launch(name, rope_kernel<detail::kBf16PerVec, kInverse>, grid, kThreads, smem, a);
  } else {
    launch(name, rope_kernel<1, kInverse>, grid, kThreads, smem, a);
  }
}

template <class Launch>
void run_forward(const Launch& launch, const RopeParams& p) {
  run<false>(launch, p);
}
template <class Launch>
void run_backward(const Launch& launch, const RopeParams& p) {
  run<true>(launch, p);
}

SG_EMULATED_NAMESPACE_END
}  // namespace sg::kernels::rope
