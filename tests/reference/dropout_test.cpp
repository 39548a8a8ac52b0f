// Dropout reference: the mask is Philox's (u >= p), its statistics, exact reproducibility, the backward
// applies the same mask, and the mask changes with the seed, offset and site.
#include "reference/dropout.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "test_util.h"

namespace sg {
namespace {

TEST(DropoutReference, MaskIsPhiloxAndKeptValuesAreScaled) {
  const int64_t n = 1003;
  const float p = 0.3f;
  const rng::RngState state{1234, 7};
  const auto in = test::random_normal(n, 101);
  std::vector<float> out(n);
  ref::dropout_forward(out.data(), in.data(), n, p, state, 5);
  for (int64_t i = 0; i < n; ++i) {
    const bool keep = rng::philox_uniform(state.seed, state.offset, 5, i) >= p;
    EXPECT_EQ(out[i], keep ? in[i] * (1.0f / (1.0f - p)) : 0.0f) << i;
  }
}

TEST(DropoutReference, DropFractionIsP) {
  const int64_t n = 1 << 20;
  const std::vector<float> in(n, 1.0f);
  std::vector<float> out(n);
  for (float p : {0.1f, 0.5f, 0.9f}) {
    ref::dropout_forward(out.data(), in.data(), n, p, rng::RngState{42, 0}, 3);
    int64_t dropped = 0;
    double sum = 0.0;
    for (float v : out) {
      dropped += v == 0.0f;
      sum += v;
    }
    const double sigma = std::sqrt(p * (1.0 - p) / n);
    EXPECT_NEAR(double(dropped) / n, p, 6 * sigma) << "p = " << p;
    // Inverted dropout keeps the expectation: mean(out) ~ 1.
    EXPECT_NEAR(sum / n, 1.0, 6 * sigma / (1.0 - p)) << "p = " << p;
  }
}

TEST(DropoutReference, ReproducibleAndKeyedBySeedOffsetSite) {
  const int64_t n = 4096;
  const auto in = test::random_normal(n, 111);
  auto run = [&](rng::RngState s, uint32_t site) {
    std::vector<float> out(n);
    ref::dropout_forward(out.data(), in.data(), n, 0.25f, s, site);
    return out;
  };
  const auto base = run({9, 2}, 1);
  EXPECT_EQ(base, run({9, 2}, 1));
  EXPECT_NE(base, run({10, 2}, 1));
  EXPECT_NE(base, run({9, 3}, 1));
  EXPECT_NE(base, run({9, 2}, 2));
  // The high half of the seed matters too.
  EXPECT_NE(base, run({9 + (uint64_t(1) << 32), 2}, 1));
}

// The generator offset advances once per microbatch of the global batch: 16384 microbatches a step pass 2^32 of
// them at step 262145, whose first microbatch must not draw step 1's first mask again (only the offset's low 32
// bits entered the Philox counter before). Offsets below 2^32 keep the numbers they always had (BitsLayout in
// tests/core/philox_test.cpp).
TEST(DropoutReference, OffsetsPast2To32DrawNewMasks) {
  const int64_t n = 4096;
  const auto in = test::random_normal(n, 141);
  auto run = [&](uint64_t offset) {
    std::vector<float> out(n);
    ref::dropout_forward(out.data(), in.data(), n, 0.25f, rng::RngState{1234, offset}, 1);
    return out;
  };
  constexpr uint64_t k2To32 = uint64_t{1} << 32;
  const uint64_t step_262145 = uint64_t{262144} * 16384;  // 2^32: the first microbatch of step 262145
  EXPECT_EQ(step_262145, k2To32);
  EXPECT_NE(run(0), run(step_262145));
  EXPECT_NE(run(5), run(k2To32 + 5));
  EXPECT_NE(run(k2To32 + 5), run(2 * k2To32 + 5));
  EXPECT_NE(run(7), run((uint64_t{1} << 47) + 7));
  EXPECT_EQ(run(k2To32 + 5), run(k2To32 + 5));
}

TEST(DropoutReference, BackwardUsesTheForwardMask) {
  const int64_t n = 777;
  const float p = 0.4f;
  const rng::RngState state{5, 6};
  const auto in = test::random_normal(n, 121);
  const auto dout = test::random_normal(n, 122);
  std::vector<float> out(n), din(n);
  ref::dropout_forward(out.data(), in.data(), n, p, state, 8);
  ref::dropout_backward(din.data(), dout.data(), n, p, state, 8);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(out[i] == 0.0f, din[i] == 0.0f) << i;
    if (out[i] != 0.0f) {
      ++kept;
      EXPECT_EQ(din[i], dout[i] * (1.0f / (1.0f - p)));
    }
  }
  EXPECT_GT(kept, n / 3);
  EXPECT_LT(kept, n - n / 3);
}

TEST(DropoutReference, ZeroPCopiesAndBadPThrows) {
  const auto in = test::random_normal(100, 131);
  std::vector<float> out(100);
  ref::dropout_forward(out.data(), in.data(), 100, 0.0f, rng::RngState{1, 1}, 0);
  EXPECT_EQ(out, in);
  EXPECT_THROW(ref::dropout_forward(out.data(), in.data(), 100, 1.0f, rng::RngState{1, 1}, 0), Error);
  EXPECT_THROW(ref::dropout_forward(out.data(), in.data(), 100, -0.1f, rng::RngState{1, 1}, 0), Error);
}

}  // namespace
}  // namespace sg
