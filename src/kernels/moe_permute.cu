#include "kernels/moe_permute.h"

#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <bit>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "kernels/common.cuh"
#include "kernels/moe_rows.cuh"
#include "reference/moe_router.h"  // kMoeMaxExperts

namespace sg::kernels {
namespace {

using detail::ceil_div;
using detail::round_up;

constexpr int kPlanThreads = 256;
constexpr int kPlanItems = 4;  // experts per thread: E <= 1024
static_assert(kPlanThreads * kPlanItems >= ref::kMoeMaxExperts);
constexpr int kThreads = 256;
constexpr size_t kAlign = 256;
// Counting sort (dropless, drop by position): blocks of kRankChunk slots, kRankItems per thread.
constexpr int kRankThreads = 256;
constexpr int kRankWarps = kRankThreads / 32;
constexpr int kRankItems = 4;
constexpr int64_t kRankChunk = kRankThreads * kRankItems;
constexpr unsigned kFullMask = 0xffffffffu;

static_assert((1 + kRankWarps) * ref::kMoeMaxExperts * sizeof(int) <= 48 * 1024, "counting sort shared memory");

int64_t rank_chunks(const MoeDispatch& d) { return ceil_div(d.T * d.k, kRankChunk); }

// Sort keys hold expert ids 0..E (E marks a dropped or invalid slot): this many low bits.
int expert_key_bits(int64_t E) { return std::max(1, static_cast<int>(std::bit_width(static_cast<uint64_t>(E)))); }

bool sorts_by_prob(const MoeDispatch& d) { return !d.dropless() && d.drop_policy == MoeDropPolicy::probs; }

// Scratch layout: offsets, sort values and keys, then CUB's temp storage (the rest of the workspace).
struct Scratch {
  int32_t* chunk_counts;   // [rank_chunks, E] per-chunk expert histograms of the counting sort
  int32_t* count_offsets;  // [E + 1] where each expert's slots start in the by-expert sort
  int32_t* kept_offsets;   // [E + 1] where each expert's kept slots start in the re-sort (probs policy)
  int32_t* slot_ids;       // [slots] 0, 1, 2, ... (sort values in)
  int32_t* sorted_slots;   // [slots] sort values out
  void* keys_in;           // [slots] uint32 or uint64 (probs policy)
  void* keys_out;
  void* temp;
  size_t temp_bytes;
};

size_t fixed_scratch_bytes(const MoeDispatch& d) {
  const int64_t slots = d.T * d.k;
  const size_t key_bytes = sorts_by_prob(d) ? sizeof(uint64_t) : sizeof(uint32_t);
  return round_up(rank_chunks(d) * d.E * sizeof(int32_t), kAlign) + 2 * round_up((d.E + 1) * sizeof(int32_t), kAlign) + 2 * round_up(slots * sizeof(int32_t), kAlign) +
         2 * round_up(slots * key_bytes, kAlign);
}

Scratch carve_scratch(const MoeDispatch& d, void* workspace, size_t workspace_bytes) {
  const int64_t slots = d.T * d.k;
  const size_t key_bytes = sorts_by_prob(d) ? sizeof(uint64_t) : sizeof(uint32_t);
  char* p = static_cast<char*>(workspace);
  auto take = [&](size_t bytes) {
    char* q = p;
    p += round_up(bytes, kAlign);
    return q;
  };
  Scratch s;
  s.chunk_counts = reinterpret_cast<int32_t*>(take(rank_chunks(d) * d.E * sizeof(int32_t)));
  s.count_offsets = reinterpret_cast<int32_t*>(take((d.E + 1) * sizeof(int32_t)));
  s.kept_offsets = reinterpret_cast<int32_t*>(take((d.E + 1) * sizeof(int32_t)));
  s.slot_ids = reinterpret_cast<int32_t*>(take(slots * sizeof(int32_t)));
  s.sorted_slots = reinterpret_cast<int32_t*>(take(slots * sizeof(int32_t)));
  s.keys_in = take(slots * key_bytes);
  s.keys_out = take(slots * key_bytes);
  s.temp = p;
  s.temp_bytes = workspace_bytes - fixed_scratch_bytes(d);
  return s;
}

// CUB's temp storage for one SortPairs of `slots` items with keys of type Key.
template <class Key>
size_t sort_temp_bytes(int64_t slots, int end_bit) {
  size_t bytes = 0;
  SG_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const Key*>(nullptr),
                                                static_cast<Key*>(nullptr), static_cast<const int32_t*>(nullptr),
                                                static_cast<int32_t*>(nullptr), static_cast<int>(slots), 0, end_bit));
  return bytes;
}

