// The whole NCCL path at world size 1, on one GPU (issue 16): the communicator and its collectives, an
// all-reduce captured in a graph equal to eager bitwise, the training step with the gradient reducer in
// every graph mode (all-reduce in several buckets, and the distributed optimizer) bitwise equal to the
// single-process step, and the teardown order — graphs destroyed before the communicator on a normal
// end, at std::exit and after SIGTERM.
// Filter: --gtest_filter='DataParallelGpu*'
#include <gtest/gtest.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/model_config.h"
#include "core/strings.h"
#include "cuda/device.h"
#include "cuda/stream.h"
#include "dist/communicator.h"
#include "gpu_test_util.h"
#include "graph/registry.h"
#include "process_util.h"
#include "signal_child.h"
#include "train/backend_factory.h"
#include "train/data_parallel_runs.h"
#include "train/distributed_backend.h"
#include "train/distributed_run.h"
#include "train/gpu_backend.h"
#include "train/graph_mode_runs.h"
#include "train/mock_training.h"

namespace sg::train {
namespace {

constexpr const char* kHelperEnv = "SG_DATA_PARALLEL_GPU_HELPER";

using graph_runs::bitwise_equal;

class DataParallelGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no GPU";
  }
};

using dp_runs::kSteps;
using dp_runs::RunResult;
using dp_runs::run_single;
using dp_runs::run_world_one;
using dp_runs::tiny_with;
using dp_runs::world_of_one;

TEST_F(DataParallelGpu, CollectivesAtWorldSizeOne) {
  dist::Communicator comm(dist::new_nccl_unique_id(), 1, 0);
  EXPECT_EQ(comm.world_size(), 1);
  std::printf("%s\n", comm.describe().c_str());
  const size_t n = 1000003;  // not a multiple of anything NCCL likes
  const std::vector<float> x = test::random_normal(n, 3);
  test::DeviceBuffer<float> a(n), b(n);
  a.upload(x);
  b.poison();
  cuda::Stream stream;
  dist::Communicator& c = comm;
  c.all_reduce_sum(a.get(), b.get(), n, dist::ElementType::f32, stream);        // out of place
  c.all_reduce_sum(a.get(), a.get(), n, dist::ElementType::f32, stream);        // in place
  c.reduce_scatter_sum(a.get(), a.get(), n, dist::ElementType::f32, stream);    // in place, rank 0
  c.all_gather(a.get(), a.get(), n, dist::ElementType::f32, stream);            // in place, rank 0
  stream.synchronize();
  c.check_async_error();
  EXPECT_TRUE(bitwise_equal(a.download(), x));
  EXPECT_TRUE(bitwise_equal(b.download(), x));
}

TEST_F(DataParallelGpu, AllReduceCapturedInAGraphEqualsEager) {
  dist::Communicator comm(dist::new_nccl_unique_id(), 1, 0);
  const size_t n = 70001;
  const std::vector<float> x = test::random_normal(n, 5);
  test::DeviceBuffer<float> in(n), mid(n), eager_out(n), graph_out(n);
  in.upload(x);
  cuda::Stream stream;
  const auto body = [&](float* out) {
    return [&, out](cudaStream_t s) {
      SG_CUDA_CHECK(cudaMemcpyAsync(mid.get(), in.get(), n * sizeof(float), cudaMemcpyDeviceToDevice, s));
      comm.all_reduce_sum(mid.get(), mid.get(), n, dist::ElementType::f32, s);
      SG_CUDA_CHECK(cudaMemcpyAsync(out, mid.get(), n * sizeof(float), cudaMemcpyDeviceToDevice, s));
    };
  };
  eager_out.poison();
  body(eager_out.get())(stream);
  stream.synchronize();
  graph::GraphRegistry registry;
  graph::GraphExec& exec = registry.capture("all-reduce", stream, body(graph_out.get()));
  for (int replay = 0; replay < 3; ++replay) {
    graph_out.poison();
    registry.launch(exec, stream);
    stream.synchronize();
    EXPECT_TRUE(bitwise_equal(graph_out.download(), eager_out.download())) << "replay " << replay;
  }
  EXPECT_TRUE(bitwise_equal(eager_out.download(), x));
  comm.check_async_error();
}


