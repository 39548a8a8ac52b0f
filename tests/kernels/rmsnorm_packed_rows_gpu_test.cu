// GPU RMSNorm over packed rows (qk_layernorm's query or key heads inside the qkv projection, kernels/rmsnorm.h)
// against reference/rmsnorm on the gathered rows: the cases, tolerances and checks of rmsnorm_packed_rows_case.h
// (shared with the CPU-emulated test), plus Qwen3-like shapes (16 query heads and 8 key heads of 128 over 4099
// tokens). Outputs and the dweight scratch start poisoned (NaN) or as the input (in place); every element outside
// the rows must keep its bits; the forward and the backward repeat bitwise, eagerly and in a CUDA-graph replay.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernel_gpu_test_util.h"
#include "kernels/rmsnorm.h"
#include "kernels/rmsnorm_packed_rows_case.h"

namespace {

using namespace sg;
using namespace sg::test;

std::vector<PackedRowsShape> gpu_shapes() {
  std::vector<PackedRowsShape> shapes = packed_rows_shapes();
  // Qwen3 with 16 query heads and 8 KV heads of 128: qkv_dim (16 + 2 x 8) x 128; the key heads start at 2048.
  shapes.push_back({4099, 16, 128, 4096, 0});
  shapes.push_back({4099, 8, 128, 4096, 2048, true});
  return shapes;
}

size_t at_least_one(int64_t n) {
  return static_cast<size_t>(std::max<int64_t>(n, 1));
}

class RmsNormPackedRowsGpu : public ::testing::TestWithParam<PackedRowsShape> {};

TEST_P(RmsNormPackedRowsGpu, ForwardAndBackwardMatchReferenceOnlyInTheirRows) {
  const PackedRowsCase c = make_packed_rows_case(GetParam());
  const int64_t n = c.elements(), H = c.s.H;
  const std::vector<bf16> poisoned = to_bf16(std::vector<float>(n, NAN));
  DeviceBuffer<bf16> d_x(at_least_one(n)), d_out(at_least_one(n)), d_dy(at_least_one(n)), d_w(H);
  DeviceBuffer<float> d_rstd(at_least_one(c.rows())), d_dw(H),
      d_scratch(at_least_one(static_cast<int64_t>(c.scratch_bytes() / sizeof(float))));
  d_x.upload(c.x);
  d_w.upload(c.weight);
  cuda::Stream stream;

  // Forward into a poisoned buffer, then in place over x.
  const auto forward = [&](bf16* out, const bf16* in) {
    return [&c, &d_rstd, &d_w, out, in](cudaStream_t s) {
      kernels::rmsnorm_forward(s, c.forward(out, d_rstd.get(), in, d_w.get()));
    };
  };
  const auto prepare_forward = [&] {
    d_out.upload(poisoned);
    d_rstd.poison();
  };
  prepare_forward();
  forward(d_out.get(), d_x.get())(stream);
  sync_device();
  const auto out = d_out.download();
  const auto rstd = d_rstd.download();
  expect_packed_forward(c, out, rstd, poisoned);
  expect_bitwise_repeatable(
      stream, prepare_forward, forward(d_out.get(), d_x.get()),
      [&] {
        return Snapshot{named_bytes("out", d_out.download()), named_bytes("rstd", d_rstd.download())};
      },
      Snapshot{named_bytes("out", out), named_bytes("rstd", rstd)});
  d_out.upload(c.x);
  forward(d_out.get(), d_out.get())(stream);
  sync_device();
  const auto in_place = d_out.download();
  EXPECT_TRUE(bitwise_equal(c.gather(in_place), c.gather(out))) << "forward in place differs";
  EXPECT_TRUE(c.same_outside_rows(in_place, c.x)) << "forward in place wrote outside its rows";

  // Backward from the reference's rstd, into a poisoned buffer, then in place over dout.
  d_rstd.upload(c.rstd_input());
  d_dy.upload(c.dout);
  const auto backward = [&](bf16* din, const bf16* dout) {
    return [&c, &d_dw, &d_scratch, &d_x, &d_w, &d_rstd, din, dout](cudaStream_t s) {
      kernels::rmsnorm_backward(s,
                                c.backward(din, d_dw.get(), d_scratch.get(), dout, d_x.get(), d_w.get(), d_rstd.get()));
    };
  };
  const auto prepare_backward = [&] {
    d_out.upload(poisoned);
    d_dw.upload(c.dweight0);
    d_scratch.poison();
  };
  prepare_backward();
  backward(d_out.get(), d_dy.get())(stream);
  sync_device();
  const auto din = d_out.download();
  const auto dw = d_dw.download();
  expect_packed_backward(c, din, dw, poisoned);
  expect_bitwise_repeatable(
      stream, prepare_backward, backward(d_out.get(), d_dy.get()),
      [&] {
        return Snapshot{named_bytes("din", d_out.download()), named_bytes("dweight", d_dw.download())};
      },
      Snapshot{named_bytes("din", din), named_bytes("dweight", dw)});
  d_dw.upload(c.dweight0);
  backward(d_dy.get(), d_dy.get())(stream);
  sync_device();
  const auto din_in_place = d_dy.download();
  EXPECT_TRUE(bitwise_equal(c.gather(din_in_place), c.gather(din))) << "backward in place differs";
  EXPECT_TRUE(c.same_outside_rows(din_in_place, c.dout)) << "backward in place wrote outside its rows";
  EXPECT_TRUE(bitwise_equal(d_dw.download(), dw));
}

INSTANTIATE_TEST_SUITE_P(Shapes, RmsNormPackedRowsGpu, ::testing::ValuesIn(gpu_shapes()),
                         [](const auto& info) { return packed_rows_name(info.param); });

}  // namespace
