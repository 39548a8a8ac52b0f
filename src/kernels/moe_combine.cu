#include "kernels/moe_combine.h"

#include "core/error.h"
#include "core/strings.h"
#include "kernels/moe_rows.cuh"

namespace sg::kernels {

void moe_combine_forward(cudaStream_t stream, const MoeCombineForwardParams& p) {
  SG_CHECK(p.T >= 0 && p.k >= 1 && p.H > 0,
           strprintf("moe_combine_forward: bad shape T=%lld k=%lld H=%lld", (long long)p.T, (long long)p.k,
                     (long long)p.H));
  SG_CHECK(p.out && p.expert_out && p.probs && p.slot_to_row, "moe_combine_forward: null pointer in params");
  moe_rows::launch_gather(stream,
                          {.dst = p.out,
                           .rows = p.expert_out,
                           .slot_to_row = p.slot_to_row,
                           .weights = p.probs,
                           .T = p.T,
                           .k = p.k,
                           .H = p.H},
                          "moe_combine_forward");
}

void moe_combine_backward(cudaStream_t stream, const MoeCombineBackwardParams& p) {
  SG_CHECK(p.T >= 0 && p.k >= 1 && p.H > 0 && p.rows >= 0,
           strprintf("moe_combine_backward: bad shape T=%lld k=%lld H=%lld rows=%lld", (long long)p.T,
                     (long long)p.k, (long long)p.H, (long long)p.rows));
  SG_CHECK(p.dexpert_out && p.dprobs && p.dout && p.expert_out && p.probs && p.slot_to_row && p.row_to_slot,
           "moe_combine_backward: null pointer in params");
  moe_rows::launch_expand(stream,
                          {.dst = p.dexpert_out,
                           .tokens = p.dout,
                           .row_to_slot = p.row_to_slot,
                           .weights = p.probs,
                           .other = p.expert_out,
                           .dots = p.dprobs,
                           .slot_to_row = p.slot_to_row,
                           .slots = p.T * p.k,
                           .rows = p.rows,
                           .k = p.k,
                           .H = p.H},
                          "moe_combine_backward");
}

}  // namespace sg::kernels
