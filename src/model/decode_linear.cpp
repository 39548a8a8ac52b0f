// model/decode_linear.h: which path a decoding layer's linear takes, and the STEPGRAPH_DECODE_GEMV switch.
#include "model/decode_linear.h"

#include <cstdlib>
#include <string>

#include "core/error.h"
#include "core/strings.h"
#include "kernels/decode_linear.h"
#include "model/mlp_activation.h"

namespace sg::model {

bool decode_gemv_setting(const char* v) {
  if (v == nullptr || std::string(v) == "1") return true;
  if (std::string(v) == "0") return false;
  throw Error(
      strprintf("%s='%s': must be 1 (a decoding step's linears through the matrix-vector kernel; the "
                "default) or 0 (cuBLASLt for every call)",
                kDecodeGemvVariable, v));
}

namespace {

kernels::DecodeLinearEpilogue epilogue_of(const std::optional<MlpActivation>& activation) {
  if (!activation) return kernels::DecodeLinearEpilogue::kNone;
  return *activation == MlpActivation::swiglu ? kernels::DecodeLinearEpilogue::kSwiglu
                                              : kernels::DecodeLinearEpilogue::kSquaredRelu;
}

}  // namespace

bool decode_gemv_enabled() {
  static const bool enabled = decode_gemv_setting(std::getenv(kDecodeGemvVariable));
  return enabled;
}

DecodeLinear::DecodeLinear(int64_t K, int64_t N, std::optional<MlpActivation> activation)
    : K_(K), N_(N), out_width_(kernels::decode_linear_out_width(epilogue_of(activation), N)), activation_(activation) {
  SG_CHECK(
      !activation || activation_input_width(*activation, out_width_) == N,
      strprintf("DecodeLinear: %lld weight rows do not make the activation's input width", static_cast<long long>(N)));
}

bool DecodeLinear::runs_gemm(int64_t T) const {
  return !decode_gemv_enabled() || T > kDecodeGemvMaxRows ||
         !kernels::decode_linear_takes(T, K_, N_, epilogue_of(activation_));
}

void DecodeLinear::prepare(kernels::Blas& blas, int64_t T) const {
  if (T > 0 && runs_gemm(T)) kernels::LinearForward(blas, T, K_, N_);
}

void DecodeLinear::run(cudaStream_t stream, kernels::Blas& blas, int64_t T, bf16* y, const bf16* x, const bf16* w,
                       bf16* pre_activation) const {
  if (T == 0) return;
  if (!runs_gemm(T)) {
    kernels::decode_linear_forward(
        stream, {.y = y, .x = x, .w = w, .T = T, .K = K_, .N = N_, .epilogue = epilogue_of(activation_)});
    return;
  }
  if (!activation_) {
    kernels::LinearForward(blas, T, K_, N_).run(stream, y, x, w);
    return;
  }
  SG_CHECK(pre_activation != nullptr,
           "DecodeLinear::run: cuBLASLt's path of a linear with an activation needs the pre_activation buffer");
  kernels::LinearForward(blas, T, K_, N_).run(stream, pre_activation, x, w);
  activation_forward(stream, {.activation = *activation_, .out = y, .in = pre_activation, .T = T, .F = out_width_});
}

}  // namespace sg::model
