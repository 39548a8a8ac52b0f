#pragma once
// The scenario of the decoding linear's tests (kernels/decode_linear.h), shared by the CPU emulator's
// (decode_linear_emulated_test.cpp) and the GPU's (decode_linear_gpu_test.cu). The backend runs the kernel and
// the unfused activation kernels on its memory:
//   Backend::run(x, w, bias, T, K, N, epilogue) -> y, (T + 1) rows of out_width, poisoned (NaN) before the run; an
//     empty `bias` runs without one (null), else the backend passes it at an odd element offset (aligned to 2 bytes
//     only, all the kernel may assume)
//   Backend::activation(pre, T, F, epilogue) -> the activation kernel's output on the bf16 values `pre`
// Every scenario runs without a bias and with a random one (check_with_both_maths_and_bias). Checks, on bf16 inputs
// whose rows differ in scale by up to 10^6 (row t x 1, 1000, 0.001, ...):
//   * against reference/linear.h's fp32 linear, plus the bias (add_row_bias), rounded to bf16, then the
//     activation's CPU twin, rounded again: each element within 2^-5 of its value plus 10^-3 of the row's RMS (the
//     sums run in other orders, and a one-ulp difference in a gate moves SwiGLU by a few ulps); the norm of the
//     error within 4e-3;
//   * the row past T is not written (still NaN);
//   * an epilogue gives exactly (bitwise) what kNone (with the same bias) followed by the activation kernel gives;
//   * each row's outputs are bitwise those of the row alone (T = 1): the sums do not depend on the other rows;
//   * without a bias, the outputs are bitwise those with a bias of -0.0 everywhere (x + -0 = x for every x, +0
//     included): the bias is an fp32 add to the sum and nothing else.
// The QKV epilogue has a scenario of its own (check_decode_qkv_case): the fused call against kNone, rope_forward and
// kv_cache_append one after the other, bitwise, for the QKV rows and both caches (filled with other values first,
// so a write to the wrong place shows), one row at a position past the cache (no cache write); with RoPE (plain and
// Llama 3 scaled frequencies) and without, with and without grouped KV heads; with a bias, which must move each row
// by its norm (the unfused kNone's bias is checked against the CPU twin above).
//   Backend::run_qkv(x, w, bias, K, epilogue, positions, fused) -> {y, k cache, v cache}: the fused kernel or the
//   three launches, on caches the backend fills with the same random values each time and y poisoned (NaN)
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/strings.h"
#include "gpu_test_util.h"
#include "kernels/decode_linear.h"
#include "reference/linear.h"
#include "reference/squared_relu.h"
#include "reference/swiglu.h"

namespace sg::test {

struct DecodeLinearCase {
  int64_t T, K, N;
  kernels::DecodeLinearEpilogue epilogue;
};

inline std::string describe(const DecodeLinearCase& c) {
  const char* names[] = {"none", "swiglu", "squared_relu", "qkv"};
  return strprintf("T=%lld K=%lld N=%lld epilogue=%s", static_cast<long long>(c.T), static_cast<long long>(c.K),
                   static_cast<long long>(c.N), names[static_cast<int>(c.epilogue)]);
}

// The CPU twin: fp32 linear plus the bias (empty: none), bf16, the activation in fp32, bf16.
inline std::vector<float> decode_linear_reference(const std::vector<float>& x, const std::vector<float>& w,
                                                  const std::vector<float>& bias, const DecodeLinearCase& c) {
  std::vector<float> pre(static_cast<size_t>(c.T * c.N));
  ref::linear_forward(pre.data(), x.data(), w.data(), c.T, c.K, c.N);
  if (!bias.empty()) ref::add_row_bias(pre.data(), bias.data(), c.T, c.N);
  pre = round_bf16(pre);
  const int64_t F = kernels::decode_linear_out_width(c.epilogue, c.N);
  std::vector<float> out(static_cast<size_t>(c.T * F));
  switch (c.epilogue) {
    case kernels::DecodeLinearEpilogue::kNone: return pre;
    case kernels::DecodeLinearEpilogue::kSwiglu: ref::swiglu_forward(out.data(), pre.data(), c.T, F); break;
    case kernels::DecodeLinearEpilogue::kSquaredRelu: ref::squared_relu_forward(out.data(), pre.data(), c.T, F); break;
    case kernels::DecodeLinearEpilogue::kQkv:
      ADD_FAILURE() << "kQkv has its own scenario (check_decode_qkv_case)";
      break;
  }
  return round_bf16(out);
}

inline bool same_bits(const std::vector<bf16>& a, const std::vector<bf16>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(bf16)) == 0;
}

