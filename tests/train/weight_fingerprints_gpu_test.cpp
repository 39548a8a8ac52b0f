// The step's weight fingerprints (validation.test_mode, TrainStep::enqueue_weight_fingerprints) after a training step
// equal the CPU twin's (reference/weight_fingerprint.h) over the weights downloaded from the same step: the bf16
// buffer with its data-parallel padding, then the fp32 main weights; with the distributed optimizer's layout the fp32
// part is left out. The host buffer is poisoned first.
// Filter: --gtest_filter='WeightFingerprintsGpu*'
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "cuda/device.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "graph_mode_runs.h"
#include "model/init.h"
#include "model/train_step.h"
#include "reference/weight_fingerprint.h"

namespace sg::train {
namespace {

class WeightFingerprintsGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no GPU";
  }
};

TEST_F(WeightFingerprintsGpu, AfterAStepTheyAreTheCpuTwinsOfTheDownloadedWeights) {
  const config::Config config = graph_runs::recipe_with("llama/tiny", {});
  const model::ModelSpec spec = config::model_spec(config);
  const model::BatchSpec batch = config::batch_spec(config);
  model::TrainStepOptions options;
  options.weight_fingerprints = true;
  const auto seed = static_cast<uint64_t>(config.rng.seed);
  model::TrainStep step(spec, batch, optimizer_spec(config), seed, options);
  cuda::Stream stream;
  step.upload_parameters(stream, model::initial_parameters(step.layout(), seed));
  test::LoaderBatches batches(test::mock_data_options(config, spec), spec, batch);
  step.upload_batch(stream, batches.next());
  graph::EagerRegionRunner eager;
  step.enqueue_step(stream, eager);

  const model::WeightFingerprintLayout& layout = step.weight_fingerprints();
  const int64_t total = step.layout().total();
  ASSERT_EQ(layout.bf16_elements, step.data_parallel().padded_params);
  ASSERT_EQ(layout.fp32_elements, total);
  std::vector<uint64_t> got(static_cast<size_t>(layout.count()), 0xdeadbeefdeadbeefull);
  step.enqueue_weight_fingerprints(stream, got.data());
  stream.synchronize();

  // The bf16 weights widen exactly, so rounding them back gives their bits; the padding is zero.
  const std::vector<float> compute = step.download_compute_weights(stream);
  ASSERT_EQ(static_cast<int64_t>(compute.size()), total);
  std::vector<float> padded(compute);
  padded.resize(static_cast<size_t>(layout.bf16_elements), 0.0f);
  const std::vector<bf16> bf16_weights = test::to_bf16(padded);
  const std::vector<float> main = step.download_main_weights(stream);
  std::vector<uint64_t> expected(static_cast<size_t>(layout.count()));
  ref::weight_fingerprints(bf16_weights.data(), 2, layout.bf16_elements, layout.chunk_elements, expected.data());
  ref::weight_fingerprints(main.data(), 4, total, layout.chunk_elements, expected.data() + layout.bf16_chunks());
  EXPECT_EQ(got, expected);
  EXPECT_NE(main, std::vector<float>(main.size(), 0.0f));
}

}  // namespace
}  // namespace sg::train
