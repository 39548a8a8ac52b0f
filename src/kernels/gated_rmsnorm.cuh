#pragma once
// Kernels and launch sequences of the gated grouped RMSNorm (kernels/gated_rmsnorm.h), written over a
// launch policy so the CPU emulator of the tests runs the same code as the launchers (detail::CudaLaunch).
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/strings.h"
#include "kernels/common.cuh"
#include "kernels/gated_rmsnorm.h"
#include "kernels/launch_checks.h"
#include "kernels/partial_sums.cuh"
#include "kernels/reciprocal_sqrt.cuh"
#include "kernels/shape_limits.h"
#include "kernels/silu.cuh"

namespace sg::kernels::gated_norm {
SG_EMULATED_NAMESPACE_BEGIN

using detail::block_reduce_sum;
using detail::kBf16PerVec;
using detail::load_bf16;
using detail::load_f32;
using detail::reciprocal_sqrt;
using detail::store_bf16;
using detail::store_f32;

inline constexpr int kMaxThreads = 256;
inline constexpr int64_t kMaxPartials = 256;
// block_reduce_sum's shared scratch, at the start of shared memory (kernels/shape_limits.h counts it too).
inline constexpr int kReduceFloats = kGatedRmsNormReduceFloats;

SG_HOST_DEVICE int64_t backward_partials(int64_t T) { return T < kMaxPartials ? T : kMaxPartials; }

// g = y * silu(z) for VEC columns (y and z as loaded, too).
template <int VEC>
SG_DEVICE void load_gated(const bf16* y, const bf16* z, float (&g)[VEC], float (&zv)[VEC], float (&yv)[VEC]) {
  load_bf16<VEC>(y, yv);
  load_bf16<VEC>(z, zv);
SG_UNROLL
  for (int k = 0; k < VEC; ++k) g[k] = yv[k] * detail::silu(zv[k]);
}

// Block (token t, group grp) = block_x / G, block_x % G.
template <int VEC>
SG_KERNEL(kMaxThreads) gated_rmsnorm_forward_kernel(GatedRmsNormForwardParams p) {
  float* reduce_scratch = reinterpret_cast<float*>(detail::dynamic_smem());
  const int64_t gs = p.D / p.G;
  const int64_t t = detail::block_index_x() / p.G;
  const int64_t grp = detail::block_index_x() - t * p.G;
  const int64_t col0 = grp * gs;
  const bf16* y = p.y + t * p.D + col0;
  const bf16* z = p.z + t * p.z_row_stride + col0;
  const int64_t first = static_cast<int64_t>(detail::thread_index()) * VEC;
  const int64_t stride = static_cast<int64_t>(detail::block_threads()) * VEC;
  float sum_sq = 0.0f;
  for (int64_t c = first; c < gs; c += stride) {
    float g[VEC], zv[VEC], yv[VEC];
    load_gated<VEC>(y + c, z + c, g, zv, yv);
SG_UNROLL
    for (int k = 0; k < VEC; ++k) sum_sq += g[k] * g[k];
  }
  sum_sq = block_reduce_sum(sum_sq, reduce_scratch);
  const float r = reciprocal_sqrt(sum_sq / static_cast<float>(gs) + p.eps);
  if (detail::thread_index() == 0) p.rstd[t * p.G + grp] = r;
  bf16* out = p.out + t * p.D + col0;
  for (int64_t c = first; c < gs; c += stride) {
    float g[VEC], zv[VEC], yv[VEC], w[VEC];
    load_gated<VEC>(y + c, z + c, g, zv, yv);
    load_bf16<VEC>(p.weight + col0 + c, w);
SG_UNROLL
    for (int k = 0; k < VEC; ++k) g[k] = w[k] * (g[k] * r);
    store_bf16<VEC>(out + c, g);
  }
}

// Block (grp = block_x, slot r = block_y) handles tokens r, r + P, ... of group grp (P partial rows).
// n = g r, dn = dout w: dg = r (dn - n mean(dn n)); dy = dg silu(z); dz = dg y silu'(z); dweight += dout n.
template <int VEC>
SG_KERNEL(kMaxThreads) gated_rmsnorm_backward_kernel(GatedRmsNormBackwardParams p) {
  float* reduce_scratch = reinterpret_cast<float*>(detail::dynamic_smem());
  float* dweight_acc = reduce_scratch + kReduceFloats;  // [gs], 16-byte aligned
  const int64_t gs = p.D / p.G;
  const int64_t grp = detail::block_index_x();
  const int64_t col0 = grp * gs;
  const int64_t num_partials = backward_partials(p.T);
  const int64_t first = static_cast<int64_t>(detail::thread_index()) * VEC;
  const int64_t stride = static_cast<int64_t>(detail::block_threads()) * VEC;
  const float inv_gs = 1.0f / static_cast<float>(gs);
  for (int64_t c = first; c < gs; c += stride) {
    float zero[VEC];
SG_UNROLL
    for (int k = 0; k < VEC; ++k) zero[k] = 0.0f;
    store_f32<VEC>(dweight_acc + c, zero);
  }
  for (int64_t t = detail::block_index_y(); t < p.T; t += num_partials) {
    const bf16* y = p.y + t * p.D + col0;
    const bf16* z = p.z + t * p.z_row_stride + col0;
    const bf16* dout = p.dout + t * p.D + col0;
    const float r = p.rstd[t * p.G + grp];
    float dot = 0.0f;  // sum dn n
    for (int64_t c = first; c < gs; c += stride) {
      float g[VEC], zv[VEC], yv[VEC], w[VEC], go[VEC];
      load_gated<VEC>(y + c, z + c, g, zv, yv);
      load_bf16<VEC>(p.weight + col0 + c, w);
      load_bf16<VEC>(dout + c, go);
SG_UNROLL
      for (int k = 0; k < VEC; ++k) dot += go[k] * w[k] * (g[k] * r);
    }
    dot = block_reduce_sum(dot, reduce_scratch);
    const float mean_dot = dot * inv_gs;
    bf16* dy = p.dy + t * p.D + col0;
    bf16* dz = p.dz + t * p.dz_row_stride + col0;
    for (int64_t c = first; c < gs; c += stride) {
      float g[VEC], zv[VEC], yv[VEC], w[VEC], go[VEC], acc[VEC], dyv[VEC], dzv[VEC];
      load_gated<VEC>(y + c, z + c, g, zv, yv);
      load_bf16<VEC>(p.weight + col0 + c, w);
      load_bf16<VEC>(dout + c, go);  // before the store below: dy may alias dout
      load_f32<VEC>(dweight_acc + c, acc);
SG_UNROLL
      for (int k = 0; k < VEC; ++k) {
        const float n = g[k] * r;
        const float dg = r * (go[k] * w[k] - n * mean_dot);
        const float sig = detail::sigmoid(zv[k]);
        dyv[k] = dg * (zv[k] * sig);
        dzv[k] = dg * (yv[k] * sig * (1.0f + zv[k] * (1.0f - sig)));
        acc[k] += go[k] * n;
      }
      store_bf16<VEC>(dy + c, dyv);
      store_bf16<VEC>(dz + c, dzv);
      store_f32<VEC>(dweight_acc + c, acc);
    }
  }
  float* partial = p.scratch + static_cast<int64_t>(detail::block_index_y()) * p.D + col0;
  for (int64_t c = first; c < gs; c += stride) {
    float acc[VEC];
    load_f32<VEC>(dweight_acc + c, acc);
    store_f32<VEC>(partial + c, acc);
  }
}

// The backward's group width within the shared memory a block may opt into (kernels/shape_limits.h).
inline void check_group_width(const char* op, int64_t D, int64_t G) {
  const std::string problem = gated_rmsnorm_group_width_problem(D / G);
  SG_CHECK(problem.empty(), strprintf("%s: d_inner %lld in %lld groups (mamba_num_groups): %s; use more groups", op,
                                      static_cast<long long>(D), static_cast<long long>(G), problem.c_str()));
}

inline void check_shape(const char* op, int64_t T, int64_t D, int64_t G) {
  SG_CHECK(T >= 0 && T <= INT32_MAX && D > 0,
           strprintf("%s: bad shape T=%lld D=%lld (0 <= T < 2^31, D > 0)", op, static_cast<long long>(T),
                     static_cast<long long>(D)));
  SG_CHECK(G > 0 && D % G == 0,
           strprintf("%s: d_inner %lld is not divisible into %lld groups (mamba_num_groups must divide d_inner)",
                     op, static_cast<long long>(D), static_cast<long long>(G)));
  SG_CHECK(T * G <= INT32_MAX, strprintf("%s: T * G = %lld blocks exceed the grid limit 2^31 - 1", op,
                                         static_cast<long long>(T * G)));
}

template <class Launch>
void run_forward(const Launch& launch, GatedRmsNormForwardParams p) {
  const char* op = "gated_rmsnorm_forward";
  check_shape(op, p.T, p.D, p.G);
  p.z_row_stride = detail::resolve_row_stride(op, "z_row_stride", p.z_row_stride, p.D);
  SG_CHECK(p.out && p.rstd && p.y && p.z && p.weight, strprintf("%s: null pointer in params", op));
  if (p.T == 0) return;
  const int64_t gs = p.D / p.G;
  const bool vec = detail::bf16_vector_path_ok(gs, {p.z_row_stride}, {p.out, p.y, p.z, p.weight});
  const int threads = detail::row_block_threads(gs, vec ? kBf16PerVec : 1, kMaxThreads);
  const dim3 grid(static_cast<unsigned>(p.T * p.G));
  const size_t smem = sizeof(float) * kReduceFloats;
  if (vec) {
    launch("gated_rmsnorm_forward_kernel", gated_rmsnorm_forward_kernel<kBf16PerVec>, grid, threads, smem, p);
  } else {
    launch("gated_rmsnorm_forward_kernel", gated_rmsnorm_forward_kernel<1>, grid, threads, smem, p);
  }
}

template <class Launch>
void run_backward(const Launch& launch, GatedRmsNormBackwardParams p) {
  const char* op = "gated_rmsnorm_backward";
  check_shape(op, p.T, p.D, p.G);
  check_group_width(op, p.D, p.G);
  p.z_row_stride = detail::resolve_row_stride(op, "z_row_stride", p.z_row_stride, p.D);
  p.dz_row_stride = detail::resolve_row_stride(op, "dz_row_stride", p.dz_row_stride, p.D);
  SG_CHECK(p.dy && p.dz && p.dweight.data && p.dout && p.y && p.z && p.weight && p.rstd,
           strprintf("%s: null pointer in params", op));
  if (p.T == 0) return;
  const int64_t partials = backward_partials(p.T);
  detail::check_scratch(op, p.scratch, p.scratch_bytes, static_cast<size_t>(partials * p.D) * sizeof(float),
                        strprintf("T=%lld D=%lld", static_cast<long long>(p.T), static_cast<long long>(p.D)),
                        "gated_rmsnorm_backward_scratch_bytes(T, D)");
  const int64_t gs = p.D / p.G;
  const bool vec = detail::bf16_vector_path_ok(gs, {p.z_row_stride, p.dz_row_stride},
                                               {p.dy, p.dz, p.dout, p.y, p.z, p.weight, p.scratch});
  const int threads = detail::row_block_threads(gs, vec ? kBf16PerVec : 1, kMaxThreads);
  // More than 48 KiB for gs > 12256: the launch policy opts in, up to gs = kGatedRmsNormMaxGroupWidth (checked).
  const size_t smem = static_cast<size_t>(gated_rmsnorm_backward_smem_bytes(gs));
  const dim3 grid(static_cast<unsigned>(p.G), static_cast<unsigned>(partials));
  if (vec) {
    launch("gated_rmsnorm_backward_kernel", gated_rmsnorm_backward_kernel<kBf16PerVec>, grid, threads, smem, p);
  } else {
    launch("gated_rmsnorm_backward_kernel", gated_rmsnorm_backward_kernel<1>, grid, threads, smem, p);
  }
  partial_sums::run_column_sums(launch, p.scratch, partials, {{p.dweight, p.D}});
}

SG_EMULATED_NAMESPACE_END
}  // namespace sg::kernels::gated_norm
