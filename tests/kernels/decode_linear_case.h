#pragma once
// The scenario of the decoding linear's tests (kernels/decode_linear.h), shared by the CPU emulator's
// (decode_linear_emulated_test.cpp) and the GPU's (decode_linear_gpu_test.cu). The backend runs the kernel and
// the unfused activation kernels on its memory:
//   Backend::run(x, w, T, K, N, epilogue) -> y, (T + 1) rows of out_width, poisoned (NaN) before the run
//   Backend::activation(pre, T, F, epilogue) -> the activation kernel's output on the bf16 values `pre`
// Checks, on bf16 inputs whose rows differ in scale by up to 10^6 (row t x 1, 1000, 0.001, ...):
//   * against reference/linear.h's fp32 linear, rounded to bf16, then the activation's CPU twin, rounded again:
//     each element within 2^-5 of its value plus 10^-3 of the row's RMS (the sums run in other orders, and a
//     one-ulp difference in a gate moves SwiGLU by a few ulps); the norm of the error within 4e-3;
//   * the row past T is not written (still NaN);
//   * an epilogue gives exactly (bitwise) what kNone followed by the activation kernel gives;
//   * each row's outputs are bitwise those of the row alone (T = 1): the sums do not depend on the other rows.
// The QKV epilogue has a scenario of its own (check_decode_qkv_case): the fused call against kNone, rope_forward and
// kv_cache_append one after the other, bitwise, for the QKV rows and both caches (filled with other values first,
// so a write to the wrong place shows), one row at a position past the cache (no cache write); with RoPE (plain and
// Llama 3 scaled frequencies) and without, with and without grouped KV heads.
//   Backend::run_qkv(x, w, K, epilogue, positions, fused) -> {y, k cache, v cache}: the fused kernel or the three
//   launches, on caches the backend fills with the same random values each time and y poisoned (NaN)
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

// The CPU twin: fp32 linear, bf16, the activation in fp32, bf16.
inline std::vector<float> decode_linear_reference(const std::vector<float>& x, const std::vector<float>& w,
                                                  const DecodeLinearCase& c) {
  std::vector<float> pre(static_cast<size_t>(c.T * c.N));
  ref::linear_forward(pre.data(), x.data(), w.data(), c.T, c.K, c.N);
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

template <class Backend>
void check_decode_linear_case(const DecodeLinearCase& c, Backend& backend) {
  SCOPED_TRACE(describe(c));
  const int64_t F = kernels::decode_linear_out_width(c.epilogue, c.N);
  std::vector<float> x = random_normal(static_cast<size_t>(c.T * c.K), 7 + c.K + c.N);
  const float row_scales[] = {1.0f, 1000.0f, 0.001f, 30.0f, 0.03f, 1.0f, 300.0f, 0.3f};
  for (int64_t t = 0; t < c.T; ++t)
    for (int64_t k = 0; k < c.K; ++k) x[t * c.K + k] *= row_scales[t % 8];
  x = round_bf16(x);
  const auto w = round_bf16(random_normal(static_cast<size_t>(c.N * c.K), 11 + c.N, 1.0f / std::sqrt(float(c.K))));
  const auto x16 = to_bf16(x), w16 = to_bf16(w);

  const std::vector<bf16> y_all = backend.run(x16, w16, c.T, c.K, c.N, c.epilogue);
  ASSERT_EQ(y_all.size(), static_cast<size_t>((c.T + 1) * F));
  const std::vector<bf16> y(y_all.begin(), y_all.begin() + c.T * F);
  for (int64_t j = 0; j < F; ++j)
    ASSERT_TRUE(std::isnan(to_float({y_all[c.T * F + j]})[0])) << "the row past T was written at column " << j;

  // Against the CPU twin, row by row (the rows' scales differ by 10^6).
  const std::vector<float> want = decode_linear_reference(x, w, c), got = to_float(y);
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
    const std::vector<bf16> pre_all = backend.run(x16, w16, c.T, c.K, c.N, kernels::DecodeLinearEpilogue::kNone);
    const std::vector<bf16> pre(pre_all.begin(), pre_all.begin() + c.T * c.N);
    EXPECT_TRUE(same_bits(backend.activation(pre, c.T, F, c.epilogue), y))
        << "the fused epilogue differs from the linear followed by the activation kernel";
  }

  // Each row is what it is alone.
  if (c.T > 1) {
    for (int64_t t = 0; t < c.T; ++t) {
      const std::vector<bf16> xt(x16.begin() + t * c.K, x16.begin() + (t + 1) * c.K);
      const std::vector<bf16> alone = backend.run(xt, w16, 1, c.K, c.N, c.epilogue);
      EXPECT_TRUE(same_bits(std::vector<bf16>(alone.begin(), alone.begin() + F),
                            std::vector<bf16>(y.begin() + t * F, y.begin() + (t + 1) * F)))
          << "row " << t << " differs from the same row computed alone";
    }
  }
}

