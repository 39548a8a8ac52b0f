#pragma once
// A GPU layer's optional linear bias (Megatron's add_qkv_bias and add_bias_linear): the forward adds it in the GEMM's
// bias epilogue (kernels::LinearForward with_bias: weight() is what its run() takes), the backward adds the column
// sums of the linear's output gradient into the bias's main gradient (kernels/column_sums: no atomics, the bits
// depend on the shape only). Every bias of the step shares one workspace for the sums' partial rows, sized for the
// widest: the backward runs them one after another on the step's stream.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/bf16.h"
#include "kernels/float_buffer.h"
#include "model/layer_context.h"
#include "model/param_builder.h"

namespace sg::model {

class LinearBias {
 public:
  // In the layer's plan_device: a bias of a linear with `cols` outputs over `rows` tokens, or none (!present).
  void plan_device(DevicePlanContext& ctx, bool present, int64_t rows, int64_t cols);
  // In the layer's bind: its parameter block (valid exactly when planned present).
  void bind(LayerBindContext& ctx, ParamRef bias);

  bool present() const { return present_; }
  const bf16* weight() const { return weight_; }  // null without a bias (the GEMM has no bias epilogue then)
  // grad += the column sums of dy [rows, cols] (packed); nothing without a bias.
  void backward(cudaStream_t stream, const bf16* dy) const;

 private:
  bool present_ = false;
  int64_t rows_ = 0, cols_ = 0;
  SharedBufferRef partials_ref_;
  size_t partials_bytes_ = 0;
  float* partials_ = nullptr;
  const bf16* weight_ = nullptr;
  kernels::FloatBuffer grad_;
};

}  // namespace sg::model
