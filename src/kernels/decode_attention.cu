#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "kernels/common.cuh"
#include "kernels/decode_attention.h"

namespace sg::kernels {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kKeyChunk = 1024;
constexpr int kMaxPerLane = static_cast<int>(kDecodeAttentionMaxHeadDim / 32);  // head_dim values per lane
constexpr int64_t kMaxBlocks = 1 << 16;

// The shape fields the kernels need, by value (ref::DecodeAttentionShape's helpers are host-only).
struct DeviceShape {
  int64_t T, rows_per_slot, first_slot, capacity, heads, kv_heads, head_dim;
};
DeviceShape device_shape(const ref::DecodeAttentionShape& s) {
  return {s.T, s.rows_per_slot, s.first_slot, s.capacity, s.heads, s.kv_heads, s.head_dim};
}

__device__ __forceinline__ int64_t cache_offset(const DeviceShape& s, int64_t slot, int64_t g, int64_t pos) {
  return ((slot * s.kv_heads + g) * s.capacity + pos) * s.head_dim;
}

// One thread per (row, kv head, element): k and v of the row into the cache.
__global__ void __launch_bounds__(256)
    kv_cache_append_kernel(bf16* __restrict__ k_cache, bf16* __restrict__ v_cache, const bf16* __restrict__ qkv,
                           const int32_t* __restrict__ positions, DeviceShape s) {
  const int64_t d = s.head_dim, width = (s.heads + 2 * s.kv_heads) * d;
  const int64_t total = s.T * s.kv_heads * d;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t e = idx % d;
    const int64_t g = (idx / d) % s.kv_heads;
    const int64_t t = idx / (d * s.kv_heads);
    const int32_t pos = positions[t];
    if (pos < 0 || pos >= s.capacity) continue;
    const int64_t at = cache_offset(s, s.first_slot + t / s.rows_per_slot, g, pos) + e;
    k_cache[at] = qkv[t * width + (s.heads + g) * d + e];
    v_cache[at] = qkv[t * width + (s.heads + s.kv_heads + g) * d + e];
  }
}

// Block max / sum in a fixed order (warp butterflies, then the warps' results in order).
__device__ __forceinline__ float block_reduce_max(float v, float* scratch) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  __syncthreads();
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  float m = scratch[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) m = fmaxf(m, scratch[w]);
  return m;
}

__global__ void __launch_bounds__(kThreads)
    decode_attention_kernel(bf16* __restrict__ out, const bf16* __restrict__ qkv, const bf16* __restrict__ k_cache,
                            const bf16* __restrict__ v_cache, const int32_t* __restrict__ positions, DeviceShape s,
                            float scale) {
  __shared__ float q[kDecodeAttentionMaxHeadDim];
  __shared__ float scores[kKeyChunk];
  __shared__ float partial[kWarps][kDecodeAttentionMaxHeadDim];
  __shared__ float scratch[32];
  const int64_t t = blockIdx.x, h = blockIdx.y;
  const int64_t d = s.head_dim, width = (s.heads + 2 * s.kv_heads) * d;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  bf16* o = out + (t * s.heads + h) * d;
  const int32_t pos = positions[t];
  if (pos < 0 || pos >= s.capacity) {  // a caller bug: make it visible in the logits
    for (int64_t e = threadIdx.x; e < d; e += kThreads) o[e] = __float2bfloat16_rn(nanf(""));
    return;
  }
  const int64_t g = h / (s.heads / s.kv_heads);
  const int64_t slot = s.first_slot + t / s.rows_per_slot;
  const bf16* keys = k_cache + cache_offset(s, slot, g, 0);
  const bf16* values = v_cache + cache_offset(s, slot, g, 0);
  for (int64_t e = threadIdx.x; e < d; e += kThreads) q[e] = __bfloat162float(qkv[t * width + h * d + e]);
  __syncthreads();

  const bool vec = d % detail::kBf16PerVec == 0;
  float acc[kMaxPerLane];
#pragma unroll
  for (int k = 0; k < kMaxPerLane; ++k) acc[k] = 0.0f;
  float running_max = -INFINITY, running_sum = 0.0f;
  const int64_t n = static_cast<int64_t>(pos) + 1;
  for (int64_t c0 = 0; c0 < n; c0 += kKeyChunk) {
    const int chunk = n - c0 < kKeyChunk ? static_cast<int>(n - c0) : kKeyChunk;
    float local_max = -INFINITY;
    for (int j = threadIdx.x; j < chunk; j += kThreads) {
      const bf16* k = keys + (c0 + j) * d;
      float dot = 0.0f;
      if (vec) {
        for (int64_t e = 0; e < d; e += detail::kBf16PerVec) {
          float kv[detail::kBf16PerVec];
          detail::load_bf16<detail::kBf16PerVec>(k + e, kv);
#pragma unroll
          for (int x = 0; x < detail::kBf16PerVec; ++x) dot = fmaf(q[e + x], kv[x], dot);
        }
      } else {
        for (int64_t e = 0; e < d; ++e) dot = fmaf(q[e], __bfloat162float(k[e]), dot);
      }
      scores[j] = dot * scale;
      local_max = fmaxf(local_max, scores[j]);
    }
    const float new_max = fmaxf(running_max, block_reduce_max(local_max, scratch));
    const float rescale = expf(running_max - new_max);  // 0 for the first chunk (exp(-inf))
    __syncthreads();                                    // every score of the chunk is written
    float local_sum = 0.0f;
    for (int j = threadIdx.x; j < chunk; j += kThreads) {
      const float w = expf(scores[j] - new_max);
      scores[j] = w;
      local_sum += w;
    }
    const float chunk_sum = detail::block_reduce_sum(local_sum, scratch);  // synchronises: weights written
    running_sum = running_sum * rescale + chunk_sum;
    running_max = new_max;
    // Values: warp `warp` takes keys j = warp, warp + kWarps, ...; lane takes elements lane + 32 k.
#pragma unroll
    for (int k = 0; k < kMaxPerLane; ++k) acc[k] *= rescale;
    for (int j = warp; j < chunk; j += kWarps) {
      const float w = scores[j];
      const bf16* v = values + (c0 + j) * d;
#pragma unroll
      for (int k = 0; k < kMaxPerLane; ++k) {
        const int64_t e = lane + 32 * k;
        if (e < d) acc[k] = fmaf(w, __bfloat162float(v[e]), acc[k]);
      }
    }
    __syncthreads();  // the next chunk overwrites scores
  }
#pragma unroll
  for (int k = 0; k < kMaxPerLane; ++k) {
    const int64_t e = lane + 32 * k;
    if (e < d) partial[warp][e] = acc[k];
  }
  __syncthreads();
  const float inv_sum = 1.0f / running_sum;
  for (int64_t e = threadIdx.x; e < d; e += kThreads) {
    float sum = partial[0][e];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) sum += partial[w][e];
    o[e] = __float2bfloat16_rn(sum * inv_sum);
  }
}

