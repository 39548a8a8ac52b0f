// cuBLASLt GEMM helpers against reference/linear on fresh random inputs.
// Inputs are rounded to bf16 on the host so the CPU reference sees exactly what the GPU sees.
// Tolerances: bf16 outputs (LinearForward, LinearBackwardInput) relative error < kBf16RelTol (1e-2)
// against the fp32 reference (the bf16 rounding of the output alone is ~2e-3); the fp32 weight gradient
// < 1e-4 (products of bf16 values are exact in fp32; only the fp32 summation order differs); the bf16 weight
// gradient element by element, but for 1% (count_not_nearest_bf16): the sum rounded once, or (by the algorithm
// cuBLASLt picks) the stored value plus the gradient rounded to bf16, rounded; overwritten, the sum rounded once.
// Outputs are poisoned (NaN) before each run, so an unwritten element fails; second runs are bitwise equal.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "cuda/device.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernels/gemm.h"
#include "kernels/gemm_preferences.h"
#include "reference/linear.h"

namespace {

using namespace sg;
using namespace sg::test;

struct LinearCase {
  int64_t T, K, N;  // K, N multiples of 8 (what the model uses); T arbitrary
};

// DeviceBuffer upload/poison run on the legacy default stream, which does not order against the
// non-blocking test stream: finish them before launching on `stream`.
void device_sync() { SG_CUDA_CHECK(cudaDeviceSynchronize()); }

template <class T>
bool bitwise_equal(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

class GemmGpu : public ::testing::TestWithParam<LinearCase> {
 protected:
  cuda::Stream stream;
  kernels::Blas blas;  // owns its 32 MiB workspace
};

TEST_P(GemmGpu, LinearForwardMatchesReference) {
  const auto [T, K, N] = GetParam();
  const auto x = round_bf16(random_normal(T * K, 100 + T));
  const auto w = round_bf16(random_normal(N * K, 200 + N, 0.05f));
  std::vector<float> expected(T * N);
  ref::linear_forward(expected.data(), x.data(), w.data(), T, K, N);

  DeviceBuffer<bf16> dx(T * K), dw(N * K), dy(T * N);
  dx.upload(to_bf16(x));
  dw.upload(to_bf16(w));
  kernels::LinearForward fwd(blas, T, K, N);
  dy.poison();
  device_sync();
  fwd.run(stream, dy.get(), dx.get(), dw.get());
  stream.synchronize();
  const auto y1 = dy.download();
  EXPECT_LT(relative_error(to_float(y1), expected), kBf16RelTol);

  dy.poison();
  device_sync();
  fwd.run(stream, dy.get(), dx.get(), dw.get());
  stream.synchronize();
  EXPECT_TRUE(bitwise_equal(y1, dy.download())) << "second run differs";
}

TEST_P(GemmGpu, LinearForwardBiasEpilogue) {
  const auto [T, K, N] = GetParam();
  const auto x = round_bf16(random_normal(T * K, 110 + T));
  const auto w = round_bf16(random_normal(N * K, 210 + N, 0.05f));
  const auto bias = round_bf16(random_normal(N, 310 + N));
  std::vector<float> expected(T * N);
  ref::linear_forward(expected.data(), x.data(), w.data(), T, K, N);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) expected[t * N + n] += bias[n];

  DeviceBuffer<bf16> dx(T * K), dw(N * K), db(N), dy(T * N);
  dx.upload(to_bf16(x));
  dw.upload(to_bf16(w));
  db.upload(to_bf16(bias));
  kernels::LinearForward fwd(blas, T, K, N, /*with_bias=*/true);
  dy.poison();
  device_sync();
  fwd.run(stream, dy.get(), dx.get(), dw.get(), db.get());
  stream.synchronize();
  EXPECT_LT(relative_error(to_float(dy.download()), expected), kBf16RelTol);
  EXPECT_THROW(fwd.run(stream, dy.get(), dx.get(), dw.get()), Error);  // bias plan without a bias
}

TEST_P(GemmGpu, LinearBackwardInputMatchesReferenceAndAccumulates) {
  const auto [T, K, N] = GetParam();
  const auto dy = round_bf16(random_normal(T * N, 120 + T));
  const auto w = round_bf16(random_normal(N * K, 220 + N, 0.05f));
  const auto dx0 = round_bf16(random_normal(T * K, 320 + T));
  std::vector<float> expected(T * K);
  ref::linear_backward_input(expected.data(), dy.data(), w.data(), T, K, N);

  DeviceBuffer<bf16> d_dy(T * N), d_w(N * K), d_dx(T * K);
  d_dy.upload(to_bf16(dy));
  d_w.upload(to_bf16(w));
  kernels::LinearBackwardInput bwd(blas, T, K, N);
  d_dx.poison();
  device_sync();
  bwd.run(stream, d_dx.get(), d_dy.get(), d_w.get());
  stream.synchronize();
  const auto r1 = d_dx.download();
  EXPECT_LT(relative_error(to_float(r1), expected), kBf16RelTol);
  d_dx.poison();
  device_sync();
  bwd.run(stream, d_dx.get(), d_dy.get(), d_w.get());
  stream.synchronize();
  EXPECT_TRUE(bitwise_equal(r1, d_dx.download())) << "second run differs";

  // accumulate = true: dx = dx0 + dy W (beta = 1).
  kernels::LinearBackwardInput bwd_acc(blas, T, K, N, /*accumulate=*/true);
  d_dx.upload(to_bf16(dx0));
  device_sync();
  bwd_acc.run(stream, d_dx.get(), d_dy.get(), d_w.get());
  stream.synchronize();
  std::vector<float> expected_acc(T * K);
  for (int64_t i = 0; i < T * K; ++i) expected_acc[i] = dx0[i] + expected[i];
  EXPECT_LT(relative_error(to_float(d_dx.download()), expected_acc), kBf16RelTol);
}

TEST_P(GemmGpu, LinearBackwardWeightAccumulatesInFp32) {
  const auto [T, K, N] = GetParam();
  const auto dy = round_bf16(random_normal(T * N, 130 + T));
  const auto x = round_bf16(random_normal(T * K, 230 + T));
  const auto dw0 = random_normal(N * K, 330 + N);  // fp32 main_grad already holding a previous microbatch
  std::vector<float> once = dw0, twice = dw0;
  ref::linear_backward_weight(once.data(), dy.data(), x.data(), T, K, N);
  ref::linear_backward_weight(twice.data(), dy.data(), x.data(), T, K, N);
  ref::linear_backward_weight(twice.data(), dy.data(), x.data(), T, K, N);

  DeviceBuffer<bf16> d_dy(T * N), d_x(T * K);
  DeviceBuffer<float> d_dw(N * K);
  d_dy.upload(to_bf16(dy));
  d_x.upload(to_bf16(x));
  kernels::LinearBackwardWeight wgrad(blas, T, K, N);
  d_dw.upload(dw0);
  device_sync();
  wgrad.run(stream, d_dw.get(), d_dy.get(), d_x.get());
  stream.synchronize();
  const auto r1 = d_dw.download();
  EXPECT_LT(relative_error(r1, once), 1e-4);
  device_sync();
  wgrad.run(stream, d_dw.get(), d_dy.get(), d_x.get());  // second microbatch adds again
  stream.synchronize();
  EXPECT_LT(relative_error(d_dw.download(), twice), 1e-4);

  d_dw.upload(dw0);
  device_sync();
  wgrad.run(stream, d_dw.get(), d_dy.get(), d_x.get());
  stream.synchronize();
  EXPECT_TRUE(bitwise_equal(r1, d_dw.download())) << "second run differs";
}

// bf16 main gradients (ddp.grad_reduce_in_fp32=false), accumulating (beta 1). cuBLASLt's epilogue is one of two
// roundings, by the algorithm its heuristic picks for the shape (s38c1, H100): the fp32 sum over the widened dW
// rounded once (at T = 1), or the product sum rounded to bf16 first and then added to the stored value and rounded
// again (26-29% of the elements differ from the first at the other shapes, as simulated) -- which is PyTorch's
// `grad += bf16 gradient` and Megatron's accumulation into a bf16 main_grad. Every element must be one rounding's
// value but for 1% (count_not_nearest_bf16: where the GPU's fp32 order moved a sum across a rounding boundary); a
// truncating epilogue misses half of them under both. An overwrite (the step's first write) rounds the sum once.
// The second run adds to the stored values; an overwrite of a poisoned dW writes every element; a buffer of the
// wrong dtype is refused by name.
TEST_P(GemmGpu, LinearBackwardWeightIntoBf16RoundsOnceOrAddsTheRoundedGradient) {
  const auto [T, K, N] = GetParam();
  const auto dy = round_bf16(random_normal(T * N, 150 + T));
  const auto x = round_bf16(random_normal(T * K, 250 + T));
  const auto dw0 = round_bf16(random_normal(N * K, 350 + N));
  std::vector<double> gradient(static_cast<size_t>(N * K), 0.0);  // the exact product sums
  add_exact_weight_gradient(gradient.data(), dy.data(), x.data(), T, K, N);
  const int64_t allowed = allowed_bf16_order_misses(static_cast<size_t>(N * K));
  // `got` against base + gradient rounded once, and against base + the gradient rounded to bf16, rounded.
  const auto expect_one_rounding = [&](const std::vector<float>& got, const std::vector<float>& base,
                                       const char* what) {
    std::vector<double> once(base.size()), twice(base.size());
    for (size_t i = 0; i < base.size(); ++i) {
      once[i] = static_cast<double>(base[i]) + gradient[i];
      twice[i] = static_cast<double>(base[i]) + nearest_bf16(gradient[i]);
    }
    const int64_t miss_once = count_not_nearest_bf16(got, once), miss_twice = count_not_nearest_bf16(got, twice);
    EXPECT_LE(std::min(miss_once, miss_twice), allowed)
        << what << ": " << miss_once << " elements are not the sum rounded once, " << miss_twice
        << " not the bf16 gradient added and rounded, of " << got.size();
  };

  DeviceBuffer<bf16> d_dy(T * N), d_x(T * K), d_dw(N * K);
  d_dy.upload(to_bf16(dy));
  d_x.upload(to_bf16(x));
  d_dw.upload(to_bf16(dw0));
  kernels::LinearBackwardWeight wgrad(blas, T, K, N, kernels::FloatDtype::bf16);
  device_sync();
  wgrad.run(stream, d_dw.get(), d_dy.get(), d_x.get());
  stream.synchronize();
  const auto r1 = to_float(d_dw.download());
  expect_one_rounding(r1, dw0, "first run");
  wgrad.run(stream, d_dw.get(), d_dy.get(), d_x.get());
  stream.synchronize();
  expect_one_rounding(to_float(d_dw.download()), r1, "second run");

  d_dw.poison();
  device_sync();
  wgrad.run(stream, d_dw.get(), d_dy.get(), d_x.get(), /*overwrite=*/true);
  stream.synchronize();
  const auto overwritten = to_float(d_dw.download());
  for (const float v : overwritten) ASSERT_TRUE(std::isfinite(v));
  EXPECT_LE(count_not_nearest_bf16(overwritten, gradient), allowed) << "overwrite";

  DeviceBuffer<float> fp32_dw(N * K);
  const std::string error = thrown_message([&] { wgrad.run(stream, fp32_dw.get(), d_dy.get(), d_x.get()); });
  EXPECT_NE(error.find("planned for bf16 gradients, given a fp32 buffer"), std::string::npos) << error;
}

// overwrite = true (the step's first write of a gradient): dW = dy^T x without reading dW, so a NaN-poisoned
// dW gives the bits of accumulating into zeros (up to the sign of zero); a second run with overwrite off adds.
TEST_P(GemmGpu, LinearBackwardWeightOverwriteEqualsAccumulatingIntoZeros) {
  const auto [T, K, N] = GetParam();
  const auto dy = round_bf16(random_normal(T * N, 140 + T));
  const auto x = round_bf16(random_normal(T * K, 240 + T));
  DeviceBuffer<bf16> d_dy(T * N), d_x(T * K);
  DeviceBuffer<float> d_dw(N * K);
  d_dy.upload(to_bf16(dy));
  d_x.upload(to_bf16(x));
  kernels::LinearBackwardWeight wgrad(blas, T, K, N);
  d_dw.upload(std::vector<float>(static_cast<size_t>(N * K), 0.0f));
  device_sync();
  wgrad.run(stream, d_dw.get(), d_dy.get(), d_x.get());
  wgrad.run(stream, d_dw.get(), d_dy.get(), d_x.get());
  stream.synchronize();
  const auto accumulated_twice = d_dw.download();
  d_dw.upload(std::vector<float>(static_cast<size_t>(N * K), 0.0f));
  device_sync();
  wgrad.run(stream, d_dw.get(), d_dy.get(), d_x.get());
  stream.synchronize();
  const auto accumulated_once = d_dw.download();

  d_dw.poison();
  device_sync();
  wgrad.run(stream, d_dw.get(), d_dy.get(), d_x.get(), /*overwrite=*/true);
  stream.synchronize();
  const auto overwritten = d_dw.download();
  wgrad.run(stream, d_dw.get(), d_dy.get(), d_x.get());
  stream.synchronize();
  const auto then_added = d_dw.download();
  for (size_t i = 0; i < overwritten.size(); ++i) {
    ASSERT_TRUE(std::isfinite(overwritten[i]) && overwritten[i] == accumulated_once[i]) << "element " << i;
    ASSERT_TRUE(then_added[i] == accumulated_twice[i]) << "element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemmGpu,
                         ::testing::Values(LinearCase{1, 64, 128}, LinearCase{37, 256, 96},
                                           LinearCase{1000, 512, 1024}, LinearCase{1024, 2048, 256},
                                           LinearCase{333, 136, 8}));

TEST(GemmGpuPlan, PlansAreCachedByShape) {
  kernels::Blas blas;
  kernels::LinearForward a(blas, 64, 128, 256);
  const size_t after_one = blas.num_plans();
  kernels::LinearForward b(blas, 64, 128, 256);
  EXPECT_EQ(blas.num_plans(), after_one);
  kernels::LinearForward c(blas, 65, 128, 256);
  EXPECT_EQ(blas.num_plans(), after_one + 1);
  kernels::GemmDesc d;
  d.transpose_a = true;
  d.m = 256, d.n = 64, d.k = 128, d.lda = 128, d.ldb = 128, d.ldd = 256;
  EXPECT_EQ(&blas.plan(d), &blas.plan(d));
  EXPECT_LE(blas.plan(d).algo_workspace_bytes(), kernels::Blas::kWorkspaceBytes);
}

TEST(GemmGpuPlan, RejectsInvalidDescriptionsAndMisalignedPointers) {
  kernels::Blas blas;
  kernels::GemmDesc bad;
  bad.m = 16, bad.n = 16, bad.k = 16, bad.lda = 8, bad.ldb = 16, bad.ldd = 16;  // lda < m
  EXPECT_THROW(blas.plan(bad), Error);
  kernels::LinearForward fwd(blas, 16, 64, 64);
  DeviceBuffer<bf16> x(16 * 64 + 8), w(64 * 64), y(16 * 64);
  cuda::Stream stream;
  EXPECT_THROW(fwd.run(stream, y.get(), x.get() + 1, w.get()), Error);  // 2-byte offset: misaligned
  EXPECT_THROW(fwd.run(stream, y.get(), nullptr, w.get()), Error);
}

TEST(GemmGpuGraph, CapturedReplayEqualsEager) {
  const int64_t T = 128, K = 256, N = 512;
  kernels::Blas blas;
  kernels::LinearForward fwd(blas, T, K, N);
  kernels::LinearBackwardWeight wgrad(blas, T, K, N);
  DeviceBuffer<bf16> x(T * K), w(N * K), y(T * N), dy(T * N);
  DeviceBuffer<float> dw(N * K);
  x.upload(to_bf16(random_normal(T * K, 1)));
  w.upload(to_bf16(random_normal(N * K, 2, 0.05f)));
  dy.upload(to_bf16(random_normal(T * N, 3)));
  cuda::Stream stream;
  device_sync();

  SG_CUDA_CHECK(cudaMemsetAsync(dw.get(), 0, N * K * sizeof(float), stream));
  fwd.run(stream, y.get(), x.get(), w.get());
  wgrad.run(stream, dw.get(), dy.get(), x.get());
  stream.synchronize();
  const auto y_eager = y.download();
  const auto dw_eager = dw.download();

  y.poison();
  device_sync();
  cudaGraph_t graph = nullptr;
  SG_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  SG_CUDA_CHECK(cudaMemsetAsync(dw.get(), 0, N * K * sizeof(float), stream));
  fwd.run(stream, y.get(), x.get(), w.get());
  wgrad.run(stream, dw.get(), dy.get(), x.get());
  SG_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  SG_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 2; ++replay) {
    y.poison();
    device_sync();
    SG_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    stream.synchronize();
    EXPECT_TRUE(bitwise_equal(y_eager, y.download())) << "replay " << replay;
    EXPECT_TRUE(bitwise_equal(dw_eager, dw.download())) << "replay " << replay;
  }
  SG_CUDA_CHECK(cudaGraphExecDestroy(exec));
  SG_CUDA_CHECK(cudaGraphDestroy(graph));
}

// The table of kernels/gemm_preferences.h on the GPU it was measured on: the step's plan (kPreferredAlgo) runs the
// named configuration, which cuBLASLt must still run (a stale table fails here), with the first choice's results
// within the tolerance (bf16 out: kBf16RelTol; fp32 weight gradient: 1e-4), bitwise repeatable; with the table off
// the plan is the first choice's. At llama/small's QKV and fc1 forward (configurations the heuristic ranks),
// llama/1b's fc1 input gradient and fc2 weight gradient (configurations it does not rank, built by the plan) and
// llama/tiny's output-projection weight gradient (16x64 tiles) and LM-head forward.
TEST(GemmGpuPlan, PreferredConfigurationsRunWhereTheTableNamesThem) {
  // An H100 (sm_90 too) refuses some of the H200's tiles; the plan then runs cuBLASLt's first choice (logged).
  const cuda::DeviceProperties& device = cuda::device_properties();
  if (device.compute_capability() != 90 || device.name.find("H200") == std::string::npos) {
    GTEST_SKIP() << "the table holds an H200's measurements; this is " << device.summary();
  }
  const ScopedEnv table_on(kernels::kGemmPreferencesVariable, nullptr);
  struct Case {
    const char* name;
    kernels::GemmDesc desc;
  };
  const Case cases[] = {{"small QKV forward", kernels::linear_forward_desc(8192, 768, 2304)},
                        {"small fc1 forward", kernels::linear_forward_desc(8192, 768, 4096)},
                        {"1b fc1 input gradient", kernels::linear_backward_input_desc(8192, 2048, 11264)},
                        {"1b fc2 weight gradient", kernels::linear_backward_weight_desc(8192, 5632, 2048)},
                        {"tiny o weight gradient", kernels::linear_backward_weight_desc(1024, 256, 256)},
                        {"tiny LM-head forward", kernels::linear_forward_desc(1024, 256, 8192)}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    kernels::GemmDesc desc = c.desc;
    const auto want = kernels::preferred_gemm_config(desc, 90);
    ASSERT_TRUE(want.has_value()) << "the table names this GEMM";
    kernels::Blas blas;
    const kernels::GemmPlan& step = blas.plan(desc);
    EXPECT_EQ(step.algo_config().tile_id, want->tile_id) << step.algo_summary();
    EXPECT_EQ(step.algo_config().cluster_id, want->cluster_id) << step.algo_summary();
    desc.heuristic_rank = 0;
    const kernels::GemmPlan& first = blas.plan(desc);
    EXPECT_NE(first.algo_summary(), step.algo_summary()) << "the table names what the heuristic would not pick";

    // Column-major operands as the descriptor stores them.
    const int64_t a_elems = desc.lda * (desc.transpose_a ? desc.m : desc.k);
    const int64_t b_elems = desc.ldb * (desc.transpose_b ? desc.k : desc.n);
    const int64_t d_elems = desc.ldd * desc.n;
    DeviceBuffer<bf16> a(a_elems), b(b_elems);
    a.upload(to_bf16(random_normal(a_elems, 300, 0.05f)));
    b.upload(to_bf16(random_normal(b_elems, 301)));
    cuda::Stream stream;
    const bool fp32_out = desc.d_type == kernels::GemmDtype::kFP32;
    const auto run = [&](const kernels::GemmPlan& plan) {
      DeviceBuffer<bf16> d16(fp32_out ? 0 : d_elems);
      DeviceBuffer<float> d32(fp32_out ? d_elems : 0);
      fp32_out ? d32.poison() : d16.poison();
      device_sync();
      plan.run_overwriting(stream, a.get(), b.get(), fp32_out ? static_cast<void*>(d32.get()) : d16.get());
      stream.synchronize();
      return fp32_out ? d32.download() : to_float(d16.download());
    };
    const std::vector<float> reference = run(first), got = run(step);
    EXPECT_LT(relative_error(got, reference), fp32_out ? 1e-4 : kBf16RelTol);
    EXPECT_TRUE(bitwise_equal(got, run(step))) << "a second run differs";

    const ScopedEnv table_off(kernels::kGemmPreferencesVariable, "0");
    kernels::Blas plain;
    desc.heuristic_rank = kernels::GemmDesc::kPreferredAlgo;
    EXPECT_EQ(plain.plan(desc).algo_summary(), first.algo_summary());
  }
}

// A requested tile and cluster (GemmDesc::requested_config, what gemm_power_bench --explore times and the table may
// name) that is not among the heuristic's first candidates: the plan runs exactly it, within the bf16 tolerance of
// the first choice, bitwise repeatable; one cuBLASLt cannot run is refused with an error naming it, and a rank
// beside a requested configuration is refused. At a size that is no tile's multiple.
TEST(GemmGpuPlan, RequestedConfigurationsOutsideTheRankingRunOrAreRefused) {
  const int64_t T = 2000, K = 768, N = 2304;
  kernels::Blas blas;
  kernels::GemmDesc desc = kernels::linear_forward_desc(T, K, N);
  desc.heuristic_rank = 0;
  const kernels::GemmPlan& first = blas.plan(desc);
  std::vector<std::string> ranked;
  for (int r = 0; r < kernels::kPreferenceCandidates; ++r) {
    desc.heuristic_rank = r;
    try {
      ranked.push_back(blas.plan(desc).algo_summary());
    } catch (const Error&) {
      break;
    }
  }
  desc.heuristic_rank = kernels::GemmDesc::kPreferredAlgo;

  DeviceBuffer<bf16> w(N * K), x(T * K);
  w.upload(to_bf16(random_normal(N * K, 310, 0.05f)));
  x.upload(to_bf16(random_normal(T * K, 311)));
  cuda::Stream stream;
  const auto run = [&](const kernels::GemmPlan& plan) {
    DeviceBuffer<bf16> y(T * N);
    y.poison();
    device_sync();
    plan.run(stream, w.get(), x.get(), y.get());
    stream.synchronize();
    return y.download();
  };
  const std::vector<bf16> reference = run(first);
  int outside = 0;
  const std::vector<int64_t> tiles = first.tile_ids();
  ASSERT_FALSE(tiles.empty());
  for (int64_t tile : tiles) {
    for (int64_t cluster : {int64_t{2}, int64_t{3}, int64_t{5}}) {
      if (outside == 3) break;
      desc.requested_config = {.tile_id = tile, .cluster_id = cluster};
      const kernels::GemmPlan* plan = nullptr;
      try {
        plan = &blas.plan(desc);
      } catch (const Error&) {
        continue;
      }
      if (std::find(ranked.begin(), ranked.end(), plan->algo_summary()) != ranked.end()) continue;
      ++outside;
      SCOPED_TRACE(plan->algo_summary());
      EXPECT_EQ(plan->algo_config().tile_id, tile);
      EXPECT_EQ(plan->algo_config().cluster_id, cluster);
      const std::vector<bf16> got = run(*plan);
      EXPECT_LT(relative_error(to_float(got), to_float(reference)), kBf16RelTol);
      EXPECT_TRUE(bitwise_equal(got, run(*plan))) << "a second run differs";
    }
  }
  EXPECT_EQ(outside, 3) << "cuBLASLt should run some configurations its heuristic does not rank first";

  desc.requested_config = {.tile_id = 1, .cluster_id = 10};  // 8x8 tiles on a 4x4 cluster: nothing runs that
  try {
    blas.plan(desc);
    ADD_FAILURE() << "an impossible configuration was planned";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot run the GEMM"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("tile 1 and cluster 10"), std::string::npos) << e.what();
  }
  desc.heuristic_rank = 0;
  EXPECT_THROW(blas.plan(desc), Error);
}

}  // namespace
