#pragma once
// Kernels and launch sequences of the shared expert's sigmoid gate (kernels/moe_shared_gate.h), written over a
// launch policy so the CPU emulator of the tests runs the same code as the launchers (detail::CudaLaunch).
#include <cmath>
#include <cstdint>
#include <initializer_list>

#include "core/error.h"
#include "core/strings.h"
#include "kernels/common.cuh"
#include "kernels/launch_checks.h"
#include "kernels/moe_shared_gate.h"

namespace sg::kernels::shared_gate {
SG_EMULATED_NAMESPACE_BEGIN

// One block per token. Thread i takes the 8-element chunks i, i + threads, ... of the row in order: the same chunks
// and the same operations on the 16-byte path (H % 8 == 0, aligned pointers) and the scalar one, so the bits
// depend on H only.
inline constexpr int kChunk = 8;
inline constexpr int kMaxThreads = 256;
inline constexpr int kReduceFloats = 32;  // block_reduce_sum's shared scratch

// A function of H only, and with it the tree that adds the threads' sums.
inline int threads_for(int64_t H) {
  return detail::row_block_threads(H, kChunk, kMaxThreads);
}

// Elements in the chunk at column c: 8 on the 16-byte path (H % 8 == 0), fewer in a scalar row's tail.
template <bool VEC>
SG_DEVICE int chunk_size(int64_t H, int64_t c) {
  if constexpr (VEC) return kChunk;
  return H - c < kChunk ? static_cast<int>(H - c) : kChunk;
}

// n (<= 8) consecutive bf16 as fp32; the rest of v is 0. VEC: one 16-byte load (n == 8, aligned address).
template <bool VEC>
SG_DEVICE void load_chunk(const bf16* src, int n, float (&v)[kChunk]) {
  if constexpr (VEC) {
    detail::load_bf16<kChunk>(src, v);
  } else {
    SG_UNROLL
    for (int k = 0; k < kChunk; ++k) v[k] = k < n ? __bfloat162float(src[k]) : 0.0f;
  }
}

// The first n values of v as bf16, rounded to nearest even.
template <bool VEC>
SG_DEVICE void store_chunk(bf16* dst, int n, const float (&v)[kChunk]) {
  if constexpr (VEC) {
    detail::store_bf16<kChunk>(dst, v);
  } else {
    SG_UNROLL
    for (int k = 0; k < kChunk; ++k) {
      if (k < n) dst[k] = __float2bfloat16_rn(v[k]);
    }
  }
}

// acc + a[0] b[0] + ... + a[n-1] b[n-1], in this order, one fused multiply-add each.
SG_DEVICE float dot_chunk(float acc, int n, const float (&a)[kChunk], const float (&b)[kChunk]) {
  SG_UNROLL
  for (int k = 0; k < kChunk; ++k) {
    if (k < n) acc = detail::fma_rn(a[k], b[k], acc);
  }
  return acc;
}

// sigmoid in IEEE fp32 (expf and a correctly rounded division; the approximate path of silu.cuh saves nothing at one
// evaluation per token). The emulator uses the host's expf.
SG_DEVICE float gate_sigmoid(float logit) {
#if defined(SG_SIMT_EMULATION)
  return 1.0f / (1.0f + std::exp(-logit));
#else
  return 1.0f / (1.0f + expf(-logit));
#endif
}

SG_DEVICE int64_t first_column() {
  return static_cast<int64_t>(detail::thread_index()) * kChunk;
}
SG_DEVICE int64_t column_step() {
  return static_cast<int64_t>(detail::block_threads()) * kChunk;
}

// g = sigmoid(input[t] . weight); out[t] = bf16(out[t] + g shared[t]).
template <bool VEC>
SG_KERNEL(kMaxThreads)
forward_kernel(MoeSharedGateForwardParams p) {
  float* reduce_scratch = reinterpret_cast<float*>(detail::dynamic_smem());
  const int64_t t = detail::block_index_x();
  const int64_t row = t * p.H;
  float logit = 0.0f;
  for (int64_t c = first_column(); c < p.H; c += column_step()) {
    const int n = chunk_size<VEC>(p.H, c);
    float x[kChunk], w[kChunk];
    load_chunk<VEC>(p.input + row + c, n, x);
    load_chunk<VEC>(p.weight + c, n, w);
    logit = dot_chunk(logit, n, x, w);
  }
  const float g = gate_sigmoid(detail::block_reduce_sum(logit, reduce_scratch));
  if (detail::thread_index() == 0) p.gate[t] = g;
  for (int64_t c = first_column(); c < p.H; c += column_step()) {
    const int n = chunk_size<VEC>(p.H, c);
    float s[kChunk], o[kChunk];
    load_chunk<VEC>(p.shared + row + c, n, s);
    load_chunk<VEC>(p.out + row + c, n, o);
    SG_UNROLL
    for (int k = 0; k < kChunk; ++k) o[k] = detail::fma_rn(g, s[k], o[k]);
    store_chunk<VEC>(p.out + row + c, n, o);
  }
}

// d_shared[t] = bf16(g dy[t]); d_logit[t] = (dy[t] . shared[t]) g (1 - g), in one pass over the rows.
template <bool VEC>
SG_KERNEL(kMaxThreads)
backward_kernel(MoeSharedGateBackwardParams p) {
  float* reduce_scratch = reinterpret_cast<float*>(detail::dynamic_smem());
  const int64_t t = detail::block_index_x();
  const int64_t row = t * p.H;
  const float g = p.gate[t];
  float dot = 0.0f;
  for (int64_t c = first_column(); c < p.H; c += column_step()) {
    const int n = chunk_size<VEC>(p.H, c);
    float dy[kChunk], s[kChunk];
    load_chunk<VEC>(p.dy + row + c, n, dy);  // before the store below: d_shared may be dy
    load_chunk<VEC>(p.shared + row + c, n, s);
    dot = dot_chunk(dot, n, dy, s);
    SG_UNROLL
    for (int k = 0; k < kChunk; ++k) dy[k] = g * dy[k];
    store_chunk<VEC>(p.d_shared + row + c, n, dy);
  }
  dot = detail::block_reduce_sum(dot, reduce_scratch);
  if (detail::thread_index() == 0) p.d_logit[t] = dot * (g * (1.0f - g));
}

// d_input[t] = bf16(d_input[t] + d_logit[t] weight).
template <bool VEC>
SG_KERNEL(kMaxThreads)
input_grad_kernel(MoeSharedGateInputGradParams p) {
  const int64_t t = detail::block_index_x();
  const int64_t row = t * p.H;
  const float d_logit = p.d_logit[t];
  for (int64_t c = first_column(); c < p.H; c += column_step()) {
    const int n = chunk_size<VEC>(p.H, c);
    float w[kChunk], d[kChunk];
    load_chunk<VEC>(p.weight + c, n, w);
    load_chunk<VEC>(p.d_input + row + c, n, d);
    SG_UNROLL
    for (int k = 0; k < kChunk; ++k) d[k] = detail::fma_rn(d_logit, w[k], d[k]);
    store_chunk<VEC>(p.d_input + row + c, n, d);
  }
}

inline void check_shape(const char* op, int64_t T, int64_t H) {
  SG_CHECK(T >= 0 && T <= INT32_MAX && H > 0, strprintf("%s: bad shape T=%lld H=%lld (need 0 <= T < 2^31, H > 0)", op,
                                                        static_cast<long long>(T), static_cast<long long>(H)));
}

inline void check_set(const char* op, const char* name, const void* ptr) {
  SG_CHECK(ptr != nullptr, strprintf("%s: %s is null", op, name));
}

// One block of threads_for(H) threads per token, on the 16-byte path when H % 8 == 0 and every bf16 pointer is
// 16-byte aligned; reduce: the kernel sums over the block (its shared scratch).
template <class Params, class Launch>
void launch_per_token(const Launch& launch, const char* name, void (*vector_kernel)(Params),
                      void (*scalar_kernel)(Params), std::initializer_list<const void*> bf16_pointers, bool reduce,
                      const Params& p) {
  const bool vec = detail::bf16_vector_path_ok(p.H, {}, bf16_pointers);
  launch(name, vec ? vector_kernel : scalar_kernel, dim3(static_cast<unsigned>(p.T)), threads_for(p.H),
         reduce ? sizeof(float) * kReduceFloats : 0, p);
}

template <class Launch>
void run_forward(const Launch& launch, const MoeSharedGateForwardParams& p) {
  const char* op = "moe_shared_gate_forward";
  check_shape(op, p.T, p.H);
  check_set(op, "weight", p.weight);
  if (p.T == 0) return;
  check_set(op, "out", p.out);
  check_set(op, "gate", p.gate);
  check_set(op, "shared", p.shared);
  check_set(op, "input", p.input);
  launch_per_token(launch, "moe_shared_gate_forward_kernel", forward_kernel<true>, forward_kernel<false>,
                   {p.out, p.shared, p.input, p.weight}, /*reduce=*/true, p);
}

template <class Launch>
void run_backward(const Launch& launch, const MoeSharedGateBackwardParams& p) {
  const char* op = "moe_shared_gate_backward";
  check_shape(op, p.T, p.H);
  if (p.T == 0) return;
  check_set(op, "d_shared", p.d_shared);
  check_set(op, "d_logit", p.d_logit);
  check_set(op, "dy", p.dy);
  check_set(op, "shared", p.shared);
  check_set(op, "gate", p.gate);
  launch_per_token(launch, "moe_shared_gate_backward_kernel", backward_kernel<true>, backward_kernel<false>,
                   {p.d_shared, p.dy, p.shared}, /*reduce=*/true, p);
}

template <class Launch>
void run_input_grad(const Launch& launch, const MoeSharedGateInputGradParams& p) {
  const char* op = "moe_shared_gate_input_grad";
  check_shape(op, p.T, p.H);
  check_set(op, "weight", p.weight);
  if (p.T == 0) return;
  check_set(op, "d_input", p.d_input);
  check_set(op, "d_logit", p.d_logit);
  launch_per_token(launch, "moe_shared_gate_input_grad_kernel", input_grad_kernel<true>, input_grad_kernel<false>,
                   {p.d_input, p.weight}, /*reduce=*/false, p);
}

SG_EMULATED_NAMESPACE_END
}  // namespace sg::kernels::shared_gate
