#include "kernels/rmsnorm.h"

#include <algorithm>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "kernels/common.cuh"
#include "kernels/partial_sums.h"

namespace sg::kernels {
namespace {

using detail::block_reduce_sum;
using detail::kBf16PerVec;
using detail::load_bf16;
using detail::load_f32;
using detail::store_bf16;
using detail::store_f32;

constexpr int kMaxRowThreads = 512;
constexpr int64_t kMaxPartials = 512;
constexpr int64_t kDefaultSharedBytes = 48 * 1024;

int row_threads(int64_t H, int vec) { return detail::row_block_threads(H, vec, kMaxRowThreads); }

template <int VEC>
__global__ void __launch_bounds__(kMaxRowThreads) rmsnorm_forward_kernel(RmsNormForwardParams p) {
  __shared__ float reduce_scratch[32];
  const int64_t H = p.H;
  const int64_t row = blockIdx.x;
  const int64_t first = static_cast<int64_t>(threadIdx.x) * VEC;
  const int64_t stride = static_cast<int64_t>(blockDim.x) * VEC;
  const bf16* x = p.in + row * H;
  float sum_sq = 0.0f;
  for (int64_t c = first; c < H; c += stride) {
    float v[VEC];
    load_bf16<VEC>(x + c, v);
#pragma unroll
    for (int k = 0; k < VEC; ++k) sum_sq += v[k] * v[k];
  }
  sum_sq = block_reduce_sum(sum_sq, reduce_scratch);
  const float r = rsqrtf(sum_sq / static_cast<float>(H) + p.eps);
  if (threadIdx.x == 0) p.rstd[row] = r;
  bf16* y = p.out + row * H;
  for (int64_t c = first; c < H; c += stride) {
    float v[VEC], w[VEC];
    load_bf16<VEC>(x + c, v);
    load_bf16<VEC>(p.weight + c, w);
#pragma unroll
    for (int k = 0; k < VEC; ++k) v[k] = w[k] * (v[k] * r);
    store_bf16<VEC>(y + c, v);
  }
}

template <int VEC>
__global__ void __launch_bounds__(kMaxRowThreads) residual_rmsnorm_forward_kernel(ResidualRmsNormForwardParams p) {
  __shared__ float reduce_scratch[32];
  const int64_t H = p.H;
  const int64_t row = blockIdx.x;
  const int64_t first = static_cast<int64_t>(threadIdx.x) * VEC;
  const int64_t stride = static_cast<int64_t>(blockDim.x) * VEC;
  const bf16* res_in = p.residual_in + row * H;
  const bf16* delta = p.delta + row * H;
  bf16* res_out = p.residual_out + row * H;
  float sum_sq = 0.0f;
  for (int64_t c = first; c < H; c += stride) {
    float a[VEC], b[VEC];
    load_bf16<VEC>(res_in + c, a);
    load_bf16<VEC>(delta + c, b);
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      // Round once to the stored dtype; the statistics use the stored value.
      a[k] = __bfloat162float(__float2bfloat16_rn(a[k] + b[k]));
      sum_sq += a[k] * a[k];
    }
    store_bf16<VEC>(res_out + c, a);  // exact: a[k] is already a bf16 value
  }
  sum_sq = block_reduce_sum(sum_sq, reduce_scratch);
  const float r = rsqrtf(sum_sq / static_cast<float>(H) + p.eps);
  if (threadIdx.x == 0) p.rstd[row] = r;
  bf16* y = p.norm_out + row * H;
  for (int64_t c = first; c < H; c += stride) {
    float v[VEC], w[VEC];
    load_bf16<VEC>(res_out + c, v);  // this thread's own writes from the first loop
    load_bf16<VEC>(p.weight + c, w);
#pragma unroll
    for (int k = 0; k < VEC; ++k) v[k] = w[k] * (v[k] * r);
    store_bf16<VEC>(y + c, v);
  }
}

// Block b handles rows b, b + gridDim.x, ...; its dweight partial sums live in shared memory (each thread
// owns the same columns in every row, so no synchronisation is needed on them) and go to scratch row b.
template <int VEC>
__global__ void __launch_bounds__(kMaxRowThreads) rmsnorm_backward_kernel(RmsNormBackwardParams p) {
  extern __shared__ float4 dynamic_shared[];  // float4: 16-byte aligned for the vector accesses
  float* dweight_acc = reinterpret_cast<float*>(dynamic_shared);  // [H]
  __shared__ float reduce_scratch[32];
  const int64_t H = p.H;
  const int64_t first = static_cast<int64_t>(threadIdx.x) * VEC;
  const int64_t stride = static_cast<int64_t>(blockDim.x) * VEC;
  const float inv_h = 1.0f / static_cast<float>(H);
  for (int64_t c = first; c < H; c += stride) {
    float zero[VEC];
#pragma unroll
    for (int k = 0; k < VEC; ++k) zero[k] = 0.0f;
    store_f32<VEC>(dweight_acc + c, zero);
  }
  for (int64_t row = blockIdx.x; row < p.T; row += gridDim.x) {
    const bf16* x = p.in + row * H;
    const bf16* dy = p.dout + row * H;
    const float r = p.rstd[row];
    float dot = 0.0f;  // sum_j dy_j w_j x_j
    for (int64_t c = first; c < H; c += stride) {
      float xv[VEC], gv[VEC], wv[VEC];
      load_bf16<VEC>(x + c, xv);
      load_bf16<VEC>(dy + c, gv);
      load_bf16<VEC>(p.weight + c, wv);
#pragma unroll
      for (int k = 0; k < VEC; ++k) dot += gv[k] * wv[k] * xv[k];
    }
    dot = block_reduce_sum(dot, reduce_scratch);
    const float coef = r * r * r * dot * inv_h;
    bf16* dx = p.din + row * H;
    const bf16* dres = p.dresidual != nullptr ? p.dresidual + row * H : nullptr;
    for (int64_t c = first; c < H; c += stride) {
      float xv[VEC], gv[VEC], wv[VEC], acc[VEC], out[VEC];
      load_bf16<VEC>(x + c, xv);
      load_bf16<VEC>(dy + c, gv);
      load_bf16<VEC>(p.weight + c, wv);
      load_f32<VEC>(dweight_acc + c, acc);
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        out[k] = r * wv[k] * gv[k] - coef * xv[k];
        acc[k] += gv[k] * xv[k] * r;
      }
      if (dres != nullptr) {
        float rv[VEC];
        load_bf16<VEC>(dres + c, rv);  // read before the store below: din may alias dresidual
#pragma unroll
        for (int k = 0; k < VEC; ++k) out[k] += rv[k];
      }
      store_bf16<VEC>(dx + c, out);
      store_f32<VEC>(dweight_acc + c, acc);
    }
  }
  float* partial = p.scratch + static_cast<int64_t>(blockIdx.x) * H;
  for (int64_t c = first; c < H; c += stride) {
    float acc[VEC];
    load_f32<VEC>(dweight_acc + c, acc);
    store_f32<VEC>(partial + c, acc);
  }
}

