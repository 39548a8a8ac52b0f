// model/decode_linear.h: which path a decoding layer's linear takes.
#include "model/decode_linear.h"

#include <string>

#include "core/error.h"
#include "core/strings.h"
#include "kernels/decode_linear.h"
#include "model/mlp_activation.h"

namespace sg::model {

namespace {

kernels::DecodeLinearEpilogue epilogue_of(const std::optional<MlpActivation>& activation) {
  if (!activation) return kernels::DecodeLinearEpilogue::kNone;
  return *activation == MlpActivation::swiglu ? kernels::DecodeLinearEpilogue::kSwiglu
                                              : kernels::DecodeLinearEpilogue::kSquaredRelu;
}

}  // namespace

DecodeLinear::DecodeLinear(int64_t K, int64_t N, std::optional<MlpActivation> activation,
                           std::optional<DecodeGemv> gemv, bool with_bias)
    : K_(K),
      N_(N),
      out_width_(kernels::decode_linear_out_width(epilogue_of(activation), N)),
      activation_(activation),
      gemv_(decode_gemv_mode(gemv)),
      with_bias_(with_bias) {
  SG_CHECK(
      !activation || activation_input_width(*activation, out_width_) == N,
      strprintf("DecodeLinear: %lld weight rows do not make the activation's input width", static_cast<long long>(N)));
}

bool DecodeLinear::runs_gemm(int64_t T) const {
  return T > decode_gemv_max_rows(gemv_) || !kernels::decode_linear_takes(T, K_, N_, epilogue_of(activation_));
}

void DecodeLinear::check_bias(const bf16* bias) const {
  SG_CHECK((bias != nullptr) == with_bias_,
           strprintf("DecodeLinear: a linear %s a bias was given %s", with_bias_ ? "with" : "without",
                     bias != nullptr ? "one" : "none"));
}

kernels::DecodeLinearParams DecodeLinear::kernel_params(int64_t T, bf16* y, const bf16* x, const bf16* w,
                                                        const bf16* bias) const {
  check_bias(bias);
  // More rows than the fp32 kernel's only under tensor_cores (runs_gemm).
  return {.y = y,
          .x = x,
          .w = w,
          .bias = bias,
          .T = T,
          .K = K_,
          .N = N_,
          .epilogue = epilogue_of(activation_),
          .tensor_cores = T > kDecodeGemvMaxRows};
}

void DecodeLinear::prepare(kernels::Blas& blas, int64_t T) const {
  if (T > 0 && runs_gemm(T)) kernels::LinearForward(blas, T, K_, N_, with_bias_);
}

void DecodeLinear::run(cudaStream_t stream, kernels::Blas& blas, int64_t T, bf16* y, const bf16* x, const bf16* w,
                       bf16* pre_activation, const bf16* bias) const {
  check_bias(bias);
  if (T == 0) return;
  if (!runs_gemm(T)) {
    kernels::decode_linear_forward(stream, kernel_params(T, y, x, w, bias));
    return;
  }
  if (!activation_) {
    kernels::LinearForward(blas, T, K_, N_, with_bias_).run(stream, y, x, w, bias);
    return;
  }
  SG_CHECK(pre_activation != nullptr,
           "DecodeLinear::run: cuBLASLt's path of a linear with an activation needs the pre_activation buffer");
  kernels::LinearForward(blas, T, K_, N_, with_bias_).run(stream, pre_activation, x, w, bias);
  activation_forward(stream, {.activation = *activation_, .out = y, .in = pre_activation, .T = T, .F = out_width_});
}

}  // namespace sg::model
