// GPU per-group biases of the grouped linears (kernels/grouped_linear_bias.h) against the CPU twin
// (reference/grouped_gemm) on the same bf16 inputs: the MoE layer's layouts (dropless, capacity padding with unused
// rows, empty groups first, middle and last, every group empty, all rows on one group, skewed odd counts, 128 groups),
// widths that are and are not multiples of 8 (13, 72, 200, 2048 + 3, 5632), and up to 65536 rows (256 chunks on one
// group). Cases and checks: grouped_linear_bias_case.h. The scratch is poisoned (NaN) before every run, and rows
// outside every segment hold NaN in dy. An eager rerun and a CUDA-graph replay are bitwise identical; one captured
// graph follows new counts written into the same device buffers; a bf16 gradient is the fp32 sum rounded once.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cuda/device.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernel_gpu_test_util.h"
#include "kernels/grouped_linear_bias.h"
#include "kernels/grouped_linear_bias_case.h"

namespace {

using namespace sg;
using namespace sg::test;

std::vector<GroupedBiasShape> shapes() {
  return {packed_groups("one_group", 200, {77}),
          packed_groups("zero_groups", 72, {0, 37, 0, 129, 1, 0}),
          packed_groups("all_on_one", 136, {0, 0, 301, 0}),
          packed_groups("skewed_odd_cols", 13, {1, 255, 3, 0, 17, 129, 2, 64}, 5),
          capacity_groups("capacity_padding", 200, 48, {48, 0, 13, 47, 1}),
          capacity_groups("all_empty", 64, 16, {0, 0, 0}),
          random_groups("groups128", 72, 128, 40, 7),
          packed_groups("mixtral_fc1_width", 2048 + 3, {500, 0, 1200, 348}),
          packed_groups("wide", 5632, {300, 1, 0, 723}),
          packed_groups("all_rows_on_one_65536", 64, {0, 65536, 0})};
}

class DeviceCase {
 public:
  explicit DeviceCase(const GroupedBiasCase& c)
      : c_(c),
        y_(c.y0.size()),
        bias_(c.bias.size()),
        dy_(c.dy.size()),
        counts_(c.s.counts.size()),
        offsets_(c.s.offsets.size()),
        dbias_(c.dst0.size()),
        dbias16_(c.dst0.size()),
        scratch_(c.scratch_bytes() / sizeof(float)) {
    bias_.upload(c.bias);
    dy_.upload(c.dy);
    counts_.upload(c.s.counts);
    offsets_.upload(c.s.offsets);
  }
  void prepare() {
    y_.upload(c_.y0);
    dbias_.upload(c_.dst0);
    dbias16_.upload(to_bf16(round_bf16(c_.dst0)));
    scratch_.poison();
  }
  void enqueue(cudaStream_t stream) {
    kernels::grouped_bias_forward(stream, {.y = y_.get(),
                                           .bias = bias_.get(),
                                           .counts = counts_.get(),
                                           .offsets = offsets_.get(),
                                           .num_groups = c_.groups(),
                                           .max_rows = c_.s.max_rows,
                                           .cols = c_.s.cols});
    for (const kernels::FloatBuffer dst : {kernels::FloatBuffer(dbias_.get()), kernels::FloatBuffer(dbias16_.get())}) {
      kernels::grouped_bias_backward(stream, {.dst = dst,
                                              .scratch = scratch_.get(),
                                              .scratch_bytes = c_.scratch_bytes(),
                                              .dy = dy_.get(),
                                              .counts = counts_.get(),
                                              .offsets = offsets_.get(),
                                              .num_groups = c_.groups(),
                                              .max_rows = c_.s.max_rows,
                                              .cols = c_.s.cols});
    }
  }
  Snapshot snapshot() const {
    return {named_bytes("y", y_.download()), named_bytes("dbias", dbias_.download()),
            named_bytes("dbias bf16", dbias16_.download())};
  }
  std::vector<bf16> y() const { return y_.download(); }
  std::vector<float> dbias() const { return dbias_.download(); }
  std::vector<bf16> dbias16() const { return dbias16_.download(); }
  DeviceBuffer<int32_t>& counts() { return counts_; }
  DeviceBuffer<int32_t>& offsets() { return offsets_; }

