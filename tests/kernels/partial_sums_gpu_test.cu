// add_partial_column_sums: the column sums of a [rows, cols] fp32 partial matrix ADDED into one or more
// destination segments, against fp64 sums (relative error < kFp32RelTol, 1e-5), bitwise repeatable, and
// nothing added for zero rows.
#include <gtest/gtest.h>

#include <vector>

#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernels/partial_sums.h"
#include "kernel_gpu_test_util.h"

namespace {

using namespace sg;
using namespace sg::test;

TEST(PartialColumnSumsGpu, AddsColumnSumsIntoSegments) {
  for (int64_t rows : {1, 7, 8, 9, 300}) {
    const int64_t a_cols = 37, b_cols = 70, ld = a_cols + b_cols;
    const auto partials = random_normal(rows * ld, 10 + rows);
    const auto a0 = random_normal(a_cols, 20 + rows), b0 = random_normal(b_cols, 30 + rows);
    std::vector<float> a_ref(a_cols), b_ref(b_cols);
    for (int64_t c = 0; c < ld; ++c) {
      double s = 0.0;
      for (int64_t r = 0; r < rows; ++r) s += partials[r * ld + c];
      if (c < a_cols) {
        a_ref[c] = static_cast<float>(a0[c] + s);
      } else {
        b_ref[c - a_cols] = static_cast<float>(b0[c - a_cols] + s);
      }
    }
    DeviceBuffer<float> d_p(rows * ld), d_a(a_cols), d_b(b_cols);
    d_p.upload(partials);
    cuda::Stream stream;
    auto run = [&] {
      d_a.upload(a0);
      d_b.upload(b0);
      kernels::add_partial_column_sums(stream, d_p.get(), rows, {{d_a.get(), a_cols}, {d_b.get(), b_cols}});
      sync_device();
    };
    run();
    const auto a = d_a.download(), b = d_b.download();
    EXPECT_LT(relative_error(a, a_ref), kFp32RelTol) << "rows=" << rows;
    EXPECT_LT(relative_error(b, b_ref), kFp32RelTol) << "rows=" << rows;
    run();
    EXPECT_TRUE(bitwise_equal(d_a.download(), a));
    EXPECT_TRUE(bitwise_equal(d_b.download(), b));
  }
}

TEST(PartialColumnSumsGpu, ZeroRowsAddNothingAndBadSegmentsThrow) {
  const auto a0 = random_normal(16, 1);
  DeviceBuffer<float> d_a(16);
  d_a.upload(a0);
  cuda::Stream stream;
  kernels::add_partial_column_sums(stream, nullptr, 0, {{d_a.get(), 16}});
  sync_device();
  EXPECT_TRUE(bitwise_equal(d_a.download(), a0));
  EXPECT_THROW(kernels::add_partial_column_sums(stream, d_a.get(), 1, {{nullptr, 16}}), Error);
  EXPECT_THROW(kernels::add_partial_column_sums(stream, d_a.get(), 1, {}), Error);
}

}  // namespace
