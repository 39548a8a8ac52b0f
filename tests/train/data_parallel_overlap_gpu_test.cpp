// Gradient reduction overlapped with the backward (ddp.overlap_grad_reduce, dist/gradient_buckets.h) at
// world size 1 on one GPU:
//   * ReadyPointsAreWhereTheGradientsAreFinal: a test reducer snapshots every bucket at its ready point
//     (on its own stream after the step's event, as the NCCL reducer forks) and joins at once; after the
//     step each snapshot must equal the final gradient — a bucket written after its ready point (a wrong
//     model/gradient_readiness.h) differs. Dense, MoE and hybrid tiny models, eager and captured whole.
//   * OverlapIsBitwiseTheReductionAfterTheBackward: the NCCL reducer with overlap on and off (and the
//     single process) train to the same bits in none, local and transformer_engine attn+mlp, with the
//     all-reduce and with the distributed optimizer, two microbatches, small buckets.
// At world size 1 NCCL's sums change nothing, so the second test proves the mechanism (the fork and join
// inside a capture and between region replays, the order on the two streams), the first the timing.
// Filter: --gtest_filter='DataParallelOverlapGpu*'
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/strings.h"
#include "cuda/device.h"
#include "cuda/stream.h"
#include "dist/gradient_reducer.h"
#include "gpu_test_util.h"
#include "graph/registry.h"
#include "model/gradient_readiness.h"
#include "model/init.h"
#include "model/layer_registry.h"
#include "model/train_step.h"
#include "train/data_parallel_runs.h"

namespace sg::train {
namespace {

using graph_runs::bitwise_equal;

class DataParallelOverlapGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no GPU";
  }
};

