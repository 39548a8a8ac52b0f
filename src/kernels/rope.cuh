#pragma once
// Kernels and launch sequences of RoPE (kernels/rope.h), written over a launch policy so the CPU emulator of
// the tests runs the same code as the launchers (detail::CudaLaunch).
//
// Memory-bound: the work is one read and one write of every rotated element. A block takes a tile of rows:
//   1. every thread issues the loads of its chunks (a chunk: VEC pairs of one head, x1 = x[i..i+VEC) and
//      x2 = x[i+d/2..]; VEC = 8 is one 16-byte access each), all independent, before any store;
//   2. cos/sin of each (row, pair) of the tile, from one of two sources (kTable):
//      table:    loaded with the chunk from the RopeTable (rope_table_build: fp64 angle and sincos once per
//                (position, pair) at plan time, rounded to fp32). A row's entries are shared by its heads,
//                so after the first head they come from L1/L2, and the kernel has no barrier and no fp64
//                work: the training step's path (positions t % S);
//      computed: the block computes inv_freq once per pair (fp64 pow, into shared memory) and cos/sin once
//                per (row, pair) of the tile (fp64 sincos, rounded to fp32, into shared memory), its latency
//                overlapping the loads, then a barrier: the decoding path (positions from device memory);
//   3. every thread rotates its chunks with the tile's cos/sin and stores them.
// Per element both are exactly the per-element algorithm (same fp64 angle and sincos: cos_sin(), the same
// fp32 products and fused sums: rotate(), both in rope_rotation.cuh; same bf16 rounding), so the output is bit for bit that of
// one thread per (row, pair) looping over the heads (tests/kernels/rope_per_element.cuh keeps that
// algorithm and the tests compare bits). VEC = 1 (one pair per chunk) serves rotated dimensions not a multiple
// of 16, head_dim or row strides not a multiple of 8 and x not 16-byte aligned. With partial rotary a chunk's
// pairs are (i, i + rotary_dim / 2) of the head's first rotary_dim dimensions; the rest are neither read nor
// written.
#include <cuda_runtime.h>

#include <cmath>
#include <type_traits>

#include "core/error.h"
#include "core/strings.h"
#include "kernels/common.cuh"
#include "kernels/rope.h"
#include "kernels/rope_rotation.cuh"
#include "reference/rope.h"
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
  int64_t rows_per_tile = 0;  // R: rows sharing one cos/sin tile (computed path: one shared-memory table)
  int64_t num_tiles = 0;      // ceil(T / R)
  int64_t grid_blocks = 0;    // blocks launched (tiles beyond stride by this)
};

inline bool reads_table(const RopeParams& p) { return p.table.cos_sin != nullptr; }
// d of the rotation: the dimensions rotated at the start of each head.
SG_HOST_DEVICE int64_t rotated_dims(const RopeParams& p) {
  return ref::rope_rotated_dims(p.head_dim, p.rotary_dim);
}

