#include "reference/rope.h"

#include <cmath>

#include "core/error.h"
#include "core/strings.h"

namespace sg::ref {

void check_rope_scaling(const char* op, const RopeScaling& sc, int64_t rotated_dims) {
  SG_CHECK(sc.valid(),
           strprintf("%s: bad RoPE scaling: Llama 3 (factor %g) needs 0 < low_freq_factor < high_freq_factor and "
                     "original_max_position_embeddings > 0 (got %g, %g, %g); LongRoPE (%d factors) at most %d "
                     "positive finite factors and not Llama 3 too; attention_factor (%g) positive and finite",
                     op, sc.factor, sc.low_freq_factor, sc.high_freq_factor, sc.original_max_position_embeddings,
                     static_cast<int>(sc.longrope_pairs), kMaxLongRopePairs, sc.attention_factor));
  SG_CHECK(sc.fits(rotated_dims),
           strprintf("%s: LongRoPE has %d factors but %lld dimensions are rotated (%lld pairs)", op,
                     static_cast<int>(sc.longrope_pairs), static_cast<long long>(rotated_dims),
                     static_cast<long long>(rotated_dims / 2)));
}

namespace {

// direction +1: forward rotation by +angle; -1: the inverse (the gradient, since the rotation is orthogonal).
template <class Real>
void rope_rotate(Real* x, int64_t T, int64_t S, int64_t num_heads, int64_t head_dim, int64_t row_stride, double base,
                 const RopeScaling& scaling, const int32_t* positions, int64_t rotary_dim, double direction) {
  SG_CHECK(head_dim > 0 && head_dim % 2 == 0, "rope: head_dim must be positive and even");
  SG_CHECK(rope_rotary_dim_valid(head_dim, rotary_dim),
           "rope: rotary_dim must be 0 (the whole head) or even and at most head_dim");
  const int64_t rotated = rope_rotated_dims(head_dim, rotary_dim);
  SG_CHECK(S > 0 || positions != nullptr, "rope: seq_length must be positive");
  check_rope_scaling("rope", scaling, rotated);
  const int64_t half = rotated / 2;
  for (int64_t t = 0; t < T; ++t) {
    const double pos = static_cast<double>(positions != nullptr ? positions[t] : t % S);
    for (int64_t i = 0; i < half; ++i) {
      // Angles in double, then cos/sin rounded to the working type: accurate even at large positions.
      const double freq = rope_inv_freq(i, rotated, base, scaling);
      const double angle = pos * freq;
      const Real c = static_cast<Real>(std::cos(angle) * scaling.attention_factor);
      const Real s = static_cast<Real>(direction * std::sin(angle) * scaling.attention_factor);
      for (int64_t h = 0; h < num_heads; ++h) {
        Real* head = x + t * row_stride + h * head_dim;
        const Real x1 = head[i], x2 = head[i + half];
        head[i] = x1 * c - x2 * s;
        head[i + half] = x2 * c + x1 * s;
      }
    }
  }
}

}  // namespace

template <class Real>
void rope_forward_generic(Real* x, int64_t T, int64_t S, int64_t num_heads, int64_t head_dim, int64_t row_stride,
                          double base, const RopeScaling& scaling, const int32_t* positions, int64_t rotary_dim) {
  rope_rotate<Real>(x, T, S, num_heads, head_dim, row_stride, base, scaling, positions, rotary_dim, 1.0);
}

template <class Real>
void rope_backward_generic(Real* dx, int64_t T, int64_t S, int64_t num_heads, int64_t head_dim, int64_t row_stride,
                           double base, const RopeScaling& scaling, const int32_t* positions, int64_t rotary_dim) {
  rope_rotate<Real>(dx, T, S, num_heads, head_dim, row_stride, base, scaling, positions, rotary_dim, -1.0);
}

#define SG_ROPE_INSTANTIATE(Real)                                                                       \
  template void rope_forward_generic<Real>(Real*, int64_t, int64_t, int64_t, int64_t, int64_t, double,  \
                                           const RopeScaling&, const int32_t*, int64_t);                \
  template void rope_backward_generic<Real>(Real*, int64_t, int64_t, int64_t, int64_t, int64_t, double, \
                                            const RopeScaling&, const int32_t*, int64_t);
SG_ROPE_INSTANTIATE(float)
SG_ROPE_INSTANTIATE(double)
#undef SG_ROPE_INSTANTIATE

void rope_cos_sin_table(float* cos_sin, int64_t positions, int64_t head_dim, double base, const RopeScaling& scaling) {
  SG_CHECK(positions > 0 && head_dim > 0 && head_dim % 2 == 0,
           "rope_cos_sin_table: positions must be positive and head_dim positive and even");
  check_rope_scaling("rope_cos_sin_table", scaling, head_dim);
  const int64_t half = head_dim / 2;
  for (int64_t pos = 0; pos < positions; ++pos) {
    float* row = cos_sin + pos * 2 * half;
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(pos) * rope_inv_freq(i, head_dim, base, scaling);
      row[i] = static_cast<float>(std::cos(angle) * scaling.attention_factor);
      row[half + i] = static_cast<float>(std::sin(angle) * scaling.attention_factor);
    }
  }
}

void rope_forward(float* x, int64_t T, int64_t S, int64_t num_heads, int64_t head_dim, int64_t row_stride, double base,
                  const RopeScaling& scaling, const int32_t* positions, int64_t rotary_dim) {
  rope_forward_generic<float>(x, T, S, num_heads, head_dim, row_stride, base, scaling, positions, rotary_dim);
}

void rope_backward(float* dx, int64_t T, int64_t S, int64_t num_heads, int64_t head_dim, int64_t row_stride,
                   double base, const RopeScaling& scaling, const int32_t* positions, int64_t rotary_dim) {
  rope_backward_generic<float>(dx, T, S, num_heads, head_dim, row_stride, base, scaling, positions, rotary_dim);
}

}  // namespace sg::ref