void check_params(const char* op, const void* a, const void* b, const void* c, const int32_t* positions,
                  const ref::DecodeAttentionShape& s) {
  SG_CHECK(a != nullptr && b != nullptr && c != nullptr && positions != nullptr,
           strprintf("%s: null pointer (out/cache, qkv and positions are all required)", op));
  ref::check_decode_attention_shape(s);
  SG_CHECK(s.head_dim <= kDecodeAttentionMaxHeadDim,
           strprintf("%s: head_dim = %lld exceeds the kernel's %lld", op, static_cast<long long>(s.head_dim),
                     static_cast<long long>(kDecodeAttentionMaxHeadDim)));
}

}  // namespace

void kv_cache_append(cudaStream_t stream, const KvCacheAppendParams& p) {
  SG_CHECK(p.v_cache != nullptr, "kv_cache_append: null v_cache");
  check_params("kv_cache_append", p.k_cache, p.v_cache, p.qkv, p.positions, p.shape);
  const int64_t total = p.shape.T * p.shape.kv_heads * p.shape.head_dim;
  if (total == 0) return;
  const auto blocks = static_cast<unsigned>(std::clamp<int64_t>(detail::ceil_div(total, 256), 1, kMaxBlocks));
  kv_cache_append_kernel<<<blocks, 256, 0, stream>>>(p.k_cache, p.v_cache, p.qkv, p.positions, device_shape(p.shape));
  SG_CUDA_CHECK_LAUNCH("kv_cache_append_kernel");
}

void decode_attention_forward(cudaStream_t stream, const DecodeAttentionParams& p) {
  SG_CHECK(p.v_cache != nullptr, "decode_attention_forward: null v_cache");
  check_params("decode_attention_forward", p.out, p.qkv, p.k_cache, p.positions, p.shape);
  const ref::DecodeAttentionShape& s = p.shape;
  SG_CHECK(s.T <= INT32_MAX && s.heads <= 65535,
           strprintf("decode_attention_forward: T = %lld rows x %lld heads exceed the grid",
                     static_cast<long long>(s.T), static_cast<long long>(s.heads)));
  if (s.T == 0) return;
  const dim3 grid(static_cast<unsigned>(s.T), static_cast<unsigned>(s.heads));
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim)));
  decode_attention_kernel<<<grid, kThreads, 0, stream>>>(p.out, p.qkv, p.k_cache, p.v_cache, p.positions,
                                                         device_shape(s), scale);
  SG_CUDA_CHECK_LAUNCH("decode_attention_kernel");
}

}  // namespace sg::kernels