 private:
  const GroupedBiasCase& c_;
  DeviceBuffer<bf16> y_, bias_, dy_;
  DeviceBuffer<int32_t> counts_, offsets_;
  DeviceBuffer<float> dbias_;
  DeviceBuffer<bf16> dbias16_;
  DeviceBuffer<float> scratch_;
};

class GroupedBiasGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no GPU";
  }
};

TEST_F(GroupedBiasGpu, MatchesTheTwinAndIsBitwiseRepeatable) {
  cuda::Stream stream;
  for (const GroupedBiasShape& shape : shapes()) {
    SCOPED_TRACE(shape.name);
    const GroupedBiasCase c = make_grouped_bias_case(shape);
    DeviceCase d(c);
    d.prepare();
    d.enqueue(stream);
    sync_device();
    expect_grouped_bias_forward(c, d.y());
    const std::vector<float> dbias = d.dbias();
    expect_grouped_bias_backward(c, dbias);
    // The bf16 gradient from the rounded start: the fp32 launch's sum on the same start, rounded once. (The fp32
    // launch started from the unrounded dst0, so compare the sums: got16 - start16 vs got32 - dst0, both rounded.)
    const std::vector<float> got16 = to_float(d.dbias16());
    const std::vector<float> start16 = round_bf16(c.dst0);
    int64_t off = 0;
    for (size_t i = 0; i < got16.size(); ++i) {
      const double sum32 = static_cast<double>(dbias[i]) - c.dst0[i];
      const double want = static_cast<double>(start16[i]) + sum32;
      if (std::fabs(got16[i] - want) > std::fabs(want) / 256 + kGroupedBiasTol * c.dbias_scale[i]) ++off;
    }
    EXPECT_EQ(off, 0) << "bf16 gradient elements more than half a bf16 step from the fp32 sum";
    expect_bitwise_repeatable(
        stream, [&] { d.prepare(); }, [&](cudaStream_t s) { d.enqueue(s); }, [&] { return d.snapshot(); },
        d.snapshot());
  }
}

// One graph captured on one routing, replayed after other counts and offsets (same group count and buffer rows) were
// written into the same device buffers: each replay matches the twin of its own routing.
TEST_F(GroupedBiasGpu, AGraphFollowsTheCountsInDeviceMemory) {
  cuda::Stream stream;
  const std::vector<GroupedBiasShape> routings = {
      capacity_groups("capacity", 72, 40, {40, 0, 7, 39}), capacity_groups("capacity_other", 72, 40, {0, 40, 40, 1}),
      packed_groups("packed_same_rows", 72, {10, 0, 100, 50}), capacity_groups("capacity_empty", 72, 40, {0, 0, 0, 0})};
  std::vector<GroupedBiasCase> cases;
  for (const auto& r : routings) cases.push_back(make_grouped_bias_case(r, /*nan_outside=*/false));
  for (const auto& c : cases) {  // the same rows, biases and start: only the routing differs
    ASSERT_TRUE(bitwise_equal(c.y0, cases[0].y0) && bitwise_equal(c.dy, cases[0].dy) &&
                bitwise_equal(c.bias, cases[0].bias) && bitwise_equal(c.dst0, cases[0].dst0));
  }
  DeviceCase d(cases[0]);
  cudaGraph_t graph = nullptr;
  SG_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  d.enqueue(stream);
  SG_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  SG_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (const GroupedBiasCase& c : cases) {
    SCOPED_TRACE(c.s.name);
    d.counts().upload(c.s.counts);
    d.offsets().upload(c.s.offsets);
    d.prepare();
    SG_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    SG_CUDA_CHECK(cudaStreamSynchronize(stream));
    expect_grouped_bias_forward(c, d.y());
    expect_grouped_bias_backward(c, d.dbias());
  }
  SG_CUDA_CHECK(cudaGraphExecDestroy(exec));
  SG_CUDA_CHECK(cudaGraphDestroy(graph));
}

}  // namespace
