#include "kernels/moe_router.h"

#include <cub/block/block_reduce.cuh>

#include <algorithm>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "kernels/common.cuh"
#include "kernels/shape_limits.h"

namespace sg::kernels {
namespace {

using detail::ceil_div;
using detail::warp_reduce_sum;

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kMaxWarpsPerBlock = 8;
constexpr size_t kMaxSharedBytes = 48 * 1024;  // the default dynamic shared-memory limit
constexpr int64_t kMaxBlocks = 1 << 16;        // grid-stride beyond this
constexpr int kCountThreads = 256;
constexpr int kCountItems = 4;  // slots per thread of moe_count_experts, loaded before any is counted
constexpr int64_t kCountChunkSlots = kCountThreads * kCountItems;  // slots per block: many blocks in flight
constexpr int kLossThreads = 256;
constexpr int kLossWarps = kLossThreads / 32;
constexpr int64_t kLossChunkTokens = 64;  // tokens per block of the loss partial sums
constexpr int kFinalThreads = 256;
constexpr float kScoreNormEps = 1e-20f;  // Megatron's eps of the sigmoid and sqrtsoftplus normalisation

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// An elementwise score (sigmoid or sqrtsoftplus: sqrt(softplus(x)), x itself above 20 as torch's softplus), and a
// gradient g with respect to it taken back through it given the score s: g s (1 - s) (sigmoid; in that order), or
// g sigmoid(x) / (2 s) (sqrtsoftplus; 0 where softplus underflowed, its limit). CPU twin: reference/moe_router.cpp's
// elementwise_score and elementwise_score_backward.
__device__ __forceinline__ float elementwise_score(float x, MoeScoreFunction f) {
  if (f == MoeScoreFunction::sigmoid) return sigmoid(x);
  return sqrtf(x > 20.0f ? x : log1pf(expf(x)));
}
__device__ __forceinline__ float elementwise_score_backward(float g, float x, float s, MoeScoreFunction f) {
  if (f == MoeScoreFunction::sigmoid) return g * s * (1.0f - s);
  return s > 0.0f ? g * (sigmoid(x) / (2.0f * s)) : 0.0f;
}

__device__ __forceinline__ float warp_reduce_max(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

// NaN sorts below every number, so the order of selection values is total (all lanes agree).
__device__ __forceinline__ float selection_key(float v) { return isnan(v) ? -INFINITY : v; }

// The k largest vals[0..E) of one warp's row (shared memory), best first, ties to the lower index;
// lane 0 writes them to ids[0..k) (shared memory). E <= 1024: lane l owns experts l + 32 i, i < 32.
__device__ void warp_topk(const float* vals, int E, int k, int* ids) {
  const int lane = threadIdx.x & 31;
  uint32_t taken = 0;  // bit i: expert lane + 32 i is chosen
  for (int j = 0; j < k; ++j) {
    float best = -INFINITY;
    int best_e = -1;
    for (int i = 0, e = lane; e < E; ++i, e += 32) {
      if ((taken >> i) & 1u) continue;
      const float v = selection_key(vals[e]);
      if (best_e < 0 || v > best) best = v, best_e = e;
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
      const float other = __shfl_xor_sync(kFullMask, best, offset);
      const int other_e = __shfl_xor_sync(kFullMask, best_e, offset);
      if (other_e >= 0 && (best_e < 0 || other > best || (other == best && other_e < best_e))) {
        best = other, best_e = other_e;
      }
    }
    if (lane == (best_e & 31)) taken |= 1u << (best_e >> 5);
    if (lane == 0) ids[j] = best_e;
  }
  __syncwarp();
}

// Max and softmax normaliser of n values, every lane of the warp gets both.
struct RowSoftmax {
  float max, sum;
  __device__ float prob(float x) const { return expf(x - max) / sum; }
  __device__ float logsumexp() const { return max + logf(sum); }
};
// value(i) for i < n: lane l reads i = l, l + 32, ...
template <class Value>
__device__ RowSoftmax warp_softmax(int n, Value value) {
  const int lane = threadIdx.x & 31;
  float m = -INFINITY;
  for (int i = lane; i < n; i += 32) m = fmaxf(m, value(i));
  m = warp_reduce_max(m);
  float s = 0.0f;
  for (int i = lane; i < n; i += 32) s += expf(value(i) - m);
  return {m, warp_reduce_sum(s)};
}
// Over a token's E logits.
__device__ RowSoftmax row_softmax(const float* x, int E) {
  return warp_softmax(E, [x](int e) { return x[e]; });
}
// Over the logits of its k chosen experts (the post-softmax probs).
__device__ RowSoftmax chosen_softmax(const float* x, const int32_t* ids, int k) {
  return warp_softmax(k, [x, ids](int j) { return x[ids[j]]; });
}

// ---------------------------------------------------------------------------------------------
// Forward
// ---------------------------------------------------------------------------------------------

// Shared memory per warp: E selection values, then k chosen ids.
__global__ void moe_router_forward_kernel(MoeRouterForwardParams p, int warps_per_block) {
  extern __shared__ float smem[];
  const int E = static_cast<int>(p.routing.E), k = static_cast<int>(p.routing.k);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float* select = smem + warp * E;
  int* ids = reinterpret_cast<int*>(smem + warps_per_block * E) + warp * k;
  const float sf = p.routing.scaling_factor;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * warps_per_block + warp; t < p.routing.T;
       t += static_cast<int64_t>(gridDim.x) * warps_per_block) {
    const float* x = p.logits + t * E;
    const MoeScoreFunction f = p.routing.score_function;
    for (int e = lane; e < E; e += 32) select[e] = p.expert_bias ? elementwise_score(x[e], f) + p.expert_bias[e] : x[e];
    __syncwarp();
    warp_topk(select, E, k, ids);
    float* probs = p.probs + t * k;
    if (ref::moe_elementwise_scores(f)) {
      float sum = 0.0f;
      for (int j = lane; j < k; j += 32) sum += elementwise_score(x[ids[j]], f);
      sum = warp_reduce_sum(sum);
      for (int j = lane; j < k; j += 32) {
        const float s = elementwise_score(x[ids[j]], f);
        probs[j] = sf * (k > 1 ? s / (sum + kScoreNormEps) : s);
      }
    } else if (p.routing.pre_softmax) {
      const RowSoftmax all = row_softmax(x, E);
      for (int j = lane; j < k; j += 32) probs[j] = sf * all.prob(x[ids[j]]);
    } else {
      const RowSoftmax chosen = chosen_softmax(x, ids, k);
      for (int j = lane; j < k; j += 32) probs[j] = sf * chosen.prob(x[ids[j]]);
    }
    for (int j = lane; j < k; j += 32) p.routing_map[t * k + j] = ids[j];
    if (p.aux_routing_map != nullptr) {
      __syncwarp();  // every lane is done with ids and select
      for (int e = lane; e < E; e += 32) select[e] = x[e];
      __syncwarp();
      warp_topk(select, E, k, ids);
      for (int j = lane; j < k; j += 32) p.aux_routing_map[t * k + j] = ids[j];
    }
    __syncwarp();  // the next token overwrites select and ids
  }
}

// ---------------------------------------------------------------------------------------------
// Counts
// ---------------------------------------------------------------------------------------------

// Block (chunk c, group g): a shared histogram of its slots, added into counts[g] (integer atomics).
__global__ void __launch_bounds__(kCountThreads)
    moe_count_experts_kernel(const int32_t* __restrict__ map, int32_t* __restrict__ counts, int64_t group_slots,
                             int E) {
  extern __shared__ int hist[];
  for (int e = threadIdx.x; e < E; e += kCountThreads) hist[e] = 0;
  __syncthreads();
  const int64_t g = blockIdx.y;
  const int64_t begin = g * group_slots + static_cast<int64_t>(blockIdx.x) * kCountChunkSlots;
  const int64_t end = min(begin + kCountChunkSlots, (g + 1) * group_slots);
  // All loads first (they are independent), then one shared atomic per distinct expert of each warp;
  // every thread takes part in each __match_any_sync (-1 marks no slot).
  int experts[kCountItems];
#pragma unroll
  for (int i = 0; i < kCountItems; ++i) {
    const int64_t s = begin + i * kCountThreads + threadIdx.x;
    const int e = s < end ? map[s] : -1;
    experts[i] = e < E ? e : -1;  // never write outside the histogram
  }
#pragma unroll
  for (int i = 0; i < kCountItems; ++i) {
    const int e = experts[i];
    const unsigned peers = __match_any_sync(kFullMask, e);
    if (e >= 0 && (threadIdx.x & 31) == __ffs(peers) - 1) atomicAdd(&hist[e], __popc(peers));
  }
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += kCountThreads) {
    if (hist[e] != 0) atomicAdd(&counts[g * E + e], hist[e]);
  }
}

// ---------------------------------------------------------------------------------------------
// Load-balancing and z-loss
// ---------------------------------------------------------------------------------------------

struct LossPartials {
  float* score_sums;  // [G, chunks, E] per-chunk column sums of the load-balancing scores
  float* z_sums;      // [G, chunks] per-chunk sums of logsumexp^2
};
LossPartials loss_partials(void* workspace, int64_t G, int64_t chunks, int64_t E) {
  float* base = static_cast<float*>(workspace);
  return {base, base + G * chunks * E};
}

// Block (chunk c, group g): warps take the chunk's tokens in turn and add their scores into a
// per-warp row of shared column sums (lane l owns columns l + 32 i); the warps' rows are then summed in
// warp order. Fixed order throughout.
__global__ void __launch_bounds__(kLossThreads)
    moe_router_loss_partials_kernel(MoeRouterLossParams p, LossPartials out, int64_t chunks) {
  extern __shared__ float warp_sums[];  // [kLossWarps, E]
  __shared__ float warp_z[kLossWarps];
  const int E = static_cast<int>(p.routing.E);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const bool aux = p.losses.aux_coeff > 0.0f, z = p.losses.z_coeff > 0.0f;
  const MoeScoreFunction f = p.routing.score_function;
  const bool elementwise = ref::moe_elementwise_scores(f);
  float* my_sums = warp_sums + warp * E;
  for (int e = lane; e < E; e += 32) my_sums[e] = 0.0f;
  const int64_t S = p.losses.group_tokens(p.routing.T);
  const int64_t g = blockIdx.y;
  const int64_t begin = g * S + static_cast<int64_t>(blockIdx.x) * kLossChunkTokens;
  const int64_t end = min(begin + kLossChunkTokens, (g + 1) * S);
  float z_acc = 0.0f;
  for (int64_t t = begin + warp; t < end; t += kLossWarps) {
    const float* x = p.logits + t * E;
    const RowSoftmax sm = row_softmax(x, E);
    if (z) {
      const float lse = sm.logsumexp();
      z_acc += lse * lse;
    }
    if (aux) {
      float score_sum = 0.0f;
      if (elementwise) {
        for (int e = lane; e < E; e += 32) score_sum += elementwise_score(x[e], f);
        score_sum = warp_reduce_sum(score_sum);
      }
      for (int e = lane; e < E; e += 32) {
        my_sums[e] += elementwise ? elementwise_score(x[e], f) / (score_sum + kScoreNormEps) : sm.prob(x[e]);
      }
    }
  }
  if (lane == 0) warp_z[warp] = z_acc;
  __syncthreads();
  const int64_t block = g * chunks + blockIdx.x;
  for (int e = threadIdx.x; e < E; e += kLossThreads) {
    float s = 0.0f;
    for (int w = 0; w < kLossWarps; ++w) s += warp_sums[w * E + e];
    out.score_sums[block * E + e] = s;
  }
  if (threadIdx.x == 0) {
    float s = 0.0f;
    for (int w = 0; w < kLossWarps; ++w) s += warp_z[w];
    out.z_sums[block] = s;
  }
}

// One block: fp64 sums of the partials in a fixed order, then the coefficient-scaled losses.
__global__ void __launch_bounds__(kFinalThreads)
    moe_router_loss_final_kernel(MoeRouterLossParams p, LossPartials in, int64_t chunks) {
  using BlockReduce = cub::BlockReduce<double, kFinalThreads>;
  __shared__ typename BlockReduce::TempStorage reduce_storage;
  const int64_t E = p.routing.E, T = p.routing.T;
  const int64_t G = p.losses.groups(T), S = p.losses.group_tokens(T);
  double aux_total = 0.0, z_total = 0.0;
  if (p.losses.aux_coeff > 0.0f) {
    for (int64_t i = threadIdx.x; i < G * E; i += kFinalThreads) {
      const int64_t g = i / E, e = i - g * E;
      double column = 0.0;
      for (int64_t c = 0; c < chunks; ++c) column += in.score_sums[(g * chunks + c) * E + e];
      aux_total += static_cast<double>(p.aux_counts[i]) * column;
    }
  }
  aux_total = BlockReduce(reduce_storage).Sum(aux_total);
  __syncthreads();  // reduce_storage is reused
  if (p.losses.z_coeff > 0.0f) {
    for (int64_t b = threadIdx.x; b < G * chunks; b += kFinalThreads) z_total += in.z_sums[b];
  }
  z_total = BlockReduce(reduce_storage).Sum(z_total);
  if (threadIdx.x == 0) {
    if (p.aux_loss_sum != nullptr && p.losses.aux_coeff > 0.0f) {
      const double aux = p.losses.aux_coeff * static_cast<double>(E) /
                         (static_cast<double>(p.routing.k) * S * S) * aux_total / G;
      *p.aux_loss_sum += static_cast<float>(p.value_scale * aux);
    }
    if (p.z_loss_sum != nullptr && p.losses.z_coeff > 0.0f) {
      const double zl = p.losses.z_coeff * z_total / static_cast<double>(T);
      *p.z_loss_sum += static_cast<float>(p.value_scale * zl);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Backward
// ---------------------------------------------------------------------------------------------

// One warp per token. Shared memory per warp: E floats, the probs term scattered to the chosen experts.
__global__ void moe_router_backward_kernel(MoeRouterBackwardParams p, int warps_per_block) {
  extern __shared__ float smem[];
  const int E = static_cast<int>(p.routing.E), k = static_cast<int>(p.routing.k);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float* chosen = smem + warp * E;
  const float sf = p.routing.scaling_factor;
  const MoeScoreFunction f = p.routing.score_function;
  const bool elementwise = ref::moe_elementwise_scores(f);
  const bool pre = !elementwise && p.routing.pre_softmax;
  const bool aux = p.losses.aux_coeff > 0.0f, z = p.losses.z_coeff > 0.0f;
  const int64_t T = p.routing.T, G = p.losses.groups(T), S = p.losses.group_tokens(T);
  // d aux / d score[t, e] = aux_scale * counts[group(t), e]
  const float aux_scale = static_cast<float>(static_cast<double>(p.loss_grad_scale) * p.losses.aux_coeff * E /
                                             (static_cast<double>(k) * S * S * G));
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * warps_per_block + warp; t < T;
       t += static_cast<int64_t>(gridDim.x) * warps_per_block) {
    const float* x = p.logits + t * E;
    const int32_t* ids = p.routing_map + t * k;
    const float* dp = p.dprobs + t * k;
    const int32_t* counts = aux ? p.aux_counts + (t / S) * E : nullptr;
    for (int e = lane; e < E; e += 32) chosen[e] = 0.0f;
    __syncwarp();
    const RowSoftmax sm = row_softmax(x, E);
    // The probs term, scattered to the chosen experts (pre-softmax: the upstream gradient g).
    float pre_dot = 0.0f;  // pre-softmax: sum_j g_j s[id_j]
    if (elementwise) {
      float sum = 0.0f, dps = 0.0f;
      for (int j = lane; j < k; j += 32) {
        const float s = elementwise_score(x[ids[j]], f);
        sum += s;
        dps += dp[j] * s;
      }
      sum = warp_reduce_sum(sum) + kScoreNormEps;
      dps = warp_reduce_sum(dps);
      for (int j = lane; j < k; j += 32) {
        const float s = elementwise_score(x[ids[j]], f);
        const float ds = k > 1 ? sf * (dp[j] / sum - dps / (sum * sum)) : sf * dp[j];
        chosen[ids[j]] = elementwise_score_backward(ds, x[ids[j]], s, f);
      }
    } else if (pre) {
      for (int j = lane; j < k; j += 32) {
        chosen[ids[j]] = sf * dp[j];
        pre_dot += sf * dp[j] * sm.prob(x[ids[j]]);
      }
      pre_dot = warp_reduce_sum(pre_dot);
    } else {
      // q = softmax over the chosen logits: dx[id_j] = q_j (sf dp_j - sum_i q_i sf dp_i)
      const RowSoftmax q = chosen_softmax(x, ids, k);
      float qd = 0.0f;
      for (int j = lane; j < k; j += 32) qd += q.prob(x[ids[j]]) * sf * dp[j];
      qd = warp_reduce_sum(qd);
      for (int j = lane; j < k; j += 32) chosen[ids[j]] = q.prob(x[ids[j]]) * (sf * dp[j] - qd);
    }
    // Sums the load-balancing gradient needs: <g, scores> (softmax) or sum s and <g, s> (elementwise scores s).
    float aux_dot = 0.0f, score_sum = 0.0f;
    if (aux) {
      for (int e = lane; e < E; e += 32) {
        const float g = aux_scale * counts[e];
        if (elementwise) {
          const float s = elementwise_score(x[e], f);
          score_sum += s;
          aux_dot += g * s;
        } else {
          aux_dot += g * sm.prob(x[e]);
        }
      }
      aux_dot = warp_reduce_sum(aux_dot);
      score_sum = warp_reduce_sum(score_sum) + kScoreNormEps;
    }
    const float z_scale = z ? static_cast<float>(2.0 * p.loss_grad_scale * p.losses.z_coeff / T) * sm.logsumexp()
                            : 0.0f;
    __syncwarp();  // chosen[] is complete
    float* dx = p.dlogits + t * E;
    for (int e = lane; e < E; e += 32) {
      const float s = sm.prob(x[e]);
      float d = pre ? s * (chosen[e] - pre_dot) : chosen[e];
      if (aux) {
        const float g = aux_scale * counts[e];
        if (elementwise) {
          const float se = elementwise_score(x[e], f);
          d += elementwise_score_backward(g / score_sum - aux_dot / (score_sum * score_sum), x[e], se, f);
        } else {
          d += s * (g - aux_dot);
        }
      }
      if (z) d += z_scale * s;
      dx[e] = d;
    }
    __syncwarp();  // the next token clears chosen[]
  }
}

// ---------------------------------------------------------------------------------------------
// Expert bias
// ---------------------------------------------------------------------------------------------

__global__ void __launch_bounds__(kFinalThreads) moe_expert_bias_update_kernel(MoeExpertBiasUpdateParams p) {
  using BlockReduce = cub::BlockReduce<long long, kFinalThreads>;
  __shared__ typename BlockReduce::TempStorage reduce_storage;
  __shared__ long long total_shared;
  long long local = 0;
  for (int64_t e = threadIdx.x; e < p.E; e += kFinalThreads) local += p.step_counts[e];
  const long long total = BlockReduce(reduce_storage).Sum(local);
  if (threadIdx.x == 0) total_shared = total;
  __syncthreads();
  for (int64_t e = threadIdx.x; e < p.E; e += kFinalThreads) {
    // sign(total / E - count) in exact integers
    const long long diff = total_shared - p.E * static_cast<long long>(p.step_counts[e]);
    const float sign = diff > 0 ? 1.0f : (diff < 0 ? -1.0f : 0.0f);
    p.expert_bias[e] += sign * p.rate;
    p.step_counts[e] = 0;
  }
}

// ---------------------------------------------------------------------------------------------
// Launch helpers
// ---------------------------------------------------------------------------------------------

// Warps per block for a per-warp shared row of `per_warp_bytes`, within the default shared limit.
int warps_for(size_t per_warp_bytes) {
  return static_cast<int>(std::clamp<size_t>(kMaxSharedBytes / per_warp_bytes, 1, kMaxWarpsPerBlock));
}

unsigned warp_grid(int64_t T, int warps) {
  return static_cast<unsigned>(std::clamp<int64_t>(ceil_div(T, warps), 1, kMaxBlocks));
}

int64_t loss_chunks(const MoeRouting& r, const MoeRouterLosses& l) {
  return std::max<int64_t>(1, ceil_div(l.group_tokens(r.T), kLossChunkTokens));
}

void check_loss_grid(const MoeRouting& r, const MoeRouterLosses& l, const char* op) {
  ref::check_moe_router_losses(l, r.T, op);
  const std::string groups_problem = moe_loss_groups_problem(l.groups(r.T));  // kernels/shape_limits.h
  SG_CHECK(groups_problem.empty(), strprintf("%s: %s; use longer sequences or aux_loss", op, groups_problem.c_str()));
}

}  // namespace

void moe_router_forward(cudaStream_t stream, const MoeRouterForwardParams& p) {
  ref::check_moe_routing(p.routing, "moe_router_forward");
  SG_CHECK(p.logits && p.routing_map && p.probs, "moe_router_forward: logits, routing_map and probs must be set");
  SG_CHECK(!p.expert_bias || ref::moe_elementwise_scores(p.routing.score_function),
           "moe_router_forward: moe_router_enable_expert_bias needs moe_router_score_function sigmoid or sqrtsoftplus "
           "(as Megatron)");
  if (p.routing.T == 0) return;
  const size_t per_warp = (p.routing.E + p.routing.k) * sizeof(float);
  const int warps = warps_for(per_warp);
  moe_router_forward_kernel<<<warp_grid(p.routing.T, warps), warps * 32, warps * per_warp, stream>>>(p, warps);
  SG_CUDA_CHECK_LAUNCH("moe_router_forward_kernel");
}

void moe_count_experts(cudaStream_t stream, const MoeCountExpertsParams& p) {
  const int64_t group_tokens = p.group_tokens > 0 ? p.group_tokens : p.T;
  SG_CHECK(p.T >= 0 && p.E >= 1 && p.E <= ref::kMoeMaxExperts && p.k >= 1,
           strprintf("moe_count_experts: bad shape T=%lld E=%lld k=%lld", (long long)p.T, (long long)p.E,
                     (long long)p.k));
  SG_CHECK(p.T == 0 || p.T % group_tokens == 0,
           strprintf("moe_count_experts: group of %lld tokens must divide T=%lld", (long long)group_tokens,
                     (long long)p.T));
  SG_CHECK(p.routing_map && p.counts, "moe_count_experts: routing_map and counts must be set");
  const int64_t G = p.T == 0 ? 1 : p.T / group_tokens;
  const std::string groups_problem = moe_loss_groups_problem(G);
  SG_CHECK(groups_problem.empty(), "moe_count_experts: " + groups_problem);
  SG_CUDA_CHECK(cudaMemsetAsync(p.counts, 0, G * p.E * sizeof(int32_t), stream));
  if (p.T == 0) return;
  const int64_t group_slots = group_tokens * p.k;
  const dim3 grid(static_cast<unsigned>(ceil_div(group_slots, kCountChunkSlots)), static_cast<unsigned>(G));
  moe_count_experts_kernel<<<grid, kCountThreads, p.E * sizeof(int), stream>>>(p.routing_map, p.counts, group_slots,
                                                                              static_cast<int>(p.E));
  SG_CUDA_CHECK_LAUNCH("moe_count_experts_kernel");
}

size_t moe_router_loss_workspace_bytes(const MoeRouting& routing, const MoeRouterLosses& losses) {
  const int64_t blocks = losses.groups(routing.T) * loss_chunks(routing, losses);
  return static_cast<size_t>(blocks * (routing.E + 1)) * sizeof(float);
}

void moe_router_loss_forward(cudaStream_t stream, const MoeRouterLossParams& p) {
  ref::check_moe_routing(p.routing, "moe_router_loss_forward");
  check_loss_grid(p.routing, p.losses, "moe_router_loss_forward");
  SG_CHECK(p.logits && p.workspace, "moe_router_loss_forward: logits and workspace must be set");
  SG_CHECK(p.losses.aux_coeff == 0.0f || p.aux_counts,
           "moe_router_loss_forward: aux_counts must be set when moe_aux_loss_coeff > 0");
  if (p.routing.T == 0 || (p.losses.aux_coeff == 0.0f && p.losses.z_coeff == 0.0f)) return;
  const int64_t G = p.losses.groups(p.routing.T), chunks = loss_chunks(p.routing, p.losses);
  const LossPartials partials = loss_partials(p.workspace, G, chunks, p.routing.E);
  const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(G));
  moe_router_loss_partials_kernel<<<grid, kLossThreads, kLossWarps * p.routing.E * sizeof(float), stream>>>(
      p, partials, chunks);
  SG_CUDA_CHECK_LAUNCH("moe_router_loss_partials_kernel");
  moe_router_loss_final_kernel<<<1, kFinalThreads, 0, stream>>>(p, partials, chunks);
  SG_CUDA_CHECK_LAUNCH("moe_router_loss_final_kernel");
}

void moe_router_backward(cudaStream_t stream, const MoeRouterBackwardParams& p) {
  ref::check_moe_routing(p.routing, "moe_router_backward");
  check_loss_grid(p.routing, p.losses, "moe_router_backward");
  SG_CHECK(p.dlogits && p.dprobs && p.logits && p.routing_map,
           "moe_router_backward: dlogits, dprobs, logits and routing_map must be set");
  SG_CHECK(p.losses.aux_coeff == 0.0f || p.aux_counts,
           "moe_router_backward: aux_counts must be set when moe_aux_loss_coeff > 0");
  if (p.routing.T == 0) return;
  const size_t per_warp = p.routing.E * sizeof(float);
  const int warps = warps_for(per_warp);
  moe_router_backward_kernel<<<warp_grid(p.routing.T, warps), warps * 32, warps * per_warp, stream>>>(p, warps);
  SG_CUDA_CHECK_LAUNCH("moe_router_backward_kernel");
}

void moe_expert_bias_update(cudaStream_t stream, const MoeExpertBiasUpdateParams& p) {
  SG_CHECK(p.expert_bias && p.step_counts && p.E >= 1,
           "moe_expert_bias_update: expert_bias and step_counts must be set, E >= 1");
  moe_expert_bias_update_kernel<<<1, kFinalThreads, 0, stream>>>(p);
  SG_CUDA_CHECK_LAUNCH("moe_expert_bias_update_kernel");
}

}  // namespace sg::kernels
