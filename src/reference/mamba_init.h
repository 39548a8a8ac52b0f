#pragma once
// Initial values of the Mamba2 mixer's own parameters, as Megatron's MambaMixer draws them, computed as
// pure functions of (seed, stream, element) through Philox4x32-10 (core/philox.h), so the CPU and GPU
// backends start from identical values whatever the thread count or buffer layout:
//   A_log[h]   = log(U(A_init_range))                                        (A = -exp(A_log) in [-16, -1])
//   dt_bias[h] = softplus^-1(max(exp(U(log dt_min, log dt_max)), dt_init_floor))
//   D[h]       = 1
//   conv1d_weight [C, 4] = U(-conv_init, conv_init), or without conv_init PyTorch's Conv1d default
//                kaiming_uniform(a = sqrt(5)) = U(-1/sqrt(4), 1/sqrt(4))
//   conv1d_bias [C]      = U(-1/sqrt(4), 1/sqrt(4))                          (PyTorch's Conv1d default)
// (The gated norm weight is 1 and in_proj/out_proj are normal like every matrix: the model's init.)
// `stream` is the caller's per-tensor id (e.g. the tensor's index in the parameter layout); the Philox
// counter's last word is a tag of its own, so these draws never coincide with the model's normal draws.
#include <cstdint>

namespace sg::ref {

// Megatron's MambaMixer defaults.
struct MambaInitSpec {
  double A_init_min = 1.0, A_init_max = 16.0;  // A_init_range
  double dt_min = 0.001, dt_max = 0.1;
  double dt_init_floor = 1e-4;
  double conv_init = 0.0;                      // <= 0: no conv_init (PyTorch's default Conv1d init)
};

// Throws sg::Error naming the Megatron key, its value and the rule (0 < A_init_min <= A_init_max,
// 0 < dt_min <= dt_max, dt_init_floor >= 0).
void validate_mamba_init(const MambaInitSpec& spec);

// Uniform in [0, 1) with 53 random bits for (seed, stream, index).
double mamba_init_uniform(uint64_t seed, uint32_t stream, uint64_t index);

// softplus(x) = log(1 + e^x) and its inverse x = y + log(-expm1(-y)) (y > 0), in double.
double softplus(double x);
double inverse_softplus(double y);

void mamba_init_A_log(float* A_log, int64_t nheads, const MambaInitSpec& spec, uint64_t seed, uint32_t stream);
void mamba_init_dt_bias(float* dt_bias, int64_t nheads, const MambaInitSpec& spec, uint64_t seed, uint32_t stream);
void mamba_init_D(float* D, int64_t nheads);
// weight [channels, width] (width 4 for the mixer).
void mamba_init_conv_weight(float* weight, int64_t channels, int64_t width, const MambaInitSpec& spec, uint64_t seed,
                            uint32_t stream);
void mamba_init_conv_bias(float* bias, int64_t channels, int64_t width, uint64_t seed, uint32_t stream);

}  // namespace sg::ref
