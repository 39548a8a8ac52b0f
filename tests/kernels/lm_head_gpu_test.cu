// GPU LM head + cross-entropy composite (kernels/lm_head) against the CPU composition
// reference/linear (fp64-accumulated GEMMs) + reference/cross_entropy, chunked and unchunked.
// Tolerances: dhidden (bf16) and dweight (fp32 accumulated from bf16 dlogits) < kBf16RelTol (1e-2);
// the loss < kLossRelTol (1e-4) relative: the reference rounds its logits to bf16 as the GPU stores them,
// and a logit within the GEMM's fp32 rounding error of a bf16 rounding boundary may round the other way
// (one bf16 ulp, ~0.4%); if that is a target logit, the mean loss moves by ~1e-5 relative.
// dhidden is poisoned; dweight is prefilled (the composite ADDS into it); repeated runs are bitwise
// identical and a second microbatch accumulates.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernels/gemm.h"
#include "kernels/lm_head.h"
#include "reference/cross_entropy.h"
#include "reference/linear.h"

namespace {

using namespace sg;
using namespace sg::test;

constexpr double kLossRelTol = 1e-4;

TEST(LmHeadLayout, ChunksAndOffsets) {
  const kernels::LmHeadShape shape{.T = 1000, .H = 64, .V = 1003};
  const int64_t Vp = 1008;
  const size_t row_bytes = Vp * 4;  // bf16 logits + bf16 dlogits
  const kernels::LmHeadLayout a = kernels::lm_head_layout(shape, 10 * row_bytes + 5);
  EXPECT_EQ(a.padded_vocab, Vp);
  EXPECT_EQ(a.chunk_rows, 10);
  EXPECT_EQ(a.num_chunks, 100);
  const kernels::LmHeadLayout b = kernels::lm_head_layout(shape, 200 * row_bytes);
  EXPECT_EQ(b.chunk_rows, 192);  // rounded down to a multiple of 64
  EXPECT_EQ(b.num_chunks, 6);
  const kernels::LmHeadLayout c = kernels::lm_head_layout(shape);  // default budget: everything fits
  EXPECT_EQ(c.chunk_rows, 1000);
  EXPECT_EQ(c.num_chunks, 1);
  for (const auto& L : {a, b, c}) {
    EXPECT_EQ(L.dlogits_offset % 256, 0u);
    EXPECT_EQ(L.row_loss_offset % 256, 0u);
    EXPECT_EQ(L.token_count_offset % 256, 0u);
    EXPECT_GE(L.dlogits_offset, static_cast<size_t>(L.chunk_rows) * Vp * 2);
    EXPECT_GE(L.row_loss_offset, L.dlogits_offset + static_cast<size_t>(L.chunk_rows) * Vp * 2);
    EXPECT_GE(L.token_count_offset, L.row_loss_offset + 1000 * 4);
    EXPECT_GE(L.workspace_bytes, L.token_count_offset + 4);
  }
  EXPECT_THROW(kernels::lm_head_layout({10, 60, 100}), Error);   // H not a multiple of 8
  EXPECT_THROW(kernels::lm_head_layout(shape, row_bytes - 1), Error);  // budget below one row
}

struct LmCase {
  int64_t T, H, V;
  int64_t chunk_rows;  // 0: default budget
};

class LmHeadGpu : public ::testing::TestWithParam<LmCase> {};

TEST_P(LmHeadGpu, MatchesReferenceCompositionAndDeterministic) {
  const LmCase c = GetParam();
  const int64_t T = c.T, H = c.H, V = c.V;
  const float loss_scale = 0.25f;  // 4 microbatches
  const float initial_loss = 0.125f;
  const uint64_t seed = 4000 + T + H + V;

  const std::vector<float> h = round_bf16(random_normal(T * H, seed, 1.0f));
  const std::vector<float> w = round_bf16(random_normal(V * H, seed + 1, 2.0f / std::sqrt(static_cast<float>(H))));
  const std::vector<int32_t> targets = random_tokens(T, static_cast<int32_t>(V), seed + 2);
  std::vector<float> mask(T, 1.0f);
  for (int64_t t = 0; t < T; t += 5) mask[t] = 0.0f;
  if (T == 1) mask[0] = 1.0f;

  // Reference composition in fp32 (GEMMs accumulate in fp64).
  std::vector<float> logits(T * V), ref_dlogits(T * V), ref_dh(T * H), ref_dw(V * H, 0.0f);
  ref::linear_forward(logits.data(), h.data(), w.data(), T, H, V);
  logits = round_bf16(logits);  // the GPU's logits GEMM writes bf16
  const double count = ref::loss_token_count(mask.data(), T);
  const float scale = loss_scale / std::max(static_cast<float>(count), 1.0f);
  const double sum = ref::cross_entropy_forward_backward(ref_dlogits.data(), logits.data(), targets.data(),
                                                         mask.data(), T, V, scale);
  const double ref_loss_contrib = loss_scale * sum / std::max(count, 1.0);
  ref::linear_backward_input(ref_dh.data(), ref_dlogits.data(), w.data(), T, H, V);
  ref::linear_backward_weight(ref_dw.data(), ref_dlogits.data(), h.data(), T, H, V);
  double dw_rms = 0.0;
  for (float x : ref_dw) dw_rms += static_cast<double>(x) * x;
  dw_rms = std::sqrt(dw_rms / static_cast<double>(ref_dw.size()));
  const std::vector<float> dw_prefill = random_normal(V * H, seed + 3, static_cast<float>(dw_rms));

  kernels::Blas blas;
  const size_t budget = c.chunk_rows > 0 ? static_cast<size_t>(c.chunk_rows) * ((V + 7) / 8 * 8) * 4
                                         : kernels::kLmHeadDefaultChunkBudgetBytes;
  const kernels::LmHeadPlan plan(blas, {.T = T, .H = H, .V = V}, loss_scale, budget);
  if (c.chunk_rows > 0) EXPECT_EQ(plan.layout().chunk_rows, c.chunk_rows);
  const int64_t expected_chunks = (T + plan.layout().chunk_rows - 1) / plan.layout().chunk_rows;
  EXPECT_EQ(plan.layout().num_chunks, expected_chunks);

  DeviceBuffer<bf16> d_h(T * H), d_w(V * H), d_dh(T * H);
  DeviceBuffer<int32_t> d_targets(T);
  DeviceBuffer<float> d_mask(T), d_dw(V * H), d_loss(1);
  DeviceBuffer<char> d_ws(plan.layout().workspace_bytes);
  d_h.upload(to_bf16(h));
  d_w.upload(to_bf16(w));
  d_targets.upload(targets);
  d_mask.upload(mask);
  cuda::Stream stream;
  kernels::LmHeadBuffers buffers;
  buffers.hidden = d_h.get();
  buffers.weight = d_w.get();
  buffers.targets = d_targets.get();
  buffers.loss_mask = d_mask.get();
  buffers.dhidden = d_dh.get();
  buffers.dweight = d_dw.get();
  buffers.loss_accumulator = d_loss.get();
  buffers.workspace = d_ws.get();

  auto reset_and_run = [&]() {
    d_dh.poison();
    d_ws.poison();
    d_dw.upload(dw_prefill);
    d_loss.upload({initial_loss});
    plan.execute(stream, buffers);
    SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  };

  reset_and_run();
  const std::vector<bf16> dh_raw = d_dh.download();
  const std::vector<float> dw = d_dw.download();
  const float loss = d_loss.download()[0];
  std::vector<float> dw_contrib(V * H);
  for (int64_t i = 0; i < V * H; ++i) dw_contrib[i] = dw[i] - dw_prefill[i];
  EXPECT_LT(relative_error(to_float(dh_raw), ref_dh), kBf16RelTol) << "dhidden";
  EXPECT_LT(relative_error(dw_contrib, ref_dw), kBf16RelTol) << "dweight";
  EXPECT_NEAR(loss, initial_loss + ref_loss_contrib, kLossRelTol * (initial_loss + ref_loss_contrib)) << "loss";

  reset_and_run();
  EXPECT_EQ(std::memcmp(dh_raw.data(), d_dh.download().data(), dh_raw.size() * sizeof(bf16)), 0);
  EXPECT_EQ(std::memcmp(dw.data(), d_dw.download().data(), dw.size() * sizeof(float)), 0);
  const float loss2 = d_loss.download()[0];
  EXPECT_EQ(std::memcmp(&loss, &loss2, sizeof(float)), 0);

  // A second microbatch (same data) accumulates into dweight and the loss; dhidden is overwritten.
  plan.execute(stream, buffers);
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  const std::vector<float> dw_twice = d_dw.download();
  std::vector<float> contrib_twice(V * H), ref_twice(V * H);
  for (int64_t i = 0; i < V * H; ++i) {
    contrib_twice[i] = dw_twice[i] - dw_prefill[i];
    ref_twice[i] = 2.0f * ref_dw[i];
  }
  EXPECT_LT(relative_error(contrib_twice, ref_twice), kBf16RelTol);
  EXPECT_NEAR(d_loss.download()[0], initial_loss + 2.0 * ref_loss_contrib,
              kLossRelTol * (initial_loss + 2.0 * ref_loss_contrib));
  EXPECT_EQ(std::memcmp(dh_raw.data(), d_dh.download().data(), dh_raw.size() * sizeof(bf16)), 0);

  // Forward only (evaluation): the same loss, bit for bit, and neither gradient buffer is touched.
  d_dh.poison();
  d_dw.poison();
  const std::vector<bf16> dh_poison = d_dh.download();
  const std::vector<float> dw_poison = d_dw.download();
  d_loss.upload({initial_loss});
  kernels::LmHeadBuffers forward_only = buffers;  // the gradient buffers given: execute_loss must leave them alone
  plan.execute_loss(stream, forward_only);
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  EXPECT_EQ(std::memcmp(dh_poison.data(), d_dh.download().data(), dh_poison.size() * sizeof(bf16)), 0)
      << "execute_loss wrote dhidden";
  EXPECT_EQ(std::memcmp(dw_poison.data(), d_dw.download().data(), dw_poison.size() * sizeof(float)), 0)
      << "execute_loss wrote dweight";
  forward_only.dhidden = nullptr;  // may be null
  forward_only.dweight = {};
  plan.execute_loss(stream, forward_only);
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  const float loss_only = d_loss.download()[0];
  d_loss.upload({initial_loss});
  reset_and_run();
  plan.execute(stream, buffers);  // two microbatches, as the two execute_loss calls above
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  const float loss_full = d_loss.download()[0];
  EXPECT_EQ(std::memcmp(&loss_only, &loss_full, sizeof(float)), 0) << loss_only << " vs " << loss_full;

  // overwrite_dweight (the step's first write of the gradient): the first chunk overwrites the poisoned
  // dweight and the later chunks add, giving the bits of adding every chunk into zeros (up to the sign
  // of zero); then a second microbatch without it adds.
  d_dh.poison();
  d_dw.upload(std::vector<float>(static_cast<size_t>(V * H), 0.0f));
  plan.execute(stream, buffers);
  plan.execute(stream, buffers);
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  const std::vector<float> from_zero_twice = d_dw.download();
  d_dw.upload(std::vector<float>(static_cast<size_t>(V * H), 0.0f));
  plan.execute(stream, buffers);
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  const std::vector<float> from_zero = d_dw.download();
  d_dw.poison();
  kernels::LmHeadBuffers first = buffers;
  first.overwrite_dweight = true;
  plan.execute(stream, first);
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  const std::vector<float> overwritten = d_dw.download();
  plan.execute(stream, buffers);
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  const std::vector<float> then_added = d_dw.download();
  for (size_t i = 0; i < overwritten.size(); ++i) {
    ASSERT_TRUE(std::isfinite(overwritten[i]) && overwritten[i] == from_zero[i]) << "dweight element " << i;
    ASSERT_TRUE(then_added[i] == from_zero_twice[i]) << "dweight element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, LmHeadGpu,
                         ::testing::Values(LmCase{37, 64, 1003, 10},     // 3 full chunks + a 7-row tail
                                           LmCase{1, 128, 8192, 0},      // one row
                                           LmCase{300, 128, 8192, 128},  // 128, 128, 44
                                           LmCase{512, 64, 32768, 0}));  // one chunk

}  // namespace
