#include "model/grouped_linear_bias.h"

#include "core/error.h"
#include "core/strings.h"
#include "kernels/grouped_linear_bias.h"

namespace sg::model {

void GroupedLinearBias::plan_device(DevicePlanContext& ctx, bool present, int num_groups, int64_t max_rows,
                                    int64_t cols) {
  present_ = present;
  num_groups_ = num_groups;
  max_rows_ = max_rows;
  cols_ = cols;
  if (!present_) return;
  partials_bytes_ = kernels::grouped_bias_scratch_bytes(max_rows, num_groups, cols);
  partials_ref_ = ctx.workspace("workspace.linear_bias_partials", partials_bytes_);
}

void GroupedLinearBias::bind(LayerBindContext& ctx, ParamRef bias) {
  SG_CHECK(bias.valid() == present_, strprintf("GroupedLinearBias::bind: a bias planned %s was bound to %s",
                                               present_ ? "present" : "absent", bias.valid() ? "a block" : "none"));
  if (!present_) return;
  weight_ = ctx.weight(bias);
  grad_ = ctx.grad(bias);
  partials_ = ctx.get<float>(partials_ref_);
}

void GroupedLinearBias::forward(cudaStream_t stream, bf16* y, const int32_t* counts, const int32_t* offsets) const {
  if (!present_) return;
  kernels::grouped_bias_forward(stream, {.y = y,
                                         .bias = weight_,
                                         .counts = counts,
                                         .offsets = offsets,
                                         .num_groups = num_groups_,
                                         .max_rows = max_rows_,
                                         .cols = cols_});
}

void GroupedLinearBias::backward(cudaStream_t stream, const bf16* dy, const int32_t* counts,
                                 const int32_t* offsets) const {
  if (!present_) return;
  kernels::grouped_bias_backward(stream, {.dst = grad_,
                                          .scratch = partials_,
                                          .scratch_bytes = partials_bytes_,
                                          .dy = dy,
                                          .counts = counts,
                                          .offsets = offsets,
                                          .num_groups = num_groups_,
                                          .max_rows = max_rows_,
                                          .cols = cols_});
}

}  // namespace sg::model