template <class Key>
void sort_pairs(const Scratch& s, const void* keys_in, void* keys_out, int64_t slots, int end_bit,
                cudaStream_t stream) {
  size_t temp_bytes = s.temp_bytes;
  SG_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(s.temp, temp_bytes, static_cast<const Key*>(keys_in),
                                                static_cast<Key*>(keys_out), s.slot_ids, s.sorted_slots,
                                                static_cast<int>(slots), 0, end_bit, stream));
}

// ---------------------------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------------------------

// One block: kept counts, group rows and three exclusive scans over the experts.
__global__ void __launch_bounds__(kPlanThreads)
    dispatch_plan_kernel(MoePreprocessParams p, int32_t* count_offsets, int32_t* kept_offsets) {
  using BlockScan = cub::BlockScan<int, kPlanThreads>;
  __shared__ typename BlockScan::TempStorage scan_storage;
  const int E = static_cast<int>(p.dispatch.E);
  const int capacity = static_cast<int>(p.dispatch.capacity);  // <= INT32_MAX: ref::check_moe_dispatch
  int counts[kPlanItems], kept[kPlanItems], rows[kPlanItems], offsets[kPlanItems];
#pragma unroll
  for (int i = 0; i < kPlanItems; ++i) {
    const int e = threadIdx.x * kPlanItems + i;
    counts[i] = e < E ? p.expert_counts[e] : 0;
    kept[i] = p.dispatch.dropless() ? counts[i] : min(counts[i], capacity);
    rows[i] = e >= E ? 0 : (p.dispatch.pad_to_capacity ? capacity : kept[i]);
  }
  // Writes the exclusive scan of v to out[0..E] (out[E] = the total).
  auto scan_to = [&](int(&v)[kPlanItems], int32_t* out) {
    int total = 0;
    BlockScan(scan_storage).ExclusiveSum(v, offsets, total);
    __syncthreads();  // scan_storage is reused by the next scan
#pragma unroll
    for (int i = 0; i < kPlanItems; ++i) {
      const int e = threadIdx.x * kPlanItems + i;
      if (e < E) out[e] = offsets[i];
    }
    if (threadIdx.x == 0) out[E] = total;
  };
  scan_to(counts, count_offsets);
  scan_to(kept, kept_offsets);
  scan_to(rows, p.expert_row_offsets);
#pragma unroll
  for (int i = 0; i < kPlanItems; ++i) {
    const int e = threadIdx.x * kPlanItems + i;
    if (e >= E) continue;
    p.kept_counts[e] = kept[i];
    p.expert_rows[e] = rows[i];
    if (p.step_counts) p.step_counts[e] += kept[i];
  }
}

// Descending order of a float as an unsigned key (ascending order of the flipped IEEE bits, inverted).
__device__ __forceinline__ uint32_t descending_key(float v) {
  uint32_t u = __float_as_uint(v);
  u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  return ~u;
}

// keys[s] = expert (or E when out of range), with the descending prob below it for the probs policy.
template <class Key>
__global__ void __launch_bounds__(kThreads)
    sort_keys_kernel(const int32_t* __restrict__ map, const float* __restrict__ probs, Key* __restrict__ keys,
                     int32_t* __restrict__ slot_ids, int64_t slots, int E) {
  const int64_t s = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (s >= slots) return;
  const int32_t e = map[s];
  const uint32_t expert = (e >= 0 && e < E) ? static_cast<uint32_t>(e) : static_cast<uint32_t>(E);
  if constexpr (sizeof(Key) == 8) {
    keys[s] = (static_cast<uint64_t>(expert) << 32) | descending_key(probs[s]);
  } else {
    keys[s] = expert;
  }
  slot_ids[s] = static_cast<int32_t>(s);
}

