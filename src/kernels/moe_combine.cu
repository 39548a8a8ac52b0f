#include "kernels/moe_combine.h"

#include "kernels/moe_rows.cuh"

namespace sg::kernels {

void moe_combine_forward(cudaStream_t stream, const MoeCombineForwardParams& p) {
  SG_CHECK(p.probs, "moe_combine_forward: probs must be set");
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
  SG_CHECK(p.probs && p.expert_out, "moe_combine_backward: probs and expert_out must be set");
  SG_CHECK(p.T * p.k <= (int64_t{1} << 31) - 1, "moe_combine_backward: T * k must fit int32 slot ids");
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
