#include "reference/dropout.h"

#include "core/error.h"
#include "core/strings.h"

namespace sg::ref {
namespace {

void dropout_apply(float* out, const float* in, int64_t n, float p, rng::RngState state, uint32_t site) {
  SG_CHECK(p >= 0.0f && p < 1.0f, strprintf("dropout: p = %g must be in [0, 1)", static_cast<double>(p)));
  if (p == 0.0f) {
    for (int64_t i = 0; i < n; ++i) out[i] = in[i];
    return;
  }
  const float scale = 1.0f / (1.0f - p);
  for (int64_t i = 0; i < n; ++i) {
    const float u = rng::philox_uniform(state.seed, state.offset, site, static_cast<uint64_t>(i));
    out[i] = u >= p ? in[i] * scale : 0.0f;
  }
}

}  // namespace

void dropout_forward(float* out, const float* in, int64_t n, float p, rng::RngState state, uint32_t site) {
  dropout_apply(out, in, n, p, state, site);
}

void dropout_backward(float* din, const float* dout, int64_t n, float p, rng::RngState state, uint32_t site) {
  dropout_apply(din, dout, n, p, state, site);
}

}  // namespace sg::ref