// A bias of N values as large as the rows of scale 1 (so it moves every output of those), or none (empty).
inline std::vector<float> maybe_random_bias(bool with_bias, int64_t N, uint64_t seed) {
  return with_bias ? round_bf16(random_normal(static_cast<size_t>(N), seed)) : std::vector<float>{};
}

template <class Backend>
void check_decode_linear_case(const DecodeLinearCase& c, Backend& backend, bool with_bias) {
  SCOPED_TRACE(describe(c) + (with_bias ? " with bias" : " without bias"));
  const int64_t F = kernels::decode_linear_out_width(c.epilogue, c.N);
  std::vector<float> x = random_normal(static_cast<size_t>(c.T * c.K), 7 + c.K + c.N);
  const float row_scales[] = {1.0f, 1000.0f, 0.001f, 30.0f, 0.03f, 1.0f, 300.0f, 0.3f};
  for (int64_t t = 0; t < c.T; ++t)
    for (int64_t k = 0; k < c.K; ++k) x[t * c.K + k] *= row_scales[t % 8];
  x = round_bf16(x);
  const auto w = round_bf16(random_normal(static_cast<size_t>(c.N * c.K), 11 + c.N, 1.0f / std::sqrt(float(c.K))));
  const std::vector<float> bias = maybe_random_bias(with_bias, c.N, 13 + c.N);
  const auto x16 = to_bf16(x), w16 = to_bf16(w), bias16 = to_bf16(bias);

  const std::vector<bf16> y_all = backend.run(x16, w16, bias16, c.T, c.K, c.N, c.epilogue);
  ASSERT_EQ(y_all.size(), static_cast<size_t>((c.T + 1) * F));
  const std::vector<bf16> y(y_all.begin(), y_all.begin() + c.T * F);
  for (int64_t j = 0; j < F; ++j)
    ASSERT_TRUE(std::isnan(to_float({y_all[c.T * F + j]})[0])) << "the row past T was written at column " << j;

  // Against the CPU twin, row by row (the rows' scales differ by 10^6).
  const std::vector<float> want = decode_linear_reference(x, w, bias, c), got = to_float(y);
  for (int64_t t = 0; t < c.T; ++t) {
    const std::vector<float> want_row(want.begin() + t * F, want.begin() + (t + 1) * F);
    const std::vector<float> got_row(got.begin() + t * F, got.begin() + (t + 1) * F);
    double ms = 0.0;
    for (float v : want_row) ms += static_cast<double>(v) * v;
    const double rms = std::sqrt(ms / static_cast<double>(F));
    int64_t outside = 0;
    for (int64_t j = 0; j < F; ++j) {
      const double err = std::fabs(static_cast<double>(got_row[j]) - want_row[j]);
      if (!(err <= 0x1p-5 * std::fabs(want_row[j]) + 1e-3 * rms)) ++outside;
    }
    EXPECT_EQ(outside, 0) << "row " << t << ": elements outside the tolerance";
    EXPECT_LT(relative_error(got_row, want_row), 4e-3) << "row " << t;
  }

  // The fused epilogue is exactly the unfused pair.
  if (c.epilogue != kernels::DecodeLinearEpilogue::kNone) {
    const std::vector<bf16> pre_all =
        backend.run(x16, w16, bias16, c.T, c.K, c.N, kernels::DecodeLinearEpilogue::kNone);
    const std::vector<bf16> pre(pre_all.begin(), pre_all.begin() + c.T * c.N);
    EXPECT_TRUE(same_bits(backend.activation(pre, c.T, F, c.epilogue), y))
        << "the fused epilogue differs from the linear followed by the activation kernel";
  }

  // Each row is what it is alone.
  if (c.T > 1) {
    for (int64_t t = 0; t < c.T; ++t) {
      const std::vector<bf16> xt(x16.begin() + t * c.K, x16.begin() + (t + 1) * c.K);
      const std::vector<bf16> alone = backend.run(xt, w16, bias16, 1, c.K, c.N, c.epilogue);
      EXPECT_TRUE(same_bits(std::vector<bf16>(alone.begin(), alone.begin() + F),
                            std::vector<bf16>(y.begin() + t * F, y.begin() + (t + 1) * F)))
          << "row " << t << " differs from the same row computed alone";
    }
  }

  // No bias is a bias of -0.0: the sums themselves, not +0.0 added to them (which would turn a -0.0 sum into +0.0).
  if (!with_bias) {
    const std::vector<bf16> negative_zeros = to_bf16(std::vector<float>(static_cast<size_t>(c.N), -0.0f));
    EXPECT_TRUE(same_bits(backend.run(x16, w16, negative_zeros, c.T, c.K, c.N, c.epilogue), y_all))
        << "the outputs without a bias differ from those with a bias of -0.0";
  }
}

