#pragma once
// Which rows of a decoding step's linears go through the project's matrix-vector kernel (kernels/decode_linear.h)
// instead of cuBLASLt: model/decode_linear.h applies it. The switch is STEPGRAPH_DECODE_GEMV, read once per
// process:
//   tensor_cores     (the default) calls of up to kDecodeGemvMaxRows rows through the kernel's fp32
//                    multiply-adds, and of kDecodeGemvMaxRows + 1 to kernels::kDecodeLinearMaxRows rows through its
//                    tensor-core math instead of cuBLASLt (faster at 8 rows on every model measured:
//                    docs/performance.md, thirty-ninth session)
//   1                the fp32 multiply-adds for calls of up to kDecodeGemvMaxRows rows, cuBLASLt above
//   0                cuBLASLt and the separate activation, RoPE and append kernels for every call (the A/B of
//                    docs/performance.md)
// Any other value stops the run with an error naming the variable. A decoder can also be given a mode
// (DecodeSpec::gemv), as the GPU tests do for each.
#include <cstdint>
#include <optional>
#include <string>

namespace sg::model {

inline constexpr const char* kDecodeGemvVariable = "STEPGRAPH_DECODE_GEMV";
// The most rows the decoder gives the kernel's fp32 math. At 8 rows its multiply-adds (8 x 2 x 8 for each pair of
// 16-byte weight chunks) keep the SMs issuing, and cuBLASLt's tensor-core GEMM was faster on the larger layers
// (docs/performance.md, thirty-sixth session); the fp32 math beat cuBLASLt at 2 and 4 rows on every model
// measured (thirty-ninth session).
inline constexpr int64_t kDecodeGemvMaxRows = 4;

enum class DecodeGemv {
  off,           // "0"
  fp32,          // "1"
  tensor_cores,  // "tensor_cores", the default
};

// The variable's value that selects `mode`: "0", "1" or "tensor_cores".
const char* decode_gemv_value(DecodeGemv mode);
// The variable's value (null: unset); throws sg::Error naming the variable and its values for any other value.
DecodeGemv decode_gemv_setting(const char* value);
DecodeGemv decode_gemv_mode();  // the process's setting, read once
// `mode` where one is given, else the process's setting.
DecodeGemv decode_gemv_mode(std::optional<DecodeGemv> mode);
// The most rows a call gives the kernel under `mode` (0: none).
int64_t decode_gemv_max_rows(DecodeGemv mode);
// What `mode` does, with the variable's value, for the decoder's description ("linears of up to 8 rows by the
// matrix-vector kernel, past 4 on tensor cores (STEPGRAPH_DECODE_GEMV=tensor_cores)").
std::string describe_decode_gemv(DecodeGemv mode);

}  // namespace sg::model