void check_shape(const char* op, int64_t T, int64_t H) {
  SG_CHECK(T >= 0 && T <= INT32_MAX, strprintf("%s: T = %lld out of range [0, 2^31)", op, static_cast<long long>(T)));
  SG_CHECK(H > 0, strprintf("%s: H = %lld must be positive", op, static_cast<long long>(H)));
}

bool vec_ok(int64_t H, std::initializer_list<const void*> ptrs) {
  if (H % kBf16PerVec != 0) return false;
  for (const void* q : ptrs) {
    if (q != nullptr && !detail::is_aligned(q, 16)) return false;
  }
  return true;
}

}  // namespace

int64_t rmsnorm_backward_num_partials(int64_t T) { return std::min<int64_t>(T, kMaxPartials); }

size_t rmsnorm_backward_scratch_bytes(int64_t T, int64_t H) {
  return static_cast<size_t>(rmsnorm_backward_num_partials(T)) * static_cast<size_t>(H) * sizeof(float);
}

void rmsnorm_forward(cudaStream_t stream, const RmsNormForwardParams& p) {
  check_shape("rmsnorm_forward", p.T, p.H);
  SG_CHECK(p.out && p.rstd && p.in && p.weight, "rmsnorm_forward: null pointer in params");
  if (p.T == 0) return;
  const bool vec = vec_ok(p.H, {p.out, p.in, p.weight});
  const int threads = row_threads(p.H, vec ? kBf16PerVec : 1);
  const auto grid = static_cast<unsigned>(p.T);
  if (vec) {
    rmsnorm_forward_kernel<kBf16PerVec><<<grid, threads, 0, stream>>>(p);
  } else {
    rmsnorm_forward_kernel<1><<<grid, threads, 0, stream>>>(p);
  }
  SG_CUDA_CHECK_LAUNCH("rmsnorm_forward_kernel");
}

