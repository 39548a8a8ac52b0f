#pragma once
// CPU fp32 twin of src/kernels/moe_permute: the token dispatch of a Mixture-of-Experts layer.
//
// A slot s = t * k + j is token t's j-th routing choice (routing_map[s], probs[s], as the router writes
// them). The permuted buffer groups the kept slots by expert: expert e's rows start at
// expert_row_offsets[e], in token order (Megatron's permute: a stable sort of the slots by expert).
//   dropless:                 every slot is kept; the buffer has exactly T * k rows.
//   token drop (capacity C):  an expert keeps at most C of its slots, by policy
//                               probs:    the C largest probs (ties: the lower token),
//                               position: the first C tokens;
//                             the kept rows are packed; rows past the last expert are unused.
//   pad to capacity:          expert e owns rows [e C, (e + 1) C); rows past its kept slots are padding.
// Unused and padding rows map to slot -1 and hold zeros after the permute.
#include <cstdint>
#include <vector>

namespace sg::ref {

enum class MoeDropPolicy { probs, position };  // moe_token_drop_policy

// The plan-time description of one dispatch.
struct MoeDispatch {
  int64_t T = 0, E = 0, k = 1;
  int64_t capacity = 0;  // tokens kept per expert; 0 = dropless (moe_expert_capacity_factor unset)
  MoeDropPolicy drop_policy = MoeDropPolicy::probs;
  bool pad_to_capacity = false;  // moe_pad_expert_input_to_capacity (needs capacity > 0)

  constexpr bool dropless() const { return capacity == 0; }
  // Rows of the permuted buffer (a plan-time constant): E * capacity when padded, else T * k.
  constexpr int64_t permuted_rows() const { return pad_to_capacity ? E * capacity : T * k; }
};

// Megatron's get_capacity for T tokens routed to k experts each: ceil((T k / E) * capacity_factor), in double
// (it may exceed every integer type: a factor of 1e9 or 1e300 as "never drop").
double moe_expert_capacity_exact(int64_t T, int64_t k, int64_t E, double capacity_factor);
// The capacity of a dispatch, the one both the GPU layer and the CPU twin use (model/moe_shapes):
//   unpadded:  at most T. An expert receives at most T slots (a token's k experts are distinct), so a
//              capacity >= T keeps every slot: clamping it to T changes no result and keeps it in range;
//   padded:    the exact capacity, the rows of every expert's padded group (Megatron's shape), saturated at
//              2^62 so it converts; check_moe_dispatch (and validation) refuse E * capacity >= 2^31.
int64_t moe_expert_capacity(int64_t T, int64_t k, int64_t E, double capacity_factor, bool pad_to_capacity);

// Throws sg::Error naming the bad field and its value.
void check_moe_dispatch(const MoeDispatch& d, const char* op);

struct MoePermutation {
  std::vector<int32_t> kept_counts;         // [E] slots each expert keeps (<= capacity)
  std::vector<int32_t> expert_rows;         // [E] rows of each expert's group: kept, or capacity when padded
  std::vector<int32_t> expert_row_offsets;  // [E + 1] exclusive scan of expert_rows
  std::vector<int32_t> slot_to_row;         // [T * k] permuted row of each slot, -1 when dropped
  std::vector<int32_t> row_to_slot;         // [permuted_rows] slot of each row, -1 for padding / unused
};

// routing_map, probs [T, k] from the router (probs are read only by the probs drop policy).
MoePermutation moe_preprocess(const int32_t* routing_map, const float* probs, const MoeDispatch& d);

// permuted [rows, H] OVERWRITTEN: row r = hidden[row_to_slot[r] / k], zeros where row_to_slot is -1.
void moe_permute_forward(float* permuted, const float* hidden, const int32_t* row_to_slot, int64_t rows, int64_t k,
                         int64_t H);

// dhidden [T, H] OVERWRITTEN: token t = sum over its kept slots, in slot order, of dpermuted[row].
void moe_permute_backward(float* dhidden, const float* dpermuted, const int32_t* slot_to_row, int64_t T, int64_t k,
                          int64_t H);

}  // namespace sg::ref
