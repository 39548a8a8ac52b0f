#pragma once
// A GPU MoE layer's optional per-expert linear biases (Megatron's add_bias_linear on the experts): the forward adds
// each expert's bias to its rows of the grouped GEMM's output, the backward adds each expert's column sums of the
// output gradient into the bias's main gradient (kernels/grouped_linear_bias.h: no atomics, the bits depend on the
// counts and the data only). The sums' partial rows use the workspace the dense biases share (model/linear_bias.h):
// the backward runs every bias's sums one after another on the step's stream.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/bf16.h"
#include "kernels/float_buffer.h"
#include "model/layer_context.h"
#include "model/param_builder.h"

namespace sg::model {

class GroupedLinearBias {
 public:
  // In the layer's plan_device: the biases [num_groups, cols] of a grouped linear over `max_rows` permuted rows, or
  // none (!present).
  void plan_device(DevicePlanContext& ctx, bool present, int num_groups, int64_t max_rows, int64_t cols);
  // In the layer's bind: its parameter block (valid exactly when planned present).
  void bind(LayerBindContext& ctx, ParamRef bias);

  bool present() const { return present_; }
  // y's rows of expert g += bias[g] (rows in device counts / offsets, as the grouped GEMM reads them); nothing
  // without a bias.
  void forward(cudaStream_t stream, bf16* y, const int32_t* counts, const int32_t* offsets) const;
  // grad[g] += the column sums of dy over expert g's rows; nothing without a bias.
  void backward(cudaStream_t stream, const bf16* dy, const int32_t* counts, const int32_t* offsets) const;

 private:
  bool present_ = false;
  int num_groups_ = 0;
  int64_t max_rows_ = 0, cols_ = 0;
  SharedBufferRef partials_ref_;
  size_t partials_bytes_ = 0;
  float* partials_ = nullptr;
  const bf16* weight_ = nullptr;
  kernels::FloatBuffer grad_;
};

}  // namespace sg::model