// Shape of the tile for a chunk width of VEC pairs (the computed path's shared-memory table caps it).
inline int64_t chunks_per_row(const RopeParams& p, int vec) {
  return p.num_heads * (rotated_dims(p) / 2 / vec);
}
inline int64_t rows_per_tile(const RopeParams& p, int vec) {
  const int64_t by_chunks = static_cast<int64_t>(kThreads) * kChunksPerThread / chunks_per_row(p, vec);
  const int64_t by_table = reads_table(p) ? by_chunks : kMaxTableEntries / (rotated_dims(p) / 2);
  const int64_t rows = by_chunks < by_table ? by_chunks : by_table;
  return rows < 1 ? 1 : rows;
}
inline size_t shared_bytes(const RopeParams& p, int64_t rows) {
  if (reads_table(p)) return 0;
  const auto half = static_cast<size_t>(rotated_dims(p) / 2);
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

// The VEC cos (or sin) values of chunk g of a shared-memory tile row (`row_table` = the row's first entry).
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

template <int VEC, bool kInverse, bool kTable>
SG_KERNEL(kThreads) rope_kernel(Args a) {
  const RopeParams& p = a.p;
  // In-tile arithmetic in 32 bits: the launcher checks num_heads * head_dim < 2^31, so a tile's chunk count
  // (at most max(kThreads * kChunksPerThread, one row's chunks)) fits; with a table, S < 2^31 too.
  const int rotated = static_cast<int>(rotated_dims(p));
  const int half = rotated / 2;
  const int groups = half / VEC;                                  // chunks per head
  const int row_chunks = static_cast<int>(p.num_heads) * groups;  // chunks per row
  const int rows = static_cast<int>(a.rows_per_tile);
  const int tid = detail::thread_index();
  double* inv_freq = nullptr;
  float* cos_table = nullptr;
  float* sin_table = nullptr;
  if constexpr (!kTable) {
    inv_freq = reinterpret_cast<double*>(detail::dynamic_smem());
    cos_table = reinterpret_cast<float*>(inv_freq + half);
    sin_table = cos_table + rows * half;
  }
  bool have_freq = false;

  for (int64_t tile = detail::block_index_x(); tile < a.num_tiles; tile += a.grid_blocks) {
    const int64_t row0 = tile * rows;
    const int tile_rows = static_cast<int>(p.T - row0 < rows ? p.T - row0 : rows);
    const int tile_chunks = tile_rows * row_chunks;
    // Table path: the position of the tile's first row (t % S), then 32-bit arithmetic per chunk.
    const auto pos0 = static_cast<uint32_t>(kTable ? row0 % p.S : 0);
    for (int pass = 0; pass < tile_chunks; pass += kThreads * kChunksPerThread) {
      // 1. Loads first: independent of each other (and, computed, of the angles).
      Packed<VEC> x1[kChunksPerThread], x2[kChunksPerThread];
      float cf[kTable ? kChunksPerThread : 1][VEC], sf[kTable ? kChunksPerThread : 1][VEC];
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
          if constexpr (kTable) {
            const uint32_t pos = (pos0 + static_cast<uint32_t>(r)) % static_cast<uint32_t>(p.S);
            const float* entry = p.table.cos_sin + static_cast<int64_t>(pos) * 2 * half + g * VEC;
            detail::load_f32<VEC>(entry, cf[k]);
            detail::load_f32<VEC>(entry + half, sf[k]);
          }
        }
      }
      // 2. Computed: the tile's cos/sin, on its first pass (the condition is the block's, so the barriers
      //    are uniform).
      if constexpr (!kTable) {
        if (pass == 0) {
          if (!have_freq) {
            for (int i = tid; i < half; i += kThreads) inv_freq[i] = ref::rope_inv_freq(i, rotated, p.base, p.scaling);
            have_freq = true;
          }
          detail::block_sync();  // inv_freq written; the previous tile's readers are done with the table
          for (int j = tid; j < tile_rows * half; j += kThreads) {
            const int r = j / half;
            const int i = j - r * half;
            const int64_t t = row0 + r;
            const int64_t pos = p.positions != nullptr ? static_cast<int64_t>(p.positions[t]) : t % p.S;
            float c, sn;
            cos_sin(pos, inv_freq[i], p.scaling.attention_factor, c, sn);
            const int slot = r * half + table_slot<VEC>(i, groups);
            cos_table[slot] = c;
            sin_table[slot] = kInverse ? -sn : sn;
          }
          detail::block_sync();
        }
      }
      // 3. Rotate and store.
SG_UNROLL
      for (int k = 0; k < kChunksPerThread; ++k) {
        if (first[k] == nullptr) continue;
        float a[VEC], b[VEC], out1[VEC], out2[VEC];
        unpack<VEC>(x1[k], a);
        unpack<VEC>(x2[k], b);
        if constexpr (kTable) {
SG_UNROLL
          for (int e = 0; e < VEC; ++e) {
            rotate(a[e], b[e], cf[k][e], kInverse ? -sf[k][e] : sf[k][e], out1[e], out2[e]);
          }
        } else {
          float ct[VEC], st[VEC];
          load_table<VEC>(cos_table + chunk_row[k] * half, chunk_group[k], groups, ct);
          load_table<VEC>(sin_table + chunk_row[k] * half, chunk_group[k], groups, st);
SG_UNROLL
          for (int e = 0; e < VEC; ++e) rotate(a[e], b[e], ct[e], st[e], out1[e], out2[e]);
        }
        detail::store_bf16<VEC>(first[k], out1);
        detail::store_bf16<VEC>(first[k] + half, out2);
      }
    }
    if constexpr (!kTable) detail::block_sync();  // the table's readers are done before the next tile rewrites it
  }
}

// One thread per (position, pair), grid-stride.
struct TableArgs {
  RopeTableParams p;
  int64_t grid_threads = 0;
};

SG_KERNEL(kThreads) rope_table_kernel(TableArgs a) {
  const RopeTableParams& p = a.p;
  const int64_t half = p.head_dim / 2;
  const int64_t total = p.positions * half;
  for (int64_t idx = static_cast<int64_t>(detail::block_index_x()) * kThreads + detail::thread_index(); idx < total;
       idx += a.grid_threads) {
    const int64_t pos = idx / half;
    const int64_t i = idx - pos * half;
    float c, s;
    cos_sin(pos, ref::rope_inv_freq(i, p.head_dim, p.base, p.scaling), p.scaling.attention_factor, c, s);
    float* row = p.cos_sin + pos * 2 * half;
    row[i] = c;
    row[half + i] = s;
  }
}

