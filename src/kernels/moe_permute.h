#pragma once
// Token dispatch of a Mixture-of-Experts layer on the device: per-expert offsets, a deterministic
// permutation (stable by token within each expert, as Megatron's permute) with its inverse, token drop
// by capacity, and the permute of hidden rows into expert order with its backward.
// Layout and semantics: reference/moe_permute.h (the CPU twin).
//
// moe_preprocess, all on the device (no host sync, no allocation; sizes are plan-time constants):
//   1. one block: kept = min(count, capacity), group rows, exclusive scans (cub::BlockScan) -> offsets
//   2. sort keys: expert id (dropless, drop by position) or (expert, prob descending) (drop by probs)
//   3. cub::DeviceRadixSort::SortPairs of the slot ids by key (stable: equal keys keep token order)
//   4. rank within the expert -> kept or dropped, row, slot_to_row / row_to_slot
//   drop by probs: 4 only marks the kept slots; a second stable sort by (kept ? expert : E) puts the
//   kept slots back in token order, and 4 runs again on it to assign rows.
//   dropless and drop by position: 2-4 are one stable counting sort instead (per-chunk expert
//   histograms, then each slot's rank within its expert from the earlier chunks, warps and lanes):
//   the same permutation in two small launches.
// The permuted buffer's group sizes (expert_rows) and offsets are what the grouped GEMM reads.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/bf16.h"
#include "reference/moe_permute.h"

namespace sg::kernels {

using ref::MoeDispatch;
using ref::MoeDropPolicy;

// Scratch of moe_preprocess (sort keys, values, offsets, CUB's temp storage). Plan time only: asks CUB
// for its temp-storage size, which needs the CUDA device (no device work, no allocation).
size_t moe_preprocess_workspace_bytes(const MoeDispatch& dispatch);

struct MoePreprocessParams {
  const int32_t* routing_map = nullptr;    // [T, k] from moe_router_forward
  const float* probs = nullptr;            // [T, k] (read by the probs drop policy)
  const int32_t* expert_counts = nullptr;  // [E] moe_count_experts of routing_map (group_tokens = T)
  MoeDispatch dispatch;
  void* workspace = nullptr;  // moe_preprocess_workspace_bytes(dispatch), 256-byte aligned
  size_t workspace_bytes = 0;
  // OUT (all overwritten)
  int32_t* kept_counts = nullptr;         // [E]
  int32_t* expert_rows = nullptr;         // [E] rows of each expert's group (grouped-GEMM problem sizes)
  int32_t* expert_row_offsets = nullptr;  // [E + 1] exclusive scan of expert_rows
  int32_t* slot_to_row = nullptr;         // [T * k] -1 when dropped
  int32_t* row_to_slot = nullptr;         // [permuted_rows] -1 for padding / unused rows
  // Optional [E]: += kept_counts (the step's counts for moe_expert_bias_update, which zeroes them).
  int32_t* step_counts = nullptr;
};
void moe_preprocess(cudaStream_t stream, const MoePreprocessParams& p);

struct MoePermuteParams {
  bf16* permuted = nullptr;             // [rows, H] OVERWRITTEN: hidden[slot / k], zeros for padding
  const bf16* hidden = nullptr;         // [T, H]
  const int32_t* row_to_slot = nullptr; // [rows]
  int64_t rows = 0, k = 1, H = 0;
};
// One block per row.
void moe_permute_forward(cudaStream_t stream, const MoePermuteParams& p);

struct MoePermuteBackwardParams {
  bf16* dhidden = nullptr;              // [T, H] OVERWRITTEN: sum of the kept slots' rows, slot order
  const bf16* dpermuted = nullptr;      // [rows, H]
  const int32_t* slot_to_row = nullptr; // [T * k]
  int64_t T = 0, k = 1, H = 0;
};
// One block per token, fp32 sums in slot order.
void moe_permute_backward(cudaStream_t stream, const MoePermuteBackwardParams& p);

}  // namespace sg::kernels