void residual_rmsnorm_forward(cudaStream_t stream, const ResidualRmsNormForwardParams& p) {
  check_shape("residual_rmsnorm_forward", p.T, p.H);
  SG_CHECK(p.residual_out && p.norm_out && p.rstd && p.residual_in && p.delta && p.weight,
           "residual_rmsnorm_forward: null pointer in params");
  if (p.T == 0) return;
  const bool vec = vec_ok(p.H, {p.residual_out, p.norm_out, p.residual_in, p.delta, p.weight});
  const int threads = row_threads(p.H, vec ? kBf16PerVec : 1);
  const auto grid = static_cast<unsigned>(p.T);
  if (vec) {
    residual_rmsnorm_forward_kernel<kBf16PerVec><<<grid, threads, 0, stream>>>(p);
  } else {
    residual_rmsnorm_forward_kernel<1><<<grid, threads, 0, stream>>>(p);
  }
  SG_CUDA_CHECK_LAUNCH("residual_rmsnorm_forward_kernel");
}

void rmsnorm_backward(cudaStream_t stream, const RmsNormBackwardParams& p) {
  check_shape("rmsnorm_backward", p.T, p.H);
  SG_CHECK(p.din && p.dweight && p.dout && p.in && p.weight && p.rstd,
           "rmsnorm_backward: null pointer in params");
  if (p.T == 0) return;
  const size_t need = rmsnorm_backward_scratch_bytes(p.T, p.H);
  SG_CHECK(p.scratch != nullptr && p.scratch_bytes >= need,
           strprintf("rmsnorm_backward: scratch of %zu bytes at %p is too small for T=%lld H=%lld; plan "
                     "rmsnorm_backward_scratch_bytes(T, H) = %zu bytes",
                     p.scratch_bytes, static_cast<void*>(p.scratch), static_cast<long long>(p.T),
                     static_cast<long long>(p.H), need));
  const int64_t partials = rmsnorm_backward_num_partials(p.T);
  const bool vec = vec_ok(p.H, {p.din, p.dout, p.in, p.weight, p.dresidual, p.scratch});
  const int threads = row_threads(p.H, vec ? kBf16PerVec : 1);
  const size_t shared_bytes = static_cast<size_t>(p.H) * sizeof(float);
  auto* kernel = vec ? rmsnorm_backward_kernel<kBf16PerVec> : rmsnorm_backward_kernel<1>;
  if (static_cast<int64_t>(shared_bytes) > kDefaultSharedBytes) {
    // Fails with a clear CUDA error when H * 4 exceeds the device's opt-in shared memory per block.
    SG_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(shared_bytes)));
  }
  kernel<<<static_cast<unsigned>(partials), threads, shared_bytes, stream>>>(p);
  SG_CUDA_CHECK_LAUNCH("rmsnorm_backward_kernel");
  add_partial_column_sums(stream, p.scratch, partials, {{p.dweight, p.H}});
}

}  // namespace sg::kernels
