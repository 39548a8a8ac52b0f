#pragma once
// Kernels and launch sequence of rmsnorm_forward and residual_rmsnorm_forward (kernels/rmsnorm.h), written
// over a launch policy so the CPU emulator of the tests runs the same code as the launcher
// (detail::CudaLaunch). One kernel family serves both: the residual variant first forms the stored
// residual bf16(residual_in + delta) and normalises that.
//
// Memory-bound (plain: read x, write y; residual: read residual_in and delta, write residual_out and y;
// the weight row stays in L1/L2). Two layouts:
// - Warp per row (16-byte vector path, H <= kWarpRowMaxWidth): lane l loads vectors l, l + 32, ... of its
//   row (and of the weight) into registers at once, the sum of squares is a warp butterfly, and both
//   outputs are written from the registers: one DRAM round trip per row, no shared memory, no barrier.
//   kWarpRowsPerBlock rows per block (grid T / 8: 1024 blocks, one wave, for 8192 rows). This replaced a
//   block of 96 threads per row whose block reduction (two barriers, shared memory) and second pass over
//   its own residual_out stalled the warps (H200: 8192 x 768 at ~2 TB/s under Nsight Compute).
// - Block per row (wider rows, the scalar path for H % 8 != 0 or misaligned pointers): threads stride the
//   row, a fixed-order block reduction, then a second pass (re-reading x, or the residual_out this thread
//   just wrote).
// Both reduce in an order fixed by (H, path), so a row's bits are the same in every run.
#include "core/error.h"
#include "core/strings.h"
#include "kernels/common.cuh"
#include "kernels/launch_checks.h"
#include "kernels/reciprocal_sqrt.cuh"
#include "kernels/rmsnorm.h"
#include "kernels/rmsnorm_rows.cuh"

