// Mamba2 parameter init: pure functions of (seed, stream, index); A_log, dt_bias (through softplus),
// D and the conv within Megatron's distributions; the dt floor; validation messages naming the key.
#include "reference/mamba_init.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "test_util.h"

namespace sg {
namespace {

using ref::MambaInitSpec;

double mean(const std::vector<double>& v) {
  double s = 0.0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

TEST(MambaInit, UniformIsAPureFunctionOfSeedStreamAndIndex) {
  EXPECT_EQ(ref::mamba_init_uniform(7, 3, 11), ref::mamba_init_uniform(7, 3, 11));
  EXPECT_NE(ref::mamba_init_uniform(7, 3, 11), ref::mamba_init_uniform(8, 3, 11));
  EXPECT_NE(ref::mamba_init_uniform(7, 3, 11), ref::mamba_init_uniform(7, 4, 11));
  EXPECT_NE(ref::mamba_init_uniform(7, 3, 11), ref::mamba_init_uniform(7, 3, 12));
  EXPECT_NE(ref::mamba_init_uniform(1ull << 40, 3, 11), ref::mamba_init_uniform(0, 3, 11)) << "seed high bits used";
  std::vector<double> u(20000);
  for (size_t i = 0; i < u.size(); ++i) u[i] = ref::mamba_init_uniform(5, 0, i);
  EXPECT_GE(*std::min_element(u.begin(), u.end()), 0.0);
  EXPECT_LT(*std::max_element(u.begin(), u.end()), 1.0);
  EXPECT_NEAR(mean(u), 0.5, 0.01);  // std of the mean: 0.29 / sqrt(20000) = 0.002
}

TEST(MambaInit, ALogIsLogOfUniformInTheRange) {
  const int64_t H = 4096;
  std::vector<float> A_log(H), again(H);
  ref::mamba_init_A_log(A_log.data(), H, MambaInitSpec{}, 42, 9);
  ref::mamba_init_A_log(again.data(), H, MambaInitSpec{}, 42, 9);
  EXPECT_EQ(A_log, again);
  std::vector<double> A(H);
  for (int64_t h = 0; h < H; ++h) A[h] = std::exp(static_cast<double>(A_log[h]));
  EXPECT_GE(*std::min_element(A.begin(), A.end()), 1.0 - 1e-6);
  EXPECT_LE(*std::max_element(A.begin(), A.end()), 16.0 + 1e-5);
  EXPECT_NEAR(mean(A), 8.5, 0.25);  // U(1, 16): mean 8.5, std of the mean 4.33 / 64 = 0.07
  MambaInitSpec fixed;
  fixed.A_init_min = fixed.A_init_max = 4.0;
  ref::mamba_init_A_log(A_log.data(), 3, fixed, 1, 0);
  for (int h = 0; h < 3; ++h) EXPECT_NEAR(A_log[h], std::log(4.0), 1e-7);
}

TEST(MambaInit, DtBiasIsInverseSoftplusOfLogUniformDt) {
  const int64_t H = 4096;
  const MambaInitSpec spec;  // dt in [0.001, 0.1], floor 1e-4 (inactive)
  std::vector<float> dt_bias(H);
  ref::mamba_init_dt_bias(dt_bias.data(), H, spec, 3, 1);
  std::vector<double> log_dt(H);
  for (int64_t h = 0; h < H; ++h) {
    const double dt = ref::softplus(dt_bias[h]);
    EXPECT_GE(dt, spec.dt_min * (1 - 1e-5)) << "h=" << h;
    EXPECT_LE(dt, spec.dt_max * (1 + 1e-5)) << "h=" << h;
    log_dt[h] = std::log(dt);
  }
  // log dt ~ U(log 0.001, log 0.1): mean -4.605, std 1.33 / sqrt(4096) = 0.02.
  EXPECT_NEAR(mean(log_dt), 0.5 * (std::log(0.001) + std::log(0.1)), 0.1);
}

TEST(MambaInit, DtFloorApplies) {
  MambaInitSpec spec;
  spec.dt_min = 1e-5;
  spec.dt_max = 1e-3;
  spec.dt_init_floor = 1e-4;
  const int64_t H = 1000;
  std::vector<float> dt_bias(H);
  ref::mamba_init_dt_bias(dt_bias.data(), H, spec, 11, 2);
  int at_floor = 0;
  for (int64_t h = 0; h < H; ++h) {
    const double dt = ref::softplus(dt_bias[h]);
    EXPECT_GE(dt, 1e-4 * (1 - 1e-4)) << "h=" << h;
    if (std::fabs(dt - 1e-4) < 1e-8) ++at_floor;
  }
  // Half of log-uniform [1e-5, 1e-3] lies below 1e-4.
  EXPECT_GT(at_floor, 400);
  EXPECT_LT(at_floor, 600);
}

TEST(MambaInit, SoftplusInverseRoundTrips) {
  for (double y : {1e-4, 1e-3, 0.05, 0.5, 3.0, 30.0}) {
    EXPECT_NEAR(ref::softplus(ref::inverse_softplus(y)), y, 1e-12 * (1.0 + y)) << "y=" << y;
  }
}

TEST(MambaInit, DIsOnesAndConvIsUniform) {
  std::vector<float> D(5, 0.0f);
  ref::mamba_init_D(D.data(), 5);
  EXPECT_EQ(D, std::vector<float>(5, 1.0f));

  const int64_t C = 3000, W = 4;
  std::vector<float> w(C * W), b(C);
  ref::mamba_init_conv_weight(w.data(), C, W, MambaInitSpec{}, 5, 20);
  ref::mamba_init_conv_bias(b.data(), C, W, 5, 21);
  // PyTorch's Conv1d default for fan_in 4: U(-0.5, 0.5) for both.
  auto check = [](const std::vector<float>& v, double bound, const char* what) {
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    EXPECT_GE(*lo, -bound) << what;
    EXPECT_LT(*hi, bound) << what;
    EXPECT_LT(*lo, -0.9 * bound) << what << " does not fill its range";
    EXPECT_GT(*hi, 0.9 * bound) << what << " does not fill its range";
  };
  check(w, 0.5, "conv1d_weight");
  check(b, 0.5, "conv1d_bias");
  EXPECT_NE(std::vector<float>(w.begin(), w.begin() + C), b) << "different streams must differ";
  MambaInitSpec spec;
  spec.conv_init = 0.1;
  ref::mamba_init_conv_weight(w.data(), C, W, spec, 5, 20);
  check(w, 0.1, "conv1d_weight with conv_init 0.1");
}

TEST(MambaInit, ValidationNamesTheKey) {
  MambaInitSpec a;
  a.A_init_min = 0.0;
  EXPECT_NE(test::thrown_message([&] { ref::validate_mamba_init(a); }).find("A_init_range"), std::string::npos);
  MambaInitSpec d;
  d.dt_min = 0.2;
  EXPECT_NE(test::thrown_message([&] { ref::validate_mamba_init(d); }).find("dt_max"), std::string::npos);
  MambaInitSpec f;
  f.dt_init_floor = -1.0;
  EXPECT_NE(test::thrown_message([&] { ref::validate_mamba_init(f); }).find("dt_init_floor"), std::string::npos);
  float out[2];
  EXPECT_THROW(ref::mamba_init_A_log(out, 2, a, 1, 0), Error);
  EXPECT_NO_THROW(ref::validate_mamba_init(MambaInitSpec{}));
}

}  // namespace
}  // namespace sg