struct AssignArgs {
  const int32_t* sorted_slots = nullptr;    // [slots] slot ids sorted by expert
  const uint32_t* sorted_experts = nullptr; // [slots] their experts (re-sort keys), or null: routing_map[slot]
  const int32_t* routing_map = nullptr;
  const int32_t* group_starts = nullptr;  // [E + 1] where each expert's slots start in the sorted order
  int64_t keep_limit = 0;                 // a slot is kept when its rank in its expert is below this
  const int32_t* row_offsets = nullptr;   // [E + 1]
  const int32_t* kept_counts = nullptr;   // [E]
  int32_t* slot_to_row = nullptr;
  int32_t* row_to_slot = nullptr;
  // Probs policy, first pass: write the re-sort key (kept ? expert : E) per slot instead of rows.
  uint32_t* resort_keys = nullptr;
  int64_t slots = 0, rows = 0;
  int E = 0;
};

// Is permuted row r one of its expert's kept rows (not padding, not past the last group)?
__device__ bool row_is_kept(const AssignArgs& a, int64_t r) {
  int lo = 0, hi = a.E;  // the largest e with row_offsets[e] <= r (row_offsets[0] = 0)
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (a.row_offsets[mid] <= r) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo < a.E && r - a.row_offsets[lo] < a.kept_counts[lo];
}

// Thread i: sorted position i (rank -> kept, row) and, when rows are assigned, permuted row i (-1 when
// no kept slot lands there). Every output element has exactly one writer.
__global__ void __launch_bounds__(kThreads) assign_rows_kernel(AssignArgs a) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i < a.slots) {
    const int32_t slot = a.sorted_slots[i];
    const int32_t e = a.sorted_experts ? static_cast<int32_t>(a.sorted_experts[i]) : a.routing_map[slot];
    const bool valid = e >= 0 && e < a.E;
    const int64_t rank = valid ? i - a.group_starts[e] : 0;
    const bool kept = valid && rank < a.keep_limit;
    if (a.resort_keys) {
      a.resort_keys[slot] = kept ? static_cast<uint32_t>(e) : static_cast<uint32_t>(a.E);
    } else {
      const int32_t row = kept ? a.row_offsets[e] + static_cast<int32_t>(rank) : -1;
      a.slot_to_row[slot] = row;
      if (kept) a.row_to_slot[row] = slot;
    }
  }
  if (!a.resort_keys && i < a.rows && !row_is_kept(a, i)) a.row_to_slot[i] = -1;
}

// The experts of a thread's kRankItems slots of chunk blockIdx.x (-1: past the end or out of range).
__device__ void load_chunk_experts(const int32_t* map, int64_t slots, int E, int (&experts)[kRankItems]) {
#pragma unroll
  for (int i = 0; i < kRankItems; ++i) {
    const int64_t s = static_cast<int64_t>(blockIdx.x) * kRankChunk + i * kRankThreads + threadIdx.x;
    const int e = s < slots ? map[s] : -1;
    experts[i] = (e >= 0 && e < E) ? e : -1;
  }
}

// Counting sort, pass 1: chunk_counts[chunk, e] = slots of expert e in the chunk (shared histogram,
// integer atomics: exact in any order).
__global__ void __launch_bounds__(kRankThreads)
    chunk_histogram_kernel(const int32_t* __restrict__ map, int32_t* __restrict__ chunk_counts, int64_t slots, int E) {
  extern __shared__ int hist[];
  for (int e = threadIdx.x; e < E; e += kRankThreads) hist[e] = 0;
  int experts[kRankItems];
  load_chunk_experts(map, slots, E, experts);
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kRankItems; ++i) {
    const unsigned peers = __match_any_sync(kFullMask, experts[i]);
    if (experts[i] >= 0 && (threadIdx.x & 31) == __ffs(peers) - 1) atomicAdd(&hist[experts[i]], __popc(peers));
  }
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += kRankThreads) chunk_counts[blockIdx.x * static_cast<int64_t>(E) + e] = hist[e];
}

