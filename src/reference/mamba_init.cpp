#include "reference/mamba_init.h"

#include <cmath>

#include "core/error.h"
#include "core/philox.h"
#include "core/strings.h"

namespace sg::ref {
namespace {

// Counter word 3 of every Mamba init draw (the model's normal draws use another tag).
constexpr uint32_t kMambaInitTag = 0x3a3bu;

// U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = width (one input channel per depthwise filter): both
// PyTorch's Conv1d bias default and its weight default kaiming_uniform(a = sqrt(5)), whose bound
// gain * sqrt(3 / fan_in) with gain = sqrt(2 / (1 + 5)) is the same number.
double default_conv_bound(int64_t width) { return 1.0 / std::sqrt(static_cast<double>(width)); }

void fill_uniform(float* out, int64_t n, double lo, double hi, uint64_t seed, uint32_t stream) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = static_cast<float>(lo + (hi - lo) * mamba_init_uniform(seed, stream, static_cast<uint64_t>(i)));
  }
}

}  // namespace

void validate_mamba_init(const MambaInitSpec& s) {
  SG_CHECK(s.A_init_min > 0.0 && s.A_init_max >= s.A_init_min,
           strprintf("A_init_range = [%g, %g]: need 0 < A_init_range[0] <= A_init_range[1] (Megatron's default "
                     "is [1, 16])",
                     s.A_init_min, s.A_init_max));
  SG_CHECK(s.dt_min > 0.0 && s.dt_max >= s.dt_min,
           strprintf("dt_min = %g, dt_max = %g: need 0 < dt_min <= dt_max (Megatron's defaults are 0.001, 0.1)",
                     s.dt_min, s.dt_max));
  SG_CHECK(s.dt_init_floor >= 0.0,
           strprintf("dt_init_floor = %g: need >= 0 (Megatron's default is 1e-4)", s.dt_init_floor));
}

double mamba_init_uniform(uint64_t seed, uint32_t stream, uint64_t index) {
  const rng::Philox4x32Counter r = rng::philox4x32_10(
      rng::Philox4x32Counter{{static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), stream, kMambaInitTag}},
      rng::Philox4x32Key{{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}});
  const uint64_t bits = (static_cast<uint64_t>(r.v[0]) << 32 | r.v[1]) >> 11;
  return static_cast<double>(bits) * 0x1.0p-53;
}

double softplus(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }

double inverse_softplus(double y) { return y + std::log(-std::expm1(-y)); }

void mamba_init_A_log(float* A_log, int64_t nheads, const MambaInitSpec& spec, uint64_t seed, uint32_t stream) {
  validate_mamba_init(spec);
  for (int64_t h = 0; h < nheads; ++h) {
    const double u = mamba_init_uniform(seed, stream, static_cast<uint64_t>(h));
    A_log[h] = static_cast<float>(std::log(spec.A_init_min + (spec.A_init_max - spec.A_init_min) * u));
  }
}

void mamba_init_dt_bias(float* dt_bias, int64_t nheads, const MambaInitSpec& spec, uint64_t seed, uint32_t stream) {
  validate_mamba_init(spec);
  const double log_min = std::log(spec.dt_min), log_max = std::log(spec.dt_max);
  for (int64_t h = 0; h < nheads; ++h) {
    const double u = mamba_init_uniform(seed, stream, static_cast<uint64_t>(h));
    const double dt = std::fmax(std::exp(log_min + (log_max - log_min) * u), spec.dt_init_floor);
    dt_bias[h] = static_cast<float>(inverse_softplus(dt));
  }
}

void mamba_init_D(float* D, int64_t nheads) {
  for (int64_t h = 0; h < nheads; ++h) D[h] = 1.0f;
}

void mamba_init_conv_weight(float* weight, int64_t channels, int64_t width, const MambaInitSpec& spec, uint64_t seed,
                            uint32_t stream) {
  SG_CHECK(width > 0, strprintf("mamba_init_conv_weight: width %lld must be positive", static_cast<long long>(width)));
  const double bound = spec.conv_init > 0.0 ? spec.conv_init : default_conv_bound(width);
  fill_uniform(weight, channels * width, -bound, bound, seed, stream);
}

void mamba_init_conv_bias(float* bias, int64_t channels, int64_t width, uint64_t seed, uint32_t stream) {
  SG_CHECK(width > 0, strprintf("mamba_init_conv_bias: width %lld must be positive", static_cast<long long>(width)));
  const double bound = default_conv_bound(width);
  fill_uniform(bias, channels, -bound, bound, seed, stream);
}

}  // namespace sg::ref