// A table serves these params only if it holds their frequencies and every position t % S.
inline void check_table(const char* op, const RopeParams& p) {
  const RopeTable& t = p.table;
  const ref::RopeScaling &a = t.scaling, &b = p.scaling;
  const bool same_scaling = a.same_as(b);
  SG_CHECK(
      p.positions == nullptr && p.S <= t.positions && t.head_dim == rotated_dims(p) && t.base == p.base && same_scaling,
      strprintf("%s: the cos/sin table (positions=%lld head_dim=%lld base=%g scaling factor=%g) does not serve "
                "these params (S=%lld rotated dims=%lld base=%g scaling factor=%g, positions %s): it needs "
                "positions t %% S (no device positions), S <= its positions, its head_dim the dimensions "
                "rotated and the same base and scaling; build it with rope_table_build from the params' own "
                "values",
                op, static_cast<long long>(t.positions), static_cast<long long>(t.head_dim), t.base, a.factor,
                static_cast<long long>(p.S), static_cast<long long>(rotated_dims(p)), p.base, b.factor,
                p.positions != nullptr ? "given" : "null"));
  SG_CHECK(detail::is_aligned(t.cos_sin, 16), strprintf("%s: the cos/sin table is not 16-byte aligned", op));
}

template <int VEC, bool kInverse, class Launch>
void launch_tiles(const Launch& launch, const RopeParams& p) {
  Args a{.p = p, .rows_per_tile = rows_per_tile(p, VEC)};
  a.num_tiles = detail::ceil_div(p.T, a.rows_per_tile);
  a.grid_blocks = a.num_tiles < kMaxBlocks ? a.num_tiles : kMaxBlocks;
  const dim3 grid(static_cast<unsigned>(a.grid_blocks));
  if (reads_table(p)) {
    launch(kInverse ? "rope_kernel<inverse, table>" : "rope_kernel<table>", rope_kernel<VEC, kInverse, true>, grid,
           kThreads, 0, a);
  } else {
    launch(kInverse ? "rope_kernel<inverse>" : "rope_kernel", rope_kernel<VEC, kInverse, false>, grid, kThreads,
           shared_bytes(p, a.rows_per_tile), a);
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
  SG_CHECK(ref::rope_rotary_dim_valid(p.head_dim, p.rotary_dim),
           strprintf("%s: rotary_dim=%lld must be 0 (the whole head) or even and at most head_dim=%lld", op,
                     static_cast<long long>(p.rotary_dim), static_cast<long long>(p.head_dim)));
  ref::check_rope_scaling(op, p.scaling, rotated_dims(p));
  if (reads_table(p)) check_table(op, p);
  if (p.T == 0) return;
  // 16-byte chunks need 8 | d/2 (x2 = x1 + d/2 aligned), 8 | head_dim (every head start aligned), 8 | row_stride
  // and x aligned.
  const bool vec = (rotated_dims(p) / 2) % detail::kBf16PerVec == 0 && p.head_dim % detail::kBf16PerVec == 0 &&
                   p.row_stride % detail::kBf16PerVec == 0 && detail::is_aligned(p.x, 16);
  if (vec) {
    launch_tiles<detail::kBf16PerVec, kInverse>(launch, p);
  } else {
    launch_tiles<1, kInverse>(launch, p);
  }
}

inline size_t table_bytes(int64_t positions, int64_t head_dim) {
  return static_cast<size_t>(positions) * static_cast<size_t>(head_dim) * sizeof(float);  // cos + sin: 2 * d/2
}

template <class Launch>
RopeTable run_table_build(const Launch& launch, const RopeTableParams& p) {
  SG_CHECK(p.cos_sin != nullptr && detail::is_aligned(p.cos_sin, 16),
           "rope_table_build: cos_sin is null or not 16-byte aligned");
  SG_CHECK(p.positions > 0 && p.positions < (int64_t{1} << 31) && p.head_dim > 0 && p.head_dim % 2 == 0 &&
               p.head_dim <= kMaxHeadDim && p.base > 0.0,
           strprintf("rope_table_build: bad table positions=%lld head_dim=%lld base=%g (need 0 < positions < 2^31, "
                     "even head_dim <= %lld, base > 0)",
                     static_cast<long long>(p.positions), static_cast<long long>(p.head_dim), p.base,
                     static_cast<long long>(kMaxHeadDim)));
  ref::check_rope_scaling("rope_table_build", p.scaling, p.head_dim);
  int64_t blocks = detail::ceil_div(p.positions * (p.head_dim / 2), kThreads);
  blocks = blocks < kMaxBlocks ? blocks : kMaxBlocks;
  const TableArgs a{.p = p, .grid_threads = blocks * kThreads};
  launch("rope_table_kernel", rope_table_kernel, dim3(static_cast<unsigned>(blocks)), kThreads, 0, a);
  return RopeTable{
      .cos_sin = p.cos_sin, .positions = p.positions, .head_dim = p.head_dim, .base = p.base, .scaling = p.scaling};
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
