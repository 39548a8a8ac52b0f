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

// One element's update; the vectorised and the scalar loops both call it, so they agree bitwise. Every
// operation is an explicitly rounded intrinsic: left to itself the compiler fuses multiply-adds
// differently in each instantiation (fp32 or bf16 moments) and loop, which changed the bits of the
// weights with the storage dtype. Unfused, each operation rounds as the CPU twin's does.
__device__ __forceinline__ void update_element(float grad, float& m, float& v, float& w, bool decay,
                                               const AdamWStepScalars& s, const AdamWHyperparams& h) {
  const float g = __fmul_rn(grad, s.grad_scale);
  m = __fadd_rn(__fmul_rn(h.beta1, m), __fmul_rn(s.one_minus_b1, g));
  v = __fadd_rn(__fmul_rn(h.beta2, v), __fmul_rn(__fmul_rn(s.one_minus_b2, g), g));
  if (decay) w = __fmul_rn(w, s.decay_factor);
  const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), s.bc2_sqrt), h.eps);
  w = __fsub_rn(w, __fdiv_rn(__fmul_rn(s.step_size, m), denom));
}

// Gradient and moment storage: fp32 as is, bf16 widened on load and rounded to nearest even on store. Four
// elements at a time for the 16-byte path (8 bytes for bf16), one for the scalar tail.
__device__ __forceinline__ float4 load4(const float* p, int64_t q) { return reinterpret_cast<const float4*>(p)[q]; }
__device__ __forceinline__ float4 load4(const bf16* p, int64_t q) {
  const uint2 u = reinterpret_cast<const uint2*>(p)[q];
  const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.x));
  const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.y));
  return make_float4(lo.x, lo.y, hi.x, hi.y);
}
__device__ __forceinline__ void store4(float* p, int64_t q, float4 x) { reinterpret_cast<float4*>(p)[q] = x; }
__device__ __forceinline__ void store4(bf16* p, int64_t q, float4 x) {
  const __nv_bfloat162 lo = __floats2bfloat162_rn(x.x, x.y);
  const __nv_bfloat162 hi = __floats2bfloat162_rn(x.z, x.w);
  reinterpret_cast<uint2*>(p)[q] =
      make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
}
__device__ __forceinline__ float load1(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float load1(const bf16* p, int64_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void store1(float* p, int64_t i, float x) { p[i] = x; }
__device__ __forceinline__ void store1(bf16* p, int64_t i, float x) { p[i] = __float2bfloat16(x); }

template <class GradT, class ExpAvgT, class ExpAvgSqT>
__global__ void __launch_bounds__(kThreads)
    adamw_kernel(float* __restrict__ master, bf16* __restrict__ compute, const GradT* __restrict__ grads,
                 ExpAvgT* __restrict__ exp_avg, ExpAvgSqT* __restrict__ exp_avg_sq, int64_t n, int64_t n_decay,
                 const AdamWStepConstants* __restrict__ constants_ptr, const float* __restrict__ grad_scale_ptr,
                 AdamWHyperparams h, bool vectorized) {
  const AdamWStepScalars s = step_scalars(constants_ptr, grad_scale_ptr, h);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  // 16-byte loads and stores where every buffer allows them: AdamW is one memory-bound pass, and four
  // elements per access keep more bytes in flight per thread than scalar accesses do.
  const int64_t quads = vectorized ? n / 4 : 0;
  for (int64_t q = first; q < quads; q += stride) {
    const float4 g = load4(grads, q);
    float4 m = load4(exp_avg, q);
    float4 v = load4(exp_avg_sq, q);
    float4 w = reinterpret_cast<const float4*>(master)[q];
    const int64_t i = q * 4;
    update_element(g.x, m.x, v.x, w.x, i < n_decay, s, h);
    update_element(g.y, m.y, v.y, w.y, i + 1 < n_decay, s, h);
    update_element(g.z, m.z, v.z, w.z, i + 2 < n_decay, s, h);
    update_element(g.w, m.w, v.w, w.w, i + 3 < n_decay, s, h);
    store4(exp_avg, q, m);
    store4(exp_avg_sq, q, v);
    reinterpret_cast<float4*>(master)[q] = w;
    if (compute != nullptr) store4(compute, q, w);
  }
  for (int64_t i = quads * 4 + first; i < n; i += stride) {
    float m = load1(exp_avg, i), v = load1(exp_avg_sq, i), w = master[i];
    update_element(load1(grads, i), m, v, w, i < n_decay, s, h);
    store1(exp_avg, i, m);
    store1(exp_avg_sq, i, v);
    master[i] = w;
    if (compute != nullptr) compute[i] = __float2bfloat16(w);
  }
}

bool aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

template <class GradT, class ExpAvgT, class ExpAvgSqT>
void launch_adamw(cudaStream_t stream, const AdamWParams& p, bool vectorized) {
  const int64_t per_thread = vectorized ? 4 : 1;
  const int64_t threads_needed = (p.n + per_thread - 1) / per_thread;
  const int64_t blocks = std::min<int64_t>((threads_needed + kThreads - 1) / kThreads, kMaxBlocks);
  adamw_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      p.master_weights, p.compute_weights, static_cast<const GradT*>(p.grads.data), static_cast<ExpAvgT*>(p.exp_avg.data),
      static_cast<ExpAvgSqT*>(p.exp_avg_sq.data), p.n, p.n_decay, p.step_constants, p.grad_scale, p.hyper,
      vectorized);
  SG_CUDA_CHECK_LAUNCH("adamw_kernel");
}

// The 16-byte path reads four elements of every buffer at once: fp32 buffers need 16-byte alignment,
// bf16 ones 8.
bool aligned_for_quads(const FloatBuffer& b) { return aligned(b.data, b.dtype == FloatDtype::bf16 ? 8 : 16); }

// The moments' dtypes picked at run time, the gradients' already fixed as GradT.
template <class GradT>
void launch_for_moments(cudaStream_t stream, const AdamWParams& p, bool vectorized) {
  const bool avg_bf16 = p.exp_avg.is_bf16(), avg_sq_bf16 = p.exp_avg_sq.is_bf16();
  if (!avg_bf16 && !avg_sq_bf16) launch_adamw<GradT, float, float>(stream, p, vectorized);
  if (!avg_bf16 && avg_sq_bf16) launch_adamw<GradT, float, bf16>(stream, p, vectorized);
  if (avg_bf16 && !avg_sq_bf16) launch_adamw<GradT, bf16, float>(stream, p, vectorized);
  if (avg_bf16 && avg_sq_bf16) launch_adamw<GradT, bf16, bf16>(stream, p, vectorized);
}

}  // namespace

void adamw_step(cudaStream_t stream, const AdamWParams& p) {
  SG_CHECK(p.n >= 0 && p.n_decay >= 0 && p.n_decay <= p.n,
           strprintf("adamw_step: need 0 <= n_decay (%lld) <= n (%lld)", (long long)p.n_decay, (long long)p.n));
  SG_CHECK(p.master_weights && p.grads.data && p.exp_avg.data && p.exp_avg_sq.data && p.step_constants,
           "adamw_step: master_weights, grads, exp_avg, exp_avg_sq and step_constants must be device pointers");
  if (p.n == 0) return;
  // The arena and the shards align every buffer; offsets into them (tests, a shard's slice) may not.
  const bool vectorized = aligned(p.master_weights, 16) && aligned_for_quads(p.grads) && aligned_for_quads(p.exp_avg) &&
                          aligned_for_quads(p.exp_avg_sq) &&
                          (p.compute_weights == nullptr || aligned(p.compute_weights, 8));
  if (p.grads.is_bf16()) {
    launch_for_moments<bf16>(stream, p, vectorized);
  } else {
    launch_for_moments<float>(stream, p, vectorized);
  }
}

}  // namespace sg::kernels