// The bias joins the fp32 sum before it is rounded, in both maths: x W^T = (n + 1) + 2^-8 + 2^-12 exactly on column
// n (x = [1, 1, 0, ...], W row n = [n + 1, 2^-8 + 2^-12, 0, ...]: every partial sum is exact), bias -(n + 1), so y is
// exactly 2^-8 + 2^-12 (a bf16 value); rounding the sum first (to 1 + 2^-7 on column 0) would give 2^-7 or worse.
template <class Backend>
void check_decode_linear_bias_before_rounding(Backend& backend) {
  const int64_t K = 264, N = 5;
  for (const int64_t T : {1, 3, 8}) {
    SCOPED_TRACE(strprintf("T=%lld", static_cast<long long>(T)));
    std::vector<float> x(static_cast<size_t>(T * K), 0.0f), w(static_cast<size_t>(N * K), 0.0f), bias(N);
    for (int64_t t = 0; t < T; ++t) x[t * K] = x[t * K + 1] = 1.0f;
    for (int64_t n = 0; n < N; ++n) {
      w[n * K] = static_cast<float>(n + 1);
      w[n * K + 1] = 0x1p-8f + 0x1p-12f;
      bias[n] = -static_cast<float>(n + 1);
    }
    const std::vector<bf16> y =
        backend.run(to_bf16(x), to_bf16(w), to_bf16(bias), T, K, N, kernels::DecodeLinearEpilogue::kNone);
    const std::vector<float> got = to_float(std::vector<bf16>(y.begin(), y.begin() + T * N));
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], 0x1p-8f + 0x1p-12f) << "element " << i;
  }
}

struct DecodeQkvCase {
  int64_t T, K, heads, kv_heads, head_dim;
  bool rope;
  double scaling_factor;  // 0: plain frequencies; else Llama 3's
  int64_t rotary_dim = 0;  // partial rotary: the dimensions rotated at the start of each head; 0: all
  bool longrope = false;   // LongRoPE (instead of scaling_factor): a factor per pair, attention factor 1.19
};

struct QkvOutputs {
  std::vector<bf16> y, k_cache, v_cache;
};

// The linear of a QKV case: with the epilogue (fused) or plain, as the unfused path's first launch.
inline kernels::DecodeLinearParams qkv_linear_params(bf16* y, const bf16* x, const bf16* w, const bf16* bias, int64_t K,
                                                     const kernels::DecodeQkvEpilogue& e, bool fused,
                                                     bool tensor_cores) {
  return {.y = y,
          .x = x,
          .w = w,
          .bias = bias,
          .T = e.shape.T,
          .K = K,
          .N = e.shape.qkv_width(),
          .epilogue = fused ? kernels::DecodeLinearEpilogue::kQkv : kernels::DecodeLinearEpilogue::kNone,
          .qkv = fused ? e : kernels::DecodeQkvEpilogue{},
          .tensor_cores = tensor_cores};
}

