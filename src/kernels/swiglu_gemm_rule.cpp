// kernels/swiglu_gemm_rule.h: the rule and its environment overrides.
#include "kernels/swiglu_gemm_rule.h"

#include <climits>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/device.h"

namespace sg::kernels {
namespace {

enum class Policy { kNever, kWherePays, kAlways };

Policy policy_from_environment() {
  const char* variable = kSwiGluBackwardGemmVariable;
  const char* v = std::getenv(variable);
  if (v == nullptr || std::string(v) == "1") return Policy::kWherePays;
  if (std::string(v) == "0") return Policy::kNever;
  if (std::string(v) == "always") return Policy::kAlways;
  throw Error(std::string(variable) + "='" + v +
              "': must be 1 (the fused SwiGLU GEMM where it pays; the default), 0 (never) or always");
}

}  // namespace

bool swiglu_gemm_shape_supported(int64_t T, int64_t H, int64_t F) {
  return T > 0 && H > 0 && F > 0 && H % 8 == 0 && F % 8 == 0 && T <= INT32_MAX && H <= INT32_MAX &&
         F <= INT32_MAX / 2;
}

std::string swiglu_gemm_describe(int64_t T, int64_t H, int64_t F) {
  return strprintf("SwiGLU backward GEMM (T=%lld, H=%lld, F=%lld)", static_cast<long long>(T),
                   static_cast<long long>(H), static_cast<long long>(F));
}

int swiglu_gemm_check_plan(const std::string& what, int64_t T, int64_t H, int64_t F) {
  SG_CHECK(swiglu_gemm_shape_supported(T, H, F), what + ": needs T, H, F > 0 and H, F multiples of 8 (16-byte rows)");
  cuda::require_device(what.c_str());
  const cuda::DeviceProperties& props = cuda::device_properties();
  SG_CHECK(props.compute_capability() == 90,
           what + ": built for sm_90a (Hopper: H100/H200) only, but the GPU is " + props.summary());
  return props.sm_count;
}

bool swiglu_backward_gemm_preferred(int64_t T, int64_t H, int64_t F) {
  const Policy policy = policy_from_environment();
  if (policy == Policy::kNever || !swiglu_gemm_shape_supported(T, H, F)) return false;
  if (cuda::device_count() == 0 || cuda::device_properties().compute_capability() != 90) return false;
  if (policy == Policy::kAlways) return true;
  const int64_t tiles = (T + 127) / 128 * ((F + 127) / 128);
  return H <= 1024 && tiles >= cuda::device_properties().sm_count;
}

}  // namespace sg::kernels
