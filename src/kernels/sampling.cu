#include <algorithm>
#include <climits>
#include <cmath>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_segmented_radix_sort.cuh>

#include "core/error.h"
#include "core/philox.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "kernels/common.cuh"
#include "kernels/sampling.h"

namespace sg::kernels {
namespace {

constexpr int kArgmaxThreads = 1024;
constexpr int kScanThreads = 256;
constexpr int kScanItems = 4;  // per thread: tiles of 1024 sorted weights
constexpr int kTile = kScanThreads * kScanItems;
constexpr size_t kScratchAlign = 256;

size_t align_up(size_t n) {
  return (n + kScratchAlign - 1) / kScratchAlign * kScratchAlign;
}

// ---- greedy ----

__device__ __forceinline__ float nan_to_lowest(float x) {
  return isnan(x) ? -INFINITY : x;
}

// (value, id) pairs: larger value wins, equal values go to the lower id. Associative and commutative,
// so the result does not depend on the reduction order.
__device__ __forceinline__ void argmax_merge(float& v, int32_t& i, float ov, int32_t oi) {
  if (ov > v || (ov == v && oi < i)) {
    v = ov;
    i = oi;
  }
}

__global__ void __launch_bounds__(kArgmaxThreads)
    argmax_kernel(int32_t* __restrict__ tokens, const float* __restrict__ logits, int64_t V, int64_t ld) {
  __shared__ float values[32];
  __shared__ int32_t ids[32];
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * ld;
  float v = -INFINITY;
  int32_t id = 0;
  for (int64_t j = threadIdx.x; j < V; j += blockDim.x)
    argmax_merge(v, id, nan_to_lowest(row[j]), static_cast<int32_t>(j));
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    argmax_merge(v, id, __shfl_xor_sync(0xffffffffu, v, offset), __shfl_xor_sync(0xffffffffu, id, offset));
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    values[warp] = v;
    ids[warp] = id;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < static_cast<int>(blockDim.x >> 5); ++w) argmax_merge(v, id, values[w], ids[w]);
    tokens[blockIdx.x] = id;
  }
}

// ---- sampling ----

struct ScratchLayout {
  int32_t* ids_in = nullptr;   // [B * ld]: 0..V-1 per row
  float* keys_out = nullptr;   // [B * ld]: each row's logits, descending
  int32_t* ids_out = nullptr;  // [B * ld]: their ids
  int32_t* begin = nullptr;    // [B] segment offsets
  int32_t* end = nullptr;      // [B]
  void* cub = nullptr;
  size_t cub_bytes = 0;
};

size_t arrays_bytes(int64_t B, int64_t ld) {
  const size_t n = static_cast<size_t>(B * ld);
  return align_up(n * 4) * 3 + align_up(static_cast<size_t>(B) * 4) * 2;
}

ScratchLayout carve(void* scratch, size_t bytes, int64_t B, int64_t ld) {
  auto* base = static_cast<unsigned char*>(scratch);
  const size_t n = static_cast<size_t>(B * ld);
  ScratchLayout s;
  size_t at = 0;
  auto take = [&](size_t size) {
    void* p = base + at;
    at += align_up(size);
    return p;
  };
  s.ids_in = static_cast<int32_t*>(take(n * 4));
  s.keys_out = static_cast<float*>(take(n * 4));
  s.ids_out = static_cast<int32_t*>(take(n * 4));
  s.begin = static_cast<int32_t*>(take(static_cast<size_t>(B) * 4));
  s.end = static_cast<int32_t*>(take(static_cast<size_t>(B) * 4));
  s.cub = base + at;
  s.cub_bytes = bytes - at;
  return s;
}

__global__ void sort_prepare_kernel(int32_t* __restrict__ ids, int32_t* __restrict__ begin, int32_t* __restrict__ end,
                                    int64_t B, int64_t V, int64_t ld) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < B * ld;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = i / ld, j = i - b * ld;
    ids[i] = static_cast<int32_t>(j < V ? j : 0);
    if (j == 0) {
      begin[b] = static_cast<int32_t>(b * ld);
      end[b] = static_cast<int32_t>(b * ld + V);
    }
  }
}

using BlockScan = cub::BlockScan<float, kScanThreads>;

struct RowScan {
  const float* keys;  // sorted logits of the row
  int64_t n;          // kept by top-k
  float top;          // keys[0]
  float inv_temperature;
};

