// Evaluation on the GPU (validation.eval_interval): forward only with dropout off, its own CUDA graph when
// graphs are on, and it never changes the training. With dropout on and two microbatches, in every
// graph mode: the training losses, final weights, Adam moments and RNG offset are bitwise equal with and
// without evaluations every 3 steps; the evaluation graph is captured once and replayed; the validation
// losses are bitwise equal across graph modes (eager evaluation = graphed evaluation) and agree with the
// CPU twin (CpuModel::evaluate) at the same weights within the bf16 tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/model_config.h"
#include "config/validate.h"
#include "core/strings.h"
#include "cuda/device.h"
#include "data/batch.h"
#include "data/blended_dataset.h"
#include "model/cpu_model.h"
#include "test_dir.h"
#include "test_util.h"
#include "train/backend_factory.h"
#include "train/cpu_backend.h"
#include "train/data_options.h"
#include "train/evaluation.h"
#include "train/gpu_backend.h"
#include "train/mock_training.h"
#include "train/random_corpus.h"
#include "train/trainer.h"

namespace sg::train {
namespace {

constexpr int64_t kSteps = 12;

config::Config tiny_with(const std::vector<std::string>& extra) {
  std::vector<std::string> overrides = {"model.attention_dropout=0.1", "model.hidden_dropout=0.1",
                                        "train.global_batch_size=8",   "train.train_iters=12",
                                        "dataset.mock=true",           "model.cuda_graph_warmup_steps=2",
                                        "validation.eval_iters=2"};
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  return test::validated_tiny(overrides);
}

struct TrainingRun {
  std::vector<float> losses;
  std::vector<double> val_losses;
  TrainingState state;
  graph::GraphStats eval_stats;
  std::vector<bool> eval_graphed;
};

TrainingRun run_training(const config::Config& config, bool evaluate) {
  const model::ModelSpec model = config::model_spec(config);
  const model::BatchSpec batch = config::batch_spec(config);
  GpuBackend backend(config, model, batch, optimizer_spec(config), {static_cast<uint64_t>(config.rng.seed), 0});
  Evaluation evaluation(config, model, batch, {});
  test::LoaderBatches batches(test::mock_data_options(config, model), model, batch);
  TrainingRun out;
  for (int64_t step = 1; step <= kSteps; ++step) {
    backend.submit(batches.next());
    for (const StepResult& r : backend.collect(1)) out.losses.push_back(r.loss);
    if (evaluate && evaluation.due(step, kSteps)) {
      for (const StepResult& r : backend.collect(0)) out.losses.push_back(r.loss);
      const EvalResult e = evaluation.run(backend);
      out.val_losses.push_back(e.loss);
      out.eval_graphed.push_back(e.graphed);
    }
  }
  for (const StepResult& r : backend.collect(0)) out.losses.push_back(r.loss);
  out.state = backend.state();
  out.eval_stats = backend.eval_graph_stats();
  return out;
}

bool same(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class EvaluationGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no GPU";
  }
};

TEST_F(EvaluationGpu, NeverChangesTheTrainingAndIsItsOwnGraph) {
  struct Mode {
    const char* name;
    std::vector<std::string> overrides;
  };
  const std::vector<Mode> modes = {
      {"none", {"model.cuda_graph_impl=none"}},
      {"local", {"model.cuda_graph_impl=local"}},
      {"transformer_engine attn,mlp", {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=attn,mlp"}},
  };
  std::vector<double> eager_val;
  for (const Mode& mode : modes) {
    SCOPED_TRACE(mode.name);
    std::vector<std::string> with_eval = mode.overrides;
    with_eval.push_back("validation.eval_interval=3");
    const TrainingRun plain = run_training(tiny_with(mode.overrides), false);
    const TrainingRun evaluated = run_training(tiny_with(with_eval), true);
    ASSERT_EQ(plain.losses.size(), static_cast<size_t>(kSteps));
    EXPECT_TRUE(same(plain.losses, evaluated.losses)) << "training losses changed by evaluation";
    EXPECT_TRUE(same(plain.state.main_weights, evaluated.state.main_weights));
    EXPECT_TRUE(same(plain.state.exp_avg, evaluated.state.exp_avg));
    EXPECT_TRUE(same(plain.state.exp_avg_sq, evaluated.state.exp_avg_sq));
    EXPECT_EQ(plain.state.rng.offset, evaluated.state.rng.offset);
    EXPECT_EQ(plain.state.rng.seed, evaluated.state.rng.seed);
    ASSERT_EQ(evaluated.val_losses.size(), 4u);  // steps 3, 6, 9, 12
    for (const double v : evaluated.val_losses) EXPECT_TRUE(std::isfinite(v));
    const bool graphs = std::string(mode.name) != "none";
    EXPECT_EQ(evaluated.eval_stats.graphs_created, graphs ? 1 : 0);
    if (graphs) {
      // The first evaluation's first batch is eager, its second batch captures; later ones replay.
      EXPECT_EQ(evaluated.eval_stats.replays, 4u * 2u - 1u);
      for (const bool g : evaluated.eval_graphed) EXPECT_TRUE(g);
    }
    if (eager_val.empty()) {
      eager_val = evaluated.val_losses;
    } else {
      EXPECT_EQ(std::memcmp(eager_val.data(), evaluated.val_losses.data(), eager_val.size() * sizeof(double)), 0)
          << "graphed evaluation differs from eager evaluation";
    }
  }
}

// With the training's batch, and with validation batches of 4 sequences read 3 times: 12 rows in the step's 8-row
// shape, the second step-shaped batch half padding, which neither side counts (both count the tokens of 12 rows, not
// 16). The GPU and the CPU twin (CpuBackend through the same Evaluation) agree at the same
// weights; and reading the 12 rows as one validation batch of 12 packs them alike, so the GPU loss is the same bits.
TEST_F(EvaluationGpu, AgreesWithTheCpuTwinAtTheSameWeights) {
  const std::vector<std::vector<std::string>> eval_batches = {
      {}, {"validation.eval_global_batch_size=4", "validation.eval_iters=3"}};
  for (const std::vector<std::string>& eval_batch : eval_batches) {
    SCOPED_TRACE(join(eval_batch, " "));
    std::vector<std::string> overrides = {"validation.eval_interval=1", "model.cuda_graph_impl=none"};
    overrides.insert(overrides.end(), eval_batch.begin(), eval_batch.end());
    const config::Config config = tiny_with(overrides);
    const model::ModelSpec model = config::model_spec(config);
    const model::BatchSpec batch = config::batch_spec(config);
    const rng::RngState rng{static_cast<uint64_t>(config.rng.seed), 0};
    GpuBackend gpu(config, model, batch, optimizer_spec(config), rng);
    CpuBackend cpu(model, batch, optimizer_spec(config), rng);
    // The same initial weights on both (the GPU step rounds them to bf16 for compute; the CPU keeps fp32).
    const TrainingState state = gpu.state();
    cpu.load_state(state);
    Evaluation evaluation(config, model, batch, {});
    const EvalResult on_gpu = evaluation.run(gpu);
    const EvalResult on_cpu = evaluation.run(cpu);
    const int64_t rows = config.validation.eval_iters * evaluation.batching().global_sequences;
    EXPECT_EQ(on_gpu.loss_tokens, static_cast<double>(rows * model.seq_length));
    EXPECT_EQ(on_cpu.loss_tokens, on_gpu.loss_tokens);
    EXPECT_EQ(on_gpu.batches, config.validation.eval_iters);
    EXPECT_NEAR(on_gpu.loss, on_cpu.loss, test::kBf16RelTol * on_cpu.loss)
        << "GPU " << on_gpu.loss << " vs CPU " << on_cpu.loss;
    if (!eval_batch.empty()) {
      const config::Config as_one = tiny_with({"validation.eval_interval=1", "model.cuda_graph_impl=none",
                                               "validation.eval_global_batch_size=12", "validation.eval_iters=1"});
      Evaluation one(as_one, model, batch, {});
      ASSERT_EQ(one.batching().padding_rows, 4);
      const EvalResult again = one.run(gpu);
      EXPECT_EQ(std::memcmp(&again.loss, &on_gpu.loss, sizeof(double)), 0) << again.loss << " vs " << on_gpu.loss;
    }
  }
}

// validation.skip_train and the test split through train(), on a corpus split 80,10,10: the checkpoint a GPU run
// saved at step 4 is evaluated to that run's own validation and test losses at step 4, bit for bit (as %.17g); and the
// losses are the same bits in the eager and the whole-step-graph modes (the test evaluation replays the evaluation
// graph the validation captured).
TEST_F(EvaluationGpu, SkipTrainAndTheTestSplitGiveTheTrainingRunsLossesBitForBit) {
  const std::filesystem::path dir =
      test::fresh_test_dir("evaluation_gpu_skip_train", std::filesystem::temp_directory_path());
  test::write_random_corpus((dir / "corpus").string(),
                            {.documents = 400, .min_tokens = 50, .max_tokens = 349, .vocab = 8000, .seed = 11});
  const auto text = [](double v) {
    char out[40];
    std::snprintf(out, sizeof out, "%.17g", v);
    return std::string(out);
  };
  std::vector<std::string> losses_by_mode;
  for (const std::vector<std::string>& mode :
       {std::vector<std::string>{"model.cuda_graph_impl=none"},
        {"model.cuda_graph_impl=local", "model.cuda_graph_scope=full_iteration"}}) {
    SCOPED_TRACE(mode[0]);
    const std::string ck = (dir / ("ck_" + std::to_string(mode.size()))).string();
    std::vector<std::string> common = mode;
    for (const std::string& o :
         {std::string("scheduler.lr_decay_iters=100"), std::string("dataset.mock=false"),
          "dataset.data_path=[" + (dir / "corpus").string() + "]", std::string("dataset.split=80,10,10")}) {
      common.push_back(o);
    }
    std::vector<std::string> training = common;
    for (const std::string& o : {std::string("train.train_iters=4"), std::string("validation.eval_interval=4"),
                                 std::string("checkpoint.save_interval=4"), "checkpoint.save=" + ck}) {
      training.push_back(o);
    }
    TrainOptions options;
    options.run_dir = (dir / ("run_" + std::to_string(mode.size()))).string();
    const TrainSummary trained = train(tiny_with(training), options);
    ASSERT_TRUE(std::isfinite(trained.last_val_loss));
    ASSERT_TRUE(std::isfinite(trained.test_loss));
    std::vector<std::string> evaluating = common;
    evaluating.push_back("validation.skip_train=true");
    evaluating.push_back("checkpoint.load=" + ck);
    const TrainSummary evaluated = train(tiny_with(evaluating), options);
    const nlohmann::json result = nlohmann::json::parse(test::read_file(evaluated.evaluation_path));
    EXPECT_EQ(result["iteration"], 4);
    EXPECT_EQ(result["graphed"], mode.size() > 1);
    EXPECT_EQ(text(result["val_loss"].get<double>()), text(trained.last_val_loss));
    EXPECT_EQ(text(result["test_loss"].get<double>()), text(trained.test_loss));
    losses_by_mode.push_back(text(trained.last_val_loss) + " " + text(trained.test_loss));
  }
  ASSERT_EQ(losses_by_mode.size(), 2u);
  EXPECT_EQ(losses_by_mode[0], losses_by_mode[1]) << "graphed evaluation differs from eager evaluation";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sg::train
