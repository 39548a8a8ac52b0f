#include "kernels/adamw.h"

#include <algorithm>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"

namespace sg::kernels {
namespace {

constexpr int kThreads = 256;
// Grid-stride with a capped grid: 4096 x 256 threads still fill an H200 many times over.
constexpr int64_t kMaxBlocks = 4096;

// The step's scalars, read once per thread.
struct AdamWStepScalars {
  float grad_scale, step_size, bc2_sqrt, decay_factor, one_minus_b1, one_minus_b2;
};

__device__ __forceinline__ AdamWStepScalars step_scalars(const AdamWStepConstants* constants_ptr,
                                                         const float* grad_scale_ptr, const AdamWHyperparams& h) {
  const AdamWStepConstants c = *constants_ptr;
  return {.grad_scale = grad_scale_ptr != nullptr ? *grad_scale_ptr : 1.0f,
          .step_size = c.step_size,
          .bc2_sqrt = c.bias_correction2_sqrt,
          .decay_factor = c.decay_factor,
          .one_minus_b1 = 1.0f - h.beta1,
          .one_minus_b2 = 1.0f - h.beta2};
}

// One element's update; the vectorised and the scalar loops both call it, so they agree bitwise.
__device__ __forceinline__ void update_element(float grad, float& m, float& v, float& w, bool decay,
                                               const AdamWStepScalars& s, const AdamWHyperparams& h) {
  const float g = grad * s.grad_scale;
  m = h.beta1 * m + s.one_minus_b1 * g;
  v = h.beta2 * v + s.one_minus_b2 * g * g;
  if (decay) w *= s.decay_factor;
  w -= s.step_size * m / (sqrtf(v) / s.bc2_sqrt + h.eps);
}

__global__ void __launch_bounds__(kThreads)
    adamw_kernel(float* __restrict__ master, bf16* __restrict__ compute, const float* __restrict__ grads,
                 float* __restrict__ exp_avg, float* __restrict__ exp_avg_sq, int64_t n, int64_t n_decay,
                 const AdamWStepConstants* __restrict__ constants_ptr, const float* __restrict__ grad_scale_ptr,
                 AdamWHyperparams h, bool vectorized) {
  const AdamWStepScalars s = step_scalars(constants_ptr, grad_scale_ptr, h);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  // 16-byte loads and stores where every buffer allows them: AdamW is one memory-bound pass, and four
  // elements per access keep more bytes in flight per thread than scalar accesses do.
  const int64_t quads = vectorized ? n / 4 : 0;
  for (int64_t q = first; q < quads; q += stride) {
    const float4 g = reinterpret_cast<const float4*>(grads)[q];
    float4 m = reinterpret_cast<const float4*>(exp_avg)[q];
    float4 v = reinterpret_cast<const float4*>(exp_avg_sq)[q];
    float4 w = reinterpret_cast<const float4*>(master)[q];
    const int64_t i = q * 4;
    update_element(g.x, m.x, v.x, w.x, i < n_decay, s, h);
    update_element(g.y, m.y, v.y, w.y, i + 1 < n_decay, s, h);
    update_element(g.z, m.z, v.z, w.z, i + 2 < n_decay, s, h);
    update_element(g.w, m.w, v.w, w.w, i + 3 < n_decay, s, h);
    reinterpret_cast<float4*>(exp_avg)[q] = m;
    reinterpret_cast<float4*>(exp_avg_sq)[q] = v;
    reinterpret_cast<float4*>(master)[q] = w;
    if (compute != nullptr) {
      const __nv_bfloat162 lo = __floats2bfloat162_rn(w.x, w.y);
      const __nv_bfloat162 hi = __floats2bfloat162_rn(w.z, w.w);
      reinterpret_cast<uint2*>(compute)[q] =
          make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
    }
  }
  for (int64_t i = quads * 4 + first; i < n; i += stride) {
    float m = exp_avg[i], v = exp_avg_sq[i], w = master[i];
    update_element(grads[i], m, v, w, i < n_decay, s, h);
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    master[i] = w;
    if (compute != nullptr) compute[i] = __float2bfloat16(w);
  }
}

bool aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

}  // namespace

void adamw_step(cudaStream_t stream, const AdamWParams& p) {
  SG_CHECK(p.n >= 0 && p.n_decay >= 0 && p.n_decay <= p.n,
           strprintf("adamw_step: need 0 <= n_decay (%lld) <= n (%lld)", (long long)p.n_decay, (long long)p.n));
  SG_CHECK(p.master_weights && p.grads && p.exp_avg && p.exp_avg_sq && p.step_constants,
           "adamw_step: master_weights, grads, exp_avg, exp_avg_sq and step_constants must be device pointers");
  if (p.n == 0) return;
  // The arena and the shards align every buffer; offsets into them (tests, a shard's slice) may not.
  const bool vectorized = aligned(p.master_weights, 16) && aligned(p.grads, 16) && aligned(p.exp_avg, 16) &&
                          aligned(p.exp_avg_sq, 16) && (p.compute_weights == nullptr || aligned(p.compute_weights, 8));
  const int64_t per_thread = vectorized ? 4 : 1;
  const int64_t threads_needed = (p.n + per_thread - 1) / per_thread;
  const int64_t blocks = std::min<int64_t>((threads_needed + kThreads - 1) / kThreads, kMaxBlocks);
  adamw_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      p.master_weights, p.compute_weights, p.grads, p.exp_avg, p.exp_avg_sq, p.n, p.n_decay,
      p.step_constants, p.grad_scale, p.hyper, vectorized);
  SG_CUDA_CHECK_LAUNCH("adamw_kernel");
}

}  // namespace sg::kernels