// Inclusive prefix sums of the weights of tile `t0` (blocked: thread i holds t0 + i*kScanItems + k),
// offset by `carry`; returns the tile's total. Elements >= n weigh 0.
__device__ __forceinline__ float scan_tile(const RowScan& r, int64_t t0, float carry, float (&prefix)[kScanItems],
                                           BlockScan::TempStorage& storage) {
  float w[kScanItems];
#pragma unroll
  for (int k = 0; k < kScanItems; ++k) {
    const int64_t j = t0 + static_cast<int64_t>(threadIdx.x) * kScanItems + k;
    w[k] = j < r.n ? expf((r.keys[j] - r.top) * r.inv_temperature) : 0.0f;
  }
  float total;
  BlockScan(storage).InclusiveSum(w, prefix, total);
  __syncthreads();  // storage is reused by the next tile
#pragma unroll
  for (int k = 0; k < kScanItems; ++k) prefix[k] += carry;
  return total;
}

// The first sorted position j < limit whose inclusive prefix `pred`s, or limit when none: tiles in
// order, stopping at the first tile that holds one. *prefix_at gets that prefix.
template <class Pred>
__device__ int64_t first_where(const RowScan& r, int64_t limit, Pred pred, float* prefix_at,
                               BlockScan::TempStorage& storage, int64_t* found, float* found_prefix) {
  float carry = 0.0f;
  for (int64_t t0 = 0; t0 < limit; t0 += kTile) {
    __syncthreads();  // every thread has read the previous tile's *found
    if (threadIdx.x == 0) *found = LLONG_MAX;
    __syncthreads();
    float prefix[kScanItems];
    const float total = scan_tile(r, t0, carry, prefix, storage);
#pragma unroll
    for (int k = 0; k < kScanItems; ++k) {
      const int64_t j = t0 + static_cast<int64_t>(threadIdx.x) * kScanItems + k;
      if (j < limit && pred(prefix[k])) {
        atomicMin(reinterpret_cast<unsigned long long*>(found), static_cast<unsigned long long>(j));
        break;  // the thread's later items have larger j
      }
    }
    __syncthreads();
    const int64_t j = *found;
    if (j != LLONG_MAX) {
      // The thread holding j publishes its prefix (one writer; read after the barrier).
      const int64_t owner = (j - t0) / kScanItems;
      if (static_cast<int64_t>(threadIdx.x) == owner) *found_prefix = prefix[(j - t0) % kScanItems];
      __syncthreads();
      *prefix_at = *found_prefix;
      return j;
    }
    carry += total;
  }
  *prefix_at = carry;
  return limit;
}

__global__ void __launch_bounds__(kScanThreads)
    sample_kernel(int32_t* __restrict__ tokens, const float* __restrict__ sorted_keys,
                  const int32_t* __restrict__ sorted_ids, int64_t V, int64_t ld, ref::SamplingConfig config,
                  const int64_t* __restrict__ step) {
  __shared__ BlockScan::TempStorage storage;
  __shared__ int64_t found;
  __shared__ float found_prefix;
  const int64_t b = blockIdx.x;
  RowScan r;
  r.keys = sorted_keys + b * ld;
  r.n = config.top_k > 0 && config.top_k < V ? config.top_k : V;
  r.top = r.keys[0];
  r.inv_temperature = 1.0f / config.temperature;
  // Z: the whole kept mass (no element passes the predicate, so every tile is scanned).
  float total;
  first_where(
      r, r.n, [](float) { return false; }, &total, storage, &found, &found_prefix);
  // Top-p: token j is kept iff the mass before it is < top_p Z, i.e. the cut is the first j whose
  // inclusive prefix reaches top_p Z; it is kept too.
  int64_t kept = r.n;
  float kept_mass = total;
  if (config.top_p < 1.0f) {
    const float threshold = config.top_p * total;
    const int64_t cut = first_where(
        r, r.n, [threshold](float prefix) { return prefix >= threshold; }, &kept_mass, storage, &found, &found_prefix);
    if (cut < r.n)
      kept = cut + 1;
    else
      kept_mass = total;
  }
  const float u =
      rng::philox_uniform(config.seed, static_cast<uint64_t>(*step), ref::kSamplingSite, static_cast<uint64_t>(b));
  const float target = u * kept_mass;
  float unused;
  int64_t j = first_where(
      r, kept, [target](float prefix) { return prefix > target; }, &unused, storage, &found, &found_prefix);
  if (j >= kept) j = kept - 1;  // rounding left no prefix above the target
  if (threadIdx.x == 0) tokens[b] = sorted_ids[b * ld + j];
}

