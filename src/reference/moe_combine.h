#pragma once
// CPU fp32 twin of src/kernels/moe_combine: the unpermute of a Mixture-of-Experts layer, weighting each
// expert output row by its routing prob and summing a token's kept slots in slot order.
// Maps as in reference/moe_permute.h (slot s = t * k + j; slot_to_row -1 = dropped, row_to_slot -1 = padding).
#include <cstdint>

namespace sg::ref {

// out [T, H] OVERWRITTEN: out[t] = sum_j probs[t k + j] * expert_out[slot_to_row[t k + j]] over the kept
// slots j = 0..k-1 in order (zeros when every slot of t was dropped).
template <class Real>
void moe_combine_forward(Real* out, const Real* expert_out, const Real* probs, const int32_t* slot_to_row, int64_t T,
                         int64_t k, int64_t H);

// dexpert_out [rows, H] OVERWRITTEN: row r of slot s = probs[s] * dout[s / k]; zeros for padding rows.
// dprobs [T, k] OVERWRITTEN: <expert_out[row], dout[t]> for a kept slot, 0 for a dropped one.
template <class Real>
void moe_combine_backward(Real* dexpert_out, Real* dprobs, const Real* dout, const Real* expert_out,
                          const Real* probs, const int32_t* slot_to_row, const int32_t* row_to_slot, int64_t T,
                          int64_t k, int64_t H, int64_t rows);

}  // namespace sg::ref
