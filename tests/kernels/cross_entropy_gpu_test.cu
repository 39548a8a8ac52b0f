// GPU cross-entropy (token count, chunked loss+dlogits, loss reduction) against reference/cross_entropy.
// Tolerances: dlogits are bf16 outputs -> relative error < kBf16RelTol (1e-2) vs the fp32 reference;
// row losses, token count, the accumulated loss and the evaluation's loss sums -> < kFp32RelTol (1e-5). Outputs
// are poisoned before each run; a second run must be bitwise identical.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernels/cross_entropy.h"
#include "reference/cross_entropy.h"

namespace {

using namespace sg;
using namespace sg::test;

struct CeCase {
  int64_t T, V, chunk_rows;
  kernels::LogitsDtype dtype;
  int64_t dlogits_pad;  // extra columns per dlogits row (must stay untouched)
  int64_t logits_pad = 0;  // extra columns per logits row (ignored by the kernel)
};

std::vector<float> random_mask(int64_t T, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::bernoulli_distribution keep(0.8);
  std::vector<float> m(T);
  for (auto& x : m) x = keep(gen) ? 1.0f : 0.0f;
  if (T > 0) m[0] = 1.0f;  // at least one active token
  return m;
}

bool bitwise_equal(const void* a, const void* b, size_t bytes) { return std::memcmp(a, b, bytes) == 0; }

class CrossEntropyGpu : public ::testing::TestWithParam<CeCase> {};

TEST_P(CrossEntropyGpu, MatchesReferenceChunkedAndDeterministic) {
  const CeCase c = GetParam();
  const int64_t T = c.T, V = c.V, ld = V + c.dlogits_pad, logits_ld = V + c.logits_pad;
  const float loss_scale = 0.5f;  // 2 microbatches
  const float initial_accumulator = 0.25f;
  const uint64_t seed = 1000 + T * 7 + V;

  std::vector<float> logits = random_normal(T * V, seed, 2.0f);
  if (c.dtype == kernels::LogitsDtype::bf16) logits = round_bf16(logits);  // what the GPU sees
  std::vector<int32_t> targets = random_tokens(T, static_cast<int32_t>(V), seed + 1);
  std::vector<float> mask = random_mask(T, seed + 2);
  for (int64_t t = 0; t < T; ++t)
    if (mask[t] == 0.0f && t % 2 == 1) targets[t] = -100;  // masked rows may carry an ignore index

  // Reference: token count, dlogits with scale = loss_scale / max(count, 1), per-row losses.
  const double ref_count = ref::loss_token_count(mask.data(), T);
  const float scale = loss_scale / std::max(static_cast<float>(ref_count), 1.0f);
  std::vector<float> ref_dlogits(T * V);
  const double ref_sum = ref::cross_entropy_forward_backward(ref_dlogits.data(), logits.data(), targets.data(),
                                                             mask.data(), T, V, scale);
  std::vector<float> ref_row_loss(T);
  for (int64_t t = 0; t < T; ++t)
    ref_row_loss[t] = static_cast<float>(ref::cross_entropy_forward_backward(
        nullptr, logits.data() + t * V, targets.data() + t, mask.data() + t, 1, V, 1.0f));
  const double ref_accumulator =
      initial_accumulator + static_cast<double>(loss_scale) * ref_sum / std::max(ref_count, 1.0);

  std::vector<float> padded_logits(T * logits_ld, 1e4f);  // padding the kernel must not read
  for (int64_t t = 0; t < T; ++t) std::copy_n(logits.begin() + t * V, V, padded_logits.begin() + t * logits_ld);
  DeviceBuffer<float> d_logits32(c.dtype == kernels::LogitsDtype::fp32 ? T * logits_ld : 0);
  DeviceBuffer<bf16> d_logits16(c.dtype == kernels::LogitsDtype::bf16 ? T * logits_ld : 0);
  if (c.dtype == kernels::LogitsDtype::fp32) d_logits32.upload(padded_logits);
  else d_logits16.upload(to_bf16(padded_logits));
  const void* logits_ptr = c.dtype == kernels::LogitsDtype::fp32 ? static_cast<const void*>(d_logits32.get())
                                                                  : static_cast<const void*>(d_logits16.get());
  const size_t elem = c.dtype == kernels::LogitsDtype::fp32 ? 4 : 2;
  DeviceBuffer<int32_t> d_targets(T);
  d_targets.upload(targets);
  DeviceBuffer<float> d_mask(T);
  d_mask.upload(mask);
  DeviceBuffer<bf16> d_dlogits(T * ld);
  DeviceBuffer<float> d_row_loss(T), d_count(1), d_acc(1);
  cuda::Stream stream;

  auto run_once = [&]() {
    d_dlogits.poison();
    d_row_loss.poison();
    d_count.poison();
    d_acc.upload({initial_accumulator});
    kernels::loss_token_count(stream, {.loss_mask = d_mask.get(), .T = T, .token_count = d_count.get()});
    for (int64_t r0 = 0; r0 < T; r0 += c.chunk_rows) {
      kernels::cross_entropy_forward_backward(
          stream, {.logits = static_cast<const char*>(logits_ptr) + r0 * logits_ld * elem,
                   .logits_dtype = c.dtype,
                   .targets = d_targets.get() + r0,
                   .loss_mask = d_mask.get() + r0,
                   .dlogits = d_dlogits.get() + r0 * ld,
                   .row_loss = d_row_loss.get() + r0,
                   .rows = std::min(c.chunk_rows, T - r0),
                   .V = V,
                   .logits_stride = logits_ld,
                   .dlogits_stride = ld,
                   .token_count = d_count.get(),
                   .loss_scale = loss_scale});
    }
    kernels::cross_entropy_loss_reduce(stream, {.row_loss = d_row_loss.get(),
                                                .T = T,
                                                .token_count = d_count.get(),
                                                .loss_scale = loss_scale,
                                                .loss_accumulator = d_acc.get()});
    SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  };

  run_once();
  const std::vector<bf16> dl_raw = d_dlogits.download();
  const std::vector<float> row_loss = d_row_loss.download();
  const float count = d_count.download()[0];
  const float acc = d_acc.download()[0];

  EXPECT_EQ(count, static_cast<float>(ref_count));
  // Valid columns vs the reference; padding columns still hold the poison (0xFFFF).
  std::vector<float> dl(T * V);
  const std::vector<float> dl_all = to_float(dl_raw);
  int64_t pad_written = 0;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t v = 0; v < V; ++v) dl[t * V + v] = dl_all[t * ld + v];
    for (int64_t v = V; v < ld; ++v) {
      uint16_t bits;
      std::memcpy(&bits, &dl_raw[t * ld + v], 2);
      pad_written += bits != 0xFFFF;
    }
  }
  EXPECT_EQ(pad_written, 0) << "dlogits padding columns were written";
  const double dl_err = relative_error(dl, ref_dlogits);
  EXPECT_LT(dl_err, kBf16RelTol) << "dlogits T=" << T << " V=" << V;
  const double loss_err = relative_error(row_loss, ref_row_loss);
  EXPECT_LT(loss_err, kFp32RelTol) << "row_loss T=" << T << " V=" << V;
  EXPECT_NEAR(acc, ref_accumulator, kFp32RelTol * std::abs(ref_accumulator));
  for (int64_t t = 0; t < T; ++t) {
    if (mask[t] != 0.0f) continue;
    EXPECT_EQ(row_loss[t], 0.0f) << "masked row " << t;
    for (int64_t v = 0; v < V; ++v) ASSERT_EQ(dl[t * V + v], 0.0f) << "masked row " << t << " col " << v;
  }

  run_once();
  const std::vector<bf16> dl_raw2 = d_dlogits.download();
  const std::vector<float> row_loss2 = d_row_loss.download();
  const float acc2 = d_acc.download()[0];
  EXPECT_TRUE(bitwise_equal(dl_raw.data(), dl_raw2.data(), dl_raw.size() * sizeof(bf16)));
  EXPECT_TRUE(bitwise_equal(row_loss.data(), row_loss2.data(), row_loss.size() * sizeof(float)));
  EXPECT_TRUE(bitwise_equal(&acc, &acc2, sizeof(float)));

  // Evaluation's form: the unscaled token sum and the token count ADDED into loss_sums (twice here, onto what it held);
  // the sum against the CPU twin's, and against the rows' own losses summed in fp64 on the host.
  DeviceBuffer<double> d_sums(2);
  d_sums.upload({0.25, 2.0});
  for (int k = 0; k < 2; ++k) {
    kernels::cross_entropy_loss_reduce(
        stream, {.row_loss = d_row_loss.get(), .T = T, .token_count = d_count.get(), .loss_sums = d_sums.get()});
  }
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  const std::vector<double> sums = d_sums.download();
  double rows_sum = 0.0;
  for (const float l : row_loss) rows_sum += static_cast<double>(l);
  EXPECT_NEAR(sums[0], 0.25 + 2.0 * rows_sum, 1e-12 * (0.25 + 2.0 * std::abs(rows_sum)));
  EXPECT_NEAR(sums[0], 0.25 + 2.0 * ref_sum, kFp32RelTol * (0.25 + 2.0 * std::abs(ref_sum)));
  EXPECT_EQ(sums[1], 2.0 + 2.0 * ref_count);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CrossEntropyGpu,
    ::testing::Values(CeCase{1, 8192, 1, kernels::LogitsDtype::fp32, 0},
                      CeCase{37, 1003, 10, kernels::LogitsDtype::fp32, 5},
                      CeCase{37, 32768, 37, kernels::LogitsDtype::bf16, 0},
                      CeCase{1024, 8192, 300, kernels::LogitsDtype::fp32, 8},
                      CeCase{1024, 1003, 1024, kernels::LogitsDtype::bf16, 0},
                      CeCase{1024, 32768, 256, kernels::LogitsDtype::fp32, 0},
                      // Row strides that are multiples of 4 with V not: four columns at a time, then a tail.
                      CeCase{64, 1003, 64, kernels::LogitsDtype::fp32, 1, 1},
                      CeCase{61, 1001, 20, kernels::LogitsDtype::bf16, 3, 3},
                      // V <= 32768 keeps each row in registers: 32000 is no multiple of 4 * 8 * 32 (the
                      // last groups of the last warp lie past V); V = 3 is one warp with a short group;
                      // an odd logits stride (32769) takes the one-at-a-time loads of the same path.
                      CeCase{64, 32000, 64, kernels::LogitsDtype::fp32, 0},
                      CeCase{45, 32000, 20, kernels::LogitsDtype::bf16, 4, 4},
                      CeCase{5, 3, 5, kernels::LogitsDtype::fp32, 1},
                      CeCase{32, 32768, 32, kernels::LogitsDtype::fp32, 0, 1},
                      // Above 32768 the row is read twice (the online max/sum, then dlogits).
                      CeCase{33, 32769, 33, kernels::LogitsDtype::fp32, 3, 3},
                      CeCase{9, 151936, 4, kernels::LogitsDtype::fp32, 0},
                      CeCase{9, 151936, 9, kernels::LogitsDtype::bf16, 0}));