void check_shape(const char* op, int64_t B, int64_t V, int64_t ld) {
  SG_CHECK(B >= 0 && V > 0 && ld >= V && B * ld < INT32_MAX,
           strprintf("%s: bad shape B=%lld V=%lld ld=%lld (need V > 0, ld >= V, B*ld < 2^31)", op,
                     static_cast<long long>(B), static_cast<long long>(V), static_cast<long long>(ld)));
}

size_t cub_sort_bytes(int64_t B, int64_t ld) {
  size_t bytes = 0;
  SG_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(
      nullptr, bytes, static_cast<const float*>(nullptr), static_cast<float*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), static_cast<int>(B * ld),
      static_cast<int>(B), static_cast<const int32_t*>(nullptr), static_cast<const int32_t*>(nullptr)));
  return bytes;
}

}  // namespace

size_t sample_tokens_scratch_bytes(int64_t B, int64_t V, int64_t ld, const ref::SamplingConfig& config) {
  check_shape("sample_tokens_scratch_bytes", B, V, ld);
  ref::check_sampling_config(config);
  if (config.greedy() || B == 0) return 0;
  return arrays_bytes(B, ld) + align_up(cub_sort_bytes(B, ld));
}

void sample_tokens(cudaStream_t stream, const SampleTokensParams& p) {
  check_shape("sample_tokens", p.B, p.V, p.ld);
  ref::check_sampling_config(p.config);
  SG_CHECK(p.tokens != nullptr && p.logits != nullptr, "sample_tokens: null tokens or logits");
  if (p.B == 0) return;
  if (p.config.greedy()) {
    argmax_kernel<<<static_cast<unsigned>(p.B), kArgmaxThreads, 0, stream>>>(p.tokens, p.logits, p.V, p.ld);
    SG_CUDA_CHECK_LAUNCH("argmax_kernel");
    return;
  }
  SG_CHECK(p.step != nullptr, "sample_tokens: sampling needs the device step (the Philox offset)");
  SG_CHECK(p.scratch != nullptr && detail::is_aligned(p.scratch, kScratchAlign) &&
               p.scratch_bytes >= arrays_bytes(p.B, p.ld),
           strprintf("sample_tokens: scratch (%zu bytes at %p) must be 256-byte aligned and hold "
                     "sample_tokens_scratch_bytes(B=%lld, V=%lld, ld=%lld) bytes",
                     p.scratch_bytes, p.scratch, static_cast<long long>(p.B), static_cast<long long>(p.V),
                     static_cast<long long>(p.ld)));
  const ScratchLayout s = carve(p.scratch, p.scratch_bytes, p.B, p.ld);
  const int64_t n = p.B * p.ld;
  const auto blocks = static_cast<unsigned>(std::min<int64_t>(detail::ceil_div(n, 256), 1 << 16));
  sort_prepare_kernel<<<blocks, 256, 0, stream>>>(s.ids_in, s.begin, s.end, p.B, p.V, p.ld);
  SG_CUDA_CHECK_LAUNCH("sort_prepare_kernel");
  size_t cub_bytes = s.cub_bytes;
  const cudaError_t err = cub::DeviceSegmentedRadixSort::SortPairsDescending(
      s.cub, cub_bytes, p.logits, s.keys_out, s.ids_in, s.ids_out, static_cast<int>(n), static_cast<int>(p.B), s.begin,
      s.end, 0, static_cast<int>(sizeof(float) * 8), stream);
  if (err != cudaSuccess) {
    throw Error(
        strprintf("sample_tokens: CUB segmented radix sort failed: %s (%s); plan the scratch with "
                  "sample_tokens_scratch_bytes",
                  cudaGetErrorName(err), cudaGetErrorString(err)));
  }
  sample_kernel<<<static_cast<unsigned>(p.B), kScanThreads, 0, stream>>>(p.tokens, s.keys_out, s.ids_out, p.V, p.ld,
                                                                         p.config, p.step);
  SG_CUDA_CHECK_LAUNCH("sample_kernel");
}

}  // namespace sg::kernels