template <class Backend>
void check_decode_qkv_case(const DecodeQkvCase& c, Backend& backend, bool with_bias) {
  SCOPED_TRACE(strprintf("T=%lld K=%lld heads=%lld/%lld d=%lld rope=%d scaling=%g rotary_dim=%lld longrope=%d bias=%d",
                         static_cast<long long>(c.T), static_cast<long long>(c.K), static_cast<long long>(c.heads),
                         static_cast<long long>(c.kv_heads), static_cast<long long>(c.head_dim), c.rope ? 1 : 0,
                         c.scaling_factor, static_cast<long long>(c.rotary_dim), c.longrope ? 1 : 0,
                         with_bias ? 1 : 0));
  kernels::DecodeQkvEpilogue e;
  e.shape = {.T = c.T,
             .rows_per_slot = 1,
             .first_slot = 0,
             .slots = c.T,
             .capacity = 40,
             .heads = c.heads,
             .kv_heads = c.kv_heads,
             .head_dim = c.head_dim};
  e.rope = c.rope;
  e.base = 10000.0;
  e.scaling.factor = c.scaling_factor;
  e.scaling.original_max_position_embeddings = 16.0;  // so that the scaling moves frequencies at these positions
  e.rotary_dim = c.rotary_dim;
  const int64_t rotated_dims = ref::rope_rotated_dims(c.head_dim, c.rotary_dim);
  if (c.longrope) {
    e.scaling.longrope_pairs = static_cast<int32_t>(rotated_dims / 2);
    for (int i = 0; i < e.scaling.longrope_pairs; ++i)
      e.scaling.longrope_factors[i] = 1.0f + 0.37f * static_cast<float>(i);
    e.scaling.attention_factor = 1.1902380714238083;
  }
  const int64_t N = e.shape.qkv_width();
  const auto x = to_bf16(random_normal(static_cast<size_t>(c.T * c.K), 3 + c.K));
  const auto w = to_bf16(random_normal(static_cast<size_t>(N * c.K), 4 + N, 1.0f / std::sqrt(float(c.K))));
  const auto bias = to_bf16(maybe_random_bias(with_bias, N, 6 + N));
  // Row 1 (where there is one) sits past the cache: it is rotated but not appended.
  const int32_t positions[] = {5, 40, 0, 39, 17, 1, 33, 8};
  std::vector<int32_t> pos(positions, positions + c.T);
  const QkvOutputs fused = backend.run_qkv(x, w, bias, c.K, e, pos, true);
  const QkvOutputs unfused = backend.run_qkv(x, w, bias, c.K, e, pos, false);
  EXPECT_TRUE(same_bits(fused.y, unfused.y)) << "QKV rows differ from kNone + rope_forward";
  EXPECT_TRUE(same_bits(fused.k_cache, unfused.k_cache)) << "K cache differs from kv_cache_append's";
  EXPECT_TRUE(same_bits(fused.v_cache, unfused.v_cache)) << "V cache differs from kv_cache_append's";
  // The rotation did something (a test of the pairing that could not pass by leaving q alone).
  if (c.rope) {
    const QkvOutputs plain = backend.run_qkv(
        x, w, bias, c.K,
        {.k_cache = nullptr, .v_cache = nullptr, .positions = nullptr, .shape = e.shape, .rope = false}, pos, true);
    EXPECT_FALSE(same_bits(plain.y, fused.y)) << "RoPE left the q and k heads as they were";
    // Partial rotary: the dimensions of a q or k head past rotary_dim, and the v heads, are the plain linear's.
    const int64_t rotated_width = (c.heads + c.kv_heads) * c.head_dim;
    int64_t passed = 0, differ = 0;
    for (int64_t t = 0; t < c.T; ++t) {
      for (int64_t j = 0; j < N; ++j) {
        if (j < rotated_width && j % c.head_dim < rotated_dims) continue;
        ++passed;
        if (std::memcmp(&plain.y[t * N + j], &fused.y[t * N + j], sizeof(bf16)) != 0) ++differ;
      }
    }
    EXPECT_EQ(differ, 0) << differ << " of " << passed << " unrotated outputs differ from the plain linear's";
  }
  // The bias moved every row by the bias (a bias that the fused path and the unfused kNone both dropped, or both
  // added to some columns only, would leave the comparisons above equal). RoPE rotates pairs, so it keeps the norm of
  // a row's difference: |y(bias) - y(no bias)| = |bias| up to the outputs' bf16 rounding (2^-9 of values of the
  // bias's size), the rotated columns' part times LongRoPE's attention factor.
  if (with_bias) {
    const std::vector<float> biased = to_float(fused.y),
                             unbiased = to_float(backend.run_qkv(x, w, {}, c.K, e, pos, true).y), b = to_float(bias);
    const int64_t rotated_width = (c.heads + c.kv_heads) * c.head_dim;
    const double gain = c.rope ? e.scaling.attention_factor * e.scaling.attention_factor : 1.0;
    double bias_norm = 0.0;
    for (int64_t j = 0; j < N; ++j) {
      const bool rotated = j < rotated_width && j % c.head_dim < rotated_dims;
      bias_norm += static_cast<double>(b[j]) * b[j] * (rotated ? gain : 1.0);
    }
    bias_norm = std::sqrt(bias_norm);
    for (int64_t t = 0; t < c.T; ++t) {
      double moved = 0.0;
      for (int64_t j = 0; j < N; ++j) {
        const double d = static_cast<double>(biased[t * N + j]) - unbiased[t * N + j];
        moved += d * d;
      }
      EXPECT_NEAR(std::sqrt(moved) / bias_norm, 1.0, 0.02)
          << "row " << t << ": the bias moved the row by another amount";
    }
  }
}

// Every case through `check`, with the fp32 kernel and then with the tensor-core one (Backend::tensor_cores), each
// without a bias and with one.
template <class Backend, class Case, size_t N, class Check>
void check_with_both_maths_and_bias(Backend& backend, const Case (&cases)[N], Check check) {
  for (const bool tensor_cores : {false, true}) {
    SCOPED_TRACE(tensor_cores ? "tensor cores" : "fp32 multiply-adds");
    backend.tensor_cores = tensor_cores;
    for (const bool with_bias : {false, true}) {
      for (const Case& c : cases) check(c, backend, with_bias);
    }
  }
}

}  // namespace sg::test
