// The register path of the cross-entropy kernel (src/kernels/cross_entropy_registers.cuh) run on the CPU by
// tests/simt_emulator.h against reference/cross_entropy, rows of every kind in one batch:
//   0 plain; 1 -inf logits (a group of four, one more, the last column) drop out; 2 unmasked target V
//   (outside the vocabulary) -> NaN loss and dlogits without the onehot term; 3 masked out with a garbage
//   target -> loss 0, dlogits 0; 4 a NaN logit -> NaN loss; 5 mask weight 0.5.
// Tolerances as the GPU test: row loss (fp32) 1e-5 relative, dlogits (bf16) 1e-2 relative per row. Padding
// columns of dlogits keep their poison; a second run is bitwise equal. Shapes cover one warp (V = 3), a
// tail group, scalar loads (odd strides), 1024 threads (V = 32000, 32768) and bf16 logits (256 threads, and
// 512 from 4096 vectors a row: V = 32771).
#define SG_SIMT_EMULATION 1
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ostream>
#include <vector>

#include "gpu_test_util.h"  // bf16 conversions only: nothing here touches a GPU
#include "kernel_gpu_test_util.h"
#include "kernels/cross_entropy_registers.cuh"
#include "reference/cross_entropy.h"

namespace sg {
namespace {

namespace ce = kernels::cross_entropy_registers;

struct Shape {
  int64_t V, pad;  // row stride = V + pad for logits and dlogits
  kernels::LogitsDtype dtype;
};
void PrintTo(const Shape& s, std::ostream* os) {
  *os << "V=" << s.V << " pad=" << s.pad << (s.dtype == kernels::LogitsDtype::bf16 ? " bf16" : " fp32");
}

class CrossEntropyRegistersEmulated : public ::testing::TestWithParam<Shape> {};

TEST_P(CrossEntropyRegistersEmulated, MatchesReferenceWithErrorRowsAndIsDeterministic) {
  const auto [V, pad, dtype] = GetParam();
  const int64_t T = 6, ld = V + pad;
  const bool is_bf16 = dtype == kernels::LogitsDtype::bf16;
  std::vector<float> logits = test::random_normal(T * V, 77 + V, 2.0f);
  if (is_bf16) logits = test::round_bf16(logits);
  for (int64_t j : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{3}, V / 2, V - 1})
    if (j < V && j != 1) logits[1 * V + j] = -INFINITY;  // row 1's target (1) stays finite
  logits[4 * V + V / 3] = NAN;
  const std::vector<int32_t> targets = {static_cast<int32_t>(V - 1), 1, static_cast<int32_t>(V), 123456789, 0,
                                        static_cast<int32_t>(V / 2)};
  const std::vector<float> mask = {1.0f, 1.0f, 1.0f, 0.0f, 1.0f, 0.5f};
  const float loss_scale = 0.5f;
  const float token_count = static_cast<float>(ref::loss_token_count(mask.data(), T));
  const float scale = loss_scale / std::max(token_count, 1.0f);

  // Reference rows 0, 1, 2, 5; row 2 with target 0, whose onehot term is added back.
  std::vector<int32_t> ref_targets = targets;
  ref_targets[2] = 0;
  std::vector<float> ref_dl(T * V, 0.0f), ref_loss(T, 0.0f);
  for (int64_t t : {0, 1, 2, 5})
    ref_loss[t] = static_cast<float>(ref::cross_entropy_forward_backward(
        ref_dl.data() + t * V, logits.data() + t * V, ref_targets.data() + t, mask.data() + t, 1, V, scale));
  ref_dl[2 * V + 0] += scale * mask[2];

  std::vector<float> logits32(T * ld, 1e4f);  // padding the kernel must not read
  for (int64_t t = 0; t < T; ++t) std::copy_n(logits.begin() + t * V, V, logits32.begin() + t * ld);
  const std::vector<bf16> logits16 = test::to_bf16(logits32);
  const std::vector<bf16> poison = test::to_bf16(std::vector<float>(T * ld, NAN));
  const bool vectorized = ld % 4 == 0;  // std::vector data is 16-byte aligned

  auto run = [&](std::vector<bf16>& dl, std::vector<float>& row_loss) {
    dl = poison;
    row_loss.assign(T, NAN);
    const kernels::CrossEntropyParams p{.logits = is_bf16 ? static_cast<const void*>(logits16.data())
                                                          : static_cast<const void*>(logits32.data()),
                                        .logits_dtype = dtype,
                                        .targets = targets.data(),
                                        .loss_mask = mask.data(),
                                        .dlogits = dl.data(),
                                        .row_loss = row_loss.data(),
                                        .rows = T,
                                        .V = V,
                                        .token_count = &token_count,
                                        .loss_scale = loss_scale};
    ce::run(emu::Launch{}, p, ld, ld, vectorized);
  };
  std::vector<bf16> dl_raw, dl_raw2;
  std::vector<float> row_loss, row_loss2;
  run(dl_raw, row_loss);

  const std::vector<float> dl_all = test::to_float(dl_raw);
  const std::vector<float> dl = test::view_columns(dl_all, T, ld, 0, V);
  int64_t pad_written = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t v = V; v < ld; ++v) pad_written += !std::isnan(dl_all[t * ld + v]);
  EXPECT_EQ(pad_written, 0) << "dlogits padding columns were written";

  for (int64_t t : {0, 1, 2, 5}) {
    if (t != 2) {
      EXPECT_NEAR(row_loss[t], ref_loss[t], 1e-5f * std::fabs(ref_loss[t])) << "row " << t;
    }
    const std::vector<float> got(dl.begin() + t * V, dl.begin() + (t + 1) * V);
    const std::vector<float> want(ref_dl.begin() + t * V, ref_dl.begin() + (t + 1) * V);
    EXPECT_LT(test::relative_error(got, want), test::kBf16RelTol) << "dlogits row " << t;
  }
  EXPECT_TRUE(std::isnan(row_loss[2])) << "target outside the vocabulary";
  EXPECT_TRUE(std::isnan(row_loss[4])) << "NaN logit";
  EXPECT_EQ(row_loss[3], 0.0f) << "masked-out row";
  for (int64_t v = 0; v < V; ++v) ASSERT_EQ(dl[3 * V + v], 0.0f) << "masked-out row, column " << v;
  EXPECT_EQ(dl[1 * V + V - 1], 0.0f) << "a -inf logit has probability 0";

  run(dl_raw2, row_loss2);
  EXPECT_TRUE(test::bitwise_equal(dl_raw, dl_raw2)) << "dlogits differ run to run";
  EXPECT_TRUE(test::bitwise_equal(row_loss, row_loss2)) << "row_loss differs run to run";
}

INSTANTIATE_TEST_SUITE_P(Shapes, CrossEntropyRegistersEmulated,
                         ::testing::Values(Shape{3, 0, kernels::LogitsDtype::fp32},
                                           Shape{1003, 1, kernels::LogitsDtype::fp32},
                                           Shape{13, 3, kernels::LogitsDtype::bf16},
                                           Shape{1003, 0, kernels::LogitsDtype::bf16},
                                           Shape{4100, 4, kernels::LogitsDtype::bf16},
                                           Shape{32771, 5, kernels::LogitsDtype::bf16},  // 512 threads
                                           Shape{32000, 0, kernels::LogitsDtype::fp32},
                                           Shape{32768, 1, kernels::LogitsDtype::fp32},
                                           Shape{32768, 0, kernels::LogitsDtype::bf16}));

}  // namespace
}  // namespace sg
