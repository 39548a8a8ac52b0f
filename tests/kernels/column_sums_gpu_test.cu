// GPU column_sums (the bias gradient of a linear layer: dst[c] += sum_r in[r, c]) against reference/column_sums on
// the same bf16 inputs, packed and strided rows, widths that are and are not multiples of the block's columns, up to
// a Qwen2-7B QKV gradient of 64k tokens. Cases and tolerance: column_sums_case.h. The scratch is poisoned before
// every run; a second eager run and a CUDA-graph replay are bitwise identical, and so are the packed and strided
// layouts of one matrix (the 16-byte and the scalar path). Into a bf16 main gradient: bit for bit the fp32 launch's
// result on the rounded start, rounded once. Bad parameters throw naming the field. Row scales (random, zeros,
// negatives: the MoE shared_expert_gate's weight gradient) against the twin's scaled sums, and a scale of 1 on every
// row gives the unscaled bits.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/strings.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernel_gpu_test_util.h"
#include "kernels/column_sums.h"
#include "kernels/column_sums_case.h"

namespace {

using namespace sg;
using namespace sg::test;

const ColumnSumsShape kShapes[] = {
    {0, 896, 896},            // nothing added
    {1, 7, 7},                // one row, a partial column block
    {5, 33, 40},              // strided, scalar path
    {37, 1000, 1003},         // scalar path, odd stride
    {300, 24, 24, true},      // skewed rows
    {3000, 33, 35, true},     // more rows than slots (1024), scalar path, skewed
    {4097, 1000, 1000},       // 16-byte path, a partial last column block
    {20000, 999, 999},        // scalar path, ~20 rows a slot
    {8192, 1152, 1152},       // Qwen2-0.5B QKV (896 + 2 * 128), 4 x 2048 tokens
    {2048, 1152, 1280},       // strided rows, 16-byte path
    {4096, 10240, 10240},     // a wide QKV
    {65536, 4608, 4608},      // Qwen2-7B QKV (3584 + 2 * 512), 64k tokens
    {65536, 896, 904, true},  // 64k tokens, strided, skewed
    // Row scales: zero rows, one row, rows not a multiple of the slots, the gate weight gradient of 8192 x 2048.
    {0, 2048, 2048, false, true},
    {1, 7, 7, false, true},
    {3001, 1000, 1003, true, true},
    {4097, 1000, 1000, false, true},
    {8192, 2048, 2048, false, true},
    {65536, 3584, 3584, false, true},
};

// Each shape's case, made once for the tests below (the 64k x 4608 one takes seconds on the host).
const ColumnSumsCase& case_for(const ColumnSumsShape& s) {
  static std::map<std::tuple<int64_t, int64_t, int64_t, bool, bool>, ColumnSumsCase> cases;
  const auto key = std::make_tuple(s.rows, s.cols, s.stride, s.skewed, s.scaled);
  auto it = cases.find(key);
  if (it == cases.end()) it = cases.emplace(key, make_column_sums_case(s, /*keep_float_input=*/false)).first;
  return it->second;
}

// The case's row scales on the device (empty when the case has none).
struct DeviceRowScale {
  DeviceBuffer<float> buf;
  const float* ptr;
  explicit DeviceRowScale(const ColumnSumsCase& c) : buf(c.row_scale.size()), ptr(c.s.scaled ? buf.get() : nullptr) {
    if (!c.row_scale.empty()) buf.upload(c.row_scale);
  }
};

class ColumnSumsGpu : public ::testing::TestWithParam<ColumnSumsShape> {};

TEST_P(ColumnSumsGpu, MatchesReferenceAndIsDeterministic) {
  const ColumnSumsCase& c = case_for(GetParam());
  const ColumnSumsShape& s = c.s;
  DeviceBuffer<bf16> d_in(c.in.size());
  DeviceBuffer<float> d_dst(s.cols), d_scratch(c.scratch_floats());
  const DeviceRowScale scale(c);
  if (!c.in.empty()) d_in.upload(c.in);
  auto prepare = [&] {
    d_dst.upload(c.dst0);
    d_scratch.poison();
    sync_device();
  };
  auto enqueue = [&](cudaStream_t st) {
    kernels::column_sums(st, c.params(d_dst.get(), d_scratch.get(), d_in.get(), scale.ptr));
  };
  auto snapshot = [&] { return Snapshot{named_bytes("dst", d_dst.download())}; };
  cuda::Stream stream;
  prepare();
  enqueue(stream);
  sync_device();
  const Snapshot first = snapshot();
  expect_column_sums(c, d_dst.download());
  expect_bitwise_repeatable(stream, prepare, enqueue, snapshot, first);
}

TEST_P(ColumnSumsGpu, IntoBf16GradientRoundsTheFp32SumOnce) {
  const ColumnSumsCase& c = case_for(GetParam());
  const std::vector<float> start = round_bf16(c.dst0);
  DeviceBuffer<bf16> d_in(c.in.size()), d_dst16(c.s.cols);
  DeviceBuffer<float> d_dst32(c.s.cols), d_scratch(c.scratch_floats());
  const DeviceRowScale scale(c);
  if (!c.in.empty()) d_in.upload(c.in);
  d_dst32.upload(start);
  d_dst16.upload(to_bf16(start));
  d_scratch.poison();
  cuda::Stream stream;
  kernels::column_sums(stream, c.params(d_dst32.get(), d_scratch.get(), d_in.get(), scale.ptr));
  kernels::column_sums(stream, c.params(d_dst16.get(), d_scratch.get(), d_in.get(), scale.ptr));
  sync_device();
  const std::vector<float> got = to_float(d_dst16.download());
  EXPECT_TRUE(bitwise_equal(got, round_bf16(d_dst32.download())));
  if (c.s.rows > 0) {
    EXPECT_NE(got, start) << "nothing was added";
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, ColumnSumsGpu, ::testing::ValuesIn(kShapes), [](const auto& info) {
  const ColumnSumsShape& s = info.param;
  return strprintf("rows%lld_cols%lld_stride%lld%s%s", static_cast<long long>(s.rows), static_cast<long long>(s.cols),
                   static_cast<long long>(s.stride), s.skewed ? "_skewed" : "", s.scaled ? "_scaled" : "");
});

// One matrix in packed rows (the 16-byte path) and in rows of an odd stride (the scalar path): the same bits.
TEST(ColumnSumsGpuMisc, PackedAndStridedLayoutsGiveTheSameBits) {
  const ColumnSumsCase c = make_column_sums_case({4097, 1000, 1000});
  const int64_t stride = 1003;
  const std::vector<bf16> strided = c.with_stride(stride);
  DeviceBuffer<bf16> d_packed(c.in.size()), d_strided(strided.size());
  DeviceBuffer<float> d_a(c.s.cols), d_b(c.s.cols), d_scratch(c.scratch_floats());
  d_packed.upload(c.in);
  d_strided.upload(strided);
  d_a.upload(c.dst0);
  d_b.upload(c.dst0);
  d_scratch.poison();
  cuda::Stream stream;
  kernels::column_sums(stream, c.params(d_a.get(), d_scratch.get(), d_packed.get(), nullptr));
  d_scratch.poison();
  kernels::column_sums(stream, c.params(d_b.get(), d_scratch.get(), d_strided.get(), nullptr, stride));
  sync_device();
  const std::vector<float> a = d_a.download();
  expect_column_sums(c, a);
  EXPECT_TRUE(bitwise_equal(d_b.download(), a));
}

// Scaled, the same: packed (16-byte path) and strided (scalar path) rows give the same bits; and a scale of 1 on
// every row gives the bits of the unscaled launch on both paths.
TEST(ColumnSumsGpuMisc, RowScalesKeepTheBitsIndependentOfTheLayout) {
  const ColumnSumsCase c = make_column_sums_case({4097, 1000, 1000, false, true});
  const int64_t stride = 1003;
  const std::vector<bf16> strided = c.with_stride(stride);
  const std::vector<float> ones(static_cast<size_t>(c.s.rows), 1.0f);
  DeviceBuffer<bf16> d_packed(c.in.size()), d_strided(strided.size());
  DeviceBuffer<float> d_scale(c.row_scale.size()), d_ones(ones.size()), d_scratch(c.scratch_floats());
  d_packed.upload(c.in);
  d_strided.upload(strided);
  d_scale.upload(c.row_scale);
  d_ones.upload(ones);
  cuda::Stream stream;
  const auto run = [&](const bf16* in, const float* row_scale, int64_t row_stride) {
    DeviceBuffer<float> d_dst(c.s.cols);
    d_dst.upload(c.dst0);
    d_scratch.poison();
    kernels::column_sums(stream, c.params(d_dst.get(), d_scratch.get(), in, row_scale, row_stride));
    sync_device();
    return d_dst.download();
  };
  const std::vector<float> packed = run(d_packed.get(), d_scale.get(), -1);
  expect_column_sums(c, packed);
  EXPECT_TRUE(bitwise_equal(run(d_strided.get(), d_scale.get(), stride), packed));
  for (const auto& [in, row_stride] : {std::pair{d_packed.get(), int64_t{-1}}, std::pair{d_strided.get(), stride}}) {
    EXPECT_TRUE(bitwise_equal(run(in, d_ones.get(), row_stride), run(in, nullptr, row_stride)))
        << "row_stride " << row_stride;
  }
}

TEST(ColumnSumsGpuMisc, RejectsBadParamsNamingTheField) {
  DeviceBuffer<bf16> d_in(64);
  DeviceBuffer<float> d_dst(8), d_scratch(8);
  cuda::Stream stream;
  const kernels::ColumnSumsParams good{
      .dst = d_dst.get(), .scratch = d_scratch.get(), .scratch_bytes = 32, .in = d_in.get(), .rows = 4, .cols = 8};
  test::expect_bad_column_sums_params_named(good, [&](const kernels::ColumnSumsParams& p) {
    return thrown_message([&] { kernels::column_sums(stream, p); });
  });
  sync_device();
}

}  // namespace
