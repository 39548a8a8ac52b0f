// model/decode_gemv.h: the STEPGRAPH_DECODE_GEMV switch.
#include "model/decode_gemv.h"

#include <cstdlib>
#include <string>

#include "core/error.h"
#include "core/strings.h"
#include "kernels/decode_linear.h"

namespace sg::model {

const char* decode_gemv_value(DecodeGemv mode) {
  switch (mode) {
    case DecodeGemv::off: return "0";
    case DecodeGemv::fp32: return "1";
    case DecodeGemv::tensor_cores: return "tensor_cores";
  }
  return "?";
}

DecodeGemv decode_gemv_setting(const char* v) {
  if (v == nullptr) return DecodeGemv::tensor_cores;
  for (const DecodeGemv mode : {DecodeGemv::off, DecodeGemv::fp32, DecodeGemv::tensor_cores}) {
    if (std::string(v) == decode_gemv_value(mode)) return mode;
  }
  throw Error(
      strprintf("%s='%s': must be tensor_cores (the default: a decoding step's linears of up to %lld rows "
                "through the matrix-vector kernel's fp32 math, and of up to %lld rows through its tensor-core "
                "math), 1 (the fp32 math alone, cuBLASLt above) or 0 (cuBLASLt for every call)",
                kDecodeGemvVariable, v, static_cast<long long>(kDecodeGemvMaxRows),
                static_cast<long long>(kernels::kDecodeLinearMaxRows)));
}

DecodeGemv decode_gemv_mode() {
  static const DecodeGemv mode = decode_gemv_setting(std::getenv(kDecodeGemvVariable));
  return mode;
}

DecodeGemv decode_gemv_mode(std::optional<DecodeGemv> mode) {
  return mode ? *mode : decode_gemv_mode();
}

int64_t decode_gemv_max_rows(DecodeGemv mode) {
  switch (mode) {
    case DecodeGemv::off: return 0;
    case DecodeGemv::fp32: return kDecodeGemvMaxRows;
    case DecodeGemv::tensor_cores: return kernels::kDecodeLinearMaxRows;
  }
  return 0;
}

std::string describe_decode_gemv(DecodeGemv mode) {
  const std::string setting = strprintf("(%s=%s)", kDecodeGemvVariable, decode_gemv_value(mode));
  switch (mode) {
    case DecodeGemv::off: return "linears by cuBLASLt " + setting;
    case DecodeGemv::fp32:
      return strprintf("linears of up to %lld rows by the matrix-vector kernel ",
                       static_cast<long long>(kDecodeGemvMaxRows)) +
             setting;
    case DecodeGemv::tensor_cores:
      return strprintf("linears of up to %lld rows by the matrix-vector kernel, past %lld on tensor cores ",
                       static_cast<long long>(kernels::kDecodeLinearMaxRows),
                       static_cast<long long>(kDecodeGemvMaxRows)) +
             setting;
  }
  return setting;
}

}  // namespace sg::model