TEST_F(DataParallelGpu, StepWithTheReducerIsBitwiseTheSingleProcessStepInEveryMode) {
  const std::unique_ptr<DistributedRun> world = world_of_one();
  const std::vector<std::vector<std::string>> modes = {
      {"model.cuda_graph_impl=none"},
      {"model.cuda_graph_impl=local", "rerun_state_machine.check_for_nan_in_loss=false"},
      {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=attn,mlp"},
  };
  const RunResult reference = run_single(tiny_with(modes[0]));
  ASSERT_EQ(reference.losses.size(), static_cast<size_t>(kSteps));
  // It trains (mock tokens are near uniform, so 12 steps need not lower the loss): finite, changing losses.
  for (const float loss : reference.losses) EXPECT_TRUE(std::isfinite(loss)) << loss;
  EXPECT_NE(reference.losses.back(), reference.losses.front());
  EXPECT_EQ(reference.capture_steps, 0);
  for (const auto& mode : modes) {
    // All-reduce in buckets of 1000 elements (several NCCL calls), and the distributed optimizer.
    for (const char* optimizer : {"ddp.bucket_size=1000", "optimizer.use_distributed_optimizer=true"}) {
      std::vector<std::string> overrides = mode;
      overrides.push_back(optimizer);
      SCOPED_TRACE(join(overrides, " "));
      const RunResult r = run_world_one(*world, tiny_with(overrides));
      // Eager, or the graphs captured once (local: the collectives inside the step's graph).
      ASSERT_EQ(r.eval_losses.size(), 2u);
      dp_runs::expect_bitwise_same_run(r, reference, mode[0] == "model.cuda_graph_impl=none");
    }
  }
  world->finish();
}

// The fp32 weights the forward reads (Mamba's dt_bias, A_log and D; the MoE expert bias, which step_end updates from
// the step's token counts) come from every rank's replica of them with the distributed optimizer
// (kernels/fp32_replica.h): filled from the shard after AdamW, made whole by the reducer, the expert bias's update
// written back before AdamW. At world size 1 a hybrid Mamba model and an MoE model with the expert bias train
// through it bitwise like the single-process step (which reads the master weights), eager and in each graph mode.
// World size 2: `scripts/gpu.sh dp` (hybrid_distopt, moe_bias_distopt).
TEST_F(DataParallelGpu, Fp32WeightsTheForwardReadsTrainBitwiseWithTheDistributedOptimizer) {
  const std::unique_ptr<DistributedRun> world = world_of_one();
  struct Model {
    const char* recipe;
    std::vector<std::string> overrides;
    const char* scope;
  };
  const std::vector<Model> models = {
      {"hybrid/tiny_hybrid", {}, "attn,mamba"},
      {"moe/tiny_moe",
       {"model.moe_router_score_function=sigmoid", "model.moe_router_enable_expert_bias=true",
        "model.moe_router_bias_update_rate=1e-2", "model.moe_router_load_balancing_type=seq_aux_loss"},
       "attn,moe"},
  };
  for (const Model& model : models) {
    std::vector<std::string> base = model.overrides;
    base.insert(base.end(), {"model.use_te_rng_tracker=true", "rng.te_rng_tracker=true"});
    const auto with = [&](const std::vector<std::string>& extra) {
      std::vector<std::string> all = base;
      all.insert(all.end(), extra.begin(), extra.end());
      return dp_runs::recipe_steps_with(model.recipe, all);
    };
    const RunResult reference = run_single(with({"model.cuda_graph_impl=none"}));
    ASSERT_EQ(reference.losses.size(), static_cast<size_t>(kSteps)) << model.recipe;
    EXPECT_NE(reference.losses.back(), reference.losses.front()) << model.recipe;
    const std::vector<std::vector<std::string>> modes = {
        {"model.cuda_graph_impl=none"},
        {"model.cuda_graph_impl=local", "rerun_state_machine.check_for_nan_in_loss=false"},
        {"model.cuda_graph_impl=transformer_engine", std::string("model.cuda_graph_scope=") + model.scope},
    };
    for (std::vector<std::string> mode : modes) {
      mode.push_back("optimizer.use_distributed_optimizer=true");
      SCOPED_TRACE(std::string(model.recipe) + " " + join(mode, " "));
      dp_runs::expect_bitwise_same_run(run_world_one(*world, with(mode)), reference,
                                       mode[0] == "model.cuda_graph_impl=none");
    }
  }
  world->finish();
}

TEST_F(DataParallelGpu, GraphsAreDestroyedBeforeTheCommunicator) {
  auto comm = std::make_unique<dist::Communicator>(dist::new_nccl_unique_id(), 1, 0);
  test::DeviceBuffer<float> buffer(4096);
  cuda::Stream stream;
  graph::GraphRegistry registry;
  graph::GraphExec& exec = registry.capture("all-reduce", stream, [&](cudaStream_t s) {
    comm->all_reduce_sum(buffer.get(), buffer.get(), 4096, dist::ElementType::f32, s);
  });
  registry.launch(exec, stream);
  stream.synchronize();
  EXPECT_EQ(registry.stats().graphs_live, 1);
  comm->mark_finished();
  comm.reset();  // ncclCommDestroy: every live graph goes first
  EXPECT_EQ(registry.stats().graphs_live, 0) << "a graph holding an NCCL collective outlived its communicator";
  EXPECT_FALSE(exec.valid());
}

// Helper, run as a child: a communicator and a replaying graph with a collective, then the way out
// the mode names: "exit" calls std::exit with both alive; "signal" replays until SIGTERM.
TEST(DataParallelGpuHelper, Run) {
  const char* mode = std::getenv(kHelperEnv);
  if (mode == nullptr) GTEST_SKIP() << "helper for DataParallelGpu tests; runs only as their child";
  auto* comm = new dist::Communicator(dist::new_nccl_unique_id(), 1, 0);  // never deleted: exit() cleans up
  auto* buffer = new test::DeviceBuffer<float>(1 << 20);
  auto* stream = new cuda::Stream;
  auto* registry = new graph::GraphRegistry;
  graph::GraphExec& exec = registry->capture("all-reduce", *stream, [&](cudaStream_t s) {
    comm->all_reduce_sum(buffer->get(), buffer->get(), 1 << 20, dist::ElementType::f32, s);
  });
  graph::install_stop_handlers(1.5);
  std::printf("READY\n");
  std::fflush(stdout);
  if (std::string(mode) == "exit") {
    for (int i = 0; i < 10; ++i) registry->launch(exec, *stream);
    std::exit(0);  // at exit: graphs destroyed, then the communicator aborted (graph/registry.h)
  }
  while (!graph::stop_requested()) {
    registry->launch(exec, *stream);
    stream->synchronize();
  }
  delete registry;  // the normal way out after a signal: graphs, then the communicator
  delete comm;
  std::exit(graph::exit_code_for_stop());
}

TEST_F(DataParallelGpu, ExitWithALiveCommunicatorEndsCleanly) {
  const std::string command = std::string(kHelperEnv) + "=exit /proc/" + std::to_string(::getpid()) +
                              "/exe --gtest_filter=DataParallelGpuHelper.Run 2>&1";
  const test::CommandResult r = test::run_command(command);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("READY"), std::string::npos) << r.output;
}

TEST_F(DataParallelGpu, SigtermWhileReplayingCollectivesEndsCleanly) {
  test::SignalledChild c;
  c.helper_test = "DataParallelGpuHelper.Run";
  c.env_name = kHelperEnv;
  c.mode = "signal";
  c.signal_number = SIGTERM;
  c.deadline = std::chrono::milliseconds(5000);
  const test::ChildResult r = test::run_signalled_child(c);
  ASSERT_TRUE(r.exited) << r.output;
  EXPECT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 143) << r.output;
}

}  // namespace
}  // namespace sg::train