// Counting sort, pass 2 (what the stable sort by expert and assign_rows_kernel give, in one pass): a
// slot's rank within its expert = its expert's slots in earlier chunks + in earlier tiles of this chunk
// + in earlier warps of this tile + in earlier lanes of its warp. Blocks past the slots' chunks (and
// every block, for its range of rows) mark the rows no kept slot lands on with -1.
__global__ void __launch_bounds__(kRankThreads)
    counting_sort_rows_kernel(AssignArgs a, const int32_t* __restrict__ chunk_counts, int64_t chunks) {
  extern __shared__ int smem[];
  const int E = a.E;
  int* before = smem;           // [E] the expert's slots before the current tile
  int* warp_counts = smem + E;  // [kRankWarps, E] the current tile's slots per warp
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t b = blockIdx.x;
  if (b < chunks) {  // uniform over the block
    int experts[kRankItems];
    load_chunk_experts(a.routing_map, a.slots, E, experts);
    for (int e = threadIdx.x; e < E; e += kRankThreads) {
      int sum = 0;
#pragma unroll 8
      for (int64_t c = 0; c < b; ++c) sum += chunk_counts[c * E + e];
      before[e] = sum;
    }
#pragma unroll
    for (int i = 0; i < kRankItems; ++i) {
      for (int j = threadIdx.x; j < kRankWarps * E; j += kRankThreads) warp_counts[j] = 0;
      __syncthreads();  // before[] is complete, warp_counts zeroed
      const int e = experts[i];
      const unsigned peers = __match_any_sync(kFullMask, e);
      if (e >= 0 && lane == __ffs(peers) - 1) warp_counts[warp * E + e] = __popc(peers);
      __syncthreads();
      const int64_t s = b * kRankChunk + i * kRankThreads + threadIdx.x;
      if (s < a.slots) {
        int32_t row = -1;
        if (e >= 0) {
          int64_t rank = before[e] + __popc(peers & ((1u << lane) - 1u));
          for (int w = 0; w < warp; ++w) rank += warp_counts[w * E + e];
          if (rank < a.keep_limit) {
            row = a.row_offsets[e] + static_cast<int32_t>(rank);
            a.row_to_slot[row] = static_cast<int32_t>(s);
          }
        }
        a.slot_to_row[s] = row;
      }
      __syncthreads();  // every thread has read before[] and warp_counts
      for (int e2 = threadIdx.x; e2 < E; e2 += kRankThreads) {
        int add = 0;
        for (int w = 0; w < kRankWarps; ++w) add += warp_counts[w * E + e2];
        before[e2] += add;
      }
      __syncthreads();  // warp_counts is zeroed next
    }
  }
  const int64_t row_end = min((b + 1) * kRankChunk, a.rows);
  for (int64_t r = b * kRankChunk + threadIdx.x; r < row_end; r += kRankThreads) {
    if (!row_is_kept(a, r)) a.row_to_slot[r] = -1;
  }
}

void launch_assign(cudaStream_t stream, const AssignArgs& a) {
  const int64_t n = std::max(a.slots, a.resort_keys ? int64_t{0} : a.rows);
  if (n == 0) return;
  assign_rows_kernel<<<static_cast<unsigned>(ceil_div(n, kThreads)), kThreads, 0, stream>>>(a);
  SG_CUDA_CHECK_LAUNCH("assign_rows_kernel");
}

void check_dispatch(const MoeDispatch& d, const char* op) {
  ref::check_moe_dispatch(d, op);
  SG_CHECK(d.E <= ref::kMoeMaxExperts, strprintf("%s: num_moe_experts=%lld exceeds %lld", op, (long long)d.E,
                                                 (long long)ref::kMoeMaxExperts));
}

}  // namespace

size_t moe_preprocess_workspace_bytes(const MoeDispatch& d) {
  check_dispatch(d, "moe_preprocess_workspace_bytes");
  const int64_t slots = d.T * d.k;
  size_t temp = sort_temp_bytes<uint32_t>(slots, expert_key_bits(d.E));
  if (sorts_by_prob(d)) temp = std::max(temp, sort_temp_bytes<uint64_t>(slots, 32 + expert_key_bits(d.E)));
  return fixed_scratch_bytes(d) + round_up(temp, kAlign);
}

