#include "kernels/gated_rmsnorm.h"

#include <algorithm>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "kernels/common.cuh"
#include "kernels/launch_checks.h"
#include "kernels/partial_sums.h"
#include "kernels/silu.cuh"

namespace sg::kernels {
namespace {

using detail::block_reduce_sum;
using detail::kBf16PerVec;
using detail::load_bf16;
using detail::load_f32;
using detail::store_bf16;
using detail::store_f32;

constexpr int kMaxThreads = 256;
constexpr int64_t kMaxPartials = 256;
constexpr int64_t kDefaultSharedBytes = 48 * 1024;

// g = y * silu(z) for VEC columns.
template <int VEC>
__device__ __forceinline__ void load_gated(const bf16* y, const bf16* z, float (&g)[VEC], float (&zv)[VEC],
                                           float (&yv)[VEC]) {
  load_bf16<VEC>(y, yv);
  load_bf16<VEC>(z, zv);
#pragma unroll
  for (int k = 0; k < VEC; ++k) g[k] = yv[k] * detail::silu(zv[k]);
}

// Block (token t, group grp) = blockIdx.x / G, blockIdx.x % G.
template <int VEC>
__global__ void __launch_bounds__(kMaxThreads) gated_rmsnorm_forward_kernel(GatedRmsNormForwardParams p) {
  __shared__ float reduce_scratch[32];
  const int64_t gs = p.D / p.G;
  const int64_t t = blockIdx.x / p.G;
  const int64_t grp = blockIdx.x - t * p.G;
  const int64_t col0 = grp * gs;
  const bf16* y = p.y + t * p.D + col0;
  const bf16* z = p.z + t * p.z_stride + col0;
  const int64_t first = static_cast<int64_t>(threadIdx.x) * VEC;
  const int64_t stride = static_cast<int64_t>(blockDim.x) * VEC;
  float sum_sq = 0.0f;
  for (int64_t c = first; c < gs; c += stride) {
    float g[VEC], zv[VEC], yv[VEC];
    load_gated<VEC>(y + c, z + c, g, zv, yv);
#pragma unroll
    for (int k = 0; k < VEC; ++k) sum_sq += g[k] * g[k];
  }
  sum_sq = block_reduce_sum(sum_sq, reduce_scratch);
  const float r = rsqrtf(sum_sq / static_cast<float>(gs) + p.eps);
  if (threadIdx.x == 0) p.rstd[t * p.G + grp] = r;
  bf16* out = p.out + t * p.D + col0;
  for (int64_t c = first; c < gs; c += stride) {
    float g[VEC], zv[VEC], yv[VEC], w[VEC];
    load_gated<VEC>(y + c, z + c, g, zv, yv);
    load_bf16<VEC>(p.weight + col0 + c, w);
#pragma unroll
    for (int k = 0; k < VEC; ++k) g[k] = w[k] * (g[k] * r);
    store_bf16<VEC>(out + c, g);
  }
}

// Block (grp = blockIdx.x, slot r = blockIdx.y) handles tokens r, r + gridDim.y, ... of group grp.
// n = g r, dn = dout w: dg = r (dn - n mean(dn n)); dy = dg silu(z); dz = dg y silu'(z); dweight += dout n.
template <int VEC>
__global__ void __launch_bounds__(kMaxThreads) gated_rmsnorm_backward_kernel(GatedRmsNormBackwardParams p) {
  extern __shared__ float4 dynamic_shared[];  // float4: 16-byte aligned for the vector accesses
  float* dweight_acc = reinterpret_cast<float*>(dynamic_shared);  // [gs]
  __shared__ float reduce_scratch[32];
  const int64_t gs = p.D / p.G;
  const int64_t grp = blockIdx.x;
  const int64_t col0 = grp * gs;
  const int64_t first = static_cast<int64_t>(threadIdx.x) * VEC;
  const int64_t stride = static_cast<int64_t>(blockDim.x) * VEC;
  const float inv_gs = 1.0f / static_cast<float>(gs);
  for (int64_t c = first; c < gs; c += stride) {
    float zero[VEC];
#pragma unroll
    for (int k = 0; k < VEC; ++k) zero[k] = 0.0f;
    store_f32<VEC>(dweight_acc + c, zero);
  }
  for (int64_t t = blockIdx.y; t < p.T; t += gridDim.y) {
    const bf16* y = p.y + t * p.D + col0;
    const bf16* z = p.z + t * p.z_stride + col0;
    const bf16* dout = p.dout + t * p.D + col0;
    const float r = p.rstd[t * p.G + grp];
    float dot = 0.0f;  // sum dn n
    for (int64_t c = first; c < gs; c += stride) {
      float g[VEC], zv[VEC], yv[VEC], w[VEC], go[VEC];
      load_gated<VEC>(y + c, z + c, g, zv, yv);
      load_bf16<VEC>(p.weight + col0 + c, w);
      load_bf16<VEC>(dout + c, go);
#pragma unroll
      for (int k = 0; k < VEC; ++k) dot += go[k] * w[k] * (g[k] * r);
    }
    dot = block_reduce_sum(dot, reduce_scratch);
    const float mean_dot = dot * inv_gs;
    bf16* dy = p.dy + t * p.D + col0;
    bf16* dz = p.dz + t * p.dz_stride + col0;
    for (int64_t c = first; c < gs; c += stride) {
      float g[VEC], zv[VEC], yv[VEC], w[VEC], go[VEC], acc[VEC], dyv[VEC], dzv[VEC];
      load_gated<VEC>(y + c, z + c, g, zv, yv);
      load_bf16<VEC>(p.weight + col0 + c, w);
      load_bf16<VEC>(dout + c, go);  // before the store below: dy may alias dout
      load_f32<VEC>(dweight_acc + c, acc);
#pragma unroll
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
  float* partial = p.scratch + static_cast<int64_t>(blockIdx.y) * p.D + col0;
  for (int64_t c = first; c < gs; c += stride) {
    float acc[VEC];
    load_f32<VEC>(dweight_acc + c, acc);
    store_f32<VEC>(partial + c, acc);
  }
}

void check_shape(const char* op, int64_t T, int64_t D, int64_t G) {
  SG_CHECK(T >= 0 && T <= INT32_MAX && D > 0,
           strprintf("%s: bad shape T=%lld D=%lld (0 <= T < 2^31, D > 0)", op, static_cast<long long>(T),
                     static_cast<long long>(D)));
  SG_CHECK(G > 0 && D % G == 0,
           strprintf("%s: d_inner %lld is not divisible into %lld groups (mamba_num_groups must divide d_inner)",
                     op, static_cast<long long>(D), static_cast<long long>(G)));
  SG_CHECK(T * G <= INT32_MAX, strprintf("%s: T * G = %lld blocks exceed the grid limit 2^31 - 1", op,
                                         static_cast<long long>(T * G)));
}

}  // namespace

int64_t gated_rmsnorm_backward_num_partials(int64_t T) { return std::min<int64_t>(T, kMaxPartials); }

size_t gated_rmsnorm_backward_scratch_bytes(int64_t T, int64_t D) {
  return static_cast<size_t>(gated_rmsnorm_backward_num_partials(T) * D) * sizeof(float);
}

void gated_rmsnorm_forward(cudaStream_t stream, const GatedRmsNormForwardParams& p) {
  const char* op = "gated_rmsnorm_forward";
  check_shape(op, p.T, p.D, p.G);
  detail::check_row_stride(op, "z_stride", p.z_stride, p.D);
  SG_CHECK(p.out && p.rstd && p.y && p.z && p.weight, strprintf("%s: null pointer in params", op));
  if (p.T == 0) return;
  const int64_t gs = p.D / p.G;
  const bool vec = detail::bf16_vector_path_ok(gs, {p.z_stride}, {p.out, p.y, p.z, p.weight});
  const int threads = detail::row_block_threads(gs, vec ? kBf16PerVec : 1, kMaxThreads);
  const auto grid = static_cast<unsigned>(p.T * p.G);
  if (vec) {
    gated_rmsnorm_forward_kernel<kBf16PerVec><<<grid, threads, 0, stream>>>(p);
  } else {
    gated_rmsnorm_forward_kernel<1><<<grid, threads, 0, stream>>>(p);
  }
  SG_CUDA_CHECK_LAUNCH("gated_rmsnorm_forward_kernel");
}

void gated_rmsnorm_backward(cudaStream_t stream, const GatedRmsNormBackwardParams& p) {
  const char* op = "gated_rmsnorm_backward";
  check_shape(op, p.T, p.D, p.G);
  detail::check_row_stride(op, "z_stride", p.z_stride, p.D);
  detail::check_row_stride(op, "dz_stride", p.dz_stride, p.D);
  SG_CHECK(p.dy && p.dz && p.dweight && p.dout && p.y && p.z && p.weight && p.rstd,
           strprintf("%s: null pointer in params", op));
  if (p.T == 0) return;
  const size_t need = gated_rmsnorm_backward_scratch_bytes(p.T, p.D);
  detail::check_scratch(op, p.scratch, p.scratch_bytes, need,
                        strprintf("T=%lld D=%lld", static_cast<long long>(p.T), static_cast<long long>(p.D)),
                        "gated_rmsnorm_backward_scratch_bytes(T, D)");
  const int64_t gs = p.D / p.G;
  const int64_t partials = gated_rmsnorm_backward_num_partials(p.T);
  const bool vec = detail::bf16_vector_path_ok(gs, {p.z_stride, p.dz_stride},
                                               {p.dy, p.dz, p.dout, p.y, p.z, p.weight, p.scratch});
  const int threads = detail::row_block_threads(gs, vec ? kBf16PerVec : 1, kMaxThreads);
  const size_t shared_bytes = static_cast<size_t>(gs) * sizeof(float);
  auto* kernel = vec ? gated_rmsnorm_backward_kernel<kBf16PerVec> : gated_rmsnorm_backward_kernel<1>;
  if (static_cast<int64_t>(shared_bytes) > kDefaultSharedBytes) {
    // Fails with a clear CUDA error when gs * 4 exceeds the device's opt-in shared memory per block.
    SG_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(shared_bytes)));
  }
  const dim3 grid(static_cast<unsigned>(p.G), static_cast<unsigned>(partials));
  kernel<<<grid, threads, shared_bytes, stream>>>(p);
  SG_CUDA_CHECK_LAUNCH("gated_rmsnorm_backward_kernel");
  add_partial_column_sums(stream, p.scratch, partials, {{p.dweight, p.D}});
}

}  // namespace sg::kernels
