// add_partial_column_sums: the column sums of a [rows, cols] fp32 partial matrix ADDED into one or more
// destination segments, against its CPU twin (reference/partial_sums: fp64 sums) (relative error < kFp32RelTol, 1e-5), bitwise repeatable, and
// nothing added for zero rows. The batched form (many stacked matrices, one launch, destinations through a
// device offset table) adds bit for bit what one add_partial_column_sums per matrix adds, and leaves the
// elements between its destinations alone. Into bf16 destinations (a bf16 main gradient), both forms add bit for
// bit what the fp32 launch adds to the rounded values, rounded once.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernel_gpu_test_util.h"
#include "kernels/partial_sums.h"
#include "reference/partial_sums.h"

namespace {

using namespace sg;
using namespace sg::test;

TEST(PartialColumnSumsGpu, AddsColumnSumsIntoSegments) {
  for (int64_t rows : {1, 7, 8, 9, 300}) {
    const int64_t a_cols = 37, b_cols = 70, ld = a_cols + b_cols;
    const auto partials = random_normal(rows * ld, 10 + rows);
    const auto a0 = random_normal(a_cols, 20 + rows), b0 = random_normal(b_cols, 30 + rows);
    std::vector<float> a_ref = a0, b_ref = b0;
    ref::add_partial_column_sums(a_ref.data(), partials.data(), rows, ld, 0, a_cols);
    ref::add_partial_column_sums(b_ref.data(), partials.data(), rows, ld, a_cols, b_cols);
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

// Segments of either dtype in one launch (a conv's [weight | bias] row into bf16 and fp32 main gradients): each
// bf16 segment gets the fp32 launch's result on its rounded values, rounded; the fp32 one the fp32 launch's, exactly.
TEST(PartialColumnSumsGpu, SegmentsIntoBf16AreTheFp32ResultRoundedOnce) {
  const int64_t rows = 300, a_cols = 37, b_cols = 70, ld = a_cols + b_cols;
  const auto partials = random_normal(rows * ld, 61);
  const auto a0 = round_bf16(random_normal(a_cols, 62)), b0 = random_normal(b_cols, 63);
  DeviceBuffer<float> d_p(rows * ld), d_a32(a_cols), d_b32(b_cols), d_b(b_cols);
  DeviceBuffer<bf16> d_a16(a_cols);
  d_p.upload(partials);
  d_a32.upload(a0);
  d_b32.upload(b0);
  d_b.upload(b0);
  d_a16.upload(to_bf16(a0));
  sync_device();
  cuda::Stream stream;
  kernels::add_partial_column_sums(stream, d_p.get(), rows, {{d_a32.get(), a_cols}, {d_b32.get(), b_cols}});
  kernels::add_partial_column_sums(stream, d_p.get(), rows, {{d_a16.get(), a_cols}, {d_b.get(), b_cols}});
  sync_device();
  const std::vector<float> a = to_float(d_a16.download());
  EXPECT_TRUE(bitwise_equal(a, round_bf16(d_a32.download())));
  EXPECT_FALSE(bitwise_equal(a, a0)) << "nothing was added";
  EXPECT_TRUE(bitwise_equal(d_b.download(), d_b32.download()));
}

TEST(PartialColumnSumsGpu, ZeroRowsAddNothingAndBadSegmentsThrow) {
  const auto a0 = random_normal(16, 1);
  DeviceBuffer<float> d_a(16);
  d_a.upload(a0);
  cuda::Stream stream;
  kernels::add_partial_column_sums(stream, nullptr, 0, {{d_a.get(), 16}});
  sync_device();
  EXPECT_TRUE(bitwise_equal(d_a.download(), a0));
  EXPECT_THROW(kernels::add_partial_column_sums(stream, d_a.get(), 1, {{static_cast<float*>(nullptr), 16}}), Error);
  EXPECT_THROW(kernels::add_partial_column_sums(stream, d_a.get(), 1, {}), Error);
}

// Into bf16 destinations (a bf16 main gradient, ddp.grad_reduce_in_fp32=false): each column's sum is added to
// the widened value and rounded once, so the result is bit for bit the fp32 launch's on the rounded values,
// rounded; the gaps between destinations keep their bits.
TEST(PartialColumnSumsGpu, BatchedIntoBf16IsTheFp32ResultRoundedOnce) {
  const int64_t rows = 264, cols = 37, count = 3;
  std::vector<int64_t> offsets(count);
  for (int64_t k = 0; k < count; ++k) offsets[k] = (count - 1 - k) * (cols + 5) + 5;
  const int64_t dst_size = count * (cols + 5);
  const auto partials = random_normal(count * rows * cols, 41);
  const auto dst0 = round_bf16(random_normal(dst_size, 51));
  DeviceBuffer<float> d_p(count * rows * cols), d_fp32(dst_size);
  DeviceBuffer<bf16> d_bf16(dst_size);
  DeviceBuffer<int64_t> d_offsets(count);
  d_p.upload(partials);
  d_offsets.upload(offsets);
  d_fp32.upload(dst0);
  d_bf16.upload(to_bf16(dst0));
  sync_device();
  cuda::Stream stream;
  kernels::add_partial_column_sums_batched(stream, d_p.get(), rows, cols, count, d_fp32.get(), d_offsets.get());
  kernels::add_partial_column_sums_batched(stream, d_p.get(), rows, cols, count, d_bf16.get(), d_offsets.get());
  sync_device();
  const std::vector<float> got = to_float(d_bf16.download());
  EXPECT_TRUE(bitwise_equal(got, round_bf16(d_fp32.download())));
  EXPECT_FALSE(bitwise_equal(got, dst0)) << "nothing was added";
}

TEST(PartialColumnSumsGpu, BatchedEqualsOneCallPerMatrixBitwise) {
  struct Shape {
    int64_t rows, cols, count;
  };
  for (const Shape sh : {Shape{1, 256, 1}, Shape{9, 37, 3}, Shape{264, 768, 25}, Shape{264, 256, 9}}) {
    const auto [rows, cols, count] = sh;
    // Destinations in reverse matrix order with a gap of 5 floats before each: scattered, not contiguous.
    std::vector<int64_t> offsets(count);
    for (int64_t k = 0; k < count; ++k) offsets[k] = (count - 1 - k) * (cols + 5) + 5;
    const int64_t dst_size = count * (cols + 5);
    const auto partials = random_normal(count * rows * cols, 40 + rows);
    const auto dst0 = random_normal(dst_size, 50 + cols);
    DeviceBuffer<float> d_p(count * rows * cols), d_batched(dst_size), d_single(dst_size);
    DeviceBuffer<int64_t> d_offsets(count);
    d_p.upload(partials);
    d_offsets.upload(offsets);
    d_batched.upload(dst0);
    d_single.upload(dst0);
    cuda::Stream stream;
    kernels::add_partial_column_sums_batched(stream, d_p.get(), rows, cols, count, d_batched.get(), d_offsets.get());
    for (int64_t k = 0; k < count; ++k) {
      kernels::add_partial_column_sums(stream, d_p.get() + k * rows * cols, rows, {{d_single.get() + offsets[k], cols}});
    }
    sync_device();
    const auto batched = d_batched.download();
    EXPECT_TRUE(bitwise_equal(batched, d_single.download())) << "rows=" << rows << " cols=" << cols;
    std::vector<float> expected = dst0;
    for (int64_t k = 0; k < count; ++k) {
      ref::add_partial_column_sums(expected.data() + offsets[k], partials.data() + k * rows * cols, rows, cols, 0,
                                   cols);
    }
    EXPECT_LT(relative_error(batched, expected), kFp32RelTol) << "rows=" << rows << " cols=" << cols;
    for (int64_t k = 0; k < count; ++k) {
      for (int64_t g = 0; g < 5; ++g) {
        const int64_t i = offsets[k] - 5 + g;
        EXPECT_EQ(std::memcmp(&batched[i], &dst0[i], sizeof(float)), 0) << "gap element " << i << " written";
      }
    }
  }
  cuda::Stream stream;
  EXPECT_THROW(kernels::add_partial_column_sums_batched(stream, nullptr, 1, 0, 1, static_cast<float*>(nullptr), nullptr), Error);
}

}  // namespace
