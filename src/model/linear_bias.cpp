#include "model/linear_bias.h"

#include "core/error.h"
#include "core/strings.h"
#include "kernels/column_sums.h"

namespace sg::model {

void LinearBias::plan_device(DevicePlanContext& ctx, bool present, int64_t rows, int64_t cols) {
  present_ = present;
  rows_ = rows;
  cols_ = cols;
  if (!present_) return;
  partials_bytes_ = kernels::column_sums_scratch_bytes(rows, cols);
  partials_ref_ = ctx.workspace("workspace.linear_bias_partials", partials_bytes_);
}

void LinearBias::bind(LayerBindContext& ctx, ParamRef bias) {
  SG_CHECK(bias.valid() == present_, strprintf("LinearBias::bind: a bias planned %s was bound to %s",
                                               present_ ? "present" : "absent", bias.valid() ? "a block" : "none"));
  if (!present_) return;
  weight_ = ctx.weight(bias);
  grad_ = ctx.grad(bias);
  partials_ = ctx.get<float>(partials_ref_);
}

void LinearBias::backward(cudaStream_t stream, const bf16* dy) const {
  if (!present_) return;
  kernels::column_sums(stream, {.dst = grad_,
                                .scratch = partials_,
                                .scratch_bytes = partials_bytes_,
                                .in = dy,
                                .rows = rows_,
                                .cols = cols_});
}

}  // namespace sg::model
