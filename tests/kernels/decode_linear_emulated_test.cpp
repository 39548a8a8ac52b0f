// The decoding linear (src/kernels/decode_linear.cuh), run on the CPU by tests/simt_emulator.h with the
// launcher's own checks and dispatch, on decode_linear_case.h's scenario at small shapes (the emulator is slow):
// every row count the dispatch has (1, 2, 4 and 8 rows, and 3 and 5 through the next one up), K not a multiple
// of a block's 256 chunks and K past several passes, N not a multiple of a block's 4 rows, each epilogue; the
// halving reduction's lanes against a plain sum; the QKV epilogue against the linear, RoPE and the KV-cache append
// one after the other (bitwise); all of it without a bias and with one; the bias added to the fp32 sum before any
// rounding (exactly), and without one nothing added (a -0.0 sum stays -0.0; every case's bits equal those with a
// bias of -0.0, the identity of the fp32 add); bad parameters refused before any launch.
#define SG_SIMT_EMULATION 1
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "gpu_test_util.h"  // bf16 conversions only: nothing here touches a GPU
#include "kernels/decode_attention.cuh"
#include "kernels/decode_linear.cuh"
#include "kernels/decode_linear_case.h"
#include "kernels/rope.cuh"
#include "simt_emulator.h"

namespace sg {
namespace {

using kernels::DecodeLinearEpilogue;
namespace dl = kernels::decode_linear;

// The bias a kernel reads: null for an empty one, else a copy one element into a buffer, so aligned to 2 bytes only.
class BiasAtOddOffset {
 public:
  explicit BiasAtOddOffset(const std::vector<bf16>& bias) : padded_(bias.empty() ? 0 : bias.size() + 1) {
    std::copy(bias.begin(), bias.end(), padded_.begin() + (bias.empty() ? 0 : 1));
  }
  const bf16* get() const { return padded_.empty() ? nullptr : padded_.data() + 1; }

 private:
  std::vector<bf16> padded_;
};

// decode_linear_case.h's backend: the emulated kernel; the activations by their CPU twins, which compute the
// emulated kernels' formulas (kernels/silu.cuh's sigmoid is 1 / (1 + exp(-x)) under emulation).
class EmulatedBackend {
 public:
  bool tensor_cores = false;  // which math decode_linear_forward runs

