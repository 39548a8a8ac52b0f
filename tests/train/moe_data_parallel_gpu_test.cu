// MoE layers at data-parallel world size 2, on one GPU: their auxiliary losses and the token counts their
// expert bias is updated from must be the global batch's, as at world size 1.
//
// A reducer stands for two ranks that trained on the same batch: each sum over the ranks is this rank's value
// doubled (exact in floating point and in int32). At world size 2 the step scales every loss and loss gradient
// by 1 / (2 M), half of world size 1's 1 / M (exact: M is a power of two), so with the doubled sums the step
// must train bitwise like world size 1 on that batch — the loss, the auxiliary loss and z-loss, the grad norm,
// the fp32 weights (the expert biases included) and Adam's moments — and each step's token counts per expert
// must be twice world size 1's (summed over the ranks before step_end reads them). A rank that scaled its
// auxiliary losses by its own microbatches would train on twice their gradient; one that kept its own counts
// would log half. Eager steps, then the whole step captured and replayed. Ranks with different data: the
// two-rank MoE runs of `scripts/gpu.sh dp`.
// Filter: --gtest_filter='MoeDataParallelGpu*'
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/stream.h"
#include "dist/gradient_reducer.h"
#include "graph/registry.h"
#include "graph_mode_runs.h"
#include "model/gradient_readiness.h"
#include "model/init.h"
#include "model/layer_registry.h"
#include "model/train_step.h"

namespace sg::train {
namespace {

using graph_runs::bitwise_equal;

template <class T>
__global__ void double_in_place(T* values, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    values[i] = values[i] + values[i];
  }
}

template <class T>
void double_values(T* values, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  double_in_place<T><<<64, 256, 0, stream>>>(values, n);
  SG_CUDA_CHECK(cudaGetLastError());
}

// Rank 0 of two whose other rank holds the same values (the all-reduce's sums: every value doubled).
class MirrorReducer final : public dist::GradientReducer {
 public:
  explicit MirrorReducer(dist::DataParallelLayout layout) : layout_(std::move(layout)) {}
  const dist::DataParallelLayout& layout() const override { return layout_; }
  void bind(const dist::ReducerBuffers& buffers, cudaStream_t) override {
    ASSERT_EQ(buffers.grad_type, dist::ElementType::f32);
    buffers_ = buffers;
  }
  void gradients_ready(int, cudaStream_t) override {}
  void reduce_gradients(cudaStream_t stream) override {
    double_values(static_cast<float*>(buffers_.grads), layout_.padded_params, stream);
    double_values(buffers_.losses, buffers_.losses_count, stream);
    double_values(buffers_.step_counts, buffers_.step_counts_count, stream);
  }
  void reduce_norm_partials(cudaStream_t) override {}  // every rank holds every gradient (not sharded)
  void gather_weights(cudaStream_t) override {}
  void reduce_eval_loss(cudaStream_t stream) override { double_values(buffers_.eval_loss_sums, 2, stream); }
  void gather_optimizer_slices(const void*, void*, dist::ElementType, cudaStream_t) override {
    FAIL() << "not sharded: nothing to gather";
  }
  int64_t step_counts_count() const { return buffers_.step_counts_count; }

 private:
  dist::DataParallelLayout layout_;
  dist::ReducerBuffers buffers_;
};

struct StepRecord {
  model::StepScalars scalars;
  std::vector<std::vector<int32_t>> token_counts;  // per MoE layer
};

struct TrainedRun {
  std::vector<StepRecord> steps;
  std::vector<float> main_weights, exp_avg, exp_avg_sq;
};

constexpr int kSteps = 4;  // eager, eager, then captured and replayed

// kSteps steps of `config`'s model on the same batches; `reducer` null: world size 1.
TrainedRun run_steps(const config::Config& config, MirrorReducer* reducer) {
  const model::ModelSpec spec = config::model_spec(config);
  const model::BatchSpec single = config::batch_spec(config);
  model::BatchSpec batch = single;
  model::TrainStepOptions options;
  if (reducer != nullptr) {
    batch.data_parallel_size = 2;  // this rank's microbatches are world size 1's; the other rank's the same
    options.reducer = reducer;
  }
  const auto seed = static_cast<uint64_t>(config.rng.seed);
  model::TrainStep step(spec, batch, optimizer_spec(config), seed, options);
  cuda::Stream stream;
  step.upload_parameters(stream, model::initial_parameters(step.layout(), seed));
  test::LoaderBatches batches(test::mock_data_options(config, spec), spec, single);
  graph::EagerRegionRunner eager;
  graph::GraphRegistry registry;
  graph::GraphExec* exec = nullptr;
  TrainedRun run;
  for (int s = 0; s < kSteps; ++s) {
    step.upload_batch(stream, batches.next());
    if (s < 2) {
      step.enqueue_step(stream, eager);
    } else {
      if (exec == nullptr)
        exec = &registry.capture("step", stream, [&](cudaStream_t st) { step.enqueue_step(st, eager); });
      registry.launch(*exec, stream);
    }
    stream.synchronize();
    run.steps.push_back({step.download_scalars(stream), model::moe_step_token_counts(step.layers(), stream)});
  }
  run.main_weights = step.download_main_weights(stream);
  run.exp_avg = step.download_exp_avg(stream);
  run.exp_avg_sq = step.download_exp_avg_sq(stream);
  return run;
}

struct Routing {
  const char* name;
  std::vector<std::string> overrides;
};

class MoeDataParallelGpu : public ::testing::TestWithParam<Routing> {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no GPU";
  }
};

