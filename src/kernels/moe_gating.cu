#include "kernels/moe_gating.h"

#include <algorithm>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "kernels/common.cuh"

namespace sg::kernels {
namespace {

using detail::ceil_div;
using detail::kBf16PerVec;

// backward_input: a block takes kInputTokens tokens (their dlogits staged in shared memory) over up to
// kInputMaxThreads chunks of H; each thread reads Wg's column chunk once per expert for all its tokens.
constexpr int kInputTokens = 8;
constexpr int kInputMaxThreads = 256;
constexpr int64_t kMaxGridY = 65535;  // token groups beyond this loop

// backward_weight: a block is kXLanes chunks of H x kYLanes token lanes x kExpertTile experts.
constexpr int kXLanes = 8;
constexpr int kYLanes = 32;
constexpr int kWeightThreads = kXLanes * kYLanes;
constexpr int kWarps = kWeightThreads / 32;
constexpr int kExpertTile = 8;
constexpr int64_t kTargetBlocks = 264;     // ~2 blocks per SM of an H200 before the tokens are split further
constexpr int64_t kMinChunkTokens = 256;   // 8 tokens per lane at least
constexpr int kSumXLanes = 32, kSumYLanes = 8;  // the partials' sum: 32 outputs x 8 chunk lanes per block


template <int VEC>
__global__ void __launch_bounds__(kInputMaxThreads) backward_input_kernel(MoeGatingBackwardInputParams p) {
  extern __shared__ float dl[];  // [kInputTokens, E]
  const int E = static_cast<int>(p.E);
  const int64_t chunks = p.H / VEC;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool active = c < chunks;
  const int64_t groups = ceil_div(p.T, kInputTokens);
  for (int64_t g = blockIdx.y; g < groups; g += gridDim.y) {
    const int64_t t0 = g * kInputTokens;
    const int tokens = static_cast<int>(min(static_cast<int64_t>(kInputTokens), p.T - t0));
    __syncthreads();  // the previous group is done with dl
    for (int i = threadIdx.x; i < kInputTokens * E; i += blockDim.x) {
      dl[i] = i < tokens * E ? p.dlogits[t0 * E + i] : 0.0f;
    }
    __syncthreads();
    if (!active) continue;
    float acc[kInputTokens][VEC] = {};
    for (int e = 0; e < E; ++e) {
      float w[VEC];
      detail::load_bf16<VEC>(p.w + e * p.H + c * VEC, w);
#pragma unroll
      for (int tt = 0; tt < kInputTokens; ++tt) {
        const float d = dl[tt * E + e];
#pragma unroll
        for (int i = 0; i < VEC; ++i) acc[tt][i] = fmaf(d, w[i], acc[tt][i]);
      }
    }
#pragma unroll
    for (int tt = 0; tt < kInputTokens; ++tt) {
      if (tt >= tokens) break;
      bf16* dst = p.dx + (t0 + tt) * p.H + c * VEC;
      float v[VEC];
      detail::load_bf16<VEC>(dst, v);
#pragma unroll
      for (int i = 0; i < VEC; ++i) v[i] += acc[tt][i];
      detail::store_bf16<VEC>(dst, v);
    }
  }
}

// The plan-time split of backward_weight (independent of the vector width, so the workspace is too).
struct WeightGrid {
  int64_t h_blocks = 0, e_blocks = 0, chunks = 0, chunk_tokens = 0;
};
WeightGrid weight_grid(int64_t T, int64_t E, int64_t H) {
  WeightGrid g;
  g.h_blocks = ceil_div(ceil_div(H, kBf16PerVec), kXLanes);
  g.e_blocks = ceil_div(E, kExpertTile);
  const int64_t want = ceil_div(kTargetBlocks, g.h_blocks * g.e_blocks);
  const int64_t chunks = std::clamp<int64_t>(want, 1, std::max<int64_t>(1, ceil_div(T, kMinChunkTokens)));
  g.chunk_tokens = std::max<int64_t>(1, ceil_div(T, chunks));
  g.chunks = std::max<int64_t>(1, ceil_div(T, g.chunk_tokens));
  return g;
}

// Block (h block, expert tile, token chunk): lane (x, y) sums dlogits[t, e] x[t, chunk x] over the chunk's
// tokens t = y, y + kYLanes, ... in order; the lanes are then summed in a fixed order (a butterfly over
// the y lanes of a warp, then the warps in order). partials: out[chunk] = sum; else dw += sum.
template <int VEC>
__global__ void __launch_bounds__(kWeightThreads)
    backward_weight_partials_kernel(MoeGatingBackwardWeightParams p, float* partials, int64_t chunk_tokens) {
  __shared__ float warp_sums[kWarps][kExpertTile][kXLanes * VEC];
  const int x = threadIdx.x % kXLanes, y = threadIdx.x / kXLanes;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t chunks = p.H / VEC;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kXLanes + x;
  const int64_t e0 = static_cast<int64_t>(blockIdx.y) * kExpertTile;
  const int ne = static_cast<int>(min(static_cast<int64_t>(kExpertTile), p.E - e0));
  const int64_t t_begin = static_cast<int64_t>(blockIdx.z) * chunk_tokens;
  const int64_t t_end = min(p.T, t_begin + chunk_tokens);
  float acc[kExpertTile][VEC] = {};
  if (c < chunks) {
#pragma unroll 4
    for (int64_t t = t_begin + y; t < t_end; t += kYLanes) {
      float xv[VEC];
      detail::load_bf16<VEC>(p.x + t * p.H + c * VEC, xv);
      const float* d = p.dlogits + t * p.E + e0;
#pragma unroll
      for (int j = 0; j < kExpertTile; ++j) {
        const float dj = j < ne ? d[j] : 0.0f;
#pragma unroll
        for (int i = 0; i < VEC; ++i) acc[j][i] = fmaf(dj, xv[i], acc[j][i]);
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kExpertTile; ++j) {
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
      float v = acc[j][i];
#pragma unroll
      for (int offset = kXLanes; offset < 32; offset <<= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
      if (lane < kXLanes) warp_sums[warp][j][x * VEC + i] = v;
    }
  }
  __syncthreads();
  constexpr int kOutputs = kExpertTile * kXLanes * VEC;
  for (int o = threadIdx.x; o < kOutputs; o += kWeightThreads) {
    const int j = o / (kXLanes * VEC), r = o % (kXLanes * VEC);
    const int64_t h = (static_cast<int64_t>(blockIdx.x) * kXLanes + r / VEC) * VEC + r % VEC;
    if (j >= ne || h >= chunks * VEC) continue;
    float s = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) s += warp_sums[w][j][r];
    const int64_t idx = (e0 + j) * p.H + h;
    if (partials != nullptr) {
      partials[static_cast<int64_t>(blockIdx.z) * p.E * p.H + idx] = s;
    } else {
      detail::add_into(p.dw, idx, s);
    }
  }
}

// dw[o] += the sum of partials[0..chunks)[o]: lane y sums chunks y, y + kSumYLanes, ... in order, then
// the lanes in order.
__global__ void __launch_bounds__(kSumXLanes * kSumYLanes)
    backward_weight_sum_kernel(FloatBuffer dw, const float* partials, int64_t n, int64_t chunks) {
  __shared__ float lane_sums[kSumYLanes][kSumXLanes];
  const int x = threadIdx.x % kSumXLanes, y = threadIdx.x / kSumXLanes;
  const int64_t o = static_cast<int64_t>(blockIdx.x) * kSumXLanes + x;
  float s = 0.0f;
  if (o < n) {
    for (int64_t c = y; c < chunks; c += kSumYLanes) s += partials[c * n + o];
  }
  lane_sums[y][x] = s;
  __syncthreads();
  if (y != 0 || o >= n) return;
  float total = 0.0f;
#pragma unroll
  for (int l = 0; l < kSumYLanes; ++l) total += lane_sums[l][x];
  detail::add_into(dw, o, total);
}

bool vectors_fit(int64_t H, std::initializer_list<const void*> pointers) {
  if (H % kBf16PerVec != 0) return false;
  return std::all_of(pointers.begin(), pointers.end(), [](const void* q) { return detail::is_aligned(q, 16); });
}

void check_shape(const char* op, int64_t T, int64_t E, int64_t H) {
  SG_CHECK(T >= 0 && E >= 1 && H >= 1,
           strprintf("%s: bad shape T=%lld E=%lld H=%lld", op, (long long)T, (long long)E, (long long)H));
}

}  // namespace

void moe_gating_backward_input(cudaStream_t stream, const MoeGatingBackwardInputParams& p) {
  check_shape("moe_gating_backward_input", p.T, p.E, p.H);
  SG_CHECK(p.dx && p.dlogits && p.w, "moe_gating_backward_input: dx, dlogits and w must be set");
  SG_CHECK(p.E * kInputTokens * sizeof(float) <= 48 * 1024,
           strprintf("moe_gating_backward_input: E=%lld experts exceed the shared-memory stage", (long long)p.E));
  if (p.T == 0) return;
  const bool vec = vectors_fit(p.H, {p.dx, p.w});
  const int width = vec ? kBf16PerVec : 1;
  const int threads = detail::row_block_threads(p.H, width, kInputMaxThreads);
  const dim3 grid(static_cast<unsigned>(ceil_div(p.H / width, threads)),
                  static_cast<unsigned>(std::min(ceil_div(p.T, kInputTokens), kMaxGridY)));
  const size_t shared = static_cast<size_t>(kInputTokens * p.E) * sizeof(float);
  if (vec) {
    backward_input_kernel<kBf16PerVec><<<grid, threads, shared, stream>>>(p);
  } else {
    backward_input_kernel<1><<<grid, threads, shared, stream>>>(p);
  }
  SG_CUDA_CHECK_LAUNCH("moe_gating backward_input_kernel");
}

size_t moe_gating_backward_weight_workspace_bytes(int64_t T, int64_t E, int64_t H) {
  check_shape("moe_gating_backward_weight_workspace_bytes", T, E, H);
  const WeightGrid g = weight_grid(T, E, H);
  return g.chunks > 1 ? static_cast<size_t>(g.chunks * E * H) * sizeof(float) : 0;
}

void moe_gating_backward_weight(cudaStream_t stream, const MoeGatingBackwardWeightParams& p) {
  check_shape("moe_gating_backward_weight", p.T, p.E, p.H);
  SG_CHECK(p.dw.data && p.dlogits && p.x, "moe_gating_backward_weight: dw, dlogits and x must be set");
  const size_t need = moe_gating_backward_weight_workspace_bytes(p.T, p.E, p.H);
  SG_CHECK(p.workspace_bytes >= need && (need == 0 || (p.workspace && detail::is_aligned(p.workspace, 16))),
           strprintf("moe_gating_backward_weight: workspace of %zu bytes is too small or not 16-byte aligned; plan "
                     "moe_gating_backward_weight_workspace_bytes(T, E, H) = %zu bytes",
                     p.workspace_bytes, need));
  if (p.T == 0) return;
  const WeightGrid g = weight_grid(p.T, p.E, p.H);
  SG_CHECK(g.e_blocks <= kMaxGridY && g.chunks <= kMaxGridY,
           strprintf("moe_gating_backward_weight: E=%lld exceeds the grid", (long long)p.E));
  float* partials = g.chunks > 1 ? static_cast<float*>(p.workspace) : nullptr;
  const bool vec = vectors_fit(p.H, {p.x});
  const dim3 grid(static_cast<unsigned>(vec ? g.h_blocks : ceil_div(p.H, kXLanes)), static_cast<unsigned>(g.e_blocks),
                  static_cast<unsigned>(g.chunks));
  if (vec) {
    backward_weight_partials_kernel<kBf16PerVec><<<grid, kWeightThreads, 0, stream>>>(p, partials, g.chunk_tokens);
  } else {
    backward_weight_partials_kernel<1><<<grid, kWeightThreads, 0, stream>>>(p, partials, g.chunk_tokens);
  }
  SG_CUDA_CHECK_LAUNCH("moe_gating backward_weight_partials_kernel");
  if (partials == nullptr) return;
  const int64_t n = p.E * p.H;
  backward_weight_sum_kernel<<<static_cast<unsigned>(ceil_div(n, kSumXLanes)), kSumXLanes * kSumYLanes, 0, stream>>>(
      p.dw, partials, n, g.chunks);
  SG_CUDA_CHECK_LAUNCH("moe_gating backward_weight_sum_kernel");
}

}  // namespace sg::kernels
