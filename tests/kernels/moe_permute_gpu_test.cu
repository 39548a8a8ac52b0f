// GPU MoE dispatch (moe_count_experts + moe_preprocess, permute forward and backward) against
// reference/moe_permute on fresh random routings: dropless, drop by probs (with many tied probs) and by
// position, with and without padding, zero-token experts and every token on one expert.
// Tolerances: every map, count and offset exact; the permute copies bf16 rows (exact) and its backward
// adds at most k bf16 rows in fp32 in slot order, as the twin does, so after rounding to bf16 it is
// exact too. Outputs are poisoned before each run; each run twice, bitwise identical; the whole dispatch
// is also captured in a CUDA graph and replayed with identical results.
#include <gtest/gtest.h>

#include <vector>

#include "core/strings.h"
#include "cuda/stream.h"
#include "kernels/moe_permute.h"
#include "kernels/moe_router.h"
#include "moe_test_inputs.h"
#include "reference/moe_permute.h"
#include "reference/moe_router.h"

namespace {

using namespace sg;
using namespace sg::test;
using ref::MoeDispatch;
using ref::MoeDropPolicy;

struct DeviceDispatch {
  DeviceBuffer<int32_t> counts, kept, rows, offsets, slot_to_row, row_to_slot, step_counts;
  DeviceBuffer<char> workspace;
  explicit DeviceDispatch(const MoeDispatch& d)
      : counts(d.E), kept(d.E), rows(d.E), offsets(d.E + 1), slot_to_row(d.T * d.k), row_to_slot(d.permuted_rows()),
        step_counts(d.E), workspace(kernels::moe_preprocess_workspace_bytes(d)) {}
  void poison() {
    for (auto* b : {&counts, &kept, &rows, &offsets, &slot_to_row, &row_to_slot}) fill_bytes(*b, kPoisonIntByte);
  }
  void enqueue(cudaStream_t stream, const MoeDispatch& d, const int32_t* map, const float* probs) {
    kernels::moe_count_experts(stream, {.routing_map = map, .counts = counts.get(), .T = d.T, .E = d.E, .k = d.k});
    kernels::moe_preprocess(stream, {.routing_map = map,
                                     .probs = probs,
                                     .expert_counts = counts.get(),
                                     .dispatch = d,
                                     .workspace = workspace.get(),
                                     .workspace_bytes = workspace.size(),
                                     .kept_counts = kept.get(),
                                     .expert_rows = rows.get(),
                                     .expert_row_offsets = offsets.get(),
                                     .slot_to_row = slot_to_row.get(),
                                     .row_to_slot = row_to_slot.get(),
                                     .step_counts = step_counts.get()});
  }
};

void expect_maps(DeviceDispatch& dev, const ref::MoePermutation& p, const std::string& what) {
  EXPECT_EQ(dev.kept.download(), p.kept_counts) << what;
  EXPECT_EQ(dev.rows.download(), p.expert_rows) << what;
  EXPECT_EQ(dev.offsets.download(), p.expert_row_offsets) << what;
  EXPECT_EQ(dev.slot_to_row.download(), p.slot_to_row) << what;
  EXPECT_EQ(dev.row_to_slot.download(), p.row_to_slot) << what;
}

class MoePermuteGpu : public ::testing::TestWithParam<MoeDispatchCase> {};

TEST_P(MoePermuteGpu, MatchesReference) {
  const MoeDispatchCase& c = GetParam();
  const uint64_t seed = c.seed(5000);
  // The routing comes from the CPU router (top-k of distinct experts); the probs are a tie-rich grid.
  const auto routed = c.route(seed);
  const MoeDispatch& d = routed.dispatch;
  const int64_t slots = routed.slots, rows = routed.rows;
  const std::vector<int32_t>& map = routed.map;
  const int64_t H = c.H;
  const auto probs = tied_probs(slots, seed + 1);
  const auto perm = ref::moe_preprocess(map.data(), probs.data(), d);
  std::vector<int32_t> counts_ref(c.E), step_ref(c.E);
  ref::moe_count_experts(counts_ref.data(), map.data(), c.T, c.k, c.E, c.T);
  for (int64_t e = 0; e < c.E; ++e) step_ref[e] = static_cast<int32_t>(e % 5) + 2 * perm.kept_counts[e];

  const auto hidden = round_bf16(random_normal(c.T * H, seed + 2));
  const auto dpermuted = round_bf16(random_normal(rows * H, seed + 3));
  std::vector<float> permuted_ref(rows * H), dhidden_ref(c.T * H);
  ref::moe_permute_forward(permuted_ref.data(), hidden.data(), perm.row_to_slot.data(), rows, c.k, H);
  ref::moe_permute_backward(dhidden_ref.data(), dpermuted.data(), perm.slot_to_row.data(), c.T, c.k, H);

  DeviceDispatch dev(d);
  DeviceBuffer<int32_t> d_map(slots);
  DeviceBuffer<float> d_probs(slots);
  DeviceBuffer<bf16> d_hidden(c.T * H), d_permuted(rows * H), d_dpermuted(rows * H), d_dhidden(c.T * H);
  d_map.upload(map);
  d_probs.upload(probs);
  d_hidden.upload(to_bf16(hidden));
  d_dpermuted.upload(to_bf16(dpermuted));
  std::vector<int32_t> step_initial(c.E);
  for (int64_t e = 0; e < c.E; ++e) step_initial[e] = static_cast<int32_t>(e % 5);
  dev.step_counts.upload(step_initial);
  cuda::Stream stream;

  auto run = [&] {
    dev.poison();
    d_permuted.poison();
    d_dhidden.poison();
    dev.enqueue(stream, d, d_map.get(), d_probs.get());
    kernels::moe_permute_forward(
        stream, {.permuted = d_permuted.get(), .hidden = d_hidden.get(), .row_to_slot = dev.row_to_slot.get(),
                 .rows = rows, .k = c.k, .H = H});
    kernels::moe_permute_backward(
        stream, {.dhidden = d_dhidden.get(), .dpermuted = d_dpermuted.get(), .slot_to_row = dev.slot_to_row.get(),
                 .T = c.T, .k = c.k, .H = H});
    device_sync();
  };
  run();
  EXPECT_EQ(dev.counts.download(), counts_ref);
  expect_maps(dev, perm, "eager");
  const auto permuted = d_permuted.download();
  const auto dhidden = d_dhidden.download();
  EXPECT_TRUE(same_bits(permuted, to_bf16(permuted_ref)));
  EXPECT_TRUE(same_bits(dhidden, to_bf16(dhidden_ref)));
  run();  // the step counts accumulate once more
  EXPECT_EQ(dev.step_counts.download(), step_ref);
  expect_maps(dev, perm, "second run");
  EXPECT_TRUE(same_bits(d_permuted.download(), permuted));
  EXPECT_TRUE(same_bits(d_dhidden.download(), dhidden));

  // Captured and replayed: the same maps (no host sync or allocation inside, CUB temp storage planned).
  dev.poison();
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  SG_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  dev.enqueue(stream, d, d_map.get(), d_probs.get());
  SG_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  SG_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  SG_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  device_sync();
  expect_maps(dev, perm, "graph replay");
  SG_CUDA_CHECK(cudaGraphExecDestroy(exec));
  SG_CUDA_CHECK(cudaGraphDestroy(graph));
}

INSTANTIATE_TEST_SUITE_P(Cases, MoePermuteGpu, ::testing::ValuesIn(kMoeDispatchCases),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