// Copies each bucket at its ready point instead of reducing it (test memory, outside the step's arena).
class SnapshotReducer final : public dist::GradientReducer {
 public:
  explicit SnapshotReducer(dist::DataParallelLayout layout)
      : layout_(std::move(layout)), snapshot_(static_cast<size_t>(layout_.padded_params)) {}
  const dist::DataParallelLayout& layout() const override { return layout_; }
  void bind(const dist::ReducerBuffers& buffers, cudaStream_t) override { grads_ = static_cast<float*>(buffers.grads); }
  void gradients_ready(int point, cudaStream_t stream) override {
    EXPECT_EQ(point, next_point_++);
    passed_.record(stream);
    side_.wait(passed_);
    for (const dist::GradientBucket& b : layout_.buckets) {
      if (b.ready_point != point) continue;
      SG_CUDA_CHECK(cudaMemcpyAsync(snapshot_.get() + b.range.begin, grads_ + b.range.begin,
                                    static_cast<size_t>(b.range.size) * sizeof(float), cudaMemcpyDeviceToDevice, side_));
    }
    done_.record(side_);  // joined at once: the snapshot is exactly the gradients at this point
    SG_CUDA_CHECK(cudaStreamWaitEvent(stream, done_, 0));
  }
  void reduce_gradients(cudaStream_t) override {
    EXPECT_EQ(next_point_, layout_.ready_points);
    next_point_ = 0;
  }
  void reduce_norm_partials(cudaStream_t) override {}
  void gather_weights(cudaStream_t) override {}
  void reduce_eval_loss(cudaStream_t) override {}
  void gather_optimizer_slices(const void* shard, void* staging, dist::ElementType type, cudaStream_t stream) override {
    const size_t element_bytes = type == dist::ElementType::bf16 ? sizeof(uint16_t) : sizeof(float);
    if (shard != staging) {
      SG_CUDA_CHECK(cudaMemcpyAsync(staging, shard, static_cast<size_t>(layout_.owned.size) * element_bytes,
                                    cudaMemcpyDeviceToDevice, stream));
    }
    SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  std::vector<float> snapshot() { return snapshot_.download(); }

 private:
  dist::DataParallelLayout layout_;
  test::DeviceBuffer<float> snapshot_;
  float* grads_ = nullptr;
  cuda::Stream side_;
  cuda::Event passed_, done_;
  int next_point_ = 0;
};

TEST_F(DataParallelOverlapGpu, ReadyPointsAreWhereTheGradientsAreFinal) {
  for (const char* recipe : {"llama/tiny", "moe/tiny_moe", "hybrid/tiny_hybrid"}) {
    SCOPED_TRACE(recipe);
    const config::Config config = graph_runs::recipe_with(recipe, {});
    const model::ModelSpec spec = config::model_spec(config);
    const model::ModelLayout layout = model::model_layout(spec);
    // Buckets of 256 elements: every ready point has some (the tiny models have a few thousand).
    SnapshotReducer reducer(
        dist::plan_data_parallel(layout.total(), 1, 0, false, 256, model::gradient_readiness(layout), true));
    model::TrainStepOptions options;
    options.reducer = &reducer;
    const auto seed = static_cast<uint64_t>(config.rng.seed);
    model::TrainStep step(spec, config::batch_spec(config), optimizer_spec(config), seed, options);
    cuda::Stream stream;
    step.upload_parameters(stream, model::initial_parameters(step.layout(), seed));
    test::LoaderBatches batches(test::mock_data_options(config, spec), spec, config::batch_spec(config));
    graph::EagerRegionRunner eager;
    graph::GraphRegistry registry;
    for (int s = 0; s < 3; ++s) {  // eager, eager, then the whole step captured and replayed
      SCOPED_TRACE(s < 2 ? "eager" : "captured");
      step.upload_batch(stream, batches.next());
      if (s < 2) {
        step.enqueue_step(stream, eager);
      } else {
        graph::GraphExec& exec =
            registry.capture("step", stream, [&](cudaStream_t st) { step.enqueue_step(st, eager); });
        registry.launch(exec, stream);
      }
      stream.synchronize();
      const std::vector<float> grads = step.download_grads(stream);
      const std::vector<float> snapshot = reducer.snapshot();
      ASSERT_EQ(grads.size(), snapshot.size());
      size_t changed = 0;
      std::string first;
      for (size_t i = 0; i < grads.size(); ++i) {
        if (std::memcmp(&grads[i], &snapshot[i], sizeof(float)) != 0) {
          if (changed++ == 0) {
            for (const model::ParamTensor& t : layout.tensors()) {
              if (static_cast<int64_t>(i) >= t.offset && static_cast<int64_t>(i) < t.offset + t.numel) first = t.name;
            }
          }
        }
      }
      EXPECT_EQ(changed, 0u) << changed << " gradients changed after their bucket's ready point, the first in "
                             << first;
      double norm = 0;
      for (const float g : grads) norm += static_cast<double>(g) * g;
      EXPECT_GT(norm, 0.0) << "the step wrote gradients";
    }
  }
}

TEST_F(DataParallelOverlapGpu, OverlapIsBitwiseTheReductionAfterTheBackward) {
  const std::unique_ptr<DistributedRun> world = dp_runs::world_of_one();
  const std::vector<std::vector<std::string>> modes = {
      {"model.cuda_graph_impl=none"},
      {"model.cuda_graph_impl=local", "rerun_state_machine.check_for_nan_in_loss=false"},
      {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=attn,mlp"},
  };
  const dp_runs::RunResult reference = dp_runs::run_single(dp_runs::tiny_with(modes[0]));
  ASSERT_EQ(reference.losses.size(), static_cast<size_t>(dp_runs::kSteps));
  for (const auto& mode : modes) {
    for (const char* optimizer : {"optimizer.use_distributed_optimizer=false", "optimizer.use_distributed_optimizer=true"}) {
      std::vector<dp_runs::RunResult> runs;
      for (const char* overlap : {"ddp.overlap_grad_reduce=false", "ddp.overlap_grad_reduce=true"}) {
        std::vector<std::string> overrides = mode;
        overrides.insert(overrides.end(), {optimizer, "ddp.bucket_size=1000", overlap});
        SCOPED_TRACE(join(overrides, " "));
        runs.push_back(dp_runs::run_world_one(*world, dp_runs::tiny_with(overrides)));
        dp_runs::expect_bitwise_same_run(runs.back(), reference, mode[0] == "model.cuda_graph_impl=none");
      }
      SCOPED_TRACE(join(mode, " ") + " " + optimizer + ": overlap on against off");
      EXPECT_TRUE(bitwise_equal(runs[1].losses, runs[0].losses));
      EXPECT_TRUE(bitwise_equal(runs[1].state.main_weights, runs[0].state.main_weights));
      EXPECT_TRUE(bitwise_equal(runs[1].state.exp_avg, runs[0].state.exp_avg));
      EXPECT_TRUE(bitwise_equal(runs[1].state.exp_avg_sq, runs[0].state.exp_avg_sq));
    }
  }
  world->finish();
}

}  // namespace
}  // namespace sg::train