namespace sg::kernels::rmsnorm_fwd {
SG_EMULATED_NAMESPACE_BEGIN

inline constexpr int kWarpRowsPerBlock = 8;
inline constexpr int kWarpRowThreads = 32 * kWarpRowsPerBlock;
// 16-byte vectors per lane: 8 bf16 x 4 x 32 lanes = 1024 columns. Wider rows take the block kernel: at
// 2048 (1b) the warp rows were slower on the H200 (32.4 -> 36.3 us a call, sixth session), at 768 (small)
// faster (12.2 -> 11.8 us).
inline constexpr int kMaxWarpChunks = 4;
inline constexpr int64_t kWarpRowMaxWidth = 32 * kMaxWarpChunks * detail::kBf16PerVec;
inline constexpr int kMaxRowThreads = 512;

// Both forwards' operands; residual_out == nullptr (and delta == nullptr) for the plain norm.
struct ForwardArgs {
  bf16* norm_out = nullptr;
  float* rstd = nullptr;
  bf16* residual_out = nullptr;
  const bf16* in = nullptr;  // x, or residual_in
  const bf16* delta = nullptr;
  const bf16* weight = nullptr;
  int64_t T = 0, H = 0;
  float eps = 0.0f;
  rmsnorm_rows::Rows rows;  // of every [T, H] operand (contiguous for the residual variant)
};

// The 8 bf16 of a 16-byte vector as 4 packed words (the lower column in the low half).
struct Vec8 {
  uint32_t w[4];
};
SG_DEVICE Vec8 load_vec8(const bf16* src) {
  const uint4 raw = detail::load_16_bytes(src);
  return Vec8{{raw.x, raw.y, raw.z, raw.w}};
}
SG_DEVICE void store_vec8(bf16* dst, const Vec8& v) {
  detail::store_16_bytes(dst, uint4{v.w[0], v.w[1], v.w[2], v.w[3]});
}

template <bool kResidual, int CHUNKS>
SG_KERNEL(kWarpRowThreads) rmsnorm_forward_warp_kernel(ForwardArgs a) {
  const int64_t row = static_cast<int64_t>(detail::block_index_x()) * kWarpRowsPerBlock + detail::warp_id();
  if (row >= a.T) return;  // the whole warp: this kernel has no barrier
  const int lane = static_cast<int>(detail::lane_id());
  const int64_t H = a.H, base = rmsnorm_rows::row_start(a.rows, row, H);
  // Every input load of the row first (1 or 2 vectors per chunk in flight per lane).
  Vec8 x[CHUNKS] = {}, d[CHUNKS] = {};
SG_UNROLL
  for (int k = 0; k < CHUNKS; ++k) {
    const int64_t c = static_cast<int64_t>(lane + 32 * k) * detail::kBf16PerVec;
    if (c >= H) continue;
    x[k] = load_vec8(a.in + base + c);
    if constexpr (kResidual) d[k] = load_vec8(a.delta + base + c);
  }
  float sum_sq = 0.0f;
SG_UNROLL
  for (int k = 0; k < CHUNKS; ++k) {
    const int64_t c = static_cast<int64_t>(lane + 32 * k) * detail::kBf16PerVec;
    if (c >= H) continue;
SG_UNROLL
    for (int i = 0; i < 4; ++i) {
      float2 v = detail::unpack_bf16(x[k].w[i]);
      if constexpr (kResidual) {
        // Round once to the stored dtype; the statistics use the stored value.
        const float2 dv = detail::unpack_bf16(d[k].w[i]);
        x[k].w[i] = detail::pack_bf16(v.x + dv.x, v.y + dv.y);
        v = detail::unpack_bf16(x[k].w[i]);
      }
      sum_sq += v.x * v.x;
      sum_sq += v.y * v.y;
    }
    // Read by this lane above before the store: residual_out may alias residual_in.
    if constexpr (kResidual) store_vec8(a.residual_out + base + c, x[k]);
  }
  sum_sq = detail::warp_reduce_sum(sum_sq);
  const float r = detail::reciprocal_sqrt(sum_sq / static_cast<float>(H) + a.eps);
  if (lane == 0) a.rstd[row] = r;
SG_UNROLL
  for (int k = 0; k < CHUNKS; ++k) {
    const int64_t c = static_cast<int64_t>(lane + 32 * k) * detail::kBf16PerVec;
    if (c >= H) continue;
    const Vec8 w = load_vec8(a.weight + c);  // the block's other rows keep it in L1
    Vec8 y;
SG_UNROLL
    for (int i = 0; i < 4; ++i) {
      const float2 v = detail::unpack_bf16(x[k].w[i]), wv = detail::unpack_bf16(w.w[i]);
      y.w[i] = detail::pack_bf16(wv.x * (v.x * r), wv.y * (v.y * r));
    }
    store_vec8(a.norm_out + base + c, y);
  }
}

template <bool kResidual, int VEC>
SG_KERNEL(kMaxRowThreads) rmsnorm_forward_block_kernel(ForwardArgs a) {
  float* reduce_scratch = reinterpret_cast<float*>(detail::dynamic_smem());  // 32 floats
  const int64_t H = a.H;
  const int64_t row = detail::block_index_x();
  const int64_t base = rmsnorm_rows::row_start(a.rows, row, H);
  const int t = detail::thread_index();
  const int64_t first = static_cast<int64_t>(t) * VEC;
  const int64_t stride = static_cast<int64_t>(detail::block_threads()) * VEC;
  const bf16* x = a.in + base;
  float sum_sq = 0.0f;
  for (int64_t c = first; c < H; c += stride) {
    float v[VEC];
    detail::load_bf16<VEC>(x + c, v);
    if constexpr (kResidual) {
      float dv[VEC];
      detail::load_bf16<VEC>(a.delta + base + c, dv);
      SG_UNROLL
      for (int k = 0; k < VEC; ++k) v[k] = __bfloat162float(__float2bfloat16_rn(v[k] + dv[k]));
      detail::store_bf16<VEC>(a.residual_out + base + c, v);  // exact: v[k] is already a bf16 value
    }
SG_UNROLL
    for (int k = 0; k < VEC; ++k) sum_sq += v[k] * v[k];
  }
  sum_sq = detail::block_reduce_sum(sum_sq, reduce_scratch);
  const float r = detail::reciprocal_sqrt(sum_sq / static_cast<float>(H) + a.eps);
  if (t == 0) a.rstd[row] = r;
  // The residual variant reads back this thread's own residual_out stores of the first loop.
  const bf16* src = kResidual ? a.residual_out + base : x;
  bf16* y = a.norm_out + base;
  for (int64_t c = first; c < H; c += stride) {
    float v[VEC], w[VEC];
    detail::load_bf16<VEC>(src + c, v);
    detail::load_bf16<VEC>(a.weight + c, w);
SG_UNROLL
    for (int k = 0; k < VEC; ++k) v[k] = w[k] * (v[k] * r);
    detail::store_bf16<VEC>(y + c, v);
  }
}

// True when the warp-per-row kernel takes rows of width H (on the vector path).
SG_HOST_DEVICE bool warp_per_row(int64_t H, bool vec) { return vec && H <= kWarpRowMaxWidth; }

template <class Launch, bool kResidual, int CHUNKS>
void launch_warp_rows(const Launch& launch, const ForwardArgs& a, const char* name) {
  const dim3 grid(static_cast<unsigned>(detail::ceil_div(a.T, kWarpRowsPerBlock)));
  launch(name, rmsnorm_forward_warp_kernel<kResidual, CHUNKS>, grid, kWarpRowThreads, 0, a);
}

// `vec`: H % 8 == 0 and every bf16 pointer 16-byte aligned (the caller checks).
template <class Launch, bool kResidual>
void run_forward(const Launch& launch, const ForwardArgs& a, bool vec) {
  if (a.T == 0) return;
  if (warp_per_row(a.H, vec)) {
    const char* name = kResidual ? "residual_rmsnorm_forward_warp_kernel" : "rmsnorm_forward_warp_kernel";
    switch (detail::ceil_div(a.H / detail::kBf16PerVec, 32)) {
      case 1: launch_warp_rows<Launch, kResidual, 1>(launch, a, name); break;
      case 2: launch_warp_rows<Launch, kResidual, 2>(launch, a, name); break;
      case 3: launch_warp_rows<Launch, kResidual, 3>(launch, a, name); break;
      default: launch_warp_rows<Launch, kResidual, kMaxWarpChunks>(launch, a, name); break;
    }
    return;
  }
  const char* name = kResidual ? "residual_rmsnorm_forward_block_kernel" : "rmsnorm_forward_block_kernel";
  const int threads = detail::row_block_threads(a.H, vec ? detail::kBf16PerVec : 1, kMaxRowThreads);
  const dim3 grid(static_cast<unsigned>(a.T));
  const size_t smem = 32 * sizeof(float);
  if (vec) {
    launch(name, rmsnorm_forward_block_kernel<kResidual, detail::kBf16PerVec>, grid, threads, smem, a);
  } else {
    launch(name, rmsnorm_forward_block_kernel<kResidual, 1>, grid, threads, smem, a);
  }
}

inline void check_shape(const char* op, int64_t T, int64_t H) {
  SG_CHECK(T >= 0 && T <= INT32_MAX,
           strprintf("%s: T = %lld out of range [0, 2^31)", op, static_cast<long long>(T)));
  SG_CHECK(H > 0, strprintf("%s: H = %lld must be positive", op, static_cast<long long>(H)));
}

template <class Launch>
void run_rmsnorm_forward(const Launch& launch, const RmsNormForwardParams& p) {
  check_shape("rmsnorm_forward", p.T, p.H);
  SG_CHECK(p.out && p.rstd && p.in && p.weight, "rmsnorm_forward: null pointer in params");
  const ForwardArgs a{.norm_out = p.out,
                      .rstd = p.rstd,
                      .in = p.in,
                      .weight = p.weight,
                      .T = p.T,
                      .H = p.H,
                      .eps = p.eps,
                      .rows = rmsnorm_rows::resolve("rmsnorm_forward", p.rows_per_group, p.group_stride, p.T, p.H)};
  run_forward<Launch, false>(launch, a,
                             detail::bf16_vector_path_ok(p.H, {a.rows.group_stride}, {p.out, p.in, p.weight}));
}

template <class Launch>
void run_residual_rmsnorm_forward(const Launch& launch, const ResidualRmsNormForwardParams& p) {
  check_shape("residual_rmsnorm_forward", p.T, p.H);
  SG_CHECK(p.residual_out && p.norm_out && p.rstd && p.residual_in && p.delta && p.weight,
           "residual_rmsnorm_forward: null pointer in params");
  const ForwardArgs a{.norm_out = p.norm_out,
                      .rstd = p.rstd,
                      .residual_out = p.residual_out,
                      .in = p.residual_in,
                      .delta = p.delta,
                      .weight = p.weight,
                      .T = p.T,
                      .H = p.H,
                      .eps = p.eps,
                      .rows = {.per_group = 1, .group_stride = p.H}};
  const bool vec =
      detail::bf16_vector_path_ok(p.H, {}, {p.residual_out, p.norm_out, p.residual_in, p.delta, p.weight});
  run_forward<Launch, true>(launch, a, vec);
}

SG_EMULATED_NAMESPACE_END
}  // namespace sg::kernels::rmsnorm_fwd