struct DecodeQkvCase {
  int64_t T, K, heads, kv_heads, head_dim;
  bool rope;
  double scaling_factor;  // 0: plain frequencies; else Llama 3's
};

struct QkvOutputs {
  std::vector<bf16> y, k_cache, v_cache;
};

// The linear of a QKV case: with the epilogue (fused) or plain, as the unfused path's first launch.
inline kernels::DecodeLinearParams qkv_linear_params(bf16* y, const bf16* x, const bf16* w, int64_t K,
                                                     const kernels::DecodeQkvEpilogue& e, bool fused,
                                                     bool tensor_cores) {
  return {.y = y,
          .x = x,
          .w = w,
          .T = e.shape.T,
          .K = K,
          .N = e.shape.qkv_width(),
          .epilogue = fused ? kernels::DecodeLinearEpilogue::kQkv : kernels::DecodeLinearEpilogue::kNone,
          .qkv = fused ? e : kernels::DecodeQkvEpilogue{},
          .tensor_cores = tensor_cores};
}

template <class Backend>
void check_decode_qkv_case(const DecodeQkvCase& c, Backend& backend) {
  SCOPED_TRACE(strprintf("T=%lld K=%lld heads=%lld/%lld d=%lld rope=%d scaling=%g", static_cast<long long>(c.T),
                         static_cast<long long>(c.K), static_cast<long long>(c.heads),
                         static_cast<long long>(c.kv_heads), static_cast<long long>(c.head_dim), c.rope ? 1 : 0,
                         c.scaling_factor));
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
  const int64_t N = e.shape.qkv_width();
  const auto x = to_bf16(random_normal(static_cast<size_t>(c.T * c.K), 3 + c.K));
  const auto w = to_bf16(random_normal(static_cast<size_t>(N * c.K), 4 + N, 1.0f / std::sqrt(float(c.K))));
  // Row 1 (where there is one) sits past the cache: it is rotated but not appended.
  const int32_t positions[] = {5, 40, 0, 39, 17, 1, 33, 8};
  std::vector<int32_t> pos(positions, positions + c.T);
  const QkvOutputs fused = backend.run_qkv(x, w, c.K, e, pos, true);
  const QkvOutputs unfused = backend.run_qkv(x, w, c.K, e, pos, false);
  EXPECT_TRUE(same_bits(fused.y, unfused.y)) << "QKV rows differ from kNone + rope_forward";
  EXPECT_TRUE(same_bits(fused.k_cache, unfused.k_cache)) << "K cache differs from kv_cache_append's";
  EXPECT_TRUE(same_bits(fused.v_cache, unfused.v_cache)) << "V cache differs from kv_cache_append's";
  // The rotation did something (a test of the pairing that could not pass by leaving q alone).
  if (c.rope) {
    const QkvOutputs plain = backend.run_qkv(
        x, w, c.K, {.k_cache = nullptr, .v_cache = nullptr, .positions = nullptr, .shape = e.shape, .rope = false}, pos,
        true);
    EXPECT_FALSE(same_bits(plain.y, fused.y)) << "RoPE left the q and k heads as they were";
  }
}

// Every case through `check`, with the fp32 kernel and then with the tensor-core one (Backend::tensor_cores).
template <class Backend, class Case, size_t N, class Check>
void check_with_both_maths(Backend& backend, const Case (&cases)[N], Check check) {
  for (const bool tensor_cores : {false, true}) {
    SCOPED_TRACE(tensor_cores ? "tensor cores" : "fp32 multiply-adds");
    backend.tensor_cores = tensor_cores;
    for (const Case& c : cases) check(c, backend);
  }
}

}  // namespace sg::test
