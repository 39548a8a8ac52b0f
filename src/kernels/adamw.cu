#include "kernels/adamw.h"

#include <algorithm>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"

namespace sg::kernels {
namespace {

constexpr int kThreads = 256;
// Grid-stride with a capped grid: every thread computes the bias corrections (two fp64 pow) once, so
// a few passes per thread amortise them; 4096 x 256 threads still fill an H200 many times over.
constexpr int64_t kMaxBlocks = 4096;

__global__ void __launch_bounds__(kThreads)
    adamw_kernel(float* __restrict__ master, bf16* __restrict__ compute, const float* __restrict__ grads,
                 float* __restrict__ exp_avg, float* __restrict__ exp_avg_sq, int64_t n, int64_t n_decay,
                 const float* __restrict__ lr_ptr, const int64_t* __restrict__ step_ptr,
                 const float* __restrict__ grad_scale_ptr, AdamWHyperparams h) {
  const float lr = *lr_ptr;
  const double t = static_cast<double>(*step_ptr + 1);
  const float grad_scale = grad_scale_ptr != nullptr ? *grad_scale_ptr : 1.0f;
  const float step_size = static_cast<float>(lr / (1.0 - pow(static_cast<double>(h.beta1), t)));
  const float bc2_sqrt = static_cast<float>(sqrt(1.0 - pow(static_cast<double>(h.beta2), t)));
  const float decay_factor = 1.0f - lr * h.weight_decay;
  const float one_minus_b1 = 1.0f - h.beta1;
  const float one_minus_b2 = 1.0f - h.beta2;

  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    const float g = grads[i] * grad_scale;
    const float m = h.beta1 * exp_avg[i] + one_minus_b1 * g;
    const float v = h.beta2 * exp_avg_sq[i] + one_minus_b2 * g * g;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    float w = master[i];
    if (i < n_decay) w *= decay_factor;
    w -= step_size * m / (sqrtf(v) / bc2_sqrt + h.eps);
    master[i] = w;
    if (compute != nullptr) compute[i] = __float2bfloat16(w);
  }
}

}  // namespace

void adamw_step(cudaStream_t stream, const AdamWParams& p) {
  SG_CHECK(p.n >= 0 && p.n_decay >= 0 && p.n_decay <= p.n,
           strprintf("adamw_step: need 0 <= n_decay (%lld) <= n (%lld)", (long long)p.n_decay, (long long)p.n));
  SG_CHECK(p.master_weights && p.grads && p.exp_avg && p.exp_avg_sq && p.lr && p.step_counter,
           "adamw_step: master_weights, grads, exp_avg, exp_avg_sq, lr and step_counter must be device pointers");
  if (p.n == 0) return;
  const int64_t blocks = std::min<int64_t>((p.n + kThreads - 1) / kThreads, kMaxBlocks);
  adamw_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      p.master_weights, p.compute_weights, p.grads, p.exp_avg, p.exp_avg_sq, p.n, p.n_decay, p.lr,
      p.step_counter, p.grad_scale, p.hyper);
  SG_CUDA_CHECK_LAUNCH("adamw_kernel");
}

}  // namespace sg::kernels