TEST_P(MoeDataParallelGpu, TwoRanksOfOneBatchTrainBitwiseLikeOneRank) {
  std::vector<std::string> overrides = {"model.attention_dropout=0", "model.hidden_dropout=0"};
  overrides.insert(overrides.end(), GetParam().overrides.begin(), GetParam().overrides.end());
  const config::Config config = graph_runs::recipe_with("moe/tiny_moe", overrides);
  ASSERT_EQ(config::batch_spec(config).num_microbatches, 2);

  const TrainedRun single = run_steps(config, nullptr);
  const model::ModelLayout layout = model::model_layout(config::model_spec(config));
  MirrorReducer reducer(
      dist::plan_data_parallel(layout.total(), 2, 0, /*sharded=*/false, 0, model::gradient_readiness(layout)));
  const TrainedRun two = run_steps(config, &reducer);
  EXPECT_EQ(reducer.step_counts_count(), 4 * 8) << "one step count per expert of each of the 4 MoE layers";

  for (int s = 0; s < kSteps; ++s) {
    SCOPED_TRACE(testing::Message() << "step " << s + 1 << (s < 2 ? " (eager)" : " (captured)"));
    const model::StepScalars& a = single.steps[s].scalars;
    const model::StepScalars& b = two.steps[s].scalars;
    EXPECT_GT(a.aux_loss, 0.0f) << "world size 1 computes the auxiliary loss";
    EXPECT_TRUE(bitwise_equal({b.loss, b.aux_loss, b.z_loss, b.grad_norm}, {a.loss, a.aux_loss, a.z_loss, a.grad_norm}))
        << "loss " << b.loss << " vs " << a.loss << ", aux " << b.aux_loss << " vs " << a.aux_loss << ", z " << b.z_loss
        << " vs " << a.z_loss << ", grad norm " << b.grad_norm << " vs " << a.grad_norm;
    ASSERT_EQ(single.steps[s].token_counts.size(), 4u);
    ASSERT_EQ(two.steps[s].token_counts.size(), 4u);
    for (size_t l = 0; l < 4; ++l) {
      std::vector<int32_t> doubled = single.steps[s].token_counts[l];
      int64_t routed = 0;
      for (int32_t& c : doubled) {
        routed += c;
        c *= 2;
      }
      EXPECT_GT(routed, 0) << "MoE layer " << l << " counted its tokens";
      EXPECT_EQ(two.steps[s].token_counts[l], doubled) << "MoE layer " << l << ": the counts summed over both ranks";
    }
  }
  EXPECT_TRUE(bitwise_equal(two.main_weights, single.main_weights))
      << graph_runs::bits_diff(two.main_weights, single.main_weights);
  EXPECT_TRUE(bitwise_equal(two.exp_avg, single.exp_avg));
  EXPECT_TRUE(bitwise_equal(two.exp_avg_sq, single.exp_avg_sq));
}

INSTANTIATE_TEST_SUITE_P(
    Routings, MoeDataParallelGpu,
    ::testing::Values(Routing{"softmax_aux_and_z_loss", {"model.moe_z_loss_coeff=1e-3"}},
                      // The expert bias moves by the sign of each expert's count against the mean: a count of
                      // one rank's tokens would give the same signs here, so the counts above are the check.
                      Routing{"sigmoid_expert_bias_seq_aux_loss_token_drop",
                              {"model.moe_router_score_function=sigmoid", "model.moe_router_enable_expert_bias=true",
                               "model.moe_router_bias_update_rate=1e-2", "model.moe_z_loss_coeff=1e-3",
                               "model.moe_expert_capacity_factor=1.25", "model.moe_token_drop_policy=position",
                               "model.moe_router_load_balancing_type=seq_aux_loss"}}),
    [](const testing::TestParamInfo<Routing>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace sg::train
