// NVTX ranges of a training step (what Nsight Systems shows): "step N" > "microbatch M" >
// "layer L forward|backward" > "layer L attn|mlp forward|backward[ first]" (L: the layer's index in the stack; "first":
// the first microbatch's backward), in eager steps and in
// transformer_engine replays, for every microbatch and layer. Recorded in-process through NVTX's static
// injection (tests/nvtx_recorder.h), so no profiler is needed.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cuda/device.h"
#include "cuda/nvtx.h"
#include "cuda/stream.h"
#include "model/train_step.h"
#include "nvtx_recorder.h"
#include "test_util.h"
#include "train/backend_factory.h"
#include "config/config.h"
#include "train/graphed_step.h"
#include "config/model_config.h"
#include "config/validate.h"

namespace sg::train {
namespace {

using test::NvtxRangeEvent;

constexpr int kWarmup = 1;

config::Config two_microbatches(const std::string& impl, const std::string& scope) {
  std::vector<std::string> overrides = {"train.global_batch_size=8", "model.num_layers=2", "dataset.mock=true",
                                        "model.cuda_graph_impl=" + impl,
                                        "model.cuda_graph_warmup_steps=" + std::to_string(kWarmup)};
  if (!scope.empty()) overrides.push_back("model.cuda_graph_scope=" + scope);
  const config::ValidationReport report = config::validate(config::load_config("llama/tiny", overrides));
  EXPECT_TRUE(report.ok()) << (report.violations.empty() ? "" : config::format_violation(report.violations[0]));
  return report.config;
}

// Depth of the first range called `name`, or -1.
int depth_of(const std::vector<NvtxRangeEvent>& events, const std::string& name) {
  const auto it = std::find_if(events.begin(), events.end(), [&](const NvtxRangeEvent& e) { return e.name == name; });
  return it == events.end() ? -1 : it->depth;
}

// The ranges of the step that runs after `steps_before` steps of `impl`/`scope`.
std::vector<NvtxRangeEvent> ranges_of_step(const config::Config& config, int steps_before) {
  const model::ModelSpec model = config::model_spec(config);
  const model::BatchSpec batch = config::batch_spec(config);
  model::TrainStep step(model, batch, optimizer_spec(config), static_cast<uint64_t>(config.rng.seed));
  cuda::Stream stream;
  const size_t n = static_cast<size_t>(batch.num_microbatches * batch.tokens_per_microbatch(model));
  model::HostBatch host;
  host.tokens = test::random_tokens(n, static_cast<int32_t>(model.vocab_size), 1);
  host.targets = test::random_tokens(n, static_cast<int32_t>(model.vocab_size), 2);
  host.loss_mask.assign(n, 1.0f);
  step.upload_batch(stream.get(), host);
  GraphedStep graphed(step, config.model.cuda_graph_impl, config.model.cuda_graph_scope, kWarmup);
  for (int i = 0; i < steps_before; ++i) graphed.run(stream.get());
  stream.synchronize();
  test::nvtx_recording_start();
  graphed.run(stream.get());
  std::vector<NvtxRangeEvent> events = test::nvtx_recording_stop();
  stream.synchronize();
  return events;
}

class NvtxRanges : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no GPU";
    { const cuda::NvtxRange first("nvtx init"); }  // NVTX attaches its tool on the first call
    if (!test::nvtx_recorder_attached()) GTEST_SKIP() << "another NVTX tool (a profiler) is attached";
  }

  // Every microbatch and layer has its ranges, each nested in the one above it.
  static void expect_structure(const std::vector<NvtxRangeEvent>& events, const std::string& step_name) {
    std::string all;
    for (const NvtxRangeEvent& e : events) all += std::string(static_cast<size_t>(e.depth) * 2, ' ') + e.name + "\n";
    const int step = depth_of(events, step_name);
    ASSERT_GE(step, 0) << "no '" << step_name << "' range; got:\n" << all;
    for (const std::string mb : {"microbatch 0", "microbatch 1"}) {
      EXPECT_EQ(depth_of(events, mb), step + 1) << mb << "\n" << all;
    }
    // Two GPT blocks: four layers of the stack, attention and MLP alternating.
    for (int layer = 0; layer < 4; ++layer) {
      for (const std::string phase : {"forward", "backward"}) {
        const std::string layer_range = "layer " + std::to_string(layer) + " " + phase;
        EXPECT_EQ(depth_of(events, layer_range), step + 2) << layer_range << "\n" << all;
        const std::string module = layer % 2 == 0 ? "attn" : "mlp";
        const std::string region = "layer " + std::to_string(layer) + " " + module + " " + phase;
        EXPECT_EQ(depth_of(events, region), step + 3) << region << "\n" << all;
      }
      // The first microbatch's backward regions (they overwrite the gradients: graph/region.h).
      const std::string first = "layer " + std::to_string(layer) + " " + (layer % 2 == 0 ? "attn" : "mlp") +
                                " backward first";
      EXPECT_EQ(depth_of(events, first), step + 3) << first << "\n" << all;
    }
  }
};

TEST_F(NvtxRanges, EagerStepShowsStepMicrobatchLayerAndModule) {
  expect_structure(ranges_of_step(two_microbatches("none", ""), 0), "step 1 [eager]");
}

TEST_F(NvtxRanges, TransformerEngineReplayShowsStepMicrobatchLayerAndModule) {
  // Warmup, then the capture step; the third step replays the region graphs.
  expect_structure(ranges_of_step(two_microbatches("transformer_engine", "attn,mlp"), kWarmup + 1), "step 3");
}

TEST_F(NvtxRanges, WholeStepReplayIsOneRange) {
  // A replayed whole-step graph is one launch: one range, nothing inside it on the host.
  const std::vector<NvtxRangeEvent> events = ranges_of_step(two_microbatches("local", ""), kWarmup + 1);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].name, "step 3 [replay]");
}

}  // namespace
}  // namespace sg::train