void moe_preprocess(cudaStream_t stream, const MoePreprocessParams& p) {
  const MoeDispatch& d = p.dispatch;
  check_dispatch(d, "moe_preprocess");
  SG_CHECK(p.routing_map && p.expert_counts && p.kept_counts && p.expert_rows && p.expert_row_offsets &&
               p.slot_to_row && p.row_to_slot && p.workspace,
           "moe_preprocess: routing_map, expert_counts, workspace and every output map must be set");
  SG_CHECK(!sorts_by_prob(d) || p.probs, "moe_preprocess: moe_token_drop_policy probs needs the router's probs");
  SG_CHECK(p.workspace_bytes >= fixed_scratch_bytes(d) && detail::is_aligned(p.workspace, kAlign),
           strprintf("moe_preprocess: workspace of %zu bytes is too small or not 256-byte aligned; plan "
                     "moe_preprocess_workspace_bytes(dispatch) bytes",
                     p.workspace_bytes));
  const Scratch s = carve_scratch(d, p.workspace, p.workspace_bytes);
  const int64_t slots = d.T * d.k;
  const int E = static_cast<int>(d.E);

  dispatch_plan_kernel<<<1, kPlanThreads, 0, stream>>>(p, s.count_offsets, s.kept_offsets);
  SG_CUDA_CHECK_LAUNCH("dispatch_plan_kernel");

  AssignArgs a{.sorted_slots = s.sorted_slots,
               .routing_map = p.routing_map,
               .group_starts = s.count_offsets,
               .keep_limit = d.dropless() ? slots : d.capacity,
               .row_offsets = p.expert_row_offsets,
               .kept_counts = p.kept_counts,
               .slot_to_row = p.slot_to_row,
               .row_to_slot = p.row_to_slot,
               .slots = slots,
               .rows = d.permuted_rows(),
               .E = E};
  const unsigned key_grid = static_cast<unsigned>(std::max<int64_t>(1, ceil_div(slots, kThreads)));
  if (!sorts_by_prob(d)) {  // a stable counting sort by expert
    const int64_t chunks = rank_chunks(d);
    if (chunks > 0) {
      chunk_histogram_kernel<<<static_cast<unsigned>(chunks), kRankThreads, E * sizeof(int), stream>>>(
          p.routing_map, s.chunk_counts, slots, E);
      SG_CUDA_CHECK_LAUNCH("chunk_histogram_kernel");
    }
    const int64_t blocks = std::max(chunks, ceil_div(a.rows, kRankChunk));
    if (blocks > 0) {
      counting_sort_rows_kernel<<<static_cast<unsigned>(blocks), kRankThreads,
                                  (1 + kRankWarps) * E * sizeof(int), stream>>>(a, s.chunk_counts, chunks);
      SG_CUDA_CHECK_LAUNCH("counting_sort_rows_kernel");
    }
    return;
  }
  // Drop by probs: rank by (expert, prob descending), mark the kept slots, re-sort them to token order.
  if (slots > 0) {
    sort_keys_kernel<uint64_t><<<key_grid, kThreads, 0, stream>>>(
        p.routing_map, p.probs, static_cast<uint64_t*>(s.keys_in), s.slot_ids, slots, E);
    SG_CUDA_CHECK_LAUNCH("sort_keys_kernel");
    sort_pairs<uint64_t>(s, s.keys_in, s.keys_out, slots, 32 + expert_key_bits(d.E), stream);
  }
  AssignArgs mark = a;
  mark.resort_keys = static_cast<uint32_t*>(s.keys_in);  // the first sort's input is free again
  launch_assign(stream, mark);
  if (slots > 0) sort_pairs<uint32_t>(s, s.keys_in, s.keys_out, slots, expert_key_bits(d.E), stream);
  a.sorted_experts = static_cast<const uint32_t*>(s.keys_out);
  a.group_starts = s.kept_offsets;
  a.keep_limit = slots;  // the re-sort holds only kept slots below key E
  launch_assign(stream, a);
}

void moe_permute_forward(cudaStream_t stream, const MoePermuteParams& p) {
  moe_rows::launch_expand(
      stream, {.dst = p.permuted, .tokens = p.hidden, .row_to_slot = p.row_to_slot, .rows = p.rows, .k = p.k, .H = p.H},
      "moe_permute_forward");
}

void moe_permute_backward(cudaStream_t stream, const MoePermuteBackwardParams& p) {
  moe_rows::launch_gather(
      stream, {.dst = p.dhidden, .rows = p.dpermuted, .slot_to_row = p.slot_to_row, .T = p.T, .k = p.k, .H = p.H},
      "moe_permute_backward");
}

}  // namespace sg::kernels