// The error semantics on both paths (V <= 32768: row in registers; above: two reads), per row:
//   0: a NaN logit -> NaN loss;  1: -inf logits (a group of four, one more, the last column) drop out of
//   the softmax;  2, 3: unmasked targets V and -3 (outside the vocabulary) -> NaN loss and dlogits
//   without the onehot term;  4: masked out with a garbage target -> loss 0, dlogits 0;  5: a plain row.
// The NaN losses make the reduced loss NaN (what check_for_nan_in_loss reports).
class CrossEntropyGpuErrors : public ::testing::TestWithParam<int64_t> {};

TEST_P(CrossEntropyGpuErrors, NanInfOutOfRangeAndMaskedRows) {
  const int64_t T = 6, V = GetParam();
  std::vector<float> logits = random_normal(T * V, 9 + V, 2.0f);
  logits[0 * V + 5] = NAN;
  for (int64_t j : {int64_t{8}, int64_t{9}, int64_t{10}, int64_t{11}, int64_t{40}, V - 1})
    logits[1 * V + j] = -INFINITY;
  const std::vector<int32_t> targets = {4, 7, static_cast<int32_t>(V), -3, 123456789, static_cast<int32_t>(V / 2)};
  const std::vector<float> mask = {1.0f, 1.0f, 1.0f, 1.0f, 0.0f, 1.0f};
  const float scale = 1.0f / 5.0f;  // loss_scale 1, five unmasked rows

  // Reference for rows 1, 2, 3, 5; rows 2 and 3 use target 0 there, whose onehot term is added back.
  std::vector<int32_t> ref_targets = targets;
  ref_targets[2] = ref_targets[3] = 0;
  ref_targets[4] = 0;
  std::vector<float> ref_dl(T * V, 0.0f), ref_row_loss(T, 0.0f);
  for (int64_t t : {1, 2, 3, 5})
    ref_row_loss[t] = static_cast<float>(ref::cross_entropy_forward_backward(
        ref_dl.data() + t * V, logits.data() + t * V, ref_targets.data() + t, mask.data() + t, 1, V, scale));
  ref_dl[2 * V + 0] += scale;
  ref_dl[3 * V + 0] += scale;

  DeviceBuffer<float> d_logits(T * V), d_mask(T), d_row_loss(T), d_count(1), d_acc(1);
  DeviceBuffer<int32_t> d_targets(T);
  DeviceBuffer<bf16> d_dlogits(T * V);
  d_logits.upload(logits);
  d_mask.upload(mask);
  d_targets.upload(targets);
  d_acc.upload({0.0f});
  d_row_loss.poison();
  d_dlogits.poison();
  cuda::Stream stream;
  kernels::loss_token_count(stream, {.loss_mask = d_mask.get(), .T = T, .token_count = d_count.get()});
  kernels::cross_entropy_forward_backward(stream, {.logits = d_logits.get(),
                                                   .targets = d_targets.get(),
                                                   .loss_mask = d_mask.get(),
                                                   .dlogits = d_dlogits.get(),
                                                   .row_loss = d_row_loss.get(),
                                                   .rows = T,
                                                   .V = V,
                                                   .token_count = d_count.get()});
  kernels::cross_entropy_loss_reduce(stream, {.row_loss = d_row_loss.get(),
                                              .T = T,
                                              .token_count = d_count.get(),
                                              .loss_scale = 1.0f,
                                              .loss_accumulator = d_acc.get()});
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  const std::vector<float> row_loss = d_row_loss.download();
  const std::vector<float> dl = to_float(d_dlogits.download());

  EXPECT_TRUE(std::isnan(row_loss[0])) << "V=" << V;
  EXPECT_TRUE(std::isnan(row_loss[2])) << "V=" << V;
  EXPECT_TRUE(std::isnan(row_loss[3])) << "V=" << V;
  EXPECT_EQ(row_loss[4], 0.0f) << "V=" << V;
  for (int64_t t : {1, 5}) EXPECT_NEAR(row_loss[t], ref_row_loss[t], 1e-5f * std::fabs(ref_row_loss[t])) << "V=" << V;
  EXPECT_TRUE(std::isnan(d_acc.download()[0])) << "V=" << V;
  EXPECT_EQ(dl[1 * V + 9], 0.0f) << "a -inf logit has probability 0";
  EXPECT_EQ(dl[1 * V + V - 1], 0.0f) << "a -inf logit has probability 0";
  for (int64_t t : {1, 2, 3, 5}) {
    const std::vector<float> got(dl.begin() + t * V, dl.begin() + (t + 1) * V);
    const std::vector<float> want(ref_dl.begin() + t * V, ref_dl.begin() + (t + 1) * V);
    EXPECT_LT(relative_error(got, want), kBf16RelTol) << "dlogits row " << t << " V=" << V;
  }
  int64_t masked_nonzero = 0;
  for (int64_t v = 0; v < V; ++v) masked_nonzero += dl[4 * V + v] != 0.0f;
  EXPECT_EQ(masked_nonzero, 0) << "masked-out row's dlogits, V=" << V;
}

INSTANTIATE_TEST_SUITE_P(RegisterAndTwoReadPaths, CrossEntropyGpuErrors,
                         ::testing::Values(int64_t{100}, int64_t{128}, int64_t{32000}, int64_t{32768},
                                           int64_t{32769}, int64_t{151936}));

}  // namespace