  std::vector<bf16> run(const std::vector<bf16>& x, const std::vector<bf16>& w, const std::vector<bf16>& bias,
                        int64_t T, int64_t K, int64_t N, DecodeLinearEpilogue epilogue) const {
    const int64_t F = kernels::decode_linear_out_width(epilogue, N);
    std::vector<bf16> y = test::to_bf16(std::vector<float>((T + 1) * F, NAN));
    const BiasAtOddOffset b(bias);
    dl::run(emu::Launch{}, {.y = y.data(),
                            .x = x.data(),
                            .w = w.data(),
                            .bias = b.get(),
                            .T = T,
                            .K = K,
                            .N = N,
                            .epilogue = epilogue,
                            .tensor_cores = tensor_cores});
    return y;
  }
  std::vector<bf16> activation(const std::vector<bf16>& pre, int64_t T, int64_t F, DecodeLinearEpilogue e) const {
    std::vector<float> out(T * F);
    if (e == DecodeLinearEpilogue::kSwiglu) {
      ref::swiglu_forward(out.data(), test::to_float(pre).data(), T, F);
    } else {
      ref::squared_relu_forward(out.data(), test::to_float(pre).data(), T, F);
    }
    return test::to_bf16(out);
  }
  test::QkvOutputs run_qkv(const std::vector<bf16>& x, const std::vector<bf16>& w, const std::vector<bf16>& bias,
                           int64_t K, kernels::DecodeQkvEpilogue e, const std::vector<int32_t>& positions,
                           bool fused) const {
    const ref::DecodeAttentionShape& s = e.shape;
    const int64_t N = s.qkv_width(), cache = s.slots * s.kv_heads * s.capacity * s.head_dim;
    test::QkvOutputs o{.y = test::to_bf16(std::vector<float>(s.T * N, NAN)),
                       .k_cache = test::to_bf16(test::random_normal(cache, 21)),
                       .v_cache = test::to_bf16(test::random_normal(cache, 22))};
    e.k_cache = o.k_cache.data();
    e.v_cache = o.v_cache.data();
    e.positions = positions.data();
    const emu::Launch launch;
    const BiasAtOddOffset b(bias);
    dl::run(launch, test::qkv_linear_params(o.y.data(), x.data(), w.data(), b.get(), K, e, fused, tensor_cores));
    if (fused) return o;
    if (e.rope) kernels::rope::run_forward(launch, kernels::decode_qkv_rope_params(o.y.data(), e));
    kernels::decode_attention::run_append(launch, kernels::decode_qkv_append_params(o.y.data(), e));
    return o;
  }
};

TEST(DecodeLinearEmulated, MatchesReferenceAndUnfusedAndRowsAlone) {
  EmulatedBackend backend;
  const test::DecodeLinearCase cases[] = {
      {1, 8, 1, DecodeLinearEpilogue::kNone},
      {2, 264, 5, DecodeLinearEpilogue::kNone},
      {3, 2056, 6, DecodeLinearEpilogue::kNone},
      {4, 264, 37, DecodeLinearEpilogue::kNone},
      {5, 24, 9, DecodeLinearEpilogue::kNone},
      {8, 2056, 7, DecodeLinearEpilogue::kNone},
      {1, 8800, 5, DecodeLinearEpilogue::kNone},
      {1, 264, 2, DecodeLinearEpilogue::kSwiglu},
      {2, 2056, 10, DecodeLinearEpilogue::kSwiglu},
      {8, 264, 38, DecodeLinearEpilogue::kSwiglu},
      {3, 24, 6, DecodeLinearEpilogue::kSquaredRelu},
      {8, 2056, 9, DecodeLinearEpilogue::kSquaredRelu},
      {8, 64, 128, DecodeLinearEpilogue::kNone},
      {6, 64, 64, DecodeLinearEpilogue::kNone},  // K 64: 4 of 8 warps idle
  };
  test::check_with_both_maths_and_bias(backend, cases, test::check_decode_linear_case<EmulatedBackend>);
}

TEST(DecodeLinearEmulated, QkvEpilogueIsTheLinearThenRopeThenTheAppend) {
  EmulatedBackend backend;
  const test::DecodeQkvCase cases[] = {
      {1, 64, 2, 2, 16, true, 0.0},
      {3, 264, 4, 2, 8, true, 8.0},
      {2, 24, 3, 1, 16, false, 0.0},
      {8, 64, 2, 1, 6, true, 0.0},
      {4, 32, 1, 1, 10, false, 0.0},
      {8, 64, 4, 2, 16, true, 0.0},  // the generate parity's Mixtral (hidden 64, head_dim 16) at 8 sequences
      // Partial rotary: the first rotary_dim dimensions of each q and k head rotated, the rest passed through.
      {3, 64, 4, 2, 16, true, 0.0, 8},
      {8, 64, 2, 1, 12, true, 8.0, 4},
      {2, 32, 3, 1, 10, true, 0.0, 2},
      // LongRoPE: a factor per pair, cos and sin times the attention factor.
      {3, 64, 4, 2, 16, true, 0.0, 0, true},
      {8, 64, 2, 1, 12, true, 0.0, 8, true},
  };
  test::check_with_both_maths_and_bias(backend, cases, test::check_decode_qkv_case<EmulatedBackend>);
}

TEST(DecodeLinearEmulated, BiasJoinsTheSumBeforeRounding) {
  EmulatedBackend backend;
  for (const bool tensor_cores : {false, true}) {
    SCOPED_TRACE(tensor_cores ? "tensor cores" : "fp32 multiply-adds");
    backend.tensor_cores = tensor_cores;
    test::check_decode_linear_bias_before_rounding(backend);
  }
}

// Sums that are -0.0: x 2^-100 times W -2^-100 underflows to -0.0 in every fma, from the first (+0.0 + -0.0 would be
// +0.0 only for an add of exact zeros). Without a bias they stay -0.0 (an added 0.0f would make them +0.0); a bias of
// -0.0 leaves them, one of +0.0 makes them +0.0 (the bias is an fp32 add to the sum). The fp32 kernel only: the
// tensor-core sums start from +0.0 and stay +0.0 here.
TEST(DecodeLinearEmulated, NullBiasKeepsNegativeZeroSums) {
  const EmulatedBackend backend;
  const int64_t K = 264, N = 5;
  for (const int64_t T : {1, 2, 3, 8}) {
    SCOPED_TRACE(T);
    const auto x = test::to_bf16(std::vector<float>(T * K, 0x1p-100f));
    const auto w = test::to_bf16(std::vector<float>(N * K, -0x1p-100f));
    const auto bits = [&](const std::vector<float>& bias) {
      const std::vector<bf16> y = backend.run(x, w, test::to_bf16(bias), T, K, N, DecodeLinearEpilogue::kNone);
      std::vector<uint16_t> out(T * N);
      std::memcpy(out.data(), y.data(), out.size() * sizeof(uint16_t));
      return out;
    };
    EXPECT_EQ(bits({}), std::vector<uint16_t>(T * N, 0x8000u)) << "without a bias";
    EXPECT_EQ(bits(std::vector<float>(N, -0.0f)), std::vector<uint16_t>(T * N, 0x8000u)) << "a bias of -0.0";
    EXPECT_EQ(bits(std::vector<float>(N, 0.0f)), std::vector<uint16_t>(T * N, 0x0000u)) << "a bias of +0.0";
  }
}

// The halving reduction alone: every lane ends with the warp's sum of the value `index` names, and the lanes the
// kernel reads (lane % (32 / V) == 0) cover every value once.
template <int V>
void check_halving_sum() {
  std::vector<float> by_lane(32, NAN);
  std::vector<int> index_of_lane(32, -1);
  emu::launch(dim3(1), 32, 0, [&] {
    const unsigned lane = emu::lane_id();
    float v[V];
    for (int j = 0; j < V; ++j) v[j] = static_cast<float>((j + 1) * 100) + static_cast<float>(lane) * 0.25f;
    int index = 0;
    dl::warp_halving_sum<V, 16>(v, index, lane);
    by_lane[lane] = v[0];
    index_of_lane[lane] = index;
  });
  std::vector<int> read(V, 0);
  for (int lane = 0; lane < 32; ++lane) {
    const int j = index_of_lane[lane];
    ASSERT_TRUE(j >= 0 && j < V) << "V=" << V << " lane " << lane;
    EXPECT_EQ(by_lane[lane], 32.0f * static_cast<float>((j + 1) * 100) + 0.25f * 496.0f)
        << "V=" << V << " lane " << lane << " value " << j;
    if (lane % (32 / V) == 0) ++read[j];
  }
  for (int j = 0; j < V; ++j) EXPECT_EQ(read[j], 1) << "V=" << V << ": value " << j << " read by one lane";
}

TEST(DecodeLinearEmulated, HalvingSumPutsEachValueOnTheLaneItNames) {
  check_halving_sum<1>();
  check_halving_sum<4>();
  check_halving_sum<8>();
  check_halving_sum<16>();
  check_halving_sum<32>();
}

TEST(DecodeLinearEmulated, RefusesBadParameters) {
  std::vector<bf16> buf(64 * 64);
  const auto message = [&](int64_t T, int64_t K, int64_t N, DecodeLinearEpilogue e, const bf16* x) {
    return test::thrown_message([&] {
      dl::run(emu::Launch{}, {.y = buf.data(), .x = x, .w = buf.data(), .T = T, .K = K, .N = N, .epilogue = e});
    });
  };
  EXPECT_NE(message(9, 64, 4, DecodeLinearEpilogue::kNone, buf.data()).find("9 rows"), std::string::npos);
  EXPECT_NE(message(1, 12, 4, DecodeLinearEpilogue::kNone, buf.data()).find("K = 12"), std::string::npos);
  EXPECT_NE(message(1, 64, 5, DecodeLinearEpilogue::kSwiglu, buf.data()).find("even N"), std::string::npos);
  EXPECT_NE(message(1, 64, 4, DecodeLinearEpilogue::kNone, buf.data() + 1).find("16-byte aligned"), std::string::npos);
  EXPECT_FALSE(kernels::decode_linear_takes(9, 64, 4, DecodeLinearEpilogue::kNone));
  EXPECT_FALSE(kernels::decode_linear_takes(1, 12, 4, DecodeLinearEpilogue::kNone));
  EXPECT_FALSE(kernels::decode_linear_takes(1, 64, 5, DecodeLinearEpilogue::kSwiglu));
  EXPECT_TRUE(kernels::decode_linear_takes(8, 64, 5, DecodeLinearEpilogue::kSquaredRelu));
  // The QKV epilogue: its shape must be the call's, and it needs the caches.
  kernels::DecodeQkvEpilogue e{.k_cache = buf.data(), .v_cache = buf.data(), .positions = nullptr};
  e.shape = {.T = 2, .slots = 2, .capacity = 4, .heads = 2, .kv_heads = 1, .head_dim = 8};
  const auto qkv_message = [&](int64_t T, int64_t N) {
    return test::thrown_message([&] {
      dl::run(emu::Launch{}, {.y = buf.data(),
                              .x = buf.data(),
                              .w = buf.data(),
                              .T = T,
                              .K = 8,
                              .N = N,
                              .epilogue = DecodeLinearEpilogue::kQkv,
                              .qkv = e});
    });
  };
  EXPECT_NE(qkv_message(2, 32).find("both caches and the positions"), std::string::npos);
  const std::vector<int32_t> positions{0, 1};
  e.positions = positions.data();
  EXPECT_NE(qkv_message(2, 30).find("a row of 32"), std::string::npos);
  EXPECT_NE(qkv_message(1, 32).find("T = 2"), std::string::npos);
  EXPECT_EQ(qkv_message(2, 32), "");
}

}  // namespace
}  // namespace sg
